"""`ck reproduce study:NAME`: run the study's matrix on a target, one stored record per run.

Runs are interleaved (study.plan_runs), links are shaped per bandwidth where
the target allows it (a testbed: testbed.shape), and every run ends as a
record in the store: ``ok`` with its unified result, or ``failed`` with its
reason. A run interrupted by a stop request (SIGINT, SIGTERM, SIGHUP to the
sweep, or to the run's own ck, launcher or guard) is not a result and is not
stored: its attempt folder says why in ``interrupted.json``, the sweep stops,
and ``--resume`` runs it again and skips every run already stored.

On a testbed whose matrix gives target ratios instead of bandwidths (the quick
matrix), a new sweep first runs one baseline probe per model on the unshaped
links and chooses that model's bandwidths from it (choice.py); the choice and
its inputs are stored in the sweep plan, the probes' run folders under
``runs/<sweep>--probe--<model>/``. One repetition (the matrix's
``timeline_repetition``) runs with TIMELINE=1, so the report can plot timelines.

Every configuration runs on each of the sweep's engines (``--engines``): each
run passes ``--env.ENGINE=embedded|artifact`` and its record carries the kind;
a run whose result names an engine of the other kind is stored as failed.

Before its first run (and before the probes) the sweep says how long it will
take (forecast.py), as a warning when that exceeds the matrix's budget; the
sweep plan records the forecast and the matrix's ``why`` (its size's reason).
"""
from __future__ import annotations

import os
import shlex
import signal
import sys
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from reprokit.cluster import testbed
from reprokit.cluster.testbed import testbed_of
from reprokit.core.errors import UserError
from reprokit.core.jsonfile import write_json
from reprokit.engines.base import EMBEDDED
from reprokit.engines.choice import engine_kind
from reprokit.run import settings as run_settings
from reprokit.study.paper.claims import Matrix, Study
from reprokit.study.paper.planning import RunConfig
from reprokit.study.paper.rates import NATIVE
from reprokit.study.paper.target import Target, make_target
from reprokit.study.store.records import (
    AlreadyStored,
    Origin,
    Provenance,
    Record,
    RecordConfig,
    Store,
    StoredResult,
    Sweep,
    now_iso,
)
from reprokit.study.store.sweep_plan import BandwidthChoice, Forecast
from reprokit.study.sweep import provenance as study_provenance, runner as study_runner
from reprokit.study.sweep.choice import choose
from reprokit.study.sweep.forecast import forecast
from reprokit.study.sweep.options import (
    EngineCheck,
    Resume,
    SweepRequest,
    check_runs,
    given,
    resume_of,
    sweep_request,
)
from reprokit.study.sweep.progress import Progress
from reprokit.vocabulary import RunStatus

INTERRUPTED_FILE = "interrupted.json"  # in an attempt folder whose run was stopped: why, and when
TIMEOUT_MARGIN_S = 300  # beyond the run's own RUN_TIMEOUT: ck's start, the launcher's teardown

MachineConfig = Callable[[str], object]  # a machine entry's name -> its cluster description (hosts.json data)
ProbeRun = Callable[[str, Path], dict[str, Any]]  # (model, run folder) -> the baseline probe's unified result; UserError if none


@dataclass
class SweepSummary:
    sweep_id: str
    total: int
    already_stored: int
    ok: int = 0
    failed: list[str] = field(default_factory=list)
    stopped: str | None = None
    cpu_bound: list[RunConfig] = field(default_factory=list)  # emulated runs that warned their CPU set the pace


def new_sweep_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def create_sweep(store: Store, study: Study, target: Target, request: SweepRequest, options: dict[str, Any],
                 restore_rate: str | None = None, sweep_id: str | None = None,
                 choices: tuple[BandwidthChoice, ...] = ()) -> Sweep:
    """The new sweep's plan, stored with the forecast of its runs (forecast.py; its probes' time counted)."""
    bandwidths = tuple(request.bandwidths) or tuple(dict.fromkeys(b for c in choices for b in c.bandwidths))
    sweep = Sweep(sweep_id=sweep_id or new_sweep_id(), study=study.name, created=now_iso(), target=target,
                  models=tuple(request.models), variants=tuple(request.variants), bandwidths=bandwidths,
                  repetitions=request.repetitions, profile=request.profile, env=dict(request.env), quick=request.quick,
                  options=options, origin=store.origin(), restore_rate=restore_rate, choices=choices,
                  timeline_repetition=request.timeline_repetition, engines=request.engines, why=request.why,
                  only=request.only)
    expected = forecast(sweep.runs(), store.local_records(), target, sweep.profile, sweep.env, sweep_matrix(study, sweep),
                        choices, spent_s=sum(c.probe_seconds or 0.0 for c in choices))
    sweep = replace(sweep, forecast=expected)
    store.new_sweep(sweep)
    return sweep


def sweep_matrix(study: Study, sweep: Sweep) -> Matrix:
    """The matrix a sweep runs: the quick one or the full one (its budget and run_seconds)."""
    return study.quick if sweep.quick else study.matrix


def forecast_line(expected: Forecast) -> str:
    """The forecast as the sweep says it before its first run: a warning when above the matrix's budget."""
    return f"study: {'warning: ' if expected.over_budget else ''}forecast: {expected.line()}"


def probe_choices(study: Study, store: Store, target: Target, request: SweepRequest, sweep_id: str,
                  run_probe: ProbeRun, console: TextIO = sys.stdout,
                  clock: Callable[[], float] = time.monotonic) -> tuple[BandwidthChoice, ...]:
    """One baseline probe per model on the unshaped links, and the bandwidths chosen from each (with the probe's
    duration, which the forecast of the runs starts from)."""
    probes = [RunConfig(m, "baseline", NATIVE, 1, EMBEDDED) for m in request.models]
    ahead = forecast(probes, store.local_records(), target, request.profile, request.env,
                     replace(study.quick if request.quick else study.matrix, budget_s=None))
    print(f"study: first {len(probes)} baseline probe(s), {ahead.line()}; the forecast of the runs follows them",
          file=console, flush=True)
    choices = []
    for model in request.models:
        run_dir = store.new_attempt_dir(f"{sweep_id}--probe--{model}")
        print(f"study: {model}: a baseline probe on the unshaped links, to choose the bandwidths "
              f"(communication/computation {', '.join(f'{r:g}' for r in request.ratios)})", file=console, flush=True)
        started = clock()
        result = run_probe(model, run_dir)
        choice = choose(model, result, str(run_dir.relative_to(store.root)), study.parameters,
                        study.parameters_source, len(target.hosts), request.ratios, target.link_capacity,
                        probe_seconds=clock() - started)
        print(f"study: {choice.summary()}", file=console, flush=True)
        choices.append(choice)
    return tuple(choices)


def guarded_probe(study: Study, target: Target, request: SweepRequest,
                  shape: Callable[[str | None], None] | None) -> ProbeRun:
    """The real probe: a baseline run through ck run on the unshaped links, guarded like every sweep run."""
    def run(model: str, run_dir: Path) -> dict[str, Any]:
        # Our baseline: the bandwidth rule needs the p3-comm figures only our scripts report.
        env = {**request.env, **study.variants.get("baseline", {"VARIANT": "baseline"}), "PROFILE": request.profile,
               "ENGINE": EMBEDDED}
        command = study_runner.run_command(study.program, model, target.name, run_dir, env)
        with _Stop() as stop:
            if shape is not None:
                shape(None)
            outcome = _guarded(command, run_dir, run_timeout(request.profile, env), stop)
        if outcome.stopped:
            raise UserError(f"the baseline probe of {model} was {outcome.reason}; nothing was stored: "
                            f"start the sweep again")
        if not outcome.ok or outcome.result is None:
            raise UserError(f"the baseline probe of {model} failed: {outcome.reason} (its run folder: {run_dir}); "
                            f"fix that, or give the bandwidths yourself: --bandwidths=RATE,RATE,...")
        return outcome.result

    return run


def resumed_sweep(store: Store, resume: Resume) -> Sweep:
    """The stored sweep --resume continues: the one named, or the newest."""
    known = store.sweeps()
    if not known:
        raise UserError(f"there is no sweep to resume in {store.root}; start one with: ck reproduce study:{store.study}")
    return known[-1] if resume.sweep_id is None else store.sweep(resume.sweep_id)


def open_sweep(options: Mapping[str, Any], study: Study, store: Store, program_models: set[str], machine_config: MachineConfig,
               console: TextIO = sys.stdout, probe: ProbeRun | None = None,
               artifact_builds: Collection[str] = (), clock: Callable[[], float] = time.monotonic,
               engine_check: EngineCheck | None = None) -> tuple[Sweep, Target]:
    """The sweep `ck reproduce` runs, and its target: the stored one --resume names (with its own settings,
    on the machine as it is registered now), or a new one from the options, stored before any run (after
    the baseline probes that choose its bandwidths, where the matrix asks for that: ``probe``, or a real
    guarded run). ``artifact_builds``: the authors' builds registered (for --engines)."""
    resume = resume_of(options)
    if resume is not None:
        sweep = resumed_sweep(store, resume)
        name = sweep.target.name
        target = make_target(name, machine_config(name) if name else None, sweep.target.link_capacity)
        check_runs(study, sweep.models, sweep.variants, sweep.env, sweep.profile, target,  # a stored sweep is input too
                   sweep.engines, engine_check)
        return sweep, target
    name = str(options.get("target", "") or "")
    machine = machine_config(name) if name else None
    target = make_target(name, machine, options.get("link_capacity") or None)
    request = sweep_request(options, study, target, program_models, console, artifact_builds, engine_check)
    state = testbed_of(machine) if target.kind == "testbed" else None
    restore = state.rate if state is not None else None
    sweep_id = new_sweep_id()
    choices: tuple[BandwidthChoice, ...] = ()
    if request.ratios:
        if probe is None:
            check_can_shape(target)
            shape = testbed_shaper(target)
            try:
                choices = probe_choices(study, store, target, request, sweep_id,
                                        guarded_probe(study, target, request, shape), console, clock)
            finally:
                if shape is not None:
                    shape(restore)
        else:
            choices = probe_choices(study, store, target, request, sweep_id, probe, console, clock)
    return create_sweep(store, study, target, request, given(options), restore_rate=restore, sweep_id=sweep_id,
                        choices=choices), target


def check_can_shape(target: Target, euid: int | None = None) -> None:
    if target.shaping and (os.geteuid() if euid is None else euid) != 0:
        raise UserError(f"shaping the links of testbed {target.testbed} needs root (tc in its namespaces); run as root")


class _Stop:
    """Signal handlers for the sweep: stop the current run, then stop the sweep."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.current: study_runner.GuardedRun | None = None
        self._previous: dict[signal.Signals, Any] = {}  # each signal's handler before the sweep

    def __enter__(self) -> _Stop:
        def handler(signum: int, _frame: FrameType | None) -> None:
            self.reason = self.reason or f"stopped by {signal.Signals(signum).name}"
            if self.current is not None:
                self.current.stop(self.reason)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._previous[sig] = signal.signal(sig, handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def _guarded(command: list[str], run_dir: Path, timeout_s: float, stop: _Stop) -> study_runner.RunOutcome:
    """run_once under the sweep's stop handlers: a stop request tears the current run down."""
    def on_start(run: study_runner.GuardedRun) -> None:
        stop.current = run
        if stop.reason:
            run.stop(stop.reason)

    try:
        return study_runner.run_once(command, run_dir, timeout_s, on_start=on_start)
    finally:
        stop.current = None


def run_timeout(profile: str, env: dict[str, str]) -> float:
    raw = env.get("RUN_TIMEOUT", "").strip()
    base = int(raw) if raw.isdigit() else run_settings.PROFILES.get(profile, run_settings.PROFILES["paper"]).timeout_s
    return base + TIMEOUT_MARGIN_S


def run_sweep(study: Study, store: Store, sweep: Sweep, target: Target,
              shape: Callable[[str | None], None] | None, console: TextIO = sys.stdout) -> SweepSummary:
    """Run every configuration of the sweep that is not stored yet."""
    sweep_id = sweep.sweep_id
    runs = sweep.runs()
    pending = [r for r in runs if not store.has_record(r.record_id(sweep_id))]
    summary = SweepSummary(sweep_id, len(runs), len(runs) - len(pending))
    if summary.already_stored:
        print(f"study: resuming sweep {sweep_id}: {summary.already_stored} of {len(runs)} run(s) already stored",
              file=console, flush=True)
    progress = Progress(len(runs), summary.already_stored, console)
    environment = study_provenance.environment()
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
                        shape(None if config.bandwidth == NATIVE else sweep.link_rate(config.bandwidth))
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
                if record.ok:
                    summary.ok += 1
                    if record.run_result is not None and record.run_result.cpu_bound:
                        summary.cpu_bound.append(config)
                    value = getattr(record.run_result, study.metric, None)
                    progress.finish(config.label(), f"{value:.2f} samples/s" if isinstance(value, (int, float)) else "ok")
                else:
                    summary.failed.append(f"{config.label()}: {record.failure_reason}")
                    progress.finish(config.label(), f"FAILED: {(record.failure_reason or '')[:160]}")
        finally:
            if shape is not None and shaped is not None:
                try:
                    shape(sweep.restore_rate)  # the rate the testbed was created with
                except UserError as exc:
                    print(f"study: warning: could not restore the links: {exc}", file=console, flush=True)
    if stop.reason and summary.stopped is None:
        summary.stopped = stop.reason
    return summary


def _run_one(study: Study, store: Store, sweep: Sweep, target: Target, config: RunConfig, environment: Provenance,
             engine_pythons: dict[str, str], origin: Origin, shaped: bool, shape_error: str | None,
             stop: _Stop) -> Record | None:
    record_id = config.record_id(sweep.sweep_id)
    run_dir = store.new_attempt_dir(record_id)
    env = {**sweep.env, **study.variants[config.variant], "PROFILE": sweep.profile, "ENGINE": config.engine}
    if config.repetition == sweep.timeline_repetition:
        env["TIMELINE"] = "1"
    command = study_runner.run_command(study.program, config.model, target.name, run_dir, env)
    if shape_error is not None:
        now = time.time()
        outcome = study_runner.RunOutcome(RunStatus.FAILED, shape_error, None, now, now, None)
    else:
        outcome = _guarded(command, run_dir, run_timeout(sweep.profile, env), stop)
        if outcome.stopped:  # by the sweep's own stop, or from outside (a signal to ck, its launcher or guard)
            stop.reason = stop.reason or f"stopped because run {config.label()} was {outcome.reason}"
            write_json(run_dir / INTERRUPTED_FILE, {"reason": outcome.reason, "at": now_iso()})
            return None
    provenance = study_provenance.run_provenance(environment, run_dir, command, outcome, env)
    ran = provenance.engine
    if outcome.ok and ran and engine_kind(ran) != config.engine:  # e.g. ENGINE_ENV pinned an engine of the other kind
        outcome = study_runner.RunOutcome(RunStatus.FAILED, f"ran on {ran}, not on the {config.engine} engine the sweep asked "
                                                 f"for (drop --env.ENGINE_ENV)", outcome.result, outcome.started_at,
                                          outcome.ended_at, outcome.exit_code)
    python = provenance.engine_python
    if python and python not in engine_pythons:
        engine_pythons[python] = study_provenance.engine_python_version(python)
    provenance = study_provenance.sweep_part(provenance, sweep, target, config.bandwidth, shaped,
                                             engine_pythons[python] if python else None)
    return Record(
        record_id=record_id, study=study.name, sweep_id=sweep.sweep_id, origin=origin,
        config=RecordConfig(model=config.model, variant=config.variant, bandwidth=config.bandwidth,
                            repetition=config.repetition, profile=sweep.profile, target=target,
                            engine=config.engine),
        status=outcome.status, failure_reason=outcome.reason,
        result=None if outcome.result is None else StoredResult.from_dict(outcome.result),
        provenance=provenance, run_folder=str(run_dir.relative_to(store.root)),
    )


def testbed_shaper(target: Target) -> Callable[[str | None], None] | None:
    """tc shaping of the testbed's hosts; None for targets whose links the sweep cannot shape."""
    if not target.shaping or target.testbed is None:
        return None

    name, hosts, sharing = target.testbed, len(target.hosts), target.link_sharing

    def shape(rate: str | None) -> None:
        testbed.shape(name, hosts, rate, sharing)

    return shape


def reproduce(options: Mapping[str, Any], study: Study, store: Store, program_models: set[str], machine_config: MachineConfig,
              console: TextIO = sys.stdout, artifact_builds: Collection[str] = (),
              engine_check: EngineCheck | None = None) -> SweepSummary:
    """`ck reproduce study:NAME`'s sweep: open it and run what is not stored yet. A stopped sweep is one UserError;
    ck/study.py writes the report next (the sweep stands under the report and never imports it), then refuses
    failed runs (``failed_runs``)."""
    sweep, target = open_sweep(options, study, store, program_models, machine_config, console,
                               artifact_builds=artifact_builds, engine_check=engine_check)
    check_can_shape(target)
    print(f"study: sweep {sweep.sweep_id} on {target.label} (engines: {', '.join(sweep.engines)}): "
          f"{target.bandwidth_note()}", file=console, flush=True)
    print(f"study: results store {store.root}", file=console, flush=True)
    print(forecast_line(pending_forecast(study, store, sweep, target)), file=console, flush=True)
    summary = run_sweep(study, store, sweep, target, testbed_shaper(target), console)
    print(summary_line(summary, store.root), file=console, flush=True)
    for line in larger_k_advice(study.name, sweep, store.root, summary.cpu_bound):
        print(line, file=console, flush=True)
    if summary.stopped:
        raise UserError(f"sweep {summary.sweep_id} {summary.stopped}; the runs stored are kept; continue with: "
                        f"ck reproduce study:{study.name} --resume={summary.sweep_id}")
    return summary


def failed_runs(summary: SweepSummary, report: Path) -> None:
    """The sweep's failed runs, after its report (``report``, which shows their reasons): one UserError."""
    if summary.failed:
        raise UserError(f"{len(summary.failed)} run(s) failed (stored with their reasons, see {report}); "
                        f"first: {summary.failed[0]}")


def pending_forecast(study: Study, store: Store, sweep: Sweep, target: Target) -> Forecast:
    """The forecast of the sweep's runs not stored yet: the one stored with a new sweep, else (resumed) made
    again, from what the runs stored since took too."""
    runs = sweep.runs()
    pending = [r for r in runs if not store.has_record(r.record_id(sweep.sweep_id))]
    if sweep.forecast is not None and len(pending) == len(runs):
        return sweep.forecast
    return forecast(pending, store.local_records(), target, sweep.profile, sweep.env, sweep_matrix(study, sweep),
                    sweep.choices)


def larger_k_advice(study: str, sweep: Sweep, store_root: Path, cpu_bound: list[RunConfig]) -> list[str]:
    """Per model and bandwidth whose emulated runs warned they were CPU-bound: the command that runs that claim's
    configurations again at twice the k, into the same store (the report gives each k its own figure)."""
    lines = []
    planned = sweep.runs()
    for model, bandwidth in dict.fromkeys((c.model, c.bandwidth) for c in cpu_bound):
        runs = [c for c in cpu_bound if (c.model, c.bandwidth) == (model, bandwidth)]
        variants = [c.variant for c in planned if (c.model, c.bandwidth) == (model, bandwidth)]
        command = shlex.join(["ck", "reproduce", f"study:{study}", f"--target={sweep.target.name}",
                              f"--store={store_root}", f"--emulate={sweep.env.get('COMPUTE_PROFILE', '')}",
                              f"--dilation={sweep.dilation * 2:g}", f"--models={model}", f"--bandwidths={bandwidth}",
                              f"--variants={','.join(dict.fromkeys(variants))}"])
        lines.append(f"study: warning: {len(runs)} {model} run(s) at {bandwidth} were CPU-bound at "
                     f"k={sweep.dilation:g} (no emulated verdict from them); run them again at a larger k into this "
                     f"store: {command}")
    return lines


def summary_line(summary: SweepSummary, store_root: Path) -> str:
    stored = summary.already_stored + summary.ok + len(summary.failed)
    return (f"study: sweep {summary.sweep_id}: {stored} of {summary.total} run(s) stored "
            f"({summary.ok} ok, {len(summary.failed)} failed this time) in {store_root}")
