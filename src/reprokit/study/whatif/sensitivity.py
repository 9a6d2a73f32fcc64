"""Does a claim's verdict depend on the GPU? Each claim at a bandwidth predicted across compute speeds, with the
emulated runs' speedups on it; and P3 predicted on today's hardware (GPUs, bandwidths, cluster sizes).

The curves and the map are PREDICTED by the iteration model (iteration_model.py: no run, no stack cost) and say so;
the points on the curves are EMULATED runs (docs/explanation/emulation.md) and say so. Neither is measured, and
neither counts towards a badge. The paper's GPU's throughput is known only to a plausible range (gpus.json): the
figure shades it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import pandas as pd

from reprokit.core.outputs import figure_text
from reprokit.emulation.gpus import Gpu, gpu, gpus, paper_gpu
from reprokit.study.paper.claims import Claim, Study, Tolerance
from reprokit.study.profiles.layer_profiles import DEFAULT_SHAPE
from reprokit.study.whatif.claim_speedup import predicted_speedup
from reprokit.study.whatif.iteration_model import VARIANT_POLICY
from reprokit.study.whatif.model_check import ModelValidation
from reprokit.study.whatif.predict import MAX_HOSTS_SIMULATED, PredictRequest, predict, request_from

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SPEED_LOW, SPEED_HIGH = 0.25, 4.0  # compute speeds drawn, as multiples of the paper's GPU's central throughput
# Evenly on a log scale from SPEED_LOW to SPEED_HIGH (every 2 ** (1/2), 1 among them), and the marks exactly: VGG-19
# with P3's slices takes 0.2 to 0.4 s a prediction, and every report draws the figure.
SPEED_POINTS = 9
COMPARED_GPU = "v100"  # marked beside the paper's GPU: the GPU the emulated runs first waited
PREDICTED_LINE = "predicted (iteration model, no stack cost)"
TITLE = "Does the verdict depend on the GPU? PREDICTED speedup (line), EMULATED runs (points)"


@dataclass(frozen=True)
class EmulatedPoint:
    """One row of the emulated runs' speedups, placed at the compute speed of the GPU its runs waited."""
    gpu: str  # the name (gpus.json) of the GPU its runs waited
    x: float
    speedup: float
    ci_low: float | None
    ci_high: float | None
    n: int
    setup: str
    engine: str
    dilation: float


@dataclass(frozen=True)
class ClaimSensitivity:
    """A claim at a bandwidth, predicted across compute speeds. ``x``: a worker's compute speed as a multiple of
    the paper's GPU's central throughput of the claim's model (1: the paper's GPU as gpus.json states it)."""
    claim: str
    model: str
    bandwidth: str
    machines: int
    variant: str
    versus: str
    claimed: float
    tolerance: float  # the band's half-width around the claim
    paper_gpu: str  # its label
    images_per_sec: float  # the paper's GPU's central throughput of the model: x = 1
    paper_range: tuple[float, float]  # its plausible range, in x
    marks: tuple[tuple[str, float], ...]  # (GPU label, x): the paper's GPU first, then COMPARED_GPU
    curve: tuple[tuple[float, float], ...]  # (x, predicted speedup), x ascending
    queued_curve: tuple[tuple[float, float], ...]  # the same with fifo_bytes below each host's van
    fifo_bytes: float  # a testbed host's (the validation record's)
    emulated: tuple[EmulatedPoint, ...]
    confidence: float  # of the emulated intervals

    def predicted_at(self, x: float) -> float:
        """The predicted speedup at a point of the curve (a mark, an end of the range, a grid point)."""
        return next(y for at, y in self.curve if math.isclose(at, x, rel_tol=1e-12))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": "predicted (line), emulated (points)"}


def speed_grid(points: int = SPEED_POINTS, upto: float = SPEED_HIGH) -> list[float]:
    """``points`` speeds from SPEED_LOW to SPEED_HIGH evenly on a log scale, continued at the same step up to
    ``upto`` when it lies beyond (a mark beyond SPEED_HIGH, drawn at its own speed)."""
    def at(i: int) -> float:  # a power of the whole ratio, not of a step: the middle point is 1 exactly
        return float(SPEED_LOW * (SPEED_HIGH / SPEED_LOW) ** (i / (points - 1)))

    count = points
    while at(count) < upto:
        count += 1
    return [at(i) for i in range(count)]


def predictable(claim: Claim, gpu_name: str = "") -> bool:
    """A claim at a bandwidth the model has a layer profile and both policies of, on the paper's GPU (``gpu_name``,
    Study.gpu)."""
    return bool(claim.bandwidth and claim.cluster_size and claim.model in DEFAULT_SHAPE
                and claim.variant in VARIANT_POLICY and claim.versus in VARIANT_POLICY
                and claim.model in paper_gpu(gpu_name).models)


def _number(value: object) -> float | None:
    x = float(value) if isinstance(value, (int, float)) else math.nan
    return None if math.isnan(x) else x


def emulated_points(claim: Claim, rows: pd.DataFrame, central: float) -> tuple[EmulatedPoint, ...]:
    """The emulated speedups of the claim's model, bandwidth and pair whose runs waited a GPU of gpus.json (a
    profile file names no GPU: it is left out), at that GPU's throughput of the model over ``central``."""
    if rows.empty or "gpu" not in rows:
        return ()
    mine = rows[(rows["model"] == claim.model) & (rows["bandwidth"] == claim.bandwidth)
                & (rows["variant"] == claim.variant) & (rows["versus"] == claim.versus)]
    known = gpus()
    out = []
    for _, row in mine.iterrows():
        name = str(row["gpu"])
        if name not in known or claim.model not in known[name].models:
            continue
        out.append(EmulatedPoint(name, known[name].throughput(claim.model).per_sec / central,
                                 float(row["speedup"]), _number(row["ci_low"]), _number(row["ci_high"]),
                                 int(min(row["n_variant"], row["n_versus"])), str(row["setup"]), str(row["engine"]),
                                 float(row["dilation"])))
    return tuple(sorted(out, key=lambda p: (p.x, p.setup, p.engine, p.dilation)))


def claim_sensitivity(claim: Claim, tolerance: Tolerance, emulated: pd.DataFrame,
                      points: int = SPEED_POINTS, gpu_name: str = "") -> ClaimSensitivity:
    """The claim predicted at every speed of the grid and exactly at its marks and the ends of the paper's GPU's
    range (the compute speeds the predicted verdicts are judged at: their predictions are cached and shared)."""
    assert claim.bandwidth and claim.cluster_size  # predictable(claim)
    paper = paper_gpu(gpu_name)
    rate = paper.throughput(claim.model)
    central = rate.per_sec
    compared: Gpu | None = gpus().get(COMPARED_GPU)
    marks = [(paper.label, central)]
    if compared is not None and compared.name != paper.name and claim.model in compared.models:
        marks.append((compared.label, compared.throughput(claim.model).per_sec))
    exact = [rate.low, rate.high] + [ips for _, ips in marks]
    speeds = {central * x: None for x in speed_grid(points, max(exact) / central)}
    speeds.update(dict.fromkeys(exact))  # the very throughputs, so the predicted verdicts' cache answers
    curve = sorted((ips / central, predicted_speedup(claim, paper.name, ips)) for ips in speeds)
    fifo = ModelValidation.stored().fifo_bytes
    queued = sorted((ips / central, predicted_speedup(claim, paper.name, ips, fifo_bytes=fifo)) for ips in speeds)
    return ClaimSensitivity(claim.id, claim.model, claim.bandwidth, claim.cluster_size, claim.variant, claim.versus,
                            claim.speedup, tolerance.speedup, paper.label, central,
                            (rate.low / central, rate.high / central),
                            tuple((label, ips / central) for label, ips in marks), tuple(curve), tuple(queued), fifo,
                            emulated_points(claim, emulated, central), tolerance.confidence)


def sensitivity(study: Study, emulated: pd.DataFrame | None = None,
                points: int = SPEED_POINTS) -> list[ClaimSensitivity]:
    """Every claim at a bandwidth the model predicts; ``emulated``: the emulated runs' speedups
    (Analysis.emulated_speedups)."""
    rows = emulated if emulated is not None else pd.DataFrame()
    return [claim_sensitivity(c, study.tolerance, rows, points, study.gpu) for c in study.claims
            if predictable(c, study.gpu)]


def caption(c: ClaimSensitivity) -> str:
    """What the panel of a claim shows, in figures taken from it."""
    low, high = c.paper_range
    inside = [y for x, y in c.curve if low * (1 - 1e-12) <= x <= high * (1 + 1e-12)]
    said = (f"{c.claim} (claimed {c.claimed:.2f}x ± {c.tolerance:.2f}, {c.variant} over {c.versus} at {c.bandwidth} "
            f"on {c.machines} machines): predicted {min(inside):.2f}x to {max(inside):.2f}x over the "
            f"{c.paper_gpu}'s plausible range ({low:.2f} to {high:.2f} times its {c.images_per_sec:g} img/s of "
            f"{c.model}), "
            + ", ".join(f"{c.predicted_at(x):.2f}x at the {label} (x = {x:.2f})" for label, x in c.marks))
    if c.fifo_bytes:
        queued = dict(c.queued_curve)
        said += (f"; with {c.fifo_bytes / 1e6:g} MB below each host's van (the testbed's) "
                 + ", ".join(f"{queued[x]:.2f}x at the {label}" for label, x in c.marks))
    if not c.emulated:
        return f"{said}; no emulated runs at a GPU's compute stored"
    return f"{said}; emulated: " + ", ".join(
        f"{p.speedup:.2f}x [{_shown(p.ci_low)}, {_shown(p.ci_high)}] at {gpu(p.gpu).label} compute (x = {p.x:.2f}), "
        f"n={p.n}, k={p.dilation:g}" for p in c.emulated)


def _shown(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def draw(curves: Sequence[ClaimSensitivity]) -> Figure:
    """One panel per claim: the predicted speedup against compute speed (log scale), the claim's band shaded, the
    paper's GPU's plausible range shaded, its central figure and COMPARED_GPU as vertical lines, and the emulated
    runs as points with their intervals."""
    import matplotlib  # noqa: PLC0415  matplotlib: only to draw; Agg chosen before pyplot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415  matplotlib: only to draw; Agg chosen before pyplot
    from matplotlib.ticker import NullFormatter  # noqa: PLC0415  matplotlib: only to draw

    fig, axes = plt.subplots(1, len(curves), figsize=(max(8.0, 5.4 * len(curves)), 5.2), squeeze=False)
    for ax, c in zip(axes[0], curves):
        xs, ys = zip(*c.curve)
        ax.axhspan(c.claimed - c.tolerance, c.claimed + c.tolerance, color="crimson", alpha=0.12,
                   label=f"claimed {c.claimed:.2f}x ± {c.tolerance:.2f}")
        ax.axvspan(*c.paper_range, color="0.82", alpha=0.6, label=f"{c.paper_gpu}'s plausible range")
        ax.plot(xs, ys, color="tab:blue", linewidth=1.6, label=PREDICTED_LINE)
        if c.fifo_bytes:
            qx, qy = zip(*c.queued_curve)
            ax.plot(qx, qy, color="tab:blue", linewidth=1.2, linestyle=":",
                    label=f"predicted, {c.fifo_bytes / 1e6:g} MB below each host's van (the testbed's)")
        for index, ((label, x), color) in enumerate(zip(c.marks, ("black", "tab:purple"))):
            ax.axvline(x, color=color, linestyle="--", linewidth=0.9)
            said = f"{label} (the paper's GPU)" if index == 0 else label  # marks[0] is the paper's
            ax.text(x, 0.98, f" {figure_text(said)}", transform=ax.get_xaxis_transform(), rotation=90, va="top",
                    ha="right", fontsize=7, color=color)
        if c.emulated:
            values = [p.speedup for p in c.emulated]
            err = [[v - p.ci_low if p.ci_low is not None else 0 for v, p in zip(values, c.emulated)],
                   [p.ci_high - v if p.ci_high is not None else 0 for v, p in zip(values, c.emulated)]]
            ax.errorbar([p.x for p in c.emulated], values, yerr=err, fmt="o", color="tab:orange", capsize=3,
                        label=f"emulated ({c.confidence:.0%} interval)")
            for p in c.emulated:
                ax.annotate(figure_text(gpu(p.gpu).label), (p.x, p.speedup), textcoords="offset points", xytext=(4, 4),
                            fontsize=6)
        ax.axhline(1.0, color="0.3", linewidth=0.6)
        ax.set_xscale("log")
        reach = [x for x, _ in c.curve] + [p.x for p in c.emulated]
        low, high = min(reach) / 1.1, max(reach) * 1.25  # room for a point's name on the right
        ax.set_xlim(low, high)
        ticks = [t for t in (0.25, 0.5, 1, 2, 4, 8, 16, 32) if low <= t <= high]
        ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(figure_text(f"compute speed per GPU, times the {c.paper_gpu}'s {c.images_per_sec:g} img/s of "
                            f"{c.model}"))
        ax.set_ylabel(figure_text(f"speedup, {c.variant} / {c.versus}"))
        ax.set_title(figure_text(f"{c.claim} at {c.bandwidth}: predicted (line), emulated (points)"), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # below: the marks' names on top
    fig.suptitle(TITLE, fontsize=10)
    fig.tight_layout()
    return fig


# --- P3 on today's hardware (predicted) ----------------------------------------------------------------

@dataclass(frozen=True)
class HardwareGrid:
    models: tuple[str, ...]
    gpus: tuple[str, ...]  # names of gpus.json
    bandwidths: tuple[str, ...]
    workers: tuple[int, ...]


# 1000 workers take no longer than 4 (0.06 s for ResNet-50, 0.3 s for VGG-19 with P3's slices). Every report draws the
# map, so it holds the corners and the middle of the space; `ck predict --gpu=...` gives any other point of it.
TODAY = HardwareGrid(("resnet", "vgg"), ("p4000", "v100", "a100", "h100"),
                     ("1gbit", "10gbit", "100gbit", "400gbit"), (4, 64, 1000))
# A scheduled policy (ByteScheduler) is simulated host by host, in seconds per cell at 16 hosts: its map has the
# cluster sizes up to this (`ck predict --workers` goes to predict.MAX_HOSTS_SIMULATED).
MAP_HOSTS_SIMULATED = 16


@dataclass(frozen=True)
class MapCell:
    model: str
    gpu: str  # its label
    workers: int
    bandwidth: str
    predicted_speedup: float  # the study's variant (P3, ...) over the baseline
    predicted_bound_share: float  # the perfect-overlap bound's iteration time over the variant's


@dataclass(frozen=True)
class HardwareMap:
    grid: HardwareGrid
    cells: tuple[MapCell, ...]
    captions: tuple[tuple[str, str], ...]  # (model, what its table holds)
    missing: str = ""  # why nothing is predicted (the study's subject has no policy in the model, or one whose
    # checks missed), or ""

    def caption(self, model: str) -> str:
        return dict(self.captions)[model]

    def table(self, model: str) -> list[list[str]]:
        """Rows of (GPU, workers, then per bandwidth "speedup (share of the bound)")."""
        at = {(x.gpu, x.workers, x.bandwidth): x for x in self.cells if x.model == model}
        labels = list(dict.fromkeys(x.gpu for x in self.cells if x.model == model))
        return [[label, str(w), *(f"{at[label, w, b].predicted_speedup:.2f}x "
                                  f"({at[label, w, b].predicted_bound_share:.1%})" for b in self.grid.bandwidths)]
                for label in labels for w in self.grid.workers]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "PREDICTED by the iteration model, not measured", "models": list(self.grid.models),
                "gpus": list(self.grid.gpus), "bandwidths": list(self.grid.bandwidths),
                "workers": list(self.grid.workers), "captions": dict(self.captions),
                "cells": [asdict(x) for x in self.cells], **({"missing": self.missing} if self.missing else {})}


def today_request(study: Study, model: str, grid: HardwareGrid = TODAY) -> PredictRequest:
    """`ck predict study --model=M --gpu=... --bandwidths=... --workers=...` of the grid: the paper's layout (a
    worker and a server on each host), batch and slices."""
    return request_from({"model": model, "gpu": ",".join(grid.gpus), "bandwidths": ",".join(grid.bandwidths),
                         "workers": ",".join(str(w) for w in grid.workers)}, study)


def map_caption(request: PredictRequest, grid: HardwareGrid) -> str:
    rates = ", ".join(f"{gpu(name).label} {gpu(name).throughput(request.model).per_sec:g}"
                      for name in grid.gpus)
    name = "P3" if request.variants == ("p3",) else " or ".join(request.variants)
    sliced = any(VARIANT_POLICY[v].sliced for v in request.variants)
    scheduled = any(VARIANT_POLICY[v].scheduled for v in request.variants)
    knobs = ", ".join([f"P3's slices of {request.slice_elements} elements"] * sliced
                      + ["ByteScheduler's partition and credit at their defaults"] * scheduled) or "no knobs"
    return (f"PREDICTED by the iteration model, not measured: {request.model} ({request.image_shape}), {name} over the "
            f"baseline with a worker and a server on each host ({request.layout} layout), batch {request.batch} per "
            f"worker, {knobs}, no latency or stack cost, each GPU at its "
            f"central throughput (img/s: {rates}). Each cell: the predicted speedup (the predicted share of the "
            f"perfect-overlap bound {name} reaches, 100%: as fast as compute or the busiest link allows)."
            + (f" {name} is simulated host by host, so the map stops at {MAP_HOSTS_SIMULATED} hosts (`ck predict "
               f"--workers` goes to {MAX_HOSTS_SIMULATED})." if any(VARIANT_POLICY[v].scheduled
                                                                    for v in request.variants) else ""))


def hardware_map(study: Study, grid: HardwareGrid = TODAY) -> HardwareMap:
    """The study's variant (P3, ...) over the baseline predicted at every GPU, bandwidth and cluster size of ``grid`` (predict.predict); for a
    study whose subject the iteration model has no policy for, or a policy a check inside the model's assumptions
    missed (ModelValidation.missed), nothing, and ``missing`` says why."""
    if study.subject.variant not in VARIANT_POLICY:
        return HardwareMap(grid, (), (), f"not possible: the iteration model has no {study.subject.name} policy "
                                         f"(no policy for variant {study.subject.variant}), so nothing is predicted")
    missed = ModelValidation.stored().missed(variants=(study.subject.variant, "baseline"))
    if missed:  # a policy every check inside the model's assumptions has not held: its figures would mislead
        return HardwareMap(grid, (), (), f"not given: the iteration model's {study.subject.name} policy is not "
                                         f"validated ({'; '.join(missed)}; docs/explanation/iteration-model.md), so "
                                         f"nothing is predicted")
    if VARIANT_POLICY[study.subject.variant].scheduled:  # simulated host by host: every report draws the map
        grid = replace(grid, workers=tuple(w for w in grid.workers if w <= MAP_HOSTS_SIMULATED))
    cells: list[MapCell] = []
    captions = []
    for model in grid.models:
        request = today_request(study, model, grid)
        cells += [MapCell(model, row.compute, row.workers, row.bandwidth, row.speedup, row.bound_share)
                  for row in predict(request)]
        captions.append((model, map_caption(request, grid)))
    return HardwareMap(grid, tuple(cells), tuple(captions))
