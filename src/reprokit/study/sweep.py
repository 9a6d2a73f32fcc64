"""`ck reproduce study:NAME`: run the study's matrix on a target, one stored record per run.

Runs are interleaved (study.plan_runs), links are shaped per bandwidth where
the target allows it (a testbed: testbed.shape), and every run ends as a
record in the store: ``ok`` with its unified result, or ``failed`` with its
reason. A run interrupted by a stop request (SIGINT, SIGTERM, SIGHUP) is not a
result and is not stored; ``--resume`` runs it again and skips every run
already stored.
"""
from __future__ import annotations

import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from reprokit.run import settings as run_settings
from reprokit.study import runner as study_runner
from reprokit.errors import UserError
from reprokit.study.claims import NATIVE, Progress, RunConfig, Study, Target, now_iso, plan_runs
from reprokit.study.store import AlreadyStored, Store

TIMEOUT_MARGIN_S = 300  # beyond the run's own RUN_TIMEOUT: ck's start, the launcher's teardown
RESERVED_ENV = ("VARIANT", "PROFILE")  # the study sets them per run


@dataclass(frozen=True)
class SweepRequest:
    models: list[str]
    variants: list[str]
    bandwidths: list[str]
    repetitions: int
    profile: str
    env: dict[str, str]  # run settings of every run (matrix env, then the user's --env.*)
    quick: bool


@dataclass
class SweepSummary:
    sweep_id: str
    total: int
    already_stored: int
    ok: int = 0
    failed: list[str] = field(default_factory=list)
    stopped: str | None = None


def check_env(env: dict[str, str]) -> None:
    for key in RESERVED_ENV:
        if key in env:
            raise UserError(f"--env.{key} is set by the study per run; choose them with "
                            f"{'--variants' if key == 'VARIANT' else '--profile'} instead")


def new_sweep_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def create_sweep(store: Store, study: Study, target: Target, request: SweepRequest, options: dict,
                 restore_rate: str | None = None) -> dict:
    sweep_id = new_sweep_id()
    plan = {"restore_rate": restore_rate, "study": study.name, "created": now_iso(), "target": target.to_dict(), "models": request.models,
            "variants": request.variants, "bandwidths": request.bandwidths, "repetitions": request.repetitions,
            "profile": request.profile, "env": request.env, "quick": request.quick, "options": options,
            "origin": store.origin()}
    store.new_sweep(sweep_id, plan)
    return store.sweep(sweep_id)


class _Stop:
    """Signal handlers for the sweep: stop the current run, then stop the sweep."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.current: study_runner.GuardedRun | None = None
        self._previous: dict = {}

    def __enter__(self) -> "_Stop":
        def handler(signum, _frame):
            self.reason = self.reason or f"stopped by {signal.Signals(signum).name}"
            if self.current is not None:
                self.current.stop(self.reason)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._previous[sig] = signal.signal(sig, handler)
        return self

    def __exit__(self, *exc) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def run_timeout(profile: str, env: dict[str, str]) -> float:
    raw = env.get("RUN_TIMEOUT", "").strip()
    base = int(raw) if raw.isdigit() else run_settings.PROFILES.get(profile, run_settings.PROFILES["paper"]).timeout_s
    return base + TIMEOUT_MARGIN_S


def run_sweep(study: Study, store: Store, sweep: dict, target: Target,
              shape: Callable[[str | None], None] | None, console: TextIO = sys.stdout) -> SweepSummary:
    """Run every configuration of the sweep that is not stored yet."""
    sweep_id = sweep["sweep_id"]
    runs = plan_runs(sweep["models"], sweep["variants"], sweep["bandwidths"], sweep["repetitions"])
    pending = [r for r in runs if not store.has_record(r.record_id(sweep_id))]
    summary = SweepSummary(sweep_id, len(runs), len(runs) - len(pending))
    if summary.already_stored:
        print(f"study: resuming sweep {sweep_id}: {summary.already_stored} of {len(runs)} run(s) already stored",
              file=console, flush=True)
    progress = Progress(len(runs), summary.already_stored, console)
    environment = study_runner.environment()
    engine_pythons: dict[str, str] = {}
    origin = store.origin()
    shaped: str | None = None
    with _Stop() as stop:
        try:
            for config in pending:
                if stop.reason:
                    break
                progress.start(config.label())
                shape_error = None
                if shape is not None and config.bandwidth != shaped:
                    try:
                        shape(None if config.bandwidth == NATIVE else config.bandwidth)
                        shaped = config.bandwidth
                    except UserError as exc:
                        shape_error, shaped = f"could not shape the links to {config.bandwidth}: {exc}", None
                record = _run_one(study, store, sweep, target, config, environment, engine_pythons, origin,
                                  shape is not None, shape_error, stop)
                if record is None:  # stopped: not a result, resume runs it again
                    summary.stopped = stop.reason
                    progress.finish(config.label(), f"interrupted ({stop.reason}), not stored")
                    break
                try:
                    store.put_record(record)
                except AlreadyStored:
                    progress.finish(config.label(), "already stored by another sweep process; kept")
                    continue
                if record["status"] == "ok":
                    summary.ok += 1
                    value = record["result"].get(study.metric)
                    progress.finish(config.label(), f"{value:.2f} samples/s" if isinstance(value, (int, float)) else "ok")
                else:
                    summary.failed.append(f"{config.label()}: {record['failure_reason']}")
                    progress.finish(config.label(), f"FAILED: {record['failure_reason'][:160]}")
        finally:
            if shape is not None and shaped is not None:
                try:
                    shape(sweep.get("restore_rate"))  # the rate the testbed was created with
                except UserError as exc:
                    print(f"study: warning: could not restore the links: {exc}", file=console, flush=True)
    if stop.reason and summary.stopped is None:
        summary.stopped = stop.reason
    return summary


def _run_one(study: Study, store: Store, sweep: dict, target: Target, config: RunConfig, environment: dict,
             engine_pythons: dict[str, str], origin: dict, shaped: bool, shape_error: str | None,
             stop: _Stop) -> dict | None:
    record_id = config.record_id(sweep["sweep_id"])
    run_dir = store.new_attempt_dir(record_id)
    env = {**sweep["env"], **study.variants[config.variant], "PROFILE": sweep["profile"]}
    command = study_runner.run_command(study.program, config.model, target.name, run_dir, env)
    if shape_error is not None:
        now = time.time()
        outcome = study_runner.RunOutcome(False, shape_error, None, now, now, None)
    else:
        def on_start(run: study_runner.GuardedRun) -> None:
            stop.current = run
            if stop.reason:
                run.stop(stop.reason)

        outcome = study_runner.run_once(command, run_dir, run_timeout(sweep["profile"], env), on_start=on_start)
        stop.current = None
        if outcome.stopped:
            return None
    provenance = {**environment, **study_runner.run_provenance(run_dir, command, outcome, env)}
    python = provenance.get("engine_python")
    if python:
        if python not in engine_pythons:
            engine_pythons[python] = study_runner.engine_python_version(python)
        provenance["engine_python_version"] = engine_pythons[python]
    provenance.update({"bandwidth": config.bandwidth, "bandwidth_shaped": shaped and config.bandwidth != NATIVE,
                       "target": target.to_dict()})
    return {
        "record_id": record_id, "study": study.name, "sweep_id": sweep["sweep_id"], "origin": origin,
        "config": {"model": config.model, "variant": config.variant, "bandwidth": config.bandwidth,
                   "repetition": config.repetition, "profile": sweep["profile"], "target": target.to_dict()},
        "status": "ok" if outcome.ok else "failed", "failure_reason": outcome.reason,
        "result": outcome.result, "provenance": provenance,
        "run_folder": str(run_dir.relative_to(store.root)),
    }


def testbed_shaper(target: Target) -> Callable[[str | None], None] | None:
    """tc shaping of the testbed's hosts; None for targets whose links the sweep cannot shape."""
    if not target.shaping or target.testbed is None:
        return None
    from reprokit.cluster import testbed as testbed

    name, hosts = target.testbed, len(target.hosts)

    def shape(rate: str | None) -> None:
        testbed.shape(name, hosts, rate)

    return shape


def summary_line(summary: SweepSummary, store_root: Path) -> str:
    stored = summary.already_stored + summary.ok + len(summary.failed)
    return (f"study: sweep {summary.sweep_id}: {stored} of {summary.total} run(s) stored "
            f"({summary.ok} ok, {len(summary.failed)} failed this time) in {store_root}")
