"""The van check every role of our scripts runs before MXNet starts it (reprokit.wire.role_van)."""
import subprocess
import sys

import pytest

from reprokit.core.shipping import stage, wire_files
from reprokit.wire import role_van


def test_the_expected_van_comes_from_the_arguments():
    assert role_van.expected_van(["train.py", "--ps-van", "p3"]) == "p3"
    assert role_van.expected_van(["train.py", "--ps-van=p3"]) == "p3"
    assert role_van.expected_van(["train.py", "--variant", "baseline"]) == "zmq"


def test_a_role_with_the_runs_van_says_which(capsys):
    assert role_van.check(["x", "--ps-van", "p3"], {"DMLC_ROLE": "server", "DMLC_PS_VAN_TYPE": "p3"}) == "p3"
    assert role_van.check(["x"], {"DMLC_ROLE": "scheduler"}) == "zmq"
    assert capsys.readouterr().out == "ps-van: role=server van=p3\nps-van: role=scheduler van=zmq\n"


@pytest.mark.parametrize("argv, env", [(["--ps-van", "p3"], {}), ([], {"DMLC_PS_VAN_TYPE": "p3"})])
def test_a_role_without_the_runs_van_stops_before_mxnet_starts_it(argv, env, tmp_path):
    """Run as the role runs it: in a folder the package was shipped to, a process whose first act is the check,
    with one line and exit 3."""
    stage(wire_files(), tmp_path)
    code = "from reprokit.wire import role_van; role_van.check(); print('started')"
    proc = subprocess.run([sys.executable, "-c", code, *argv], env={"DMLC_ROLE": "server", **env},
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert proc.returncode == 3 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("ps-van: server runs the ") and "a job must not mix vans" in line
