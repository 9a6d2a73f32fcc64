"""P3's two mechanisms through stock MXNet's public kvstore API, for Gluon and for Module trainers.

Runs inside the engine's interpreter (MXNet and the standard library only).

Every trainable parameter is cut into slices (keys) of at most ``slice_size``
elements; gradient slices are pushed output-layer first, as backward produces
them, and weight slices are pulled back with their layer's priority, so layers
nearer the input arrive first. MXNet's engine tracks each array on its own: a
push starts when its gradient is ready (overlapping the rest of backward), and
the next forward pass of a layer waits only for that layer's weights. The
optimizer runs on the servers, as it does for the baseline.
"""
import logging

import mxnet as mx

from p3_slicing import plan_slices  # shipped beside this file


class P3Sync:
    """Sliced, prioritised push/pull of a fixed list of parameters, in forward (input-first) order."""

    def __init__(self, kv, sizes, slice_size, use_priority):
        self.kv = kv
        self.sizes = list(sizes)
        self.slices = plan_slices(self.sizes, slice_size, bool(use_priority))
        self.by_param = [[] for _ in self.sizes]
        for number, s in enumerate(self.slices):
            self.by_param[s.param].append(number)
        # No views anywhere: the kvstore refuses them, and MKLDNN keeps weights in blocked layouts.
        # Operators write into these buffers instead; MXNet's engine tracks each array on its own.
        self.grad_flat = [mx.nd.zeros((size,)) for size in self.sizes]
        self.weight_flat = [mx.nd.zeros((size,)) for size in self.sizes]
        self.grad_bufs, self.weight_bufs = [], []
        for s in self.slices:
            whole = len(self.by_param[s.param]) == 1
            self.grad_bufs.append(self.grad_flat[s.param] if whole else mx.nd.zeros((s.size,)))
            self.weight_bufs.append(self.weight_flat[s.param] if whole else mx.nd.zeros((s.size,)))

    def init(self, initial_weights, optimizer, out_weights):
        """Register every slice with rank 0's initial values, then pull them into ``out_weights``."""
        for index, weight in enumerate(initial_weights):
            mx.nd.reshape(weight, shape=(-1,), out=self.weight_flat[index])
            self._split(self.weight_flat, self.weight_bufs, index)
        self.kv.init([s.key for s in self.slices], self.weight_bufs)  # one call: every init is a barrier
        if optimizer is not None:
            self.kv.set_optimizer(optimizer)
        self.pull(out_weights)  # every worker starts from rank 0's initial weights

    def _split(self, flat, bufs, index):
        for number in self.by_param[index]:
            if bufs[number] is not flat[index]:
                s = self.slices[number]
                mx.nd.slice_axis(flat[index], axis=0, begin=s.start, end=s.stop, out=bufs[number])

    def pull(self, out_weights):
        for index, numbers in enumerate(self.by_param):  # input layer first
            for number in numbers:
                self.kv.pull(self.slices[number].key, out=self.weight_bufs[number],
                             priority=self.slices[number].priority)
            if len(numbers) > 1:
                mx.nd.concat(*[self.weight_bufs[n] for n in numbers], dim=0, out=self.weight_flat[index])
            target = out_weights[index]
            mx.nd.reshape(self.weight_flat[index], shape=target.shape, out=target)

    def step(self, weights, grads):
        """Push every gradient slice (output layer first), then pull every weight slice (input layer first)."""
        for index in reversed(range(len(self.sizes))):  # backward produces the output layer's first
            mx.nd.reshape(grads[index], shape=(-1,), out=self.grad_flat[index])
            self._split(self.grad_flat, self.grad_bufs, index)
            for number in reversed(self.by_param[index]):
                self.kv.push(self.slices[number].key, self.grad_bufs[number],
                             priority=self.slices[number].priority)
        self.pull(weights)


def use_p3_in_modules(slice_size, use_priority):
    """Make mx.mod.Module (and so BucketingModule) synchronise through P3Sync instead of one key per parameter.

    Module's kvstore path goes through two functions of mxnet.model that it
    imports by name; these replacements keep their signatures. One P3Sync per
    kvstore serves every bucket's module, since they share parameters by name.
    """
    import mxnet.module.module as module_impl

    syncs = {}

    def initialize(kvstore, param_arrays, arg_params, param_names, update_on_kvstore):
        if not update_on_kvstore:
            raise RuntimeError("P3 needs the optimizer on the servers (update_on_kvstore); "
                               "unset MXNET_UPDATE_ON_KVSTORE")
        sync = P3Sync(kvstore, [arg_params[name].size for name in param_names], slice_size, use_priority)
        # The optimizer is set by Module right after this call, as for the baseline.
        sync.init([arg_params[name] for name in param_names], None, [devs[0] for devs in param_arrays])
        syncs[id(kvstore)] = (sync, list(param_names))
        logging.info("P3: %d slices of at most %s elements, priority %s", len(sync.slices),
                     slice_size or "unlimited", "on" if use_priority else "off")

    def update(param_arrays, grad_arrays, kvstore, param_names):
        sync, names = syncs[id(kvstore)]
        if list(param_names) != names:
            raise RuntimeError("P3: a module's parameters differ from those registered with the kvstore")
        if any(devs[0] is None for devs in grad_arrays):
            raise RuntimeError("P3 on Module needs a gradient for every parameter (no fixed parameters)")
        if len(param_arrays[0]) != 1:
            raise RuntimeError("P3 on Module supports one device per worker")
        sync.step([devs[0] for devs in param_arrays], [devs[0] for devs in grad_arrays])

    module_impl._initialize_kvstore = initialize
    module_impl._update_params_on_kvstore = update
    return syncs
