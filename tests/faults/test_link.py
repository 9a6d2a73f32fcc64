"""Lost and frozen roles of a run: a testbed host whose link goes down mid-run (the run fails within 15 s naming that
host, and the host's roles stop on their own: nobody can reach them to tear them down), and a remote worker stopped
by SIGSTOP under each remote launcher (named within 15 s)."""
import json
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from reprokit.run.procscan import run_processes
from support.faults import FaultFailure, expect, no_orphans, no_traceback
from support.oar import oar_job
from support.runs import long_run
from support.testbed import make_testbed, require_root_and_sshd, require_slurm

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


@contextmanager
def two_hosts(ck, launcher: str):
    """Two testbed hosts for ``launcher`` (ssh: this module's testbed; oarsh: an OAR job on a testbed of its own; srun:
    a Slurm testbed's allocation); yields (name, how ck runs there: popen's prefix and env and run options, the
    second host as messages name it)."""
    if launcher == "ssh":
        make_testbed(ck, NAME, 2)
        try:
            yield NAME, ((), None, (f"--target={NAME}",)), CUT_HOST
        finally:
            ck("testbed", f"cluster:{NAME}", "--down", timeout=60)
            ck("rm", f"machine:{NAME}", "--force")
        return
    name = {"oarsh": "sgoar", "srun": "sgslm"}[launcher]
    if launcher == "srun":
        require_slurm()
    else:
        require_root_and_sshd()
    proc = ck("testbed", f"cluster:{name}", "--hosts=2", *(["--scheduler=slurm"] if launcher == "srun" else []),
              timeout=120)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        state = Path(ck.env["CK_TOOLS"]) / f"testbed-{name}"
        if launcher == "srun":
            client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
            yield name, ((*client, "salloc", "-N2", "--time=15"), None, ()), "h2"
        else:
            with oar_job(name, state, 2) as (prefix, environ):
                yield name, (tuple(prefix), {**ck.env, **environ}, ()), "h2"
    finally:
        ck("testbed", f"cluster:{name}", "--down", timeout=60)


@pytest.mark.parametrize("launcher", ["ssh", "oarsh", "srun"])
def test_a_remote_worker_stopped_by_sigstop_is_named_within_15_s(ck, tmp_path, launcher):
    """A stopped remote role neither exits nor prints: its host's watchdog (the role wrapper over ssh, oarsh and
    srun alike) looks at its state at each heartbeat and says so, so the run fails naming that role, not all workers
    at RUN_TIMEOUT nor a stall of the workers' progress."""
    with two_hosts(ck, launcher) as (name, (prefix, env, options), host):
        with long_run(ck, tmp_path, *options, "--env.PROFILE=smoke", "--env.WORKER_THREADS=1", "--env.BATCH_SIZE=8",
                      watch_log="worker-1.log", new_session=True, prefix=prefix, env=env) as (run, run_id):
            [victim] = [p for p in processes_in(f"rk-{name}-h2", run_id) if _is_worker(p)]
            stopped_at = time.time()
            subprocess.run(["kill", "-STOP", str(victim)], check=True)
            try:
                output, _ = run.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                raise FaultFailure("hang", f"the run with a stopped worker was still running 120 s later "
                                           f"({launcher})") from None
            finally:
                subprocess.run(["kill", "-CONT", str(victim)], check=False)
        no_traceback(output)
        launch = json.loads((tmp_path / "launch.json").read_text())
        expect(launch["finished_at"] - stopped_at < 15, "hang",
               f"the stopped worker was noticed {launch['finished_at'] - stopped_at:.1f} s after SIGSTOP")
        expect(f"on {host} has been stopped (SIGSTOP or a tracer)" in launch["reason"]
               and launch["reason"].startswith("worker#"), "unclear",
               f"the failure does not name the stopped worker: {launch['reason']!r}")
        no_orphans(lambda: run_processes(run_id), 25, "the run's processes after the stopped worker")


def _is_worker(pid: int) -> bool:
    """The worker's own process (train.py run by the interpreter), not a wrapper whose command line names it."""
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return False
    return b"DMLC_ROLE=worker" in environ and any(a.endswith(b"train.py") for a in argv)

