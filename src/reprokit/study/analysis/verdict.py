"""A verdict per claim, setup and engine, from the speedups measured there.

The rules below are the speedup claims' (``judge``); a claim of another kind is judged by its class in kinds.py,
which ``judged.judge_all`` asks for every claim (claims.CLAIM_KINDS).

Verdicts are judged per engine kind (speedup.py), on P3 over ``baseline``
alone; P3 over the worker-update baseline is shown beside each verdict
(``ClaimVerdict.versus_worker_update``), never judged.

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
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import pandas as pd

from reprokit.engines.base import ARTIFACT, EMBEDDED
from reprokit.engines.choice import ENGINE_KINDS
from reprokit.study.analysis.speedup import ENGINE_NAMES, WORKER_UPDATE
from reprokit.study.paper.claims import MIN_RUNS, Claim, Study, Tolerance
from reprokit.study.paper.rates import same_rate, shaped_bps


class Verdict(StrEnum):
    """A claim's verdict; its value is what reports show and report.json holds (StrEnum: str() is the value)."""
    REPLICATED = "replicated"
    NOT_REPLICATED = "not replicated"
    INCONCLUSIVE = "inconclusive"
    NOT_TESTABLE = "not testable here"


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
class ClaimVerdict:
    claim: str
    setup: str
    verdict: Verdict
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
    measured: bool = True  # False: no run of the claim's configurations succeeded here (reason: "not measured: ...")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


NOT_MEASURED = "not measured"  # how the reason of a verdict that is not measured begins


def measured_at_all(claim: str, verdicts: Sequence[ClaimVerdict]) -> bool:
    """Whether any configuration of the claim was measured; False: every verdict of the claim is not measured."""
    return any(v.measured for v in verdicts if v.claim == claim)


RATIO_MATCH = 1.25  # a testbed bandwidth stands for the paper's setting when its ratio is within this factor


def _fmt(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}x"


def _float(x: float | None) -> float | None:
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
        elif setup.link_capacity and shaped_bps(claim.bandwidth) > shaped_bps(setup.link_capacity):
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


def _where(row: pd.Series, claim: Claim, engine: str) -> str:
    """' at 720mbit (communication/computation 3.90)': where a speedup was measured, when the claim does not say."""
    at = f" at {row['bandwidth']}" if claim.bandwidth is None or row["bandwidth"] != claim.bandwidth else ""
    ratio = _float(row["comm_to_compute"])
    theirs = " as stock MXNet 1.9.1's baseline measured it there" if row["ratio_engine"] not in (None, engine) else ""
    return at + (f" (communication/computation {ratio:.2f}{theirs})" if ratio is not None else "")


def _measured(row: pd.Series, claim: Claim, engine: str) -> str:
    return f"{_fmt(row['speedup'])} [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]{_where(row, claim, engine)}"


def _half_width(row: pd.Series) -> float:
    """The interval's half-width relative to the speedup; NaN without an interval."""
    return float((row["ci_high"] - row["ci_low"]) / 2 / row["speedup"])


def judge_up_to(claim: Claim, enough: pd.DataFrame, thin: pd.DataFrame, tol: Tolerance,
                 engine: str) -> tuple[Verdict, str, pd.Series]:
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
        return Verdict.REPLICATED, f"{_measured(row, claim, engine)} {how} {band}", row
    if not reaches.any():
        every = "; ".join(_measured(r, claim, engine) for _, r in enough.iterrows())
        row = enough.loc[enough["ci_high"].idxmax()]
        return Verdict.NOT_REPLICATED, (f"the interval of every configuration with enough runs lies below "
                                        f"{band}: {every}{left_out}"), row
    wide = enough[reaches]
    row = wide.loc[wide["speedup"].idxmax()]
    half = _half_width(row)
    width = f"±{half:.1%}" if half == half else "missing"  # .1: never "±15%, wider than ±15%"
    return Verdict.INCONCLUSIVE, (f"{_measured(row, claim, engine)}: the {tol.confidence:.0%} interval ({width}) "
                                  f"reaches {band} but is wider than the ±{tol.max_relative_half_width:.0%} the study "
                                  f"accepts, so it neither shows nor excludes the claim; add repetitions"
                                  f"{left_out}"), row


def _versus_worker_update(claim: Claim, row: pd.Series, speedup_rows: pd.DataFrame) -> SpeedupFigure | None:
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


def claim_verdict(claim: Claim, setup: Setup, engine: str, kind: Verdict, reason: str, row: pd.Series | None = None,
                  basis: str | None = None, measured: bool = True,
                  versus_worker_update: SpeedupFigure | None = None) -> ClaimVerdict:
    """A verdict of ``claim`` on ``setup``, its reason prefixed by where it was judged (``basis``), with the figures of
    the configuration it rests on (``row``, a speedup row) when there is one."""
    if basis:
        reason = f"{basis}: {reason}"
    if row is None:
        return ClaimVerdict(claim.id, setup.label, kind, reason, basis=basis, engine=engine, measured=measured)
    return ClaimVerdict(claim.id, setup.label, kind, reason, bandwidth=row["bandwidth"],
                        speedup=float(row["speedup"]), ci_low=_float(row["ci_low"]), ci_high=_float(row["ci_high"]),
                        n=int(min(row["n_variant"], row["n_versus"])),
                        comm_to_compute=_float(row["comm_to_compute"]), basis=basis, engine=engine,
                        versus_worker_update=versus_worker_update)


def claim_rows(claim: Claim, setup: Setup, speedup_rows: pd.DataFrame, engine: str) -> pd.DataFrame:
    """The speedup rows of the claim's model and pair on one setup and engine."""
    return speedup_rows[(speedup_rows["setup"] == setup.label) & (speedup_rows["model"] == claim.model)
                        & (speedup_rows["engine"] == engine)
                        & (speedup_rows["variant"] == claim.variant) & (speedup_rows["versus"] == claim.versus)]


@dataclass(frozen=True)
class Admitted:
    """The configurations a verdict may use (``_admissible``), split by whether both sides have enough runs; or, when
    none may be used, why (``why``, with the row to show and ``basis``)."""
    enough: pd.DataFrame
    thin: pd.DataFrame
    basis: str | None
    need: int
    why: str = ""
    row: pd.Series | None = None


def admitted(claim: Claim, setup: Setup, rows: pd.DataFrame, tol: Tolerance) -> Admitted:
    admissible, basis, why = _admissible(claim, setup, rows, tol)
    need = max(MIN_RUNS, tol.min_runs)
    if admissible.empty:
        return Admitted(admissible, admissible, basis, need, why, rows.loc[rows["speedup"].idxmax()])
    has_enough = admissible[["n_variant", "n_versus"]].min(axis=1) >= need
    return Admitted(admissible[has_enough], admissible[~has_enough], basis, need)


def judge(claim: Claim, setup: Setup, speedup_rows: pd.DataFrame, tol: Tolerance, program_models: set[str],
          engine: str = EMBEDDED) -> ClaimVerdict:
    """The claim's verdict on one setup from the runs of one engine."""
    def verdict(kind: Verdict, reason: str, row: pd.Series | None = None, basis: str | None = None, measured: bool = True) -> ClaimVerdict:
        versus = None if row is None else _versus_worker_update(claim, row, speedup_rows)
        return claim_verdict(claim, setup, engine, kind, reason, row, basis, measured, versus)

    why_not = buildable(claim, setup, program_models)
    if why_not:
        return verdict(Verdict.NOT_TESTABLE, why_not)
    rows = claim_rows(claim, setup, speedup_rows, engine)
    where = f" at {claim.bandwidth}" if claim.bandwidth else ""
    on = f" on {ENGINE_NAMES[engine]}"
    rerun = f"ck reproduce study:NAME --target=... --engines={engine} --models={claim.model}"
    if claim.bandwidth and setup.kind == "testbed":  # buildable: the paper's ratio is known
        if rows.empty:
            return verdict(Verdict.INCONCLUSIVE, f"{NOT_MEASURED}: no successful runs of both {claim.variant} and "
                                                 f"{claim.versus} for {claim.model}{on} ({rerun})", measured=False)
        rows, why = _pick_by_ratio(claim, rows)
        if why:
            return verdict(Verdict.INCONCLUSIVE, why)
    elif claim.bandwidth:
        rows = rows[[same_rate(b, claim.bandwidth) for b in rows["bandwidth"]]]
    if rows.empty:
        return verdict(Verdict.INCONCLUSIVE,
                       f"{NOT_MEASURED}: no successful runs of both {claim.variant} and {claim.versus} "
                       f"for {claim.model}{where}{on} ({rerun}"
                       f"{' --bandwidths=' + claim.bandwidth if claim.bandwidth else ''})", measured=False)
    runs = admitted(claim, setup, rows, tol)
    basis, need, enough, thin = runs.basis, runs.need, runs.enough, runs.thin
    if runs.why:
        return verdict(Verdict.INCONCLUSIVE, runs.why, runs.row, basis)
    if enough.empty:
        row = thin.loc[thin["speedup"].idxmax()]
        n = int(min(row["n_variant"], row["n_versus"]))
        return verdict(Verdict.INCONCLUSIVE, f"measured {_measured(row, claim, engine)}: n={n} < {need}: no verdict "
                                             f"(run --repetitions={need} or more)", row, basis)
    if claim.bandwidth is None:
        kind, reason, row = judge_up_to(claim, enough, thin, tol, engine)
        return verdict(kind, reason, row, basis)
    row = enough.loc[enough["speedup"].idxmax()]  # one configuration: the claim's bandwidth, or its ratio's
    kind, how = judge_at_bandwidth(row, claim, tol)
    return verdict(kind, f"measured {_measured(row, claim, engine)}{how}", row, basis)


def judge_at_bandwidth(row: pd.Series, claim: Claim, tol: Tolerance) -> tuple[Verdict, str]:
    """One configuration of a claim stated at a bandwidth, with enough runs, against the claim's band: inconclusive
    when its interval is wider than the study accepts, replicated when the interval meets the band, not replicated
    when it lies wholly below or above it. The reason reads on from the configuration's figure."""
    half = _half_width(row)
    if not half <= tol.max_relative_half_width:  # a missing interval is not narrow
        width = f"±{half:.1%}" if half == half else "missing"  # .1: never "±15%, wider than ±15%"
        return Verdict.INCONCLUSIVE, (f": the {tol.confidence:.0%} interval is {width}, wider than the "
                                      f"±{tol.max_relative_half_width:.0%} the study accepts; add repetitions")
    band_low, band_high = claim.speedup - tol.speedup, claim.speedup + tol.speedup
    band = f"the claimed {claim.speedup:.2f}x ± {tol.speedup:.2f}"
    if row["ci_high"] >= band_low and row["ci_low"] <= band_high:
        return Verdict.REPLICATED, f" reaches {band}"
    return Verdict.NOT_REPLICATED, f" lies {'below' if row['ci_high'] < band_low else 'above'} {band}"


def engines_of(df: pd.DataFrame) -> list[str]:
    """The engine kinds with runs (failed ones too), in ENGINE_KINDS order."""
    present = set(df["engine"])
    return [e for e in ENGINE_KINDS if e in present]


def decided_on(study: Study, verdicts: Sequence[ClaimVerdict]) -> dict[str, str]:
    """Per claim, the engine whose verdicts count for the badge: the authors' build where it was measured for
    the claim on a setup that can test it (a verdict with a measured speedup), else stock MXNet 1.9.1's."""
    measured = {v.claim for v in verdicts if v.engine == ARTIFACT and v.speedup is not None}
    return {c.id: ARTIFACT if c.id in measured else EMBEDDED for c in study.claims}


def overall(verdicts: Sequence[ClaimVerdict], claim_id: str, engine: str | None = None) -> Verdict:
    """One verdict per claim over every setup (of one engine, when given): a failed replication anywhere
    outweighs a success elsewhere."""
    kinds = {v.verdict for v in verdicts if v.claim == claim_id and engine in (None, v.engine)}
    if not kinds and engine is not None:
        return Verdict.INCONCLUSIVE  # that engine has no runs: not measured
    for kind in (Verdict.NOT_REPLICATED, Verdict.REPLICATED, Verdict.INCONCLUSIVE):
        if kind in kinds:
            return kind
    return Verdict.NOT_TESTABLE
