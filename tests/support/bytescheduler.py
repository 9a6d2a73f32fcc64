"""ByteScheduler's real sources for the tests: byteps' `bytescheduler` branch, from REPROKIT_BYTESCHEDULER_URL (a
local git repository, e.g. a bare clone of a copy of byteps, when GitHub is out of reach) or, unset, the package's
own PACKAGE_URL (github bytedance/byteps). No stand-in: their code is not copied into ours."""
from __future__ import annotations

import json
import os

from support.ckcli import REPO_ROOT, CkCli

PACKAGE = "bytescheduler-github"
TAGS = "lib,bytescheduler"


def source_url() -> str:
    given = os.environ.get("REPROKIT_BYTESCHEDULER_URL", "").strip()
    if given:
        return given
    meta = json.loads((REPO_ROOT / "package" / PACKAGE / ".cm" / "meta.json").read_text())
    return meta["customize"]["install_env"]["PACKAGE_URL"]


def install(ck: CkCli, *env: str):
    """`ck install package:bytescheduler-github` from source_url()."""
    return ck("install", f"package:{PACKAGE}", "--quiet", f"--env.PACKAGE_URL={source_url()}", *env, timeout=1500)


def registered(ck: CkCli) -> dict[str, dict]:
    """Env entries of ByteScheduler in ``ck``: uid -> their variables."""
    found = ck("search", "env", f"--tags={TAGS}", "--add_meta", "--out=json", check=True)
    return {e["data_uid"]: e["meta"]["env"] for e in json.loads(found.stdout)["lst"]}


def ensure_installed(ck: CkCli) -> dict:
    """ByteScheduler installed in ``ck`` (once per CK); its env entry's variables."""
    entries = registered(ck)
    if not entries:
        proc = install(ck)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        entries = registered(ck)
    [variables] = entries.values()
    return variables
