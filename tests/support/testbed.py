"""A testbed cluster for tests: network namespaces with an sshd each, registered as a CK machine."""
import json
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest


def require_root_and_sshd():
    missing = []
    if not (shutil.which("sshd") or os.path.exists("/usr/sbin/sshd")):
        missing.append("sshd (Debian's openssh-server)")
    if missing:
        message = f"testbed tests need {' and '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI runs as root and `make test` installs openssh-server")
        pytest.skip(message)


def make_testbed(ck, name, hosts, *options):
    """``options``: more `ck testbed` options, e.g. "--no_sftp=3"."""
    require_root_and_sshd()
    proc = ck("testbed", f"cluster:{name}", f"--hosts={hosts}", *options, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = Path(ck.env["CK_TOOLS"]) / f"testbed-{name}"
    ck("add", f"machine:{name}", "--type=cluster", f"--config_file={state / 'hosts.json'}", "--quiet", check=True)
    return state


def add_machine_variant(ck, state, machine, tmp_path, **host_changes):
    """Register machine ``machine`` on the same testbed with some hosts' entries changed: {index: {key: value}}
    given as h1={...}, h2={...}."""
    hosts = json.loads((state / "hosts.json").read_text())
    for key, changes in host_changes.items():
        hosts["hosts"][int(key[1:]) - 1].update(changes)
    path = tmp_path / f"{machine}-hosts.json"
    path.write_text(json.dumps(hosts))
    ck("rm", f"machine:{machine}", "--force")
    ck("add", f"machine:{machine}", "--type=cluster", f"--config_file={path}", "--quiet", check=True)


def in_host(state, index, *argv, check=True):
    """Run ``argv`` in testbed host ``index``'s mount and network namespaces (those of its sshd, so of its sessions)."""
    pid = (state / f"h{index}" / "sshd.pid").read_text().strip()
    return subprocess.run(["nsenter", "-t", pid, "-m", "-n", *argv], capture_output=True, text=True, timeout=30,
                          check=check)


@contextmanager
def host_mount(state, index, target, options):
    """A tmpfs mounted over ``target`` in host ``index``'s mount namespace only; the rest of the machine never sees it."""
    in_host(state, index, "mkdir", "-p", target)
    in_host(state, index, "mount", "-t", "tmpfs", "-o", options, "tmpfs", target)
    try:
        yield
    finally:
        in_host(state, index, "umount", target, check=False)


SLURM_TOOLS = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/srun", "/usr/sbin/munged")


def require_slurm():
    """Debian's slurmctld, slurmd, slurm-client and munge: `make test` installs them as root."""
    require_root_and_sshd()
    missing = [tool for tool in SLURM_TOOLS if not os.path.exists(tool)]
    if missing:
        message = f"Slurm testbed tests need {', '.join(missing)} (Debian's slurmctld, slurmd, slurm-client, munge)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI runs as root and `make test` installs them")
        pytest.skip(message)


def slurm(state, *argv, timeout=60, check=True):
    """A Slurm client command (sinfo, srun, sbatch, ...) on the Slurm testbed in ``state``, as testbed.json says."""
    client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
    return subprocess.run([*client, *argv], capture_output=True, text=True, timeout=timeout, check=check,
                          stdin=subprocess.DEVNULL, cwd=state)
