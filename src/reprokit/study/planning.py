"""A sweep's plan: the runs of a matrix (model, variant, bandwidth, repetition and engine), interleaved."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from reprokit.engines.choice import ARTIFACT_BUILDS, EMBEDDED


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
    # TODO(engine registry): ask reprokit.engines.registry which variants each engine kind runs, once it exists,
    # instead of this module knowing that the artifact's builds are ARTIFACT_BUILDS.
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
