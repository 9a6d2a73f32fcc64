"""Signals to any process of ours stop the whole run: SIGINT, SIGTERM, SIGHUP and SIGKILL, sent to ck run's Python,
to the launcher, to `ck reproduce` and to its guard. Within 5 s no process of the run is left, its result says
it was interrupted, and nobody printed a traceback."""
import json
import os
import signal
import time
from pathlib import Path

import pytest

from reprokit.run.lifeline import LAUNCHER_FILE
from reprokit.run.procscan import is_running, process_identity
from reprokit.run.progress import STOPPED_LIMIT_S
from support.faults import expect, finishes, no_orphans, no_traceback, one_clear_line
from support.runs import long_run, run_processes, wait_for, worker_pid
from support.testbed import make_testbed

pytestmark = pytest.mark.fault("signal")

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]
STUDY = "study:sysml19-p3"
LONG = ["--env.NUM_BATCHES=1000", "--env.BATCH_SIZE=8", "--env.WORKER_THREADS=1"]


def launcher_of(run_dir: Path) -> str:
    identity = wait_for(lambda: (run_dir / LAUNCHER_FILE).exists() and (run_dir / LAUNCHER_FILE).read_text().strip(), 30)
    assert identity, f"no launcher recorded in {run_dir}"
    return identity


def alive(run_id: str, *identities: str):
    """What is left of the run: its roles (by run id) and the given processes (ck, launcher, guard)."""
    return lambda: run_processes(run_id) + [i for i in identities if i and is_running(i)]


def interrupted(run_dir: Path) -> None:
    path = run_dir / "p3-result.json"
    expect(wait_for(path.exists, 5), "data-lost", f"the interrupted run left no {path}")
    result = json.loads(path.read_text())
    expect(result.get("interrupted") is True and not result["run_success"], "unclear",
           f"the result does not say the run was interrupted: {result.get('failure_reason')!r}")


@pytest.mark.parametrize("target", ["ck", "launcher"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_to_ck_run_or_its_launcher_stops_the_whole_run(ck, tmp_path, sig, target):
    with long_run(ck, tmp_path, "--env.BATCH_SIZE=8", "--env.WORKER_THREADS=1") as (run, run_id):
        ck_process = process_identity(run.pid)
        launcher = launcher_of(tmp_path)
        os.kill(int((ck_process if target == "ck" else launcher).split(":")[0]), sig)
        no_orphans(alive(run_id, ck_process, launcher), 5, f"{sig.name} to {target}")
        output = run.stdout.read()
    interrupted(tmp_path)
    if sig != signal.SIGKILL:
        no_traceback(output)
        assert "p3: FAILED: run stopped by " in output


def _training_attempt(store: Path):
    for spec in store.glob("runs/*/attempt-*/p3-run.json"):
        log = spec.parent / "logs" / "worker-1.log"
        if log.exists() and "worker rank" in log.read_text():
            return spec.parent, json.loads(spec.read_text())["plan"]["run_id"]
    return None


def _guard_of(store: Path) -> str | None:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"--guard" in cmdline and str(store).encode() in cmdline:
            return process_identity(int(pid))
    return None


@pytest.mark.parametrize("target", ["reproduce", "guard"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_to_the_study_or_its_guard_stops_the_run(ck, tmp_path, sig, target):
    store = tmp_path / "store"
    sweep = ck.popen("reproduce", STUDY, f"--store={store}", "--models=resnet", "--variants=baseline",
                     "--repetitions=1", "--profile=smoke", *(f"--env.{a[len('--env.'):]}" for a in LONG), new_session=True)
    try:
        found = wait_for(lambda: _training_attempt(store), timeout=180)
        assert found, "the sweep's run never started training"
        attempt, run_id = found
        guard, launcher = _guard_of(store), launcher_of(attempt)
        ck_run = next((process_identity(int(p)) for p in filter(str.isdigit, os.listdir("/proc"))
                       if guard and _parent(int(p)) == int(guard.split(":")[0])), None)
        reproduce = process_identity(sweep.pid)
        os.kill(int((reproduce if target == "reproduce" else guard).split(":")[0]), sig)
        no_orphans(alive(run_id, ck_run, launcher, guard), 5, f"{sig.name} to {target}")
        if sig != signal.SIGKILL or target == "guard":  # the sweep itself lives to say so
            output, _ = sweep.communicate(timeout=30)
            no_traceback(output)
            assert sweep.returncode == 1, output
            assert "--resume" in output
            assert (attempt / "interrupted.json").exists()
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    interrupted(attempt)
    assert not list((store / "records").glob("*.json")), "an interrupted run was stored as a result"


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def child_running(parent: int, argv: list[str]) -> bool:
    """A child of ``parent`` runs ``argv`` (its parent pid: the 2nd field after the command name in /proc's stat)."""
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")[:-1]
            stat = (proc / "stat").read_text()
        except (OSError, ValueError):
            continue  # not a process, or gone meanwhile
        if [a.decode() for a in cmdline] == argv and int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            return True
    return False


def test_ctrl_c_in_a_ck_action_of_ours_is_one_line(ck, tmp_path):
    """Ctrl-C while `ck check cluster` waits for a host (its ProxyCommand never answers): one line, exit 1."""
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps({"hosts": [{"host": "silent", "proxy_command": "sleep 60"}]}))
    ck("add", "machine:sgsilent", "--type=cluster", f"--config_file={hosts}", "--quiet", check=True)
    try:
        check = ck.popen("check", "cluster:sgsilent", new_session=True)
        # connecting: ck has started the proxy, which says nothing
        assert wait_for(lambda: child_running(check.pid, ["sleep", "60"]), 30), "the proxy never started"
        os.killpg(check.pid, signal.SIGINT)
        code = finishes(check, 30)
        output = check.stdout.read()
        one_clear_line(output, "interrupted")
        expect(code == 1, "unclear", f"exit code {code} after Ctrl-C:\n{output}")
    finally:
        ck("rm", "machine:sgsilent", "--force")


@pytest.mark.root
@pytest.mark.parametrize("sig,target", [(signal.SIGINT, "ck"), (signal.SIGKILL, "launcher")],
                         ids=["SIGINT-ck", "SIGKILL-launcher"])
def test_a_signal_stops_the_run_on_every_host_of_a_testbed(ck, tmp_path, sig, target):
    """On a cluster too: the launcher tears the remote roles down, or, killed, its closed connections do."""
    name = "sgsig"  # this test's own testbed: rk-sgsig-h1, rk-sgsig-h2
    make_testbed(ck, name, 2)
    try:
        with long_run(ck, tmp_path, f"--target={name}", "--env.PROFILE=smoke", "--env.WORKER_THREADS=1",
                      "--env.BATCH_SIZE=8") as (run, run_id):
            ck_process, launcher = process_identity(run.pid), launcher_of(tmp_path)
            os.kill(int((ck_process if target == "ck" else launcher).split(":")[0]), sig)
            no_orphans(alive(run_id, ck_process, launcher), 5, f"{sig.name} to {target} on a testbed")
            output = run.stdout.read()
        interrupted(tmp_path)
        if sig != signal.SIGKILL:
            no_traceback(output)
    finally:
        ck("testbed", f"cluster:{name}", "--down", timeout=60)
        ck("rm", f"machine:{name}", "--force")


@pytest.mark.parametrize("target", ["launcher", "worker"])
def test_a_stopped_launcher_or_worker_ends_the_run_named_within_the_stopped_limit(ck, tmp_path, target,
                                                                                  record_property):
    """SIGSTOP: no exit, no output. ck would wait for a stopped launcher forever, and synchronous training for a
    stopped worker until RUN_TIMEOUT; each is named and the run ended STOPPED_LIMIT_S after it was stopped. Records
    the seconds from SIGSTOP to ck's exit (``fault_to_exit_s``, for benchmarks/fault_totals.py)."""
    with long_run(ck, tmp_path, "--env.BATCH_SIZE=8", "--env.WORKER_THREADS=1") as (run, run_id):
        launcher = launcher_of(tmp_path)
        victim = int(launcher.split(":")[0]) if target == "launcher" else worker_pid(run_id, 1)
        stopped_at = time.monotonic()
        os.kill(victim, signal.SIGSTOP)
        try:
            code = run.wait(timeout=STOPPED_LIMIT_S + 30)
            record_property("fault_to_exit_s", round(time.monotonic() - stopped_at, 2))
        except Exception:
            os.kill(victim, signal.SIGCONT)
            raise
        output = run.stdout.read()
        no_orphans(alive(run_id, launcher), 5, f"SIGSTOP to the {target}")
    # A killed launcher's script ends with the shell's 128 + SIGKILL, which CK passes on; a failed run's 1 otherwise.
    assert code == (137 if target == "launcher" else 1), output[-2000:]
    no_traceback(output)
    [failed] = [line for line in output.splitlines() if line.startswith("p3: FAILED:")]
    if target == "launcher":
        assert f"the launcher (pid {victim}) was stopped (SIGSTOP or a tracer) for 10 s" in failed
    else:
        assert "worker#1 on 127.0.0.1 has been stopped (SIGSTOP or a tracer) for 10 s" in failed
