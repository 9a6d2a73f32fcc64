"""The report's answer: two sentences and one table, claim by claim (the paper's figure, then measured, emulated and
predicted here, then the verdict that counts), each cell a figure with its interval or a short reason."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from reprokit.emulation.gpus import paper_gpu
from reprokit.study.analysis.labelled import LabelledVerdict
from reprokit.study.analysis.verdict import NOT_MEASURED, ClaimVerdict, Verdict, measured_at_all
from reprokit.study.paper.claims import Claim, Study, kind_of


@dataclass(frozen=True)
class AnswerRow:
    """One claim's row: its cells as the table shows them, then the verdicts its emulated and predicted cells state,
    as data (the claims page, claims_page.py, reads these, never the cells' words)."""
    claim: str  # the claim's id
    paper: str  # what the paper claims, in brief
    measured: str
    emulated: str
    predicted: str
    verdict: str  # the measured verdict, the only one that counts, or "not measured"
    emulated_verdict: str = ""  # the verdict the emulated cell states (a Verdict's value), or "" when it states none
    predicted_verdict: str = ""  # the verdict the predicted cell states (a Verdict's value), or ""
    emulated_engines: tuple[tuple[str, str], ...] = ()  # emulated on several engines: each one's name and verdict

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "emulated_engines": [list(pair) for pair in self.emulated_engines]}  # as JSON reads it


@dataclass(frozen=True)
class Answer:
    summary: str
    rows: tuple[AnswerRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "rows": [r.to_dict() for r in self.rows]}


def paper_figure(claim: Claim) -> str:
    """What the paper claims, in brief: as the claim's kind says it (ClaimKind.paper_figure)."""
    return kind_of(claim).paper_figure(claim)


def measured_brief(claim: Claim, verdicts: Sequence[ClaimVerdict], engine: str) -> str:
    """The highest measured speedup of the claim on the engine its verdict is decided on, with interval and n."""
    mine = [v for v in verdicts if v.claim == claim.id and v.engine == engine and v.measured and v.speedup is not None]
    if not mine:
        return NOT_MEASURED
    best = max(mine, key=lambda v: v.speedup or 0.0)
    figure = f"{best.speedup:.2f}x"
    if best.ci_low is not None and best.ci_high is not None:
        figure += f" [{best.ci_low:.2f}, {best.ci_high:.2f}]"
    return figure + (f", n={best.n}" if best.n is not None else "") + (f" at {best.bandwidth}" if best.bandwidth
                                                                       and not claim.bandwidth else "")


def answer(study: Study, verdicts: Sequence[ClaimVerdict], overall: dict[str, Verdict], decided: dict[str, str],
           labelled: Sequence[LabelledVerdict]) -> Answer:
    by_claim = {v.claim: v for v in labelled}
    rows = []
    for c in study.claims:
        here = by_claim.get(c.id)
        measured = measured_at_all(c.id, verdicts)
        rows.append(AnswerRow(
            claim=c.id, paper=paper_figure(c),
            measured=measured_brief(c, verdicts, decided.get(c.id, "")) if measured else NOT_MEASURED,
            emulated=here.emulated_brief if here else NOT_MEASURED,
            predicted=here.predicted_brief if here else NOT_MEASURED,
            verdict=str(overall[c.id]) if measured else NOT_MEASURED,
            emulated_verdict=here.emulated_verdict if here else "",
            predicted_verdict=here.predicted_verdict if here else "",
            emulated_engines=here.emulated_engines if here else ()))
    judged = Counter(r.verdict for r in rows if r.verdict != NOT_MEASURED)
    if judged:
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(judged.items()))
        first = f"Measured here, {sum(judged.values())} of {len(rows)} claims were judged: {counts}."
    else:
        first = f"None of the {len(rows)} claims was measured here on bandwidth-bound runs, so none is judged."
    second = (f"Emulated and predicted figures are at the paper's GPU ({paper_gpu(study.gpu).label} compute) and never "
              f"count towards a badge.")
    return Answer(f"{first} {second}", tuple(rows))
