"""From run records to the analysis: the runs as a table, statistics per configuration, speedups, verdicts, badges.

The runs as a table (pandas): per setup and configuration, n (successful runs;
failed runs are counted beside them), the mean and standard deviation as
measured, and the geometric mean with its log-scale interval (speedup.py).
Each configuration also carries the communication figures its runs measured
(comm_s_per_iter, compute_s_per_iter, their ratio, comm_wait_s_per_iter,
overlap). A setup is one evaluator's target: (origin of the store, target), so
runs imported from other evaluators stay side by side with local ones.

``analyse`` puts it together: the speedups (speedup.py), a verdict per claim,
setup and engine (verdict.py) and the badges (badge.py).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from reprokit.emulation.profile import EMULATED, REAL
from reprokit.run.result import Result
from reprokit.study.analysis.badge import Badge, badges
from reprokit.study.analysis.judged import judge_all
from reprokit.study.analysis.speedup import (
    claim_pairs,
    comm_to_compute,
    mean_interval,
    ordered,
    side_by_side,
    speedups,
    study_series,
    too_few,
)
from reprokit.study.analysis.verdict import (
    ClaimVerdict,
    Setup,
    Verdict,
    decided_on,
    engines_of,
    overall,
    setups,
)
from reprokit.study.paper.claims import Study
from reprokit.study.paper.rates import NATIVE, rate_bps
from reprokit.study.store.records import Record

# --- records as a table ----------------------------------------------------------------------------

COLUMNS = ["setup", "origin", "origin_host", "imported", "target", "target_kind", "num_hosts", "shaping",
           "link_capacity", "profile", "model", "engine", "variant", "bandwidth", "bandwidth_bps", "repetition", "ok",
           "throughput", "params_in_sync", "failure_reason", "record_id", "sweep_id",
           "comm_s", "compute_s", "comm_wait_s", "overlap", "host_cpu_busy", "cpu_bound", "compute", "dilation", "gpu"]
COMM_FIGURES = {"comm_s": "comm_s_per_iter", "compute_s": "compute_s_per_iter",
                "comm_wait_s": "comm_wait_s_per_iter", "overlap": "overlap",
                "host_cpu_busy": "host_cpu_busy"}  # column -> unified Result's field


def setup_label(record: Record) -> str:
    origin = record.origin
    who = "here" if not record.imported_from else f"{origin.host or '?'} ({origin.id[:8]})"
    return f"{record.config.target.label} [{who}]"


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _figure(result: Result | None, key: str) -> float:
    """A figure of a run's unified result (``key``: a Result field); NaN if the run wrote none or not that one."""
    return _number(None if result is None else getattr(result, key, None))


def frame(records: Iterable[Record], metric: str = "throughput_samples_per_sec") -> pd.DataFrame:
    """One row per run; ``metric``: the Result field that is a run's throughput (the study's metric)."""
    rows = []
    for r in records:
        config, target, result = r.config, r.config.target, r.run_result
        throughput = _figure(result, metric) if r.ok else math.nan
        rows.append({
            "setup": setup_label(r), "origin": r.origin.id, "origin_host": r.origin.host,
            "imported": bool(r.imported_from), "target": target.label, "target_kind": target.kind,
            "num_hosts": len(target.hosts), "shaping": target.shaping,
            "link_capacity": target.link_capacity, "profile": config.profile,
            "model": config.model, "engine": config.engine, "variant": config.variant, "bandwidth": config.bandwidth,
            "bandwidth_bps": rate_bps(config.bandwidth) if config.bandwidth != NATIVE else math.nan,
            "repetition": config.repetition, "ok": r.ok,
            "throughput": throughput if throughput > 0 else math.nan,  # the log scale needs it positive
            "params_in_sync": None if result is None else result.params_in_sync, "failure_reason": r.failure_reason,
            "record_id": r.record_id, "sweep_id": r.sweep_id,
            **{column: _figure(result, key) if r.ok else math.nan for column, key in COMM_FIGURES.items()},
            "cpu_bound": bool(result is not None and r.ok and result.cpu_bound),
            "compute": EMULATED if r.emulated else REAL,
            "dilation": r.dilation,  # 1 for measured runs; emulated runs at two k are two configurations
            "gpu": r.gpu,  # "" for measured runs; emulated runs at two GPUs' compute are two configurations
        })
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.astype({"ok": bool, "imported": bool, "shaping": bool, "cpu_bound": bool, "throughput": float,
                      "bandwidth_bps": float, "dilation": float, **{column: float for column in COMM_FIGURES}})


CONFIG_KEYS = ["setup", "profile", "model", "bandwidth", "dilation", "gpu", "engine", "variant"]


def summarize(df: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per setup, profile, model, bandwidth and variant: n, failures, mean, std, geometric mean and its
    log-scale interval, and the communication figures (means over the successful runs)."""
    out = []
    for key, group in df.groupby(CONFIG_KEYS, sort=False, dropna=False):
        ok = group[group["ok"] & group["throughput"].notna()]
        stats = mean_interval(ok["throughput"].astype(float).tolist(), confidence)
        out.append({**dict(zip(CONFIG_KEYS, key)), "bandwidth_bps": group["bandwidth_bps"].iloc[0],
                    "n": stats.n, "failed": int((~group["ok"]).sum()), "mean": stats.mean, "std": stats.std,
                    "geometric_mean": stats.geometric_mean, "ci_low": stats.low, "ci_high": stats.high,
                    "comm_s_per_iter": ok["comm_s"].mean(), "compute_s_per_iter": ok["compute_s"].mean(),
                    "comm_to_compute": comm_to_compute(ok), "comm_wait_s_per_iter": ok["comm_wait_s"].mean(),
                    "overlap": ok["overlap"].mean(), "note": too_few(stats.n)})
    cols = CONFIG_KEYS + ["bandwidth_bps", "n", "failed", "mean", "std", "geometric_mean", "ci_low", "ci_high",
                          "comm_s_per_iter", "compute_s_per_iter", "comm_to_compute", "comm_wait_s_per_iter",
                          "overlap", "note"]
    result = pd.DataFrame(out, columns=cols)
    return ordered(result)


# --- the analysis ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Analysis:
    runs: pd.DataFrame
    summary: pd.DataFrame
    speedups: pd.DataFrame
    verdicts: list[ClaimVerdict]
    overall: dict[str, Verdict]  # per claim, on the engine the badge judges it on (decided)
    badges: list[Badge]
    setups: list[Setup]
    side_by_side: pd.DataFrame = field(default_factory=pd.DataFrame)  # the engines' throughputs per configuration
    overall_by_engine: dict[str, dict[str, Verdict]] = field(default_factory=dict)  # engine -> claim -> verdict
    decided: dict[str, str] = field(default_factory=dict)  # claim -> the engine the badge judges it on
    emulated_speedups: pd.DataFrame = field(default_factory=pd.DataFrame)  # of emulated runs: never in the above
    emulated_runs: pd.DataFrame = field(default_factory=pd.DataFrame)  # each emulated run (never in runs)
    untested: str = ""  # when no claim could be tested on these runs: why and how to (the report's first line)


def nothing_tested(study: Study, verdicts: Sequence[ClaimVerdict], found: Sequence[Setup],
                   emulated_runs: int = 0) -> str:
    """The report's first line when no claim could be tested on these runs (no runs, or every verdict 'not
    testable here'): why, and how to test them; "" when some claim could be. ``emulated_runs``: how many emulated
    runs are stored (they never test a claim)."""
    if found and not all(v.verdict == Verdict.NOT_TESTABLE for v in verdicts):
        return ""
    if not found:
        why = ("no runs stored yet" if not emulated_runs else
               f"no measured runs stored yet (the {emulated_runs} emulated run(s) stored give emulated figures "
               f"beside the claims, never a measured verdict)")
    elif all(s.kind == "embedded" for s in found):
        why = ("every run is on the embedded default, whose roles share this host over loopback, a bandwidth that "
               "cannot be set, while every claim is about a cluster's network")
    else:
        why = f"every claim is '{Verdict.NOT_TESTABLE}' on {', '.join(s.label for s in found)} (the verdicts say why)"
    return (f"No claim could be tested on these runs: {why}. To test them, make a testbed of 3 hosts on this "
            f"machine (as root): ck testbed cluster:NAME --hosts=3 (it prints the ck add machine line that registers "
            f"it), then: ck reproduce study:{study.name} --target=NAME --quick")


def analyse(study: Study, records: Iterable[Record], program_models: set[str]) -> Analysis:
    """Verdicts and badges from the measured runs; emulated runs (--emulate) only give their speedups, which the
    report shows as emulated verdicts (labelled.py)."""
    every = frame(records, study.metric)
    df = every[every["compute"] != EMULATED].reset_index(drop=True)
    emulated = every[every["compute"] == EMULATED].reset_index(drop=True)
    verdicts = judge_all(study, df, program_models)
    summary = summarize(df, study.tolerance.confidence)
    speedup_rows = speedups(df, claim_pairs(study), study.tolerance.confidence)
    decided = decided_on(study, verdicts)
    return Analysis(
        runs=df, summary=summary, speedups=speedup_rows, verdicts=verdicts,
        overall={c.id: overall(verdicts, c.id, decided[c.id]) for c in study.claims},
        badges=badges(study, df, verdicts, program_models), setups=setups(df),
        side_by_side=side_by_side(summary, speedup_rows, study_series(study)),
        overall_by_engine={e: {c.id: overall(verdicts, c.id, e) for c in study.claims} for e in engines_of(df)},
        decided=decided, untested=nothing_tested(study, verdicts, setups(df), len(emulated)),
        emulated_speedups=speedups(emulated, claim_pairs(study), study.tolerance.confidence),
        emulated_runs=emulated,
    )
