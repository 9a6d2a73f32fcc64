"""docs/results/head-to-head.md (report/head_to_head.py): rows of one setting only, predicted figures labelled so,
the perfect-overlap bound, and a predicted grid of this model. (That the committed page is what the summaries
generate: test_results_pages.)"""
import math
from dataclasses import replace

import pytest

from reprokit.study.report import head_to_head as h2h
from reprokit.study.report.results_pages import summarise
from reprokit.study.whatif.shipped_predictions import model_version
from support.study_data import ALL_MODELS, TESTBED4, records, study

pytestmark = pytest.mark.parallel


def run(variant, samples, links="fair", tcp="cubic", hosts=4, model="resnet", bandwidth="4gbit", gpu="p4000"):
    return {"record": f"r-{variant}-{samples}-{links}-{tcp}", "model": model, "variant": variant,
            "bandwidth": bandwidth, "engine": "embedded", "gpu": gpu, "dilation": 20.0, "ok": True,
            "samples_per_sec": samples, "hosts": hosts, "links": links, "tcp": tcp}


def summary(name, runs, title="t", speedups=()):
    return {"name": name, "title": title, "study": "sysml19-p3", "runs": runs, "speedups": list(speedups)}


def test_the_bound_is_one_plus_r_over_the_longer_of_the_two():
    assert h2h.overlap_bound(0.0) == 1.0  # nothing to hide
    assert h2h.overlap_bound(0.5) == pytest.approx(1.5)  # communication the shorter: 1 + r
    assert h2h.overlap_bound(1.0) == pytest.approx(2.0)  # the most there is
    assert h2h.overlap_bound(3.0) == pytest.approx(4 / 3)  # communication the longer: (1 + r) / r
    assert math.isnan(h2h.overlap_bound(-1.0)) and math.isnan(h2h.overlap_bound(math.nan))
    # a predicted cell: compute 1 s, busiest link 3 s, the model's baseline 3.5 s
    cell = h2h.PredictedCell("p4000", "vgg", 4, "1gbit", 1.0, 3.0, 3.0, {"baseline": 3.5, "p3": 3.2,
                                                                          "bytescheduler": 4.0})
    assert (cell.bound, cell.ceiling, cell.compute_to_comm) == pytest.approx((4 / 3, 3.5 / 3.0, 1 / 3))
    # a measured row takes the baseline's ratio from its summary's speedup row and shows the bound for it
    rows = h2h.measured_rows([summary("s", [run("baseline", x) for x in (10.0, 10.2, 9.8)]
                                      + [run("p3", x) for x in (12.0, 12.1, 11.9)],
                                      speedups=[{"model": "resnet", "bandwidth": "4gbit", "engine": "embedded",
                                                 "gpu": "p4000", "dilation": 20.0, "variant": "p3",
                                                 "versus": "baseline", "comm_to_compute": 0.25}])])
    assert [r.bound for r in rows] == [pytest.approx(1.25)]
    assert "| 0.25 | 1.25x |" in "\n".join(h2h.measured_table(rows))


def test_runs_of_two_settings_never_share_a_row():
    fair = [run("baseline", x) for x in (10.0, 10.1)] + [run("p3", x) for x in (20.0, 20.2)]
    fifo = [run("baseline", x, links="fifo") for x in (5.0, 5.1)] + [run("p3", x, links="fifo") for x in (6.0, 6.1)]
    other_tcp = [run("baseline", 7.0, tcp="bbr"), run("bytescheduler", 3.5, tcp="bbr")]
    rows = h2h.measured_rows([summary("one", fair + fifo + other_tcp)])
    assert len(rows) == 3
    by_links = {(r.setting.links, r.setting.tcp, r.variant): r for r in rows}
    fair_row, fifo_row = by_links["fair", "cubic", "p3"], by_links["fifo", "cubic", "p3"]
    assert (fair_row.baseline.n, fair_row.measured.n, fifo_row.baseline.n, fifo_row.measured.n) == (2, 2, 2, 2)
    assert fair_row.speedup[0] == pytest.approx(2.0, rel=0.01) and fifo_row.speedup[0] == pytest.approx(1.2, rel=0.01)
    assert by_links["fair", "bbr", "bytescheduler"].speedup[0] == pytest.approx(0.5)
    assert "fifo links" in fifo_row.setting.label() and "TCP bbr" in by_links["fair", "bbr", "bytescheduler"].setting.label()
    # the same setting in two summaries: two rows, each variant against the baseline of its own summary
    rows = h2h.measured_rows([summary("a", fair), summary("b", [run("baseline", 20.0), run("bytescheduler", 10.0)])])
    assert sorted((r.summary, r.variant, round(r.speedup[0], 2)) for r in rows) == [("a", "p3", 2.0),
                                                                                   ("b", "bytescheduler", 0.5)]


def test_a_run_whose_summary_keeps_no_testbed_is_shown_as_unknown_apart_and_no_unemulated_run_counts():
    legacy = [{k: v for k, v in r.items() if k not in ("hosts", "links", "tcp")}
              for r in [run("baseline", 10.0), run("p3", 11.0)]]
    kept = [run("baseline", 20.0), run("p3", 22.0)]
    native = [run("baseline", 1.0, gpu=""), run("p3", 2.0, gpu="")]
    rows = h2h.measured_rows([summary("a", legacy + kept + native, title="X (4 hosts, fair links, TCP cubic)")])
    assert sorted((r.setting.hosts, r.setting.links, r.setting.tcp, r.baseline.n) for r in rows) == [
        ("4", "fair", "cubic", 1), ("?", "?", "?", 1)]  # the title is never read for a setting


def grid():
    cells = [{"gpu": g, "model": "resnet", "hosts": 4, "bandwidth": b, "compute_s": 0.4, "comm_s": c,
              "bound_s": max(0.4, c), "baseline_s": 0.4 + c, "p3_s": max(0.4, c) * 1.05,
              "bytescheduler_s": 0.5 + c}
             for g in ("p4000", "v100") for b, c in (("1gbit", 1.2), ("10gbit", 0.12))]
    return {"format": h2h.PREDICTED_FORMAT, "model_version": "test", "batch": 32, "cells": cells}


def test_every_predicted_figure_is_labelled_predicted_and_an_unvalidated_policy_says_so(tmp_path, monkeypatch):
    text = h2h.page([], [], grid())
    predicted = text[text.index("## Predicted"):]
    assert "PREDICTED by the iteration model" in predicted
    tables = [line for line in predicted.splitlines() if line.startswith("| hosts |")]
    assert len(tables) == 2  # one per GPU and model
    for header in tables:  # every column with a figure says it is predicted
        assert all(c.strip().startswith("predicted") for c in header.strip("|").split("|")[2:]), header
    # the stored record decides; each way is checked below with a record of its own
    missed = h2h.unvalidated()
    assert all(("predicted ByteScheduler speedup (policy not validated)" in t) == bool(missed["bytescheduler"])
               for t in tables)
    # a cell: speedups over the baseline (1.6 s), the ceiling and the bound (compute 0.4 s, link 1.2 s: r = 3)
    assert "| 4 | 1gbit | 0.33 | 1.27x | 0.94x | 1.33x | 1.33x |" in predicted
    written = h2h.write_page([], [], tmp_path, grid())
    assert [p.name for p in written] == ["head-to-head.md", "head-to-head.png"]
    assert written[1].read_bytes().startswith(b"\x89PNG")
    for bytescheduler_missed in ([], ["a check of ByteScheduler"]):
        monkeypatch.setattr(h2h, "unvalidated", lambda m=bytescheduler_missed: {"p3": [], "bytescheduler": m})
        predicted = h2h.page([], [], grid())
        predicted = predicted[predicted.index("## Predicted"):]
        tables = [line for line in predicted.splitlines() if line.startswith("| hosts |")]
        assert all("predicted P3 speedup |" in t for t in tables)
        labelled = "ByteScheduler's figures are from a model not validated for its policy**: a check of ByteScheduler"
        assert (labelled in predicted) == bool(bytescheduler_missed)
        assert all(("predicted ByteScheduler speedup (policy not validated) |" in t) == bool(bytescheduler_missed)
                   for t in tables)


def test_the_committed_predicted_grid_is_of_this_model_and_covers_the_grid():
    data = h2h.read_predicted()
    assert data is not None and data["model_version"] == model_version(), (
        "the iteration model changed: python -m reprokit.study.report.head_to_head --predict, then "
        "python -m reprokit.study.report.results_pages")
    cells = h2h.predicted_cells(data)
    assert {(c.gpu, c.model, c.hosts, c.bandwidth) for c in cells} == {
        (g, m, n, b) for g in h2h.GRID_GPUS for m in h2h.GRID_MODELS for n in h2h.GRID_HOSTS
        for b in h2h.GRID_BANDWIDTHS}


def test_a_summary_keeps_each_run_s_testbed_and_the_baseline_s_ratio_for_the_page():
    fair = replace(TESTBED4, link_sharing="fair", tcp="cubic")
    runs = (records("resnet", "4gbit", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9], emulated=True, ratio=0.5)
            + records("resnet", "4gbit", [8.0, 8.1, 7.9], [9.0, 9.1, 8.9], emulated=True, target=fair, ratio=0.5))
    data = summarise(study(), runs, ALL_MODELS, "t", "no testbed named here")
    assert {(r["hosts"], r["links"], r["tcp"]) for r in data["runs"]} == {(4, "fifo", ""), (4, "fair", "cubic")}
    rows = h2h.measured_rows([data])
    assert sorted((r.setting.links, r.setting.tcp, r.baseline.n) for r in rows) == [("fair", "cubic", 3),
                                                                                   ("fifo", "default", 3)]
    assert all(r.comm_to_compute == 0.5 and r.bound == 1.5 for r in rows)
    assert not any(r["cpu_bound"] for r in data["runs"])
    flagged = summarise(study(), records("resnet", "4gbit", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9], emulated=True,
                                         ratio=0.5, cpu_bound=True), ALL_MODELS, "t", "no testbed named here")
    assert all(r["cpu_bound"] for r in flagged["runs"]) and h2h.measured_rows([flagged])[0].cpu_bound == 6


def test_rows_with_a_measured_ratio_are_drawn_against_compute_per_byte_and_the_others_are_named(tmp_path):
    speedups = [{"variant": v, "versus": "baseline", "model": "resnet", "bandwidth": "4gbit", "engine": "embedded",
                 "gpu": "p4000", "dilation": 20.0, "comm_to_compute": 0.5} for v in ("p3", "bytescheduler")]
    with_r = summary("with-r", [run("baseline", s) for s in (10.0, 10.1, 9.9)]
                     + [run("p3", s) for s in (12.0, 12.1, 11.9)] + [run("bytescheduler", s) for s in (9.0, 9.2, 9.1)],
                     speedups=speedups)
    without = summary("without-r", [run("baseline", s, bandwidth="2gbit") for s in (5.0, 5.1, 4.9)]
                      + [run("p3", s, bandwidth="2gbit") for s in (6.0, 6.1, 5.9)])
    rows = h2h.measured_rows([with_r, without])
    assert [len(h2h.with_ratio(rows)), len(rows)] == [2, 3]
    text = h2h.page([with_r, without], rows, None)
    assert "![measured speedup over the baseline" in text and "(head-to-head-measured.png)" in text
    assert "the 2 rows whose baseline has a measured ratio r and whose sides have n >= 3" in text
    assert "Not drawn (no ratio kept, or n < 3): ResNet-50, P4000 compute (k=20), 2gbit" in text
    # a row with its ratio but fewer than 3 runs a side is not drawn either
    few = summary("few", [run("baseline", 10.0), run("p3", 12.0)], speedups=speedups[:1])
    assert h2h.with_ratio(h2h.measured_rows([few])) == []
    written = h2h.write_page([with_r, without], rows, tmp_path, {"cells": []})
    assert [p.name for p in written] == ["head-to-head.md", "head-to-head-measured.png"]
    assert written[1].read_bytes().startswith(b"\x89PNG")
    # no ratio anywhere: no figure, and the page does not point at one
    (tmp_path / "none").mkdir()
    alone = h2h.measured_rows([without])
    assert [p.name for p in h2h.write_page([without], alone, tmp_path / "none", {"cells": []})] == ["head-to-head.md"]
    assert "head-to-head-measured.png" not in h2h.page([without], alone, None)


def test_a_row_says_how_many_of_its_runs_were_cpu_bound():
    runs = [run("baseline", 10.0), run("baseline", 10.1), {**run("p3", 12.0), "cpu_bound": True}, run("p3", 12.1)]
    row, = h2h.measured_rows([summary("one", runs)])
    assert row.cpu_bound == 1
    assert "(1 of 4 runs CPU-bound)" in "\n".join(h2h.measured_table([row]))
    calm, = h2h.measured_rows([summary("two", [run("baseline", 10.0), run("p3", 12.0)])])
    assert calm.cpu_bound == 0 and "CPU-bound" not in "\n".join(h2h.measured_table([calm]))
