"""Helpers for runs in tests: fake role plans, specs, polling, process checks, long ck runs."""
import json
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from support.ckcli import CkCli

import os
import signal

from reprokit.engines.base import InstalledEngine, get_engine
from reprokit.run.plan import RolePlan, layout_roles
from reprokit.run.procscan import run_processes
from reprokit.run.settings import resolve
from reprokit.run.spec import RunSpec

FAKE_ROLE = Path(__file__).resolve().parent / "fake_role.py"


def fake_plan(*role_args: str, workers: int = 2, servers: int = 1, timeout_s: int = 60) -> RolePlan:
    """A plan whose roles are fake_role.py processes on this host."""
    hosts = ["127.0.0.1"]
    return RolePlan(run_id=uuid.uuid4().hex, hosts=hosts, roles=layout_roles(hosts, workers, servers),
                    scheduler_host=hosts[0], scheduler_port=0,  # 0: the launcher holds a free one
                    command=[sys.executable, str(FAKE_ROLE), *role_args],
                    worker_threads=1, timeout_s=timeout_s)


def fake_spec(plan: RolePlan, variant: str = "baseline", batch_size: str = "32") -> RunSpec:
    settings = resolve("resnet", {"BATCH_SIZE": batch_size, "VARIANT": variant}, default_profile="smoke")
    plan.extra_env = {**get_engine("stock").role_env(settings.variant, settings.p3_knobs), **plan.extra_env}
    return RunSpec(settings=settings,
                   engine=InstalledEngine(name="fake-engine", python=sys.executable, env_uid="0"),
                   plan=plan)


def write_spec(run_dir: Path, plan: RolePlan) -> Path:
    return fake_spec(plan).save(run_dir)


def wait_for(predicate, timeout: float, interval: float = 0.05):
    """Poll until predicate() is truthy; returns its value, or None on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


def role_pid(run_id: str, kind: str, node_host: str) -> int | None:
    """The MXNet process of a role: it carries DMLC_ROLE (the wrappers around it do not)."""
    for pid in run_processes(run_id):
        try:
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"DMLC_ROLE={kind}".encode() in environ and f"DMLC_NODE_HOST={node_host}".encode() in environ:
            return pid
    return None


def worker_pid(run_id: str, index: int) -> int | None:
    """The MXNet process of worker#index (DMLC_WORKER_ID, which the launcher gives each worker)."""
    for pid in run_processes(run_id):
        try:
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"DMLC_ROLE=worker" in environ and f"DMLC_WORKER_ID={index}".encode() in environ:
            return pid
    return None


def no_process_left(run_id: str, timeout: float = 5.0) -> bool:
    return wait_for(lambda: not run_processes(run_id), timeout) is not None


@contextmanager
def long_run(ck: "CkCli", run_dir: Path, *args: str, watch_log: str = "worker-1.log", new_session: bool = False,
             prefix: tuple[str, ...] = (), env: dict | None = None):
    """`ck run program:p3` for 1000 batches; yields (process, run_id) once that worker trains, kills it on exit.
    ``prefix``, ``env``: see CkCli.popen."""
    run = ck.popen("run", "program:p3", "--cmd_key=resnet", f"--tmp_dir={run_dir}", "--env.NUM_BATCHES=1000",
                   "--treat_return_code_as_exit_code=yes", *args, new_session=new_session, prefix=prefix, env=env)
    def stop() -> None:
        if run.poll() is None:
            if new_session:
                os.killpg(run.pid, signal.SIGKILL)
            else:
                run.kill()
            run.wait()

    try:
        log = run_dir / "logs" / watch_log
        training = wait_for(lambda: run.poll() is not None or (log.exists() and "worker rank" in log.read_text()),
                            timeout=120)
        if not training or run.poll() is not None:
            ended = f"ended with exit {run.returncode}" if run.poll() is not None else "still running after 120 s"
            stop()
            output = run.stdout.read() if run.stdout else ""
            raise AssertionError(f"training never started ({log}): the run {ended}; its output: {output[-3000:]!r}; "
                                 f"{role_log_tails(run_dir / 'logs')}")
        yield run, json.loads((run_dir / "p3-run.json").read_text())["plan"]["run_id"]
    finally:
        stop()


def role_log_tails(log_dir: Path, chars: int = 600) -> str:
    """Each role log's last characters, for a failure message."""
    if not log_dir.is_dir():
        return f"no {log_dir}"
    return "; ".join(f"{p.name}: {p.read_text(errors='replace')[-chars:]!r}" for p in sorted(log_dir.glob("*.log")))


def kill_worker_1_of(start, run_dir: Path, log_path: Path) -> tuple[str, float, str, int]:
    """``start(log)``: a long run on a testbed (1000 batches) writing to ``log``. Once worker#1 (on 10.77.0.2)
    trains, SIGKILL it and wait for the run's end; returns (the run's output, seconds from the kill to the end, the
    run id, its exit code). The run is killed if it outlives the test."""
    with open(log_path, "w") as log:
        run = start(log)
        try:
            worker = run_dir / "logs" / "worker-1.log"
            training = wait_for(lambda: run.poll() is None and worker.exists() and "worker rank" in worker.read_text()
                                or run.poll() is not None, timeout=120)
            # Seen once in CI: worker#1 not training after 120 s, cause unknown; say what the run and the worker said.
            assert training and run.poll() is None, (
                f"worker#1 was not training after 120 s (run {'ended, exit ' + str(run.returncode) if run.poll() is not None else 'still running'}); "
                f"worker-1.log: {worker.read_text()[-1500:] if worker.exists() else '(none)'!r}; "
                f"the run's output: {log_path.read_text()[-3000:]!r}")
            run_id = json.loads((run_dir / "p3-run.json").read_text())["plan"]["run_id"]
            pid = wait_for(lambda: role_pid(run_id, "worker", "10.77.0.2"), timeout=10)
            assert pid
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            run.wait(timeout=60)
            took = time.monotonic() - killed_at
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=10)
    return log_path.read_text(), took, run_id, run.returncode


def assert_failed_naming_worker_1(output: str, took: float, run_id: str, code: int) -> None:
    """The run of kill_worker_1_of failed within 15 s, naming the killed worker, and left no process."""
    assert code != 0
    assert "p3: FAILED: worker#1 on h2 was killed by SIGKILL" in output, output[-3000:]
    assert took < 15
    assert no_process_left(run_id, timeout=10)
    assert "Traceback" not in output
