"""P3's scheduler inside MXNet's engine (program/p3/p3_engine.py, p3_kvstore.py, train.py), in the engine's interpreter.

Every test runs a script with the interpreter named by REPROKIT_MXNET_PYTHON (stock
MXNet 1.9.1); a missing variable fails the test rather than skipping it.
"""
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

P3_DIR = Path(__file__).resolve().parents[2] / "program" / "p3"
sys.path.insert(0, str(P3_DIR))
from p3_timeline import parse_comm_line  # noqa: E402


@pytest.fixture(scope="module")
def engine_python():
    python = os.environ.get("REPROKIT_MXNET_PYTHON", "")
    if not python:
        pytest.fail("REPROKIT_MXNET_PYTHON is not set: it must name the Python interpreter of the MXNet "
                    "engine (e.g. <CK tools>/lib-mxnet-1.9.1-linux-64/prefix/bin/python)")
    if not os.access(python, os.X_OK):
        pytest.fail(f"REPROKIT_MXNET_PYTHON={python} is not an executable")
    return python


def run_script(python, tmp_path, source, timeout=180):
    script = tmp_path / "script.py"
    script.write_text(source)
    proc = subprocess.run([python, str(script), str(P3_DIR)], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


GATE = """
import json, sys, threading, time
sys.path.insert(0, sys.argv[1])
import mxnet as mx
from p3_engine import Engine

engine = Engine()
w, other = mx.nd.ones((1000,)), mx.nd.ones((1000,))
held = []
engine.hold(lambda release, t: held.append(release), mutable=[w])
reader = w * 2  # must wait for the gate
independent = other * 3  # must not
independent.wait_to_read()
t_independent = time.time()
runs = []
engine.probe(lambda t: runs.append(t), const=[other])
time.sleep(0.3)
gate_started = len(held)
threading.Timer(0.2, held[0]).start()  # released later, from another Python thread
t0 = time.time()
reader.wait_to_read()
waited = time.time() - t0
print(json.dumps({"gate_started": gate_started, "waited": waited, "reader": float(reader[0].asscalar()),
                  "probe_ran": len(runs), "double_release": held[0]()}))
"""


def test_a_gate_holds_readers_of_its_array_until_released_from_a_python_thread(engine_python, tmp_path):
    out = run_script(engine_python, tmp_path, GATE)
    assert out["gate_started"] == 1 and out["probe_ran"] == 1
    assert out["waited"] >= 0.15 and out["reader"] == 2.0
    assert out["double_release"] is False  # a second release is refused, not passed to the engine


PRIORITY = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import mxnet as mx
from p3_engine import Engine
from p3_kvstore import P3Sync

SLICE = 1 << 18  # elements per slice (1 MB)
sizes = [SLICE, 24 * SLICE]  # parameter 0: the input layer (one slice); 1: the output layer (24 slices)
weights = [mx.nd.zeros((n,)) for n in sizes]
grads = [mx.nd.ones((n,)) for n in sizes]
kv = mx.kv.create("local")
sync = P3Sync(kv, sizes, SLICE, True, credit=SLICE * 4)  # credit: one slice in flight
sync.scheduler.batch = 0
sync.init(weights, mx.optimizer.SGD(learning_rate=0.1), weights)
sync.step(weights, grads)  # a first iteration binds the arrays
mx.nd.waitall()

done = []
complete = sync.scheduler.complete
def recording(task):
    done.append(task.name)
    return complete(task)
sync.scheduler.complete = recording
sync.scheduler.record_order = True
# Backward produces the output layer's gradient first; the input layer's stays unwritten until released.
held = []
Engine().hold(lambda release, t: held.append(release), mutable=[grads[0]])
while not held:
    time.sleep(0.001)
sync.step(weights, grads)
deadline = time.time() + 60
while not sync.scheduler.released_order and time.time() < deadline:  # the output layer's slices are posted
    time.sleep(0.0005)
queued = sync.scheduler.queued
held[0]()  # the input layer's slice is posted now, after the output layer's
mx.nd.waitall()
sync.close()
print(json.dumps({"released": sync.scheduler.released_order, "done": done, "queued_when_input_ready": queued,
                  "max_in_flight": sync.scheduler.max_in_flight_bytes,
                  "w0": float(weights[0][0].asscalar()), "w1": float(weights[1][-1].asscalar())}))
"""


def test_a_late_high_priority_slice_completes_before_queued_low_priority_ones(engine_python, tmp_path):
    out = run_script(engine_python, tmp_path, PRIORITY)
    assert out["queued_when_input_ready"] >= 8
    done = out["done"]
    assert sorted(done) == sorted([f"p3_1_{n}" for n in range(24)] + ["p3_0_0"])
    # Behind only the slice in flight when it became ready and, at most, the oldest slice, which goes
    # beside it beyond the credit (p3_scheduler: no deadlock); ahead of the other queued ones.
    assert done.index("p3_0_0") <= 2 < out["queued_when_input_ready"]
    assert out["released"].index("p3_0_0") <= 2
    assert out["max_in_flight"] <= 2 * (1 << 20)  # the credit (one slice) and at most the oldest slice beyond it
    assert out["w0"] == pytest.approx(-0.2) and out["w1"] == pytest.approx(-0.2)  # two SGD steps of lr 0.1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(python, run_dir, args, workers=2, timeout=300):
    """Scheduler, one server and ``workers`` workers of train.py on 127.0.0.1, as the framework lays them out."""
    run_dir.mkdir(parents=True)
    env = {**os.environ, "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(free_port()),
           "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": str(workers), "DMLC_NODE_HOST": "127.0.0.1",
           "OMP_NUM_THREADS": "1"}
    roles = [("scheduler", None), ("server", None)] + [("worker", i) for i in range(workers)]
    procs = []
    for role, index in roles:
        role_env = {**env, "DMLC_ROLE": role, **({"DMLC_WORKER_ID": str(index)} if index is not None else {})}
        log = open(run_dir / f"{role}{'' if index is None else index}.log", "w")
        procs.append((subprocess.Popen([python, str(P3_DIR / "train.py"), *args], cwd=run_dir, env=role_env,
                                       stdout=log, stderr=subprocess.STDOUT), log))
    deadline = time.time() + timeout
    try:
        for proc, _ in procs:
            proc.wait(timeout=max(1, deadline - time.time()))
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    assert all(proc.returncode == 0 for proc, _ in procs), "\n".join(
        f"== {p.name}\n{p.read_text()[-2000:]}" for p in sorted(run_dir.glob("*.log")))
    return [(run_dir / f"worker{i}.log").read_text() for i in range(workers)]


JOB = ["--network", "resnet18_v1", "--batch-size", "8", "--image-shape", "3,32,32", "--num-batches", "5",
       "--disp-batches", "1", "--num-classes", "10", "--seed", "7"]


def checksum(log):
    return re.search(r"Parameter checksum: rank=\d+ sha256=(\w+)", log).group(1)


def test_p3_with_a_small_credit_learns_what_the_baseline_learns_and_writes_a_timeline(engine_python, tmp_path):
    base = run_job(engine_python, tmp_path / "baseline", [*JOB, "--variant", "baseline"])
    p3 = run_job(engine_python, tmp_path / "p3", [*JOB, "--variant", "p3", "--p3-slice-size", "50000",
                                                  "--p3-credit", "400000", "--timeline", "trace.json"])
    sums = {checksum(log) for log in base + p3}
    assert len(sums) == 1, "baseline and P3 ended with different parameters"

    for variant, logs in (("baseline", base), ("p3", p3)):
        for log in logs:
            lines = [parse_comm_line(line) for line in log.splitlines() if "p3-comm:" in line]
            assert len(lines) == 1, log[-2000:]
            comm = lines[0]
            assert comm["variant"] == variant and comm["iterations"] == 4
            assert comm["comm_wait_s_per_iter"] >= 0 and 0 <= comm["overlap"] <= 1
            assert comm["comm_s_per_iter"] > 0 and comm["compute_s_per_iter"] > 0

    traces = sorted((tmp_path / "p3").glob("trace.worker-*.json"))
    assert [t.name for t in traces] == ["trace.worker-0.json", "trace.worker-1.json"]
    for path in traces:
        events = json.loads(path.read_text())["traceEvents"]
        timed = [e for e in events if e["ph"] != "M"]
        assert all({"name", "cat", "ph", "ts", "pid", "tid"} <= set(e) for e in timed)
        names = {e["name"].split(" p3_")[0] for e in timed}
        assert {"push released", "push done", "pull done", "gradient ready", "forward reached"} <= names
        # every slice of every measured iteration: released, then its push and pull done
        pulls = [e for e in timed if e["name"].startswith("pull done")]
        slices = {e["args"]["slice"] for e in pulls}
        assert len(slices) > 60 and {e["args"]["iteration"] for e in pulls} == set(range(5))
        released = {(e["args"]["iteration"], e["args"]["slice"]): e["ts"] for e in timed
                    if e["name"].startswith("push released")}
        assert all(released[(e["args"]["iteration"], e["args"]["slice"])] <= e["ts"] for e in pulls)
