"""A paper's claims as data: the study entry's claims, experiment matrix, variants and tolerances.

A study entry (``study:NAME``) describes a paper: its claims (per model, the
speedup claimed, and the bandwidth and cluster size it was claimed at, with
the source of each number), the experiment matrix (models, variants,
bandwidths, repetitions, profile), named variants (run settings per variant)
and the tolerances the verdicts use. ``from_meta`` reads it from the entry's
meta and refuses a malformed one. Where a sweep runs is target.py, which runs
it makes planning.py.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from collections.abc import Mapping

from reprokit.errors import UserError
from reprokit.study.rates import NATIVE, rate_bps  # noqa: F401 (NATIVE: the benchmarks import it from here)
from reprokit.study.store import store_dir  # noqa: F401 (reprokit.ck.study, the CK module's code, calls it here)


@dataclass(frozen=True)
class Claim:
    id: str
    model: str  # the program's cmd_key
    speedup: float  # claimed throughput of `variant` over `versus`
    bandwidth: str | None  # None: not stated (an "up to" claim over realistic bandwidths)
    cluster_size: int | None  # machines; None: not stated
    source: str  # "abstract", "second-hand, not checked against the PDF", ...
    text: str
    variant: str = "p3"
    versus: str = "baseline"
    # The communication-to-computation ratio of the paper's setting at `bandwidth`, where a sourced fact
    # gives it (claims[].paper_comm_to_compute: {"value": R, "source": "..."}); None: no such fact.
    paper_ratio: float | None = None
    paper_ratio_source: str | None = None


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
class Study:
    name: str
    program: str
    metric: str
    paper: dict
    artifact: dict
    claims: tuple[Claim, ...]
    matrix: Matrix
    quick: Matrix
    tolerance: Tolerance
    variants: dict[str, dict[str, str]]  # variant name -> run settings (--env.K=V)
    parameters: dict[str, dict[str, int]] = field(default_factory=dict)  # model -> image shape -> trainable parameters
    parameters_source: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _need(meta: Mapping, key: str, kind: type | tuple, where: str):
    value = meta.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise UserError(f"{where}: '{key}' is missing or not a {getattr(kind, '__name__', kind)}; "
                        f"fix the study entry's meta (ck load study:NAME)")
    return value


MIN_RUNS = 3  # a verdict needs at least this many successful runs per variant and configuration


def _ratios(data: Mapping, where: str) -> tuple[float, ...]:
    raw = data.get("ratios", [])
    if not isinstance(raw, list) or not all(isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0
                                            for r in raw):
        raise UserError(f"{where}: 'ratios' must be a list of positive communication-to-computation ratios; "
                        f"fix the study entry's meta (ck load study:NAME)")
    return tuple(sorted(float(r) for r in raw))


def _positive_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _run_seconds(data: Mapping, where: str) -> tuple[tuple[tuple[str, float], ...], str]:
    raw = data.get("run_seconds", {})
    seconds = {k: v for k, v in raw.items() if k != "source"} if isinstance(raw, dict) else None
    if seconds is None or not all(_positive_number(v) for v in seconds.values()):
        raise UserError(f"{where}: 'run_seconds' must map each model to the seconds a run takes, with its 'source'; "
                        f"fix the study entry's meta (ck load study:NAME)")
    return tuple(sorted((str(m), float(v)) for m, v in seconds.items())), str(raw.get("source", ""))


def _matrix(data: Mapping, where: str, variants: Mapping) -> Matrix:
    timeline = data.get("timeline_repetition")
    if timeline is not None and (not isinstance(timeline, int) or isinstance(timeline, bool) or timeline < 1):
        raise UserError(f"{where}: 'timeline_repetition' must be a repetition number (1 or more); "
                        f"fix the study entry's meta (ck load study:NAME)")
    budget = data.get("budget_minutes")
    if budget is not None and not _positive_number(budget):
        raise UserError(f"{where}: 'budget_minutes' must be a positive number of minutes; "
                        f"fix the study entry's meta (ck load study:NAME)")
    run_seconds, run_seconds_source = _run_seconds(data, where)
    matrix = Matrix(
        models=tuple(_need(data, "models", list, where)),
        variants=tuple(_need(data, "variants", list, where)) if "variants" in data else ("baseline", "p3"),
        bandwidths=tuple(data.get("bandwidths", [])),
        repetitions=int(_need(data, "repetitions", int, where)),
        profile=str(_need(data, "profile", str, where)),
        env=tuple(sorted((str(k), str(v)) for k, v in data.get("env", {}).items())),
        ratios=_ratios(data, where), timeline_repetition=timeline, why=str(data.get("why", "")),
        budget_s=None if budget is None else float(budget) * 60, run_seconds=run_seconds,
        run_seconds_source=run_seconds_source,
    )
    for name in matrix.variants:
        if name not in variants:
            raise UserError(f"{where}: variant {name!r} is not described under 'variants'")
    for rate in matrix.bandwidths:
        rate_bps(rate)
    return matrix


def _paper_ratio(raw: Mapping, where: str) -> dict:
    fact = raw.get("paper_comm_to_compute")
    if fact is None:
        return {}
    fact = fact if isinstance(fact, dict) else {}
    value, source = fact.get("value"), fact.get("source")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0 \
            or not isinstance(source, str) or not source.strip():
        raise UserError(f"{where}: 'paper_comm_to_compute' needs a positive 'value' and the 'source' that states it; "
                        f"fix the study entry's meta (ck load study:NAME)")
    return {"paper_ratio": float(value), "paper_ratio_source": source}


def _parameters(meta: Mapping, where: str) -> tuple[dict[str, dict[str, int]], str]:
    raw = meta.get("parameters", {})
    counts = {k: v for k, v in raw.items() if k != "source"} if isinstance(raw, dict) else None
    if counts is None or not all(isinstance(v, dict) and all(isinstance(n, int) and n > 0 for n in v.values())
                                 for v in counts.values()):
        raise UserError(f"{where}: 'parameters' must map each model to {{image shape: trainable parameters}}; "
                        f"fix the study entry's meta (ck load study:NAME)")
    return ({str(m): {str(shape): int(n) for shape, n in v.items()} for m, v in counts.items()},
            str(raw.get("source", "")))


def from_meta(name: str, meta: Mapping) -> Study:
    """The study from its CK entry's meta; a malformed entry is one UserError naming the key."""
    where = f"study:{name}"
    variants = {str(k): {str(a): str(b) for a, b in v.items()} for k, v in _need(meta, "variants", dict, where).items()}
    claims = []
    for index, raw in enumerate(_need(meta, "claims", list, where)):
        at = f"{where} claims[{index}]"
        claim = Claim(
            id=str(_need(raw, "id", str, at)), model=str(_need(raw, "model", str, at)),
            speedup=float(_need(raw, "speedup", (int, float), at)),
            bandwidth=raw.get("bandwidth"), cluster_size=raw.get("cluster_size"),
            source=str(_need(raw, "source", str, at)), text=str(_need(raw, "text", str, at)),
            variant=str(raw.get("variant", "p3")), versus=str(raw.get("versus", "baseline")),
            **_paper_ratio(raw, at),
        )
        if claim.bandwidth is not None:
            rate_bps(claim.bandwidth)
        for v in (claim.variant, claim.versus):
            if v not in variants:
                raise UserError(f"{at}: variant {v!r} is not described under 'variants'")
        claims.append(claim)
    tol = _need(meta, "tolerance", dict, where)
    if int(_need(tol, "min_runs", int, where)) < MIN_RUNS:
        raise UserError(f"{where}: tolerance 'min_runs' is {tol['min_runs']}; a verdict needs at least {MIN_RUNS} runs "
                        f"per configuration: set it to {MIN_RUNS} or more")
    parameters, parameters_source = _parameters(meta, where)
    return Study(
        name=name, program=str(meta.get("program", "p3")), metric=str(meta.get("metric", "throughput_samples_per_sec")),
        paper=dict(meta.get("paper", {})), artifact=dict(meta.get("artifact", {})), claims=tuple(claims),
        matrix=_matrix(_need(meta, "matrix", dict, where), f"{where} matrix", variants),
        quick=_matrix(_need(meta, "quick", dict, where), f"{where} quick", variants),
        tolerance=Tolerance(
            speedup=float(_need(tol, "speedup", (int, float), where)),
            min_runs=int(_need(tol, "min_runs", int, where)),
            max_relative_half_width=float(_need(tol, "max_relative_half_width", (int, float), where)),
            confidence=float(_need(tol, "confidence", (int, float), where)),
            profile=str(_need(tol, "profile", str, where)),
        ),
        variants=variants, parameters=parameters, parameters_source=parameters_source,
    )
