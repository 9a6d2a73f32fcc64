"""P3 through stock MXNet's public kvstore API, for Gluon and for Module trainers, with its priority reaching the wire.

Runs inside the engine's interpreter (MXNet and the standard library only).

Every trainable parameter is cut into slices (keys) of at most ``slice_size``
elements (p3_slicing.py). What stock MXNet cannot do alone is send them in
priority order: each push goes to ps-lite as soon as it is issued, and from
there it is FIFO. So each slice's push+pull is a task of a credit-based
priority scheduler (p3_scheduler.py, ByteScheduler's idea), driven through
MXNet's engine without blocking the training loop (p3_engine.py):

1. ``step`` pushes, per parameter, a *gate*: an engine operation holding the
   weight and gradient arrays as mutable. The engine starts it when backward
   has written the gradient (and finished reading the weights): the
   parameter's slices become ready tasks. The gate stays pending, so the next
   forward pass's operations on that weight wait for it, while everything
   else (the rest of backward, other layers' forward) runs on.
2. A dedicated Python thread (the only one calling the kvstore) releases ready
   tasks in priority order (layers nearer the input first) while at most
   ``credit`` bytes are in flight, each with one ``kv.pushpull`` on 1-D
   aliases of the gradient and weight slices (zero-copy: the kvstore sends the
   gradient's own memory and copies the answer straight into the weight's, as
   it does for the baseline). Higher-priority slices that become ready later
   overtake those still queued.
3. An engine probe after each pull reports its completion; this frees credit,
   releases more tasks, and once all slices of a parameter are back, its gate
   is completed: the next forward pass may read that weight.

``credit`` 0 releases every slice as soon as it is ready (no scheduling: the
ablation of today's behaviour). The optimizer runs on the servers, as for the
baseline. For experiments, env ``P3_STALE_MS`` sets the least time after which
a slice in flight stops counting against the credit (p3_scheduler; ``0``: never).

Measurement (both variants, timeline on or off): a few engine probes per
parameter and iteration feed p3_timeline.CommMeter. At the end of training each
worker logs one line (``CommReport.finish``)::

    p3-comm: comm_wait_s_per_iter=F overlap=F comm_s_per_iter=F compute_s_per_iter=F iterations=N rank=R timeline=PATH|- variant=baseline|p3

- ``comm_wait_s_per_iter``: seconds per iteration the forward pass waited for
  weights (after backward ended);
- ``overlap``: share (0..1) of communication time hidden behind computation;
- ``comm_s_per_iter``: seconds per iteration from the first gradient ready to
  the last weight in place (union over parameters);
- ``compute_s_per_iter``: forward+backward seconds per iteration, waits excluded;
- ``iterations``: iterations measured (all but the last, whose weights no
  forward pass reads); figures are ``nan`` when it is 0;
- ``timeline``: the Chrome trace written (``-`` when none).

Fields are ``key=value`` separated by spaces; more may be added at the end.
p3_timeline.parse_comm_line parses the line.
"""
import functools
import logging
import os
import time

import mxnet as mx

from p3_engine import Engine, array_alias, data_pointer, pushpull  # shipped beside this file
from p3_scheduler import CommLoop, CreditScheduler, Task
from p3_slicing import plan_slices
from p3_timeline import CommMeter, format_comm_line

DEFAULT_CREDIT = 4 << 20  # bytes in flight per worker (P3_CREDIT); 0: no limit
log = logging.getLogger(__name__)


def timeline_path(path, rank):
    """The worker's trace file: ``{rank}`` in ``path`` is replaced; otherwise ``.worker-R`` goes before the suffix."""
    if not path:
        return ""
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    root, ext = os.path.splitext(path)
    return f"{root}.worker-{rank}{ext or '.json'}"


class CommReport:
    """Engine probes that feed a CommMeter, shared by P3Sync and the baseline's instrumentation.

    The trainer calls ``before_forward()`` and ``after_forward(weights)`` around
    every forward pass; ``finish()`` logs the ``p3-comm:`` line and writes the trace.
    """

    def __init__(self, names, variant, rank=0, timeline="", ready_params=None, engine=None):
        self.variant = variant
        self.rank = rank
        self.timeline = timeline
        self.engine = engine or Engine()
        self.meter = CommMeter(len(names), names, ready_params=ready_params, keep_trace=bool(timeline),
                               pid=rank, label=f"worker {rank} ({variant})")
        self.k = 0  # the iteration being built
        self.finished = None

    def before_forward(self):
        self.meter.forward_pushed(self.k, time.time())

    def after_forward(self, weights):
        """Probe each layer after the forward pass read its weights (the probe writes them, so it runs once the reads end)."""
        k, meter = self.k, self.meter
        for g, params in enumerate(meter.layers):
            self.engine.probe(functools.partial(_record, meter.forward_end, k, g),
                              mutable=[weights[i] for i in params], name="P3ForwardEnd")

    def _next_iteration(self):
        self.k += 1
        if self.k % 16 == 0:
            self.meter.collect()

    def finish(self):
        """Log the p3-comm line (and write the trace) once; returns the summary."""
        if self.finished is not None:
            return self.finished
        summary = self.meter.summary()
        written = "-"
        if self.timeline:
            self.meter.write_trace(self.timeline)
            written = self.timeline
        line = format_comm_line(summary, rank=self.rank, variant=self.variant, timeline=written)
        print(line, flush=True)
        self.finished = summary
        return summary


def _record(method, k, i, t):
    method(k, i, t)


class BaselineProbes(CommReport):
    """The baseline's stock push/pull, observed: gradient ready (first and last parameter), weights in place."""

    def __init__(self, names, rank=0, timeline="", engine=None):
        n = len(names)
        super().__init__(names, "baseline", rank, timeline, ready_params={0, n - 1}, engine=engine)

    def before_step(self, grads):
        k, meter = self.k, self.meter
        for i in sorted({0, len(grads) - 1}):
            self.engine.probe(functools.partial(_record, meter.grad_ready, k, i), const=[grads[i]],
                              name="P3GradReady")

    def after_step(self, weights):
        k, meter = self.k, self.meter
        for i, weight in enumerate(weights):
            self.engine.probe(functools.partial(_record, meter.weight_ready, k, i), const=[weight],
                              name="P3WeightReady")
        self._next_iteration()

    def close(self):
        mx.nd.waitall()
        return self.finish()


class P3Sync(CommReport):
    """Sliced, priority-scheduled push/pull of a fixed list of parameters, in forward (input-first) order."""

    def __init__(self, kv, sizes, slice_size, use_priority, credit=DEFAULT_CREDIT, names=None, timeline="",
                 dtype_bytes=4):
        self.kv = kv
        self.sizes = list(sizes)
        names = list(names) if names else [f"param{i}" for i in range(len(self.sizes))]
        super().__init__(names, "p3", kv.rank, timeline)
        self.slices = plan_slices(self.sizes, slice_size, bool(use_priority))
        self.by_param = [[] for _ in self.sizes]
        for number, s in enumerate(self.slices):
            self.by_param[s.param].append(number)
        # The order backward produces the slices: the same on every worker (p3_scheduler: no deadlock).
        backward = sorted(range(len(self.slices)), key=lambda n: (-self.slices[n].param, self.slices[n].start))
        self._canonical = {number: place for place, number in enumerate(backward)}
        self._keys = [s.key.encode() for s in self.slices]
        self.dtype_bytes = dtype_bytes
        # Release in batches of at least a quarter of the credit: fewer kvstore calls and engine callbacks.
        self.scheduler = CreditScheduler(credit, batch=credit // 4)
        stale_ms = os.environ.get("P3_STALE_MS", "")  # experiments only: 0 keeps every task on the credit
        if stale_ms:
            self.scheduler.min_stale = float(stale_ms) / 1e3 if float(stale_ms) > 0 else None
        self.loop = None
        self.aliases = None  # per slice: (gradient alias, weight alias), made at the first step
        self._bound = {}  # handles of (weights, grads) -> checked to share the aliases' memory
        self._pointers = None
        self._gates = [None] * len(self.sizes)  # comm thread only: the held gate of each parameter
        self._left = [0] * len(self.sizes)
        self._ready_at = [0.0] * len(self.sizes)

    # -- setup (training thread, before the loop starts) --
    def init(self, initial_weights, optimizer, out_weights):
        """Register every slice with rank 0's initial values, then pull them into ``out_weights``."""
        flat = [mx.nd.reshape(weight, shape=(-1,)) for weight in initial_weights]
        bufs = [mx.nd.slice_axis(flat[s.param], axis=0, begin=s.start, end=s.stop) for s in self.slices]
        self.kv.init([s.key for s in self.slices], bufs)  # one call: every init is a barrier
        if optimizer is not None:
            self.kv.set_optimizer(optimizer)
        for index, numbers in enumerate(self.by_param):  # input layer first
            for number in numbers:
                self.kv.pull(self.slices[number].key, out=bufs[number], priority=self.slices[number].priority)
            pulled = bufs[numbers[0]] if len(numbers) == 1 else mx.nd.concat(*[bufs[n] for n in numbers], dim=0)
            target = out_weights[index]
            mx.nd.reshape(pulled, shape=target.shape, out=target)
        mx.nd.waitall()

    def _bind(self, weights, grads):
        """Aliases of every slice of ``weights``/``grads`` (made once; later arrays must share that memory)."""
        handles = tuple(a.handle.value for a in weights) + tuple(g.handle.value for g in grads)
        if handles in self._bound:
            return
        if len(weights) != len(self.sizes) or len(grads) != len(self.sizes):
            raise RuntimeError(f"P3: {len(weights)} weights and {len(grads)} gradients for {len(self.sizes)} "
                               "registered parameters")
        for i, (w, g) in enumerate(zip(weights, grads)):
            if w.size != self.sizes[i] or g.size != self.sizes[i] or w.stype != "default" or g.stype != "default":
                raise RuntimeError(f"P3: parameter {i} ({self.meter.names[i]}) is not a dense array of "
                                   f"{self.sizes[i]} elements")
        for array in list(weights) + list(grads):
            data_pointer(array)  # an MKLDNN layout goes back to the default one first (waits only then)
        whole = [(array_alias(w), array_alias(g)) for w, g in zip(weights, grads)]
        pointers = [(data_pointer(w), data_pointer(g)) for w, g in whole]
        if self.aliases is None:
            self.aliases = []
            for s in self.slices:
                w, g = weights[s.param], grads[s.param]
                if len(self.by_param[s.param]) == 1:
                    self.aliases.append(whole[s.param][::-1])  # (gradient, weight)
                else:
                    self.aliases.append((array_alias(g, s.start, s.stop), array_alias(w, s.start, s.stop)))
            self._pointers = pointers
            self.loop = CommLoop(on_error=self._fail, on_idle=self._idle, on_tick=self._tick)
        elif pointers != self._pointers:
            raise RuntimeError("P3: a module's parameters or gradients do not share memory with those of the "
                               "first module (BucketingModule shares them; separate Modules cannot share P3)")
        self._bound[handles] = True

    # -- every iteration (training thread) --
    def step(self, weights, grads):
        """Hand this iteration's gradients to the scheduler; returns at once (the engine orders the rest)."""
        if self.loop is not None and self.loop.error is not None:
            raise RuntimeError("P3 communication failed") from self.loop.error
        self._bind(weights, grads)
        k = self.k
        for i in reversed(range(len(self.sizes))):  # backward produces the output layer's first
            self.engine.hold(functools.partial(self._gate_started, k, i), mutable=[weights[i], grads[i]],
                             priority=self.slices[self.by_param[i][0]].priority, name="P3Gate")
        self._next_iteration()

    # -- engine threads: hand over to the communication thread --
    def _gate_started(self, k, i, release, t):
        self.loop.submit(self._on_ready, k, i, release, t)

    def _pulled(self, task, t):
        self.loop.submit(self._on_done, task, t)

    @staticmethod
    def _pushed(task, t):
        task.payload[2] = t

    # -- the communication thread --
    def _on_ready(self, k, i, release, t):
        self._gates[i] = release
        self._left[i] = len(self.by_param[i])
        self._ready_at[i] = t
        self.meter.grad_ready(k, i, t)
        tasks = []
        for number in self.by_param[i]:
            s = self.slices[number]
            tasks.append(Task(s.key, s.priority, s.size * self.dtype_bytes, payload=[k, number, None],
                              order=(k, self._canonical[number])))
        self._start(self.scheduler.post(*tasks))

    def _start(self, tasks):
        """One kvstore call for the tasks released together; a probe for each pull's completion."""
        if not tasks:
            return
        numbers = [task.payload[1] for task in tasks]
        weights = [self.aliases[n][1] for n in numbers]
        pushpull(self.kv, [self._keys[n] for n in numbers], [self.aliases[n][0] for n in numbers], weights,
                 priority=tasks[0].priority)
        if self.meter.keep_trace:  # the server's answer is back in the gradient's memory
            for task, number in zip(tasks, numbers):
                self.engine.probe(functools.partial(self._pushed, task), const=[self.aliases[number][0]],
                                  name="P3PushDone")
        # One probe per task: a task's completion must never wait for another's (p3_scheduler: no deadlock).
        for task, weight in zip(tasks, weights):
            self.engine.probe(functools.partial(self._pulled, task), const=[weight], name="P3PullDone")

    def _on_done(self, task, t):
        k, number, push_done = task.payload
        released = self.scheduler.complete(task)
        s = self.slices[number]
        self.meter.slice_done(k, s.param, s.key, task.nbytes, s.priority, self._ready_at[s.param],
                              task.released, push_done, t)
        self._left[s.param] -= 1
        if self._left[s.param] == 0:
            release, self._gates[s.param] = self._gates[s.param], None
            self.meter.weight_ready(k, s.param, time.time())
            release()
        self._start(released)

    def _tick(self):
        """More ticks are wanted while slices wait in the queue."""
        self._start(self.scheduler.tick())
        return self.scheduler.queued > 0

    def _idle(self):
        """A minute without any notice: say what is pending (a hang's first clue)."""
        if not self.scheduler.idle():
            log.warning("P3: no communication finished for %.0f s: %s; gates held: %s", self.loop.idle_s,
                        self.scheduler.state(), [i for i, g in enumerate(self._gates) if g is not None][:16])

    def _fail(self, error):
        """Something failed in the communication thread: release every gate so the engine never hangs."""
        for i, release in enumerate(self._gates):
            if release is not None:
                self._gates[i] = None
                release()

    # -- end --
    def close(self, timeout=120.0):
        """Wait for the last iteration's communication, stop the thread, log the p3-comm line."""
        mx.nd.waitall()
        if self.loop is not None:
            if not self.scheduler.wait_idle(timeout):
                log.error("P3: communication still in flight after %s s", timeout)
            self.loop.close(timeout)
            self.engine.closed = True  # any later callback releases its operation at once
            loop = self.loop
            logging.info("P3: %d notices to the communication thread, waiting %.2f ms on average (at most %.1f ms); "
                         "%d slices released beyond the credit, %d taken off it (waiting for other workers)", loop.notices,
                         1e3 * loop.lag_total / max(1, loop.notices), 1e3 * loop.lag_max, self.scheduler.beyond_credit,
                         self.scheduler.stale_tasks)
            if self.loop.error is not None:
                raise RuntimeError("P3 communication failed") from self.loop.error
        return self.finish()


def use_p3_in_modules(slice_size, use_priority, credit=DEFAULT_CREDIT, timeline=""):
    """Make mx.mod.Module (and so BucketingModule) synchronise through P3Sync instead of one key per parameter.

    Module's kvstore path goes through two functions of mxnet.model that it
    imports by name; these replacements keep their signatures. One P3Sync per
    kvstore serves every bucket's module, since they share parameters by name.
    Returns {id(kvstore): (P3Sync, names)}; call ``close_module_syncs`` at the end.
    """
    import mxnet.module.module as module_impl

    syncs = {}
    state = {"inference": False}

    def initialize(kvstore, param_arrays, arg_params, param_names, update_on_kvstore):
        if not update_on_kvstore:
            raise RuntimeError("P3 needs the optimizer on the servers (update_on_kvstore); "
                               "unset MXNET_UPDATE_ON_KVSTORE")
        sync = P3Sync(kvstore, [arg_params[name].size for name in param_names], slice_size, use_priority,
                      credit=credit, names=param_names, timeline=timeline_path(timeline, kvstore.rank))
        # The optimizer is set by Module right after this call, as for the baseline.
        sync.init([arg_params[name] for name in param_names], None, [devs[0] for devs in param_arrays])
        syncs[id(kvstore)] = (sync, list(param_names))
        logging.info("P3: %d slices of at most %s elements, priority %s, credit %s bytes", len(sync.slices),
                     slice_size or "unlimited", "on" if use_priority else "off", credit or "unlimited")

    def update(param_arrays, grad_arrays, kvstore, param_names):
        sync, names = syncs[id(kvstore)]
        if list(param_names) != names:
            raise RuntimeError("P3: a module's parameters differ from those registered with the kvstore")
        if any(devs[0] is None for devs in grad_arrays):
            raise RuntimeError("P3 on Module needs a gradient for every parameter (no fixed parameters)")
        if len(param_arrays[0]) != 1:
            raise RuntimeError("P3 on Module supports one device per worker")
        weights = [devs[0] for devs in param_arrays]
        if state["inference"]:
            _settle_layouts(weights)
            state["inference"] = False
        sync.step(weights, [devs[0] for devs in grad_arrays])

    module_impl._initialize_kvstore = initialize
    module_impl._update_params_on_kvstore = update
    _hook_module_forward(lambda: [s for s, _ in syncs.values()], state)
    return syncs


def _settle_layouts(weights):
    """After an inference pass: wait until MKLDNN has put every weight back in the default layout.

    MKLDNN reorders weights in place into blocked layouts for inference, and the
    next training pass reorders them back, asynchronously. P3 writes pulled
    weights straight into their memory, so before the next gates it waits for
    that (once per evaluation, not per iteration).
    """
    mx.nd.waitall()
    for weight in weights:
        data_pointer(weight)


def _hook_module_forward(reports, state):
    """Module.forward calls before_forward/after_forward of every report (training passes only)."""
    import mxnet.module.module as module_impl

    original = getattr(module_impl.Module.forward, "__wrapped__", module_impl.Module.forward)

    @functools.wraps(original)
    def forward(self, data_batch, is_train=None):
        train = self.for_training if is_train is None else is_train
        if not train:
            state["inference"] = True
            return original(self, data_batch, is_train=is_train)
        active = reports()
        for report in active:
            report.before_forward()
        result = original(self, data_batch, is_train=is_train)
        if active:
            weights = [devs[0] for devs in self._exec_group.param_arrays]
            for report in active:
                if len(weights) == report.meter.n:
                    report.after_forward(weights)
        return result

    module_impl.Module.forward = forward


def instrument_modules(timeline=""):
    """The baseline's Module path with BaselineProbes (no change to what it sends). Returns {id(kvstore): probes}."""
    import mxnet.module.module as module_impl

    stock = module_impl._update_params_on_kvstore
    reports = {}
    state = {"inference": False}

    def update(param_arrays, grad_arrays, kvstore, param_names):
        report = reports.get(id(kvstore))
        if report is None:
            report = reports[id(kvstore)] = BaselineProbes(list(param_names), kvstore.rank,
                                                           timeline_path(timeline, kvstore.rank))
        weights = [devs[0] for devs in param_arrays]
        grads = [devs[0] for devs in grad_arrays]
        if report.meter.n == len(weights) and all(g is not None for g in grads):
            report.before_step(grads)
            stock(param_arrays, grad_arrays, kvstore, param_names)
            report.after_step(weights)
        else:
            stock(param_arrays, grad_arrays, kvstore, param_names)

    module_impl._update_params_on_kvstore = update
    _hook_module_forward(lambda: list(reports.values()), state)
    return reports
