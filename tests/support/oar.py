"""The node side of an OAR job on the namespace testbed, for the real ``oarsh`` of Debian's oar-node 2.5.9.

What an OAR server and its job_resource_manager would set up for a job submitted with a job key (``oarsub -k``),
done here by hand (no OAR server, no database):

* an sshd per host on port 6667 (``OPENSSH_CMD="/usr/bin/ssh -p 6667"`` in the package's /etc/oar/oar.conf) with
  the package's /etc/oar/sshd_config settings (``AllowUsers oar``, ``PermitUserEnvironment yes``, ``AcceptEnv
  OAR_CPUSET ...``) and one host key for every node, as OAR's setup shares one;
* the oar user's home (/var/lib/oar) as OAR leaves it on a node during the job: ``.ssh/authorized_keys`` with the
  job's public key under ``environment="OAR_CPUSET=undef",environment="OAR_JOB_USER=root"`` (OAR::Tools's form;
  ``undef``: no cpuset), and ``.ssh/known_hosts`` with the nodes' host key (oarsh forces that file), written with
  sshd's StrictModes modes before any sshd starts, and a placeholder that keeps oarsh's cleanup of its job key
  copies from removing a concurrent oarsh's copy (``prepare_home``);
* the job's environment for the command run "in the job" on its first node: OAR_JOB_ID, OAR_NODEFILE (each node
  once per core) and OAR_JOB_KEY_FILE (the job's private key).

The oar home is a folder of the testbed's state bind-mounted over /var/lib/oar inside the testbed's namespaces
only (``ip netns exec`` gives each command its own mount namespace): the machine's own /var/lib/oar, /etc/oar and
/etc/ssh are never changed. Node names h1..hN resolve inside the namespaces through /etc/netns/rk-NAME-*/hosts,
which the testbed's teardown removes.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

OAR_PACKAGE_FILES = ("/usr/bin/oarsh", "/usr/lib/oar/oarsh", "/usr/lib/oar/oarsh_shell",
                     "/usr/lib/oar/oardodo/oardodo", "/etc/oar/oar.conf")
OAR_HOME = "/var/lib/oar"
PORT = 6667
NETNS_ETC = Path("/etc/netns")
# A job key copy oarsh never removes: PID 1 always exists, so oarsh's cleanup keeps it (see prepare_home).
RUNTIME_GUARD = "oarsh.jobkey.1"


def require_oarsh():
    """Debian's oar-node (oarsh, oarsh_shell, oardodo, /etc/oar/oar.conf): `make test` installs it as root."""
    missing = [path for path in OAR_PACKAGE_FILES if not os.path.exists(path)]
    if missing:
        message = f"oarsh tests need {', '.join(missing)} (Debian's oar-node)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI runs as root and `make test` installs oar-node")
        pytest.skip(message)


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)


def _write(path: Path, text: str, mode: int) -> None:
    """``text`` into ``path`` with ``mode`` whatever the umask, replaced at once (renamed into place): sshd, whose
    StrictModes refuses a group- or world-writable authorized_keys, never sees it half-written or too open."""
    part = path.with_name(f".{path.name}.part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    part.chmod(mode)  # O_CREAT's mode is masked by the umask
    part.replace(path)


def prepare_home(folder: Path, job_id: int, owner: str | None = "oar") -> Path:
    """The oar user's home as OAR leaves it on a node during the job (``folder``/home, mounted over /var/lib/oar):
    the job's public key in .ssh/authorized_keys, the nodes' host key in .ssh/known_hosts, ``owner``'s, with the
    modes sshd's StrictModes wants; the host key and the job key in ``folder``. All of it before any sshd starts.

    Also RUNTIME_GUARD, a placeholder in oarsh's runtime folder, which /etc/oar/oar.conf sets to /var/lib/oar
    (OAR_RUNTIME_DIRECTORY), so here this shared home. With a job key oarsh first removes the copies of the key it
    left there for processes that have ended, then writes its own copy (oarsh.jobkey.$$) and runs ``ssh -i`` on it:

        for f in $OAR_RUNTIME_DIRECTORY/oarsh.jobkey.*; do
            [ -e "/proc/${f#$OAR_RUNTIME_DIRECTORY/oarsh.jobkey.}" ] || rm -f $f
        done

    When that folder holds no copy, the glob stays the pattern itself and ``rm -f $f`` (unquoted) expands it again:
    a copy that a concurrent oarsh wrote in between is removed before its ssh reads it, and that ssh offers no key
    (``oar@h1: Permission denied (publickey)``, now and then in the first concurrent oarsh of a fresh job: the
    launcher's probe, one oarsh per node at once). With the placeholder the glob always matches a file, whose
    process (1) exists, so every ``rm`` names a copy whose process has ended."""
    home = folder / "home"
    (home / ".ssh").mkdir(parents=True)
    for dotfile in Path(OAR_HOME).glob(".bash*"):
        shutil.copy2(dotfile, home / dotfile.name)
    _keygen(folder / "oar_ssh_host_key", "oar-node")
    _keygen(folder / "job_key", f"oar-job-{job_id}")
    _write(home / ".ssh" / "authorized_keys",
           f'environment="OAR_CPUSET=undef",environment="OAR_JOB_USER=root" {(folder / "job_key.pub").read_text()}',
           0o600)
    key_type, key = (folder / "oar_ssh_host_key.pub").read_text().split()[:2]
    _write(home / ".ssh" / "known_hosts", f"* {key_type} {key}\n", 0o644)
    _write(home / RUNTIME_GUARD, "", 0o600)
    if owner is not None:
        for path in (home, home / ".ssh", *(home / ".ssh").iterdir(), home / RUNTIME_GUARD, *home.glob(".bash*")):
            shutil.chown(path, owner, owner)
    home.chmod(0o755)
    (home / ".ssh").chmod(0o700)
    return home


def _read_pid(pid_file: Path, timeout: float = 10) -> int:
    """The pid a just started sshd wrote (it does after binding its port); a file seen before its pid is in it is
    read again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(pid_file.read_text())
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def _sshd_config(folder: Path, index: int) -> Path:
    config = folder / f"sshd-h{index}.conf"
    config.write_text("\n".join([
        f"ListenAddress 10.77.0.{index}",
        f"Port {PORT}",
        f"HostKey {folder / 'oar_ssh_host_key'}",
        f"PidFile {folder / f'sshd-h{index}.pid'}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        "UsePAM no",
        "StrictModes yes",
        "AcceptEnv OAR_CPUSET OAR_USER_CPUSET OAR_USER_GPUDEVICE OAR_JOB_USER",
        "PermitUserEnvironment yes",
        "AllowUsers oar",
        "MaxStartups 1024",
        "MaxSessions 64",
        "ClientAliveInterval 3",
        "ClientAliveCountMax 3",
        "LogLevel VERBOSE",  # a refused key says why (seen once in CI: oar@h1: Permission denied (publickey))
        "",
    ]))
    return config


def in_namespace(name: str, index: int, folder: Path, argv: list[str]) -> list[str]:
    """``argv`` in testbed host ``index``'s namespace with the job's oar home mounted over /var/lib/oar."""
    script = f"mount --bind {shlex.quote(str(folder / 'home'))} {OAR_HOME} && exec \"$@\""
    return ["ip", "netns", "exec", f"rk-{name}-h{index}", "sh", "-c", script, "sh", *argv]


@contextmanager
def oar_job(name: str, state: Path, hosts: int, job_id: int = 4242, cores: int = 2):
    """The node side of an OAR job over the testbed ``name`` (state folder ``state``); yields (prefix, environ):
    ``[*prefix, COMMAND...]`` runs COMMAND in the job on its first node with ``environ`` as its environment's
    additions (OAR_JOB_ID, OAR_NODEFILE, OAR_JOB_KEY_FILE)."""
    require_oarsh()
    folder = state / "oar"
    folder.mkdir()
    pids: list[int] = []
    try:
        prepare_home(folder, job_id)
        nodes = [f"h{i}" for i in range(1, hosts + 1)]
        for i in range(1, hosts + 1):
            hosts_file = NETNS_ETC / f"rk-{name}-h{i}" / "hosts"
            hosts_file.parent.mkdir(parents=True, exist_ok=True)
            hosts_file.write_text("127.0.0.1 localhost\n" + "".join(f"10.77.0.{j} h{j}\n" for j in range(1, hosts + 1)))
            config = _sshd_config(folder, i)
            subprocess.run(in_namespace(name, i, folder, ["/usr/sbin/sshd", "-f", str(config), "-E",
                                                          str(folder / f"sshd-h{i}.log")]), check=True, timeout=30)
            pids.append(_read_pid(folder / f"sshd-h{i}.pid"))
        nodefile = folder / "nodefile"
        nodefile.write_text("".join(f"{node}\n" * cores for node in nodes))
        environ = {"OAR_JOB_ID": str(job_id), "OAR_JOBID": str(job_id), "OAR_NODEFILE": str(nodefile),
                   "OAR_NODE_FILE": str(nodefile), "OAR_JOB_KEY_FILE": str(folder / "job_key")}
        try:
            yield in_namespace(name, 1, folder, []), environ
        except BaseException:
            # A test that failed in the job shows why its nodes' sshd refused or dropped a session (captured stderr).
            for log in sorted(folder.glob("sshd-h*.log")):
                print(f"{log.name}: {log.read_text(errors='replace')[-1500:]}", file=sys.stderr)
            raise
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
