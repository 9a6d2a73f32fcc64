"""From run records to statistics, speedups with intervals, a verdict per claim, and badges.

Statistics (pandas): per setup and configuration, n (successful runs; failed
runs are counted beside them), the mean and standard deviation as measured,
and the geometric mean with a Student-t interval on the log scale. The speedup
of a variant over its reference is the ratio of the geometric means with a
Welch interval on the log scale (ratio_interval says why: neither interval
can fall below zero). Each configuration also carries the communication
figures its runs measured (comm_s_per_iter, compute_s_per_iter, their ratio,
comm_wait_s_per_iter, overlap); a speedup carries its reference's ratio.

A setup is one evaluator's target: (origin of the store, target), so runs
imported from other evaluators stay side by side with local ones.

Every configuration is also per engine kind (``embedded``: stock MXNet 1.9.1,
its own P3 and its two baselines; ``artifact``: the authors' 2018 baseline and
P3 builds): speedups pair variants of one engine only, verdicts are per claim,
setup and engine measured there. The authors' builds report no communication
figures; a speedup of theirs takes the ratio the stock baseline measured in
the same configuration (``ratio_engine`` says whose). The "Results Reproduced"
badge judges each claim on the authors' build where it was measured on a setup
that can test the claim, else on MXNet 1.9.1's P3, and says which.

Two baselines: the claims are P3 over ``baseline`` (the optimizer on the
servers, as the paper's baseline), and verdicts are judged on that alone.
MXNet 1.9.1's P3 must update on the workers, so each P3 variant is also set
against ``baseline-worker-update`` (the optimizer on the workers): that
speedup isolates slicing and priority from where the optimizer runs, and is
shown beside each verdict (``Verdict.versus_worker_update``) and in the side
by side table, never judged and never counted for a badge.

Verdicts per claim and setup, in this order:

* ``not testable here``: the claim's configuration cannot be built on the
  setup (no cluster, another cluster size, a bandwidth the links cannot be
  shaped to or that exceeds them, a model the program does not have), or the
  claim is at a bandwidth and the setup is a CPU testbed while no sourced fact
  gives the paper setting's communication-to-computation ratio (with one, the
  claim is judged at the testbed bandwidth whose measured ratio is nearest,
  within a factor RATIO_MATCH);
* ``inconclusive``: not measured, measured with another profile than the
  claim's, fewer than 3 (and the study's min_runs) successful runs per variant
  ("n=2 < 3: no verdict"), or, for a claim at a bandwidth, an interval wider
  than the study allows;
* ``replicated``: the speedup interval reaches the claimed speedup within the
  study's tolerance ([claim - tol, claim + tol]);
* ``not replicated``: the interval lies wholly outside that band.

A claim without a bandwidth ("up to X%") is judged over every admissible
configuration (each bandwidth) with enough runs, not at the best estimate
alone: ``replicated`` when some configuration's interval, no wider than the
study allows, reaches the claim (ci_high >= claim - tol; above the band counts:
"up to" is then exceeded); ``not replicated`` when every one's interval stays
below claim - tol, however wide (an interval wholly below the band excludes the
claim there, so its width does not matter); ``inconclusive`` otherwise: no
configuration with enough runs, or one whose interval reaches the band but is
too wide to show it. The reason names the configurations it rests on, and
those left out for too few runs. On a CPU testbed such a claim counts in any
profile once the baseline measured a communication-bound setting (ratio >= 1),
since there the bandwidths set the ratio the profile would otherwise set; such
verdicts are labelled "CPU testbed".
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

import pandas as pd

from reprokit.engines.choice import ARTIFACT, EMBEDDED, ENGINE_KINDS
from reprokit.study.claims import MIN_RUNS, NATIVE, Claim, Study, Tolerance, rate_bps, same_rate
from reprokit.study.store import Record

REPLICATED = "replicated"
NOT_REPLICATED = "not replicated"
INCONCLUSIVE = "inconclusive"
NOT_TESTABLE = "not testable here"


# --- statistics ----------------------------------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (Lentz's method)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with df degrees of freedom (bisection on the CDF)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


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


# --- records as a table --------------------------------------------------------------------------

COLUMNS = ["setup", "origin", "origin_host", "imported", "target", "target_kind", "num_hosts", "shaping",
           "link_capacity", "profile", "model", "engine", "variant", "bandwidth", "bandwidth_bps", "repetition", "ok",
           "throughput", "params_in_sync", "failure_reason", "record_id", "sweep_id",
           "comm_s", "compute_s", "comm_wait_s", "overlap"]
COMM_FIGURES = {"comm_s": "comm_s_per_iter", "compute_s": "compute_s_per_iter",
                "comm_wait_s": "comm_wait_s_per_iter", "overlap": "overlap"}  # column -> unified result's key


def setup_label(record: Record) -> str:
    origin = record.origin
    who = "here" if not record.imported_from else f"{origin.host or '?'} ({origin.id[:8]})"
    return f"{record.config.target.label} [{who}]"


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def frame(records: Iterable[Record], metric: str = "throughput_samples_per_sec") -> pd.DataFrame:
    rows = []
    for r in records:
        config, target, result = r.config, r.config.target, r.result or {}
        throughput = _number(result.get(metric)) if r.ok else math.nan
        rows.append({
            "setup": setup_label(r), "origin": r.origin.id, "origin_host": r.origin.host,
            "imported": bool(r.imported_from), "target": target.label, "target_kind": target.kind,
            "num_hosts": len(target.hosts), "shaping": target.shaping,
            "link_capacity": target.link_capacity, "profile": config.profile,
            "model": config.model, "engine": config.engine, "variant": config.variant, "bandwidth": config.bandwidth,
            "bandwidth_bps": rate_bps(config.bandwidth) if config.bandwidth != NATIVE else math.nan,
            "repetition": config.repetition, "ok": r.ok,
            "throughput": throughput if throughput > 0 else math.nan,  # the log scale needs it positive
            "params_in_sync": result.get("params_in_sync"), "failure_reason": r.failure_reason,
            "record_id": r.record_id, "sweep_id": r.sweep_id,
            **{column: _number(result.get(key)) if r.ok else math.nan for column, key in COMM_FIGURES.items()},
        })
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.astype({"ok": bool, "imported": bool, "shaping": bool, "throughput": float, "bandwidth_bps": float,
                      **{column: float for column in COMM_FIGURES}})


CONFIG_KEYS = ["setup", "profile", "model", "bandwidth", "engine", "variant"]
ENGINE_NAMES = {ARTIFACT: "the authors' build", EMBEDDED: "stock MXNet 1.9.1"}
BASELINE = "baseline"  # stock MXNet, the optimizer on the servers: the claims are P3 over this one
WORKER_UPDATE = "baseline-worker-update"  # the optimizer on the workers, as P3 updates: shown beside, never judged
# The report's throughputs per configuration: the authors' 2018 builds beside MXNet 1.9.1's P3 and its two
# baselines, (engine, variant, label); and the P3 ratios beside them, (engine, reference, column prefix, label).
SIDE_BY_SIDE = ((ARTIFACT, BASELINE, "authors' 2018 baseline"), (ARTIFACT, "p3", "authors' 2018 P3"),
                (EMBEDDED, BASELINE, "MXNet 1.9.1 baseline"),
                (EMBEDDED, WORKER_UPDATE, "MXNet 1.9.1 worker-update baseline"), (EMBEDDED, "p3", "MXNet 1.9.1 P3"))
SIDE_BY_SIDE_RATIOS = ((ARTIFACT, BASELINE, "artifact_speedup", "authors' P3/baseline"),
                       (EMBEDDED, BASELINE, "embedded_speedup", "MXNet 1.9.1 P3/baseline"),
                       (EMBEDDED, WORKER_UPDATE, "embedded_worker_update_speedup",
                        "MXNet 1.9.1 P3/worker-update baseline"))


def too_few(n: int) -> str:
    """The report's plain note for a configuration without enough runs for a verdict ('' when enough)."""
    return f"n={n} < {MIN_RUNS}: no verdict" if n < MIN_RUNS else ""


def comm_to_compute(group: pd.DataFrame) -> float:
    """The measured communication-to-computation ratio of runs: mean comm_s_per_iter / mean compute_s_per_iter."""
    both = group[group["comm_s"].notna() & group["compute_s"].notna() & (group["compute_s"] > 0)]
    return float(both["comm_s"].mean() / both["compute_s"].mean()) if not both.empty else math.nan


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
    return _order(result)


def _order(df: pd.DataFrame) -> pd.DataFrame:
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
    keys = ["setup", "profile", "model", "bandwidth"]
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
                measured, ratio_engine = comm_to_compute(reference), engine
                if math.isnan(measured) and engine != EMBEDDED:
                    ours = config[(config["engine"] == EMBEDDED) & (config["variant"] == versus)]
                    measured, ratio_engine = comm_to_compute(ours), EMBEDDED
                out.append({**dict(zip(keys, key)), "bandwidth_bps": group["bandwidth_bps"].iloc[0], "engine": engine,
                            "variant": variant, "versus": versus, "n_variant": len(num), "n_versus": len(den),
                            "speedup": ratio, "ci_low": low, "ci_high": high, "comm_to_compute": measured,
                            "ratio_engine": ratio_engine if not math.isnan(measured) else None,
                            "note": too_few(min(len(num), len(den)))})
    cols = keys + ["bandwidth_bps", "engine", "variant", "versus", "n_variant", "n_versus", "speedup", "ci_low",
                   "ci_high", "comm_to_compute", "ratio_engine", "note"]
    return _order(pd.DataFrame(out, columns=cols))


def side_by_side(summary: pd.DataFrame, speedup_rows: pd.DataFrame) -> pd.DataFrame:
    """Per setup, profile, model and bandwidth: the throughputs of SIDE_BY_SIDE with n, failed runs and
    interval, and the P3 speedups of SIDE_BY_SIDE_RATIOS with interval and n. An engine or variant without
    runs there has n = failed = 0 and NaN figures: the report says "not measured"."""
    keys = ["setup", "profile", "model", "bandwidth"]
    pairs = speedup_rows[speedup_rows["variant"] == "p3"]
    ratios = {tuple(r[k] for k in keys + ["engine", "versus"]): r for _, r in pairs.iterrows()}
    rows = []
    for key, config in summary.groupby(keys, sort=False, dropna=False):
        row = {**dict(zip(keys, key)), "bandwidth_bps": config["bandwidth_bps"].iloc[0]}
        for engine, variant, _ in SIDE_BY_SIDE:
            found = config[(config["engine"] == engine) & (config["variant"] == variant)]
            one = found.iloc[0] if not found.empty else None
            prefix = f"{engine}_{variant}"
            row.update({f"{prefix}_n": int(one["n"]) if one is not None else 0,
                        f"{prefix}_failed": int(one["failed"]) if one is not None else 0,
                        **{f"{prefix}_{c}": float(one[c]) if one is not None else math.nan
                           for c in ("geometric_mean", "ci_low", "ci_high")}})
        for engine, versus, prefix, _ in SIDE_BY_SIDE_RATIOS:
            one = ratios.get((*key, engine, versus))
            row.update({f"{prefix}_n": int(min(one["n_variant"], one["n_versus"])) if one is not None else 0,
                        **{f"{prefix}{suffix}": float(one[c]) if one is not None else math.nan
                           for suffix, c in (("", "speedup"), ("_low", "ci_low"), ("_high", "ci_high"))}})
        rows.append(row)
    cols = keys + ["bandwidth_bps"] + [f"{e}_{v}_{c}" for e, v, _ in SIDE_BY_SIDE
                                       for c in ("n", "failed", "geometric_mean", "ci_low", "ci_high")] \
        + [f"{prefix}{c}" for _, _, prefix, _ in SIDE_BY_SIDE_RATIOS for c in ("_n", "", "_low", "_high")]
    return _order(pd.DataFrame(rows, columns=cols))


def claim_pairs(study: Study) -> list[tuple[str, str]]:
    """The (variant, reference) speedups formed: the claims', every variant over the baseline, and every P3
    variant (its run settings say VARIANT=p3) over the worker-update baseline, as both update on the workers."""
    pairs = {(c.variant, c.versus) for c in study.claims}
    pairs |= {(v, BASELINE) for v in study.variants if v != BASELINE}
    if WORKER_UPDATE in study.variants:
        pairs |= {(v, WORKER_UPDATE) for v, settings in study.variants.items() if settings.get("VARIANT") == "p3"}
    return sorted(pairs)


# --- verdicts ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    label: str
    kind: str  # embedded, testbed or cluster
    num_hosts: int
    shaping: bool
    link_capacity: str | None
    imported: bool


def setups(df: pd.DataFrame) -> list[Setup]:
    seen = []
    for label, group in df.groupby("setup", sort=False):
        row = group.iloc[0]
        cap = row["link_capacity"]
        seen.append(Setup(label=str(label), kind=str(row["target_kind"]), num_hosts=int(row["num_hosts"]),
                          shaping=bool(row["shaping"]), link_capacity=cap if isinstance(cap, str) else None,
                          imported=bool(row["imported"])))
    return sorted(seen, key=lambda s: (s.imported, s.label))


@dataclass(frozen=True)
class SpeedupFigure:
    """One speedup of a configuration with its interval and n, e.g. P3 over the worker-update baseline."""
    variant: str
    versus: str
    bandwidth: str
    speedup: float
    ci_low: float | None
    ci_high: float | None
    n: int

    def text(self) -> str:
        return f"{_fmt(self.speedup)} [{_fmt(self.ci_low)}, {_fmt(self.ci_high)}], n={self.n} at {self.bandwidth}"


@dataclass(frozen=True)
class Verdict:
    claim: str
    setup: str
    verdict: str
    reason: str
    bandwidth: str | None = None
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    comm_to_compute: float | None = None  # the reference's measured ratio where the claim was judged
    basis: str | None = None  # where the verdict was judged, e.g. "CPU testbed, smoke profile, 3 bandwidth(s)..."
    engine: str = EMBEDDED  # the engine whose runs it judged (embedded or artifact)
    # The claim's variant over the worker-update baseline where the verdict was judged: shown, never judged
    versus_worker_update: SpeedupFigure | None = None

    def to_dict(self) -> dict:
        return asdict(self)


RATIO_MATCH = 1.25  # a testbed bandwidth stands for the paper's setting when its ratio is within this factor


def _fmt(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}x"


def _float(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def buildable(claim: Claim, setup: Setup, program_models: set[str]) -> str | None:
    """Why the claim's configuration cannot be built on this setup, or None if it can."""
    where = f" at {claim.bandwidth}" if claim.bandwidth else ""
    if claim.model not in program_models:
        return f"the program has no cmd_key {claim.model!r} yet, so {claim.model} cannot run"
    if setup.kind == "embedded":
        return (f"the claim is about a cluster{where}; the embedded default runs every role on this host over "
                f"loopback, whose bandwidth cannot be set (use --target with a testbed or a cluster)")
    cpu_testbed = None
    if claim.bandwidth and setup.kind == "testbed" and claim.paper_ratio is None:
        cpu_testbed = (f"the claim is at {claim.bandwidth} on the paper's GPU machines; on this CPU testbed the same "
                       f"bandwidth gives another communication-to-computation ratio, and the study entry has no sourced "
                       f"figure for the paper setting's ratio (e.g. the per-iteration compute time of its GPUs) to pick "
                       f"the testbed bandwidth with the same ratio: add claims[].paper_comm_to_compute with its source")
    if claim.cluster_size and setup.num_hosts != claim.cluster_size:
        return (f"the claim is for {claim.cluster_size} machines; this target has {setup.num_hosts} "
                f"(a testbed of {claim.cluster_size}: ck testbed cluster:NAME --hosts={claim.cluster_size})"
                + (f"; and {cpu_testbed}" if cpu_testbed else ""))
    if claim.bandwidth:
        if not setup.shaping:
            if not same_rate(setup.link_capacity, claim.bandwidth):
                return (f"the claim is at {claim.bandwidth}; this target's links run at native bandwidth "
                        f"({setup.link_capacity or 'not given'}) and are not shaped from here")
        elif setup.link_capacity and rate_bps(claim.bandwidth) > rate_bps(setup.link_capacity):
            return f"{claim.bandwidth} exceeds this target's links ({setup.link_capacity})"
    return cpu_testbed


def _pick_by_ratio(claim: Claim, rows: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The rows at the tested bandwidth whose measured ratio is nearest the paper setting's (within RATIO_MATCH),
    or no rows and why."""
    measured = rows[rows["comm_to_compute"].notna() & (rows["comm_to_compute"] > 0)]
    paper = f"the paper's setting at {claim.bandwidth} has communication/computation {claim.paper_ratio:.2f} " \
            f"({claim.paper_ratio_source})"
    if measured.empty:
        return measured, f"{paper}; no configuration here measured its ratio (an engine without the p3-comm line?)"
    distance = (measured["comm_to_compute"] / claim.paper_ratio).map(lambda r: abs(math.log(r)))
    nearest = measured.loc[distance.idxmin()]
    if distance.min() > math.log(RATIO_MATCH):
        return measured.iloc[0:0], (f"{paper}; the nearest measured here is {nearest['comm_to_compute']:.2f} at "
                                    f"{nearest['bandwidth']}: add a bandwidth whose ratio is within x{RATIO_MATCH} of it")
    return measured[measured["bandwidth"] == nearest["bandwidth"]], None


def _admissible(claim: Claim, setup: Setup, rows: pd.DataFrame, tol: Tolerance) -> tuple[pd.DataFrame, str | None, str]:
    """The rows a verdict may use, where it was judged (basis), and why none may be used when none.

    Claims hold for the study's profile, whose image size and epoch length set the ratio of compute to
    communication. An "up to" claim on a shaped testbed is the exception: there the bandwidths set that
    ratio, so any profile counts once the baseline measured communication-bound settings (ratio >= 1).
    """
    in_profile = rows[rows["profile"] == tol.profile]
    cpu = "CPU testbed" if setup.kind == "testbed" else None
    if cpu and not claim.bandwidth:
        ratios = rows["comm_to_compute"].dropna()
        if not ratios.empty and ratios.max() >= 1.0:
            profiles = ", ".join(sorted(set(rows["profile"])))
            return rows, (f"{cpu}, {profiles} profile, {rows['bandwidth'].nunique()} bandwidth(s) with measured "
                          f"communication/computation {ratios.min():.2f} to {ratios.max():.2f}"), ""
        if in_profile.empty and not ratios.empty:
            return in_profile, cpu, (f"the tested bandwidths kept the baseline compute-bound (communication/computation "
                                     f"at most {ratios.max():.2f}); an 'up to' claim needs communication-bound settings "
                                     f"too: sweep lower bandwidths (ck reproduce study:NAME --target=... --quick "
                                     f"chooses them from a probe)")
    if in_profile.empty:
        best = rows.loc[rows["speedup"].idxmax()]
        return in_profile, cpu, (f"measured only with the {best['profile']} profile ({_fmt(best['speedup'])}); "
                                 f"the claim holds for the {tol.profile} profile, whose image size and epoch "
                                 f"length set the ratio of compute to communication")
    return in_profile, (f"{cpu}, {tol.profile} profile" if cpu else None), ""


def _where(row, claim: Claim, engine: str) -> str:
    """' at 720mbit (communication/computation 3.90)': where a speedup was measured, when the claim does not say."""
    at = f" at {row['bandwidth']}" if claim.bandwidth is None or row["bandwidth"] != claim.bandwidth else ""
    ratio = _float(row["comm_to_compute"])
    theirs = " as stock MXNet 1.9.1's baseline measured it there" if row["ratio_engine"] not in (None, engine) else ""
    return at + (f" (communication/computation {ratio:.2f}{theirs})" if ratio is not None else "")


def _measured(row, claim: Claim, engine: str) -> str:
    return f"{_fmt(row['speedup'])} [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]{_where(row, claim, engine)}"


def _half_width(row) -> float:
    """The interval's half-width relative to the speedup; NaN without an interval."""
    return (row["ci_high"] - row["ci_low"]) / 2 / row["speedup"]


def _judge_up_to(claim: Claim, enough: pd.DataFrame, thin: pd.DataFrame, tol: Tolerance,
                 engine: str) -> tuple[str, str, pd.Series]:
    """An "up to" claim over every configuration with enough runs (the module's docstring gives the rule):
    the verdict, its reason naming the configurations it rests on, and the row it reports."""
    band_low, band_high = claim.speedup - tol.speedup, claim.speedup + tol.speedup
    band = f"the claimed {claim.speedup:.2f}x ± {tol.speedup:.2f}"
    reaches = ~(enough["ci_high"] < band_low)  # a missing interval settles nothing: as if it reached
    narrow = enough.apply(_half_width, axis=1) <= tol.max_relative_half_width
    left_out = (f" (not counted, n < {max(MIN_RUNS, tol.min_runs)}: "
                f"{', '.join(f'{r.bandwidth} n={int(min(r.n_variant, r.n_versus))}' for r in thin.itertuples())})"
                if not thin.empty else "")
    shown = enough[reaches & narrow]
    if not shown.empty:
        row = shown.loc[shown["speedup"].idxmax()]
        how = "exceeds" if row["ci_low"] > band_high else "reaches"
        return REPLICATED, f"{_measured(row, claim, engine)} {how} {band}", row
    if not reaches.any():
        every = "; ".join(_measured(r, claim, engine) for _, r in enough.iterrows())
        row = enough.loc[enough["ci_high"].idxmax()]
        return NOT_REPLICATED, (f"the interval of every configuration with enough runs lies below {band}: "
                                f"{every}{left_out}"), row
    wide = enough[reaches]
    row = wide.loc[wide["speedup"].idxmax()]
    half = _half_width(row)
    width = f"±{half:.0%}" if half == half else "missing"
    return INCONCLUSIVE, (f"{_measured(row, claim, engine)}: the {tol.confidence:.0%} interval ({width}) reaches {band} "
                          f"but is wider than the ±{tol.max_relative_half_width:.0%} the study accepts, so it neither "
                          f"shows nor excludes the claim; add repetitions{left_out}"), row


def _versus_worker_update(claim: Claim, row, speedup_rows: pd.DataFrame) -> SpeedupFigure | None:
    """The claim's variant over the worker-update baseline in the configuration of ``row``, if measured."""
    if claim.versus == WORKER_UPDATE:
        return None
    keys = ["setup", "profile", "model", "bandwidth", "engine"]
    match = speedup_rows[(speedup_rows["variant"] == claim.variant) & (speedup_rows["versus"] == WORKER_UPDATE)]
    for key in keys:
        match = match[match[key] == row[key]]
    if match.empty:
        return None
    one = match.iloc[0]
    return SpeedupFigure(claim.variant, WORKER_UPDATE, str(one["bandwidth"]), float(one["speedup"]),
                         _float(one["ci_low"]), _float(one["ci_high"]), int(min(one["n_variant"], one["n_versus"])))


def judge(claim: Claim, setup: Setup, speedup_rows: pd.DataFrame, tol: Tolerance, program_models: set[str],
          engine: str = EMBEDDED) -> Verdict:
    """The claim's verdict on one setup from the runs of one engine."""
    def verdict(kind: str, reason: str, row=None, basis: str | None = None) -> Verdict:
        if basis:
            reason = f"{basis}: {reason}"
        if row is None:
            return Verdict(claim.id, setup.label, kind, reason, basis=basis, engine=engine)
        return Verdict(claim.id, setup.label, kind, reason, bandwidth=row["bandwidth"], speedup=float(row["speedup"]),
                       ci_low=_float(row["ci_low"]), ci_high=_float(row["ci_high"]),
                       n=int(min(row["n_variant"], row["n_versus"])), comm_to_compute=_float(row["comm_to_compute"]),
                       basis=basis, engine=engine, versus_worker_update=_versus_worker_update(claim, row, speedup_rows))

    why_not = buildable(claim, setup, program_models)
    if why_not:
        return verdict(NOT_TESTABLE, why_not)
    rows = speedup_rows[(speedup_rows["setup"] == setup.label) & (speedup_rows["model"] == claim.model)
                        & (speedup_rows["engine"] == engine)
                        & (speedup_rows["variant"] == claim.variant) & (speedup_rows["versus"] == claim.versus)]
    where = f" at {claim.bandwidth}" if claim.bandwidth else ""
    on = f" on {ENGINE_NAMES[engine]}"
    rerun = f"ck reproduce study:NAME --target=... --engines={engine} --models={claim.model}"
    if claim.bandwidth and setup.kind == "testbed":  # buildable: the paper's ratio is known
        if rows.empty:
            return verdict(INCONCLUSIVE, f"not measured: no successful runs of both {claim.variant} and "
                                         f"{claim.versus} for {claim.model}{on} ({rerun})")
        rows, why = _pick_by_ratio(claim, rows)
        if why:
            return verdict(INCONCLUSIVE, why)
    elif claim.bandwidth:
        rows = rows[[same_rate(b, claim.bandwidth) for b in rows["bandwidth"]]]
    if rows.empty:
        return verdict(INCONCLUSIVE, f"not measured: no successful runs of both {claim.variant} and {claim.versus} "
                                     f"for {claim.model}{where}{on} ({rerun}"
                                     f"{' --bandwidths=' + claim.bandwidth if claim.bandwidth else ''})")
    admissible, basis, why = _admissible(claim, setup, rows, tol)
    if admissible.empty:
        return verdict(INCONCLUSIVE, why, rows.loc[rows["speedup"].idxmax()], basis)
    need = max(MIN_RUNS, tol.min_runs)
    has_enough = admissible[["n_variant", "n_versus"]].min(axis=1) >= need
    enough, thin = admissible[has_enough], admissible[~has_enough]
    if enough.empty:
        row = admissible.loc[admissible["speedup"].idxmax()]
        n = int(min(row["n_variant"], row["n_versus"]))
        return verdict(INCONCLUSIVE, f"measured {_measured(row, claim, engine)}: n={n} < {need}: no verdict "
                                     f"(run --repetitions={need} or more)", row, basis)
    if claim.bandwidth is None:
        kind, reason, row = _judge_up_to(claim, enough, thin, tol, engine)
        return verdict(kind, reason, row, basis)
    row = enough.loc[enough["speedup"].idxmax()]  # one configuration: the claim's bandwidth, or its ratio's
    measured = f"measured {_measured(row, claim, engine)}"
    half = _half_width(row)
    if not half <= tol.max_relative_half_width:
        return verdict(INCONCLUSIVE, f"{measured}: the {tol.confidence:.0%} interval is ±{half:.0%}, wider than "
                                     f"the ±{tol.max_relative_half_width:.0%} the study accepts; add repetitions",
                       row, basis)
    band_low, band_high = claim.speedup - tol.speedup, claim.speedup + tol.speedup
    band = f"the claimed {claim.speedup:.2f}x ± {tol.speedup:.2f}"
    if row["ci_high"] >= band_low and row["ci_low"] <= band_high:
        return verdict(REPLICATED, f"{measured} reaches {band}", row, basis)
    side = "below" if row["ci_high"] < band_low else "above"
    return verdict(NOT_REPLICATED, f"{measured} lies {side} {band}", row, basis)


def engines_of(df: pd.DataFrame) -> list[str]:
    """The engine kinds with runs (failed ones too), in ENGINE_KINDS order."""
    present = set(df["engine"])
    return [e for e in ENGINE_KINDS if e in present]


def judge_all(study: Study, df: pd.DataFrame, program_models: set[str]) -> list[Verdict]:
    """A verdict per claim, setup and engine that has runs on that setup."""
    rows = speedups(df, claim_pairs(study), study.tolerance.confidence)
    found = setups(df)
    if not found:
        return [Verdict(c.id, "no runs", INCONCLUSIVE, "not measured: no runs stored yet (ck reproduce study:NAME)")
                for c in study.claims]
    return [judge(c, s, rows, study.tolerance, program_models, engine) for c in study.claims for s in found
            for engine in engines_of(df[df["setup"] == s.label])]


def decided_on(study: Study, verdicts: Sequence[Verdict]) -> dict[str, str]:
    """Per claim, the engine whose verdicts count for the badge: the authors' build where it was measured for
    the claim on a setup that can test it (a verdict with a measured speedup), else stock MXNet 1.9.1's."""
    measured = {v.claim for v in verdicts if v.engine == ARTIFACT and v.speedup is not None}
    return {c.id: ARTIFACT if c.id in measured else EMBEDDED for c in study.claims}


def overall(verdicts: Sequence[Verdict], claim_id: str, engine: str | None = None) -> str:
    """One verdict per claim over every setup (of one engine, when given): a failed replication anywhere
    outweighs a success elsewhere."""
    kinds = {v.verdict for v in verdicts if v.claim == claim_id and engine in (None, v.engine)}
    if not kinds and engine is not None:
        return INCONCLUSIVE  # that engine has no runs: not measured
    for kind in (NOT_REPLICATED, REPLICATED, INCONCLUSIVE):
        if kind in kinds:
            return kind
    return NOT_TESTABLE


# --- badges --------------------------------------------------------------------------------------

RECOMMENDED, NOT_RECOMMENDED, UNDECIDED = "recommended", "not recommended", "undecided"


@dataclass(frozen=True)
class Badge:
    name: str  # ACM: Artifacts Available, Artifacts Evaluated - Functional, Results Reproduced
    status: str
    reasons: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "reasons": list(self.reasons)}


def badges(study: Study, df: pd.DataFrame, verdicts: Sequence[Verdict], program_models: set[str]) -> list[Badge]:
    return [available_badge(study), functional_badge(df), reproduced_badge(study, verdicts, decided_on(study, verdicts))]


def available_badge(study: Study) -> Badge:
    available = study.artifact.get("available", {})
    if available.get("doi"):
        return Badge("Artifacts Available", RECOMMENDED, (
            f"the authors' artifact is archived on {available.get('archive', 'an archive')} with DOI {available['doi']}"
            f" ({available.get('file', '')}) and published at {available.get('repository', 'n/a')}",
            "recorded in the study entry; this report did not download the archive (no internet here)"))
    return Badge("Artifacts Available", NOT_RECOMMENDED, ("the study records no permanent archive (DOI) of the artifact",))


def functional_badge(df: pd.DataFrame) -> Badge:
    """Every engine, model and variant that ran has a success, and no success ended out of sync."""
    if df.empty:
        return Badge("Artifacts Evaluated - Functional", UNDECIDED, ("no runs stored yet",))
    reasons, broken = [], False
    for (engine, model, variant), group in df.groupby(["engine", "model", "variant"], sort=True):
        what = f"{model} {variant} ({ENGINE_NAMES.get(engine, engine)})"
        ok = group[group["ok"]]
        if ok.empty:
            broken = True
            reasons.append(f"{what}: all {len(group)} run(s) failed ({group['failure_reason'].iloc[-1]})")
            continue
        out_of_sync = int((ok["params_in_sync"] == False).sum())  # noqa: E712 (None means not checked)
        checked = int(ok["params_in_sync"].isin([True, False]).sum())
        if out_of_sync:
            broken = True
            reasons.append(f"{what}: {out_of_sync} run(s) ended with workers' parameters NOT in sync")
        else:
            sync = "workers' parameters in sync" if checked == len(ok) else \
                "workers' parameters not checked (no run saved them)" if not checked else \
                f"workers' parameters in sync in the {checked} run(s) that check them"
            reasons.append(f"{what}: {len(ok)} of {len(group)} run(s) succeeded, {sync}")
    return Badge("Artifacts Evaluated - Functional", NOT_RECOMMENDED if broken else RECOMMENDED, tuple(reasons))


def reproduced_badge(study: Study, verdicts: Sequence[Verdict], decided: dict[str, str]) -> Badge:
    """ACM's Results Reproduced asks for the main results obtained by others, in part with the authors'
    artifacts: each claim counts with the authors' build's verdict where that build was measured for it
    (``decided``, from decided_on), else with MXNet 1.9.1's P3, and the reasons say which. Only P3 over the
    baseline counts: P3 over the worker-update baseline is named as not counted."""
    per_claim = {c.id: overall(verdicts, c.id, decided[c.id]) for c in study.claims}
    theirs = [c for c, e in decided.items() if e == ARTIFACT]
    ours = [c for c, e in decided.items() if e != ARTIFACT]
    basis = []
    if theirs:
        basis.append(f"judged on the authors' build (their baseline and P3 builds, measured here): {', '.join(theirs)}")
    if ours:
        why = ("the authors' build was not measured where the claims can be tested" if not theirs
               else "the authors' build was not measured for these where they can be tested (or lacks their variant)")
        basis.append(f"judged on MXNet 1.9.1's own P3 (CPU; upstreamed by the paper's first author) over its stock "
                     f"baseline, since {why}: {', '.join(ours)}")
    if theirs:
        others = {c: overall(verdicts, c, EMBEDDED) for c in theirs if any(
            v.claim == c and v.engine == EMBEDDED for v in verdicts)}
        if others:
            basis.append("MXNet 1.9.1's P3, for comparison: " + ", ".join(f"{c} {v}" for c, v in others.items()))
    beside = [f"{v.claim} {v.versus_worker_update.text()}" for v in verdicts if v.versus_worker_update is not None]
    if beside:
        basis.append(f"not counted: P3 over the worker-update baseline ({WORKER_UPDATE}: the optimizer on the workers, "
                     f"as in P3), shown beside the verdicts: {'; '.join(beside)}")
    failed = [c for c, v in per_claim.items() if v == NOT_REPLICATED]
    if failed:
        return Badge("Results Reproduced", NOT_RECOMMENDED, (f"not replicated: {', '.join(failed)}", *basis))
    open_claims = [f"{c} ({v})" for c, v in per_claim.items() if v != REPLICATED]
    if open_claims:
        return Badge("Results Reproduced", UNDECIDED, (
            f"{len(open_claims)} of {len(per_claim)} claim(s) not yet replicated: {', '.join(open_claims)}", *basis))
    return Badge("Results Reproduced", RECOMMENDED, (f"all {len(per_claim)} claims replicated", *basis))


@dataclass(frozen=True)
class Analysis:
    runs: pd.DataFrame
    summary: pd.DataFrame
    speedups: pd.DataFrame
    verdicts: list[Verdict]
    overall: dict[str, str]  # per claim, on the engine the badge judges it on (decided)
    badges: list[Badge]
    setups: list[Setup]
    side_by_side: pd.DataFrame = field(default_factory=pd.DataFrame)  # the engines' throughputs per configuration
    overall_by_engine: dict[str, dict[str, str]] = field(default_factory=dict)  # engine -> claim -> verdict
    decided: dict[str, str] = field(default_factory=dict)  # claim -> the engine the badge judges it on
    untested: str = ""  # when no claim could be tested on these runs: why and how to (the report's first line)


def nothing_tested(study: Study, verdicts: Sequence[Verdict], found: Sequence[Setup]) -> str:
    """The report's first line when no claim could be tested on these runs (no runs, or every verdict 'not
    testable here'): why, and how to test them; "" when some claim could be."""
    if found and not all(v.verdict == NOT_TESTABLE for v in verdicts):
        return ""
    if not found:
        why = "no runs stored yet"
    elif all(s.kind == "embedded" for s in found):
        why = ("every run is on the embedded default, whose roles share this host over loopback, a bandwidth that "
               "cannot be set, while every claim is about a cluster's network")
    else:
        why = f"every claim is '{NOT_TESTABLE}' on {', '.join(s.label for s in found)} (the verdicts say why)"
    return (f"No claim could be tested on these runs: {why}. To test them, make a testbed of 3 hosts on this "
            f"machine (as root): ck testbed cluster:NAME --hosts=3 (it prints the ck add machine line that registers "
            f"it), then: ck reproduce study:{study.name} --target=NAME --quick")


def analyse(study: Study, records: Iterable[Record], program_models: set[str]) -> Analysis:
    df = frame(records, study.metric)
    verdicts = judge_all(study, df, program_models)
    summary = summarize(df, study.tolerance.confidence)
    speedup_rows = speedups(df, claim_pairs(study), study.tolerance.confidence)
    decided = decided_on(study, verdicts)
    return Analysis(
        runs=df, summary=summary, speedups=speedup_rows, verdicts=verdicts,
        overall={c.id: overall(verdicts, c.id, decided[c.id]) for c in study.claims},
        badges=badges(study, df, verdicts, program_models), setups=setups(df),
        side_by_side=side_by_side(summary, speedup_rows),
        overall_by_engine={e: {c.id: overall(verdicts, c.id, e) for c in study.claims} for e in engines_of(df)},
        decided=decided, untested=nothing_tested(study, verdicts, setups(df)),
    )
