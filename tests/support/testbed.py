"""A testbed cluster for tests: network namespaces with an sshd each, registered as a CK machine."""
import os
import shutil
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


def make_testbed(ck, name, hosts):
    require_root_and_sshd()
    proc = ck("testbed", f"cluster:{name}", f"--hosts={hosts}", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = Path(ck.env["CK_TOOLS"]) / f"testbed-{name}"
    ck("add", f"machine:{name}", "--type=cluster", f"--config_file={state / 'hosts.json'}", "--quiet", check=True)
    return state
