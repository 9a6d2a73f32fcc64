"""Does the verdict depend on the GPU (each claim at a bandwidth predicted across compute speeds, emulated runs on
it), and P3 on today's hardware: predicted, labelled so, and the same figures as the model's own functions give."""
import json

import matplotlib.pyplot as plt
import pytest

from reprokit.emulation.gpus import gpu
from reprokit.study.analysis.analyse import analyse
from reprokit.study.whatif.claim_speedup import predicted_speedup
from reprokit.study.whatif.model_check import ModelValidation
from reprokit.study.whatif.predict import predict, request_from
from reprokit.study.whatif.sensitivity import (
    PREDICTED_LINE,
    SPEED_HIGH,
    SPEED_LOW,
    HardwareGrid,
    caption,
    claim_sensitivity,
    draw,
    emulated_points,
    hardware_map,
    speed_grid,
)
from support.study_data import ALL_MODELS, records, study

pytestmark = pytest.mark.parallel

SMALL = HardwareGrid(("resnet",), ("p4000", "v100"), ("1gbit", "100gbit"), (4, 1000))


def claim(claim_id):
    return next(c for c in study().claims if c.id == claim_id)


def test_the_grid_spans_a_quarter_to_four_times_the_paper_gpu_on_a_log_scale_with_it_among_the_points():
    grid = speed_grid(17)
    assert (grid[0], len(grid)) == (SPEED_LOW, 17) and grid[-1] == pytest.approx(SPEED_HIGH)
    assert grid[8] == 1.0 and grid[12] == pytest.approx(2.0)
    assert speed_grid(17, upto=5.0)[-1] == pytest.approx(4 * 2 ** 0.25)  # continued, never past the mark


def test_the_curve_at_the_paper_gpu_is_the_predicted_speedup_with_its_range_and_the_v100_marked():
    resnet = claim("resnet-4gbit")
    c = claim_sensitivity(resnet, study().tolerance, records_frame(), points=3)  # 0.25, 1 and 4: a quick curve
    p4000, v100 = gpu("p4000").throughput("resnet"), gpu("v100").throughput("resnet")
    assert c.predicted_at(1.0) == predicted_speedup(resnet, "p4000")
    assert c.paper_range == (p4000.low / p4000.per_sec, p4000.high / p4000.per_sec)
    assert c.marks == (("P4000", 1.0), ("V100", v100.per_sec / p4000.per_sec))
    xs = [x for x, _ in c.curve]
    assert xs == sorted(xs) and xs[0] == SPEED_LOW and xs[-1] == pytest.approx(c.marks[1][1])  # out to the V100
    for x in (*c.paper_range, c.marks[1][1]):  # the predicted verdicts' speeds, exactly
        assert c.predicted_at(x) == predicted_speedup(resnet, "p4000", p4000.per_sec * x)
    assert (c.claimed, c.tolerance) == (1.26, study().tolerance.speedup)
    said = caption(c)
    assert said.startswith("resnet-4gbit (claimed 1.26x ± 0.10, p3 over baseline at 4gbit on 4 machines): predicted ")
    assert f"{c.predicted_at(1.0):.2f}x at the P4000 (x = 1.00)" in said and said.endswith("compute stored")
    assert c.to_dict()["kind"] == "predicted (line), emulated (points)"
    # Beside it, the same with the testbed host's queue below the van: at the P4000 it is what the emulated runs'
    # hosts had, and it takes most of P3's gain there.

    fifo = ModelValidation.stored().fifo_bytes
    queued = dict(c.queued_curve)
    assert c.fifo_bytes == fifo > 0 and queued[1.0] == predicted_speedup(resnet, "p4000", fifo_bytes=fifo)
    assert queued[1.0] < c.predicted_at(1.0) - 0.05
    assert f"with {fifo / 1e6:g} MB below each host's van (the testbed's) {queued[1.0]:.2f}x at the P4000" in said


def records_frame():
    return analyse(study(), [], ALL_MODELS).emulated_speedups


def test_emulated_runs_land_at_their_gpus_throughput_over_the_paper_gpus_and_two_gpus_are_never_pooled():
    at_v100 = records("resnet", "4gbit", [10.0, 10.1, 9.9], [13.0, 12.9, 13.1], emulated=True, gpu="v100",
                      origin="o-v100")
    at_p4000 = records("resnet", "4gbit", [10.0, 10.1, 9.9], [11.0, 11.1, 10.9], emulated=True,
                       gpu="p4000", origin="o-p4000")
    at_file = records("resnet", "4gbit", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9], emulated=True,
                      gpu="measured:/runs/x/measured-compute.json", origin="o-file")
    other_bandwidth = records("resnet", "1gbit", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9], emulated=True,
                              gpu="v100", origin="o-1gbit")
    rows = analyse(study(), at_v100 + at_p4000 + at_file + other_bandwidth, ALL_MODELS).emulated_speedups
    pairs = rows[(rows["bandwidth"] == "4gbit") & (rows["variant"] == "p3") & (rows["versus"] == "baseline")]
    assert sorted(pairs["gpu"]) == ["measured:/runs/x/measured-compute.json", "p4000", "v100"]
    central = gpu("p4000").throughput("resnet").per_sec
    points = emulated_points(claim("resnet-4gbit"), rows, central)
    assert [p.gpu for p in points] == ["p4000", "v100"]  # a profile file names no GPU: left out
    p4000, v100 = points
    assert v100.x == gpu("v100").throughput("resnet").per_sec / central and p4000.x == 1.0
    assert v100.speedup == pytest.approx(1.3, abs=0.01) and v100.ci_low < v100.speedup < v100.ci_high
    assert (v100.n, v100.dilation) == (3, 20.0)


def test_the_map_is_labelled_predicted_and_each_cell_is_what_ck_predict_says():
    today = hardware_map(study(), SMALL)
    assert [(x.gpu, x.workers, x.bandwidth) for x in today.cells] == [
        (g, w, b) for g in ("P4000", "V100") for w in (4, 1000) for b in ("1gbit", "100gbit")]
    request = request_from({"model": "resnet", "gpu": "v100", "bandwidths": "1gbit", "workers": "1000"}, study())
    [row] = predict(request)
    cell = next(x for x in today.cells if (x.gpu, x.workers, x.bandwidth) == ("V100", 1000, "1gbit"))
    assert (cell.predicted_speedup, cell.predicted_bound_share) == (row.speedup, row.bound_share)
    assert today.caption("resnet").startswith("PREDICTED by the iteration model, not measured: resnet (3,224,224)")
    assert "P4000 78.5, V100 403.2" in today.caption("resnet")
    data = json.loads(json.dumps(today.to_dict()))
    assert data["kind"] == "PREDICTED by the iteration model, not measured"
    assert all(key.startswith("predicted_") for cell in data["cells"] for key in cell
               if key not in ("model", "gpu", "workers", "bandwidth"))
    assert today.table("resnet")[0] == ["P4000", "4", *(f"{x.predicted_speedup:.2f}x ({x.predicted_bound_share:.1%})"
                                                        for x in today.cells[:2])]


def test_the_figure_says_predicted_for_the_line_and_emulated_for_the_points():
    runs = records("resnet", "4gbit", [10.0, 10.1, 9.9], [13.0, 12.9, 13.1], emulated=True, gpu="v100")
    rows = analyse(study(), runs, ALL_MODELS).emulated_speedups
    c = claim_sensitivity(claim("resnet-4gbit"), study().tolerance, rows, points=3)
    fig = draw([c])
    try:
        [ax] = fig.axes
        assert fig.texts[0].get_text() == "Does the verdict depend on the GPU? PREDICTED speedup (line), EMULATED runs " \
                                          "(points)"  # the suptitle
        assert ax.get_title() == "resnet-4gbit at 4gbit: predicted (line), emulated (points)"
        assert {t.get_text() for t in ax.get_legend().get_texts()} == {
            "claimed 1.26x ± 0.10", "P4000's plausible range", PREDICTED_LINE, "emulated (95% interval)",
            f"predicted, {c.fifo_bytes / 1e6:g} MB below each host's van (the testbed's)"}
        [line] = [x for x in ax.get_lines() if x.get_label() == PREDICTED_LINE]
        assert list(line.get_xdata()) == [x for x, _ in c.curve]
        [points] = ax.containers
        assert list(points.lines[0].get_xdata()) == [c.marks[1][1]]  # the V100's emulated runs at the V100's speed
        assert {" P4000 (the paper's GPU)", " V100"} <= {t.get_text() for t in ax.texts}
        assert ax.get_xscale() == "log"
    finally:
        plt.close(fig)
