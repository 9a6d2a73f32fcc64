"""A sweep's plan: the runs of a matrix (model, variant, bandwidth, repetition and engine), interleaved."""
from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from reprokit.engines.base import EMBEDDED, engines_on
from reprokit.vocabulary import Variant


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


T = TypeVar("T")


def in_turn(items: Sequence[T], repetition: int) -> list[T]:
    """``items`` in the order repetition ``repetition`` (1-based) runs them: reversed on every other repetition, so
    that drift hits them all alike."""
    return list(items) if repetition % 2 == 1 else list(items)[::-1]


def engine_variants(engine: str, variants: Iterable[str]) -> list[str]:
    """The study variants the engines on one side of the ENGINE knob run (the registry says which): each engine
    runs its own variants; the study's other variants are ablations of p3 (p3-slicing-only, ...) that set MXNet's
    P3 knobs, so they run only on an engine that reads those knobs."""
    ours = engines_on(engine)
    run_variants = {v.value for v in Variant}
    return [v for v in variants
            if any(v in e.variants or (v not in run_variants and e.reports.p3_knobs) for e in ours)]


def plan_runs(models: Iterable[str], variants: Iterable[str], bandwidths: Iterable[str], repetitions: int,
              per_model: Mapping[str, Iterable[str]] | None = None,
              engines: Iterable[str] = (EMBEDDED,),
              only: Collection[tuple[str, str, str]] = ()) -> list[RunConfig]:
    """Every run, interleaved: each repetition visits every model and bandwidth, with every engine's variants
    back to back and their order reversed on every other repetition, so that drift hits all engines and
    variants alike. ``per_model``: a model's own bandwidths (chosen from its probe) instead of ``bandwidths``;
    ``only``: the (model, bandwidth, variant) to keep, when not every combination runs; an engine runs them at a
    model and bandwidth only where it runs all of their variants (a claim's variant and its baseline: one without
    the other gives no speedup)."""
    models, variants, bandwidths = list(models), list(variants), list(bandwidths)

    def kept(engine: str, model: str, bandwidth: str, variant: str) -> bool:
        if not only:
            return True
        together = [v for m, b, v in only if (m, b) == (model, bandwidth)]
        return variant in together and len(engine_variants(engine, together)) == len(together)

    pairs = [(e, v) for e in engines for v in engine_variants(e, variants)]
    chosen = {m: list(b) for m, b in (per_model or {}).items()}
    runs: list[RunConfig] = []
    for rep in range(1, repetitions + 1):
        order = in_turn(pairs, rep)
        for model in models:
            for bandwidth in chosen.get(model, bandwidths):
                runs.extend(RunConfig(model, v, bandwidth, rep, e) for e, v in order if kept(e, model, bandwidth, v))
    return runs
