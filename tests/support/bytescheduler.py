"""ByteScheduler's real sources for the tests: byteps' `bytescheduler` branch, from REPROKIT_BYTESCHEDULER_URL (a
local git repository, e.g. a bare clone of a copy of byteps, when GitHub is out of reach), else the copy of
bytedance/byteps that this project's machines keep (MIRROR). Without either, the tests that need them are skipped,
saying why: GitHub is out of reach here, and their code is not copied into ours (no stand-in)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.ckcli import CkCli

PACKAGE = "bytescheduler-github"
TAGS = "lib,bytescheduler"


MIRROR = Path("/work/.mirror/bytedance+byteps/repo")  # a git repository holding the bytescheduler branch


def source_url() -> str:
    given = os.environ.get("REPROKIT_BYTESCHEDULER_URL", "").strip()
    if given:
        return given
    if (MIRROR / "HEAD").is_file() or (MIRROR / ".git").is_dir():
        return str(MIRROR)
    pytest.skip(f"ByteScheduler's sources are out of reach: set REPROKIT_BYTESCHEDULER_URL to a local git repository "
                f"of github bytedance/byteps (branch bytescheduler); {MIRROR} is not one")


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
