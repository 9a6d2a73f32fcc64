"""A kind of claim as the analysis judges and draws it (``JudgedKind``), and the two places that ask every claim's
kind: ``judge_all`` (its measured verdicts) and ``labelled_verdicts`` (its emulated and predicted ones).

The paper's side of a kind (its schema, ``build``, how the claim is stated) is claims.ClaimKind, in the paper layer,
which imports nothing of the analysis; JudgedKind adds the judging side (``judge``, ``labelled``, ``draw``). Each kind
is one class of both sides, in kinds.py, registered in claims.CLAIM_KINDS; ``judged_kind`` gives a claim's kind with
its judging side, typed.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from reprokit.emulation.gpus import paper_gpu
from reprokit.study.analysis.labelled import LabelledInputs, LabelledVerdict, at_gpu, emulation_status, self_check
from reprokit.study.analysis.speedup import claim_pairs, speedups
from reprokit.study.analysis.verdict import (
    NOT_MEASURED,
    ClaimVerdict,
    Setup,
    Verdict,
    engines_of,
    measured_at_all,
    setups,
)
from reprokit.study.paper.claims import Claim, ClaimKind, Study, Tolerance, kind_of
from reprokit.study.whatif.model_check import ModelValidation

if TYPE_CHECKING:
    from matplotlib.axes import Axes


@dataclass(frozen=True)
class ClaimAxes:
    """A model's figure as render.draw_model hands it to each claim's kind: throughput (``ax_t``), speedup against
    bandwidth (``ax_s``) and against the measured ratio (``ax_r``); each bandwidth's x (``x_of``), the measured ones
    and those only a claim names; the model's configurations (``summary``) and the engine each claim is decided on."""
    ax_t: Axes
    ax_s: Axes
    ax_r: Axes
    x_of: dict[str, float]
    measured: list[str]
    claim_only: list[str]
    summary: pd.DataFrame
    decided: dict[str, str]


class JudgedKind(ClaimKind):
    """A kind of claim with its judging side: how a claim of it is judged from the speedup rows (``judge``;
    ``labelled``: emulated and predicted) and drawn on its model's figure (``draw``). Every kind of kinds.py is one."""

    def judge(self, claim: Claim, setup: Setup, speedup_rows: pd.DataFrame, tol: Tolerance,
              program_models: set[str], engine: str) -> ClaimVerdict:
        """The claim's measured verdict on one setup from the runs of one engine."""
        raise NotImplementedError

    def labelled(self, claim: Claim, inputs: LabelledInputs) -> LabelledVerdict:
        """The claim's emulated and predicted verdicts, labelled (never counted)."""
        raise NotImplementedError

    def draw(self, claim: Claim, axes: ClaimAxes) -> None:
        """The claim on its model's figure (render.draw_model)."""
        raise NotImplementedError


def judged_kind(claim: Claim) -> JudgedKind:
    """The kind that judges and draws ``claim`` (claims.kind_of, with its judging side)."""
    kind = kind_of(claim)
    if not isinstance(kind, JudgedKind):
        raise TypeError(f"claim kind {claim.kind!r} ({type(kind).__name__}) has no judging side: a kind of claim "
                        f"subclasses JudgedKind (reprokit/study/analysis/kinds.py)")
    return kind


def judge_all(study: Study, df: pd.DataFrame, program_models: set[str]) -> list[ClaimVerdict]:
    """A verdict per claim, setup and engine that has runs on that setup, as the claim's kind judges it (a speedup
    claim: judge)."""
    rows = speedups(df, claim_pairs(study), study.tolerance.confidence)
    found = setups(df)
    if not found:
        return [ClaimVerdict(c.id, "no runs", Verdict.INCONCLUSIVE,
                             f"{NOT_MEASURED}: no runs stored yet (ck reproduce study:{study.name})", measured=False)
                for c in study.claims]
    return [judged_kind(c).judge(c, s, rows, study.tolerance, program_models, engine) for c in study.claims
            for s in found for engine in engines_of(df[df["setup"] == s.label])]


def labelled_verdicts(claims: Sequence[Claim], overall: Mapping[str, str], study: str, *, tolerance: Tolerance,
                      verdicts: Sequence[ClaimVerdict], check: Mapping[str, Any] | None = None,
                      emulated: pd.DataFrame | None = None, emulated_runs: pd.DataFrame | None = None,
                      validation: ModelValidation | None = None, gpu_name: str = "") -> list[LabelledVerdict]:
    """``gpu_name``: the paper's GPU (Study.gpu; "" for gpus.json's default), the compute the claims are judged at.
    ``emulated``: the emulated runs' speedups (Analysis.emulated_speedups); figures are shown even where the
    self-check withholds a verdict, labelled so. ``emulated_runs`` (Analysis.emulated_runs) name the variants
    stored where a claim's pair is not. ``verdicts``: the measured ones; a claim none of whose
    configurations was measured reads "not measured" rather than its overall "inconclusive". ``check`` and
    ``validation``: the emulation's self-check and the model's validation, the stored ones by default."""
    withheld = emulation_status(self_check() if check is None else check)
    rows = emulated if emulated is not None else pd.DataFrame()
    runs = emulated_runs if emulated_runs is not None else pd.DataFrame()
    checks = validation or ModelValidation.stored()
    paper = paper_gpu(gpu_name).name
    # The claims are judged at the paper's GPU; runs that waited another's compute are shown apart, as figures of
    # that GPU, never as the claim's verdict.
    at_paper, elsewhere = at_gpu(rows, paper), at_gpu(rows, paper, at=False)
    out = []
    for c in claims:
        measured = overall.get(c.id, NOT_MEASURED) if measured_at_all(c.id, verdicts) else NOT_MEASURED
        out.append(judged_kind(c).labelled(c, LabelledInputs(measured, at_paper, elsewhere, runs, tolerance,
                                                             withheld, study, checks, paper)))
    return out
