"""The parameter server's communication, observed from the worker: for Gluon and for Module trainers alike.

Runs inside the engine's interpreter (MXNet and the standard library only).

Nothing here changes what the kvstore sends: P3 is MXNet 1.9.1's own
(DMLC_PS_VAN_TYPE=p3, see role_van.py), the baselines are stock. Engine probes
(engine_probe.py) record, per iteration, when backward wrote the gradients
(first and last parameter), when each updated weight was in place and when
forward finished reading each layer; p3_timeline.CommMeter turns these into
figures. At the end of training each worker logs one line
(``CommProbes.finish``)::

    p3-comm: comm_wait_s_per_iter=F overlap=F comm_s_per_iter=F compute_s_per_iter=F iterations=N \
        priority=0|1 rank=R slice_threshold=N|- timeline=PATH|- update_on=servers|workers van=zmq|p3 \
        variant=NAME water_mark=N|-

- ``comm_wait_s_per_iter``: seconds per iteration the forward pass waited for
  weights (after backward ended);
- ``overlap``: share (0..1) of communication time hidden behind computation;
- ``comm_s_per_iter``: seconds per iteration from the first gradient ready to
  the last weight in place (union over parameters);
- ``compute_s_per_iter``: forward+backward seconds per iteration, waits excluded;
- ``iterations``: iterations measured (all but the last, whose weights no
  forward pass reads); figures are ``nan`` when it is 0;
- the mechanism that ran, as the worker saw it: the ps-lite van, where the
  optimizer ran (the trainer's own decision: MXNet's P3 store cannot update on
  the servers), P3's slice bound and water mark from the environment, and
  whether priorities reached the kvstore;
- ``timeline``: the Chrome trace written (``-`` when none).

Fields are ``key=value`` separated by spaces; more may be added at the end.
p3_timeline.parse_comm_line parses the line.
"""
import functools
import os
import time

import mxnet as mx

from engine_probe import Engine  # shipped beside this file
from reprokit.wire.p3_timeline import CommMeter, format_comm_line  # shipped beside this file, in reprokit/wire/


def timeline_path(path, rank):
    """The worker's trace file: ``{rank}`` in ``path`` is replaced; otherwise ``.worker-R`` goes before the suffix."""
    if not path:
        return ""
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    root, ext = os.path.splitext(path)
    return f"{root}.worker-{rank}{ext or '.json'}"


def mechanism(update_on_kvstore, priority, scheduler=""):
    """What ran, for the p3-comm line: van, optimizer placement, P3's slice bound and water mark, priority, and the
    kvstore's scheduler when there is one (``scheduler=bytescheduler``)."""
    van = os.environ.get("DMLC_PS_VAN_TYPE", "") or "zmq"
    p3 = van == "p3"
    return {"van": van, "update_on": "servers" if update_on_kvstore else "workers",
            "slice_threshold": os.environ.get("MXNET_KVSTORE_SLICE_THRESHOLD", "40000") if p3 else "-",
            "water_mark": os.environ.get("DMLC_PS_WATER_MARK", "-") if p3 else "-",
            "priority": 1 if priority else 0, **({"scheduler": scheduler} if scheduler else {})}


FLAT_PRIORITY = -1  # below ps-lite's control messages and kvstore inits (priority 0), which must keep their order


def flatten_priorities():
    """Every push and pull of this process at one priority (P3_PRIORITY=0: the paper's slicing-only ablation).

    Gluon's Trainer and Module pass ``priority=-index``; the class's methods are
    replaced, so both trainers (and every kvstore they make) are covered. Not 0:
    P3's van sends from a priority queue that keeps no order among equals, and
    ps-lite's barriers and the kvstore's initial pushes go at 0. With every push
    at 0 too, the two workers ended with different parameters in 2 of 3 runs
    here (resnet, 2 workers, 2 servers); at -1, in none of 3.
    """
    kvstore_class = mx.kvstore.KVStore
    for name in ("push", "pull", "pushpull"):
        method = getattr(kvstore_class, name)

        def at_priority_zero(self, *args, _method=method, **kwargs):
            kwargs["priority"] = FLAT_PRIORITY
            return _method(self, *args, **kwargs)

        setattr(kvstore_class, name, functools.wraps(method)(at_priority_zero))


class CommProbes:
    """Engine probes around each step that feed a CommMeter.

    The trainer calls ``before_forward()`` and ``after_forward(weights)`` around
    every forward pass, ``before_step(grads)`` and ``after_step(weights)``
    around the kvstore step; ``close(mechanism)`` logs the p3-comm line (and
    writes the trace).
    """

    def __init__(self, names, variant, rank=0, timeline="", engine=None):
        n = len(names)
        self.variant = variant
        self.rank = rank
        self.timeline = timeline
        self.engine = engine or Engine()
        # Gradients are observed at the first and last parameter (backward's first and last output), or with a
        # timeline at every layer, which also measures each layer's compute (the trace's compute_profile).
        self.meter = CommMeter(n, names, ready_params=None if timeline else {0, n - 1}, keep_trace=bool(timeline),
                               pid=rank, label=f"worker {rank} ({variant})")
        self.sizes = None  # elements per parameter, known once the step sees the gradients
        self.k = 0  # the iteration being built
        self.finished = None

    def before_forward(self):
        self.meter.forward_pushed(self.k, time.time())

    def after_forward(self, weights):
        """Probe each layer after the forward pass read its weights (the probe writes them, so it runs once the reads end)."""
        k, meter = self.k, self.meter
        for g, params in enumerate(meter.layers):
            self.engine.probe(functools.partial(_record, meter.forward_end, k, g),
                              mutable=[weights[i] for i in params], name="ForwardEnd")

    def before_step(self, grads):
        k, meter = self.k, self.meter
        if self.sizes is None:
            self.sizes = [int(g.size) for g in grads]
        if meter.profile_layers:  # one probe per layer, once all its gradients are written
            for params in meter.layers:
                self.engine.probe(functools.partial(_record_layer, meter.grad_ready, k, params),
                                  const=[grads[i] for i in params], name="GradReady")
            return
        for i in sorted({0, len(grads) - 1}):
            self.engine.probe(functools.partial(_record, meter.grad_ready, k, i), const=[grads[i]], name="GradReady")

    def after_step(self, weights):
        k, meter = self.k, self.meter
        for i, weight in enumerate(weights):
            self.engine.probe(functools.partial(_record, meter.weight_ready, k, i), const=[weight],
                              name="WeightReady")
        self.k += 1
        if self.k % 16 == 0:
            self.meter.collect()

    def close(self, ran):
        """Wait for the last iteration, log the p3-comm line (``ran``: ``mechanism()``) once; returns the summary."""
        if self.finished is not None:
            return self.finished
        mx.nd.waitall()
        summary = self.meter.summary()
        written = "-"
        if self.timeline:
            measured = self.meter.layer_profile(self.sizes) if self.sizes else None
            self.meter.write_trace(self.timeline, {"compute_profile": measured} if measured else None)
            written = self.timeline
        print(format_comm_line(summary, rank=self.rank, variant=self.variant, timeline=written, **ran), flush=True)
        self.finished = summary
        return summary


def _record(method, k, i, t):
    method(k, i, t)


def _record_layer(method, k, params, t):
    for i in params:
        method(k, i, t)


def _hook_module_forward(reports):
    """Module.forward calls before_forward/after_forward of every report (training passes only)."""
    import mxnet.module.module as module_impl

    original = getattr(module_impl.Module.forward, "__wrapped__", module_impl.Module.forward)

    @functools.wraps(original)
    def forward(self, data_batch, is_train=None):
        train = self.for_training if is_train is None else is_train
        if not train:
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


def instrument_modules(variant, timeline=""):
    """Module's kvstore step (on the servers or on the workers) with CommProbes; returns {id(kvstore): probes}.

    Module imports both update functions of mxnet.model by name; these
    replacements keep their signatures and call them unchanged.
    """
    import mxnet.module.module as module_impl

    on_servers, on_workers = module_impl._update_params_on_kvstore, module_impl._update_params
    reports = {}

    def probed(kvstore, param_arrays, grad_arrays, param_names, step):
        if kvstore is None:
            return step()
        report = reports.get(id(kvstore))
        if report is None:
            report = reports[id(kvstore)] = CommProbes(list(param_names), variant, kvstore.rank,
                                                       timeline_path(timeline, kvstore.rank))
        weights = [devs[0] for devs in param_arrays]
        grads = [devs[0] for devs in grad_arrays]
        if report.meter.n != len(weights) or any(g is None for g in grads):
            return step()
        report.before_step(grads)
        step()
        report.after_step(weights)

    def update_on_servers(param_arrays, grad_arrays, kvstore, param_names):
        probed(kvstore, param_arrays, grad_arrays, param_names,
               lambda: on_servers(param_arrays, grad_arrays, kvstore, param_names))

    def update_on_workers(param_arrays, grad_arrays, updater, num_device, kvstore=None, param_names=None):
        probed(kvstore, param_arrays, grad_arrays, param_names,
               lambda: on_workers(param_arrays, grad_arrays, updater, num_device, kvstore, param_names))

    module_impl._update_params_on_kvstore = update_on_servers
    module_impl._update_params = update_on_workers
    _hook_module_forward(lambda: list(reports.values()))
    return reports
