"""`ck predict study`: the iteration model's predictions of the baseline and the study's variant (P3, ByteScheduler, or
those ``--variants`` names) over workers and bandwidths.

Every figure printed or plotted here is predicted by reprokit.study.whatif.iteration_model, never measured, and says so.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from reprokit.core.errors import UserError
from reprokit.core.outputs import output_folder, replace_file, save_figure
from reprokit.core.values import decimal, shown, whole_number
from reprokit.emulation.gpus import gpu, measured_path, paper_gpu, rate_label, unit_of
from reprokit.emulation.profile import check_name
from reprokit.run.settings import PAPER_BATCH_SIZE
from reprokit.study.paper.claims import Study
from reprokit.study.paper.rates import shaped_bps
from reprokit.study.profiles import layer_profiles
from reprokit.study.whatif.compute import gpu_layers, profiled_layers
from reprokit.study.whatif.iteration_model import (
    BYTESCHEDULER_CREDIT,
    BYTESCHEDULER_PARTITION,
    VARIANT_POLICY,
    Layer,
    Layout,
    ModelInput,
    Policy,
    Prediction,
)
from reprokit.study.whatif.model_check import ModelValidation
from reprokit.study.whatif.shipped_predictions import simulate

MAX_WORKERS = 10_000  # the dedicated baseline at 10,000 servers (arrays in 10,000 parts) takes about 20 s
# A scheduled policy (ByteScheduler) in the colocated layout is simulated host by host (iteration_model.simulate_hosts):
# its time grows with the hosts (ResNet-50: 0.7 s at 4, 3.3 s at 16, 7.5 s at 32 here), so it stops at 64.
MAX_HOSTS_SIMULATED = 64
KNOWN = ("model", "bandwidths", "workers", "servers", "layout", "gpu", "compute_scale", "images_per_sec", "batch",
         "slice", "latency", "image_shape", "variants", "out_dir", "store")


@dataclass(frozen=True)
class Compute:
    """One worker's compute per iteration: the model's layers, named (``label``) and sourced."""
    label: str
    layers: tuple[Layer, ...]
    source: str

    @property
    def compute_s(self) -> float:
        return sum(x.forward_s + x.backward_s for x in self.layers)


@dataclass(frozen=True)
class PredictRequest:
    model: str
    image_shape: str
    bandwidths: tuple[str, ...]
    workers: tuple[int, ...]
    servers: int | None  # None: as many as workers
    layout: Layout
    computes: tuple[Compute, ...]  # one per GPU asked for
    batch: int
    slice_elements: int
    latency_s: float
    variants: tuple[str, ...] = ("p3",)  # each predicted against the baseline (VARIANT_POLICY's names)


@dataclass(frozen=True)
class Row:
    compute: str  # its Compute's label
    workers: int
    servers: int
    bandwidth: str
    baseline: Prediction
    predicted: Prediction  # the variant's
    variant: str = "p3"

    @property
    def speedup(self) -> float:
        return self.baseline.iteration_s / self.predicted.iteration_s

    @property
    def bound_share(self) -> float:
        """How near the variant comes to perfect overlap: the bound's iteration time over its own (1: as fast as the
        bound)."""
        return self.predicted.bound_s / self.predicted.iteration_s


def _list(options: Mapping[str, object], key: str, example: str) -> list[str]:
    raw = str(options.get(key, "") or "").strip()
    items = [x.strip() for x in raw.split(",") if x.strip()]
    if not items:
        raise UserError(f"give --{key}, e.g. --{key}={example}")
    return items


def request_from(options: Mapping[str, object], study: Study) -> PredictRequest:
    """The options of `ck predict study:NAME` as one checked request (one-line errors)."""
    model = str(options.get("model", "") or "")
    if not model:
        raise UserError(f"give --model, one of: {', '.join(layer_profiles.models())}")
    if model not in layer_profiles.models():
        raise UserError(f"no layer profile for model {shown(model)}: the model predicts "
                        f"{', '.join(layer_profiles.models())}")
    shape = str(options.get("image_shape", "") or "")
    profile = layer_profiles.profile(model, shape)
    expected = study.parameters.get(model, {}).get(profile.image_shape)
    if expected is not None and expected != profile.parameters:
        raise UserError(f"the layer profile of {model} at {profile.image_shape} has {profile.parameters} parameters, "
                        f"the study entry {expected}: regenerate layer_profiles.json")
    bandwidths = tuple(_list(options, "bandwidths", "1gbit,10gbit"))
    for rate in bandwidths:
        shaped_bps(rate)
    workers = tuple(whole_number(w, "--workers", "--workers=4,16,64", 1, MAX_WORKERS)
                    for w in _list(options, "workers", "4,16,64"))
    raw_layout = str(options.get("layout", "") or Layout.COLOCATED)
    if raw_layout not in tuple(Layout):
        raise UserError(f"--layout must be one of {', '.join(Layout)}, got {shown(raw_layout)}")
    layout = Layout(raw_layout)
    servers = None
    if options.get("servers") not in (None, ""):
        servers = whole_number(options["servers"], "--servers", "--servers=4", 1, MAX_WORKERS)
        if layout is Layout.COLOCATED and any(w != servers for w in workers):
            raise UserError("--servers differs from --workers: the colocated layout has one server per worker host; "
                            "give --layout=dedicated for servers on hosts of their own")
    scale, given_rate, given_gpu = (options.get(k) for k in ("compute_scale", "images_per_sec", "gpu"))
    if scale not in (None, "") and given_rate not in (None, ""):
        raise UserError("give --compute_scale or --images_per_sec, not both")
    if given_gpu not in (None, "") and given_rate not in (None, ""):
        raise UserError("give --gpu or --images_per_sec, not both")
    batch = whole_number(options.get("batch") or PAPER_BATCH_SIZE, "--batch", "--batch=32", 1, 1_000_000)
    if given_rate not in (None, ""):
        per_sec = decimal(given_rate, "--images_per_sec", "--images_per_sec=100", 1e-6, 1e9)
        unit = unit_of(model)  # --images_per_sec is Sockeye's sentence pairs per second
        computes: tuple[Compute, ...] = (Compute(
            f"{per_sec:g} {rate_label(unit)}", profiled_layers(profile, batch / per_sec),
            f"given: {per_sec:g} {unit}/s at batch {batch} per worker"),)
    else:
        factor = 1.0 if scale in (None, "") else decimal(scale, "--compute_scale", "--compute_scale=0.5", 1e-6, 1e6)
        names = _list(options, "gpu", "p4000") if given_gpu not in (None, "") else [paper_gpu(study.gpu).name]
        computes = tuple(gpu_compute(name, model, profile.image_shape, batch, factor) for name in names)
    slice_elements = whole_number(options.get("slice") or 50_000, "--slice", "--slice=50000", 1, 2**31 - 1)
    check_slices(model, computes[0].layers, slice_elements)
    latency = decimal(options.get("latency") or 0, "--latency", "--latency=0.0001 (seconds)", 0.0, 10.0)
    known = [v for v in VARIANT_POLICY if v != "baseline"]
    variants = (tuple(dict.fromkeys(_list(options, "variants", ",".join(known))))
                if options.get("variants") not in (None, "") else (study.subject.variant,))
    for variant in variants:
        if variant not in known:
            raise UserError(f"--variants: the iteration model has no policy for {shown(variant)}; it predicts "
                            f"{', '.join(known)} (each against the baseline)")
    host_by_host = [v for v in variants if VARIANT_POLICY[v].scheduled and layout is Layout.COLOCATED]
    if host_by_host and max(workers) > MAX_HOSTS_SIMULATED:
        raise UserError(f"--workers: {', '.join(host_by_host)} is simulated host by host, at most "
                        f"{MAX_HOSTS_SIMULATED} hosts; give --workers up to {MAX_HOSTS_SIMULATED}")
    return PredictRequest(model, profile.image_shape, bandwidths, workers, servers, layout, computes, batch,
                          slice_elements, latency, variants)


# The model simulates every slice of every array: its time and memory grow with their number (VGG-19 at --slice=1000,
# 143,688 slices: 21 s and 310 MB per prediction here; at --slice=1, 6 GB within a minute).
MAX_SLICES = 50_000


def slices_of(layers: Sequence[Layer], slice_elements: int) -> int:
    return sum(-(-size // slice_elements) for layer in layers for size in layer.arrays)


def check_slices(model: str, layers: Sequence[Layer], slice_elements: int) -> None:
    """Refuse, before simulating, a slice size that would cut the model into more slices than MAX_SLICES."""
    count = slices_of(layers, slice_elements)
    if count > MAX_SLICES:
        least = next(s for s in (2 ** k for k in range(40)) if slices_of(layers, s) <= MAX_SLICES)
        raise UserError(f"--slice={slice_elements} cuts {model} into {count} slices per iteration; the model "
                        f"simulates at most {MAX_SLICES} (its time and memory grow with them): give --slice of at "
                        f"least {least}")


def gpu_compute(name: str, model: str, image_shape: str, batch: int, scale: float = 1.0) -> Compute:
    """A GPU's compute (a name of gpus.json, or measured:FILE) at ``batch``, times ``scale``; refusals in one line."""
    measured = measured_path(name)
    if measured is None:
        gpu(name).throughput(model)  # one line listing the valid names, or the models this GPU has figures of
    else:
        check_name(name, "--gpu")  # one line naming --gpu when the file is missing
    try:
        layers = gpu_layers(name, model, image_shape, batch, scale)
    except UserError as exc:
        raise UserError(f"--gpu={shown(name)}: {exc}") from None
    if measured is not None:
        label, source = f"measured ({measured.name})", f"measured by a run of its own: {measured}"
    else:
        g = gpu(name)
        rate = g.throughput(model)
        label = g.label
        source = (f"{g.label}: {rate.per_sec:g} {rate.unit}/s ({rate.low:g} to {rate.high:g}"
                  f"{', estimated from another GPU' if rate.estimated else ''}; reprokit/emulation/gpus.json)")
    if scale != 1.0:
        label, source = f"{label} x{scale:g}", f"{source}; every layer's time times {scale:g} (--compute_scale)"
    return Compute(label, layers, source)


def predict(request: PredictRequest) -> list[Row]:
    rows = []
    for compute in request.computes:
        for w in request.workers:
            servers = request.servers or w
            for rate in request.bandwidths:
                base, *others = (simulate(ModelInput(compute.layers, w, servers, shaped_bps(rate), policy,
                                                     request.layout, request.latency_s, request.slice_elements))
                                 for policy in (Policy.BASELINE, *(VARIANT_POLICY[v] for v in request.variants)))
                rows += [Row(compute.label, w, servers, rate, base, other, v)
                         for v, other in zip(request.variants, others)]
    return rows


def table(request: PredictRequest, rows: list[Row]) -> str:
    shape = f" ({request.image_shape})" if request.image_shape else ""
    head = (f"PREDICTED by the iteration model (not measured): {request.model}{shape}, "
            f"{request.layout} layout, slice {request.slice_elements} elements, latency {request.latency_s:g} s, "
            f"batch {request.batch} per worker"
            + (f", ByteScheduler's partition {BYTESCHEDULER_PARTITION} and credit {BYTESCHEDULER_CREDIT} elements "
               f"(its defaults)" if any(VARIANT_POLICY[v].scheduled for v in request.variants) else "") + "\n"
            + "".join(f"compute per iteration on {c.label}: {c.compute_s:.4f} s per worker ({c.source})\n"
                      for c in request.computes)
            + "".join(f"NOT VALIDATED for {v}: {'; '.join(missed)} (docs/explanation/iteration-model.md)\n"
                      for v in request.variants
                      for missed in [ModelValidation.stored().missed(variants=(v, "baseline"))] if missed))
    lines = []
    for variant in request.variants:
        lines += [f"| compute | workers | servers | bandwidth | predicted baseline s/iter | predicted {variant} s/iter | "
                  f"predicted {variant}/baseline speedup | predicted exposed comm baseline / {variant} (s) | predicted "
                  f"perfect-overlap bound (s) | predicted {variant}'s share of the bound |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if r.variant == variant:
                lines.append(f"| {r.compute} | {r.workers} | {r.servers} | {r.bandwidth} | {r.baseline.iteration_s:.4f} | "
                             f"{r.predicted.iteration_s:.4f} | {r.speedup:.2f}x | {r.baseline.exposed_comm_s:.4f} / "
                             f"{r.predicted.exposed_comm_s:.4f} | {r.predicted.bound_s:.4f} | {r.bound_share:.0%} |")
        lines.append("")
    return head + "\n".join(lines)


def plot(request: PredictRequest, rows: list[Row], path: Path) -> None:
    import matplotlib  # noqa: PLC0415  matplotlib: only for the plot, not for ck predict's import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415  matplotlib: only for the plot; Agg chosen before pyplot

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    several = len(request.variants) > 1
    for variant in request.variants:
        for compute in request.computes:
            for w in request.workers:
                mine = [r for r in rows if r.workers == w and r.compute == compute.label and r.variant == variant]
                ax.plot([shaped_bps(r.bandwidth) / 1e9 for r in mine], [r.speedup for r in mine], marker="o",
                        label=f"{variant + ', ' if several else ''}{compute.label}, {w} workers (predicted)")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("bandwidth per host (Gbit/s)")
    ax.set_ylabel(f"predicted {' or '.join(request.variants)} / baseline speedup")
    ax.set_title(f"{request.model}: PREDICTED by the iteration model, not measured", usetex=False)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def run(options: Mapping[str, object], study: Study, out_dir: Path, console: TextIO = sys.stdout) -> dict[str, Path]:
    """Predict, print the table, write the plot (and the table as Markdown) into out_dir."""
    unknown = [k for k in options if k not in KNOWN and k not in ("data_uoa", "action", "module_uoa", "cid", "cids",
                                                                   "out", "xcids", "repo_uoa", "con_encoding")]
    unknown = [k for k in unknown if not k.startswith("_")]
    if unknown:
        raise UserError(f"unknown option(s) --{', --'.join(sorted(unknown))}; ck predict study takes "
                        f"--{', --'.join(KNOWN)}")
    request = request_from(options, study)
    out_dir = output_folder(out_dir, "--out_dir")  # before the model runs: a wrong destination costs nothing
    rows = predict(request)
    text = table(request, rows)
    console.write(text)
    png = out_dir / f"predicted-speedup-{request.model}.png"
    plot(request, rows, png)
    md = out_dir / f"predicted-{request.model}.md"
    replace_file(md, text)
    console.write(f"study: predicted (not measured): table {md}, plot {png}\n")
    console.flush()
    return {"plot": png, "table": md}
