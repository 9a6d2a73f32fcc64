"""The kinds of claim: one class each, registered by name (claims.register_kind), each owning its schema, its
judging from the speedup rows (measured; emulated, labelled) and how its figure and verdict are shown: the paper's
side (claims.ClaimKind) and the analysis's (judged.JudgedKind), which each class here subclasses.

A study entry's claim says its ``kind`` ("speedup" when it does not). Adding a kind is one class here with
``@register_kind`` (and its tests): a ``name``, the fields its claims hold (``required``, ``optional``), ``build``,
and either the ClaimKind and JudgedKind methods or, for a claim judged over every configuration of a model with
enough runs, ``OverConfigurations``'s one method ``rule``. ``reprokit.study`` imports this module, so every kind is registered
before a study entry is read.

The kinds:

* ``speedup`` (the first, P3's and ByteScheduler's claims): the subject's speedup over its baseline, claimed at a
  bandwidth (and cluster size) or "up to" over realistic bandwidths; verdict.py judges it, labelled.py gives its
  emulated and predicted verdicts.
* ``bounded``: the subject's speedup over its baseline is at most ``at_most`` in every configuration measured.
* ``concave``: the speedup is concave in the configurations' computation-to-communication ratio (it rises, then
  flattens or falls).
* ``little-beyond-overlap``: the subject's speedup over a baseline that overlaps communication with computation
  without scheduling (``overlap_baseline``) is at most 1 + ``margin`` in every configuration measured; without one
  named, or without its runs, not testable here.

Each of the last three is judged on one setup and engine over the configurations (bandwidths) of its model and pair
that the speedup claims' "up to" rule admits (verdict._admissible: the study's profile, or any on a CPU testbed whose
baseline was communication-bound), counting only those with n >= MIN_RUNS (and the study's min_runs) per variant;
with none, it is inconclusive. Emulated runs are judged by the same rule and labelled; none is predicted (the
iteration model predicts one setting at a time, and these claims are about all of them).
"""
from __future__ import annotations

import math
from typing import Any, ClassVar

import pandas as pd

from reprokit.core import schema as s
from reprokit.core.outputs import figure_text
from reprokit.emulation.gpus import paper_gpu
from reprokit.engines.base import EMBEDDED
from reprokit.study.analysis.judged import ClaimAxes, JudgedKind
from reprokit.study.analysis.labelled import LabelledInputs, LabelledVerdict, speedup_labelled
from reprokit.study.analysis.speedup import ENGINE_NAMES
from reprokit.study.analysis.verdict import (
    NOT_MEASURED,
    ClaimVerdict,
    Setup,
    Verdict,
    admitted,
    buildable,
    claim_rows,
    claim_verdict,
    judge,
)
from reprokit.study.paper.claims import MIN_RUNS, POSITIVE, Claim, Tolerance, register_kind
from reprokit.study.paper.rates import same_rate


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _x(value: float | None) -> str:
    return "n/a" if _num(value) is None else f"{value:.2f}x"


@register_kind
class SpeedupKind(JudgedKind):
    """The subject's speedup over its baseline: ``speedup`` at ``bandwidth`` on ``cluster_size`` machines, or "up to"
    ``speedup`` when the bandwidth is not stated (verdict.py's module docstring gives the rules)."""
    name = "speedup"
    required = {"speedup": POSITIVE}
    optional = {"bandwidth": s.Optional(s.Text(40)), "cluster_size": s.Optional(s.Int(1, 1_000_000)),
                "paper_comm_to_compute": s.Obj(required={"value": POSITIVE, "source": s.Where(
                    s.Text(), lambda v: bool(v.strip()), "the text that states it")})}

    def build(self, raw: Any, **common: Any) -> Claim:
        fact = raw.get("paper_comm_to_compute")
        return Claim(speedup=float(raw["speedup"]), bandwidth=raw.get("bandwidth"),
                     cluster_size=raw.get("cluster_size"), **common,
                     **({"paper_ratio": float(fact["value"]), "paper_ratio_source": fact["source"]} if fact else {}))

    def judge(self, claim: Claim, setup: Setup, speedup_rows: pd.DataFrame, tol: Tolerance,
              program_models: set[str], engine: str) -> ClaimVerdict:
        return judge(claim, setup, speedup_rows, tol, program_models, engine)

    def labelled(self, claim: Claim, inputs: LabelledInputs) -> LabelledVerdict:
        return speedup_labelled(claim, inputs)

    def paper_figure(self, claim: Claim) -> str:
        """In brief: "+25% at 4gbit on 4 machines", "up to +66%"."""
        gain = f"+{(claim.speedup - 1) * 100:.0f}%"
        if not claim.bandwidth:
            return f"up to {gain}"
        on = f" on {claim.cluster_size} machines" if claim.cluster_size else ""
        return f"{gain} at {claim.bandwidth}{on}"

    def claimed(self, claim: Claim) -> str:
        return f"{claim.speedup:.2f}x ({claim.variant} over {claim.versus})"

    def where(self, claim: Claim) -> str:
        return claim.bandwidth or "not stated (up to)"

    def draw(self, claim: Claim, axes: ClaimAxes) -> None:
        """At a measured bandwidth a red star (on the left, the measured baseline times the claim); at a bandwidth
        no run had, a label in the shaded area (render.draw_model draws the hollow star); "up to" a dashed line."""
        ax_t, ax_s, ax_r, x_of, summary = axes.ax_t, axes.ax_s, axes.ax_r, axes.x_of, axes.summary
        if claim.bandwidth in axes.claim_only:
            ax_s.annotate(figure_text(f"claimed at {claim.bandwidth}, not measured\n({claim.id})"),
                          (x_of[claim.bandwidth], claim.speedup), textcoords="offset points", xytext=(0, -10),
                          ha="center", va="top", fontsize=6, color="0.4")
        elif claim.bandwidth:
            x = x_of[next(m for m in axes.measured if same_rate(m, claim.bandwidth))]
            ax_s.plot([x], [claim.speedup], marker="*", markersize=15, color="crimson", linestyle="none",
                      label=f"claim {claim.id} ({claim.source})")
            base = summary[(summary["bandwidth"] == claim.bandwidth) & (summary["variant"] == claim.versus)
                           & (summary["engine"] == axes.decided.get(claim.id, EMBEDDED))]
            if not base.empty and _num(base["geometric_mean"].iloc[0]) is not None:
                ax_t.plot([x], [base["geometric_mean"].iloc[0] * claim.speedup], marker="*", markersize=15,
                          color="crimson", linestyle="none", label=figure_text(f"claimed {claim.variant} ({claim.id})"))
        else:
            for ax in (ax_s, ax_r):
                ax.axhline(claim.speedup, color="crimson", linestyle="--", linewidth=1,
                           label=figure_text(f"claim {claim.id}: up to {claim.speedup:.2f}x ({claim.source})"))


# --- claims judged over every configuration of a model ---------------------------------------------------------

def configuration(row: pd.Series) -> str:
    """One configuration's speedup with its interval, n, bandwidth and measured ratio."""
    n = int(min(row["n_variant"], row["n_versus"]))
    ratio = _num(row["comm_to_compute"])
    at = f" (communication/computation {ratio:.2f})" if ratio is not None else ""
    return f"{_x(row['speedup'])} [{_x(row['ci_low'])}, {_x(row['ci_high'])}], n={n} at {row['bandwidth']}{at}"


def left_out(thin: pd.DataFrame, need: int) -> str:
    """The configurations not counted for too few runs, said after a reason ("" when none)."""
    if thin.empty:
        return ""
    return (f" (not counted, n < {need}: "
            f"{', '.join(f'{r.bandwidth} n={int(min(r.n_variant, r.n_versus))}' for r in thin.itertuples())})")


class OverConfigurations(JudgedKind):
    """A claim about every configuration (bandwidth) of its model and pair: ``rule`` judges the configurations with
    enough runs; the rest (which configurations count, too few runs, the emulated verdict, the figures) is here.
    A kind of this shape is one subclass with a name, its fields, ``build``, ``rule`` and its brief figures."""
    # What the claim is about where the pair was not run at all on a setup that could run it: "inconclusive" (not
    # measured) by default; a kind whose pair needs a variant the study may not run says why it is not testable.
    untested_pair: ClassVar[str] = ""

    def rule(self, claim: Claim, enough: pd.DataFrame, thin: pd.DataFrame,
             tol: Tolerance) -> tuple[Verdict, str, pd.Series | None]:
        """The verdict over the configurations with enough runs (``enough``, never empty; ``thin``: those with
        fewer), its reason, and the configuration it reports (None: none)."""
        raise NotImplementedError

    def brief(self, claim: Claim) -> str:
        """The claim's figure in brief, without its pair."""
        raise NotImplementedError

    def paper_figure(self, claim: Claim) -> str:
        return self.brief(claim)

    def claimed(self, claim: Claim) -> str:
        return f"{self.brief(claim)} ({claim.variant} over {claim.versus})"

    def where(self, claim: Claim) -> str:
        return "every configuration measured"

    def draw(self, claim: Claim, axes: ClaimAxes) -> None:
        """Nothing by default: the figure shows the speedups the verdict rests on, and the tables state the claim; a
        kind with a figure on the speedup axes draws it."""

    def judge(self, claim: Claim, setup: Setup, speedup_rows: pd.DataFrame, tol: Tolerance,
              program_models: set[str], engine: str) -> ClaimVerdict:
        def verdict(kind: Verdict, reason: str, row: pd.Series | None = None, basis: str | None = None,
                    measured: bool = True) -> ClaimVerdict:
            return claim_verdict(claim, setup, engine, kind, reason, row, basis, measured)

        why_not = buildable(claim, setup, program_models)
        if why_not:
            return verdict(Verdict.NOT_TESTABLE, why_not)
        rows = claim_rows(claim, setup, speedup_rows, engine)
        if rows.empty and self.untested_pair:
            return verdict(Verdict.NOT_TESTABLE, self.untested_pair.format(claim=claim, engine=ENGINE_NAMES[engine]))
        if rows.empty:
            return verdict(Verdict.INCONCLUSIVE, f"{NOT_MEASURED}: no successful runs of both {claim.variant} and "
                                                 f"{claim.versus} for {claim.model} on {ENGINE_NAMES[engine]} (ck "
                                                 f"reproduce study:NAME --target=... --engines={engine} "
                                                 f"--models={claim.model})", measured=False)
        runs = admitted(claim, setup, rows, tol)
        if runs.why:
            return verdict(Verdict.INCONCLUSIVE, runs.why, runs.row, runs.basis)
        if runs.enough.empty:
            row = runs.thin.loc[runs.thin["speedup"].idxmax()]
            return verdict(Verdict.INCONCLUSIVE, f"measured {configuration(row)}: n < {runs.need} in every "
                                                 f"configuration: no verdict (run --repetitions={runs.need} or more)",
                           row, runs.basis)
        kind, reason, shown = self.rule(claim, runs.enough, runs.thin, tol)
        return verdict(kind, reason, shown, runs.basis)

    def labelled(self, claim: Claim, inputs: LabelledInputs) -> LabelledVerdict:
        """The emulated verdict by ``rule`` over the emulated configurations at the paper's GPU; none predicted."""
        rows, tol = inputs.at_paper, inputs.tolerance
        mine = rows[(rows["model"] == claim.model) & (rows["variant"] == claim.variant)
                    & (rows["versus"] == claim.versus)] if not rows.empty else rows
        predicted = (f"not given: a {self.name} claim is about every configuration measured; the iteration model "
                     f"predicts one setting at a time")
        how = (f"(ck reproduce study:{inputs.study} --target=TESTBED --emulate={paper_gpu(inputs.paper).name} "
               f"--models={claim.model} --bandwidths=B1,B2,...)")
        judged = ""  # the emulated verdict, when one is given
        if inputs.withheld:
            emulated, brief = inputs.withheld, "not given: self-check failed"
        elif mine.empty:
            emulated, brief = f"not run: no emulated runs of {claim.model} are stored {how}", "not run"
        else:
            usable = mine[(mine["params_apart"] == 0) & ~mine["cpu_bound"].astype(bool)]
            need = max(MIN_RUNS, tol.min_runs)
            has_enough = usable[["n_variant", "n_versus"]].min(axis=1) >= need
            enough, thin = usable[has_enough], usable[~has_enough]
            if enough.empty:
                emulated, brief = (f"not given: no emulated configuration of {claim.model} has n >= {need} usable "
                                   f"runs {how}"), f"not given (n < {need})"
            else:
                kind, reason, row = self.rule(claim, enough, thin, tol)
                judged = str(kind)
                emulated = f"{kind} (emulated) over {len(enough)} configuration(s): {reason}"
                # The brief cell speaks of every configuration, as the claim does: their range, then the one that
                # decided (a single configuration's figure alone reads as a verdict at that setting)
                deciding = f"; deciding: {configuration(row)}" if row is not None else ""
                brief = (f"over {len(enough)} configuration(s), {enough['speedup'].min():.2f}x to "
                         f"{enough['speedup'].max():.2f}x{deciding}: {kind}")
        return LabelledVerdict(claim.id, self.where(claim), inputs.measured, emulated, predicted, "", brief,
                               "not given (about every configuration)", judged)


@register_kind
class BoundedKind(OverConfigurations):
    """The subject's speedup over its baseline is at most ``at_most`` in every configuration measured."""
    name = "bounded"
    required = {"at_most": POSITIVE}
    stated_rule = ("A bounded claim (the speedup is at most X in every configuration measured) is judged over every "
                   "configuration with enough runs: replicated when every configuration's interval lies at or below X, "
                   "not replicated when one configuration's interval lies wholly above X (its lower end exceeds X), "
                   "inconclusive otherwise (an interval reaching across X, or none given).")
    bound_name = "at_most"

    def build(self, raw: Any, **common: Any) -> Claim:
        bound = float(raw[self.bound_name])
        return Claim(speedup=bound, bandwidth=None, cluster_size=None, kind=self.name,
                     figures=((self.bound_name, bound),), **common)

    def bound(self, claim: Claim) -> float:
        """The speedup no configuration may exceed."""
        return claim.figure(self.bound_name)

    def brief(self, claim: Claim) -> str:
        return f"at most {self.bound(claim):.2f}x in every configuration"

    def rule(self, claim: Claim, enough: pd.DataFrame, thin: pd.DataFrame,
             tol: Tolerance) -> tuple[Verdict, str, pd.Series | None]:
        bound = self.bound(claim)
        need = max(MIN_RUNS, tol.min_runs)
        every = "; ".join(configuration(r) for _, r in enough.iterrows())
        rest = left_out(thin, need)
        above = enough[enough["ci_low"] > bound]
        if not above.empty:
            row = above.loc[above["ci_low"].idxmax()]
            return Verdict.NOT_REPLICATED, (f"{configuration(row)} lies wholly above the claimed bound {bound:.2f}x "
                                            f"(its interval's lower end exceeds it){rest}"), row
        below = enough["ci_high"] <= bound  # a missing interval (NaN) is never below
        if below.all():
            row = enough.loc[enough["ci_high"].idxmax()]
            return Verdict.REPLICATED, (f"the interval of every configuration with enough runs lies at or below the "
                                        f"claimed bound {bound:.2f}x: {every}{rest}"), row
        open_rows = enough[~below]
        row = open_rows.loc[open_rows["speedup"].idxmax()]
        return Verdict.INCONCLUSIVE, (f"{configuration(row)}: its interval reaches across the claimed bound "
                                      f"{bound:.2f}x (or none is given), so it neither shows nor excludes the bound; "
                                      f"add repetitions{rest}"), row

    def draw(self, claim: Claim, axes: ClaimAxes) -> None:
        for ax in (axes.ax_s, axes.ax_r):
            ax.axhline(self.bound(claim), color="crimson", linestyle=":", linewidth=1,
                       label=figure_text(f"claim {claim.id}: at most {self.bound(claim):.2f}x"))


@register_kind
class LittleBeyondOverlapKind(BoundedKind):
    """The subject's speedup over a baseline that already overlaps communication with computation without scheduling
    (``overlap_baseline``, a variant of the study) is at most 1 + ``margin`` in every configuration measured: judged
    as a bounded claim with the bound 1 + margin, on that pair only. Without such a baseline it is not testable: the
    speedup over the study's own baseline mixes what overlap gives with what scheduling adds, and the speedup rows
    hold no perfect-overlap figure of their own (their ratio r gives the bound (1 + r) / max(1, r) of overlapping and
    scheduling together over a baseline that overlaps nothing, which does not separate the two)."""
    name = "little-beyond-overlap"
    required = {"margin": POSITIVE}
    optional = {"overlap_baseline": s.Name()}
    stated_rule = ("A little-beyond-overlap claim (the speedup over a baseline that already overlaps communication "
                   "with computation without scheduling is at most 1 + m in every configuration measured) is judged "
                   "as a bounded claim with the bound 1 + m, on that pair only; without such a baseline, or without "
                   "its runs, it is not testable here.")
    untested_pair = ("no successful runs of both {claim.variant} and {claim.versus} (the baseline that overlaps "
                     "communication with computation without scheduling) for {claim.model} on {engine} (ck reproduce "
                     "study:NAME --variants=...,{claim.versus} runs that baseline)")
    no_baseline = ("the study names no baseline that overlaps communication with computation without scheduling "
                   "(the claim's overlap_baseline): {claim.variant} over {claim.versus} mixes what overlap gives with "
                   "what scheduling adds, and the speedup rows hold no perfect-overlap figure that separates the two "
                   "(their communication/computation ratio r bounds overlapping and scheduling together, (1 + r) / "
                   "max(1, r) over a baseline that overlaps nothing)")

    def build(self, raw: Any, **common: Any) -> Claim:
        margin = float(raw["margin"])
        named: tuple[tuple[str, float | str], ...] = ()
        if "overlap_baseline" in raw:
            common["versus"] = str(raw["overlap_baseline"])
            named = (("overlap_baseline", str(raw["overlap_baseline"])),)
        return Claim(speedup=1 + margin, bandwidth=None, cluster_size=None, kind=self.name,
                     figures=(("margin", margin), *named), **common)

    def bound(self, claim: Claim) -> float:
        return 1 + claim.figure("margin")

    def brief(self, claim: Claim) -> str:
        return f"at most +{claim.figure('margin') * 100:.0f}% beyond overlap in every configuration"

    def claimed(self, claim: Claim) -> str:
        over = claim.named("overlap_baseline")
        return f"{self.brief(claim)} ({claim.variant} over {f'{over}, which overlaps' if over else 'a baseline that overlaps: none named'})"

    def judge(self, claim: Claim, setup: Setup, speedup_rows: pd.DataFrame, tol: Tolerance,
              program_models: set[str], engine: str) -> ClaimVerdict:
        if claim.named("overlap_baseline") is None:
            return ClaimVerdict(claim.id, setup.label, Verdict.NOT_TESTABLE, self.no_baseline.format(claim=claim),
                                engine=engine)
        return super().judge(claim, setup, speedup_rows, tol, program_models, engine)

    def labelled(self, claim: Claim, inputs: LabelledInputs) -> LabelledVerdict:
        if claim.named("overlap_baseline") is None:
            return LabelledVerdict(claim.id, self.where(claim), inputs.measured,
                                   f"not testable: {self.no_baseline.format(claim=claim)}",
                                   "not given: no overlap baseline named", "", "not testable: no overlap baseline",
                                   "not given: no overlap baseline")
        return super().labelled(claim, inputs)

    def draw(self, claim: Claim, axes: ClaimAxes) -> None:
        """Nothing: the figure's speedups are over the study's baseline, not over the overlap baseline."""


MIN_RATIOS = 3  # a concave claim is judged only with this many distinct ratios, each with enough runs


@register_kind
class ConcaveKind(OverConfigurations):
    """The subject's speedup over its baseline is concave in the configurations' computation-to-communication ratio
    x (1 / the baseline's measured communication/computation): as x grows it rises, then flattens or falls.

    The test: the configurations with enough runs and a measured ratio, sorted by x, need at least MIN_RATIOS distinct
    ratios. Between consecutive ones the slope has an interval from the speedups' intervals, taken at their far ends
    (conservative: [(low2 - high1) / dx, (high2 - low1) / dx]). Concavity says the slopes fall: not replicated when
    some slope's interval lies wholly above the previous slope's (the speedup bends upward there beyond its
    intervals); replicated when none does and at least one slope's interval lies wholly below the previous one's (a
    bend downward the intervals show); inconclusive otherwise (a straight line fits within the intervals)."""
    name = "concave"
    stated_rule = ("A concave claim (the speedup is concave in the computation-to-communication ratio x: it rises, "
                   "then flattens or falls) needs at least 3 distinct measured ratios with enough runs; sorted by x, "
                   "the slope between consecutive ones has the interval [(low2 - high1) / dx, (high2 - low1) / dx]; "
                   "not replicated when a slope's interval lies wholly above the previous one's, replicated when none "
                   "does and one lies wholly below the previous one's, inconclusive otherwise.")

    def build(self, raw: Any, **common: Any) -> Claim:
        return Claim(speedup=1.0, bandwidth=None, cluster_size=None, kind=self.name, **common)

    def brief(self, claim: Claim) -> str:
        return "concave in computation/communication"

    def rule(self, claim: Claim, enough: pd.DataFrame, thin: pd.DataFrame,
             tol: Tolerance) -> tuple[Verdict, str, pd.Series | None]:
        need = max(MIN_RUNS, tol.min_runs)
        rest = left_out(thin, need)
        usable = enough[enough["comm_to_compute"].notna() & (enough["comm_to_compute"] > 0)
                        & enough["ci_low"].notna() & enough["ci_high"].notna()]
        usable = usable.assign(_x=1.0 / usable["comm_to_compute"]).sort_values("_x", kind="stable")
        peak = usable.loc[usable["speedup"].idxmax()] if not usable.empty else enough.loc[enough["speedup"].idxmax()]
        # one point per distinct ratio: the first configuration there (two bandwidths at one ratio are one x)
        points = usable.drop_duplicates(subset="_x")
        if len(points) < MIN_RATIOS:
            return Verdict.INCONCLUSIVE, (f"{len(points)} distinct measured ratio(s) with n >= {need} and an interval; "
                                          f"the test of concavity needs at least {MIN_RATIOS}: add bandwidths (ck "
                                          f"reproduce study:NAME --bandwidths=...){rest}"), peak
        xs, low, high = points["_x"].tolist(), points["ci_low"].tolist(), points["ci_high"].tolist()
        slopes = [((low[i + 1] - high[i]) / (xs[i + 1] - xs[i]), (high[i + 1] - low[i]) / (xs[i + 1] - xs[i]))
                  for i in range(len(xs) - 1)]
        at = [f"x {xs[i]:.2f} to {xs[i + 1]:.2f}: [{a:.3f}, {b:.3f}]" for i, (a, b) in enumerate(slopes)]
        shown = ("speedup by computation/communication x: "
                 + "; ".join(f"x {x:.2f}: {configuration(r)}" for x, (_, r) in zip(xs, points.iterrows()))
                 + f"; slope intervals {'; '.join(at)}")
        rising = [i for i in range(1, len(slopes)) if slopes[i][0] > slopes[i - 1][1]]
        if rising:
            i = rising[0]
            return Verdict.NOT_REPLICATED, (f"the slope after x {xs[i]:.2f} lies wholly above the slope before it: "
                                            f"the speedup bends upward there beyond its intervals, which a concave "
                                            f"curve cannot; {shown}{rest}"), peak
        falling = [i for i in range(1, len(slopes)) if slopes[i][1] < slopes[i - 1][0]]
        if falling:
            i = falling[0]
            return Verdict.REPLICATED, (f"the slope after x {xs[i]:.2f} lies wholly below the slope before it and no "
                                        f"slope lies wholly above the one before: the speedup rises, then flattens "
                                        f"or falls; {shown}{rest}"), peak
        return Verdict.INCONCLUSIVE, (f"no slope's interval lies wholly above or below the previous one's, so a "
                                      f"straight line fits within the intervals; add repetitions or ratios; "
                                      f"{shown}{rest}"), peak
