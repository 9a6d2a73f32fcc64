"""Emulated compute's waits in the engine's interpreter: short layers share a wait, and a busy wait holds a core
and the engine's CPU thread where a sleeping one leaves both free."""
import json
import os
import subprocess
from pathlib import Path

P3_DIR = Path(__file__).resolve().parents[2] / "program" / "p3"

WAITS = """
import json, os, resource, sys, time
def runnable():  # seconds the process's threads ran or waited to run (on the CPU or in its run queue)
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                on_cpu, queued = f.read().split()[:2]
        except OSError:  # a thread that ended meanwhile
            continue
        total += int(on_cpu) + int(queued)
    return total / 1e9
sys.path.insert(0, sys.argv[1])
import mxnet as mx
import emulated_compute as ec
merged = ec.merge_short([[0], [1, 2], [3], [4], [5]], [0.01, 0.0, 0.0005, 0.02, 0.001])
ec.CLOCK.busy = sys.argv[2] == "busy"
mx.nd.waitall()
cpu, ran, start = resource.getrusage(resource.RUSAGE_SELF), runnable(), time.time()
token = ec.wait(0.0, [mx.nd.zeros((1,)), mx.nd.zeros((1,))])  # reads two arrays: not chained, sets the clock
for _ in range(20):
    token = ec.wait(0.025, [token])
token.wait_to_read()
wall, used, ran = time.time() - start, resource.getrusage(resource.RUSAGE_SELF), runnable() - ran
print(json.dumps({"merged": merged, "wall": wall, "cpu": used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime,
                  "runnable": ran}))
"""


# A 0.4 s wait, then, once it is under way, an operation on the CPU that shares nothing with it but the engine's
# CPU thread. Under way: a sleeping wait has set the clock's end; a busy one's spin runs on the engine's thread.
HOLD = """
import json, sys, threading, time
sys.path.insert(0, sys.argv[1])
import mxnet as mx
import emulated_compute as ec
ec.CLOCK.busy = sys.argv[2] == "busy"
spinning, spin = threading.Event(), ec._busy_until
def busy_until(end):
    spinning.set()
    spin(end)
ec._busy_until = busy_until
a = mx.nd.ones((4,))
a.wait_to_read()
token = ec.wait(0.0, [mx.nd.zeros((1,)), mx.nd.zeros((1,))])
token.wait_to_read()
start = time.time()
token = ec.wait(0.4, [token])
while ec.CLOCK.last_end < start + 0.39 or (ec.CLOCK.busy and not spinning.wait(0.001)):
    time.sleep(0.001)
assert time.time() - start < 0.2, "the wait started late"
b = a + 1
b.wait_to_read()
independent = time.time() - start
token.wait_to_read()
print(json.dumps({"independent": independent, "wait": time.time() - start}))
"""


def run_script(python, script, mode):
    proc = subprocess.run([python, "-c", script, str(P3_DIR), mode], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_waits(python, mode):
    return run_script(python, WAITS, mode)


def test_short_layers_share_the_wait_before_them_and_the_time_is_kept(engine_python):
    merged = run_waits(engine_python, "sleep")["merged"]
    assert [params for params, _ in merged] == [[0, 1, 2, 3], [4, 5]]
    assert [round(t, 6) for _, t in merged] == [0.0105, 0.021]


def test_a_busy_wait_holds_a_core_and_a_sleeping_one_does_not(engine_python):
    """20 chained waits of 25 ms: both last at least 0.5 s; a busy one wants a core all along (its spinning thread
    is on the CPU or in the run queue, whatever else runs: a loaded machine moves time from the first to the
    second, /proc's schedstat), a sleeping one little of it (the engine's own threads only)."""
    sleep, busy = run_waits(engine_python, "sleep"), run_waits(engine_python, "busy")
    for figures in (sleep, busy):
        assert 0.5 <= figures["wall"], figures
    assert busy["runnable"] > 0.8 * busy["wall"], busy
    assert sleep["runnable"] < 0.3 * sleep["wall"] and sleep["cpu"] < 0.3 * sleep["wall"], sleep


def test_a_busy_wait_holds_the_engines_cpu_thread_as_a_cpu_operator_does(engine_python):
    """The kvstore's pushes, pulls and copies run on the engine's one CPU thread, first in first out: behind a real
    CPU operator they wait, beside a GPU's (a sleeping wait) they do not."""
    sleep, busy = run_script(engine_python, HOLD, "sleep"), run_script(engine_python, HOLD, "busy")
    for figures in (sleep, busy):
        assert 0.4 <= figures["wait"] < 1.0, figures
    assert sleep["independent"] < 0.3, sleep
    assert busy["independent"] >= 0.38, busy
