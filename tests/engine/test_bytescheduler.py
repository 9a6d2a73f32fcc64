"""ByteScheduler (package bytescheduler-github) in the engine's interpreter: its scheduling really happens.

As tests/engine/test_mxnet_p3.py shows for P3's van: one worker pushes KEYS large arrays at falling priorities
through ByteScheduler's ScheduledKVStore, then one more at the highest, and engine probes record the order in
which their pushpulls complete. The scheduler holds all but a credit's worth of partitions back and sends the
waiting ones by priority, so the late key overtakes the queued ones. A run whose scheduler was bypassed (its
ScheduledKVStore without patch 0002's pushpull and broadcast: MXNet 1.9.1's own methods then send everything)
sees the late key wait its turn, and fails naming the bypass (program/p3/bytescheduler_kv.py).
"""
import statistics

import pytest

from support.bytescheduler import ensure_installed
from support.engine_job import LATE_KEY_ROUNDS, one_worker_job

LATE_KEY = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import mxnet as mx  # the scheduler and server roles serve here and exit
import bytescheduler_kv
from reprokit.wire import bytescheduler_line  # shipped into the job's folder (support.engine_job)
from engine_probe import Engine
scheduled = bytescheduler_kv.Scheduled.wrap(mx.kv.create("dist_sync"))
kv = scheduled.kv
if os.environ.get("BYPASS"):  # as if patch 0002 were missing: mx.kvstore.KVStore's own methods run
    from bytescheduler.mxnet.kvstore import ScheduledKVStore
    del ScheduledKVStore.pushpull, ScheduledKVStore.broadcast
keys, size, rounds = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
arrays = [mx.nd.ones((size,)) for _ in range(keys + 1)]
for i, array in enumerate(arrays):
    kv.broadcast(i, array, out=array)  # as Gluon's Trainer gives each parameter its first value
""" + LATE_KEY_ROUNDS + """try:
    scheduled.check()
    error = ""
except bytescheduler_kv.SchedulerError as exc:
    error = str(exc)
print(json.dumps({"late_ranks": ranks, "sum": float(arrays[keys][:1].asscalar()), "error": error,
                  "line": bytescheduler_line.parse_line(scheduled.line)}), flush=True)
os._exit(0)  # ByteScheduler's exit path is Python 2's (sys.maxint); the answer is out
"""

KEYS, SIZE, ROUNDS = 20, 2_000_000, 7  # 8 MB each: 2 partitions of ByteScheduler's default 1,000,000 parameters


@pytest.fixture(scope="module")
def bytescheduler_site(ck):
    """The site-packages folder of ByteScheduler installed (once) in the session's CK."""
    return ensure_installed(ck)["CK_ENV_LIB_BYTESCHEDULER"]


def late_key(python, tmp_path, site, **env):
    result = one_worker_job(python, tmp_path, LATE_KEY, [KEYS, SIZE, ROUNDS], {"PYTHONPATH": site, **env}, timeout=900)
    assert result["sum"] == 1.0  # one worker: the pushpull returns its own gradient
    return statistics.median(result["late_ranks"]), result


def test_a_late_high_priority_key_overtakes_the_queued_ones_under_bytescheduler(engine_python, tmp_path,
                                                                               bytescheduler_site):
    """With a credit of 4,000,000 parameters (4 partitions in flight), the late key's partitions go out as soon as
    credit returns, ahead of every queued partition."""
    median, result = late_key(engine_python, tmp_path, bytescheduler_site)
    assert median <= (KEYS + 1) // 4, result["late_ranks"]
    assert result["error"] == ""
    line = result["line"]
    assert (line["partition"], line["credit"], line["credit_tuning"], line["immediate"]) == (1000000, 4000000, 0, 0)
    assert line["pushpulls"] == line["tasks"] == ROUNDS * (KEYS + 1)


def test_a_bypassed_scheduler_lets_the_late_key_wait_and_fails_naming_it(engine_python, tmp_path,
                                                                        bytescheduler_site):
    median, result = late_key(engine_python, tmp_path, bytescheduler_site, BYPASS="1")
    assert median >= (KEYS + 1) // 3, result["late_ranks"]  # stock ps-lite sends in the order it is given
    assert result["line"]["tasks"] == 0 and result["line"]["pushpulls"] == ROUNDS * (KEYS + 1)
    assert "bypassed the scheduler" in result["error"] and "0002-schedule-pushpull-and-broadcast" in result["error"]
