"""Throughput and speedup intervals, and the speedups of every configuration.

Statistics: per configuration, the geometric mean of the successful runs'
throughputs with a Student-t interval on the log scale (mean_interval); the
speedup of a variant over its reference is the ratio of the geometric means
with a Welch interval on the log scale (ratio_interval says why: neither
interval can fall below zero). The t quantiles are scipy's (scipy.special.stdtrit, the function behind
scipy.stats.t.ppf, without scipy.stats' 0.4 s import).

Every speedup is per engine kind (``embedded``: stock MXNet 1.9.1, its own P3
and its two baselines; ``artifact``: the authors' 2018 baseline and P3 builds)
and pairs variants of one engine only. Each carries its reference's measured
communication-to-computation ratio; the authors' builds report none, so a
speedup of theirs takes the ratio the stock baseline measured in the same
configuration (``ratio_engine`` says whose).

A study compares its subject (the entry's ``subject``: P3's study by default) with the baselines; which
series the report shows side by side follows from it (side_by_side_series).

Two baselines: the claims are P3 over ``baseline`` (the optimizer on the
servers, as the paper's baseline). MXNet 1.9.1's P3 must update on the
workers, so each P3 variant is also set against ``baseline-worker-update``
(the optimizer on the workers): that speedup isolates slicing and priority
from where the optimizer runs; it is shown, never judged (verdict.py).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
from scipy.special import stdtrit

from reprokit.engines.base import ARTIFACT, EMBEDDED
from reprokit.engines.choice import ENGINE_KINDS
from reprokit.study.paper.claims import DEFAULT_SUBJECT, MIN_RUNS, Study, Subject
from reprokit.vocabulary import Variant


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with df degrees of freedom (scipy.stats.t.ppf's own function)."""
    if not 0.0 < p < 1.0 or df <= 0:  # scipy answers nan or inf here: a study's bad confidence must be refused
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    return float(stdtrit(df, p))


@dataclass(frozen=True)
class MeanInterval:
    n: int
    mean: float  # arithmetic mean, as measured
    std: float
    low: float  # the interval of the geometric mean (log scale); NaN when n < 2
    high: float
    geometric_mean: float = math.nan


def _logs(values: Sequence[float], what: str) -> list[float]:
    bad = [v for v in values if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"{what} must be positive finite numbers on the log scale, got {bad[0]!r}")
    return [math.log(v) for v in values]


def mean_interval(values: Sequence[float], confidence: float) -> MeanInterval:
    """Mean, standard deviation and a log-scale Student-t interval (see log_t_interval) of positive values."""
    n = len(values)
    if n == 0:
        return MeanInterval(0, math.nan, math.nan, math.nan, math.nan)
    logs = _logs(values, "throughputs")
    mean, gmean = statistics.fmean(values), math.exp(statistics.fmean(logs))
    if n < 2:
        return MeanInterval(1, mean, math.nan, math.nan, math.nan, gmean)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return MeanInterval(n, mean, statistics.stdev(values), gmean * math.exp(-half), gmean * math.exp(half), gmean)


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float],
                   confidence: float = 0.95) -> tuple[float, float, float]:
    """The ratio of the geometric means with its log-scale Welch interval; (ratio, nan, nan) with fewer
    than 2 values a side.

    Why the log scale and not Fieller's interval: both variants' throughputs are positive and their noise
    is multiplicative (a run is some percent slower), so on the log scale a speedup is a difference of
    two means and one Welch t interval (unequal variances, Welch-Satterthwaite degrees of freedom) serves
    it, back-transformed with exp: it can never fall below zero, it inverts exactly when the variants are
    swapped ([1/high, 1/low]), and the same log-scale t interval gives each configuration's throughput
    interval. Fieller's interval is exact for a ratio of normal means, but with the small n and wide
    spread of short CPU runs it can reach below zero (a numerator not clearly above zero) or be
    unbounded (a denominator not clearly above zero), and it gives nothing for a single throughput.
    The estimate is the ratio of geometric means, which for run-to-run spreads of a few percent differs
    from the ratio of arithmetic means by far less than the interval.
    """
    a, b = _logs(numerator, "throughputs"), _logs(denominator, "throughputs")
    diff = statistics.fmean(a) - statistics.fmean(b)
    ratio = math.exp(diff)
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return ratio, math.nan, math.nan
    va, vb = statistics.variance(a) / na, statistics.variance(b) / nb
    if va + vb == 0.0:
        return ratio, ratio, ratio
    df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))  # Welch-Satterthwaite
    half = t_quantile(0.5 + confidence / 2.0, df) * math.sqrt(va + vb)
    return ratio, math.exp(diff - half), math.exp(diff + half)


# --- speedups per configuration ------------------------------------------------------------------

ENGINE_NAMES = {ARTIFACT: "the authors' build", EMBEDDED: "stock MXNet 1.9.1"}
BASELINE = "baseline"  # stock MXNet, the optimizer on the servers: the claims are P3 over this one
WORKER_UPDATE = "baseline-worker-update"  # the optimizer on the workers, as P3 updates: shown beside, never judged
Series = tuple[tuple[str, str, str], ...]  # (engine, variant, label)
RatioSeries = tuple[tuple[str, str, str, str, str], ...]  # (engine, variant, reference, column prefix, label)


def on_workers(variants: Mapping[str, Mapping[str, str]], variant: str) -> bool:
    """Whether a study's variant (its run settings' VARIANT) updates on the workers, as the worker-update baseline
    does (P3), so that a speedup over that baseline isolates what the variant does besides."""
    value = variants.get(variant, {}).get("VARIANT", variant)
    return value in {str(x) for x in Variant if x.updates_on_workers} and variant != WORKER_UPDATE


def side_by_side_series(subject: Subject, variants: Mapping[str, Mapping[str, str]]) -> tuple[Series, RatioSeries]:
    """The report's throughputs per configuration, (engine, variant, label): the paper authors' builds (where the
    study's subject has them) beside stock MXNet 1.9.1's baseline, its worker-update baseline (where the study has
    that variant), the subject's variant, and any other program variant the study runs beside it (a VARIANT of its
    own: P3 beside ByteScheduler, not P3's ablations); and their speedups, (engine, variant, reference, column prefix,
    label): each over the baseline, and over the worker-update baseline where both update on the workers. For P3's
    study: the authors' 2018 builds beside MXNet 1.9.1's P3 and its two baselines."""
    v, name, theirs = subject.variant, subject.name, subject.authors_build
    others = [o for o in variants if o in {str(x) for x in Variant} and o not in (BASELINE, WORKER_UPDATE, v)]
    throughputs: list[tuple[str, str, str]] = []
    ratios: list[tuple[str, str, str, str, str]] = []
    if theirs:
        throughputs += [(ARTIFACT, BASELINE, f"{theirs} baseline"), (ARTIFACT, v, f"{theirs} {name}")]
        ratios.append((ARTIFACT, v, BASELINE, "artifact_speedup", f"authors' {name}/baseline"))
    throughputs.append((EMBEDDED, BASELINE, "MXNet 1.9.1 baseline"))
    if WORKER_UPDATE in variants:
        throughputs.append((EMBEDDED, WORKER_UPDATE, "MXNet 1.9.1 worker-update baseline"))
    for variant, label, prefix in [(v, name, "embedded"), *((o, Variant(o).shown, f"embedded_{o}") for o in others)]:
        throughputs.append((EMBEDDED, variant, f"MXNet 1.9.1 {label}"))
        ratios.append((EMBEDDED, variant, BASELINE, f"{prefix}_speedup", f"MXNet 1.9.1 {label}/baseline"))
        if WORKER_UPDATE in variants and on_workers(variants, variant):
            ratios.append((EMBEDDED, variant, WORKER_UPDATE, f"{prefix}_worker_update_speedup",
                           f"MXNet 1.9.1 {label}/worker-update baseline"))
    return tuple(throughputs), tuple(ratios)


def study_series(study: Study) -> tuple[Series, RatioSeries]:
    """side_by_side_series of a study: its subject and its variants."""
    return side_by_side_series(study.subject, study.variants)


# P3's study (a study entry without 'subject'), as the report showed it before studies named their subject.
SIDE_BY_SIDE, SIDE_BY_SIDE_RATIOS = side_by_side_series(
    DEFAULT_SUBJECT, {v: {"VARIANT": v} for v in (BASELINE, WORKER_UPDATE, "p3")})


def too_few(n: int) -> str:
    """The report's plain note for a configuration without enough runs for a verdict ('' when enough)."""
    return f"n={n} < {MIN_RUNS}: no verdict" if n < MIN_RUNS else ""


def comm_to_compute(group: pd.DataFrame) -> float:
    """The measured communication-to-computation ratio of runs: mean comm_s_per_iter / mean compute_s_per_iter."""
    both = group[group["comm_s"].notna() & group["compute_s"].notna() & (group["compute_s"] > 0)]
    return float(both["comm_s"].mean() / both["compute_s"].mean()) if not both.empty else math.nan


def ordered(df: pd.DataFrame) -> pd.DataFrame:
    """A table of configurations by setup, profile, model and bandwidth (native first)."""
    if df.empty:
        return df
    df = df.assign(_bw=df["bandwidth_bps"].fillna(-1.0))
    return df.sort_values(["setup", "profile", "model", "_bw"], kind="stable").drop(columns="_bw").reset_index(drop=True)


def speedups(df: pd.DataFrame, pairs: Iterable[tuple[str, str]], confidence: float) -> pd.DataFrame:
    """Speedup of each (variant, versus) pair per setup, profile, model, bandwidth and engine, where both ran
    on that engine, with the reference's measured communication-to-computation ratio there (the x axis of the
    ratio plot); where the engine measured none (the authors' builds), the stock baseline's in the same
    configuration, and ``ratio_engine`` says whose it is."""
    out = []
    keys = ["setup", "profile", "model", "bandwidth", "dilation", "gpu"]  # dilation 1 and gpu "" unless emulated
    ok = df[df["ok"] & df["throughput"].notna()]
    for key, config in ok.groupby(keys, sort=False, dropna=False):
        for engine in [e for e in ENGINE_KINDS if e in set(config["engine"])]:
            group = config[config["engine"] == engine]
            for variant, versus in pairs:
                num = group.loc[group["variant"] == variant, "throughput"].astype(float).tolist()
                reference = group[group["variant"] == versus]
                den = reference["throughput"].astype(float).tolist()
                if not num or not den:
                    continue
                ratio, low, high = ratio_interval(num, den, confidence)
                compared = group[group["variant"].isin([variant, versus])]
                busy = compared["host_cpu_busy"].max()  # frame() always has both columns
                cpu_bound = bool(compared["cpu_bound"].any())
                apart = int((compared["params_in_sync"] == False).sum())  # noqa: E712 (None: not checked)
                measured, ratio_engine = comm_to_compute(reference), engine
                if math.isnan(measured) and engine != EMBEDDED:
                    ours = config[(config["engine"] == EMBEDDED) & (config["variant"] == versus)]
                    measured, ratio_engine = comm_to_compute(ours), EMBEDDED
                out.append({**dict(zip(keys, key)), "bandwidth_bps": group["bandwidth_bps"].iloc[0], "engine": engine,
                            "variant": variant, "versus": versus, "n_variant": len(num), "n_versus": len(den),
                            "speedup": ratio, "ci_low": low, "ci_high": high, "comm_to_compute": measured,
                            "ratio_engine": ratio_engine if not math.isnan(measured) else None,
                            "host_cpu_busy": busy, "cpu_bound": cpu_bound, "params_apart": apart,
                            "note": too_few(min(len(num), len(den)))})
    cols = keys + ["bandwidth_bps", "engine", "variant", "versus", "n_variant", "n_versus", "speedup", "ci_low",
                   "ci_high", "comm_to_compute", "ratio_engine", "host_cpu_busy", "cpu_bound", "params_apart", "note"]
    return ordered(pd.DataFrame(out, columns=cols))


def side_by_side(summary: pd.DataFrame, speedup_rows: pd.DataFrame,
                 series: tuple[Series, RatioSeries] = (SIDE_BY_SIDE, SIDE_BY_SIDE_RATIOS)) -> pd.DataFrame:
    """Per setup, profile, model and bandwidth: the throughputs of ``series`` (study_series; P3's by default) with
    n, failed runs and interval, and the speedups of its ratio series with interval and n. An engine or
    variant without runs there has n = failed = 0 and NaN figures: the report says "not measured"."""
    throughput_series, ratio_series = series
    keys = ["setup", "profile", "model", "bandwidth"]
    ratios = {tuple(r[k] for k in keys + ["engine", "variant", "versus"]): r for _, r in speedup_rows.iterrows()}
    rows = []
    for key, config in summary.groupby(keys, sort=False, dropna=False):
        row = {**dict(zip(keys, key)), "bandwidth_bps": config["bandwidth_bps"].iloc[0]}
        for engine, variant, _ in throughput_series:
            found = config[(config["engine"] == engine) & (config["variant"] == variant)]
            one = found.iloc[0] if not found.empty else None
            prefix = f"{engine}_{variant}"
            row.update({f"{prefix}_n": int(one["n"]) if one is not None else 0,
                        f"{prefix}_failed": int(one["failed"]) if one is not None else 0,
                        **{f"{prefix}_{c}": float(one[c]) if one is not None else math.nan
                           for c in ("geometric_mean", "ci_low", "ci_high")}})
        for engine, variant, versus, prefix, _ in ratio_series:
            one = ratios.get((*key, engine, variant, versus))
            row.update({f"{prefix}_n": int(min(one["n_variant"], one["n_versus"])) if one is not None else 0,
                        **{f"{prefix}{suffix}": float(one[c]) if one is not None else math.nan
                           for suffix, c in (("", "speedup"), ("_low", "ci_low"), ("_high", "ci_high"))}})
        rows.append(row)
    cols = keys + ["bandwidth_bps"] + [f"{e}_{v}_{c}" for e, v, _ in throughput_series
                                       for c in ("n", "failed", "geometric_mean", "ci_low", "ci_high")] \
        + [f"{prefix}{c}" for _, _, _, prefix, _ in ratio_series for c in ("_n", "", "_low", "_high")]
    return ordered(pd.DataFrame(rows, columns=cols))


def claim_pairs(study: Study) -> list[tuple[str, str]]:
    """The (variant, reference) speedups formed: the claims', every variant over the baseline, and, where the study
    has the worker-update baseline, every other variant that updates on the workers too (run settings with
    VARIANT=p3) over it: the optimizer's placement is then the same on both sides."""
    pairs = {(c.variant, c.versus) for c in study.claims}
    pairs |= {(v, BASELINE) for v in study.variants if v != BASELINE}
    if WORKER_UPDATE in study.variants:
        pairs |= {(v, WORKER_UPDATE) for v in study.variants if on_workers(study.variants, v)}
    return sorted(pairs)
