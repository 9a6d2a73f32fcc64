import json
import sys
import time
import uuid
from pathlib import Path

import pytest

from reprokit.plan import RolePlan, layout_roles
from reprokit.procscan import run_processes
from reprokit.settings import resolve

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
