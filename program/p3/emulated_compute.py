"""Emulated compute: forward and backward replaced by waits inside MXNet's engine, per layer, in the real order.

Runs inside the engine's interpreter (MXNet and the standard library only).

With ``--compute emulated`` a worker builds the real network (so every
parameter and gradient has its real shape and the kvstore, P3's slicing and
ps-lite's van see the real arrays), but never computes with it; for Sockeye,
which train.py does not build, Gluon parameters holding exactly the profile's
arrays (Sockeye 1.18's, in its key order: train.py's ``--network profile``).
Each iteration pushes, instead:

- forward, layer by layer in key order: a wait operation that reads the layer's
  weights (so it starts only once their pull has put them in place) and a
  running token, and waits the layer's forward time;
- backward, layer by layer in reverse order: a wait operation that waits the
  layer's backward time and *writes* the layer's gradient arrays, so each
  gradient becomes ready (for the Trainer's push at priority -index) when its
  layer's wait ends.

A layer shorter than 2 ms shares the wait before it (``merge_short``), as
MXNet's bulks share one start and one end.

The wait is a Python ``CustomOp``: MXNet runs it on its custom-operator threads
(MXNET_CUSTOM_OP_NUM_THREADS, 16 by default) with the engine's dependencies,
so it holds none of the engine's CPU threads that the kvstore uses. The
gradient's values are left as they are (zero, as Gluon allocates them): only
their shapes and readiness are real.

The waits follow one clock, as a device's stream would. A wait that reads
only the previous wait's token (backward) starts when the previous one ended
on the clock, however late MXNet calls it. A wait that also reads weights
(forward) may have waited for their pull, so it starts at ``max(end of the
previous wait, when MXNet called it minus the dispatch lag)``. The lag is
calibrated at start-up (zero-second waits in a chain) and then followed
during the run, as the mean of recent chained waits' lag (when MXNet called
them after the previous one returned): under load it grows from under 1 ms
to 2 ms or more, and a fixed start-up figure made the lag of hundreds of
operations per iteration add up (ResNet-50 waits ran 0.14 s per iteration
late). A wait for a pull still counts in full.

A wait sleeps (a GPU host: its CPU stays free for the network stack and its
engine's CPU thread free for the kvstore), or with ``--compute-wait busy``
spins on the engine's CPU worker thread (a CPU device: a real operator holds
a core and that thread, and the kvstore's pushes, pulls and copies, queued on
the same first-in first-out thread, wait behind it, as in the real run here).

The profile (``emulated-compute.json`` in the role's folder, written by the
run from reprokit.emulation) gives each layer's trainable array sizes and its
forward and backward seconds for this run's batch; ``--dilation k`` multiplies
every wait by k.
"""
import ctypes
import hashlib
import itertools
import json
import threading
import time

import mxnet as mx

OP_TYPE = "p3_emulated_wait"
CALIBRATION_WAITS = 200


LAG_WEIGHT = 0.05  # of each chained wait's lag in the running mean: about the last 20 waits


class _Clock:
    """One emulated device: the end of the last wait, shared by every wait of the process (one stream)."""

    def __init__(self):
        self.last_end = 0.0
        self.returned = None  # when the previous wait returned to MXNet
        self.lag = 0.0
        self.busy = False  # spin on the engine's CPU thread (a CPU device) instead of asleep (a GPU host's free CPU)
        self.lock = threading.Lock()

    def wait(self, seconds, chained=False):
        """``chained``: the wait reads nothing but the previous wait's token, so it starts where that one ended."""
        now = time.time()
        with self.lock:
            if chained and self.returned is not None:
                self.lag += LAG_WEIGHT * (max(0.0, now - self.returned) - self.lag)
            start = self.last_end if chained else max(self.last_end, now - self.lag)
            end = self.last_end = start + seconds
        if self.busy:
            _busy_on_engine_thread(end)
        else:
            remaining = end - time.time()
            if remaining > 0:
                time.sleep(remaining)
        with self.lock:
            self.returned = time.time()


_BLOCK = bytes(1 << 16)


def _busy_until(end):
    """Hold one core until ``end``: sha256 of 64 KiB blocks (tens of microseconds each), which Python computes
    outside its global lock, so the process's other threads (the trainer, the kvstore's callbacks) run as they
    would beside a real operator's thread."""
    while time.time() < end:
        hashlib.sha256(_BLOCK).digest()


class _Context(ctypes.Structure):
    """mxnet::Context as the C API takes it: device type (1: CPU) and id."""
    _fields_ = [("dev_type", ctypes.c_int), ("dev_id", ctypes.c_int)]


_CPU = _Context(1, 0)
_SYNC_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_SPINS: dict = {}  # id -> (end, done): what each spin pushed to the engine is to do
_SPIN_IDS = itertools.count(1)
SPIN_GRACE_S = 60.0


@_SYNC_FUNC
def _engine_spin(run_context, spin_id):
    end, done = _SPINS.pop(spin_id)
    try:
        _busy_until(end)
    finally:
        done.set()


def _busy_on_engine_thread(end):
    """Spin until ``end`` on the engine's CPU worker thread (a synchronous operation pushed on the CPU, with no
    arrays: it only holds the thread), and return when it has. The kvstore's operations (pinned-CPU context, the same
    first-in first-out worker) queue behind it as behind a real CPU operator; a spin the queue starts late still ends
    at ``end``, as the measured profile counts that queueing in the layer's time."""
    spin_id, done = next(_SPIN_IDS), threading.Event()
    _SPINS[spin_id] = (end, done)
    mx.base.check_call(mx.base._LIB.MXEnginePushSync(
        _engine_spin, ctypes.c_void_p(spin_id), None, ctypes.byref(_CPU), None, 0, None, 0, None, 0,
        mx.base.c_str("p3_emulated_spin")))
    # The kvstore's operations ahead of it are asynchronous and return at once: a spin not run within a minute
    # past its end never will be (an engine stopping), and the wait fails rather than hold the worker forever.
    if not done.wait(timeout=max(0.0, end - time.time()) + SPIN_GRACE_S):
        _SPINS.pop(spin_id, None)
        raise RuntimeError(f"the engine's CPU thread did not run an emulated wait within {SPIN_GRACE_S:.0f} s of "
                           f"its end")


CLOCK = _Clock()


class _Wait(mx.operator.CustomOp):
    def __init__(self, seconds, chained):
        super().__init__()
        self.seconds = seconds
        self.chained = chained

    def forward(self, is_train, req, in_data, out_data, aux):
        CLOCK.wait(self.seconds, self.chained)  # the outputs keep their values: only when they are ready matters

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        pass


@mx.operator.register(OP_TYPE)
class _WaitProp(mx.operator.CustomOpProp):
    """Inputs: what the wait reads (the token, a layer's weights); outputs: the token, then what it writes."""

    def __init__(self, seconds="0", num_in="1", shapes="[[1]]", chained="0"):
        super().__init__(need_top_grad=False)
        self.seconds = float(seconds)
        self.chained = chained == "1"
        self.num_in = int(num_in)
        self.shapes = [tuple(s) for s in json.loads(shapes)]

    def list_arguments(self):
        return [f"in{i}" for i in range(self.num_in)]

    def list_outputs(self):
        return [f"out{i}" for i in range(len(self.shapes))]

    def infer_shape(self, in_shape):
        return in_shape, self.shapes, []

    def create_operator(self, ctx, shapes, dtypes):
        return _Wait(self.seconds, self.chained)


def wait(seconds, reads, writes=()):
    """Push one wait: after ``reads`` are ready, ``seconds`` on the clock, then ``writes`` are written.
    Returns the new token (a fresh one-element array). A wait reading one array (the previous token) is chained."""
    token = mx.nd.zeros((1,))
    shapes = json.dumps([[1]] + [list(a.shape) for a in writes])
    mx.nd.Custom(*reads, op_type=OP_TYPE, seconds=repr(float(seconds)), num_in=str(len(reads)), shapes=shapes,
                 chained="1" if len(reads) == 1 else "0", out=[token, *writes])
    return token


def calibrate(count=CALIBRATION_WAITS):
    """The mean lag between a wait's inputs being ready and MXNet calling it: zero-second waits in a chain."""
    mx.nd.waitall()
    token = mx.nd.zeros((1,))
    token.wait_to_read()
    start = time.time()
    for _ in range(count):
        token = wait(0.0, [token])
    token.wait_to_read()
    CLOCK.lag = (time.time() - start) / count
    return CLOCK.lag


def load_profile(path):
    with open(path) as f:
        return json.load(f)


def layer_params(profile, names, shapes):
    """The trainable parameters' indices (key order) of each profiled layer; the arrays must match by size."""
    sizes = [_size(s) for s in shapes]
    wanted = [int(n) for layer in profile["layers"] for n in layer["arrays"]]
    if wanted != sizes:
        raise ValueError(f"the emulated-compute profile {profile.get('name')!r} does not fit this network: it has "
                         f"{len(wanted)} arrays ({sum(wanted)} elements), the network {len(sizes)} "
                         f"({sum(sizes)} elements, first {names[:1]})")
    groups, i = [], 0
    for layer in profile["layers"]:
        groups.append(list(range(i, i + len(layer["arrays"]))))
        i += len(layer["arrays"])
    return groups


def _size(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


MIN_WAIT_S = 0.002  # a layer shorter than this shares the wait before it (see merge_short)


def merge_short(layers, seconds, floor=MIN_WAIT_S):
    """The waits of one direction, in its order: ``layers`` (parameter indices each) with their ``seconds``. A layer
    shorter than ``floor`` joins the wait before it, which then also reads (forward) or writes (backward) its arrays
    and lasts the sum. As MXNet's bulks do: a bulk starts once all its inputs are ready, its outputs are ready at its
    end, and measured profiles put a bulk's time on its first layer (0 on the rest: 95 of ResNet-50's 107 layers
    here). Each wait costs MXNet 0.6 to 2 ms to call, so 214 of them per iteration made the waits run late."""
    waits = []
    for params, time_s in zip(layers, seconds):
        if waits and time_s < floor:
            waits[-1] = (waits[-1][0] + list(params), waits[-1][1] + time_s)
        else:
            waits.append((list(params), time_s))
    return waits


class EmulatedCompute:
    """Pushes one iteration's waits: forward in key order, backward in reverse, each gradient written at its
    wait's end. ``params``: the trainable Gluon parameters in key order."""

    def __init__(self, profile, params, dilation=1.0, busy=False):
        self.profile = profile
        self.dilation = float(dilation)
        CLOCK.busy = busy
        self.weights = [p.data() for p in params]
        self.grads = [p.grad() for p in params]
        self.groups = layer_params(profile, [p.name for p in params], [w.shape for w in self.weights])
        forward_s = [float(layer["forward_s"]) * self.dilation for layer in profile["layers"]]
        backward_s = [float(layer["backward_s"]) * self.dilation for layer in profile["layers"]]
        self.forward = merge_short(self.groups, forward_s)
        self.backward = merge_short(self.groups[::-1], backward_s[::-1])
        self.token = mx.nd.zeros((1,))
        self.lag = calibrate()

    @property
    def wait_s_per_iteration(self):
        return sum(t for _, t in self.forward) + sum(t for _, t in self.backward)

    @property
    def waits_per_iteration(self):
        return len(self.forward) + len(self.backward)

    def iteration(self):
        """Push forward and backward; returns the forward's end (what the real loop's metric waits for)."""
        token = self.token
        for params, time_s in self.forward:
            token = wait(time_s, [token, *(self.weights[i] for i in params)])
        forward_end = token
        for params, time_s in self.backward:
            token = wait(time_s, [token], [self.grads[i] for i in params])
        self.token = token
        for weight in self.weights:  # Trainer.step refuses stale gradients; these were written by the waits
            weight._fresh_grad = True
        return forward_end
