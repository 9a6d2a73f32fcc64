"""ByteScheduler (Peng et al., SOSP'19) in a worker: the kvstore wrapped in its ScheduledKVStore, and checked.

Runs inside the engine's interpreter: the standard library, MXNet and bytescheduler itself (package
bytescheduler-github: the ``bytescheduler`` branch of bytedance/byteps with reprokit's patches, on the
engine's path), imported only when a function here is called.

- ``check_install()``: the bytescheduler this interpreter imports is the patched one. Its engine hook goes
  through MXNet's C API (patch 0001: the C++ extension does not run against the 1.9.1 wheel), its
  ScheduledKVStore schedules ``pushpull`` and ``broadcast`` (0002: without them MXNet 1.9.1's gradients bypass
  it, silently), and credit tuning is off unless asked for (0003). Returns what it found; raises
  SchedulerError naming what is missing.
- ``Scheduled.wrap(kv)``: the kvstore wrapped as the authors' README says
  (``ScheduledKVStore(mx.kvstore.create("dist_sync"))``), with two counters: the pushpulls the trainer makes
  and the push-pull tasks ByteScheduler's core receives. ``check()`` raises SchedulerError when some
  pushpull bypassed the scheduler.

Each worker logs one line at the end (``Scheduled.line``; its format: reprokit.wire.bytescheduler_line). train.py calls
``start(kv)`` and ``finish(scheduled)``, which end the role at once with one ``SchedulerError:`` line (the line the
launcher quotes) when the scheduler is missing, unpatched or was bypassed.
"""
import json
import os
import sys

from reprokit.wire.bytescheduler_line import MANIFEST, PACKAGE_HINT, PATCHES, format_line  # in reprokit/wire/


class SchedulerError(Exception):
    """The scheduler is missing, unpatched, or was bypassed: the message says which, in one line."""


def check_install():
    """What the engine's bytescheduler is, checked: {"path", "commit", "patches", "hook", "credit_tuning"}."""
    try:
        import bytescheduler
    except ImportError as exc:
        raise SchedulerError(f"ByteScheduler is not installed for this MXNet engine ({exc}); install it with: "
                             f"{PACKAGE_HINT} --quiet") from None
    root = os.path.dirname(os.path.abspath(bytescheduler.__file__))
    manifest = _manifest(os.path.dirname(root))
    try:
        from bytescheduler.mxnet import engine_hook, kvstore
    except ImportError as exc:
        raise SchedulerError(f"unpatched ByteScheduler: no engine hook through MXNet's C API ({exc}; patch "
                             f"{PATCHES['hook']}) at {root}; reinstall it with: {PACKAGE_HINT}") from None
    except OSError as exc:  # the unpatched kvstore_task loads the C++ extension c_lib, which was not built
        raise SchedulerError(f"unpatched ByteScheduler: it loads its C++ engine hook c_lib, which does not run "
                             f"against the MXNet 1.9.1 wheel (patch {PATCHES['hook']}; {type(exc).__name__}) at {root}; "
                             f"reinstall it with: {PACKAGE_HINT}") from None
    missing = [name for name in ("pushpull", "broadcast") if name not in vars(kvstore.ScheduledKVStore)]
    if missing:
        raise SchedulerError(f"unpatched ByteScheduler: its ScheduledKVStore does not schedule {' or '.join(missing)}, "
                             f"so MXNet 1.9.1's trainers would bypass it (patch {PATCHES['pushpull']}) at {root}; "
                             f"reinstall it with: {PACKAGE_HINT}")
    from bytescheduler.common.bytecore import ByteCore

    saved = os.environ.pop("BYTESCHEDULER_CREDIT_TUNING", None)
    try:
        tuning = ByteCore()._credit_tuning
    finally:
        if saved is not None:
            os.environ["BYTESCHEDULER_CREDIT_TUNING"] = saved
    if tuning:
        raise SchedulerError(f"unpatched ByteScheduler: it tunes its credit by default (patch {PATCHES['tuning']}; "
                             f"byteps issue #312: processes that never stop) at {root}; reinstall it with: {PACKAGE_HINT}")
    return {"path": root, "commit": manifest.get("commit", ""), "patches": manifest.get("patches", []),
            "hook": engine_hook.HOOK, "credit_tuning": tuning}


def _manifest(site):
    try:
        with open(os.path.join(site, MANIFEST)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


class Scheduled:
    """The worker's kvstore inside ByteScheduler's ScheduledKVStore, and what went through it."""

    def __init__(self, kv, installed):
        from bytescheduler.common.bytecore import core

        self.installed = installed
        self.inner = kv._kvstore  # MXNet's own store, which ByteScheduler sends through
        self.pushpulls = 0  # the trainer's pushpull calls
        self.tasks = 0  # push-pull tasks ByteScheduler's core received (each pushpull is one, before partitioning)
        self.core = core
        post = core.post

        def counted(task):
            if task.op == "push_pull":
                self.tasks += 1
            return post(task)

        core.post = counted
        self.kv = _counting(kv, self)

    @classmethod
    def wrap(cls, kv):
        """``ScheduledKVStore(kv)``, after check_install(); returns the Scheduled (its ``kv`` is the store to use)."""
        installed = check_install()
        from bytescheduler.mxnet.kvstore import ScheduledKVStore

        return cls(ScheduledKVStore(kv), installed)

    def check(self):
        """Every pushpull reached the scheduler (and there was one)."""
        if self.pushpulls == 0:
            raise SchedulerError("no gradient went through ByteScheduler's kvstore: the trainer bypassed the "
                                 "scheduler (it used another kvstore)")
        if self.tasks < self.pushpulls:
            raise SchedulerError(f"ByteScheduler's core received {self.tasks} of the trainer's {self.pushpulls} "
                                 f"pushpulls: the gradients bypassed the scheduler (its ScheduledKVStore does not "
                                 f"schedule pushpull: patch {PATCHES['pushpull']})")

    @property
    def line(self):
        core = self.core
        return format_line(rank=self.kv.rank, partition=core._partition, credit=int(core._credit_limit),
                           credit_tuning=int(bool(core._credit_tuning)), pushpulls=self.pushpulls, tasks=self.tasks,
                           immediate=int(bool(self.kv._immediate)), commit=self.installed["commit"])


def _counting(kv, scheduled):
    """``kv`` (a ScheduledKVStore) with its pushpull counted, whichever class implements it."""
    base = type(kv)

    class Counted(base):
        def pushpull(self, key, value, out=None, priority=0):
            scheduled.pushpulls += 1
            return base.pushpull(self, key, value, out=out, priority=priority)

    Counted.__name__ = base.__name__
    kv.__class__ = Counted
    return kv


def start(kv):
    """``Scheduled.wrap(kv)``, or the role ends with one line."""
    try:
        return Scheduled.wrap(kv)
    except SchedulerError as exc:
        _end(exc)


def finish(scheduled):
    """The worker's line, once every pushpull is known to have gone through the scheduler; or the role ends with one
    line (after its line, which says what went through)."""
    print(scheduled.line, flush=True)
    try:
        scheduled.check()
    except SchedulerError as exc:
        _end(exc)


def close(scheduled):
    """MXNet's store (the one ByteScheduler sent through) freed now, as a worker's kvstore is when its trainer goes:
    its destructor waits for the engine, meets the other workers at ps-lite's last barrier and stops ps-lite
    (ps::Finalize). The worker's last act: nothing may use the store afterwards.

    Left to Python, it would never be freed: ByteScheduler's core, a module global whose daemon thread is never
    stopped (its shutdown uses Python 2's sys.maxint), keeps every finished task, and each task the store. The
    process would then end with ps-lite's threads running, and C++ aborts it ("terminate called without an active
    exception"). The Python object keeps a null handle, which MXNet frees as a no-op (``delete nullptr``).
    """
    import mxnet as mx

    kv = scheduled.inner
    mx.nd.waitall()
    mx.base.check_call(mx.base._LIB.MXKVStoreFree(kv.handle))
    kv.handle = mx.base.KVStoreHandle()


def _end(exc):
    """One line and exit code 1, at once: left to Python, MXNet's kvstore would wait for the other roles at exit."""
    print(f"SchedulerError: {exc}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)

