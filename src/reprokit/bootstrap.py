"""Prepare CK for this repository: register it, and install what the embedded default needs
(the MXNet engine, and Sockeye for it).

    python -m reprokit.bootstrap

Uses the ck CLI itself, so what it does is what a user would type. Honours
CK_REPOS and CK_TOOLS like ck does. Idempotent: a second call reuses the
registered repository and the installed engine.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ALIAS = "ck-sysml19-p3"
from reprokit.paths import REPO_ROOT
ENGINE_TAGS = "lib,mxnet"
ENGINE_PACKAGE = "lib-mxnet"
SOCKEYE_TAGS = "lib,sockeye"
SOCKEYE_PACKAGE = "lib-sockeye"


def ck(*args: str, capture: bool = True, env: dict | None = None, timeout: float = 1800,
       check: bool = False) -> subprocess.CompletedProcess:
    """The ck CLI of this interpreter's environment, stdin closed; ``check`` exits with ck's output on failure."""
    exe = Path(sys.executable).with_name("ck")
    proc = subprocess.run([str(exe), *args], stdin=subprocess.DEVNULL, text=True, env=env,
                          capture_output=capture, timeout=timeout)
    if check and proc.returncode != 0:
        raise SystemExit(f"ck {' '.join(args)} failed:\n{(proc.stdout or '')[-2000:]}{(proc.stderr or '')[-2000:]}")
    return proc


def registered_path() -> Path | None:
    out = ck("where", f"repo:{REPO_ALIAS}")
    if out.returncode != 0:
        return None
    lines = out.stdout.strip().splitlines()
    return Path(lines[-1]).resolve() if lines else None


def ensure_repo() -> None:
    current = registered_path()
    if current == REPO_ROOT:
        print(f"bootstrap: CK repository {REPO_ALIAS} already registered at {REPO_ROOT}")
        return
    if current is not None:
        # Registered from another checkout: point CK at this one (unregisters only, deletes nothing).
        print(f"bootstrap: re-registering {REPO_ALIAS} (was {current})")
        ck("rm", f"repo:{REPO_ALIAS}", "--force")
    out = ck("import", "repo", f"--path={REPO_ROOT}", "--quiet")
    if out.returncode != 0 or registered_path() != REPO_ROOT:
        raise SystemExit(f"bootstrap: could not register {REPO_ROOT} with CK: {(out.stdout + out.stderr).strip()[-300:]}")
    print(f"bootstrap: registered CK repository {REPO_ALIAS} at {REPO_ROOT}")


def installed(tags: str) -> bool:
    out = ck("search", "env", f"--tags={tags}", "--out=json")
    if out.returncode != 0:
        return False
    try:
        return bool(json.loads(out.stdout).get("lst"))
    except ValueError:
        return False


def ensure_installed(package: str, tags: str, what: str) -> None:
    if installed(tags):
        print(f"bootstrap: {what} already installed (ck show env --tags={tags})")
        return
    print(f"bootstrap: installing {what}: ck install package:{package} --quiet")
    if ck("install", f"package:{package}", "--quiet", capture=False).returncode != 0:
        raise SystemExit(f"bootstrap: ck install package:{package} failed (see its output above)")


def isolated_ck(prefix: str) -> tuple[Path, dict]:
    """A temporary folder with its own CK_REPOS/CK_TOOLS, bootstrapped (for benchmarks); returns it and the env."""
    import tempfile

    work = Path(tempfile.mkdtemp(prefix=prefix))
    env = {**os.environ, "CK_REPOS": str(work / "repos"), "CK_TOOLS": str(work / "tools")}
    subprocess.run([sys.executable, "-m", "reprokit.bootstrap"], env=env, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL)
    return work, env


def main() -> int:
    for var in ("CK_REPOS", "CK_TOOLS"):
        if os.environ.get(var):
            print(f"bootstrap: {var}={os.environ[var]}")
    ensure_repo()
    ensure_installed(ENGINE_PACKAGE, ENGINE_TAGS, "the MXNet engine")
    ensure_installed(SOCKEYE_PACKAGE, SOCKEYE_TAGS, "Sockeye for the engine (cmd_key sockeye)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
