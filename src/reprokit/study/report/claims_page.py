"""docs/results/claims.md: every claim of every study entry, with where it holds and where it does not.

One table per study entry (study/NAME, read by claims.repository_study), one row per claim: what the paper claims
(its kind's ``paper_figure``), then the verdicts the results summaries (docs/results/data/*.json, as results_pages
reads them) hold for it, each labelled with how it was reached (measured; emulated at the paper's GPU; predicted at
it) and linked to its page, then the verdicts in plain words. An emulated or predicted verdict is never shown as
measured: each has its own column and says its label in the cell. The verdicts are the answer rows' own fields
(``verdict``, ``emulated_verdict``, ``predicted_verdict``, ``emulated_engines``: answer.AnswerRow), never read from
the cells' words; the words are shown as they are.

A summary's answer rows are the claims of the entry as it was when the summary was written. A claim id that a
summary holds and the entry no longer does (the ByteScheduler entry renamed ``vgg-…`` to ``vgg16-…``) is kept as a
row of its own, marked as from an earlier version of the entry, below the current claims; a current claim that no
summary holds reads "not yet run". A summary of a study that is no entry now gives a table of such rows.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprokit.core.outputs import replace_file
from reprokit.core.paths import REPO_ROOT
from reprokit.emulation.gpus import paper_gpu
from reprokit.study.analysis.verdict import Verdict
from reprokit.study.paper.claims import Study, kind_of, repository_study
from reprokit.study.report import head_to_head

NAME = "claims"
TITLE = "Where each paper's claim holds: every claim of every study entry, with its verdicts"
NOT_YET_RUN = "not yet run"
EARLIER = "from an earlier version of the entry"
MAX_WORDS = 40  # a table cell's most words (tests/unit/test_claims_page.py checks the committed page)
JUDGED = (Verdict.REPLICATED, Verdict.NOT_REPLICATED, Verdict.INCONCLUSIVE)
_AT = re.compile(r"\bat (\d+(?:\.\d+)?[kmg]bit)\b")
_OVER = re.compile(r"^over (\d+) configuration\(s\)")  # a claim about every configuration (kinds.OverConfigurations)
KINDS = ("measured", "emulated", "predicted")  # the answer row's cells, in the page's column order
PAPER_GPU, DEFAULT_GPU = "the paper's GPU", "the paper's GPU is not known: the default"
ENGINES = {"stock MXNet 1.9.1": "stock MXNet", "the authors' build": "the authors' build"}


def study_entries(root: Path = REPO_ROOT / "study") -> list[Study]:
    """Every study entry the repository holds (study/NAME/.cm/meta.json): the head-to-head page's in its order (the
    papers' order), then any other by name."""
    order = head_to_head.STUDIES.split(", ")
    names = sorted((p.name for p in root.iterdir() if (p / ".cm" / "meta.json").is_file()),
                   key=lambda n: (order.index(n) if n in order else len(order), n))
    return [repository_study(n) for n in names]


def verdict_of(value: Any) -> str:
    """A verdict field's value when it is a verdict that judges (replicated, not replicated, inconclusive), else ""."""
    return str(value) if str(value) in JUDGED else ""


def stated(row: Mapping[str, Any], kind: str) -> tuple[tuple[str, str], ...]:
    """The verdicts an answer row holds for one of its cells (KINDS), as (engine, verdict) pairs: the engine's name
    when the cell is of runs on several engines (``emulated_engines``), else "" with the cell's one verdict field
    (``verdict`` for the measured cell, ``emulated_verdict``, ``predicted_verdict``); "" where none is given."""
    if kind == "measured":
        return (("", verdict_of(row.get("verdict"))),)
    engines = tuple((str(engine), verdict_of(v)) for engine, v in row.get(f"{kind}_engines") or ())
    return engines or (("", verdict_of(row.get(f"{kind}_verdict"))),)


def judged_gpu(summary: Mapping[str, Any], studies: Mapping[str, Study]) -> str:
    """The GPU a summary's emulated and predicted verdicts are at: as its answer says it ("at the paper's GPU (V100
    compute)"), else its study entry's paper GPU now."""
    said = re.search(r"paper's GPU \((\S+) compute\)", str(summary.get("answer", {}).get("summary", "")))
    if said:
        return said.group(1)
    study = studies.get(str(summary.get("study")))
    return paper_gpu(study.gpu).label if study else "paper's GPU"


@dataclass(frozen=True)
class Cell:
    """One summary's verdict on one claim, of one kind (measured, emulated or predicted)."""
    kind: str
    gpu: str  # the GPU its emulated or predicted figure is at ("" for measured)
    summary: str  # the summary's name: its page is NAME.md
    text: str  # the answer row's cell as the summary holds it
    verdicts: tuple[tuple[str, str], ...]  # its verdicts as the answer row's fields hold them (stated)

    @property
    def label(self) -> str:
        return "measured" if self.kind == "measured" else f"{self.kind} at the {self.gpu}"

    @property
    def judged(self) -> list[str]:
        """The cell's verdicts, in order, each once."""
        return list(dict.fromkeys(v for _, v in self.verdicts if v))


def cells_of(row: Mapping[str, Any], summary: str, gpu: str) -> list[Cell]:
    """The verdicts of one answer row: its measured verdict (with its figure), its emulated and predicted cells;
    only those whose fields give a verdict (a cell of runs "not run" or "not given" has none)."""
    out = []
    for kind in KINDS:
        verdicts = stated(row, kind)
        if any(v for _, v in verdicts):
            text = f"{row.get('measured')}: {row.get('verdict')}" if kind == "measured" else str(row.get(kind, ""))
            out.append(Cell(kind, "" if kind == "measured" else gpu, summary, text, verdicts))
    return out


@dataclass(frozen=True)
class ClaimRow:
    claim: str
    paper: str  # what the paper claims, in brief
    current: bool  # a claim of the entry now (else: only in summaries of an earlier version)
    held_by: tuple[str, ...]  # the summaries that hold the claim id
    cells: tuple[Cell, ...]
    undecided: tuple[str, ...]  # the summaries' reasons for no verdict ("not run", "not given (n < 3)", ...)


def _link(name: str) -> str:
    return f"[{name}]({name}.md)"


def _words(text: str) -> int:
    return len(re.sub(r"\]\([^)]*\)", "]", text).split())


def kind_cell(row: ClaimRow, kind: str) -> str:
    """The row's verdicts of one kind: each with its label and the pages that hold it; the same verdict in several
    summaries (a prediction does not depend on the runs) once, with every page. Shortened to the verdicts alone
    when the figures would not fit in MAX_WORDS."""
    mine = [c for c in row.cells if c.kind == kind]
    if not mine:
        return "-"
    grouped: dict[tuple[str, str], list[Cell]] = {}
    for c in mine:
        grouped.setdefault((c.label, c.text), []).append(c)
    full = "; ".join(f"{label} ({', '.join(_link(c.summary) for c in same)}): {text}"
                     for (label, text), same in grouped.items())
    if _words(full) <= MAX_WORDS:
        return full
    return "; ".join(f"{label} ({', '.join(_link(c.summary) for c in same)}): {', '.join(same[0].judged)}"
                     for (label, _), same in grouped.items())


def _parts(c: Cell) -> list[tuple[str, str, str]]:
    """A cell's verdicts by engine: (the engine in brief, or "" when one verdict stands for the whole cell; the part
    of the cell's text about it, where its bandwidth is read; its verdict, or "" when it has none)."""
    if len(c.verdicts) == 1:
        return [("", c.text, c.verdicts[0][1])]
    parts = c.text.split("; ")
    texts = parts if len(parts) == len(c.verdicts) else [c.text] * len(c.verdicts)
    return [(ENGINES.get(engine, engine), text, v) for (engine, v), text in zip(c.verdicts, texts)]


def where_it_holds(row: ClaimRow, claim_bandwidth: str | None = None) -> str:
    """The verdicts in plain words: where the claim holds, where it does not, where it is undecided (each: how the
    verdict was reached, the bandwidth, the engine when the cell names one), and whether anything was measured;
    "not yet run" when no summary holds the claim."""
    if not row.held_by:
        return NOT_YET_RUN
    if not row.cells:
        return f"no verdict yet ({'; '.join(row.undecided) or 'none given'})"
    said = {"replicated": "Holds", "not replicated": "Does not hold", "inconclusive": "Undecided"}
    found: dict[str, dict[str, list[str]]] = {v: {} for v in said}
    for c in row.cells:
        for engine, text, v in _parts(c):
            if not v:
                continue
            at, over = _AT.search(text), _OVER.match(text)
            bandwidth = at.group(1) if at else claim_bandwidth
            where = c.label + (f" over {over.group(1)} configuration(s)" if over
                               else f" at {bandwidth}" if bandwidth else "")
            engines = found[v].setdefault(where, [])
            if engine and engine not in engines:
                engines.append(engine)
    text = " ".join(f"{said[v]}: " + ", and ".join(w + (f" ({' and '.join(e)})" if e else "")
                                                    for w, e in places.items()) + "."
                    for v, places in found.items() if places)
    if not any(c.kind == "measured" for c in row.cells):
        text += " Not measured."
    return text


def claim_rows(study: Study | None, name: str, summaries: Sequence[Mapping[str, Any]],
               gpus: Mapping[str, str]) -> list[ClaimRow]:
    """The study's claims, then the claim ids its summaries hold that the entry does not (``study`` None: no entry
    now, every id is of an earlier version). ``gpus``: each summary's judged GPU."""
    mine = [s for s in summaries if s.get("study") == name]
    current = {c.id: kind_of(c).paper_figure(c) for c in (study.claims if study else ())}
    order = list(current) + [str(r["claim"]) for s in mine for r in s["answer"]["rows"] if r["claim"] not in current]
    rows = []
    for claim in dict.fromkeys(order):
        held = [(str(s["name"]), r) for s in mine for r in s["answer"]["rows"] if r["claim"] == claim]
        cells = tuple(c for s, r in held for c in cells_of(r, s, gpus[s]))
        undecided = tuple(dict.fromkeys(str(r.get(field)) for _, r in held
                                        for kind, field in (("measured", "verdict"), ("emulated", "emulated"))
                                        if r.get(field) and r.get(field) != "not measured"
                                        and not any(v for _, v in stated(r, kind))))
        paper = current.get(claim) or next((str(r.get("paper", "")) for _, r in held), "")
        rows.append(ClaimRow(claim, paper, claim in current, tuple(dict.fromkeys(s for s, _ in held)), cells,
                             undecided))
    return rows


def _bandwidth(study: Study | None, claim: str) -> str | None:
    found = next((c for c in (study.claims if study else ()) if c.id == claim), None)
    return found.bandwidth if found else None


def runs_in_brief(summary: Mapping[str, Any]) -> str:
    """A summary's runs in a few words: how many, at what compute, on how many hosts."""
    runs = summary.get("runs", [])
    gpus = sorted({head_to_head.Setting.gpu_label(r["gpu"]) for r in runs if r.get("gpu")})
    hosts = sorted({head_to_head.setting_of(r).hosts for r in runs} - {"?"}, key=int)
    compute = f"{' and '.join(gpus)} compute emulated" if gpus else "CPU compute, no GPU emulated"
    return f"{_link(str(summary['name']))}: {len(runs)} runs, {compute}" + (
        f", {' and '.join(hosts)} host{'' if hosts == ['1'] else 's'}" if hosts else "")


def table(rows: Sequence[ClaimRow], study: Study | None) -> list[str]:
    lines = ["| claim | the paper claims | measured | emulated | predicted | where it holds |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        claim = f"`{r.claim}`" if r.current else (f"`{r.claim}` ({EARLIER}: {', '.join(map(_link, r.held_by))}; "
                                                  f"not a claim of it now)")
        lines.append(f"| {claim} | {r.paper} | " + " | ".join(kind_cell(r, k) for k in KINDS)
                     + f" | {where_it_holds(r, _bandwidth(study, r.claim))} |")
    return lines


def study_section(study: Study | None, name: str, summaries: Sequence[Mapping[str, Any]],
                  gpus: Mapping[str, str]) -> list[str]:
    mine = [s for s in summaries if s.get("study") == name]
    if study is not None:
        paper = study.paper
        gpu = paper_gpu(study.gpu)
        about = (f"*{paper.get('title', name)}*, {paper.get('venue', 'venue not given')}: {len(study.claims)} "
                 f"claims, tested here with {study.subject.name} over its baseline and judged at the "
                 f"{gpu.label}'s compute ({PAPER_GPU if study.gpu else DEFAULT_GPU}).")
    else:
        about = f"`{name}` is no study entry now; its summaries' claims are shown as they hold them."
    ran = ("Its runs: " + "; ".join(runs_in_brief(s) for s in mine) + "." if mine
           else "No summary of its runs is kept yet (`ck report study:" + name + " --store=STORE --docs=NAME`).")
    earlier = sum(1 for r in claim_rows(study, name, summaries, gpus) if not r.current)
    note = ([f"{earlier} claim id(s) below are only in summaries written {EARLIER}: shown as those summaries hold "
             f"them, not matched to the entry's claims now."] if earlier else [])
    return [f"## {name}", "", about, ran, *note, "", *table(claim_rows(study, name, summaries, gpus), study), ""]


def page(summaries: Sequence[Mapping[str, Any]], studies: Sequence[Study]) -> str:
    by_name = {s.name: s for s in studies}
    gpus = {str(s["name"]): judged_gpu(s, by_name) for s in summaries}
    names = list(by_name) + sorted({str(s["study"]) for s in summaries} - set(by_name))
    out = [f"# {TITLE}", "",
           "Generated by `python -m reprokit.study.report.results_pages` (`src/reprokit/study/report/claims_page.py`) "
           "from the study entries and the summaries in `data/`; do not edit by hand.", "",
           "Each verdict is labelled with how it was reached and links the page it is from: **measured** (real GPUs, "
           "or a testbed whose links are shaped; the only verdict that counts towards a badge), **emulated at the "
           "GPU** (the GPU's compute replaced by waits on the real MXNet and network), **predicted at the GPU** (the "
           "iteration model). A verdict the same in several summaries is given once with every page. A study's runs at "
           "another GPU than the one it is judged at give no verdict (their pages and the head-to-head page show "
           "their speedups). \"Where it holds\" says the verdicts in words; \"not yet run\": no summary holds the "
           "claim.", ""]
    for name in names:
        out += study_section(by_name.get(name), name, summaries, gpus)
    return "\n".join(out).rstrip("\n") + "\n"


def write_page(summaries: Sequence[Mapping[str, Any]], out_dir: Path,
               studies: Sequence[Study] | None = None) -> list[Path]:
    """claims.md into out_dir, for ``studies`` (the repository's entries by default); the paths written."""
    path = out_dir / f"{NAME}.md"
    replace_file(path, page(summaries, study_entries() if studies is None else studies))
    return [path]
