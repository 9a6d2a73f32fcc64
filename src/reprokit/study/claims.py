"""A paper's claims as data, the experiment matrix that checks them, and the sweep that runs it.

A study entry (``study:NAME``) describes a paper: its claims (per model, the
speedup claimed, and the bandwidth and cluster size it was claimed at, with
the source of each number), the experiment matrix (models, variants,
bandwidths, repetitions, profile), named variants (run settings per variant)
and the tolerances the verdicts use. ``ck reproduce study:NAME`` runs the
matrix through ``ck run program:P`` (one run folder per run, under the results
store), shaping the links per configuration where the target allows it.
"""
from __future__ import annotations

import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, TextIO

from reprokit.cluster.testbed import testbed_of
from reprokit.engines.choice import ARTIFACT_BUILDS, EMBEDDED
from reprokit.errors import UserError
from reprokit.values import shown

RATE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$")
_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
NATIVE = "native"  # a configuration whose links were not shaped and whose capacity is not known


def rate_bps(rate: str) -> float | None:
    """Bits per second of a tc rate like ``4gbit``; None for ``native``."""
    if rate == NATIVE:
        return None
    match = RATE.match(rate)
    if not match:
        raise UserError(f"bandwidth {shown(rate)} is not a rate like 100mbit, 1gbit or 4gbit (or 'native')")
    return float(match.group(1)) * _UNITS[match.group(2)]


def same_rate(a: str | None, b: str | None) -> bool:
    if a is None or b is None or NATIVE in (a, b):
        return a == b
    return rate_bps(a) == rate_bps(b)


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
    # shaped testbed whose bandwidths made the baseline communication-bound: analysis.judge)


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


# --- targets -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """Where the sweep runs, and what it can do with the links."""
    name: str  # the machine entry; "" for the embedded default
    kind: str  # "embedded", "testbed" or "cluster"
    hosts: tuple[str, ...]
    shaping: bool  # the links can be limited per configuration
    link_capacity: str | None  # the links' native rate when known (--link_capacity)
    testbed: str | None = None  # the testbed's name (its namespaces are rk-NAME-*)

    @property
    def label(self) -> str:
        return self.name or "embedded default"

    def to_dict(self) -> dict:
        return {**asdict(self), "hosts": list(self.hosts), "label": self.label}

    @classmethod
    def from_dict(cls, data: Mapping) -> "Target":
        """The target as to_dict wrote it (its label is derived from the name again)."""
        return cls(name=str(data["name"]), kind=str(data["kind"]), hosts=tuple(data["hosts"]),
                   shaping=bool(data["shaping"]), link_capacity=data.get("link_capacity"),
                   testbed=data.get("testbed"))

    def bandwidth_note(self) -> str:
        if self.kind == "embedded":
            return "every role on this host over loopback, at native bandwidth (it cannot be shaped)"
        if self.kind == "testbed":
            return f"testbed {self.testbed}: each host's egress is limited with tc (tbf) per configuration"
        return (f"cluster {self.name}: runs at native bandwidth ({self.link_capacity or 'capacity not given'}); "
                f"shaping a real cluster's links needs root on its hosts and is not done here")


def make_target(name: str, cluster_config: object, link_capacity: str | None) -> Target:
    if link_capacity is not None:
        rate_bps(link_capacity)
    if not name:
        if link_capacity:
            raise UserError("--link_capacity describes a cluster's links; the embedded default runs over loopback")
        return Target(name="", kind="embedded", hosts=("127.0.0.1",), shaping=False, link_capacity=None)
    from reprokit.cluster import hosts as cluster_hosts

    cluster = cluster_hosts.parse(cluster_config, source=f"machine:{name}")
    state = testbed_of(cluster_config)
    if state is not None:
        return Target(name=name, kind="testbed", hosts=tuple(cluster.names), shaping=True,
                      link_capacity=link_capacity, testbed=str(state["name"]))
    return Target(name=name, kind="cluster", hosts=tuple(cluster.names), shaping=False, link_capacity=link_capacity)


def sweep_bandwidths(target: Target, requested: Iterable[str] | None, matrix: Matrix) -> tuple[str, ...]:
    """The bandwidths a sweep runs at on this target; explicit requests it cannot honour are refused."""
    explicit = requested is not None
    rates = tuple(requested) if explicit else matrix.bandwidths
    for rate in rates:
        rate_bps(rate)
    if not target.shaping:
        if explicit and any(not same_rate(r, target.link_capacity or NATIVE) for r in rates):
            why = ("the embedded default runs over loopback" if target.kind == "embedded"
                   else f"the links of {target.name} cannot be shaped from here")
            raise UserError(f"--bandwidths needs a target whose links can be shaped ({why}); drop --bandwidths, "
                            f"or use a testbed: ck testbed cluster:NAME --hosts=4")
        return (target.link_capacity or NATIVE,)
    if target.link_capacity:
        cap = rate_bps(target.link_capacity)
        too_fast = [r for r in rates if r != NATIVE and rate_bps(r) > cap]
        if explicit and too_fast:
            raise UserError(f"{', '.join(too_fast)} exceed(s) the links of {target.name} ({target.link_capacity}); "
                            f"choose --bandwidths at or below it")
        rates = tuple(r for r in rates if r not in too_fast)
    return rates or (NATIVE,)


# --- the sweep plan ------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunConfig:
    model: str
    variant: str
    bandwidth: str
    repetition: int  # 1-based
    engine: str = EMBEDDED  # embedded (stock MXNet, our scripts) or artifact (the authors' builds)

    def record_id(self, sweep_id: str) -> str:
        # Embedded runs keep the name they had before sweeps had engines, so older sweeps resume.
        engine = "" if self.engine == EMBEDDED else f"--{self.engine}"
        return f"{sweep_id}--{self.model}{engine}--{self.variant}--{self.bandwidth}--r{self.repetition}"

    def label(self) -> str:
        engine = "" if self.engine == EMBEDDED else f"{self.engine} "
        return f"{self.model} {engine}{self.variant} @ {self.bandwidth} #{self.repetition}"


def engine_variants(engine: str, variants: Iterable[str]) -> list[str]:
    """The variants an engine runs: the authors' builds run only their own (p3 and baseline)."""
    return [v for v in variants if engine == EMBEDDED or v in ARTIFACT_BUILDS]


def plan_runs(models: Iterable[str], variants: Iterable[str], bandwidths: Iterable[str], repetitions: int,
              per_model: Mapping[str, Iterable[str]] | None = None,
              engines: Iterable[str] = (EMBEDDED,)) -> list[RunConfig]:
    """Every run, interleaved: each repetition visits every model and bandwidth, with every engine's variants
    back to back and their order reversed on every other repetition, so that drift hits all engines and
    variants alike. ``per_model``: a model's own bandwidths (chosen from its probe) instead of ``bandwidths``."""
    models, variants, bandwidths = list(models), list(variants), list(bandwidths)
    pairs = [(e, v) for e in engines for v in engine_variants(e, variants)]
    chosen = {m: list(b) for m, b in (per_model or {}).items()}
    runs = []
    for rep in range(1, repetitions + 1):
        order = pairs if rep % 2 == 1 else pairs[::-1]
        for model in models:
            for bandwidth in chosen.get(model, bandwidths):
                runs.extend(RunConfig(model, v, bandwidth, rep, e) for e, v in order)
    return runs


def select(requested: str | None, available: Iterable[str], what: str) -> list[str] | None:
    """A comma-separated option as a list (None when not given); unknown names are refused."""
    if requested is None or requested == "":
        return None
    names = [n.strip() for n in str(requested).split(",") if n.strip()]
    allowed = list(available)
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise UserError(f"unknown {what} {', '.join(map(repr, unknown))}; the study has: {', '.join(allowed)}")
    return names


# --- progress ------------------------------------------------------------------------------------

def duration_text(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Progress:
    """Runs done, the current one, and the time left estimated from the runs this sweep finished.

    On a terminal the bar redraws one line; elsewhere (logs, tests) it prints a line per event.
    """

    def __init__(self, total: int, done: int, stream: TextIO = sys.stdout, clock: Callable[[], float] = time.monotonic):
        self.total, self.done = total, done
        self.stream, self.clock = stream, clock
        self.durations: list[float] = []
        self.tty = stream.isatty()
        self._started: float | None = None

    def line(self, current: str) -> str:
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        left = "?"
        if self.durations:
            left = "~" + duration_text(sum(self.durations) / len(self.durations) * (self.total - self.done))
        return f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} runs | {current} | {left} left"

    def start(self, current: str) -> None:
        self._started = self.clock()
        self._show(self.line(f"now: {current}"))

    def finish(self, current: str, outcome: str) -> None:
        if self._started is not None:
            self.durations.append(self.clock() - self._started)
        self.done += 1
        self._show(self.line(f"{current}: {outcome}"), final=True)

    def _show(self, text: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def default_store(local_repo: str, study_name: str) -> Path:
    return Path(local_repo) / "study-results" / study_name


def store_dir(given: str, local_repo: str, study_name: str) -> Path:
    return Path(given).expanduser().resolve() if given else default_store(local_repo, study_name)

