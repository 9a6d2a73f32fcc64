"""Prepare CK for this repository: register it, and install what the embedded default needs
(the MXNet engine, and Sockeye for it).

    python -m reprokit.bootstrap              # register, then install the engine and Sockeye
    python -m reprokit.bootstrap --repo-only  # register only (make setup)

Uses the ck CLI itself, so what it does is what a user would type. Honours
CK_REPOS and CK_TOOLS like ck does. Idempotent: a second call reuses the
registered repository and the installed engine.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from reprokit.core.paths import REPO_ROOT

REPO_ALIAS = "reproduce-sysml19-paper-p3"  # the original workflow's: `ck pull repo:<it>` and `ck pull all` find us
OLD_REPO_ALIASES = ("ck-sysml19-p3",)  # what earlier versions registered; ensure_repo moves them to REPO_ALIAS
ENGINE_TAGS = "lib,mxnet"
ENGINE_PACKAGE = "lib-mxnet"
SOCKEYE_TAGS = "lib,sockeye"
SOCKEYE_PACKAGE = "lib-sockeye"


def ck(*args: str, capture: bool = True, env: dict[str, Any] | None = None, timeout: float = 1800,
       check: bool = False) -> subprocess.CompletedProcess[str]:
    """The ck CLI of this interpreter's environment, stdin closed; ``check`` exits with ck's output on failure."""
    exe = Path(sys.executable).with_name("ck")
    proc = subprocess.run([str(exe), *args], stdin=subprocess.DEVNULL, text=True, env=env,
                          capture_output=capture, timeout=timeout)
    if check and proc.returncode != 0:
        raise SystemExit(f"ck {' '.join(args)} failed:\n{(proc.stdout or '')[-2000:]}{(proc.stderr or '')[-2000:]}")
    return proc


def registered_path(alias: str = REPO_ALIAS) -> Path | None:
    out = ck("where", f"repo:{alias}")
    if out.returncode != 0:
        return None
    lines = out.stdout.strip().splitlines()
    return Path(lines[-1]).resolve() if lines else None


def unregister(alias: str) -> None:
    """Drop CK's registration of ``alias`` (its files stay where they are)."""
    out = ck("rm", f"repo:{alias}", "--force")
    if out.returncode != 0:
        raise SystemExit(f"bootstrap: could not unregister repo:{alias}: {(out.stdout + out.stderr).strip()[-300:]}")


def git_upstream(root: Path) -> str | None:
    """Where `git pull` in ``root`` fetches from, or None if that would fail (no git clone, no upstream branch)."""
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(root), *args], stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None

    branch = git("symbolic-ref", "--quiet", "--short", "HEAD")
    remote = git("config", "--get", f"branch.{branch}.remote") if branch else None
    if not (remote and git("config", "--get", f"branch.{branch}.merge")):
        return None
    return git("config", "--get", f"remote.{remote}.url") or remote


def ensure_pull_updates_it() -> None:
    """Record the clone as shared through git, so `ck pull repo:ALIAS` and `ck pull all` run `git pull` in it.

    Only where `git pull` can work (a clone with an upstream branch): elsewhere stock
    CK's pull would fail and then prompt. Written into CK's registration only
    (`ck update repo` would also rewrite the tracked .ckr.json).
    """
    loaded = ck("load", f"repo:{REPO_ALIAS}", "--out=json")
    meta = json.loads(loaded.stdout).get("dict", {}) if loaded.returncode == 0 else {}
    upstream = git_upstream(REPO_ROOT)
    wanted = {**{k: v for k, v in meta.items() if k not in ("shared", "url")},
              **({"shared": "git", "url": upstream} if upstream else {})}
    if wanted != meta:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as request:
            json.dump({"common_func": "yes", "substitute": "yes", "dict": wanted}, request)
        try:
            ck("update", f"repo:{REPO_ALIAS}", f"@{request.name}", check=True)
        finally:
            os.unlink(request.name)
    print(f"bootstrap: ck pull repo:{REPO_ALIAS} " + (f"runs git pull here (from {upstream})" if upstream else
          "cannot update this copy (not a git clone with an upstream branch); update it yourself"))


def ensure_repo() -> None:
    for old in OLD_REPO_ALIASES:
        if (path := registered_path(old)) is not None:
            print(f"bootstrap: this repository's CK alias is now {REPO_ALIAS}, the original workflow's; "
                  f"unregistering the old alias {old} (at {path}; nothing is deleted)")
            unregister(old)
    current = registered_path()
    if current == REPO_ROOT:
        print(f"bootstrap: CK repository {REPO_ALIAS} already registered at {REPO_ROOT}")
    else:
        if current is not None:
            # Registered from another checkout (or the original workflow's clone): point CK at this one.
            print(f"bootstrap: re-registering {REPO_ALIAS} (was {current})")
            unregister(REPO_ALIAS)
        out = ck("import", "repo", f"--path={REPO_ROOT}", "--quiet")
        if out.returncode != 0 or registered_path() != REPO_ROOT:
            raise SystemExit(f"bootstrap: could not register {REPO_ROOT} with CK: "
                             f"{(out.stdout + out.stderr).strip()[-300:]}")
        print(f"bootstrap: registered CK repository {REPO_ALIAS} at {REPO_ROOT}")
    ensure_pull_updates_it()


# CK's kernel switches for its failure boxes, which stock CK prints after any program's and any package's failure
# (asking to report to CK's trackers and to this repository's path); ours end with their own one line instead.
FAILURE_BOX_SWITCHES = ("skip_message_when_program_fails", "skip_message_when_package_fails")


def quiet_failure_box() -> None:
    """Set CK's switches in the CK_REPOS we set up, each unless its user has set it either way already."""
    loaded = ck("load", "kernel:default", "--out=json")
    meta = json.loads(loaded.stdout).get("dict", {}) if loaded.returncode == 0 else {}
    for switch in FAILURE_BOX_SWITCHES:
        if meta.get(switch, "") != "":
            print(f"bootstrap: CK's {switch} is {meta[switch]!r} already; left as it is")
            continue
        ck("set", "kernel", f"--var.{switch}=yes", check=True)
        what = switch.removeprefix("skip_message_when_").removesuffix("_fails")
        print(f"bootstrap: CK's failure box after a failed {what} is off in this CK_REPOS "
              f"(ck set kernel --var.{switch}=no turns it back on)")


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


def isolated_ck(prefix: str, work: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """A folder with its own CK_REPOS/CK_TOOLS, bootstrapped (for benchmarks): ``work`` (reused as it is, e.g. with
    the authors' builds registered), else a new temporary one; returns it and the env."""
    work = Path(tempfile.mkdtemp(prefix=prefix)) if work is None else work
    env = {**os.environ, "CK_REPOS": str(work / "repos"), "CK_TOOLS": str(work / "tools")}
    subprocess.run([sys.executable, "-m", "reprokit.bootstrap"], env=env, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL)
    return work, env


def exit_cleanly_on_sigterm() -> None:
    """Make SIGTERM (``kill``, a CI timeout) end this process as SystemExit(143), so its ``finally`` blocks run: by
    default Python dies at once, leaving a testbed up and a running ck child to itself."""
    def terminate(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, terminate)


def testbed_up(name: str, hosts: int, cpus_per_host: int | None, env: dict[str, Any], link_sharing: str | None = None,
               tcp: str | None = None) -> None:
    """``ck testbed cluster:NAME --hosts=N`` (for benchmarks), each host pinned to ``cpus_per_host`` CPUs of its own
    when given (else the hosts share every CPU), its shaped links shared as ``link_sharing`` says (else as ck
    testbed's default), its TCP congestion control ``tcp`` (else the machine's). From here on
    SIGTERM runs the caller's ``finally``, which takes the testbed down."""
    exit_cleanly_on_sigterm()
    pinned = [f"--cpus_per_host={cpus_per_host}"] if cpus_per_host else []
    sharing = [f"--link_sharing={link_sharing}"] if link_sharing else []
    congestion = [f"--tcp={tcp}"] if tcp else []
    ck("testbed", f"cluster:{name}", f"--hosts={hosts}", *pinned, *sharing, *congestion, env=env, check=True)


CPUS_PER_HOST_HELP = ("pin each host to that many CPUs of its own (ck testbed --cpus_per_host); default: the hosts "
                      "share every CPU")
TCP_HELP = ("every host's TCP congestion control (ck testbed --tcp), e.g. cubic, Linux's default; default: the "
            "machine's")
LINK_SHARING_HELP = ("how each host's shaped egress is shared (ck testbed --link_sharing): fifo, one queue (default), "
                     "or fair, an equal share per other host")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--repo-only"]):
        print("usage: python -m reprokit.bootstrap [--repo-only]", file=sys.stderr)
        return 2
    for var in ("CK_REPOS", "CK_TOOLS"):
        if os.environ.get(var):
            print(f"bootstrap: {var}={os.environ[var]}")
    ensure_repo()
    quiet_failure_box()
    if args == ["--repo-only"]:
        return 0
    ensure_installed(ENGINE_PACKAGE, ENGINE_TAGS, "the MXNet engine")
    ensure_installed(SOCKEYE_PACKAGE, SOCKEYE_TAGS, "Sockeye for the engine (cmd_key sockeye)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
