"""Python callbacks inside MXNet's dependency engine, through ctypes on the stock libmxnet.so.

Why ctypes and not a C extension: the stock 1.9.1 wheel exports MXEnginePushAsyncND
and MXEnginePushSyncND and ships their header, so no build step (and no compiler
on every host) is needed; one Python callback per engine operation (~20 us) is
cheap next to a layer's computation.

Two kinds of operations, both ordered by the engine like any other by the
NDArrays they read and write:

- ``hold``: an asynchronous operation. When its arrays are ready the engine
  starts it and ``on_start(release, t)`` is called; the operation (and every
  later operation on its mutable arrays) stays pending until ``release()`` is
  called, from any Python thread, exactly once. Independent operations run.
- ``probe``: a synchronous operation whose ``on_run(t)`` is called when its
  arrays are ready; it finishes when the callback returns.

Callbacks run on the engine's threads: they must return at once, never wait on
the engine and never call the kvstore (hand work to a Python thread instead).
They run on the engine's prioritised CPU threads (FnProperty kCPUPrioritized),
so they never queue behind, nor hold up, the computation's worker.
"""
import ctypes
import itertools
import logging
import threading
import time

import mxnet as mx

log = logging.getLogger(__name__)

_LIB = mx.base._LIB
_ASYNC_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)  # (rctx, on_complete, param)
_SYNC_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)  # (rctx, param)
_COMPLETE_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)  # (engine, param, error)


class _CallbackOnComplete(ctypes.Structure):
    """mxnet::engine::CallbackOnComplete (include/mxnet/engine.h): three pointers."""
    _fields_ = [("callback", ctypes.c_void_p), ("engine", ctypes.c_void_p), ("param", ctypes.c_void_p)]


class _Context(ctypes.Structure):
    """mxnet::Context: DeviceType dev_type (kCPU = 1), int32 dev_id."""
    _fields_ = [("dev_type", ctypes.c_int32), ("dev_id", ctypes.c_int32)]


K_CPU_PRIORITIZED = 3  # mxnet::FnProperty::kCPUPrioritized
_CPU = _Context(1, 0)
_PROP = ctypes.c_int(K_CPU_PRIORITIZED)
_NAMES = {}  # operation names, kept alive as long as the process (the engine may keep the pointer)


def _name(name):
    raw = _NAMES.get(name)
    if raw is None:
        raw = _NAMES[name] = ctypes.c_char_p(name.encode())
    return raw


def _handles(arrays):
    return (mx.base.NDArrayHandle * len(arrays))(*[a.handle for a in arrays])


class Release:
    """Completes a held operation; callable once, from any thread."""

    __slots__ = ("_fn", "_engine", "_param", "_lock", "done")

    def __init__(self, callback):
        self._fn = _COMPLETE_FUNC(callback.callback)
        self._engine = callback.engine
        self._param = callback.param
        self._lock = threading.Lock()
        self.done = False

    def __call__(self):
        with self._lock:
            if self.done:
                return False
            self.done = True
        self._fn(self._engine, self._param, None)  # ctypes drops the GIL for the call
        return True


class Engine:
    """Pushes ``hold`` and ``probe`` operations; one ctypes callback of each kind serves them all."""

    def __init__(self, clock=time.time):
        if mx.context.current_context().device_type != "cpu":
            raise RuntimeError("P3's engine bridge runs on CPU contexts only")
        self.clock = clock
        self._handlers = {}
        self._tokens = itertools.count(1)
        self.closed = False
        # The engine calls these from its threads: they must live as long as the process.
        self._async = _ASYNC_FUNC(self._on_async)
        self._sync = _SYNC_FUNC(self._on_sync)
        _KEEP.append(self)

    def hold(self, on_start, mutable, const=(), priority=0, name="P3Gate"):
        token = next(self._tokens)
        self._handlers[token] = on_start
        mx.base.check_call(_LIB.MXEnginePushAsyncND(
            self._async, ctypes.c_void_p(token), None, ctypes.byref(_CPU),
            _handles(const), len(const), _handles(mutable), len(mutable),
            ctypes.byref(_PROP), ctypes.c_int(priority), _name(name), ctypes.c_bool(False)))
        return token

    def probe(self, on_run, const=(), mutable=(), priority=0, name="P3Probe"):
        token = next(self._tokens)
        self._handlers[token] = on_run
        mx.base.check_call(_LIB.MXEnginePushSyncND(
            self._sync, ctypes.c_void_p(token), None, ctypes.byref(_CPU),
            _handles(const), len(const), _handles(mutable), len(mutable),
            ctypes.byref(_PROP), ctypes.c_int(priority), _name(name)))
        return token

    @property
    def pending(self):
        return len(self._handlers)

    def _on_async(self, rctx, on_complete, param):
        t = self.clock()
        callback = _CallbackOnComplete.from_address(on_complete)  # a copy: the engine's lives on its stack
        release = Release(_CallbackOnComplete(callback.callback, callback.engine, callback.param))
        handler = self._handlers.pop(param, None)
        if handler is None or self.closed:
            release()
            return
        try:
            handler(release, t)
        except BaseException:  # never leave the engine waiting on an operation nobody will release
            log.exception("P3 engine callback failed; releasing its operation")
            release()

    def _on_sync(self, rctx, param):
        t = self.clock()
        handler = self._handlers.pop(param, None)
        if handler is None or self.closed:
            return
        try:
            handler(t)
        except BaseException:
            log.exception("P3 engine probe failed")


_KEEP = []  # Engine objects (and their ctypes callbacks) live until the process ends


def pushpull(kv, keys, values, outs, priority=0):
    """``kv.pushpull(keys, values, out=outs)`` for string keys (bytes) and 1-D dense NDArrays, minus Python's checks.

    The same C call as mxnet.kvstore.KVStore.pushpull makes, without its
    per-call argument conversion (tens of microseconds per slice).
    """
    n = len(keys)
    ckeys = (ctypes.c_char_p * n)(*keys)
    mx.base.check_call(_LIB.MXKVStorePushPullEx(
        kv.handle, ctypes.c_uint(n), ckeys, ctypes.c_uint(n), ckeys,
        (mx.base.NDArrayHandle * n)(*[v.handle for v in values]),
        (mx.base.NDArrayHandle * n)(*[o.handle for o in outs]), ctypes.c_int(priority)))


def array_alias(array, start=None, stop=None):
    """A 1-D NDArray over ``array``'s memory (elements start..stop of its flat view) with its own engine variable.

    The engine does not order operations on the alias with those on ``array``:
    the caller must (P3Sync holds ``array`` while the kvstore works on the
    alias). Waits until ``array`` can be written.
    """
    flat = array.reshape((-1,))
    if start is not None:
        flat = flat[start:stop]
    return mx.nd.from_dlpack(mx.nd.to_dlpack_for_write(flat))


def data_pointer(array):
    """The address of ``array``'s first element (reorders an MKLDNN layout to the default one, and waits)."""
    pointer = ctypes.c_void_p()
    mx.base.check_call(_LIB.MXNDArrayGetData(array.handle, ctypes.byref(pointer)))
    return pointer.value
