"""A testbed host whose link goes down mid-run: the run fails within 15 s naming that host, and the host's roles
stop on their own (nobody can reach them to tear them down)."""
import json
import subprocess
import time

import pytest

from reprokit.run.procscan import run_processes
from support.faults import expect, no_orphans, no_traceback
from support.runs import long_run
from support.testbed import make_testbed

pytestmark = [pytest.mark.root, pytest.mark.fault("link")]
NAME = "sglink"  # this test's own testbed: rk-sglink-h1, rk-sglink-h2
CUT_HOST, CUT_NS = "10.77.0.2", f"rk-{NAME}-h2"


@pytest.fixture
def testbed2(ck):
    make_testbed(ck, NAME, 2)
    yield NAME
    ck("testbed", f"cluster:{NAME}", "--down", timeout=60)
    ck("rm", f"machine:{NAME}", "--force")


def processes_in(namespace: str, run_id: str) -> list[int]:
    """The run's processes living in that host's network namespace."""
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
    return sorted(set(map(int, listed)) & set(run_processes(run_id)))


def test_a_host_whose_link_goes_down_is_named_within_15_s_and_its_roles_stop(ck, testbed2, tmp_path):
    with long_run(ck, tmp_path, f"--target={testbed2}", "--env.PROFILE=smoke", "--env.WORKER_THREADS=1",
                  "--env.BATCH_SIZE=8") as (run, run_id):
        assert processes_in(CUT_NS, run_id), "no role of the run on the host to cut"
        cut_at = time.time()
        subprocess.run(["ip", "netns", "exec", CUT_NS, "ip", "link", "set", "eth0", "down"], check=True)
        output, _ = run.communicate(timeout=120)
    no_traceback(output)
    launch = json.loads((tmp_path / "launch.json").read_text())
    expect(launch["finished_at"] - cut_at < 15, "hang",
           f"the lost host was noticed {launch['finished_at'] - cut_at:.1f} s after its link went down")
    expect(f"on {CUT_HOST} lost its SSH connection" in launch["reason"], "unclear",
           f"the failure does not name the lost host: {launch['reason']!r}")
    assert f"p3: FAILED: {launch['reason']}" in output
    # Nobody can reach the host to tear it down: its roles must stop by themselves (sshd drops the silent
    # client and their watchdogs hear no heartbeat), SIGTERM then SIGKILL.
    no_orphans(lambda: processes_in(CUT_NS, run_id), 25, f"roles on {CUT_HOST} after its link went down")
    no_orphans(lambda: run_processes(run_id), 5, "the run's other processes")


def test_a_remote_worker_stopped_by_sigstop_is_named_within_15_s(ck, testbed2, tmp_path):
    """A stopped remote role neither exits nor prints: its host's watchdog looks at its state at each heartbeat
    and says so, so the run fails naming that role, not all workers at RUN_TIMEOUT."""
    with long_run(ck, tmp_path, f"--target={testbed2}", "--env.PROFILE=smoke", "--env.WORKER_THREADS=1",
                  "--env.BATCH_SIZE=8", watch_log="worker-1.log") as (run, run_id):
        [victim] = [p for p in processes_in(CUT_NS, run_id) if _is_worker(p)]
        stopped_at = time.time()
        subprocess.run(["kill", "-STOP", str(victim)], check=True)
        try:
            output, _ = run.communicate(timeout=120)
        finally:
            subprocess.run(["kill", "-CONT", str(victim)], check=False)
    no_traceback(output)
    launch = json.loads((tmp_path / "launch.json").read_text())
    expect(launch["finished_at"] - stopped_at < 15, "hang",
           f"the stopped worker was noticed {launch['finished_at'] - stopped_at:.1f} s after SIGSTOP")
    expect(f"on {CUT_HOST} has been stopped (SIGSTOP or a tracer)" in launch["reason"]
           and launch["reason"].startswith("worker#"), "unclear",
           f"the failure does not name the stopped worker: {launch['reason']!r}")
    no_orphans(lambda: run_processes(run_id), 25, "the run's processes after the stopped worker")


def _is_worker(pid: int) -> bool:
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False
    return b"DMLC_ROLE=worker" in environ and b"train.py" in cmdline
