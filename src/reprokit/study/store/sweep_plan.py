"""What a sweep works out before its runs, as its stored plan (``Sweep``, records.py) keeps them: each model's
bandwidths chosen from a baseline probe (``BandwidthChoice``; sweep/choice.py chooses them) and the forecast of
its runs (``Forecast``; sweep/forecast.py makes it), with ``duration_text``, how the sweep says a duration.

They live under the store, not the sweep, so that the store reads its sweep plans without importing the sweep
that writes them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def duration_text(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


@dataclass(frozen=True)
class BandwidthChoice:
    """A model's bandwidths, and everything they were chosen from (stored in the sweep plan)."""
    model: str
    probe_run: str  # the probe's run folder, relative to the store's root
    image_shape: str
    compute_s_per_iter: float  # t_c, measured unshaped
    comm_s_per_iter: float  # t_0, measured unshaped
    parameters: int
    parameters_source: str
    hosts: int
    bytes_per_iter: int  # 2 x 4 bytes x parameters: a worker's push and pull
    wire_bytes_per_iter: float  # the share that leaves each host through its shaped egress
    ratios: tuple[float, ...]  # the targets
    bandwidths: tuple[str, ...]  # chosen, most compute-bound first
    predicted: tuple[float, ...]  # the predicted ratio at each chosen bandwidth
    notes: tuple[str, ...] = ()
    probe_seconds: float | None = None  # how long the probe took, ck included (forecast.py); None: not timed

    @property
    def unshaped_ratio(self) -> float:
        return self.comm_s_per_iter / self.compute_s_per_iter

    def summary(self) -> str:
        chosen = ", ".join(f"{b} ({r:.2f})" for b, r in zip(self.bandwidths, self.predicted))
        return (f"{self.model}: unshaped baseline probe: compute {self.compute_s_per_iter:.3f} s, communication "
                f"{self.comm_s_per_iter:.3f} s per iteration; {self.parameters:,} parameters at {self.image_shape} -> "
                f"{self.wire_bytes_per_iter / 1e6:.1f} MB per host and iteration on the wire; bandwidths (predicted "
                f"communication/computation) for targets {', '.join(f'{r:g}' for r in self.ratios)}: {chosen}"
                + (f"; {'; '.join(self.notes)}" if self.notes else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "probe_run": self.probe_run, "image_shape": self.image_shape,
                "compute_s_per_iter": self.compute_s_per_iter, "comm_s_per_iter": self.comm_s_per_iter,
                "parameters": self.parameters, "parameters_source": self.parameters_source, "hosts": self.hosts,
                "bytes_per_iter": self.bytes_per_iter, "wire_bytes_per_iter": self.wire_bytes_per_iter,
                "ratios": list(self.ratios), "bandwidths": list(self.bandwidths), "predicted": list(self.predicted),
                "notes": list(self.notes), "probe_seconds": self.probe_seconds}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BandwidthChoice:
        return cls(model=str(d["model"]), probe_run=str(d["probe_run"]), image_shape=str(d["image_shape"]),
                   compute_s_per_iter=float(d["compute_s_per_iter"]), comm_s_per_iter=float(d["comm_s_per_iter"]),
                   parameters=int(d["parameters"]), parameters_source=str(d["parameters_source"]),
                   hosts=int(d["hosts"]), bytes_per_iter=int(d["bytes_per_iter"]),
                   wire_bytes_per_iter=float(d["wire_bytes_per_iter"]), ratios=tuple(map(float, d["ratios"])),
                   bandwidths=tuple(map(str, d["bandwidths"])), predicted=tuple(map(float, d["predicted"])),
                   notes=tuple(map(str, d.get("notes", []))),
                   probe_seconds=None if d.get("probe_seconds") is None else float(d["probe_seconds"]))


@dataclass(frozen=True)
class Forecast:
    """What the sweep's remaining runs will take, and from what."""
    runs: int  # runs still to do
    seconds: float  # of the runs with an estimate
    unknown: int  # runs without an estimate
    budget_s: float | None  # what the matrix aims at, the time already spent included; None: no budget
    basis: tuple[str, ...]  # per model and engine: how many runs, how long each, from what
    spent_s: float = 0.0  # already spent on this sweep before these runs (its baseline probes)

    @property
    def over_budget(self) -> bool:
        return self.budget_s is not None and self.spent_s + self.seconds > self.budget_s

    def line(self) -> str:
        """One line for the console: the total first, then how it was estimated, then the budget."""
        total = f"about {duration_text(self.seconds)}" if self.runs > self.unknown else "no estimate"
        spent = f" after {duration_text(self.spent_s)} of probes" if self.spent_s else ""
        unknown = (f"; {self.unknown} run(s) without an estimate (no earlier run, probe or study figure for them)"
                   if self.unknown else "")
        budget = ""
        if self.budget_s is not None:
            budget = (f"; MORE than the {duration_text(self.budget_s)} this matrix aims at: it runs anyway (fewer "
                      f"runs: --models=, --variants=)" if self.over_budget
                      else f"; within the {duration_text(self.budget_s)} this matrix aims at")
        return f"{self.runs} run(s), {total}{spent} ({'; '.join(self.basis) or 'nothing to estimate from'}){unknown}{budget}"

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "seconds": self.seconds, "unknown": self.unknown,
                "budget_s": self.budget_s, "basis": list(self.basis), "spent_s": self.spent_s}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Forecast:
        budget = d.get("budget_s")
        return cls(runs=int(d["runs"]), seconds=float(d["seconds"]), unknown=int(d["unknown"]),
                   budget_s=None if budget is None else float(budget), basis=tuple(map(str, d["basis"])),
                   spent_s=float(d.get("spent_s", 0.0)))
