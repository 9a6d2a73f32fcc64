"""docs/results/head-to-head.md: the baseline, MXNet's P3, ByteScheduler and the worker-update baseline side by side,
each against the perfect-overlap bound, measured where the stores hold them and predicted over a grid.

Measured: from the results summaries (docs/results/data/*.json, as results_pages reads them). Runs share a row only
when they ran the same setting (GPU profile emulated, model, bandwidth, hosts, link sharing, TCP, dilation, engine)
and come from the same summary (one store: its baseline ran beside the variant it is compared with); a setting that
two summaries hold gives a row for each. Per row: both variants' throughput (geometric mean of the runs' samples/s with
its log-scale Student-t interval, analysis.speedup.mean_interval), the speedup with its Welch interval
(analysis.speedup.ratio_interval: the same statistics as every results page), the baseline's measured
communication/computation ratio r where the summary holds it, and the perfect-overlap bound for r.

The bound (``overlap_bound``): an iteration that overlaps nothing takes compute + communication, C (1 + r); one that
hides the shorter of the two completely takes max(C, rC). So no schedule can be faster than a baseline that overlaps
nothing by more than (1 + r) / max(1, r): 1 + r when communication is the shorter, (1 + r) / r when it is the longer,
at most 2, at r = 1. A baseline that already overlaps some communication leaves less: the predicted tables also give
the model's own ceiling, the baseline's predicted iteration over max(compute, busiest link).

Predicted: the iteration model (whatif/iteration_model.py) over GRID (GPU, model, hosts, bandwidth), colocated
layout, batch 32 per worker, each variant's default knobs. A grid takes minutes (ByteScheduler is simulated host by
host), so it is computed by an explicit command and kept in PREDICTED, which the page reads:

    python -m reprokit.study.report.head_to_head --predict   # rewrites docs/results/predicted/head-to-head.json

A unit test fails when the file is of another version of the model. The worker-update baseline differs from the
baseline only in where the optimizer runs, which the model does not time: it has no predicted column.
"""
from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprokit.core.outputs import figure_text, replace_file, save_figure
from reprokit.core.paths import REPO_ROOT
from reprokit.run.settings import MODELS
from reprokit.study.analysis.speedup import BASELINE, WORKER_UPDATE, MeanInterval, mean_interval, ratio_interval
from reprokit.study.paper.claims import MIN_RUNS
from reprokit.study.paper.rates import rate_bps, shaped_bps
from reprokit.study.profiles.layer_profiles import DEFAULT_SHAPE
from reprokit.study.whatif import iteration_model
from reprokit.study.whatif.compute import gpu_layers
from reprokit.study.whatif.iteration_model import VARIANT_POLICY, ModelInput
from reprokit.study.whatif.model_check import ModelValidation
from reprokit.study.whatif.shipped_predictions import model_version
from reprokit.vocabulary import Variant

NAME = "head-to-head"
TITLE = ("Head to head: the baseline, P3, ByteScheduler and the worker-update baseline against the perfect-overlap "
         "bound")
STUDIES = "sysml19-p3, sosp19-bytescheduler, scheduling-critique-2024"
VARIANTS = (BASELINE, "p3", WORKER_UPDATE, "bytescheduler")
SHOWN = {v: Variant(v).shown for v in VARIANTS}
CONFIDENCE = 0.95  # every study entry's (tolerance.confidence), as on the other results pages
PREDICTED = REPO_ROOT / "docs" / "results" / "predicted" / f"{NAME}.json"
PREDICTED_FORMAT = "reprokit-head-to-head-predicted/1"
GRID_GPUS = ("p4000", "v100")
GRID_MODELS = ("resnet", "vgg", "vgg16")  # VGG-19 is P3's paper's, VGG-16 ByteScheduler's
GRID_BANDWIDTHS = ("1gbit", "4gbit", "10gbit", "25gbit", "100gbit")
GRID_HOSTS = (4, 8, 16)
PREDICTED_VARIANTS = ("p3", "bytescheduler")  # the worker-update baseline: no policy (the model times no optimizer)
BATCH = 32
MODEL_NAMES = {key: model.title for key, model in MODELS.items()}  # the model table's own names


def overlap_bound(comm_to_compute: float) -> float:
    """The most any schedule can speed up a baseline that overlaps nothing, for communication r times computation:
    (1 + r) / max(1, r); NaN for a ratio that is not a finite r >= 0."""
    r = comm_to_compute
    if not (isinstance(r, (int, float)) and math.isfinite(r) and r >= 0):
        return math.nan
    return (1.0 + r) / max(1.0, r)


def _fmt(x: float | None, digits: int = 2, suffix: str = "") -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}{suffix}"


def _interval(low: float, high: float, digits: int = 2) -> str:
    return f"[{_fmt(low, digits)}, {_fmt(high, digits)}]" if math.isfinite(low) and math.isfinite(high) else "[-]"


# --- measured ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """What runs must share to share a row."""
    gpu: str  # the GPU profile emulated (a name of gpus.json, or a profile file)
    model: str
    bandwidth: str
    hosts: str
    links: str  # how each host's egress is shared: fair or fifo
    tcp: str
    dilation: float
    engine: str  # embedded (stock MXNet 1.9.1) or artifact (the authors' builds)

    @staticmethod
    def gpu_label(gpu: str) -> str:
        return Path(gpu).stem if "/" in gpu else gpu.upper() if gpu.isalnum() else gpu

    def label(self) -> str:
        gpu = self.gpu_label(self.gpu)
        engine = {"embedded": "stock MXNet 1.9.1", "artifact": "the authors' builds"}.get(self.engine, self.engine)
        return (f"{MODEL_NAMES.get(self.model, self.model)}, {gpu} compute (k={self.dilation:g}), {self.bandwidth}, "
                f"{self.hosts} hosts, {self.links} links, TCP {self.tcp}, {engine}")

    def order(self) -> tuple[Any, ...]:
        return (self.gpu, self.model, rate_bps(self.bandwidth), self.engine, self.hosts, self.links, self.tcp,
                self.dilation)


def setting_of(run: Mapping[str, Any]) -> Setting:
    """The run's setting, as its summary keeps it; '?' for what a summary of an earlier version does not keep
    (regenerate it with ck report --docs)."""
    hosts = str(run["hosts"]) if run.get("hosts") else "?"
    links = str(run["links"]) if run.get("links") else "?"
    tcp = (str(run["tcp"]) or "default") if "tcp" in run else "?"
    return Setting(str(run["gpu"]), str(run["model"]), str(run["bandwidth"]), hosts, links, tcp,
                   float(run["dilation"]), str(run["engine"]))


@dataclass(frozen=True)
class MeasuredRow:
    setting: Setting
    summary: str  # the summary (docs/results/data/NAME.json) both variants' runs come from
    variant: str
    baseline: MeanInterval
    measured: MeanInterval
    speedup: tuple[float, float, float]  # ratio of geometric means, interval low, high
    comm_to_compute: float  # the baseline's measured ratio; NaN: the summary holds none
    cpu_bound: int = 0  # runs of either side their result flagged CPU-bound (the hosts' CPU, not the link, set the pace)

    @property
    def bound(self) -> float:
        return overlap_bound(self.comm_to_compute)


def _summary_ratio(summary: Mapping[str, Any], setting: Setting, variant: str) -> float:
    """The baseline's measured communication/computation ratio as the summary's speedup row of ``variant`` over the
    baseline in this setting keeps it (written by analysis.speedup.speedups); NaN unless exactly one value."""
    found = {round(float(x["comm_to_compute"]), 6) for x in summary.get("speedups", [])
             if x.get("comm_to_compute") is not None and x.get("variant") == variant and x.get("versus") == BASELINE
             and (x.get("model"), x.get("bandwidth"), x.get("engine"), x.get("gpu"), float(x.get("dilation") or 1))
             == (setting.model, setting.bandwidth, setting.engine, setting.gpu, setting.dilation)}
    return found.pop() if len(found) == 1 else math.nan


def measured_rows(summaries: Iterable[Mapping[str, Any]]) -> list[MeasuredRow]:
    """Each variant beside the baseline of its setting in its summary, for the emulated runs (a GPU's compute on a
    cluster) that succeeded."""
    rows = []
    for summary in summaries:
        groups: dict[Setting, dict[str, list[float]]] = {}
        flagged: dict[Setting, dict[str, int]] = {}
        for run in summary.get("runs", []):
            if not run.get("ok") or not run.get("gpu") or run.get("samples_per_sec") is None \
                    or run.get("variant") not in VARIANTS:
                continue
            setting = setting_of(run)
            groups.setdefault(setting, {}).setdefault(run["variant"], []).append(float(run["samples_per_sec"]))
            counts = flagged.setdefault(setting, {})
            counts[run["variant"]] = counts.get(run["variant"], 0) + bool(run.get("cpu_bound"))
        for setting, by_variant in groups.items():
            base = by_variant.get(BASELINE)
            if not base:
                continue
            for variant in VARIANTS[1:]:
                if by_variant.get(variant):
                    rows.append(MeasuredRow(setting, str(summary["name"]), variant,
                                            mean_interval(base, CONFIDENCE),
                                            mean_interval(by_variant[variant], CONFIDENCE),
                                            ratio_interval(by_variant[variant], base, CONFIDENCE),
                                            _summary_ratio(summary, setting, variant),
                                            flagged[setting].get(BASELINE, 0) + flagged[setting].get(variant, 0)))
    return sorted(rows, key=lambda r: (r.setting.order(), r.summary, VARIANTS.index(r.variant)))


def _throughput(m: MeanInterval) -> str:
    return f"{_fmt(m.geometric_mean, 1)} {_interval(m.low, m.high, 1)}, n={m.n}"


def measured_table(rows: Sequence[MeasuredRow]) -> list[str]:
    lines = ["| setting | runs from | baseline samples/s [95%], n | variant | its samples/s [95%], n | speedup over "
             "the baseline [95%] | baseline's comm/compute r | bound (1 + r) / max(1, r) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        speedup, low, high = r.speedup
        flagged = f" ({r.cpu_bound} of {r.baseline.n + r.measured.n} runs CPU-bound)" if r.cpu_bound else ""
        lines.append(f"| {r.setting.label()} | [{r.summary}]({r.summary}.md) | {_throughput(r.baseline)} | "
                     f"{SHOWN[r.variant]} | {_throughput(r.measured)} | {_fmt(speedup)}x {_interval(low, high)}{flagged} | "
                     f"{_fmt(r.comm_to_compute)} | {_fmt(r.bound, suffix='x')} |")
    return lines


def with_ratio(rows: Sequence[MeasuredRow]) -> list[MeasuredRow]:
    """The rows the measured figure draws: their baseline has a measured ratio r, and both sides have the runs an
    interval needs (MIN_RUNS, as for a verdict)."""
    return [r for r in rows if math.isfinite(r.comm_to_compute) and r.comm_to_compute > 0
            and min(r.baseline.n, r.measured.n) >= MIN_RUNS]


def plot_measured(rows: Sequence[MeasuredRow], path: Path) -> int:
    """Measured speedup against the baseline's measured compute/communication (1 / r), a point per row that has r,
    with its 95% interval, a colour per variant, a marker per model (hollow: a GPU other than the first), and the bound (1 + r) / max(1, r) as a curve;
    the number of points drawn (0: no figure written)."""
    drawn = with_ratio(rows)
    if not drawn:
        return 0
    import matplotlib  # noqa: PLC0415  matplotlib: only for the figure, not for the page's import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415  matplotlib: only for the figure; Agg chosen before pyplot
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415  matplotlib: only for the figure

    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    xs = sorted(1 / r.comm_to_compute for r in drawn)
    low_x, high_x = xs[0] / 1.5, xs[-1] * 1.5
    grid = [low_x * (high_x / low_x) ** (i / 99) for i in range(100)]
    ax.plot(grid, [overlap_bound(1 / x) for x in grid], color="black", linestyle=":", linewidth=1,
            label="bound (1 + r) / max(1, r)")
    colours = {"p3": "tab:blue", "bytescheduler": "tab:red", WORKER_UPDATE: "tab:green"}
    gpus = list(dict.fromkeys(r.setting.gpu for r in drawn))
    models = list(dict.fromkeys(r.setting.model for r in drawn))
    markers = dict(zip(models, ("o", "s", "^", "D", "v", "P")))
    for variant in VARIANTS[1:]:
        for gpu_name in gpus:
            for model in models:
                mine = [r for r in drawn if (r.variant, r.setting.gpu, r.setting.model) == (variant, gpu_name, model)]
                if not mine:
                    continue
                ys = [r.speedup[0] for r in mine]
                ax.errorbar([1 / r.comm_to_compute for r in mine], ys,
                            yerr=[[y - r.speedup[1] for y, r in zip(ys, mine)],
                                  [r.speedup[2] - y for y, r in zip(ys, mine)]],
                            color=colours.get(variant, "grey"), marker=markers.get(model, "."), linestyle="none",
                            fillstyle="full" if gpu_name == gpus[0] else "none", markersize=5, capsize=3,
                            label=figure_text(f"{SHOWN[variant]}, {MODEL_NAMES.get(model, model)}, "
                                              f"{Setting.gpu_label(gpu_name)}"))
    ax.axhline(1.0, color="grey", linewidth=0.6)
    ax.set_xscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")  # 0.6, not 6 x 10^-1
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("the baseline's measured compute / communication (1 / r)")
    ax.set_ylabel("measured speedup over the baseline [95%]")
    ns = sorted({n for r in drawn for n in (r.baseline.n, r.measured.n)})
    ax.set_title(f"Emulated runs (n = {' or '.join(map(str, ns))} per side), dilation undone", fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="best")
    fig.tight_layout()
    save_figure(fig, path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return len(drawn)


# --- predicted -----------------------------------------------------------------------------------------------------

def predict_grid() -> dict[str, Any]:
    """The iteration model over GRID: every cell's compute, busiest link, bound and each policy's iteration."""
    cells = []
    for gpu_name in GRID_GPUS:
        for model in GRID_MODELS:
            layers = gpu_layers(gpu_name, model, DEFAULT_SHAPE[model], BATCH)
            for hosts in GRID_HOSTS:
                for bandwidth in GRID_BANDWIDTHS:
                    cell: dict[str, Any] = {"gpu": gpu_name, "model": model, "hosts": hosts, "bandwidth": bandwidth}
                    for variant in (BASELINE, *PREDICTED_VARIANTS):
                        p = iteration_model.simulate(ModelInput(layers, hosts, hosts, shaped_bps(bandwidth),
                                                                VARIANT_POLICY[variant]))
                        cell[f"{variant}_s"] = p.iteration_s
                        if variant == BASELINE:
                            cell.update(compute_s=p.compute_s, comm_s=p.comm_s, bound_s=p.bound_s)
                    cells.append(cell)
    return {"format": PREDICTED_FORMAT, "model_version": model_version(), "batch": BATCH, "layout": "colocated",
            "command": "python -m reprokit.study.report.head_to_head --predict", "cells": cells}


def read_predicted(path: Path = PREDICTED) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == PREDICTED_FORMAT else None


@dataclass(frozen=True)
class PredictedCell:
    gpu: str
    model: str
    hosts: int
    bandwidth: str
    compute_s: float
    comm_s: float  # the busiest link's bytes per iteration at the bandwidth
    bound_s: float  # max(compute_s, comm_s)
    iteration_s: Mapping[str, float]  # per variant (the baseline's too)

    @property
    def compute_to_comm(self) -> float:
        return self.compute_s / self.comm_s if self.comm_s > 0 else math.inf

    @property
    def bound(self) -> float:
        """The perfect-overlap bound over a baseline that overlaps nothing, for the model's r = comm / compute."""
        return overlap_bound(self.comm_s / self.compute_s)

    @property
    def ceiling(self) -> float:
        """The model's own ceiling over its baseline: the baseline's iteration over max(compute, busiest link)."""
        return self.iteration_s[BASELINE] / self.bound_s

    def speedup(self, variant: str) -> float:
        return self.iteration_s[BASELINE] / self.iteration_s[variant]


def predicted_cells(data: Mapping[str, Any]) -> list[PredictedCell]:
    return [PredictedCell(c["gpu"], c["model"], int(c["hosts"]), c["bandwidth"], float(c["compute_s"]),
                          float(c["comm_s"]), float(c["bound_s"]),
                          {v: float(c[f"{v}_s"]) for v in (BASELINE, *PREDICTED_VARIANTS)})
            for c in data.get("cells", [])]


def unvalidated() -> dict[str, list[str]]:
    """Per predicted variant, the validation checks its policy missed (model_validation.json; empty: validated)."""
    stored = ModelValidation.stored()
    return {v: stored.missed(variants=(v, BASELINE)) for v in PREDICTED_VARIANTS}


def unchecked_hosts() -> list[int]:
    """The grid's host counts that no validation check inside the model's assumptions reached."""
    stored = ModelValidation.stored()
    return [h for h in GRID_HOSTS if any(len(stored.missed(hosts=h, variants=(v, BASELINE)))
                                         > len(stored.missed(variants=(v, BASELINE))) for v in PREDICTED_VARIANTS)]


UNVALIDATED = " (policy not validated)"


def _column(variant: str, missed: Mapping[str, list[str]]) -> str:
    return f"predicted {SHOWN[variant]} speedup" + (UNVALIDATED if missed[variant] else "")


def predicted_tables(cells: Sequence[PredictedCell], missed: Mapping[str, list[str]],
                     unchecked: Sequence[int] = ()) -> list[str]:
    """A table per GPU and model; a host count no validation check reached is marked so."""
    lines = []
    for gpu_name in dict.fromkeys(c.gpu for c in cells):
        for model in dict.fromkeys(c.model for c in cells if c.gpu == gpu_name):
            mine = sorted((c for c in cells if c.gpu == gpu_name and c.model == model),
                          key=lambda c: (c.hosts, rate_bps(c.bandwidth)))
            lines += ["", f"#### Predicted: {MODEL_NAMES.get(model, model)} at the {gpu_name.upper()}'s compute", "",
                      "| hosts | bandwidth | predicted compute/comm | "
                      + " | ".join(_column(v, missed) for v in PREDICTED_VARIANTS)
                      + " | predicted ceiling over this baseline | predicted bound (1 + r) / max(1, r) |",
                      "|---|---|---|" + "---|" * (len(PREDICTED_VARIANTS) + 2)]
            for c in mine:
                hosts = f"{c.hosts}{' (no check)' if c.hosts in unchecked else ''}"
                lines.append(f"| {hosts} | {c.bandwidth} | {_fmt(c.compute_to_comm)} | "
                             + " | ".join(f"{_fmt(c.speedup(v))}x" for v in PREDICTED_VARIANTS)
                             + f" | {_fmt(c.ceiling)}x | {_fmt(c.bound)}x |")
    return lines


def plot(cells: Sequence[PredictedCell], missed: Mapping[str, list[str]], path: Path) -> None:
    """Predicted speedup against the compute-to-communication ratio, a panel per GPU and model: a line per variant
    and host count over the bandwidths, the bound (1 + r) / max(1, r) as a curve."""
    import matplotlib  # noqa: PLC0415  matplotlib: only for the figure, not for the page's import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415  matplotlib: only for the figure; Agg chosen before pyplot

    gpus, models = list(dict.fromkeys(c.gpu for c in cells)) or [""], list(dict.fromkeys(c.model for c in cells)) or [""]
    # A row per GPU, a column per model: the page stays readable at its width
    fig, axes = plt.subplots(len(gpus), len(models), figsize=(3.6 * len(models), 3.2 * len(gpus) + 0.9), sharey=True,
                             squeeze=False)
    panels = [(g, m) for g in gpus for m in models]
    colours = {"p3": "tab:blue", "bytescheduler": "tab:red"}
    markers = {h: mk for h, mk in zip(GRID_HOSTS, ("o", "s", "^", "D"))}
    for ax, (gpu_name, model) in zip(axes.flat, panels):
        mine = [c for c in cells if c.gpu == gpu_name and c.model == model]
        xs = sorted(c.compute_to_comm for c in mine)
        if xs:
            grid = [xs[0] * (xs[-1] / xs[0]) ** (i / 99) for i in range(100)]
            ax.plot(grid, [overlap_bound(1 / x) for x in grid], color="black", linestyle=":", linewidth=1,
                    label="bound (1 + r) / max(1, r)")
        for variant in PREDICTED_VARIANTS:
            for hosts in GRID_HOSTS:
                line = sorted((c for c in mine if c.hosts == hosts), key=lambda c: c.compute_to_comm)
                unchecked = UNVALIDATED if missed[variant] else ""
                ax.plot([c.compute_to_comm for c in line], [c.speedup(variant) for c in line],
                        color=colours.get(variant, "grey"), marker=markers.get(hosts, "."), markersize=4,
                        linewidth=1, label=figure_text(f"{SHOWN[variant]}{unchecked}, {hosts} hosts"))
        ax.axhline(1.0, color="grey", linewidth=0.6)
        ax.set_xscale("log")
        ax.set_title(f"{MODEL_NAMES.get(model, model)}, {gpu_name.upper()}: PREDICTED", fontsize=9)
        ax.set_xlabel("predicted compute / communication")
    for row in axes:
        row[0].set_ylabel("predicted speedup over the baseline")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.suptitle("PREDICTED by the iteration model, not measured", fontsize=10)
    fig.tight_layout(rect=(0, 0.9 / (3.2 * len(gpus) + 0.9), 1, 0.96))
    save_figure(fig, path, dpi=90, metadata={"Software": None})
    plt.close(fig)


# --- the page ------------------------------------------------------------------------------------------------------

def page(summaries: Sequence[Mapping[str, Any]], rows: Sequence[MeasuredRow], predicted: Mapping[str, Any] | None,
         figure: str = f"{NAME}.png", measured_figure: str = f"{NAME}-measured.png") -> str:
    """The page's text; ``rows``: the summaries' measured_rows."""
    shown = {v for r in rows for v in (BASELINE, r.variant)}
    out = [f"# {TITLE}", "",
           "Generated by `python -m reprokit.study.report.results_pages` (`src/reprokit/study/report/head_to_head.py`)"
           " from the summaries in `data/` and the predicted grid in `predicted/head-to-head.json`; do not edit by "
           "hand.", "",
           "**The bound.** An iteration that overlaps nothing takes computation plus communication, C (1 + r) for "
           "communication r times computation; one that hides the shorter completely takes max(C, rC). No schedule "
           "speeds up a baseline that overlaps nothing by more than (1 + r) / max(1, r): 1 + r when communication is "
           "the shorter, (1 + r) / r when it is the longer, at most 2x at r = 1. Stock MXNet's baseline already "
           "overlaps some communication, so what is left over it is smaller (the predicted tables give the model's "
           "ceiling over its own baseline).", "",
           "## Measured", "",
           "Emulated runs (a GPU's compute emulated on a testbed, dilation k undone) from the summaries in `data/`. "
           "A row holds runs of one setting from one summary: the variant beside the baseline that ran in the same "
           "store. Throughput: the geometric mean of the runs' samples/s (all workers) with its 95% interval; speedup: "
           "the ratio of the geometric means with its Welch interval on the log scale (study/analysis/speedup.py). "
           "A speedup says how many of its runs their result flagged CPU-bound (the busiest host's CPU near full, so "
           "the hosts, not the links, may have set the pace); such rows give no verdict on the study pages.", ""]
    if rows:
        out += measured_table(rows)
    else:
        out.append("No summary holds emulated runs of the baseline beside one of its rivals.")
    out.append("")
    drawn = with_ratio(rows)
    if drawn:
        undrawn = sorted({f"{r.setting.label()} ({r.summary})" for r in rows if r not in drawn})
        out += [f"![measured speedup over the baseline against the baseline's measured compute/communication]"
                f"({measured_figure})", "",
                f"The figure: the {len(drawn)} rows whose baseline has a measured ratio r and whose sides have "
                f"n >= {MIN_RUNS}, each at 1 / r (right: more compute per byte) with its 95% interval, and the dotted "
                f"curve the bound." + (f" Not drawn (no ratio kept, or n < {MIN_RUNS}): {'; '.join(undrawn)}."
                                       if undrawn else ""), ""]
    if all(math.isnan(r.comm_to_compute) for r in rows):
        out.append("No measured ratio r, so no measured bound: the summaries these rows come from keep each run's "
                   "throughput but not its communication and computation per iteration (summaries written by "
                   "`ck report --docs` from now on keep the baseline's ratio in their speedup rows).")
    for variant in (v for v in VARIANTS if v not in shown):
        elsewhere = sorted({str(s["name"]) for s in summaries for r in s.get("runs", []) if r.get("variant") == variant})
        out += ["", f"Not measured on an emulated cluster beside the baseline in any summary: {SHOWN[variant]}"
                    + (f" (its runs: {', '.join(f'[{n}]({n}.md)' for n in elsewhere)}, compute not emulated)."
                       if elsewhere else ".")]
    settings = {(r.setting, r.summary) for r in rows}
    shared = sorted({s.label() for s, _ in settings if sum(1 for t, _ in settings if t == s) > 1})
    if shared:
        out += ["", "The same setting in more than one summary (their baselines ran apart, each variant is set "
                    "against its own): " + "; ".join(shared) + "."]
    out += ["", "## Predicted", ""]
    cells = predicted_cells(predicted) if predicted else []
    if not cells:
        out.append("No predicted grid: `python -m reprokit.study.report.head_to_head --predict` writes it.")
        return "\n".join(out) + "\n"
    missed = unvalidated()
    version = str(predicted.get("model_version", "?")) if predicted else "?"
    out.append(f"PREDICTED by the iteration model (`src/reprokit/study/whatif/iteration_model.py`, version {version}),"
               f" not measured: {len(cells)} settings, a worker and a server on each host, batch "
               f"{predicted.get('batch', BATCH) if predicted else BATCH} per worker, each variant's default knobs "
               f"(P3's 50,000-element slices; ByteScheduler's partition {iteration_model.BYTESCHEDULER_PARTITION:,} and "
               f"credit {iteration_model.BYTESCHEDULER_CREDIT:,}), each host receiving at most at the link's rate, "
               f"as from a switch's port (the checks were of the testbed, which shapes only egress). Compute/comm: "
               f"the worker's compute per iteration "
               f"over its busiest link's bytes at the bandwidth; r is its inverse. The worker-update baseline has no "
               f"prediction: it differs from the baseline only in where the optimizer runs, which the model does not "
               f"time.")
    out += ["", in_brief(cells)]
    for variant in PREDICTED_VARIANTS:
        if missed[variant]:
            out += ["", f"**{SHOWN[variant]}'s figures are from a model not validated for its policy**: "
                        f"{'; '.join(missed[variant])} (`src/reprokit/study/whatif/model_validation.json`)."]
    unchecked = unchecked_hosts()
    if unchecked:
        out += ["", f"No validation check inside the model's assumptions ran on {' or '.join(map(str, unchecked))} "
                    f"hosts: those rows (marked \"no check\") extrapolate the model for every variant."]
    out += predicted_tables(cells, missed, unchecked)
    out += ["", f"![PREDICTED speedup over the baseline against compute/communication]({figure})", "",
            "The figure: PREDICTED, not measured; a panel per GPU and model, a line per variant and host count over "
            "the bandwidths (right: more compute per byte), the dotted curve the bound."
            + (" ByteScheduler's lines are from a model not validated for its policy." if missed["bytescheduler"]
               else "")]
    return "\n".join(out) + "\n"


def in_brief(cells: Sequence[PredictedCell]) -> str:
    """The predicted grid in a sentence: each variant's best and worst, how often it reaches the model's ceiling,
    and whether any exceeds the bound."""
    parts = []
    for v in PREDICTED_VARIANTS:
        best, worst = max(cells, key=lambda c: c.speedup(v)), min(cells, key=lambda c: c.speedup(v))
        at_ceiling = sum(1 for c in cells if c.speedup(v) >= c.ceiling * 0.995)
        below = sum(1 for c in cells if c.speedup(v) < 0.995)
        parts.append(f"{SHOWN[v]} from {_fmt(worst.speedup(v))}x ({_where(worst)}) to {_fmt(best.speedup(v))}x "
                     f"({_where(best)}), within 0.5% of the model's ceiling in {at_ceiling} and below 1 in {below}")
    over = sum(1 for c in cells for v in PREDICTED_VARIANTS if c.speedup(v) > c.bound * 1.005)
    return (f"In brief, of {len(cells)} predicted settings: " + "; ".join(parts)
            + f"; {over} predicted speedups exceed the bound (1 + r) / max(1, r).")


def _where(c: PredictedCell) -> str:
    return f"{MODEL_NAMES.get(c.model, c.model)}, {c.gpu.upper()}, {c.hosts} hosts, {c.bandwidth}"


def measured_runs(rows: Sequence[MeasuredRow]) -> int:
    """How many runs the measured rows combine (a baseline that two rows share counted once)."""
    baselines = {(r.setting, r.summary): r.baseline.n for r in rows}
    return sum(baselines.values()) + sum(r.measured.n for r in rows)


def write_page(summaries: Sequence[Mapping[str, Any]], rows: Sequence[MeasuredRow], out_dir: Path,
               predicted: Mapping[str, Any] | None = None) -> list[Path]:
    """head-to-head.md and its figure into out_dir (the figure only with a predicted grid); the paths written.
    ``rows``: the summaries' measured_rows; ``predicted``: the grid (PREDICTED's by default)."""
    grid = predicted if predicted is not None else read_predicted()
    md, png, measured_png = out_dir / f"{NAME}.md", out_dir / f"{NAME}.png", out_dir / f"{NAME}-measured.png"
    replace_file(md, page(summaries, rows, grid, png.name, measured_png.name))
    written = [md]
    if plot_measured(rows, measured_png):
        written.append(measured_png)
    cells = predicted_cells(grid) if grid else []
    if cells:
        plot(cells, unvalidated(), png)
        written.append(png)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["--predict"]:
        print("usage: python -m reprokit.study.report.head_to_head --predict   (rewrites "
              f"{PREDICTED.relative_to(REPO_ROOT)}; python -m reprokit.study.report.results_pages writes the page)",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    grid = predict_grid()
    PREDICTED.parent.mkdir(parents=True, exist_ok=True)
    replace_file(PREDICTED, json.dumps(grid, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PREDICTED}: {len(grid['cells'])} settings of model {grid['model_version']} in "
          f"{time.monotonic() - started:.0f} s; python -m reprokit.study.report.results_pages writes the page")
    return 0


if __name__ == "__main__":
    sys.exit(main())
