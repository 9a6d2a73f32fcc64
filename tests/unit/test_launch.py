"""The local launcher with real role processes (fake_role.py stands in for MXNet roles)."""
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time

from reprokit.run.launch import StopRequest, run_local
from reprokit.run.procscan import run_processes
from reprokit.run.progress import STALL_FLOOR_S, STOPPED_LIMIT_S, ProgressWatch
from support.ckcli import REPO_ROOT
from support.runs import fake_plan, no_process_left, wait_for, write_spec


def role_pid(run_id, kind, worker_id=None):
    """PID of a role's main process, found through its environment."""
    for pid in run_processes(run_id):
        try:
            env = dict(kv.split("=", 1) for kv in open(f"/proc/{pid}/environ").read().split("\0") if "=" in kv)
            cmdline = open(f"/proc/{pid}/cmdline").read()
        except OSError:
            continue
        if "fake_role.py" in cmdline and env.get("DMLC_ROLE") == kind and \
                (worker_id is None or env.get("DMLC_WORKER_ID") == str(worker_id)):
            return pid
    return None


def test_successful_run_streams_prefixed_output_and_keeps_every_log(run_dir):
    console = io.StringIO()
    plan = fake_plan()
    outcome = run_local(plan, run_dir, console=console)
    assert outcome.success, outcome.reason
    assert outcome.exit_codes == {"scheduler": 0, "server#0": 0, "worker#0": 0, "worker#1": 0}
    assert "[127.0.0.1 worker#1] worker#1 started" in console.getvalue()
    assert "[127.0.0.1 scheduler] scheduler started" in console.getvalue()
    logs = sorted(p.name for p in (run_dir / "logs").iterdir())
    assert logs == ["scheduler.log", "server-0.log", "worker-0.log", "worker-1.log"]
    assert "Speed: 100.00 samples/sec" in (run_dir / "logs" / "worker-1.log").read_text()
    assert no_process_left(plan.run_id)


def test_failing_worker_tears_down_the_waiting_roles_and_their_children(run_dir):
    plan = fake_plan("--fail", "worker#1:3", "--spawn-child")
    start = time.monotonic()
    outcome = run_local(plan, run_dir, console=io.StringIO())
    assert not outcome.success
    assert outcome.reason == "worker#1 on 127.0.0.1 exited with code 3: ValueError: worker#1 failed on purpose"
    assert (outcome.failed_role, outcome.failed_host) == ("worker#1", "127.0.0.1")
    assert time.monotonic() - start < 10
    # The scheduler and server were waiting for worker#1 forever; the grandchildren were sleeping.
    assert no_process_left(plan.run_id)


def test_worker_killed_from_outside_is_named_and_everything_else_torn_down(run_dir):
    plan = fake_plan("--hang", "worker#1")
    holder = {}
    thread = threading.Thread(target=lambda: holder.update(outcome=run_local(plan, run_dir, console=io.StringIO())))
    thread.start()
    pid = wait_for(lambda: role_pid(plan.run_id, "worker", 1), timeout=10)
    assert pid, "worker#1 never started"
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=15)
    assert not thread.is_alive()
    assert time.monotonic() - killed_at < 10
    assert holder["outcome"].reason == "worker#1 on 127.0.0.1 was killed by SIGKILL"
    assert no_process_left(plan.run_id)


def test_global_timeout_names_what_was_still_running_and_advises_no_longer_timeout_for_a_silent_worker(run_dir):
    plan = fake_plan("--hang", "worker#0", timeout_s=2)
    outcome = run_local(plan, run_dir, console=io.StringIO())
    assert not outcome.success
    assert outcome.reason.startswith("run exceeded its timeout of 2 s (still running: scheduler, server#0, worker#0)")
    assert "not progressing (fewer than two speed reports, or silent since): worker#0" in outcome.reason
    assert "raise it with" not in outcome.reason
    assert no_process_left(plan.run_id)


def test_a_timeout_while_every_worker_progresses_advises_raising_it(run_dir):
    plan = fake_plan("--report-forever", "0.2", timeout_s=3)
    outcome = run_local(plan, run_dir, console=io.StringIO())
    assert outcome.reason.endswith("every worker was progressing: raise it with --env.RUN_TIMEOUT=SECONDS")
    assert no_process_left(plan.run_id)


def test_a_stopped_worker_ends_the_run_named_long_before_its_timeout(run_dir):
    """SIGSTOP: the process neither exits nor prints; synchronous training would wait for it until RUN_TIMEOUT."""
    plan = fake_plan("--hang", "worker#1", timeout_s=600)
    holder = {}
    thread = threading.Thread(target=lambda: holder.update(outcome=run_local(plan, run_dir, console=io.StringIO())))
    thread.start()
    pid = wait_for(lambda: role_pid(plan.run_id, "worker", 1), timeout=10)
    assert pid, "worker#1 never started"
    stopped_at = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    thread.join(timeout=40)
    assert not thread.is_alive()
    assert STOPPED_LIMIT_S <= time.monotonic() - stopped_at < STOPPED_LIMIT_S + 15
    assert holder["outcome"].reason == ("worker#1 on 127.0.0.1 has been stopped (SIGSTOP or a tracer) for 10 s; every "
                                        "role was torn down")
    assert no_process_left(plan.run_id)


def test_a_worker_silent_past_ten_times_its_slowest_report_interval_has_stalled():
    watch = ProgressWatch()
    assert watch.stall(["worker#0"], now=1000.0) is None  # no pace measured yet: no verdict
    for at in (0.0, 2.0, 4.0):
        watch.report("worker#0", at)
    for at in (0.0, 10.0, 30.0):
        watch.report("worker#1", at)
    assert watch.bound_s("worker#0") == STALL_FLOOR_S  # 10 x 2 s is under the floor
    assert watch.bound_s("worker#1") == 200.0  # 10 x its slowest interval, 20 s
    stall = watch.stall(["worker#0", "worker#1"], now=4.0 + STALL_FLOOR_S + 1)
    assert stall.workers == ["worker#0"] and round(stall.silent_s) == 61
    assert stall.describe().startswith("no progress from worker#0 for 61 s, past the bound of 60 s (10 x the slowest "
                                       "interval between their speed reports, 2.0 s; at least 60 s)")
    assert watch.stall(["worker#0", "worker#1"], now=231.0).workers == ["worker#0", "worker#1"]
    assert watch.not_progressing(["worker#0", "worker#1", "worker#2"], now=40.0) == ["worker#2"]


def test_stop_request_tears_everything_down(run_dir):
    plan = fake_plan("--hang", "worker#0")
    stop = StopRequest()
    threading.Timer(1.0, stop.request, args=("stopped by SIGINT",)).start()
    outcome = run_local(plan, run_dir, console=io.StringIO(), stop=stop)
    assert outcome.reason == "run stopped by SIGINT; every role was torn down"
    assert no_process_left(plan.run_id)


def test_role_that_cannot_start_fails_the_run_cleanly(run_dir):
    plan = fake_plan()
    plan.command = ["/nonexistent/python"]
    outcome = run_local(plan, run_dir, console=io.StringIO())
    assert not outcome.success and outcome.reason.startswith("could not start the run:")
    assert no_process_left(plan.run_id)


def _start_p3run(run_dir, plan):
    spec = write_spec(run_dir, plan)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    return subprocess.Popen([sys.executable, "-m", "reprokit.run.command", str(spec)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_launcher_killed_with_sigkill_leaves_no_role_behind(run_dir):
    plan = fake_plan("--hang", "worker#1", "--spawn-child")
    launcher = _start_p3run(run_dir, plan)
    assert wait_for(lambda: role_pid(plan.run_id, "worker", 1), timeout=10)
    launcher.kill()
    launcher.wait(timeout=5)
    # Roles die with their parent (PR_SET_PDEATHSIG); a role's own children are not covered by
    # that, so only the role processes themselves are checked here.
    assert wait_for(lambda: not any(role_pid(plan.run_id, k) for k in ("scheduler", "server", "worker")), 5)
    for pid in run_processes(plan.run_id):  # the orphaned `sleep` grandchildren
        os.kill(pid, signal.SIGKILL)


def test_sigterm_to_the_launcher_fails_the_run_and_cleans_up(run_dir):
    plan = fake_plan("--hang", "worker#1", "--spawn-child")
    launcher = _start_p3run(run_dir, plan)
    assert wait_for(lambda: role_pid(plan.run_id, "worker", 1), timeout=10)
    launcher.send_signal(signal.SIGTERM)
    out, _ = launcher.communicate(timeout=15)
    assert launcher.returncode == 130  # interrupted, as a shell reports a command ended by a signal
    assert "p3: FAILED: run stopped by SIGTERM; every role was torn down" in out
    result = json.loads((run_dir / "p3-result.json").read_text())
    assert result["run_success"] is False and result["interrupted"] is True
    assert no_process_left(plan.run_id)


def test_successful_p3run_writes_the_unified_result(run_dir):
    plan = fake_plan("--speed", "50")
    launcher = _start_p3run(run_dir, plan)
    out, _ = launcher.communicate(timeout=30)
    assert launcher.returncode == 0, out
    result = json.loads((run_dir / "p3-result.json").read_text())
    assert result["run_success"] is True
    assert result["throughput_per_worker"] == [50.0, 50.0]
    assert result["throughput_samples_per_sec"] == 100.0
    assert result["batches_measured"] == 40  # two steady-state reports of 10 batches, per worker
    assert result["params_in_sync"] is True
    assert out.strip().splitlines()[-1].startswith("p3: OK: resnet baseline on fake-engine: 100.00 samples/s")


def test_spec_with_an_error_prints_it_once_and_exits_2(run_dir):
    (run_dir / "p3-run.json").write_text(json.dumps({"error": "BATCH_SIZE must be a whole number, got 'x'"}))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    proc = subprocess.run([sys.executable, "-m", "reprokit.run.command", str(run_dir / "p3-run.json")], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr == "p3: error: BATCH_SIZE must be a whole number, got 'x'\n"


def test_a_role_that_raised_but_never_exits_ends_the_run_quoting_its_error(run_dir):
    """MXNet work pending keeps a raised worker alive: the launcher does not wait for the timeout."""
    plan = fake_plan("--raise-and-hang", "worker#1", timeout_s=120)
    began = time.monotonic()
    outcome = run_local(plan, run_dir, console=io.StringIO())
    assert time.monotonic() - began < 20
    assert not outcome.success and outcome.failed_role == "worker#1"
    assert outcome.reason == ("worker#1 on 127.0.0.1: MXNetError: Check failed: number of input images must be bigger "
                              "than the batch size (it printed a traceback and was still running 5 s later)")
    assert no_process_left(plan.run_id)
