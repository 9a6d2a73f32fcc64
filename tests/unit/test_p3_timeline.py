"""P3's communication measurements (reprokit.wire.p3_timeline), without MXNet."""
import json

import pytest

from reprokit.wire.p3_timeline import (
    CommMeter,
    format_comm_line,
    forward_reach_times,
    layer_groups,
    parse_comm_line,
    union_length,
)


def test_union_length():
    assert union_length([]) == 0
    assert union_length([(0, 2), (1, 3), (5, 6), (4, 4), (7, 6)]) == 4


def test_layers_group_a_blocks_consecutive_parameters():
    names = ["conv0_weight", "conv0_bias", "bn0_gamma", "bn0_beta", "dense0_weight", "conv0_weight", "x"]
    assert layer_groups(names) == [0, 0, 1, 1, 2, 3, 4]
    assert layer_groups([]) == []


def test_forward_reach_is_the_end_of_the_latest_earlier_layer_that_ended_first():
    # layers 0 and 1 ran in parallel (branches), layer 2 after both; layer 3 before layer 2 ended
    assert forward_reach_times(1.0, [5.0, 4.0, 9.0, 7.0]) == [1.0, 1.0, 5.0, 5.0]
    assert forward_reach_times(6.0, [5.0, 8.0]) == [6.0, 6.0]  # a layer ending before the start counts the start


def feed(meter, k, grad_ready, weight_ready, forward_end, pushed=None):
    for i, t in grad_ready.items():
        meter.grad_ready(k, i, t)
    for i, t in enumerate(weight_ready):
        meter.weight_ready(k, i, t)
    for i, t in enumerate(forward_end):
        meter.forward_end(k, i, t)
    if pushed is not None:
        meter.forward_pushed(k, pushed)


def test_meter_measures_wait_overlap_and_compute_on_a_constructed_timeline():
    """Two layers: backward 0 ends at 10; layer 0's weights arrive at 12, layer 1's at 13.
    Forward 1 reaches layer 0 at 10 (waits 2), ends it at 14, so layer 1 waits 0; backward 1 ends at 20."""
    m = CommMeter(2, ["w0", "w1"], keep_trace=True)
    feed(m, 0, {0: 10.0, 1: 6.0}, [12.0, 13.0], [1.0, 2.0], pushed=0.0)
    feed(m, 1, {0: 20.0, 1: 16.0}, [25.0, 26.0], [14.0, 15.0], pushed=9.0)
    s = m.summary()
    assert s["iterations"] == 1
    assert s["comm_wait_s_per_iter"] == pytest.approx(2.0)
    assert s["comm_s_per_iter"] == pytest.approx(7.0)  # 6..13
    assert s["overlap"] == pytest.approx(1 - 2 / 7)
    assert s["compute_s_per_iter"] == pytest.approx(20 - 10 - 2)


def test_meter_measures_each_layers_compute_inside_the_run_and_the_layers_add_up_to_compute():
    """The timeline above: forward 1 reaches layer 0 at 10, its weights arrive at 12, it ends at 14 (2 s); layer 1
    from 14 to 15 (1 s); backward from 15: layer 1's gradient at 16 (1 s), layer 0's at 20 (4 s)."""
    m = CommMeter(2, ["w0", "w1"], keep_trace=True)
    feed(m, 0, {0: 10.0, 1: 6.0}, [12.0, 13.0], [1.0, 2.0], pushed=0.0)
    feed(m, 1, {0: 20.0, 1: 16.0}, [25.0, 26.0], [14.0, 15.0], pushed=9.0)
    profile = m.layer_profile([3, 5])
    assert profile == {"iterations": 1, "layers": [
        {"name": "w0", "arrays": [3], "forward_s": 2.0, "backward_s": 4.0},
        {"name": "w1", "arrays": [5], "forward_s": 1.0, "backward_s": 1.0}]}
    total = sum(x["forward_s"] + x["backward_s"] for x in profile["layers"])
    assert total == pytest.approx(m.summary()["compute_s_per_iter"])
    trace = m.chrome_trace({"compute_profile": profile})
    assert trace["otherData"]["compute_profile"] == profile
    # Without every gradient recorded, no layer can be measured.
    two = CommMeter(2, ["w0", "w1"], ready_params={0, 1})
    feed(two, 0, {0: 10.0, 1: 6.0}, [12.0, 13.0], [1.0, 2.0], pushed=0.0)
    feed(two, 1, {0: 20.0, 1: 16.0}, [25.0, 26.0], [14.0, 15.0], pushed=9.0)
    assert two.summary()["iterations"] == 1 and two.layer_profile([3, 5]) is None
    assert "otherData" not in two.chrome_trace()


def test_meter_waits_for_complete_records_and_counts_the_baseline_with_two_ready_probes():
    m = CommMeter(3, ready_params={0, 2})
    feed(m, 0, {0: 10.0, 2: 5.0}, [20.0, 19.0, 18.0], [1.0, 2.0, 3.0])
    assert m.summary()["iterations"] == 0  # forward 1 not recorded yet
    feed(m, 1, {0: 40.0, 2: 35.0}, [50.0, 49.0, 48.0], [22.0, 24.0, 26.0], pushed=9.0)
    s = m.summary()
    # forward 1 can start at 10 (backward end); every weight arrives at 18..20, after it was needed:
    # layer 0 waits 10..20, then layers 1, 2 arrived before layer 0 ended (22): wait = 10.
    assert s["iterations"] == 1 and s["comm_wait_s_per_iter"] == pytest.approx(10.0)
    assert s["comm_s_per_iter"] == pytest.approx(15.0)  # 5..20
    assert s["overlap"] == pytest.approx(1 - 10 / 15)


def test_meter_reports_nothing_without_iterations():
    s = CommMeter(2).summary()
    assert s["iterations"] == 0 and s["overlap"] is None
    line = format_comm_line(s, rank=0)
    assert parse_comm_line(line) == {"comm_wait_s_per_iter": None, "overlap": None, "comm_s_per_iter": None,
                                     "compute_s_per_iter": None, "iterations": 0, "rank": "0"}


def test_comm_line_round_trip_inside_a_log_line():
    s = {"comm_wait_s_per_iter": 0.0123, "overlap": 0.81, "comm_s_per_iter": 0.5, "compute_s_per_iter": 0.25,
         "iterations": 7}
    line = "2026-01-01 00:00:00,000 " + format_comm_line(s, rank=1, variant="p3", timeline="/tmp/t.worker-1.json")
    parsed = parse_comm_line(line)
    assert parsed == {**s, "rank": "1", "variant": "p3", "timeline": "/tmp/t.worker-1.json"}
    assert line.split("p3-comm: ")[1].startswith("comm_wait_s_per_iter=0.012300 overlap=0.810000")
    assert parse_comm_line("Epoch[0] Batch [2-4] Speed: 41.46 samples/sec") is None


def test_chrome_trace_has_every_iterations_events(tmp_path):
    m = CommMeter(2, ["w0", "w1"], keep_trace=True, pid=3, label="worker 3 (p3)")
    feed(m, 0, {0: 10.0, 1: 6.0}, [12.0, 13.0], [1.0, 2.0], pushed=0.0)
    feed(m, 1, {0: 20.0, 1: 16.0}, [25.0, 26.0], [14.0, 15.0], pushed=9.0)
    path = tmp_path / "trace.json"
    m.write_trace(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert all({"name", "ph", "pid", "tid"} <= set(e) for e in events)
    assert all(e["pid"] == 3 for e in events)
    timed = [e for e in events if e["ph"] != "M"]
    assert all(isinstance(e["ts"], int) and e.get("dur", 0) >= 0 for e in timed)
    by_name = {e["name"]: e for e in timed}
    wait = by_name["wait w0"]
    assert (wait["ph"], wait["ts"], wait["dur"]) == ("X", 10_000_000, 2_000_000)
    reached = [e for e in timed if e["name"] == "forward reached"]
    assert sorted(e["ts"] for e in reached) == [10_000_000, 14_000_000]
    comm = by_name["comm w1"]
    assert comm["args"]["gradient_ready_us"] == 6_000_000 and comm["args"]["weights_in_place_us"] == 13_000_000
    assert {"gradient ready", "forward+backward 1"} <= set(by_name)
