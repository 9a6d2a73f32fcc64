"""`ck report study:NAME`: plots (matplotlib), a Markdown report and a self-contained HTML report (jinja2).

Written into ``<store>/report/`` (or ``--out_dir``): ``report.md``,
``report.html`` (CSS inline, plots embedded as PNG data URIs, so the file
alone is the report) and ``plots/<model>.png`` / ``.svg``.
"""
from __future__ import annotations

import base64
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import jinja2

from reprokit.study.claims import NATIVE, Study, rate_bps
from reprokit.study.analysis import Analysis, analyse, setup_label
from reprokit.study.store import Record, Store

TEMPLATES = Path(__file__).resolve().parent / "templates"
VARIANT_STYLE = {"baseline": ("tab:blue", "o"), "p3": ("tab:orange", "s"), "p3-slicing-only": ("tab:green", "^")}


@dataclass(frozen=True)
class Plot:
    model: str
    png: Path
    svg: Path
    png_base64: str


def _bandwidth_order(values) -> list[str]:
    return sorted(set(values), key=lambda b: (-1.0 if b == NATIVE else rate_bps(b)))


def _num(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def plot_model(study: Study, analysis: Analysis, model: str, folder: Path) -> Plot:
    """Throughput (left) and speedup (right) against bandwidth, per setup and variant, with intervals;
    the paper's claims marked as stars (claimed speedups; on the left, the measured baseline times the claim)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = analysis.summary[analysis.summary["model"] == model]
    speedups = analysis.speedups[analysis.speedups["model"] == model]
    claims = [c for c in study.claims if c.model == model]
    categories = _bandwidth_order(list(summary["bandwidth"]) + [c.bandwidth for c in claims if c.bandwidth])
    x_of = {b: i for i, b in enumerate(categories)}
    setups = list(dict.fromkeys(summary["setup"]))
    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / max(1, len(setups) * 3)

    def points(ax, frame, column: str, s_index: int, setup: str, label: str) -> None:
        """One marker per variant and bandwidth with its 95% interval, offset per setup and variant."""
        for v_index, (variant, group) in enumerate(frame.groupby("variant", sort=True)):
            color, marker = VARIANT_STYLE.get(variant, ("tab:gray", "D"))
            offset = (s_index * 3 + v_index - (len(setups) * 3 - 1) / 2) * width
            xs = [x_of[b] + offset for b in group["bandwidth"]]
            values = group[column].tolist()
            err = [[v - lo if _num(lo) is not None else 0 for v, lo in zip(values, group["ci_low"])],
                   [hi - v if _num(hi) is not None else 0 for v, hi in zip(values, group["ci_high"])]]
            ax.errorbar(xs, values, yerr=err, fmt=marker, color=color, capsize=3,
                        alpha=1.0 if s_index == 0 else 0.55, label=label.format(variant=variant, setup=setup))

    for s_index, setup in enumerate(setups):
        points(ax_t, summary[summary["setup"] == setup], "mean", s_index, setup, "{variant} ({setup})")
        points(ax_s, speedups[(speedups["setup"] == setup) & (speedups["versus"] == "baseline")], "speedup",
               s_index, setup, "{variant}/baseline ({setup})")
    for claim in claims:
        if claim.bandwidth:
            x = x_of[claim.bandwidth]
            ax_s.plot([x], [claim.speedup], marker="*", markersize=15, color="crimson", linestyle="none",
                      label=f"claim {claim.id} ({claim.source})")
            base = summary[(summary["bandwidth"] == claim.bandwidth) & (summary["variant"] == claim.versus)]
            if not base.empty and _num(base["mean"].iloc[0]) is not None:
                ax_t.plot([x], [base["mean"].iloc[0] * claim.speedup], marker="*", markersize=15, color="crimson",
                          linestyle="none", label=f"claimed {claim.variant} ({claim.id})")
        else:
            ax_s.axhline(claim.speedup, color="crimson", linestyle="--", linewidth=1,
                         label=f"claim {claim.id}: up to {claim.speedup:.2f}x ({claim.source})")
    ax_s.axhline(1.0, color="black", linewidth=0.6)
    for ax, ylabel in ((ax_t, "throughput (samples/s)"), (ax_s, "speedup over baseline")):
        ax.set_xticks(range(len(categories)), categories)
        ax.set_xlim(-0.6, len(categories) - 0.4)
        ax.set_xlabel("bandwidth per host")
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    ax_t.set_title(f"{model}: throughput, mean and {study.tolerance.confidence:.0%} interval")
    ax_s.set_title(f"{model}: speedup and the paper's claims")
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    png, svg = folder / f"{model}.png", folder / f"{model}.svg"
    fig.savefig(png, dpi=100)
    fig.savefig(svg)
    plt.close(fig)
    return Plot(model, png, svg, base64.b64encode(png.read_bytes()).decode("ascii"))


def _f(x, digits: int = 2) -> str:
    x = _num(x)
    return "n/a" if x is None else f"{x:.{digits}f}"


def _environments(records: list[Record]) -> list[dict]:
    """One row per setup: what every run of that setup ran on (distinct values joined)."""
    by_setup: dict[str, list[Record]] = {}
    for r in records:
        by_setup.setdefault(setup_label(r), []).append(r)
    rows = []
    for setup, group in sorted(by_setup.items()):
        def values(key: str) -> str:
            seen = dict.fromkeys(str(r.provenance[key]) for r in group if r.provenance.get(key) is not None)
            return ", ".join(seen) or "n/a"

        target = group[0].config.target
        rows.append({"setup": setup, "kind": target.kind, "hosts": ", ".join(target.hosts),
                     "repo_revision": values("repo_revision"), "ck": values("ck_version"),
                     "python": values("python_version"), "engine": values("engine"),
                     "engine_python": values("engine_python_version"), "mxnet": values("mxnet_version"),
                     "controller": values("controller_host"), "runs": len(group),
                     "origin": group[0].origin.id, "imported": bool(group[0].imported_from)})
    return rows


def render(study: Study, analysis: Analysis, records: list[Record], out_dir: Path, store_root: Path,
           program_models: set[str]) -> dict[str, Path]:
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    models = [m for m in dict.fromkeys(analysis.summary["model"])]
    plots = [plot_model(study, analysis, m, out_dir / "plots") for m in models]
    failed = analysis.runs[~analysis.runs["ok"]] if not analysis.runs.empty else analysis.runs
    context = {
        "study": study, "generated": time.strftime("%Y-%m-%d %H:%M:%S %z"), "store": str(store_root),
        "summary": analysis.summary.to_dict("records"), "speedups": analysis.speedups.to_dict("records"),
        "verdicts": [v.to_dict() for v in analysis.verdicts], "overall": analysis.overall,
        "badges": [b.to_dict() for b in analysis.badges], "plots": plots,
        "environments": _environments(records), "failed": failed.to_dict("records"),
        "claims": study.claims, "program_models": sorted(program_models),
        "missing_models": [m for m in study.matrix.models if m not in program_models],
        "setups": analysis.setups, "f": _f,
        "num_runs": len(analysis.runs), "num_ok": int(analysis.runs["ok"].sum()) if len(analysis.runs) else 0,
    }
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
    md, html = out_dir / "report.md", out_dir / "report.html"
    for template, path in (("report.md.j2", md), ("report.html.j2", html)):
        text = env.get_template(template).render(**context)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    elapsed = time.monotonic() - started
    return {"markdown": md, "html": html, "plots": out_dir / "plots", "seconds": elapsed}


def write_report(study: Study, store: Store, program_models: set[str], out_dir: Path,
                 console: TextIO = sys.stdout) -> dict[str, Path]:
    """`ck report study:NAME`: analyse every stored and imported run, render the reports, say what they hold."""
    records = store.all_records()
    analysis = analyse(study, records, program_models)
    paths = render(study, analysis, records, out_dir, store.root, program_models)
    counts: dict[str, int] = {}
    for verdict in analysis.overall.values():
        counts[verdict] = counts.get(verdict, 0) + 1
    print(f"study: {len(analysis.runs)} run(s) analysed; claims: "
          + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), file=console, flush=True)
    for badge in analysis.badges:
        print(f"study: badge {badge.name}: {badge.status}", file=console, flush=True)
    print(f"study: report {paths['html']} and {paths['markdown']} ({paths['seconds']:.1f} s)", file=console, flush=True)
    return paths
