"""ACM's badges for the artifact: Artifacts Available, Artifacts Evaluated - Functional, Results Reproduced.

The "Results Reproduced" badge judges each claim on the authors' build where
it was measured on a setup that can test the claim, else on MXNet 1.9.1's P3,
and says which; P3 over the worker-update baseline is named, never counted.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pandas as pd

from reprokit.engines.base import ARTIFACT, EMBEDDED
from reprokit.study.analysis.speedup import ENGINE_NAMES, WORKER_UPDATE
from reprokit.study.analysis.verdict import ClaimVerdict, Verdict, decided_on, overall
from reprokit.study.paper.claims import DEFAULT_SUBJECT, Study, Subject


class BadgeStatus(StrEnum):
    """Whether the report recommends a badge; its value is what reports show (StrEnum: str() is the value)."""
    RECOMMENDED = "recommended"
    NOT_RECOMMENDED = "not recommended"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Badge:
    name: str  # ACM: Artifacts Available, Artifacts Evaluated - Functional, Results Reproduced
    status: BadgeStatus
    reasons: tuple[str, ...]
    rests_on: str = ""  # the engine and the artifact the recommendation rests on, in brief

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "reasons": list(self.reasons), "rests_on": self.rests_on}


def badges(study: Study, df: pd.DataFrame, verdicts: Sequence[ClaimVerdict],
           program_models: set[str]) -> list[Badge]:
    return [available_badge(study), functional_badge(df, study.subject),
            reproduced_badge(study, verdicts, decided_on(study, verdicts))]


def available_badge(study: Study) -> Badge:
    available = study.artifact.get("available", {})
    if available.get("doi"):
        return Badge("Artifacts Available", BadgeStatus.RECOMMENDED, (
            f"the authors' artifact is archived on {available.get('archive', 'an archive')} with DOI {available['doi']}"
            f" ({available.get('file', '')}) and published at {available.get('repository', 'n/a')}",
            "recorded in the study entry; this report did not download the archive (no internet here)"),
            "the study entry's record of the archive")
    return Badge("Artifacts Available", BadgeStatus.NOT_RECOMMENDED,
                 ("the study records no permanent archive (DOI) of the artifact",), "the study entry")


def engines_run(df: pd.DataFrame) -> str:
    return ", ".join(ENGINE_NAMES.get(e, e) for e in sorted(set(df["engine"]))) if not df.empty else "no runs"


def functional_badge(df: pd.DataFrame, subject: Subject = DEFAULT_SUBJECT) -> Badge:
    """The badge is the authors' artifact's: recommended only when their build ran, every engine, model and variant
    that ran has a success, and no success ended out of sync. Without a run of their build it is undecided, whatever
    our reproduction on stock MXNet did (the reasons say that too)."""
    if df.empty:
        return Badge("Artifacts Evaluated - Functional", BadgeStatus.UNDECIDED, ("no runs stored yet",), "no runs")
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
    rests_on = f"runs of {engines_run(df)}"
    if broken:
        return Badge("Artifacts Evaluated - Functional", BadgeStatus.NOT_RECOMMENDED, tuple(reasons), rests_on)
    if ARTIFACT not in set(df["engine"]) and not subject.authors_build:
        return Badge("Artifacts Evaluated - Functional", BadgeStatus.UNDECIDED, (
            f"no build of the authors' own {subject.name} runs here as an engine; the runs below are of "
            f"{subject.here}", *reasons), rests_on + " (not the authors' artifact)")
    if ARTIFACT not in set(df["engine"]):
        return Badge("Artifacts Evaluated - Functional", BadgeStatus.UNDECIDED, (
            "the authors' artifact never ran here (ck install package:sysml19-p3-github, then ck reproduce "
            "study:NAME --engines=artifact,embedded); the runs below are of our reproduction on stock MXNet 1.9.1",
            *reasons), rests_on + " (not the authors' artifact)")
    return Badge("Artifacts Evaluated - Functional", BadgeStatus.RECOMMENDED, tuple(reasons), rests_on)


def reproduced_badge(study: Study, verdicts: Sequence[ClaimVerdict], decided: dict[str, str]) -> Badge:
    """ACM's Results Reproduced asks for the main results obtained by others, in part with the authors'
    artifacts: each claim counts with the authors' build's verdict where that build was measured for it
    (``decided``, from decided_on), else with MXNet 1.9.1's P3, and the reasons say which. Only P3 over the
    baseline counts: P3 over the worker-update baseline is named as not counted."""
    per_claim = {c.id: overall(verdicts, c.id, decided[c.id]) for c in study.claims}
    name = study.subject.name
    theirs = [c for c, e in decided.items() if e == ARTIFACT]
    ours = [c for c, e in decided.items() if e != ARTIFACT]
    basis = []
    if theirs:
        basis.append(f"judged on the authors' build (their baseline and {name} builds, measured here): "
                     f"{', '.join(theirs)}")
    if ours:
        why = ("the authors' build was not measured where the claims can be tested" if not theirs
               else "the authors' build was not measured for these where they can be tested (or lacks their variant)")
        basis.append(f"judged on {study.subject.here} over its stock baseline, since {why}: {', '.join(ours)}")
    if theirs:
        others = {c: overall(verdicts, c, EMBEDDED) for c in theirs if any(
            v.claim == c and v.engine == EMBEDDED for v in verdicts)}
        if others:
            basis.append(f"MXNet 1.9.1's {name}, for comparison: " + ", ".join(f"{c} {v}" for c, v in others.items()))
    beside = [f"{v.claim} {v.versus_worker_update.text()}" for v in verdicts if v.versus_worker_update is not None]
    if beside:
        basis.append(f"not counted: {name} over the worker-update baseline ({WORKER_UPDATE}: the optimizer on the "
                     f"workers, as in {name}), shown beside the verdicts: {'; '.join(beside)}")
    rests_on = ("measured runs: " + "; ".join(
        f"{ENGINE_NAMES.get(e, e)} for {sum(x == e for x in decided.values())} claim(s)"
        for e in sorted(set(decided.values()))) + (" (not the authors' artifact)" if not theirs else "")
        + "; emulated and predicted verdicts never count")
    failed = [c for c, v in per_claim.items() if v == Verdict.NOT_REPLICATED]
    if failed:
        return Badge("Results Reproduced", BadgeStatus.NOT_RECOMMENDED,
                     (f"not replicated: {', '.join(failed)}", *basis), rests_on)
    replicated = sum(v == Verdict.REPLICATED for v in per_claim.values())
    open_by_kind: dict[str, list[str]] = {}
    for c, v in per_claim.items():
        if v != Verdict.REPLICATED:
            open_by_kind.setdefault(str(v), []).append(c)
    if open_by_kind:
        said = "; ".join(f"{kind}: {', '.join(cs)}" for kind, cs in open_by_kind.items())
        return Badge("Results Reproduced", BadgeStatus.UNDECIDED, (
            f"{replicated} of {len(per_claim)} claim(s) replicated; the others are open ({said})", *basis), rests_on)
    return Badge("Results Reproduced", BadgeStatus.RECOMMENDED, (f"all {len(per_claim)} claims replicated", *basis),
                 rests_on)
