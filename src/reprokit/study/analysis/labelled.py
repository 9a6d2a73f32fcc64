"""Emulated and predicted verdicts beside the measured ones, for each claim stated at a bandwidth.

"Emulated": the real communication stack with emulated compute (docs/explanation/emulation.md) at the paper's
cluster size and bandwidth divided by the dilation k, at the paper's GPU's compute (runs at another GPU's are shown
apart).
"Predicted": the iteration model (iteration_model.py, docs/explanation/iteration-model.md) at the setting the
emulated runs have (the paper's cluster size, co-located servers, batch 32), over the paper's GPU's plausible range
(docs/explanation/gpus.md).
Each is given only when its check holds: the emulation's self-check (this machine's own profile emulated, its
throughput within 10% of the real run's, ``emulation/selfcheck.json``), the model's validation against real and
emulated runs (within 10% for throughput, 15% for P3's speedup, ``study/model_validation.json``). Neither counts
towards a badge: the badge judges what was measured.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from reprokit.emulation.gpus import gpu, gpus, paper_gpu
from reprokit.run.settings import PAPER_BATCH_SIZE
from reprokit.study.analysis.speedup import ENGINE_NAMES
from reprokit.study.analysis.verdict import (
    Verdict,
    judge_at_bandwidth,
    judge_up_to,
)
from reprokit.study.paper.claims import MIN_RUNS, Claim, Tolerance
from reprokit.study.profiles.layer_profiles import DEFAULT_SHAPE
from reprokit.study.whatif.claim_speedup import predicted_speedup
from reprokit.study.whatif.iteration_model import VARIANT_POLICY
from reprokit.study.whatif.model_check import ModelValidation

EXPLANATION = ("An emulated verdict comes from runs of the real communication stack in which each device's compute "
               "is replaced by waits of its measured or sourced duration (times k, with every bandwidth divided by "
               "k); a predicted verdict comes from a discrete-event model of one iteration, with no run at all. "
               "Both are labelled and shown beside the measured verdict, and neither counts towards a badge.")


UP_TO = "up to (any)"  # the bandwidth column of an "up to" claim
UP_TO_NOT_PREDICTED = ("not given: an \"up to\" claim is judged on runs over bandwidths; the model's figures "
                       "across compute speeds and bandwidths follow")


@dataclass(frozen=True)
class LabelledVerdict:
    claim: str
    bandwidth: str
    measured: str  # the claim's overall measured verdict
    emulated: str  # at the paper's GPU
    predicted: str  # over the paper's GPU's plausible range
    other_hardware: str = ""  # emulated runs at other GPUs' compute: figures, not the claim's verdict
    emulated_brief: str = ""  # the report's first table: the figure and the verdict, or a short reason
    predicted_brief: str = ""
    emulated_verdict: str = ""  # the verdict the emulated runs give (a Verdict's value), or "" when none is given
    predicted_verdict: str = ""  # the verdict the model predicts (a Verdict's value), or "" when none is given
    emulated_engines: tuple[tuple[str, str], ...] = ()  # emulated on several engines: each one's name and verdict

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "emulated_engines": [list(pair) for pair in self.emulated_engines]}  # as JSON reads it


class Stated(NamedTuple):
    """An emulated or predicted verdict in full and in brief, and the verdict it states (a Verdict's value; "" when
    none is given). ``engines``: when it is of runs on several engines, each one's name and its verdict ("" when that
    engine's runs give none), in the order the brief names them."""
    full: str
    brief: str
    verdict: str = ""
    engines: tuple[tuple[str, str], ...] = ()


def combined(verdicts: Iterable[str]) -> str:
    """Several engines' verdicts as one, as ``verdict.overall`` combines setups': not replicated on any engine
    outweighs replicated, which outweighs inconclusive; "" when none is given."""
    given = set(verdicts)
    return next((str(v) for v in (Verdict.NOT_REPLICATED, Verdict.REPLICATED, Verdict.INCONCLUSIVE) if v in given),
                "")


def self_check() -> dict[str, Any]:
    check: dict[str, Any] = json.loads(resources.files("reprokit.emulation").joinpath("selfcheck.json").read_text())
    return check


def emulation_status(check: Mapping[str, Any]) -> str:
    """Why no emulated verdict is given, or "" when the self-check holds: for every model it checked, the real over
    emulated throughput and both ends of its interval within the tolerance of 1."""
    tolerance = check["tolerance"]
    missed = [m for m in check["models"]
              if not all(abs(x - 1) <= tolerance for x in (m["ratio"], *m["ci95"]))]
    if not missed:
        return ""
    shown = "; ".join(f"{m['model']} {m['ratio']:.2f}x [{m['ci95'][0]:.2f}, {m['ci95'][1]:.2f}], n={m['n_pairs']}"
                      for m in missed)
    return (f"not given: the emulation's self-check is outside {tolerance:.0%} (real/emulated throughput {shown}; "
            f"docs/explanation/emulation.md)")


@dataclass(frozen=True)
class PredictedAt:
    """The predicted verdict of a claim at one compute speed: the speedup with hosts that cost nothing and with a
    testbed host's stack costs and queues below the van, the range they span widened by the model's validated error,
    and what that range says."""
    images_per_sec: float
    free: float
    costly: float
    low: float
    high: float
    kind: Verdict
    how: str


def predicted_at(claim: Claim, tolerance: Tolerance, validation: ModelValidation, gpu_name: str,
                 images_per_sec: float) -> PredictedAt:
    free = predicted_speedup(claim, gpu_name, images_per_sec)
    costly = predicted_speedup(claim, gpu_name, images_per_sec, validation.stack_s_per_byte,
                               validation.stack_s_per_message, validation.fifo_bytes)
    low, high = min(free, costly) / (1 + validation.speedup_bar), max(free, costly) / (1 - validation.speedup_bar)
    band_low, band_high = claim.speedup - tolerance.speedup, claim.speedup + tolerance.speedup
    band = f"the claimed {claim.speedup:.2f}x ± {tolerance.speedup:.2f}"
    if high < band_low or low > band_high:
        kind, how = Verdict.NOT_REPLICATED, f"lies {'below' if high < band_low else 'above'} {band}"
    elif band_low <= low and high <= band_high:
        kind, how = Verdict.REPLICATED, f"lies within {band}"
    else:
        kind, how = Verdict.INCONCLUSIVE, f"reaches into {band} and out of it"
    return PredictedAt(images_per_sec, free, costly, low, high, kind, how)


RANGE_POINTS = 5  # compute speeds judged across a GPU's plausible range, evenly on a log scale, ends included
FLIP_STEPS = 12  # halvings that place a change of verdict between two of them (to 0.02% of the interval)


def over_range(claim: Claim, tolerance: Tolerance, validation: ModelValidation,
               gpu_name: str) -> list[tuple[float, float, PredictedAt]]:
    """The claim's predicted verdict across the GPU's plausible range of its model's throughput, as stretches
    (from images/s, to images/s, the verdict at the stretch's first point) where the verdict stays the same; each
    change is placed by bisection between the grid points it fell between."""
    rate = gpu(gpu_name).throughput(claim.model)

    def at(x: float) -> PredictedAt:
        return predicted_at(claim, tolerance, validation, gpu_name, x)

    ratio = rate.high / rate.low
    grid = [rate.low * ratio ** (i / (RANGE_POINTS - 1)) for i in range(RANGE_POINTS)]
    stretches: list[tuple[float, float, PredictedAt]] = []
    start, current = grid[0], at(grid[0])
    for left, right in zip(grid, grid[1:]):
        after = at(right)
        if after.how == current.how:  # how: the verdict and which side of the band
            continue
        lo, hi = left, right  # the verdict is current's at lo and another at hi
        for _ in range(FLIP_STEPS):
            mid = (lo * hi) ** 0.5
            lo, hi = (mid, hi) if at(mid).how == current.how else (lo, mid)
        stretches.append((start, hi, current))
        start, current = hi, at(hi)
        if current.how != after.how:  # a third verdict inside the same interval: begin again from its right end
            stretches.append((start, right, current))
            start, current = right, after
    stretches.append((start, grid[-1], current))
    return stretches


def predicted_setting(claim: Claim, gpu_name: str) -> str:
    """The setting a predicted verdict holds at, the GPU first."""
    return (f"{gpu(gpu_name).label} compute, {claim.cluster_size} hosts with a worker and a server each, links shared "
            f"evenly and kept busy while data waits (loss-based TCP), batch {PAPER_BATCH_SIZE}")


def predicted_judged(claim: Claim, tolerance: Tolerance, validation: ModelValidation, gpu_name: str = "") -> Stated:
    """The claim's predicted figure and verdict at a GPU (the paper's by default), or why none is given, in full and
    in brief (the range and the verdict, or a short reason), with the verdict. The
    paper's hosts' stack costs and queues are not known: the speedup is predicted with none and with a testbed host's,
    and widened by the model's validated error; at one compute speed the verdict holds only where that whole range
    says the same (wholly below or above the claim's band: not replicated; wholly inside: replicated; else
    inconclusive). The GPU's throughput is known only to a plausible range: the verdict is given only where it
    holds over all of it; otherwise it is inconclusive, naming where in the range it flips."""
    name = gpu_name or paper_gpu().name
    label = gpu(name).label
    no_policy = [v for v in dict.fromkeys((claim.variant, claim.versus)) if v not in VARIANT_POLICY]
    if no_policy:  # a variant the iteration model does not know (e.g. bytescheduler): nothing to validate either
        return Stated(f"not possible: the iteration model has no policy for {' or '.join(no_policy)} "
                      f"(docs/explanation/iteration-model.md)", f"not possible: no {' or '.join(no_policy)} policy")
    missed = validation.missed(claim.cluster_size or 0, (claim.variant, claim.versus), claim.model, name)
    if missed:
        return Stated(f"not given: the iteration model is not validated ({'; '.join(missed)}; "
                      f"docs/explanation/iteration-model.md)",
                      f"not given: model not validated at the {label}")
    if (claim.model not in DEFAULT_SHAPE or not claim.cluster_size or claim.variant not in VARIANT_POLICY
            or claim.versus not in VARIANT_POLICY or claim.model not in gpu(name).models):
        return Stated(f"not given: the iteration model has no layer profile or policy for {claim.model} "
                      f"{claim.variant}", "not given: no layer profile")
    rate = gpu(name).throughput(claim.model)
    central = predicted_at(claim, tolerance, validation, name, rate.per_sec)
    stretches = over_range(claim, tolerance, validation, name)
    ends = [predicted_at(claim, tolerance, validation, name, x) for x in (rate.low, rate.high)]
    lowest, highest = min(x.low for x in (central, *ends)), max(x.high for x in (central, *ends))
    said = (f"{central.free:.2f}x at {rate.per_sec:g} {rate.short_unit} ({central.free:.2f}x with hosts that cost "
            f"nothing and hold nothing below the van, {central.costly:.2f}x with a testbed host's costs and queues; "
            f"{central.low:.2f} to {central.high:.2f} with the model's error ±{validation.speedup_bar:.0%}); over the "
            f"{label}'s plausible range, {rate.low:g} to {rate.high:g} {rate.short_unit}: {lowest:.2f} to {highest:.2f}; "
            f"{predicted_setting(claim, name)}")
    brief = f"{lowest:.2f}x to {highest:.2f}x"
    if len(stretches) == 1:
        return Stated(f"{said}: {central.kind} (predicted): over the whole range it {central.how}",
                      f"{brief}: {central.kind}", str(central.kind))
    parts = ", ".join(f"{s.kind} from {a:.1f} to {b:.1f} {rate.short_unit}" for a, b, s in stretches)
    flips = ", ".join(f"{b:.1f}" for _, b, _ in stretches[:-1])
    return Stated(f"{said}: {Verdict.INCONCLUSIVE} (predicted): the verdict flips within the range at {flips} "
                  f"{rate.short_unit} ({parts})", f"{brief}: {Verdict.INCONCLUSIVE}", str(Verdict.INCONCLUSIVE))


def emulated_verdict(claim: Claim, rows: pd.DataFrame, tolerance: Tolerance, withheld: str, study: str,
                     finished: Sequence[str] = (), *, paper: str = "") -> Stated:
    """The claim's emulated figure (speedup with its interval, n, where) and its verdict by the rule of a measured
    claim at a bandwidth (verdict.judge_at_bandwidth), in full and in brief (figure and verdict, or a short reason),
    with the verdict (runs on several engines: each engine's, and the verdict over them as ``combined`` gives it).
    ``withheld``: why no verdict may be given (the self-check), or "". ``finished``: the variants of the emulated
    runs at the claim's model and bandwidth that ran to the end."""
    mine = rows[(rows["model"] == claim.model) & (rows["bandwidth"] == claim.bandwidth)
                & (rows["variant"] == claim.variant) & (rows["versus"] == claim.versus)] if not rows.empty else rows
    if mine.empty:
        how = f"(ck reproduce study:{study} --target=TESTBED --emulate={paper_gpu(paper).name})"
        lacking = [v for v in (claim.variant, claim.versus) if v not in finished]
        if withheld:
            return Stated(withheld, "not given: self-check failed")
        if not finished or not lacking:
            return Stated(f"not run: no emulated runs of {claim.model} at {claim.bandwidth} are stored {how}",
                          "not run")
        return Stated(f"not run: the emulated runs of {claim.model} at {claim.bandwidth} that finished are of "
                      f"{', '.join(finished)}; none of {' or '.join(lacking)} {how}",
                      f"not run: no {' or '.join(lacking)}")
    said, brief, engines = [], [], []
    need = max(MIN_RUNS, tolerance.min_runs)
    for _, row in mine.iterrows():
        n = int(min(row["n_variant"], row["n_versus"]))
        engine = ENGINE_NAMES.get(str(row.get("engine", "")), str(row.get("engine", "")))
        figure = (f"{row['speedup']:.2f}x [{row['ci_low']:.2f}, {row['ci_high']:.2f}], n={n}, {row['setup']}, "
                  f"{engine}, {compute_label(str(row.get('gpu', '')))} emulated, k={row['dilation']:g}")
        short = f"{row['speedup']:.2f}x [{row['ci_low']:.2f}, {row['ci_high']:.2f}], n={n}"
        if len(mine) > 1:
            short = f"{engine}: {short}"
        kind = ""
        busy = float(row.get("host_cpu_busy", math.nan))
        if busy == busy:  # NaN: not recorded
            figure += f", hosts' CPU up to {busy:.0%} busy"
        if withheld:
            said.append(f"{figure}: {withheld}")
            brief.append(f"{short}: not given (self-check)")
        elif row.get("params_apart", 0):  # a run whose workers ended with different parameters did not train
            said.append(f"{figure}: not given: the workers' parameters ended apart in {int(row['params_apart'])} of "
                        f"{int(row['n_variant'] + row['n_versus'])} runs, so the engine did not keep the training "
                        f"in step")
            brief.append(f"{short}: not given (parameters apart)")
        elif row.get("cpu_bound", False):  # decided by each run's result (run/result.py)
            said.append(f"{figure}: not given: its runs warned they were CPU-bound, so the hosts' CPU rather than the "
                        f"links may have set the pace (raise --dilation)")
            brief.append(f"{short}: not given (CPU-bound)")
        elif n < need:
            said.append(f"{figure}: not given: n < {need}")
            brief.append(f"{short}: not given (n < {need})")
        else:
            judged, how = judge_at_bandwidth(row, claim, tolerance)
            kind = str(judged)
            said.append(f"{figure}: {kind} (emulated){':' if how.startswith(' ') else ''}{how}")
            brief.append(f"{short}: {kind}")
        engines.append((engine, kind))
    return Stated("; ".join(said), "; ".join(brief), combined(kind for _, kind in engines),
                  tuple(engines) if len(mine) > 1 else ())


def emulated_up_to(claim: Claim, rows: pd.DataFrame, tolerance: Tolerance, withheld: str,
                   study: str, paper: str = "") -> Stated:
    """An "up to" claim over the emulated configurations (bandwidths) of its model, by the rule of a measured one
    (verdict.judge_up_to: its best configuration), in full and in brief, with the verdict. Runs whose workers ended apart or that
    were CPU-bound are left out, as they give no verdict at a bandwidth either. ``paper``: the paper's GPU."""
    at = paper_gpu(paper)
    how = (f"(ck reproduce study:{study} --target=TESTBED --emulate={at.name} --models={claim.model} "
           f"--bandwidths=B1,B2,...)")
    mine = rows[(rows["model"] == claim.model) & (rows["variant"] == claim.variant)
                & (rows["versus"] == claim.versus)] if not rows.empty else rows
    if claim.model not in at.models:
        return Stated(f"not possible: the {at.label} has no compute profile for {claim.model} "
                      f"(reprokit/emulation/gpus.json)", "not possible: no profile")
    if withheld:
        return Stated(withheld, "not given: self-check failed")
    if mine.empty:
        return Stated(f"not run: no emulated runs of {claim.model} are stored {how}", "not run")
    usable = mine[(mine["params_apart"] == 0) & ~mine["cpu_bound"].astype(bool)]
    need = max(MIN_RUNS, tolerance.min_runs)
    has_enough = usable[["n_variant", "n_versus"]].min(axis=1) >= need
    enough, thin = usable[has_enough], usable[~has_enough]
    if enough.empty:
        return Stated(f"not given: no emulated configuration of {claim.model} has n >= {need} usable runs {how}",
                      f"not given (n < {need})")
    engine = str(enough.iloc[0]["engine"])
    kind, reason, row = judge_up_to(claim, enough, thin, tolerance, engine)
    n = int(min(row["n_variant"], row["n_versus"]))
    where = (f"{len(enough)} bandwidth(s) ({', '.join(map(str, enough['bandwidth']))}), {row['setup']}, "
             f"{compute_label(str(row.get('gpu', '')))} emulated")
    return Stated(f"{kind} (emulated) over {where}: {reason}",
                  f"{row['speedup']:.2f}x [{row['ci_low']:.2f}, {row['ci_high']:.2f}], n={n} at {row['bandwidth']}: "
                  f"{kind}", str(kind))


def compute_label(gpu_name: str) -> str:
    """How a setting label names the compute an emulated run waited: the GPU's label, or the profile file's name."""
    if gpu_name in gpus():
        return f"{gpu(gpu_name).label} compute"
    return f"compute measured in a run ({Path(gpu_name).name})" if gpu_name else "compute of an unrecorded profile"


def at_gpu(rows: pd.DataFrame, gpu_name: str, at: bool = True) -> pd.DataFrame:
    """The rows (emulated runs or their speedups) that waited ``gpu_name``'s compute, or (``at`` False) the others."""
    if rows.empty or "gpu" not in rows:
        return rows if not at else rows.iloc[0:0]
    chosen = rows["gpu"] == gpu_name
    return rows[chosen if at else ~chosen]


def finished_variants(runs: pd.DataFrame, claim: Claim) -> list[str]:
    """The variants of the runs at the claim's model and bandwidth that ran to the end, in order."""
    if runs.empty:
        return []
    here = runs[(runs["model"] == claim.model) & (runs["bandwidth"] == claim.bandwidth) & runs["ok"]]
    return sorted(set(here["variant"]))


@dataclass(frozen=True)
class LabelledInputs:
    """What a claim's kind judges its emulated and predicted verdicts from (JudgedKind.labelled): its overall measured
    verdict, the emulated speedups at the paper's GPU and at others', the emulated runs, the study's tolerance, why no
    emulated verdict may be given ("" when one may), the study's name, the model's validation and the paper's GPU."""
    measured: str
    at_paper: pd.DataFrame
    elsewhere: pd.DataFrame
    runs: pd.DataFrame
    tolerance: Tolerance
    withheld: str
    study: str
    checks: ModelValidation
    paper: str


def speedup_labelled(c: Claim, inputs: LabelledInputs) -> LabelledVerdict:
    """A speedup claim's emulated and predicted verdicts: an "up to" claim over the emulated bandwidths (emulated_up_to;
    none predicted), a claim at a bandwidth there (emulated_verdict, at the paper's GPU and apart at others') and
    predicted (predicted_judged)."""
    measured, at_paper, elsewhere, runs = inputs.measured, inputs.at_paper, inputs.elsewhere, inputs.runs
    tolerance, withheld, study, checks, paper = (inputs.tolerance, inputs.withheld, inputs.study, inputs.checks,
                                                 inputs.paper)
    if not c.bandwidth:
        emulated = emulated_up_to(c, at_paper, tolerance, withheld, study, paper)
        return LabelledVerdict(c.id, UP_TO, measured, emulated.full, UP_TO_NOT_PREDICTED, "", emulated.brief,
                               "not given (see the figures below)", emulated.verdict)
    other = emulated_verdict(c, elsewhere, tolerance, withheld, study, paper=paper).full if not elsewhere.empty else ""
    emulated = emulated_verdict(c, at_paper, tolerance, withheld, study, finished_variants(at_gpu(runs, paper), c),
                                paper=paper)
    predicted = predicted_judged(c, tolerance, checks, paper)
    return LabelledVerdict(c.id, c.bandwidth, measured, emulated.full, predicted.full,
                           "" if other.startswith(("not run", withheld or "not run")) else other,
                           emulated.brief, predicted.brief, emulated.verdict, predicted.verdict, emulated.engines)
