"""A paper's claims as data: the study entry's claims, experiment matrix, variants and tolerances.

A study entry (``study:NAME``) describes a paper: its claims (per model, the
speedup claimed, and the bandwidth and cluster size it was claimed at, with
the source of each number; or a claim of another kind, CLAIM_KINDS), the experiment matrix (models, variants,
bandwidths, repetitions, profile), named variants (run settings per variant)
and the tolerances the verdicts use. ``from_meta`` reads it from the entry's
meta and refuses a malformed one. Where a sweep runs is target.py, which runs
it makes planning.py.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, TypeVar

from reprokit.core import schema as s
from reprokit.core.errors import UserError
from reprokit.core.paths import REPO_ROOT
from reprokit.core.values import shown
from reprokit.emulation.gpus import gpu
from reprokit.study.paper.rates import rate_bps


@dataclass(frozen=True)
class Claim:
    id: str
    model: str  # the program's cmd_key
    speedup: float  # claimed throughput of `variant` over `versus`
    bandwidth: str | None  # None: not stated (an "up to" claim over realistic bandwidths)
    cluster_size: int | None  # machines; None: not stated
    source: str  # "abstract", "second-hand, not checked against the PDF", ...
    text: str
    variant: str = "p3"  # the study's subject variant when the entry does not say
    versus: str = "baseline"
    # The communication-to-computation ratio of the paper's setting at `bandwidth`, where a sourced fact
    # gives it (claims[].paper_comm_to_compute: {"value": R, "source": "..."}); None: no such fact.
    paper_ratio: float | None = None
    paper_ratio_source: str | None = None
    kind: str = "speedup"  # the claim's kind (CLAIM_KINDS): what the entry's claim holds, how it is judged and shown
    # A kind's own fields from the entry's claim (e.g. a bounded claim's at_most), as its ClaimKind reads them
    figures: tuple[tuple[str, float | str], ...] = ()

    def figure(self, name: str) -> float:
        """One of the kind's own figures (``figures``), a number."""
        return float(dict(self.figures)[name])

    def named(self, name: str) -> str | None:
        """One of the kind's own fields (``figures``) that names something (a variant), or None if not given."""
        value = dict(self.figures).get(name)
        return None if value is None else str(value)


class ClaimKind:
    """A kind of claim as the paper states it, registered by name in CLAIM_KINDS (``register_kind``): the entry's
    claim says ``kind`` (default "speedup"). A kind owns its schema (``required`` and ``optional``: the fields its
    claims hold beyond the common ones, _COMMON), how a Claim is built from them (``build``) and how the claim is
    stated (``paper_figure``, ``claimed``, ``where``, ``stated_rule``). This is the paper's side of a kind only: how
    it is judged and drawn (``judge``, ``labelled``, ``draw``) is the analysis's, declared by its subclass
    reprokit.study.analysis.judged.JudgedKind. The kinds are reprokit/study/analysis/kinds.py, one class each, both
    sides; ``reprokit.study`` imports that module, so every kind is registered before an entry is read."""
    name: ClassVar[str] = ""
    required: ClassVar[Mapping[str, s.Spec]] = {}
    optional: ClassVar[Mapping[str, s.Spec]] = {}
    # How the report states the kind's rule, one paragraph ("": the templates' own text, the speedup claims')
    stated_rule: ClassVar[str] = ""

    def build(self, raw: Mapping[str, Any], **common: Any) -> Claim:
        """The Claim of a checked entry claim (``common``: its id, model, source, text, variant, versus)."""
        raise NotImplementedError

    def paper_figure(self, claim: Claim) -> str:
        """What the paper claims, in brief (the answer's first column)."""
        raise NotImplementedError

    def claimed(self, claim: Claim) -> str:
        """The claim's figure in the report's table of claims."""
        raise NotImplementedError

    def where(self, claim: Claim) -> str:
        """Where the claim holds, in the report's table of claims (its bandwidth column)."""
        raise NotImplementedError


CLAIM_KINDS: dict[str, ClaimKind] = {}  # kind name -> its one instance; reprokit.study imports the kinds


K = TypeVar("K", bound=type[ClaimKind])


def register_kind(cls: K) -> K:
    """A class decorator: the kind ``cls.name`` read, stated, judged and shown by ``cls`` (one class in one place)."""
    if not cls.name or cls.name in CLAIM_KINDS and type(CLAIM_KINDS[cls.name]) is not cls:
        raise ValueError(f"claim kind {cls.name!r}: a kind needs a name no other kind has")
    CLAIM_KINDS[cls.name] = cls()
    return cls


def kind_of(claim: Claim) -> ClaimKind:
    """The kind of ``claim``, as the paper states it (the analysis judges it through judged.judged_kind)."""
    return CLAIM_KINDS[claim.kind]


@dataclass(frozen=True)
class Matrix:
    models: tuple[str, ...]
    variants: tuple[str, ...]
    bandwidths: tuple[str, ...]
    repetitions: int
    profile: str
    env: tuple[tuple[str, str], ...] = ()  # run settings every run of the sweep gets
    # On a target whose links can be shaped and without --bandwidths: the bandwidths are chosen per model
    # from a measured baseline probe so that the communication-to-computation ratio spans these (choice.py).
    ratios: tuple[float, ...] = ()
    timeline_repetition: int | None = None  # the repetition whose runs record timelines (TIMELINE=1)
    # What a sweep of this matrix should take, and why it is this size (the quick matrix says so; the sweep
    # records it): a forecast above budget_s is said before the first run (forecast.py), never refused.
    why: str = ""
    budget_s: float | None = None
    # Seconds per run the study entry expects per model, where neither earlier runs nor a probe give one.
    run_seconds: tuple[tuple[str, float], ...] = ()
    run_seconds_source: str = ""


@dataclass(frozen=True)
class Tolerance:
    speedup: float  # a claim of S is met by an interval that reaches [S - speedup, S + speedup]
    min_runs: int  # fewer successful runs per variant: inconclusive
    max_relative_half_width: float  # a wider speedup interval (half-width over the ratio): inconclusive
    confidence: float
    profile: str  # claims hold for this profile only; others are inconclusive (except "up to" claims on a
    # shaped testbed whose bandwidths made the baseline communication-bound: verdict.judge)


@dataclass(frozen=True)
class Subject:
    """What a study compares (the entry's ``subject``): the variant its claims are about, the name its report gives
    it, and the label of the paper authors' own builds run beside it by the artifact engine ("" when the paper has
    none). An entry without ``subject`` is P3's (the first study): these defaults."""
    variant: str = "p3"
    name: str = "P3"
    authors_build: str = "authors' 2018"
    here: str = "MXNet 1.9.1's own P3 (CPU; upstreamed by the paper's first author)"  # what runs it here


DEFAULT_SUBJECT = Subject()  # an entry without 'subject': P3's study


@dataclass(frozen=True)
class Study:
    name: str
    program: str
    metric: str
    paper: dict[str, Any]
    artifact: dict[str, Any]
    claims: tuple[Claim, ...]
    matrix: Matrix
    quick: Matrix
    tolerance: Tolerance
    variants: dict[str, dict[str, str]]  # variant name -> run settings (--env.K=V)
    parameters: dict[str, dict[str, int]] = field(default_factory=dict)  # model -> image shape -> trainable parameters
    parameters_source: str = ""
    subject: Subject = DEFAULT_SUBJECT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def gpu(self) -> str:
        """The GPU name of the paper's cluster (``paper.gpu``; "" for gpus.json's default, the P4000): the emulated
        and predicted verdicts of its claims are judged at its compute."""
        return str(self.paper.get("gpu", ""))


MIN_RUNS = 3  # a verdict needs at least this many successful runs per variant and configuration


def _positive(value: object) -> bool:
    return value > 0  # type: ignore[operator]  # a Number spec has checked it first


_POSITIVE = s.Where(s.Number(0, 1e12), _positive, "a positive number")
_SOURCED = s.Where(s.Json(depth=1), lambda v: isinstance(v, dict) and all(
    k == "source" and isinstance(x, str) or isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0
    for k, x in v.items()), "an object mapping each model to a positive number, with its 'source'")
_PARAMETERS = s.Where(s.Json(depth=2), lambda v: isinstance(v, dict) and all(
    k == "source" and isinstance(x, str) or isinstance(x, dict) and all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in x.values()) for k, x in v.items()),
    "an object mapping each model to {image shape: trainable parameters}, with its 'source'")
_MATRIX = s.Obj(required={"models": s.ListOf(s.Name(), min_items=1), "repetitions": s.Int(1, 10_000),
                          "profile": s.Name()},
                optional={"variants": s.ListOf(s.Name(), min_items=1), "bandwidths": s.ListOf(s.Text(40)),
                          "env": s.MapOf(s.Name(), s.Text(400)), "ratios": s.ListOf(_POSITIVE),
                          "timeline_repetition": s.Int(1, 10_000), "budget_minutes": _POSITIVE,
                          "run_seconds": _SOURCED, "why": s.Text()})
POSITIVE = _POSITIVE  # a positive number (kinds' schemas)
# The fields every claim holds, whatever its kind; a kind adds its own (ClaimKind.required and optional).
_COMMON = s.Obj(required={"id": s.Name(), "model": s.Name(), "source": s.Text(), "text": s.Text()},
                optional={"kind": s.Name(), "variant": s.Name(), "versus": s.Name()})


class _ClaimSpec(s.Spec):
    """A claim of the entry: its kind's fields (CLAIM_KINDS[kind], "speedup" when not given) and the common ones."""

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise s.Invalid(where, f"must be an object, got {shown(value)}")
        name = value.get("kind", "speedup")
        s.Name().check(name, f"{where}.kind")
        if name not in CLAIM_KINDS:
            raise s.Invalid(f"{where}.kind", f"is {name!r}, not a kind of claim (known: {', '.join(CLAIM_KINDS)})")
        kind = CLAIM_KINDS[name]
        s.Obj(required={**_COMMON.required, **kind.required},
              optional={**_COMMON.optional, **kind.optional}).check(value, where)


_CLAIM = _ClaimSpec()
# A study entry's meta (ck load study:NAME), checked before anything is built from it.
STUDY_SCHEMA = s.Obj(
    required={"variants": s.MapOf(s.Name(), s.MapOf(s.Name(), s.Text(400))), "claims": s.ListOf(_CLAIM),
              "matrix": _MATRIX, "quick": _MATRIX,
              "tolerance": s.Obj(required={"speedup": _POSITIVE, "min_runs": s.Int(1, 10_000),
                                           "max_relative_half_width": _POSITIVE, "confidence": s.Number(0.5, 0.999),
                                           "profile": s.Name()})},
    optional={"program": s.Name(), "metric": s.Name(), "parameters": _PARAMETERS,
              "paper": s.Obj(optional={"gpu": s.Name()}, extra=s.Json()),
              "subject": s.Obj(required={"variant": s.Name(), "name": s.Text(80)},
                               optional={"authors_build": s.Text(80), "here": s.Text(400)})}, extra=s.Json())


def _matrix(data: Mapping[str, Any], where: str, variants: Mapping[str, Any]) -> Matrix:
    run_seconds = {k: v for k, v in data.get("run_seconds", {}).items() if k != "source"}
    budget = data.get("budget_minutes")
    matrix = Matrix(
        models=tuple(data["models"]), variants=tuple(data.get("variants", ("baseline", "p3"))),
        bandwidths=tuple(data.get("bandwidths", [])), repetitions=data["repetitions"], profile=data["profile"],
        env=tuple(sorted((str(k), str(v)) for k, v in data.get("env", {}).items())),
        ratios=tuple(sorted(float(r) for r in data.get("ratios", []))),
        timeline_repetition=data.get("timeline_repetition"), why=str(data.get("why", "")),
        budget_s=None if budget is None else float(budget) * 60,
        run_seconds=tuple(sorted((str(m), float(v)) for m, v in run_seconds.items())),
        run_seconds_source=str(data.get("run_seconds", {}).get("source", "")),
    )
    for name in matrix.variants:
        if name not in variants:
            raise UserError(f"{where}: variant {name!r} is not described under 'variants'")
    for rate in matrix.bandwidths:
        rate_bps(rate)
    return matrix


def repository_meta(name: str) -> dict[str, Any]:
    """The meta of a study entry this repository holds (study/NAME/.cm/meta.json), read without CK: for the
    benchmarks and the shipped predictions, which run outside ck."""
    data: dict[str, Any] = json.loads((REPO_ROOT / "study" / name / ".cm" / "meta.json").read_text())
    return data


def repository_study(name: str) -> Study:
    """A study entry this repository holds (repository_meta), as ``ck reproduce study:NAME`` reads it."""
    return from_meta(name, repository_meta(name))


def from_meta(name: str, meta: Mapping[str, Any]) -> Study:
    """The study from its CK entry's meta; a malformed entry is one UserError naming where."""
    where = f"study:{name}"
    try:
        STUDY_SCHEMA.check(meta, where)
    except s.Invalid as exc:
        raise UserError(f"{exc}; fix the study entry's meta (ck load study:{name})") from None
    variants = {str(k): {str(a): str(b) for a, b in v.items()} for k, v in meta["variants"].items()}
    if meta.get("paper", {}).get("gpu"):
        gpu(str(meta["paper"]["gpu"]), f"{where} paper.gpu")  # one line listing the GPUs with a profile
    raw_subject = meta.get("subject")
    subject = DEFAULT_SUBJECT if raw_subject is None else Subject(
        variant=str(raw_subject["variant"]), name=str(raw_subject["name"]),
        authors_build=str(raw_subject.get("authors_build", "")),
        here=str(raw_subject.get("here", f"{raw_subject['name']} on stock MXNet 1.9.1")))
    if subject.variant not in variants:
        raise UserError(f"{where} subject: variant {subject.variant!r} is not described under 'variants'")
    claims = []
    for index, raw in enumerate(meta["claims"]):
        at = f"{where} claims[{index}]"
        claim = CLAIM_KINDS[raw.get("kind", "speedup")].build(
            raw, id=raw["id"], model=raw["model"], source=raw["source"], text=raw["text"],
            variant=str(raw.get("variant", subject.variant)), versus=str(raw.get("versus", "baseline")))
        if claim.bandwidth is not None:
            rate_bps(claim.bandwidth)
        for v in (claim.variant, claim.versus):
            if v not in variants:
                raise UserError(f"{at}: variant {v!r} is not described under 'variants'")
        claims.append(claim)
    tol = meta["tolerance"]
    if tol["min_runs"] < MIN_RUNS:
        raise UserError(f"{where}: tolerance 'min_runs' is {tol['min_runs']}; a verdict needs at least {MIN_RUNS} runs "
                        f"per configuration: set it to {MIN_RUNS} or more")
    raw_parameters = meta.get("parameters", {})
    return Study(
        name=name, program=str(meta.get("program", "p3")), metric=str(meta.get("metric", "throughput_samples_per_sec")),
        paper=dict(meta.get("paper", {})), artifact=dict(meta.get("artifact", {})), claims=tuple(claims),
        matrix=_matrix(meta["matrix"], f"{where} matrix", variants),
        quick=_matrix(meta["quick"], f"{where} quick", variants),
        tolerance=Tolerance(speedup=float(tol["speedup"]), min_runs=tol["min_runs"],
                            max_relative_half_width=float(tol["max_relative_half_width"]),
                            confidence=float(tol["confidence"]), profile=tol["profile"]),
        variants=variants,
        parameters={str(m): {str(shape): int(n) for shape, n in v.items()}
                    for m, v in raw_parameters.items() if m != "source"},
        parameters_source=str(raw_parameters.get("source", "")),
        subject=subject,
    )
