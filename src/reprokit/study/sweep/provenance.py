"""A run's provenance as the sweep records it (store.records.Provenance): what does not change between the runs of
a sweep, the run's own part, then the sweep's bandwidth, target and link rate for it."""
from __future__ import annotations

import json
import platform
import shlex
import subprocess
import time
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from reprokit.core.paths import REPO_ROOT
from reprokit.engines.choice import stock_mxnet_version
from reprokit.study.paper.rates import NATIVE
from reprokit.study.paper.target import Target
from reprokit.study.store.records import Provenance, Sweep
from reprokit.study.sweep.runner import RunOutcome


def _git(*args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def engine_python_version(python: str) -> str:
    try:
        proc = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                              text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip()


def environment() -> Provenance:
    """What does not change between the runs of a sweep: this repository, the framework, the host."""
    revision = _git("rev-parse", "HEAD")
    return Provenance(
        repo_revision=revision or "unknown (not a git checkout)",
        repo_dirty=bool(_git("status", "--porcelain", "--untracked-files=no")) if revision else None,
        ck_version=metadata.version("ck"),
        python_version=platform.python_version(),
        controller_host=platform.node(),
        platform=platform.platform(),
    )


def run_provenance(environment: Provenance, run_dir: Path, command: list[str], outcome: RunOutcome,
                   env: dict[str, Any]) -> Provenance:
    """The sweep's ``environment`` with the run's own part: engine and role plan from the run's own specification,
    command, times."""
    spec = {}
    spec_path = run_dir / "p3-run.json"
    if spec_path.exists():
        try:
            spec = json.loads(spec_path.read_text())
        except ValueError:
            spec = {}
    engine = spec.get("engine", {})
    engine_name = engine.get("name", "")
    plan = spec.get("plan", {})
    hosts = plan.get("hosts") or (run_result.hosts if (run_result := outcome.run_result) is not None else None)
    roles = tuple({k: r.get(k) for k in ("kind", "index", "host")} for r in plan.get("roles", []))
    return replace(
        environment,
        engine=engine_name or None,
        mxnet_version=stock_mxnet_version(engine_name),
        engine_env_uid=engine.get("env_uid"),
        engine_python=engine.get("python"),
        hosts=tuple(hosts) if hosts is not None else None,
        role_plan=roles or None,
        env_overrides=env,
        started_at=_iso(outcome.started_at),
        ended_at=_iso(outcome.ended_at),
        duration_s=round(outcome.ended_at - outcome.started_at, 3),
        command=tuple(command),
        command_line=shlex.join(command),
        ck_exit_code=outcome.exit_code,
    )


def sweep_part(run: Provenance, sweep: Sweep, target: Target, bandwidth: str, shaped: bool,
               engine_python_version: str | None) -> Provenance:
    """The run's provenance with the sweep's part for it: its bandwidth (shaped or not), its target, the version of
    its engine's interpreter, and the rate an emulated run's links were shaped to (the bandwidth divided by k)."""
    return replace(run, engine_python_version=engine_python_version, bandwidth=bandwidth,
                   bandwidth_shaped=shaped and bandwidth != NATIVE, target=target.to_dict(),
                   links_shaped_to=sweep.link_rate(bandwidth) if sweep.dilation != 1.0 and bandwidth != NATIVE
                   else None)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t)) + f" ({t:.3f})"
