import json
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from reprokit.run.plan import RolePlan, layout_roles
from reprokit.run.procscan import run_processes
from reprokit.run.settings import resolve

TESTS = Path(__file__).resolve().parent
REPO_ROOT = TESTS.parent
FAKE_ROLE = TESTS / "fake_role.py"


def fake_plan(*role_args: str, workers: int = 2, servers: int = 1, timeout_s: int = 60) -> RolePlan:
    """A plan whose roles are fake_role.py processes on this host."""
    hosts = ["127.0.0.1"]
    return RolePlan(run_id=uuid.uuid4().hex, hosts=hosts, roles=layout_roles(hosts, workers, servers),
                    scheduler_host=hosts[0], scheduler_port=9999,
                    command=[sys.executable, str(FAKE_ROLE), *role_args],
                    worker_threads=1, timeout_s=timeout_s)


def write_spec(run_dir: Path, plan: RolePlan) -> Path:
    settings = resolve("resnet", {"BATCH_SIZE": "32"}, default_profile="smoke")
    spec = {"settings": settings.to_dict(), "variant": "baseline",
            "engine": {"name": "fake-engine", "python": sys.executable, "env_uid": "0"},
            "plan": plan.to_dict()}
    path = run_dir / "p3-run.json"
    path.write_text(json.dumps(spec))
    return path


def wait_for(predicate, timeout: float, interval: float = 0.05):
    """Poll until predicate() is truthy; returns its value, or None on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


def no_process_left(run_id: str, timeout: float = 5.0) -> bool:
    return wait_for(lambda: not run_processes(run_id), timeout) is not None


@pytest.fixture
def run_dir(tmp_path):
    return tmp_path


class CkCli:
    """The real ck CLI of the framework's environment, in isolated CK_REPOS/CK_TOOLS, stdin closed."""

    def __init__(self, root: Path):
        import os

        self.root = root
        self.exe = str(Path(sys.executable).with_name("ck"))
        self.env = {**os.environ, "CK_REPOS": str(root / "repos"), "CK_TOOLS": str(root / "tools")}

    def __call__(self, *args: str, timeout: float = 600, check: bool = False):
        import subprocess

        proc = subprocess.run([self.exe, *args], env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, cwd=self.root)
        if check and proc.returncode != 0:
            raise AssertionError(f"ck {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def popen(self, *args: str, new_session: bool = False):
        """Start ck in the background; new_session puts it in its own process group, as a terminal would."""
        import subprocess

        return subprocess.Popen([self.exe, *args], env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=self.root, start_new_session=new_session)

    def run_p3(self, run_dir: Path, *args: str, timeout: float = 600):
        """ck run program:p3 with its own run folder; returns (process, CK's JSON output)."""
        out_file = run_dir / "ck-output.json"
        proc = self(
            "run", "program:p3", f"--tmp_dir={run_dir}", "--out=json_file", f"--out_file={out_file}",
            "--treat_return_code_as_exit_code=yes", *args, timeout=timeout)
        return proc, (json.loads(out_file.read_text()) if out_file.exists() else None)


def bootstrap(ck: CkCli) -> None:
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "reprokit.bootstrap"], env=ck.env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="session")
def ck(tmp_path_factory) -> CkCli:
    """CK with this repository registered and the MXNet engine installed through `ck install`."""
    cli = CkCli(tmp_path_factory.mktemp("ck"))
    bootstrap(cli)
    return cli


@pytest.fixture
def bare_ck(tmp_path) -> CkCli:
    """CK with this repository registered and nothing installed."""
    cli = CkCli(tmp_path / "ck")
    cli.root.mkdir()
    cli("import", "repo", f"--path={REPO_ROOT}", "--quiet", check=True)
    return cli


@contextmanager
def long_run(ck: CkCli, run_dir: Path, *args: str, watch_log: str = "worker-1.log", new_session: bool = False):
    """`ck run program:p3` for 1000 batches; yields (process, run_id) once that worker trains, kills it on exit."""
    import os
    import signal

    run = ck.popen("run", "program:p3", "--cmd_key=resnet", f"--tmp_dir={run_dir}", "--env.NUM_BATCHES=1000",
                   "--treat_return_code_as_exit_code=yes", *args, new_session=new_session)
    try:
        log = run_dir / "logs" / watch_log
        assert wait_for(lambda: log.exists() and "worker rank" in log.read_text(), timeout=120), \
            f"training never started ({log})"
        yield run, json.loads((run_dir / "p3-run.json").read_text())["plan"]["run_id"]
    finally:
        if run.poll() is None:
            if new_session:
                os.killpg(run.pid, signal.SIGKILL)
            else:
                run.kill()
            run.wait()
