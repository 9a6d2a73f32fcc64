"""`ck predict study`: the iteration model's predictions of baseline and p3 over workers and bandwidths.

Every figure printed or plotted here is predicted by reprokit.study.iteration_model, never measured, and says so.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from reprokit.errors import UserError
from reprokit.study import layer_profiles
from reprokit.study.claims import Study
from reprokit.study.iteration_model import Layout, ModelInput, Policy, Prediction, simulate
from reprokit.study.rates import shaped_bps
from reprokit.values import decimal, shown, whole_number

MAX_WORKERS = 10_000  # the dedicated baseline at 10,000 servers (arrays in 10,000 parts) takes about 20 s
KNOWN = ("model", "bandwidths", "workers", "servers", "layout", "compute_scale", "images_per_sec", "batch", "slice",
         "latency", "image_shape", "out_dir", "store")


@dataclass(frozen=True)
class PredictRequest:
    model: str
    image_shape: str
    bandwidths: tuple[str, ...]
    workers: tuple[int, ...]
    servers: int | None  # None: as many as workers
    layout: Layout
    compute_s: float  # forward + backward per iteration on one worker
    compute_source: str
    slice_elements: int
    latency_s: float


@dataclass(frozen=True)
class Row:
    workers: int
    servers: int
    bandwidth: str
    baseline: Prediction
    p3: Prediction

    @property
    def speedup(self) -> float:
        return self.baseline.iteration_s / self.p3.iteration_s


def _list(options: Mapping, key: str, example: str) -> list[str]:
    raw = str(options.get(key, "") or "").strip()
    items = [x.strip() for x in raw.split(",") if x.strip()]
    if not items:
        raise UserError(f"give --{key}, e.g. --{key}={example}")
    return items


def request_from(options: Mapping, study: Study) -> PredictRequest:
    """The options of `ck predict study:NAME` as one checked request (one-line errors)."""
    model = str(options.get("model", "") or "")
    if not model:
        raise UserError(f"give --model, one of: {', '.join(layer_profiles.models())}")
    if model not in layer_profiles.models():
        raise UserError(f"no layer profile for model {shown(model)}: the model predicts "
                        f"{', '.join(layer_profiles.models())} (Sockeye has none yet)")
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
    scale, given_rate = options.get("compute_scale"), options.get("images_per_sec")
    if scale not in (None, "") and given_rate not in (None, ""):
        raise UserError("give --compute_scale or --images_per_sec, not both")
    batch = layer_profiles.THROUGHPUT_BATCH
    if given_rate not in (None, ""):
        batch = whole_number(options.get("batch") or batch, "--batch", "--batch=32", 1, 1_000_000)
        per_sec = decimal(given_rate, "--images_per_sec", "--images_per_sec=100", 1e-6, 1e9)
        compute_s = batch / per_sec
        source = f"given: {per_sec:g} images/s at batch {batch} per worker"
    else:
        if options.get("batch") not in (None, ""):
            raise UserError("--batch goes with --images_per_sec")
        factor = 1.0 if scale in (None, "") else decimal(scale, "--compute_scale", "--compute_scale=0.5", 1e-6, 1e6)
        compute_s = layer_profiles.default_compute_s(model) * factor
        source = (f"{layer_profiles.THROUGHPUT_IMAGES_PER_SEC[model]:g} images/s at batch "
                  f"{layer_profiles.THROUGHPUT_BATCH}: {layer_profiles.THROUGHPUT_SOURCE}"
                  + (f"; times {factor:g} (--compute_scale)" if factor != 1.0 else ""))
    slice_elements = whole_number(options.get("slice") or 50_000, "--slice", "--slice=50000", 1, 2**31 - 1)
    latency = decimal(options.get("latency") or 0, "--latency", "--latency=0.0001 (seconds)", 0.0, 10.0)
    return PredictRequest(model, profile.image_shape, bandwidths, workers, servers, layout, compute_s, source,
                          slice_elements, latency)


def predict(request: PredictRequest) -> list[Row]:
    layers = layer_profiles.profile(request.model, request.image_shape).model_layers(request.compute_s)
    rows = []
    for w in request.workers:
        servers = request.servers or w
        for rate in request.bandwidths:
            base, p3 = (simulate(ModelInput(layers, w, servers, shaped_bps(rate), policy, request.layout,
                                            request.latency_s, request.slice_elements))
                        for policy in (Policy.BASELINE, Policy.P3))
            rows.append(Row(w, servers, rate, base, p3))
    return rows


def table(request: PredictRequest, rows: list[Row]) -> str:
    head = (f"PREDICTED by the iteration model (not measured): {request.model} ({request.image_shape}), "
            f"{request.layout} layout, slice {request.slice_elements} elements, latency {request.latency_s:g} s\n"
            f"compute per iteration {request.compute_s:.4f} s per worker ({request.compute_source})\n")
    lines = ["| workers | servers | bandwidth | predicted baseline s/iter | predicted p3 s/iter | predicted p3/baseline"
             " speedup | predicted exposed comm baseline / p3 (s) | predicted perfect-overlap bound (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.workers} | {r.servers} | {r.bandwidth} | {r.baseline.iteration_s:.4f} | "
                     f"{r.p3.iteration_s:.4f} | {r.speedup:.2f}x | {r.baseline.exposed_comm_s:.4f} / "
                     f"{r.p3.exposed_comm_s:.4f} | {r.p3.bound_s:.4f} |")
    return head + "\n".join(lines) + "\n"


def plot(request: PredictRequest, rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for w in request.workers:
        mine = [r for r in rows if r.workers == w]
        ax.plot([shaped_bps(r.bandwidth) / 1e9 for r in mine], [r.speedup for r in mine], marker="o",
                label=f"{w} workers (predicted)")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("bandwidth per host (Gbit/s)")
    ax.set_ylabel("predicted p3 / baseline speedup")
    ax.set_title(f"{request.model}: PREDICTED by the iteration model, not measured", usetex=False)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def run(options: Mapping, study: Study, out_dir: Path, console: TextIO = sys.stdout) -> dict[str, Path]:
    """Predict, print the table, write the plot (and the table as Markdown) into out_dir."""
    unknown = [k for k in options if k not in KNOWN and k not in ("data_uoa", "action", "module_uoa", "cid", "cids",
                                                                   "out", "xcids", "repo_uoa", "con_encoding")]
    unknown = [k for k in unknown if not k.startswith("_")]
    if unknown:
        raise UserError(f"unknown option(s) --{', --'.join(sorted(unknown))}; ck predict study takes "
                        f"--{', --'.join(KNOWN)}")
    request = request_from(options, study)
    rows = predict(request)
    text = table(request, rows)
    console.write(text)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / f"predicted-speedup-{request.model}.png"
    plot(request, rows, png)
    md = out_dir / f"predicted-{request.model}.md"
    md.write_text(text)
    console.write(f"study: predicted (not measured): table {md}, plot {png}\n")
    console.flush()
    return {"plot": png, "table": md}
