"""How long a sweep will take, said before its first run, against the budget its matrix states.

A run's duration (ck included) is estimated from the first of:

1. earlier runs: the median ``provenance.duration_s`` of this store's own
   successful runs of the same model, engine and bandwidth, with the same
   profile and run size (SIZE_KEYS), on the same target (so a resumed sweep
   learns from its own runs);
2. the model's baseline probe, on a testbed whose bandwidths were chosen from
   it (choice.py): the probe's duration on the unshaped links, plus per batch
   the time the wire bytes take at the chosen bandwidth, 8 x wire bytes / B,
   as if none of it were hidden behind computation (so it errs long);
3. the study entry's seconds per run for the model (the matrix's
   ``run_seconds``, with its source), only when the sweep runs the matrix's
   own profile and run size.

Runs with none of these are counted as without an estimate, and the forecast
says how many. A forecast above the matrix's budget (the quick study: 30
minutes) is said as a warning before the first run; the sweep runs anyway.

``hindcast`` checks the forecast against the record: for each stored run, the
estimate made from what was known just before it started (the results pages
put it beside the run's recorded time).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from reprokit.engines.base import EMBEDDED
from reprokit.run import settings as run_settings
from reprokit.study.paper.claims import Matrix
from reprokit.study.paper.planning import RunConfig
from reprokit.study.paper.rates import NATIVE, shaped_bps
from reprokit.study.paper.target import Target
from reprokit.study.store.records import Record
from reprokit.study.store.sweep_plan import BandwidthChoice, Forecast, duration_text

# The run settings that set how long a run takes; runs that differ in any are no estimate for each other.
SIZE_KEYS = ("NUM_BATCHES", "BATCH_SIZE", "IMAGE_SHAPE", "NUM_EPOCHS", "NUM_WORKERS", "NUM_SERVERS",
             "WORKER_THREADS", "COMPUTE", "COMPUTE_PROFILE", "DILATION")  # an emulated GPU's compute sets the pace


HistoryKey = tuple[str, str, str, tuple[str, ...]]  # model, engine, bandwidth, run_size


def run_size(env: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(env.get(key, "")) for key in SIZE_KEYS)


def history(records: Sequence[Record], target: Target, profile: str) -> dict[HistoryKey, list[float]]:
    """Durations of the store's own successful runs on this target and profile, per (model, engine, bandwidth,
    run size)."""
    out: dict[HistoryKey, list[float]] = {}
    for r in records:
        seconds, env = r.provenance.duration_s, r.provenance.env_overrides
        if (not r.ok or r.imported_from or r.config.profile != profile or r.config.target.label != target.label
                or seconds is None or seconds <= 0 or env is None):
            continue
        out.setdefault((r.config.model, r.config.engine, r.config.bandwidth, run_size(env)), []).append(seconds)
    return out


def probe_estimate(choice: BandwidthChoice, bandwidth: str, batches: int) -> float | None:
    """A run at ``bandwidth`` from the model's probe: its duration plus the wire time the shaping adds, unhidden."""
    if choice.probe_seconds is None or batches <= 0:
        return None
    if bandwidth == NATIVE:
        return choice.probe_seconds
    return choice.probe_seconds + batches * 8 * choice.wire_bytes_per_iter / shaped_bps(bandwidth)


def estimates(runs: Sequence[RunConfig], records: Sequence[Record], target: Target, profile: str,
              env: Mapping[str, str], matrix: Matrix,
              choices: Sequence[BandwidthChoice] = ()) -> list[tuple[RunConfig, float | None, str]]:
    """Each run's estimate in seconds, with what it is from (see the module's docstring), or (None, "")."""
    earlier = history(records, target, profile)
    size = run_size(env)
    own_size = profile == matrix.profile and size == run_size(dict(matrix.env))
    study_seconds = dict(matrix.run_seconds) if own_size else {}
    probe_of = {c.model: c for c in choices}
    batches: dict[str, int] = {}
    out: list[tuple[RunConfig, float | None, str]] = []
    for run in runs:
        seconds, source = None, ""
        durations = earlier.get((run.model, run.engine, run.bandwidth, size))
        if durations:
            seconds, source = statistics.median(durations), f"median of {len(durations)} earlier run(s)"
        elif run.model in probe_of:
            if run.model not in batches:
                batches[run.model] = run_settings.resolve(run.model, {**env, "PROFILE": profile}, profile).num_batches
            seconds = probe_estimate(probe_of[run.model], run.bandwidth, batches[run.model])
            source = "its probe plus the shaped link's wire time"
        if seconds is None and run.model in study_seconds:
            seconds, source = study_seconds[run.model], "the study entry's run_seconds"  # its meta gives their source
        out.append((run, seconds, source if seconds is not None else ""))
    return out


def forecast(runs: Sequence[RunConfig], records: Sequence[Record], target: Target, profile: str,
             env: Mapping[str, str], matrix: Matrix, choices: Sequence[BandwidthChoice] = (),
             spent_s: float = 0.0) -> Forecast:
    """The forecast of ``runs`` (the sweep's runs not stored yet), see the module's docstring. ``matrix``: the one
    the sweep runs (its budget and its run_seconds, which hold for its own profile and run settings only);
    ``spent_s``: time the sweep already took (its probes), counted against the budget."""
    per_group: dict[tuple[str, str], list[tuple[float, str]]] = {}  # (model, engine) -> (seconds, source) per run
    unknown = 0
    for run, seconds, source in estimates(runs, records, target, profile, env, matrix, choices):
        if seconds is None:
            unknown += 1
            continue
        per_group.setdefault((run.model, run.engine), []).append((seconds, source))
    basis = []
    for (model, engine), group in per_group.items():
        low, high = min(s for s, _ in group), max(s for s, _ in group)
        each = duration_text(low) if math.isclose(low, high, rel_tol=0.05) \
            else f"{duration_text(low)} to {duration_text(high)}"
        sources = ", ".join(dict.fromkeys(source for _, source in group))
        basis.append(f"{model}{'' if engine == EMBEDDED else ' (' + engine + ')'}: {len(group)} run(s), "
                     f"{each} each from {sources}")
    return Forecast(runs=len(runs), seconds=sum(s for group in per_group.values() for s, _ in group),
                    unknown=unknown, budget_s=matrix.budget_s, basis=tuple(basis), spent_s=spent_s)


def _epoch(stamp: object) -> float | None:
    """The seconds since the epoch a record's ``started_at``/``ended_at`` ends with ("ISO (1795896836.954)")."""
    text = str(stamp or "")
    try:
        return float(text[text.rindex("(") + 1:text.rindex(")")])
    except ValueError:
        return None


def hindcast(records: Sequence[Record], matrices: Sequence[Matrix]) -> dict[str, tuple[float, str]]:
    """Per successful record: the estimate this module makes for its run from what it knew just before the run
    started, as a sweep resumed then would have said it (seconds, and what from): the runs its store had recorded by then (records of the same origin that
    had ended, imported ones as the store that made them saw them), and the run_seconds of the matrix (of
    ``matrices``) whose profile and run size the run had. Its probe, if its sweep had one, is not in the records:
    an estimate that would have come from it is not made again. Records without an estimate are left out."""
    ended = [(r, _epoch(r.provenance.ended_at)) for r in records]
    out: dict[str, tuple[float, str]] = {}
    for record in records:
        started, env = _epoch(record.provenance.started_at), record.provenance.env_overrides
        if not record.ok or started is None or env is None or not matrices:
            continue
        known = [replace(r, imported_from=None) for r, end in ended
                 if r.origin.id == record.origin.id and end is not None and end <= started]
        matrix = next((m for m in matrices if m.profile == record.config.profile
                       and run_size(env) == run_size(dict(m.env))), matrices[0])
        [(_, seconds, source)] = estimates([record.config.run], known, record.config.target, record.config.profile,
                                           env, matrix)
        if seconds is not None:
            out[record.record_id] = (seconds, source)
    return out
