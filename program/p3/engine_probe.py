"""Probes inside MXNet's dependency engine: a Python callback when some NDArrays are ready, through ctypes.

The timeline (reprokit.wire.p3_timeline) needs to know when backward wrote a gradient,
when the kvstore put a weight back and when forward finished reading a layer.
The engine knows; a probe is a synchronous engine operation reading (or
writing) those arrays, ordered by the engine like any other, whose
``on_run(t)`` is called when they are ready. It observes and changes nothing
the kvstore sends, for every variant alike.

Why ctypes and not a C extension: the stock 1.9.1 wheel exports
MXEnginePushSyncND and ships its header, so no build step (and no compiler on
every host) is needed; one callback (~20 us) is cheap next to a layer's
computation. Callbacks run on the engine's prioritised CPU threads
(FnProperty kCPUPrioritized), so they never queue behind the computation; they
must return at once and never wait on the engine.
"""
import ctypes
import itertools
import logging
import time

import mxnet as mx

log = logging.getLogger(__name__)

_LIB = mx.base._LIB
_SYNC_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)  # (rctx, param)


class _Context(ctypes.Structure):
    """mxnet::Context: DeviceType dev_type (kCPU = 1), int32 dev_id."""
    _fields_ = [("dev_type", ctypes.c_int32), ("dev_id", ctypes.c_int32)]


K_CPU_PRIORITIZED = 3  # mxnet::FnProperty::kCPUPrioritized
_CPU = _Context(1, 0)
_PROP = ctypes.c_int(K_CPU_PRIORITIZED)
_NAMES: dict[str, ctypes.c_char_p] = {}  # operation names, kept alive as long as the process (the engine may keep the pointer)


def _name(name):
    raw = _NAMES.get(name)
    if raw is None:
        raw = _NAMES[name] = ctypes.c_char_p(name.encode())
    return raw


def _handles(arrays):
    return (mx.base.NDArrayHandle * len(arrays))(*[a.handle for a in arrays])


class Engine:
    """Pushes ``probe`` operations; one ctypes callback serves them all."""

    def __init__(self, clock=time.time):
        if mx.context.current_context().device_type != "cpu":
            raise RuntimeError("the engine probes run on CPU contexts only")
        self.clock = clock
        self._handlers = {}
        self._tokens = itertools.count(1)
        self.closed = False
        # The engine calls these from its threads: they must live as long as the process.
        self._sync = _SYNC_FUNC(self._on_sync)
        _KEEP.append(self)

    def probe(self, on_run, const=(), mutable=(), priority=0, name="CommProbe"):
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

    def _on_sync(self, rctx, param):
        t = self.clock()
        handler = self._handlers.pop(param, None)
        if handler is None or self.closed:
            return
        try:
            handler(t)
        except BaseException:
            log.exception("engine probe failed")


_KEEP: list[object] = []  # Engine objects (and their ctypes callbacks) live until the process ends
