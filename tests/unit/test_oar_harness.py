"""The OAR job harness (tests/support/oar.py) without root: the oar home it prepares, and the order in which it
prepares it and starts the nodes' sshd.

The race it guards against is OAR's own: oarsh's cleanup of its job key copies (quoted below as Debian's oar-node
2.5.9 has it) removes, when the runtime folder holds no copy, the copy a concurrent oarsh has just written, whose
ssh then offers no key (``oar@h1: Permission denied (publickey)``, seen once in the fault rounds).
"""
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from support import oar

INSTALLED_OARSH = Path("/usr/lib/oar/oarsh")
CLEANUP = """\
    for f in $OAR_RUNTIME_DIRECTORY/oarsh.jobkey.*; do
        [ -e "/proc/${f#$OAR_RUNTIME_DIRECTORY/oarsh.jobkey.}" ] || rm -f $f
    done
"""
# oarsh's cleanup, with a `[` that first writes the key copy of a concurrent oarsh (this shell's pid: alive), as
# that oarsh would between the glob and the rm; prints what is left.
RACE = """\
OAR_RUNTIME_DIRECTORY=$1
[ () { : > "$OAR_RUNTIME_DIRECTORY/oarsh.jobkey.$$"; builtin [ "$@"; }
""" + CLEANUP + """\
ls -A "$OAR_RUNTIME_DIRECTORY"
"""


def test_the_quoted_cleanup_is_the_installed_oarsh_s():
    if not INSTALLED_OARSH.exists():
        pytest.skip(f"{INSTALLED_OARSH} not installed (Debian's oar-node)")
    assert CLEANUP in INSTALLED_OARSH.read_text()


def left_after_cleanup(folder: Path) -> list[str]:
    proc = subprocess.run(["bash", "-c", RACE, "bash", str(folder)], capture_output=True, text=True, check=True)
    return proc.stdout.split()


def test_without_a_copy_in_the_runtime_folder_oarsh_removes_a_concurrent_oarsh_s_key(tmp_path):
    assert left_after_cleanup(tmp_path) == []  # the concurrent oarsh's ssh would find no key


def test_the_runtime_guard_keeps_a_concurrent_oarsh_s_key(tmp_path):
    (tmp_path / oar.RUNTIME_GUARD).touch()
    left = left_after_cleanup(tmp_path)
    assert oar.RUNTIME_GUARD in left and len(left) == 2, left


def need_keygen():
    if not shutil.which("ssh-keygen"):
        pytest.skip("needs ssh-keygen")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_home_has_the_modes_strictmodes_wants_whatever_the_umask(tmp_path):
    need_keygen()
    old = os.umask(0o002)
    try:
        home = oar.prepare_home(tmp_path, 7, owner=None)
    finally:
        os.umask(old)
    ssh = home / ".ssh"
    assert (mode(home), mode(ssh)) == (0o755, 0o700)
    assert (mode(ssh / "authorized_keys"), mode(ssh / "known_hosts"), mode(home / oar.RUNTIME_GUARD)) == \
        (0o600, 0o644, 0o600)
    assert sorted(p.name for p in ssh.iterdir()) == ["authorized_keys", "known_hosts"]  # no partial file left
    public = (tmp_path / "job_key.pub").read_text()
    assert (ssh / "authorized_keys").read_text() == \
        f'environment="OAR_CPUSET=undef",environment="OAR_JOB_USER=root" {public}'


def test_every_sshd_starts_after_the_home_is_complete_and_owned(tmp_path, monkeypatch):
    need_keygen()
    chowned: set[Path] = set()
    started: list[dict] = []
    killed: list[int] = []
    real_run = subprocess.run

    def run(argv, **kwargs):
        if "/usr/sbin/sshd" not in argv:
            return real_run(argv, **kwargs)
        home = tmp_path / "state" / "oar" / "home"
        ssh = home / ".ssh"
        started.append({"authorized_keys": ssh / "authorized_keys" in chowned and mode(ssh / "authorized_keys"),
                        "known_hosts": ssh / "known_hosts" in chowned and mode(ssh / "known_hosts"),
                        "ssh": ssh in chowned and mode(ssh), "home": home in chowned and mode(home),
                        "guard": (home / oar.RUNTIME_GUARD).exists()})
        config = Path(argv[argv.index("-f") + 1])
        pid_file = Path(next(line.split()[1] for line in config.read_text().splitlines()
                             if line.startswith("PidFile ")))
        pid_file.write_text(f"{900000 + len(started)}\n")
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(oar, "require_oarsh", lambda: None)
    monkeypatch.setattr(oar, "NETNS_ETC", tmp_path / "netns")
    monkeypatch.setattr(oar.shutil, "chown", lambda path, user, group: chowned.add(Path(path)))
    monkeypatch.setattr(oar.subprocess, "run", run)
    monkeypatch.setattr(oar.os, "kill", lambda pid, sig: killed.append(pid))
    (tmp_path / "state").mkdir()
    with oar.oar_job("tb", tmp_path / "state", 2) as (_, environ):
        assert Path(environ["OAR_JOB_KEY_FILE"]).exists()
    expected = {"authorized_keys": 0o600, "known_hosts": 0o644, "ssh": 0o700, "home": 0o755, "guard": True}
    assert started == [expected, expected]
    assert killed == [900001, 900002]  # the pids the sshd wrote
