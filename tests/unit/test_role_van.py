"""The van check every role of our scripts runs before MXNet starts it (program/p3/role_van.py)."""
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).resolve().parents[2] / "program" / "p3"
sys.path.insert(0, str(PROGRAM))
import role_van  # noqa: E402


def test_the_expected_van_comes_from_the_arguments():
    assert role_van.expected_van(["train.py", "--ps-van", "p3"]) == "p3"
    assert role_van.expected_van(["train.py", "--ps-van=p3"]) == "p3"
    assert role_van.expected_van(["train.py", "--variant", "baseline"]) == "zmq"


def test_a_role_with_the_runs_van_says_which(capsys):
    assert role_van.check(["x", "--ps-van", "p3"], {"DMLC_ROLE": "server", "DMLC_PS_VAN_TYPE": "p3"}) == "p3"
    assert role_van.check(["x"], {"DMLC_ROLE": "scheduler"}) == "zmq"
    assert capsys.readouterr().out == "ps-van: role=server van=p3\nps-van: role=scheduler van=zmq\n"


@pytest.mark.parametrize("argv, env", [(["--ps-van", "p3"], {}), ([], {"DMLC_PS_VAN_TYPE": "p3"})])
def test_a_role_without_the_runs_van_stops_before_mxnet_starts_it(argv, env):
    """Run as the role runs it: a process whose first act is the check, with one line and exit 3."""
    code = f"import sys; sys.path.insert(0, {str(PROGRAM)!r}); import role_van; role_van.check(); print('started')"
    proc = subprocess.run([sys.executable, "-c", code, *argv], env={"DMLC_ROLE": "server", **env},
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 3 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("ps-van: server runs the ") and "a job must not mix vans" in line
