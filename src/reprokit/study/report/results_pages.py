"""docs/results: the pages of measured figures, generated from the records they cite, never written by hand.

A store's records are too large for the repository (run folders, logs, timelines), so what the pages cite is kept
as one small summary per store in docs/results/data/NAME.json: each run's figures and provenance (record id, the
framework's revision, when it ran, its host CPU), each configuration's speedup with its interval and n, and the
claims' verdicts in brief. Two commands:

    ck report study:sysml19-p3 --store=STORE --docs=NAME   # summarise STORE into data/NAME.json, then regenerate
    python -m reprokit.study.report.results_pages                 # regenerate every page from the summaries

A unit test regenerates the pages and fails on any difference, so no figure in them can drift from its record.
"""
from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import jinja2

from reprokit.core.errors import UserError
from reprokit.core.outputs import output_folder, replace_file
from reprokit.core.paths import REPO_ROOT
from reprokit.study.analysis.analyse import analyse
from reprokit.study.analysis.answer import answer
from reprokit.study.analysis.judged import labelled_verdicts
from reprokit.study.paper.claims import Study
from reprokit.study.report import claims_page, head_to_head
from reprokit.study.store.records import Record
from reprokit.study.sweep.forecast import hindcast

SUMMARY_FORMAT = "reprokit-results-summary/2"
RESULTS_DIR = REPO_ROOT / "docs" / "results"
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
TEMPLATES = Path(__file__).with_name("templates")


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise UserError(f"--docs={name[:80]!r} is not a results page name; use lower-case letters, digits and '-', "
                        f"e.g. --docs=p4000-emulated")
    return name


def _number(x: Any, digits: int = 2) -> float | None:
    try:
        value = float(x)
    except (TypeError, ValueError):
        return None
    return round(value, digits) if math.isfinite(value) else None


def run_summary(record: Record, forecast: tuple[float, str] | None = None) -> dict[str, Any]:
    """One run's figures and provenance, as a page cites them; ``forecast``: its hindcast (seconds, from what)."""
    result, provenance = record.run_result, record.provenance
    workers = total = cpu = None
    if result is not None:
        workers = result.num_workers or len(result.throughput_per_worker or []) or None
        total = (result.throughput_samples_per_sec if result.throughput_dedilated_samples_per_sec is None
                 else result.throughput_dedilated_samples_per_sec)
        cpu = result.host_cpu_busy
    return {
        "record": record.record_id, "model": record.config.model, "variant": record.config.variant,
        "bandwidth": record.config.bandwidth, "engine": record.config.engine, "gpu": record.gpu,
        "dilation": record.dilation, "ok": record.ok, "failure": record.failure_reason,
        "samples_per_sec": _number(total),
        "images_per_sec_per_worker": _number(float(total) / workers) if total is not None and workers else None,
        "host_cpu_busy": _number(cpu), "cpu_bound": bool(result is not None and result.cpu_bound),
        "wall_s": _number(provenance.duration_s, 1),
        "forecast_s": _number(forecast[0], 1) if forecast else None, "forecast_from": forecast[1] if forecast else "",
        "started_at": (provenance.started_at or "").split(" (")[0],
        "revision": (provenance.repo_revision or "")[:12] + (" (dirty)" if provenance.repo_dirty else ""),
        "setup": record.config.target.get("label", "") if isinstance(record.config.target, dict) else "",
        # the testbed, so that pages comparing runs across stores pool only runs of one setting (head_to_head.py)
        "hosts": len(record.config.target.hosts), "links": record.config.target.link_sharing,
        "tcp": record.config.target.tcp,
    }


def _rows(frame: Any) -> list[dict[str, Any]]:
    keep = ("setup", "model", "bandwidth", "engine", "gpu", "dilation", "variant", "versus", "n_variant", "n_versus",
            "speedup", "ci_low", "ci_high", "comm_to_compute")
    out = []
    for row in ([] if frame is None or frame.empty else frame.to_dict("records")):
        out.append({k: (_number(row[k]) if isinstance(row.get(k), float) else row.get(k)) for k in keep if k in row})
    return out


def summarise(study: Study, records: Sequence[Record], program_models: set[str], name: str,
              title: str) -> dict[str, Any]:
    """The summary of a store that a results page is generated from."""
    analysis = analyse(study, records, program_models)
    labelled = labelled_verdicts(study.claims, analysis.overall, study.name, tolerance=study.tolerance,
                                 verdicts=analysis.verdicts, emulated=analysis.emulated_speedups,
                                 emulated_runs=analysis.emulated_runs, gpu_name=study.gpu)
    the_answer = answer(study, analysis.verdicts, analysis.overall, analysis.decided, labelled)
    forecasts = hindcast(records, (study.matrix, study.quick))
    return {"format": SUMMARY_FORMAT, "name": name, "title": title, "study": study.name,
            "runs": sorted((run_summary(r, forecasts.get(r.record_id)) for r in records),
                           key=lambda r: (r["started_at"], r["record"])),
            "speedups": _rows(analysis.speedups) + _rows(analysis.emulated_speedups),
            "answer": the_answer.to_dict()}


def wall_times(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration (model, bandwidth, compute, k): how many runs, and their wall minutes in all and each;
    then the runs the forecast had an estimate for (forecast.hindcast): its minutes for them, their recorded
    minutes, and recorded over forecast (None without any)."""
    groups: dict[tuple[str, str, str, float], list[dict[str, Any]]] = {}
    for r in runs:
        if r["wall_s"] is not None:
            groups.setdefault((r["model"], r["bandwidth"], r["gpu"] or "real", r["dilation"]), []).append(r)
    rows = []
    for (m, b, g, k), group in sorted(groups.items(), key=lambda kv: str(kv[0])):
        wall = [r["wall_s"] for r in group]
        forecast = [r for r in group if r.get("forecast_s")]
        expected, took = sum(r["forecast_s"] for r in forecast) / 60, sum(r["wall_s"] for r in forecast) / 60
        rows.append({"model": m, "bandwidth": b, "compute": g, "dilation": k, "runs": len(wall),
                     "minutes": round(sum(wall) / 60, 1), "minutes_per_run": round(sum(wall) / 60 / len(wall), 1),
                     "forecast_runs": len(forecast), "forecast_minutes": round(expected, 1) if forecast else None,
                     "recorded_minutes": round(took, 1) if forecast else None,
                     "recorded_over_forecast": round(took / expected, 2) if forecast else None})
    return rows


def read_summaries(data_dir: Path) -> list[dict[str, Any]]:
    summaries = []
    for path in sorted(data_dir.glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("format") != SUMMARY_FORMAT:
            raise UserError(f"{path} is not a results summary ({SUMMARY_FORMAT}); remove it or write it again with "
                            f"ck report study:NAME --store=STORE --docs={path.stem}")
        summaries.append(data)
    return summaries


def render_pages(summaries: Iterable[dict[str, Any]], out_dir: Path,
                 predicted: dict[str, Any] | None = None) -> list[Path]:
    """Write one page per summary, the head-to-head page across them (head_to_head.py; ``predicted``: its grid,
    the committed one by default), the page of every study entry's claims with their verdicts (claims_page.py) and
    the index; returns the files written."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    page, index = env.get_template("results_page.md.j2"), env.get_template("results_index.md.j2")
    written = []
    listed = list(summaries)
    for summary in listed:
        path = out_dir / f"{summary['name']}.md"
        replace_file(path, page.render(s=summary, fmt=_fmt, times=wall_times(summary["runs"])))
        written.append(path)
    measured = head_to_head.measured_rows(listed)  # the head-to-head page's rows, once for its page and the index
    written += head_to_head.write_page(listed, measured, out_dir, predicted)
    written += claims_page.write_page(listed, out_dir)
    head = {"name": head_to_head.NAME, "title": head_to_head.TITLE, "studies": head_to_head.STUDIES,
            "runs": head_to_head.measured_runs(measured)}
    claims = {"name": claims_page.NAME, "title": claims_page.TITLE,
              "studies": ", ".join(s.name for s in claims_page.study_entries()),
              "runs": sum(len(s.get("runs", [])) for s in listed)}
    replace_file(out_dir / "README.md", index.render(summaries=listed, head=head, claims=claims))
    return [*written, out_dir / "README.md"]


def _fmt(x: Any, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def write_summary(summary: dict[str, Any], results_dir: Path = RESULTS_DIR) -> list[Path]:
    """Keep ``summary`` beside the others and regenerate every page."""
    data_dir = results_dir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    replace_file(data_dir / f"{summary['name']}.json", json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return render_pages(read_summaries(data_dir), results_dir)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = output_folder(args[0], "the pages' folder") if args else RESULTS_DIR
    written = render_pages(read_summaries(RESULTS_DIR / "data"), out)
    print(f"results: wrote {len(written)} page(s) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
