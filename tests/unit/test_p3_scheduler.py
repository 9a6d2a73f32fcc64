"""P3's communication scheduler and its measurements (program/p3/p3_scheduler.py, p3_timeline.py), without MXNet."""
import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "program" / "p3"))
from p3_scheduler import CommLoop, CreditScheduler, Task  # noqa: E402
from p3_timeline import (CommMeter, format_comm_line, forward_reach_times, layer_groups,  # noqa: E402
                         parse_comm_line, union_length)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 1.0
        return self.t


def tasks(*specs):
    return [Task(name, priority, nbytes) for name, priority, nbytes in specs]


def names(released):
    return [t.name for t in released]


# -- priority order --

def test_without_credit_every_ready_task_is_released_at_once_in_priority_order():
    s = CreditScheduler(0)
    released = s.post(*tasks(("out", -2, 100), ("mid", -1, 100), ("in", 0, 100)))
    assert names(released) == ["in", "mid", "out"]
    assert s.in_flight == 3 and s.in_flight_bytes == 300 and s.queued == 0


def test_equal_priorities_leave_in_the_order_they_became_ready():
    s = CreditScheduler(10)
    first = s.post(*tasks(("a", 0, 10), ("b", 0, 10), ("c", 0, 10)))
    assert names(first) == ["a"]
    assert names(s.complete(first[0])) == ["b"]


def test_tasks_queued_under_credit_leave_highest_priority_first():
    s = CreditScheduler(200)
    first, b, c, d = tasks(("p3", -3, 100), ("p2", -2, 100), ("p1", -1, 100), ("p0", 0, 100))
    assert names(s.post(first)) == ["p3"]  # stays in flight: it is the oldest, so nothing goes beyond the credit
    assert names(s.post(b, c, d)) == ["p0"]
    assert names(s.complete(d)) == ["p1"]
    assert names(s.complete(c)) == ["p2"]


# -- credit accounting --

def test_bytes_in_flight_never_exceed_the_credit():
    s = CreditScheduler(250)
    pending = tasks(*[(f"t{i}", -i, 100) for i in range(10)])
    in_flight = list(s.post(*pending))
    assert len(in_flight) == 2 and s.in_flight_bytes == 200
    done = 0
    while in_flight:
        task = in_flight.pop(0)
        in_flight += s.complete(task)
        done += 1
        assert s.in_flight_bytes <= 250
        assert s.in_flight_bytes == sum(t.nbytes for t in in_flight)
    assert done == 10 and s.max_in_flight_bytes == 200 and s.idle() and s.beyond_credit == 0


def test_a_task_larger_than_the_credit_goes_alone_when_nothing_else_is_in_flight():
    s = CreditScheduler(100)
    small, big, after = tasks(("small", 0, 60), ("big", -1, 1000), ("after", -2, 10))
    assert names(s.post(small, big, after)) == ["small"]
    assert names(s.complete(small)) == ["big"]  # alone, although 1000 > 100
    assert s.in_flight_bytes == 1000
    assert names(s.complete(big)) == ["after"]


def test_priority_is_strict_a_small_low_priority_task_does_not_jump_a_big_one():
    s = CreditScheduler(100)
    first, big, small = tasks(("first", 0, 50), ("big", -1, 95), ("small", -2, 10))
    assert names(s.post(first, big, small)) == ["first"]  # small would fit, but big is ahead
    assert names(s.complete(first)) == ["big"]
    assert names(s.complete(big)) == ["small"]


def test_with_a_batch_released_tasks_wait_until_enough_credit_is_free():
    s = CreditScheduler(400, batch=200)
    a, b, c, d, e, f = tasks(*[(x, 0, 100) for x in "abcdef"])
    assert names(s.post(a, b, c, d, e, f)) == ["a", "b", "c", "d"]
    assert s.complete(a) == []  # 100 free < 200
    assert names(s.complete(b)) == ["e", "f"]  # 200 free: two go together
    assert CreditScheduler(100, batch=500).batch == 100


class ManualClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_a_task_in_flight_far_longer_than_usual_stops_holding_the_credit():
    """Its data waits at the server for the other workers: the link is free for the next task."""
    clock = ManualClock()
    s = CreditScheduler(100, clock=clock, min_stale=0.005)  # 3 x median 2 ms = 6 ms
    assert s.stale_after() is None  # nothing measured yet: nothing is taken off
    for i in range(8):  # eight tasks that took 2 ms each
        t = Task(f"warm{i}", 0, 100)
        s.post(t)
        clock.t += 0.002
        s.complete(t)
    assert s.stale_after() == pytest.approx(0.006)
    orphan, waiting = Task("orphan", 0, 100), Task("waiting", -1, 100)
    assert names(s.post(orphan, waiting)) == ["orphan"]
    clock.t += 0.005
    assert s.tick() == []
    clock.t += 0.002  # 7 ms > 6 ms: the orphan stops counting
    assert names(s.tick()) == ["waiting"]
    assert s.stale_tasks == 1 and s.in_flight == 2 and s.in_flight_bytes == 100
    assert s.complete(orphan) == [] and s.in_flight_bytes == 100  # its bytes were freed once only
    s.complete(waiting)
    assert s.idle() and s.in_flight_bytes == 0


def test_completion_is_checked():
    s = CreditScheduler(10)
    a, b = tasks(("a", 0, 10), ("b", 0, 10))
    s.post(a, b)
    with pytest.raises(ValueError, match="not in flight"):
        s.complete(b)  # still queued
    with pytest.raises(ValueError, match="posted before"):
        s.post(a)
    with pytest.raises(ValueError):
        CreditScheduler(-1)
    with pytest.raises(ValueError):
        Task("x", 0, -5)


def test_timestamps_are_recorded():
    s = CreditScheduler(10, clock=Clock())
    a, b = tasks(("a", 0, 10), ("b", 0, 10))
    s.post(a, b)  # t=1
    s.complete(a)  # t=2
    assert (a.posted, a.released, a.done) == (1.0, 1.0, 2.0)
    assert (b.posted, b.released, b.done) == (1.0, 2.0, None)


# -- a late high-priority task overtakes queued low-priority ones --

def test_late_high_priority_task_overtakes_queued_low_priority_ones():
    """Backward produces the output layer first: its slices fill the credit and queue;
    the input layer's slice, ready last, leaves before every queued output-layer slice."""
    s = CreditScheduler(200)
    s.record_order = True
    out = tasks(*[(f"out{i}", -5, 100) for i in range(6)])
    in_flight = list(s.post(*out))
    assert names(in_flight) == ["out0", "out1"] and s.queued == 4
    late = Task("input", 0, 100)
    assert s.post(late) == []  # credit is full
    in_flight += s.complete(in_flight.pop(0))
    assert names(in_flight) == ["out1", "input"]  # overtook out2..out5
    while in_flight:
        in_flight += s.complete(in_flight.pop(0))
    assert s.released_order == ["out0", "out1", "input", "out2", "out3", "out4", "out5"]


def test_thread_safe_under_concurrent_posts_and_completions():
    s = CreditScheduler(1000)
    lock = threading.Lock()
    in_flight = []
    total = 8 * 200

    def poster(w):
        for i in range(200):
            released = s.post(Task(f"{w}.{i}", -(i % 7), 100))
            with lock:
                in_flight.extend(released)

    def completer(stop):
        while not stop.is_set() or in_flight:
            with lock:
                task = in_flight.pop(0) if in_flight else None
            if task is not None:
                released = s.complete(task)
                assert s.in_flight_bytes <= 1000 + 100  # the credit, and at most the oldest task beyond it
                with lock:
                    in_flight.extend(released)

    stop = threading.Event()
    completers = [threading.Thread(target=completer, args=(stop,)) for _ in range(3)]
    posters = [threading.Thread(target=poster, args=(w,)) for w in range(8)]
    for t in completers + posters:
        t.start()
    for t in posters:
        t.join(30)
    assert s.wait_idle(30)
    stop.set()
    for t in completers:
        t.join(30)
    assert s.idle() and s.in_flight_bytes == 0 and s.max_in_flight_bytes <= 1100
    assert next(s._seq) == total  # every task was posted once


# -- workers coupled through a synchronous parameter server --

def test_the_oldest_unfinished_task_goes_beyond_the_credit_once_all_older_ones_are_done():
    s = CreditScheduler(100)
    old, mid, new = [Task(n, p, 100, order=o) for n, p, o in (("old", -2, 0), ("mid", -1, 1), ("new", 0, 2))]
    assert names(s.post(old)) == ["old"]
    assert s.post(mid, new) == []  # credit full; the oldest unfinished (old) is in flight
    assert names(s.complete(old)) == ["new", "mid"]  # priority first, then the oldest beyond the credit
    assert s.beyond_credit == 1 and s.in_flight_bytes == 200


def simulate(seed, keep_progress, workers=2, params=6, slices=3, credit=250, iterations=3):
    """Workers post the same tasks in the same canonical order (output layer first) at their own pace;
    the "server" completes a task once every worker has released it. Returns False on deadlock."""
    import random
    rng = random.Random(seed)
    plan = [(p, n) for p in reversed(range(params)) for n in range(slices)]  # the order backward produces them
    for _ in range(iterations):
        scheds = [CreditScheduler(credit) for _ in range(workers)]
        for s in scheds:
            s.keep_progress = keep_progress
        tasks_of = [{(p, n): Task(f"{p}.{n}", -p, 100, order=k) for k, (p, n) in enumerate(plan)} for _ in scheds]
        posted = [0] * workers
        released = [set() for _ in scheds]
        done = set()
        while len(done) < len(plan):
            moves = [("post", w) for w in range(workers) if posted[w] < len(plan)]
            moves += [("done", key) for key in set.intersection(*released) - done]
            if not moves:
                return False
            kind, arg = rng.choice(moves)
            if kind == "post":
                key = plan[posted[arg]]
                posted[arg] += 1
                for t in scheds[arg].post(tasks_of[arg][key]):
                    released[arg].add((int(t.name.split(".")[0]), int(t.name.split(".")[1])))
            else:
                done.add(arg)
                for w, s in enumerate(scheds):
                    for t in s.complete(tasks_of[w][arg]):
                        released[w].add((int(t.name.split(".")[0]), int(t.name.split(".")[1])))
        assert all(s.idle() for s in scheds)
    return True


def test_credit_and_priority_alone_can_deadlock_coupled_workers():
    """Without the oldest-task rule, workers that prefer different ready slices wait for each other forever."""
    assert not all(simulate(seed, keep_progress=False) for seed in range(200))


def test_coupled_workers_never_deadlock():
    assert all(simulate(seed, keep_progress=True) for seed in range(300))
    assert all(simulate(seed, keep_progress=True, workers=3, credit=100) for seed in range(100))


# -- the communication thread --

def test_comm_loop_runs_notices_in_order_on_its_own_thread():
    loop = CommLoop()
    seen = []
    for i in range(100):
        loop.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
    assert loop.call(lambda: len(seen)) == 100
    assert [i for i, _ in seen] == list(range(100)) and {n for _, n in seen} == {"p3-comm"}
    assert loop.close(10) and not loop.alive


def test_comm_loop_ticks_after_a_notice_while_the_tick_asks_for_more():
    ticks = []
    loop = CommLoop(on_tick=lambda: ticks.append(1) or len(ticks) < 3, tick_s=0.001)
    time.sleep(0.05)
    assert ticks == []  # no notice yet: no ticks
    loop.submit(lambda: None)
    time.sleep(0.1)
    assert len(ticks) == 3  # the third returned False
    assert loop.close(10)


def test_comm_loop_keeps_serving_after_a_failure_and_reports_it():
    released = []
    loop = CommLoop(on_error=lambda exc: released.append(str(exc)))
    loop.submit(lambda: 1 / 0)
    loop.submit(lambda: released.append("later"))
    loop.call(lambda: None)
    assert isinstance(loop.error, ZeroDivisionError) and released == ["division by zero", "later"]
    with pytest.raises(KeyError):
        loop.call(lambda: {}["x"])
    assert loop.close(10)


# -- measurements --

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


def test_chrome_trace_has_every_event_of_a_slice(tmp_path):
    m = CommMeter(2, ["w0", "w1"], keep_trace=True, pid=3, label="worker 3 (p3)")
    feed(m, 0, {0: 10.0, 1: 6.0}, [12.0, 13.0], [1.0, 2.0], pushed=0.0)
    m.slice_done(0, 0, "p3_0_0", 400, 0, 10.0, 10.5, 11.5, 11.9)
    m.slice_done(0, 1, "p3_1_0", 800, -1, 6.0, 6.1, None, 12.9)
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
    assert by_name["push released p3_0_0"]["ts"] == 10_500_000
    assert by_name["push done p3_0_0"]["ts"] == 11_500_000
    assert by_name["pull done p3_1_0"]["args"]["bytes"] == 800
    assert "push done p3_1_0" not in by_name
    wait = by_name["wait w0"]
    assert (wait["ph"], wait["ts"], wait["dur"]) == ("X", 10_000_000, 2_000_000)
    reached = [e for e in timed if e["name"] == "forward reached"]
    assert sorted(e["ts"] for e in reached) == [10_000_000, 14_000_000]
    comm = by_name["comm w1"]
    assert comm["args"]["gradient_ready_us"] == 6_000_000 and comm["args"]["weights_in_place_us"] == 13_000_000
    assert {"gradient ready", "forward+backward 1"} <= set(by_name)
