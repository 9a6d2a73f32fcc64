"""`ck report study:NAME`: plots (matplotlib), a Markdown report, a self-contained HTML report (jinja2), report.json.

Written into ``<store>/report/`` (or ``--out_dir``): ``report.md``,
``report.html`` (CSS inline, plots embedded as PNG data URIs, so the file
alone is the report), ``report.json`` (every configuration's mean, interval
and n, every speedup with its interval, every verdict with its reason, the
bandwidth choices: for scripts), ``plots/<model>.png`` / ``.svg`` and, where a
run pair has timelines, ``plots/timeline.png`` / ``.svg`` (timeline.py).
Per configuration the engines stand side by side (speedup.study_series: for P3's
study the authors' 2018 baseline and P3 builds beside MXNet 1.9.1's P3 and its two
baselines) with the study's subject's ratios; one without runs is shown as
"not measured". When no claim could be tested (analysis.nothing_tested), the
reports and ``ck report``'s summary say so first, with the fix. A claim at a
bandwidth no run had is drawn apart from the measurements (draw_model).
Two sections are predicted, never measured (sensitivity.py): whether a claim's
verdict depends on the GPU (``plots/sensitivity.png`` / ``.svg``: each claim at
a bandwidth predicted across compute speeds, the emulated runs on it), and P3
on today's hardware (GPUs, bandwidths and cluster sizes of sensitivity.TODAY).

Record content (imported records come from other evaluators) is text only:
the HTML template is autoescaped, Markdown output escapes ``<``, ``>``, ``&``,
``|``, backticks and link syntax (``](``), plot text has no mathtext, and file names come from the study
entry (its models) or are fixed, never from records.
"""
from __future__ import annotations

import base64
import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import jinja2

from reprokit.core.jsonfile import write_json
from reprokit.core.outputs import figure_text, replace_file, save_figure as save_figure_file
from reprokit.emulation.gpus import paper_gpu
from reprokit.engines.base import ARTIFACT, EMBEDDED
from reprokit.engines.choice import ENGINE_KINDS
from reprokit.study.analysis.analyse import Analysis, analyse, setup_label
from reprokit.study.analysis.answer import answer
from reprokit.study.analysis.judged import ClaimAxes, judged_kind, labelled_verdicts
from reprokit.study.analysis.labelled import EXPLANATION as LABELLED_EXPLANATION
from reprokit.study.analysis.speedup import (
    BASELINE,
    ENGINE_NAMES,
    SIDE_BY_SIDE,
    WORKER_UPDATE,
    on_workers,
    study_series,
)
from reprokit.study.analysis.verdict import Setup
from reprokit.study.paper.claims import MIN_RUNS, Claim, Study, kind_of
from reprokit.study.paper.rates import NATIVE, same_rate, shaped_bps
from reprokit.study.report.timeline import (
    TimelinePair,
    TimelinePlot,
    pick_pair,
    plot_pair,
    timeline_traces,
    view_summary,
)
from reprokit.study.store.records import Provenance, Record, Store
from reprokit.study.store.sweep_plan import BandwidthChoice
from reprokit.study.whatif.sensitivity import (
    SPEED_POINTS,
    TITLE as SENSITIVITY_TITLE,
    TODAY,
    HardwareGrid,
    HardwareMap,
    caption as sensitivity_caption,
    draw as draw_sensitivity,
    hardware_map,
    sensitivity,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

REPORT_FORMAT = "reprokit-study-report/1"

TEMPLATES = Path(__file__).resolve().parent / "templates"
VARIANT_STYLE = {BASELINE: ("tab:blue", "o"), WORKER_UPDATE: ("tab:purple", "v"), "p3": ("tab:orange", "s"),
                 "p3-slicing-only": ("tab:green", "^"), "p3-priority-only": ("tab:olive", "<")}
SERIES_LABELS = {(e, v): label for e, v, label in SIDE_BY_SIDE}


def series_label(engine: str, variant: str, series: Iterable[tuple[str, str, str]] = SIDE_BY_SIDE) -> str:
    """authors' 2018 P3, MXNet 1.9.1 baseline, ...: one of ``series`` (the study's side-by-side series, P3's by
    default), or the variant and whose engine ran it."""
    labels = {(e, v): label for e, v, label in series}
    return labels.get((engine, variant)) or (f"MXNet 1.9.1 {variant}" if engine == EMBEDDED
                                             else f"{variant} ({ENGINE_NAMES[engine]})")


def _series_order(frame: pd.DataFrame, keys: list[str]) -> list[tuple[str, ...]]:
    """The series (values of ``keys``, the engine first) of a frame: stock MXNet first, then the authors' build,
    the rest by name."""
    return sorted(set(zip(*(frame[k] for k in keys))), key=lambda s: (ENGINE_KINDS.index(s[0]), *s[1:]))


def not_measured(summary: pd.DataFrame, model: str, series: Iterable[tuple[str, str, str]] = SIDE_BY_SIDE) -> list[str]:
    """Which of ``series`` (the study's side-by-side series, P3's by default) have no run at all of this model."""
    mine = summary[summary["model"] == model]
    ran = set(zip(mine["engine"], mine["variant"]))
    return [label for e, v, label in series if (e, v) not in ran]


@dataclass(frozen=True)
class Plot:
    model: str
    png: Path
    svg: Path
    png_base64: str


def _bandwidth_order(values: Iterable[str]) -> list[str]:
    return sorted(set(values), key=lambda b: (-1.0 if b == NATIVE else shaped_bps(b)))


def plot_name(study: Study, model: str, index: int) -> str:
    """A plot's file name: the study entry's own name of the model, never a record's text."""
    return next((m for m in study.matrix.models if m == model), f"model-{index + 1}")


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


UNMEASURED_CLAIMS = "claims (not measured here)"  # the legend entry of claims at a bandwidth no run had


def draw_model(study: Study, analysis: Analysis, model: str) -> Figure:
    """The figure of plot_model: throughput (left) and speedup (middle) against bandwidth, speedup against the
    baseline's measured communication-to-computation ratio (right), per setup and series, with intervals.

    The paper's claims: at a measured bandwidth a red star (on the left, the measured baseline times the
    claim); at a bandwidth no run had, a hollow grey star in a shaded area right of the measured ones, under
    one legend entry (UNMEASURED_CLAIMS) and labelled "claimed at ..., not measured", so that no reader takes
    it for a measurement; "up to" claims a dashed line."""
    import matplotlib  # noqa: PLC0415  matplotlib: only to draw; Agg chosen before pyplot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415  matplotlib: only to draw; Agg chosen before pyplot

    summary = analysis.summary[analysis.summary["model"] == model]
    speedups = analysis.speedups[analysis.speedups["model"] == model]
    shown_speedups = speedups[speedups["versus"].isin([BASELINE, WORKER_UPDATE])]
    claims = [c for c in study.claims if c.model == model]
    measured = _bandwidth_order(summary["bandwidth"])
    claim_only = [b for b in _bandwidth_order(c.bandwidth for c in claims if c.bandwidth)
                  if not any(same_rate(b, m) for m in measured)]
    x_of: dict[str, float] = {b: i for i, b in enumerate(measured)}
    x_of.update({b: len(measured) + 0.5 + i for i, b in enumerate(claim_only)})  # apart from the measured
    setups = list(dict.fromkeys(summary["setup"]))
    named, _ = study_series(study)
    fig, (ax_t, ax_s, ax_r) = plt.subplots(1, 3, figsize=(16, 4.4))

    def style(engine: str, variant: str, versus: str = BASELINE) -> dict[str, Any]:
        """Colour and marker per variant (an X over the worker-update baseline); the authors' build hollow."""
        color, marker = VARIANT_STYLE.get(variant, ("tab:gray", "D"))
        hollow = {"markerfacecolor": "white", "markeredgewidth": 1.6} if engine == ARTIFACT else {}
        return {"fmt": "X" if versus == WORKER_UPDATE else marker, "color": color, **hollow}

    def points(ax: Axes, frame: pd.DataFrame, column: str, s_index: int, setup: str, keys: list[str],
               series: list[tuple[str, ...]]) -> None:
        """One marker per series and bandwidth with its interval, offset per setup and series."""
        width = 0.8 / max(1, len(setups) * len(series))
        for key, group in frame.groupby(keys, sort=False):
            slot = s_index * len(series) + series.index(key)
            offset = (slot - (len(setups) * len(series) - 1) / 2) * width
            xs = [x_of[b] + offset for b in group["bandwidth"]]
            values = group[column].tolist()
            err = [[v - lo if _num(lo) is not None else 0 for v, lo in zip(values, group["ci_low"])],
                   [hi - v if _num(hi) is not None else 0 for v, hi in zip(values, group["ci_high"])]]
            engine, variant, *versus = key
            over = f"/{'baseline' if versus[0] == BASELINE else 'worker-update baseline'}" if versus else ""
            ax.errorbar(xs, values, yerr=err, capsize=3, alpha=1.0 if s_index == 0 else 0.55,
                        label=figure_text(f"{series_label(engine, variant, named)}{over} ({setup})"), **style(*key))

    def by_ratio(frame: pd.DataFrame, s_index: int, setup: str) -> int:
        """Speedup against the baseline's measured communication/computation at each bandwidth."""
        shown = 0
        for (engine, variant), group in frame[frame["comm_to_compute"].notna()].groupby(["engine", "variant"], sort=False):
            values = group["speedup"].tolist()
            err = [[v - lo if _num(lo) is not None else 0 for v, lo in zip(values, group["ci_low"])],
                   [hi - v if _num(hi) is not None else 0 for v, hi in zip(values, group["ci_high"])]]
            ax_r.errorbar(group["comm_to_compute"].tolist(), values, yerr=err, capsize=3,
                          alpha=1.0 if s_index == 0 else 0.55,
                          label=figure_text(f"{series_label(engine, variant, named)}/baseline ({setup})"
                                      + (", at the stock baseline's ratio" if engine != EMBEDDED else "")),
                          **style(engine, variant))
            for x, y, b in zip(group["comm_to_compute"], values, group["bandwidth"]):
                ax_r.annotate(figure_text(b), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=6)
            shown += len(group)
        return shown

    throughput_series = _series_order(summary, ["engine", "variant"])
    speedup_series = _series_order(shown_speedups, ["engine", "variant", "versus"])
    ratio_points = 0
    for s_index, setup in enumerate(setups):
        points(ax_t, summary[summary["setup"] == setup], "geometric_mean", s_index, setup, ["engine", "variant"],
               throughput_series)
        mine = shown_speedups[shown_speedups["setup"] == setup]
        points(ax_s, mine, "speedup", s_index, setup, ["engine", "variant", "versus"], speedup_series)
        ratio_points += by_ratio(mine[mine["versus"] == BASELINE], s_index, setup)
    unmeasured = [c for c in claims if c.bandwidth in claim_only]
    on = ClaimAxes(ax_t, ax_s, ax_r, x_of, measured, claim_only, summary, analysis.decided)
    for claim in claims:
        judged_kind(claim).draw(claim, on)
    if unmeasured:
        ax_s.plot([x_of[c.bandwidth] for c in unmeasured if c.bandwidth], [c.speedup for c in unmeasured], marker="*",
                  markersize=13, linestyle="none", markerfacecolor="none", markeredgecolor="0.5", color="0.5",
                  label=UNMEASURED_CLAIMS)
        ax_s.axvspan(len(measured) - 0.25, len(measured) + len(claim_only), color="0.93", zorder=0)
        ax_s.axvline(len(measured) - 0.25, color="0.5", linewidth=0.8, linestyle=":")
    for ax in (ax_s, ax_r):
        ax.axhline(1.0, color="black", linewidth=0.6)
    ticks = {ax_t: measured, ax_s: measured + claim_only}
    for ax, ylabel in ((ax_t, "throughput (samples/s)"), (ax_s, "speedup over baseline")):
        names = ticks[ax]
        ax.set_xticks([x_of[b] for b in names],
                      [figure_text(b) + ("\n(claim only)" if b in claim_only else "") for b in names])
        ax.set_xlim(-0.6, max(x_of[b] for b in names) + 0.6)
        ax.set_xlabel("bandwidth per host")
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    missing = not_measured(analysis.summary, model, named)
    if missing:
        ax_t.text(0.02, 0.02, figure_text(f"not measured: {', '.join(missing)}"), transform=ax_t.transAxes, fontsize=7,
                  color="0.35", va="bottom")
    if ratio_points:
        from matplotlib.ticker import NullFormatter, NullLocator  # noqa: PLC0415  matplotlib: only to draw

        ratios = speedups["comm_to_compute"].dropna()
        low, high = float(ratios.min()) / 1.3, float(ratios.max()) * 1.3
        ax_r.set_xscale("log")
        ax_r.set_xlim(low, high)
        ratio_ticks = [t for t in (0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 4, 6, 8, 16, 32) if low <= t <= high]
        ratio_ticks = ratio_ticks or [float(ratios.min())]
        ax_r.set_xticks(ratio_ticks, [f"{t:g}" for t in ratio_ticks])
        ax_r.xaxis.set_minor_locator(NullLocator())
        ax_r.xaxis.set_minor_formatter(NullFormatter())
        ax_r.axvline(1.0, color="0.5", linewidth=0.6, linestyle=":")
        ax_r.legend(fontsize=7, loc="best")
    else:
        ax_r.text(0.5, 0.5, "no communication/computation measured\n(an engine without the p3-comm line)",
                  ha="center", va="center", transform=ax_r.transAxes, fontsize=8)
    ax_r.set_xlabel("baseline's measured communication / computation per iteration")
    ax_r.set_ylabel("speedup over baseline")
    ax_r.grid(alpha=0.3)
    title = figure_text(model)
    ax_t.set_title(f"{title}: throughput, geometric mean and {study.tolerance.confidence:.0%} interval", fontsize=9)
    ax_s.set_title(f"{title}: speedup and the paper's claims", fontsize=9)
    ax_r.set_title(f"{title}: speedup against the measured ratio", fontsize=9)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, folder: Path, name: str, model: str) -> Plot:
    """A figure as plots/<name>.png and .svg, closed."""
    import matplotlib.pyplot as plt  # noqa: PLC0415  matplotlib: only to draw; Agg chosen before pyplot

    folder.mkdir(parents=True, exist_ok=True)
    png, svg = folder / f"{name}.png", folder / f"{name}.svg"
    save_figure_file(fig, png, dpi=100)
    save_figure_file(fig, svg)
    plt.close(fig)
    return Plot(model, png, svg, base64.b64encode(png.read_bytes()).decode("ascii"))


def plot_model(study: Study, analysis: Analysis, model: str, folder: Path, name: str | None = None) -> Plot:
    """draw_model's figure as plots/<name>.png and .svg."""
    return save_figure(draw_model(study, analysis, model), folder, name or plot_name(study, model, 0), model)


SENSITIVITY_PLOT = "sensitivity"  # plots/sensitivity.png and .svg: a fixed name, never a record's text


def _f(x: float | None, digits: int = 2) -> str:
    x = _num(x)
    return "n/a" if x is None else f"{x:.{digits}f}"


def throughput_cell(row: dict[str, Any], engine: str, variant: str) -> str:
    """One throughput of a side_by_side row: geometric mean [interval], n; or why there is none."""
    prefix = f"{engine}_{variant}"
    n, failed = int(row[f"{prefix}_n"]), int(row[f"{prefix}_failed"])
    if n == 0:
        return f"no successful run ({failed} failed)" if failed else "not measured"
    return (f"{_f(row[f'{prefix}_geometric_mean'])} [{_f(row[f'{prefix}_ci_low'])}, {_f(row[f'{prefix}_ci_high'])}], "
            f"n={n}" + (f" ({failed} failed)" if failed else ""))


def ratio_cell(row: dict[str, Any], prefix: str) -> str:
    """A speedup of a side_by_side row (its ratio series column prefix, study_series) with its interval and n, or
    "not measured"."""
    n = int(row[f"{prefix}_n"])
    if n == 0:
        return "not measured"
    return (f"{_f(row[prefix], 3)}x [{_f(row[f'{prefix}_low'], 3)}, {_f(row[f'{prefix}_high'], 3)}], n={n}")


def worker_update_cell(verdict: dict[str, Any]) -> str:
    """A verdict's claim variant over the worker-update baseline where it was judged (shown, never counted)."""
    figure = verdict.get("versus_worker_update")
    if figure:
        return (f"{_f(figure['speedup'])}x [{_f(figure['ci_low'])}, {_f(figure['ci_high'])}], n={figure['n']} "
                f"at {figure['bandwidth']}")
    if verdict["speedup"] is None:
        return "-"
    return "none: the authors' builds have no such baseline" if verdict["engine"] == ARTIFACT else "not measured"


def _environments(records: list[Record]) -> list[dict[str, Any]]:
    """One row per setup: what every run of that setup ran on (distinct values joined)."""
    by_setup: dict[str, list[Record]] = {}
    for r in records:
        by_setup.setdefault(setup_label(r), []).append(r)
    rows = []
    for setup, group in sorted(by_setup.items()):
        def values(field: Callable[[Provenance], str | None], group: list[Record] = group) -> str:
            seen = dict.fromkeys(value for r in group if (value := field(r.provenance)) is not None)
            return ", ".join(seen) or "n/a"

        target = group[0].config.target
        rows.append({"setup": setup, "kind": target.kind, "hosts": ", ".join(target.hosts),
                     "repo_revision": values(lambda p: p.repo_revision), "ck": values(lambda p: p.ck_version),
                     "python": values(lambda p: p.python_version), "engine": values(lambda p: p.engine),
                     "engine_python": values(lambda p: p.engine_python_version),
                     "mxnet": values(lambda p: p.mxnet_version), "controller": values(lambda p: p.controller_host),
                     "runs": len(group),
                     "origin": group[0].origin.id, "imported": bool(group[0].imported_from)})
    return rows


# Said at the speedup table when it holds runs of the embedded default: P3 may well measure below its baseline there
# (a study of another paper names its own subject).
LOOPBACK_NOTE = ("their roles share one host over loopback, whose bandwidth cannot be set, so these speedups say nothing "
                 "about P3's claims")


def loopback_setups(setups: Iterable[Setup], speedups: pd.DataFrame) -> list[str]:
    """The setups of the speedup table (``speedups``: analysis.speedups) that are the embedded default."""
    shown = set(speedups["setup"]) if "setup" in speedups.columns else set()
    return [s.label for s in setups if s.kind == "embedded" and s.label in shown]


STATISTICS = ("throughput: geometric mean with a Student-t interval of the mean of log throughputs, back-transformed; "
              "speedup: ratio of geometric means with a Welch t interval of the difference of mean logs (Welch-"
              "Satterthwaite degrees of freedom), back-transformed: neither interval can fall below zero")


def claimed(claim: Claim) -> str:
    """The claimed figure of the report's table of claims, as the claim's kind shows it."""
    return kind_of(claim).claimed(claim)


def claim_where(claim: Claim) -> str:
    """Where the claim holds (the table of claims' bandwidth column), as the claim's kind says it."""
    return kind_of(claim).where(claim)


def _json_ready(value: object) -> object:
    """NaN as null, numpy scalars as Python numbers, recursively (report.json is strict JSON)."""
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def report_data(study: Study, analysis: Analysis, choices: list[dict[str, Any]], timeline: dict[str, Any] | None, generated: str,
                labelled: list[dict[str, Any]], sensitivity: list[dict[str, Any]] | None = None, today: dict[str, Any] | None = None) -> dict[str, Any]:
    """report.json: every configuration, speedup and verdict (with its reason), for scripts; ``labelled``: the
    emulated and predicted verdicts (labelled_verdicts); ``sensitivity``: each claim at a bandwidth predicted
    across compute speeds with the emulated points (sensitivity.ClaimSensitivity); ``today``: P3 predicted on
    today's hardware (sensitivity.HardwareMap)."""
    tol = study.tolerance
    ready = _json_ready({
        "format": REPORT_FORMAT, "study": study.name, "generated": generated, "metric": study.metric,
        "untested": analysis.untested or None,
        "statistics": {"method": STATISTICS, "confidence": tol.confidence, "min_runs": max(MIN_RUNS, tol.min_runs),
                       "tolerance": tol.speedup, "max_relative_half_width": tol.max_relative_half_width,
                       "profile": tol.profile},
        "configurations": analysis.summary.to_dict("records"), "speedups": analysis.speedups.to_dict("records"),
        "verdicts": [v.to_dict() for v in analysis.verdicts], "overall": analysis.overall,
        "overall_by_engine": analysis.overall_by_engine, "decided_on_engine": analysis.decided,
        "labelled": labelled,
        "predicted_sensitivity": sensitivity or [], "predicted_today": today,
        "side_by_side": analysis.side_by_side.to_dict("records"),
        "badges": [b.to_dict() for b in analysis.badges], "bandwidth_choices": choices, "timeline": timeline,
    })
    assert isinstance(ready, dict)  # _json_ready keeps a dict a dict
    return ready


def _md(value: object) -> str:
    """Markdown output of one expression: no HTML, no table breaks, one line."""
    text = "" if value is None else str(value)
    for raw, safe in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("\n", " "), ("\r", " "),
                      ("](", "]\\("), ("`", "\\`")):  # no links, images or code spans from records
        text = text.replace(raw, safe)
    return text


def _write(path: Path, text: str) -> None:
    replace_file(path, text)


def render(study: Study, analysis: Analysis, records: list[Record], out_dir: Path, store_root: Path,
           program_models: set[str], choices: Iterable[tuple[str, BandwidthChoice]] = (),
           timeline: tuple[TimelinePair | None, str] = (None, "no run pair chosen"), *,
           speed_points: int = SPEED_POINTS, today: HardwareGrid = TODAY) -> dict[str, Any]:
    """Plots, report.md, report.html and report.json. ``choices``: (sweep id, its bandwidth choice) of the
    store's sweeps; ``timeline``: the run pair to draw (timeline.pick_pair) and the sentence on the choice;
    ``speed_points`` and ``today``: the compute speeds of the sensitivity figure and the grid of the predicted map
    of today's hardware (smaller ones make a quicker report)."""
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    generated = time.strftime("%Y-%m-%d %H:%M:%S %z")
    models = [m for m in dict.fromkeys(analysis.summary["model"])]
    plots = [plot_model(study, analysis, m, out_dir / "plots", plot_name(study, m, i)) for i, m in enumerate(models)]
    failed = analysis.runs[~analysis.runs["ok"]] if not analysis.runs.empty else analysis.runs
    pair, note = timeline
    drawn: TimelinePlot | None = plot_pair(pair, out_dir / "plots") if pair is not None else None
    timeline_info = None if pair is None or drawn is None else {**pair.to_dict(), "views": [view_summary(v) for v in drawn.views]}
    chosen = [{"sweep": sweep_id, **c.to_dict(), "summary": c.summary()} for sweep_id, c in choices]
    labelled_typed = labelled_verdicts(study.claims, analysis.overall, study.name, tolerance=study.tolerance,
                                       verdicts=analysis.verdicts, emulated=analysis.emulated_speedups,
                                       emulated_runs=analysis.emulated_runs, gpu_name=study.gpu)
    labelled = [v.to_dict() for v in labelled_typed]
    the_answer = answer(study, analysis.verdicts, analysis.overall, analysis.decided, labelled_typed)
    # after the predicted verdicts: the figure's marks are the compute speeds they were judged at (cached)
    curves = sensitivity(study, analysis.emulated_speedups, speed_points)
    sensitivity_plot = (save_figure(draw_sensitivity(curves), out_dir / "plots", SENSITIVITY_PLOT, SENSITIVITY_PLOT)
                        if curves else None)
    predicted_map: HardwareMap = hardware_map(study, today)
    throughputs, ratios = study_series(study)
    context = {
        "study": study, "generated": generated, "store": str(store_root),
        "summary": analysis.summary.to_dict("records"), "speedups": analysis.speedups.to_dict("records"),
        "verdicts": [v.to_dict() for v in analysis.verdicts], "overall": analysis.overall,
        "overall_by_engine": analysis.overall_by_engine, "decided": analysis.decided,
        "side_by_side": analysis.side_by_side.to_dict("records"), "throughputs": throughputs,
        "ratios": ratios, "subject": study.subject, "engine_kinds": ENGINE_KINDS, "untested": analysis.untested,
        "engine_names": ENGINE_NAMES, "throughput_cell": throughput_cell, "ratio_cell": ratio_cell,
        "worker_update_cell": worker_update_cell, "worker_update": WORKER_UPDATE,
        "subject_vs_worker_update": WORKER_UPDATE in study.variants and on_workers(study.variants, study.subject.variant),
        "other_variants": [label for e, v, label in throughputs if v not in (BASELINE, WORKER_UPDATE, study.subject.variant)],
        "badges": [b.to_dict() for b in analysis.badges], "plots": plots,
        "environments": _environments(records), "failed": failed.to_dict("records"),
        "claims": study.claims, "claimed": claimed, "claim_where": claim_where,
        "kind_rules": [k.stated_rule for k in dict.fromkeys(kind_of(c) for c in study.claims) if k.stated_rule],
        "program_models": sorted(program_models),
        "missing_models": [m for m in study.matrix.models if m not in program_models],
        "setups": analysis.setups, "f": _f, "statistics": STATISTICS,
        "loopback_setups": loopback_setups(analysis.setups, analysis.speedups), "loopback_note": LOOPBACK_NOTE.replace("P3's", f"{study.subject.name}'s"),
        "min_runs": max(MIN_RUNS, study.tolerance.min_runs), "choices": chosen,
        "timeline": timeline_info, "timeline_plot": drawn, "timeline_note": note,
        "labelled": labelled, "answer": the_answer, "paper_gpu_label": paper_gpu(study.gpu).label,
        "labelled_explanation": LABELLED_EXPLANATION,
        "sensitivity": curves, "sensitivity_plot": sensitivity_plot, "sensitivity_caption": sensitivity_caption,
        "sensitivity_title": SENSITIVITY_TITLE, "today": predicted_map,
        "num_runs": len(analysis.runs), "num_ok": int(analysis.runs["ok"].sum()) if len(analysis.runs) else 0,
    }
    common: dict[str, Any] = {"loader": jinja2.FileSystemLoader(TEMPLATES), "undefined": jinja2.StrictUndefined,
              "trim_blocks": True, "lstrip_blocks": True}
    md, html, data = out_dir / "report.md", out_dir / "report.html", out_dir / "report.json"
    _write(md, jinja2.Environment(autoescape=False, finalize=_md, **common).get_template("report.md.j2").render(**context))
    _write(html, jinja2.Environment(autoescape=True, **common).get_template("report.html.j2").render(**context))
    write_json(data, {**report_data(study, analysis, chosen, timeline_info, generated, labelled,
                                    [c.to_dict() for c in curves], predicted_map.to_dict()),
                      "answer": the_answer.to_dict()})
    elapsed = time.monotonic() - started
    return {"markdown": md, "html": html, "json": data, "plots": out_dir / "plots", "seconds": elapsed}


def write_report(study: Study, store: Store, program_models: set[str], out_dir: Path,
                 console: TextIO = sys.stdout, timeline_config: tuple[str, str] | None = None, *,
                 speed_points: int = SPEED_POINTS, today: HardwareGrid = TODAY) -> dict[str, Any]:
    """`ck report study:NAME`: analyse every stored and imported run, render the reports, say what they hold; returns
    the paths written, and "seconds".

    ``timeline_config`` (model, bandwidth): the configuration whose timelines are drawn; by default the
    one with the highest speedup where both variants have timelines. ``speed_points``, ``today``: as render's."""
    left_out: list[str] = []
    records = store.all_records(left_out)
    analysis = analyse(study, records, program_models)
    if analysis.untested:  # first: a report without a single verdict must not read as one with some
        print(f"study: {analysis.untested}", file=console, flush=True)
    for problem in left_out:
        print(f"study: warning: {problem}", file=console, flush=True)
    pair = pick_pair(analysis.speedups, records, timeline_traces(store), timeline_config, study.subject.variant)
    choices = [(s.sweep_id, c) for s in store.sweeps() for c in s.choices]
    paths = render(study, analysis, records, out_dir, store.root, program_models, choices, pair,
                   speed_points=speed_points, today=today)
    counts: dict[str, int] = {}
    for verdict in analysis.overall.values():
        counts[verdict] = counts.get(verdict, 0) + 1
    print(f"study: {len(analysis.runs)} run(s) analysed; claims: "
          + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), file=console, flush=True)
    for badge in analysis.badges:
        print(f"study: badge {badge.name}: {badge.status}", file=console, flush=True)
    print(f"study: timelines: {pair[1]}", file=console, flush=True)
    print(f"study: report {paths['html']}, {paths['markdown']} and {paths['json']} ({paths['seconds']:.1f} s)",
          file=console, flush=True)
    return paths
