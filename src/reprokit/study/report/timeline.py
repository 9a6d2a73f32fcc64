"""Per-layer timelines of a run pair (baseline and p3) from the workers' Chrome traces, for the report.

A run with TIMELINE=1 leaves ``timeline-worker-<rank>.json`` in its run folder,
written by reprokit.wire.p3_timeline (``CommMeter.chrome_trace``; that module
is the one definition of the events, imported here as the workers import it).
For communication iteration ``k`` the trace holds, per parameter (lane ``100 + i``, in forward order): a ``comm`` span from
its gradient ready (or the iteration's first gradient, where the baseline
records none) to its weights in place, with ``forward_reached_us`` (when
forward ``k + 1`` reached its layer); on lane 1 the ``forward+backward
k + 1`` span, on lane 2 the forward pass's waits. The probes observe every
variant alike (P3's slices and their order live inside MXNet, in C++). This module reads one
iteration of that, per layer (``p3_timeline.layer_groups``), and draws baseline
and p3 side by side: the picture communication schedulers explain their gains
with.

Trace files are found by listing the store (``runs/*/attempt-*/`` and
``imported/*/runs/*/attempt-*/``), and matched to records by comparing each
record's ``run_folder`` with the listed folders: no path is built from record
content. Bundles leave timelines out (bundle.py), so imported runs have none.
"""
from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from reprokit.core.errors import UserError
from reprokit.core.outputs import figure_text, save_figure
from reprokit.engines.base import EMBEDDED
from reprokit.run.settings import TIMELINE_FILE
from reprokit.study.analysis.analyse import setup_label
from reprokit.study.paper.rates import same_rate
from reprokit.study.store.records import Record, Store
from reprokit.wire.p3_timeline import layer_groups, union_length

TRACE_GLOB = TIMELINE_FILE.format(rank="*")
PARAM_LANE = 100  # p3_timeline: parameter i is drawn on thread 100 + i


def timeline_traces(store: Store) -> dict[tuple[str | None, str], list[Path]]:
    """Every run folder of the store that holds traces: (bundle or None, folder relative to its root) -> traces."""
    found: dict[tuple[str | None, str], list[Path]] = {}
    roots: list[tuple[str | None, Path]] = [(None, store.root)]
    if store.imported_dir.is_dir():
        roots += [(d.name, d) for d in sorted(store.imported_dir.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    for bundle, root in roots:
        for trace in sorted((root / "runs").glob(f"*/attempt-*/{TRACE_GLOB}")):
            if trace.is_file() and not trace.is_symlink():
                found.setdefault((bundle, trace.parent.relative_to(root).as_posix()), []).append(trace)
    return found


# Each run folder's traces, by (the bundle it was imported with, or None; its folder in the store).
Traces = dict[tuple[str | None, str], list[Path]]


def record_traces(record: Record, traces: Traces) -> list[Path]:
    """The traces of a record's run folder (compared as text with the listed folders), worker 0 first."""
    return traces.get((record.imported_from, record.run_folder or ""), [])


# --- one iteration, per layer --------------------------------------------------------------------

@dataclass(frozen=True)
class LayerSpan:
    """One layer in one iteration; seconds from the iteration's first gradient ready."""
    layer: int
    name: str  # its first parameter
    comm_start: float  # its gradient ready, or the iteration's first where none of its parameters' was recorded
    gradient_ready: float | None
    weights_in_place: float  # its last weight back
    forward_reached: float  # forward k + 1 turned to it

    @property
    def wait(self) -> float:
        return max(0.0, self.weights_in_place - self.forward_reached)


@dataclass(frozen=True)
class IterationView:
    label: str
    iteration: int  # k: the gradients of iteration k and forward k + 1
    iterations: int  # how many the trace holds
    layers: tuple[LayerSpan, ...]
    compute: tuple[float, float] | None  # forward+backward k + 1
    comm_wait_s: float  # how long forward k + 1 waited for weights (union of the layers' waits)
    comm_s: float  # first gradient ready to last weight in place


def read_iteration(trace: Path, label: str, iteration: int | None = None) -> IterationView:
    """One iteration of a worker's trace (by default a middle one: the first is warm-up)."""
    try:
        events = json.loads(trace.read_text())["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"cannot read the timeline {trace}: {exc}; run again with --env.TIMELINE=1") from None
    names: dict[int, str] = {}
    comm: dict[int, dict[int, dict[str, Any]]] = {}  # iteration -> parameter -> its comm span's args
    compute: dict[int, tuple[float, float]] = {}
    for e in events:
        tid, args = e.get("tid", 0), e.get("args") or {}
        if e.get("ph") == "M":
            if e.get("name") == "thread_name" and tid >= PARAM_LANE:
                names[tid - PARAM_LANE] = str(args.get("name", "")).split(" ", 1)[-1]
        elif e.get("cat") == "comm" and e.get("ph") == "X" and tid >= PARAM_LANE:
            comm.setdefault(int(args["iteration"]), {})[tid - PARAM_LANE] = {**args, "_start": e["ts"]}
        elif e.get("cat") == "compute" and e.get("ph") == "X":
            compute[int(args["iteration"])] = (e["ts"], e["ts"] + e.get("dur", 0))
    complete = sorted(k for k, params in comm.items() if len(params) == len(names) and names)
    if not complete:
        raise UserError(f"the timeline {trace} holds no complete iteration; run more batches (--env.NUM_BATCHES=N)")
    k = iteration if iteration in complete else complete[len(complete) // 2]
    params = comm[k]
    order = [names[i] for i in range(len(names))]
    groups = layer_groups(order)
    t0 = min(p["_start"] for p in params.values())

    def sec(us: float) -> float:
        return float(us - t0) / 1e6

    layers = []
    for g in range(groups[-1] + 1):
        members = [i for i, group in enumerate(groups) if group == g]
        ready = [params[i]["gradient_ready_us"] for i in members if params[i].get("gradient_ready_us") is not None]
        start = min(ready) if ready else min(params[i]["_start"] for i in members)  # the baseline records few
        layers.append(LayerSpan(
            layer=g, name=order[members[0]], comm_start=sec(start),
            gradient_ready=sec(min(ready)) if ready else None,
            weights_in_place=sec(max(params[i]["weights_in_place_us"] for i in members)),
            forward_reached=sec(min(params[i]["forward_reached_us"] for i in members))))
    span = compute.get(k + 1)
    return IterationView(
        label=label, iteration=k, iterations=len(complete), layers=tuple(layers),
        compute=(sec(span[0]), sec(span[1])) if span else None,
        comm_wait_s=union_length((layer.forward_reached, layer.weights_in_place) for layer in layers),
        comm_s=max(layer.weights_in_place for layer in layers) - min(layer.comm_start for layer in layers))


# --- which run pair ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TimelinePair:
    setup: str
    profile: str
    model: str
    bandwidth: str
    speedup: float
    comm_to_compute: float | None
    baseline: Record
    p3: Record
    baseline_trace: Path
    p3_trace: Path
    chosen: str  # why this pair

    def to_dict(self) -> dict[str, Any]:
        return {"setup": self.setup, "profile": self.profile, "model": self.model, "bandwidth": self.bandwidth,
                "speedup": self.speedup, "comm_to_compute": self.comm_to_compute,
                "baseline_record": self.baseline.record_id, "p3_record": self.p3.record_id,
                "baseline_trace": self.baseline_trace.name, "p3_trace": self.p3_trace.name, "chosen": self.chosen}


def _with_trace(records: Iterable[Record], traces: Traces) -> list[tuple[Record, Path]]:
    out = []
    for r in sorted(records, key=lambda r: r.config.repetition):
        found = record_traces(r, traces)
        if r.ok and found:
            out.append((r, found[0]))  # sorted: worker 0 first
    return out


def pick_pair(speedups: pd.DataFrame, records: list[Record], traces: Traces, wanted: tuple[str, str] | None,
              variant: str = "p3", versus: str = "baseline") -> tuple[TimelinePair | None, str]:
    """The run pair to draw, and a sentence on the choice: ``wanted`` (model, bandwidth), or by default the
    configuration with the highest speedup where both variants have timelines."""
    # Only our scripts write timelines: pairs of the embedded engine (never one run of each engine).
    rows = speedups[(speedups["variant"] == variant) & (speedups["versus"] == versus) & (speedups["engine"] == EMBEDDED)]
    if wanted is not None:
        rows = rows[(rows["model"] == wanted[0]) & rows["bandwidth"].map(lambda b: same_rate(b, wanted[1]))]
    by_config: dict[tuple[str, str, str, str], dict[str, list[Record]]] = {}
    for r in (r for r in records if r.config.engine == EMBEDDED):
        key = (setup_label(r), r.config.profile, r.config.model, r.config.bandwidth)
        by_config.setdefault(key, {}).setdefault(r.config.variant, []).append(r)
    candidates = []
    for _, row in rows.sort_values("speedup", ascending=False, kind="stable").iterrows():
        runs = by_config.get((row["setup"], row["profile"], row["model"], row["bandwidth"]), {})
        ours, theirs = _with_trace(runs.get(variant, []), traces), _with_trace(runs.get(versus, []), traces)
        if ours and theirs:
            candidates.append((row, theirs[0], ours[0]))
    if not candidates:
        if wanted is not None:
            have = sorted({f"{r.config.model},{r.config.bandwidth}" for r in records if record_traces(r, traces)})
            raise UserError(f"no run of {wanted[0]} at {wanted[1]} has timelines for both {versus} and {variant}; "
                            f"choose --timeline_config from: {', '.join(have) or 'none (no run recorded one)'}")
        return None, (f"no configuration has timelines for both {versus} and {variant}: a quick sweep on a testbed "
                      f"records them on one repetition, other sweeps with --env.TIMELINE=1")
    row, (base, base_trace), (p3_run, p3_trace) = candidates[0]
    chosen = (f"chosen with --timeline_config={wanted[0]},{wanted[1]}" if wanted is not None else
              f"the configuration with the highest speedup whose runs of both variants have timelines "
              f"({len(candidates)} such configuration(s))")
    ratio = row["comm_to_compute"]
    return TimelinePair(setup=row["setup"], profile=row["profile"], model=row["model"], bandwidth=row["bandwidth"],
                        speedup=float(row["speedup"]), comm_to_compute=None if pd.isna(ratio) else float(ratio),
                        baseline=base, p3=p3_run, baseline_trace=base_trace, p3_trace=p3_trace, chosen=chosen), chosen


# --- the picture ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TimelinePlot:
    png: Path
    svg: Path
    png_base64: str
    views: tuple[IterationView, ...]


def plot_pair(pair: TimelinePair, folder: Path) -> TimelinePlot:
    """Baseline (left) and p3 (right): per layer (y, input layer on top) over time (x) in one iteration."""
    import matplotlib  # noqa: PLC0415  matplotlib: only to draw; Agg chosen before pyplot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415  matplotlib: only to draw; Agg chosen before pyplot
    from matplotlib.lines import Line2D  # noqa: PLC0415  matplotlib: only to draw
    from matplotlib.patches import Patch  # noqa: PLC0415  matplotlib: only to draw

    base = read_iteration(pair.baseline_trace, f"baseline (repetition {pair.baseline.config.repetition})")
    ours = read_iteration(pair.p3_trace, f"p3 (repetition {pair.p3.config.repetition})")
    views = (base, ours)
    height = max(4.0, min(14.0, 0.09 * max(len(v.layers) for v in views) + 2.5))
    fig, axes = plt.subplots(1, 2, figsize=(13, height), sharey=True)
    right = max(max(layer.weights_in_place for layer in v.layers) for v in views)
    right = max([right] + [v.compute[1] for v in views if v.compute]) * 1.03
    for ax, view in zip(axes, views):
        ys = [layer.layer for layer in view.layers]
        if view.compute:
            ax.axvspan(*view.compute, color="0.92", zorder=0)
        ax.barh(ys, [layer.weights_in_place - layer.comm_start for layer in view.layers],
                left=[layer.comm_start for layer in view.layers],
                height=0.8, color="tab:blue", alpha=0.8)
        waits = [layer for layer in view.layers if layer.wait > 0]
        ax.barh([layer.layer for layer in waits], [layer.wait for layer in waits],
                left=[layer.forward_reached for layer in waits],
                height=0.35, color="tab:red")
        ax.plot([layer.forward_reached for layer in view.layers], ys, "|", color="black", markersize=5)
        ready = [layer for layer in view.layers if layer.gradient_ready is not None]
        ax.plot([layer.gradient_ready for layer in ready], [layer.layer for layer in ready], ".", color="tab:green",
                markersize=4)
        ax.set_xlim(0, right)
        ax.set_xlabel("seconds from the iteration's first gradient ready")
        ax.set_title(figure_text(f"{view.label}: iteration {view.iteration} of {view.iterations}; forward waited "
                           f"{view.comm_wait_s:.3f} s, communication {view.comm_s:.3f} s"), fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415  matplotlib: only to draw

    axes[0].set_ylim(max(len(v.layers) for v in views) - 0.5, -0.5)  # the input layer on top
    axes[0].yaxis.set_major_locator(MaxNLocator(nbins=12, integer=True))
    axes[0].set_ylabel("layer (forward order; input on top)")
    handles = [Patch(color="0.92", label="forward+backward of the next iteration"),
               Patch(color="tab:blue", alpha=0.8, label="gradient ready -> weights in place"),
               Patch(color="tab:red", label="forward waits for the layer's weights"),
               Line2D([], [], marker="|", color="black", linestyle="none", label="forward reached the layer"),
               Line2D([], [], marker=".", color="tab:green", linestyle="none", label="gradient ready (where recorded)")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    ratio = f", communication/computation {pair.comm_to_compute:.2f}" if pair.comm_to_compute is not None else ""
    fig.suptitle(figure_text(f"{pair.model} at {pair.bandwidth} ({pair.setup}, {pair.profile} profile{ratio}): "
                       f"p3/baseline {pair.speedup:.2f}x; worker {pair.baseline_trace.stem.rsplit('-', 1)[-1]}"),
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    folder.mkdir(parents=True, exist_ok=True)
    png, svg = folder / "timeline.png", folder / "timeline.svg"
    save_figure(fig, png, dpi=100)
    save_figure(fig, svg)
    plt.close(fig)
    return TimelinePlot(png, svg, base64.b64encode(png.read_bytes()).decode("ascii"), views)


def view_summary(view: IterationView) -> dict[str, Any]:
    """A view's figures for report.json."""
    return {"label": view.label, "iteration": view.iteration, "iterations": view.iterations,
            "layers": len(view.layers), "comm_wait_s": view.comm_wait_s, "comm_s": view.comm_s,
            "compute_s": (view.compute[1] - view.compute[0]) if view.compute else None,
            "layers_waited_for": sum(1 for layer in view.layers if layer.wait > 0)}
