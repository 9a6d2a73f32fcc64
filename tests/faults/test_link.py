"""Lost and frozen controllers of a run: a testbed host whose link goes down mid-run (the run fails within 15 s naming
that host, and the host's roles stop on their own: nobody can reach them to tear them down), a remote worker stopped
by SIGSTOP under each remote launcher (named within 15 s), and slurmctld killed while `ck run --submit` follows its
job (said at once, the command ends within its bound). The last two record the seconds from the fault to the
command's exit (``fault_to_exit_s``, for benchmarks/fault_totals.py)."""
import json
import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from reprokit.cluster.slurm import CANCEL_WAIT_S
from reprokit.run.procscan import kill_run_processes, run_processes
from support.faults import FaultFailure, expect, finishes, no_orphans, no_traceback, one_clear_line
from support.oar import oar_job
from support.runs import long_run, wait_for
from support.testbed import make_testbed, require_root_and_sshd, require_slurm

pytestmark = [pytest.mark.root, pytest.mark.fault("link")]
NAME = "sglink"  # this test's own testbed: rk-sglink-h1, rk-sglink-h2
CUT_HOST, CUT_NS = "10.77.0.2", f"rk-{NAME}-h2"
SILENCE_S = 10  # the lost controller's machine: slurm.unanswered_timeout, the silence tolerated before giving up


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
def test_a_remote_worker_stopped_by_sigstop_is_named_within_15_s(ck, tmp_path, launcher, record_property):
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
                exited_at = time.time()
            except subprocess.TimeoutExpired:
                raise FaultFailure("hang", f"the run with a stopped worker was still running 120 s later "
                                           f"({launcher})") from None
            finally:
                subprocess.run(["kill", "-CONT", str(victim)], check=False)
        record_property("fault_to_exit_s", round(exited_at - stopped_at, 2))
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


def test_a_lost_slurm_controller_is_named_at_once_and_ck_run_submit_ends_within_its_bound(ck, tmp_path,
                                                                                          record_property):
    """slurmctld killed while `ck run --submit` follows its job: scontrol stops answering, which is said at once;
    after the machine's slurm.unanswered_timeout of silence (SILENCE_S here; UNANSWERED_S, 60 s, by default: unit
    tests/unit/test_slurm_job.py) the job is given up (scancel fails too: named, with 'check squeue') and the command
    ends, in one line naming slurmctld and that figure."""
    require_slurm()
    name = "sgctl"
    proc = ck("testbed", f"cluster:{name}", "--hosts=2", "--scheduler=slurm", timeout=120)
    state = Path(ck.env["CK_TOOLS"]) / f"testbed-{name}"
    run_id = ""
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
        (tmp_path / "job.json").write_text(json.dumps({"slurm": {"nodes": 2, "time": "00:15:00",
                                                                 "unanswered_timeout": SILENCE_S}}))
        ck("add", f"machine:{name}-job", "--type=cluster", f"--config_file={tmp_path / 'job.json'}", "--quiet",
           check=True)
        run_dir = tmp_path / "run"
        lines: list[tuple[float, str]] = []
        run = subprocess.Popen([*client, ck.exe, "run", "program:p3", f"--target={name}-job", "--submit",
                                f"--tmp_dir={run_dir}", "--cmd_key=resnet", "--env.NUM_BATCHES=1000",
                                "--env.BATCH_SIZE=8", "--env.WORKER_THREADS=1"], env=ck.env, cwd=ck.root,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
        reader = threading.Thread(target=lambda: lines.extend((time.time(), line) for line in run.stdout),
                                  daemon=True)
        reader.start()
        try:
            worker = run_dir / "job" / "logs" / "worker-1.log"
            assert wait_for(lambda: worker.exists() and "worker rank" in worker.read_text(), timeout=180), \
                "".join(line for _, line in lines)[-3000:]
            run_id = json.loads((run_dir / "job" / "p3-run.json").read_text())["plan"]["run_id"]
            killed_at = time.time()
            os.kill(int((state / "slurm" / "slurmctld.pid").read_text()), signal.SIGKILL)
            finishes(run, SILENCE_S + CANCEL_WAIT_S + 60)
            exited_at = time.time()
            reader.join(10)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait(timeout=10)
        record_property("fault_to_exit_s", round(exited_at - killed_at, 2))
        output = "".join(line for _, line in lines)
        said = [at for at, line in lines if "does not answer about job" in line and "slurmctld down?" in line]
        expect(said and said[0] - killed_at < 15, "unclear",
               f"the silent controller was not said within 15 s:\n{output[-2000:]}")
        failed = one_clear_line(output, "p3: FAILED: Slurm job", f"did not answer for {SILENCE_S} s", "slurmctld")
        expect("check squeue for job" in failed, "unclear", f"the job's fate is not said: {failed!r}")
        expect(run.returncode != 0, "unclear", f"the failed run exited {run.returncode}")
        # not given up before its silence: the last answer came at most a poll (1 s) and one scontrol before the kill
        expect(exited_at - killed_at > SILENCE_S - 2, "unclear",
               f"ck run --submit gave the job up {exited_at - killed_at:.0f} s after slurmctld was killed, before "
               f"its {SILENCE_S} s of tolerated silence")
        expect(exited_at - killed_at < SILENCE_S + CANCEL_WAIT_S + 15, "hang",
               f"ck run --submit ended {exited_at - killed_at:.0f} s after slurmctld was killed")
    finally:
        ck("testbed", f"cluster:{name}", "--down", timeout=60)
        ck("rm", f"machine:{name}-job", "--force")
        if run_id:
            kill_run_processes(run_id)  # the job's roles, if the testbed's end left any
