"""Data-parallel training of one role of a parameter-server job on stock MXNet.

Runs inside the engine's own interpreter, so it imports only MXNet, NumPy and
the standard library. Every role (scheduler, server, worker) runs this same
file: for scheduler and server roles, importing mxnet starts the parameter
server and exits when the job ends (MXNet's kvstore_server does that at
import time, driven by DMLC_ROLE).

Workers log MXNet's own Speedometer lines, so one log parser serves these runs
and the original artifact's logs alike.
"""
import argparse
import hashlib
import logging
import os
import sys
import time

import mxnet as mx  # starts and finishes the server/scheduler roles at import
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon.model_zoo import vision

from p3_slicing import DEFAULT_SLICE_SIZE, plan_slices  # shipped beside this file

IMAGENET_TRAIN_IMAGES = 1281167  # one epoch of ImageNet-1k, for full-epoch runs on synthetic data


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", required=True, help="gluon model zoo name, e.g. resnet50_v1")
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--image-shape", required=True, help="C,H,W")
    parser.add_argument("--num-epochs", type=int, default=1)
    parser.add_argument("--num-batches", type=int, default=0,
                        help="batches per epoch; 0 means a full ImageNet-1k epoch")
    parser.add_argument("--disp-batches", type=int, default=10)
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--kv-store", default="dist_sync")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--variant", choices=("baseline", "p3"), default="baseline",
                        help="baseline: stock dist_sync through gluon.Trainer; p3: sliced keys with priorities")
    parser.add_argument("--p3-slice-size", type=int, default=DEFAULT_SLICE_SIZE,
                        help="elements per slice; 0 keeps every parameter whole")
    parser.add_argument("--p3-priority", type=int, choices=(0, 1), default=1,
                        help="1: layers nearer the input first; 0: every slice priority 0")
    parser.add_argument("--save-params", default="", help="rank 0 saves its trainable parameters here (.npz)")
    parser.add_argument("--data-train", default="", help="RecordIO train set (.rec); empty: synthetic batches")
    parser.add_argument("--data-train-idx", default="", help="its index (.idx)")
    parser.add_argument("--data-images", type=int, default=0, help="records in --data-train (one epoch)")
    return parser.parse_args(argv)


def synthetic_batches(batch_size, shape, num_classes, seed, count=4):
    """A few fixed random batches, deterministic per seed, cycled through."""
    rng = np.random.RandomState(seed)
    return [
        (mx.nd.array(rng.uniform(-1, 1, (batch_size,) + shape).astype("float32")),
         mx.nd.array(rng.randint(0, num_classes, (batch_size,)).astype("float32")))
        for _ in range(count)
    ]


class SyntheticData:
    """Fixed random batches; an epoch of ``num_batches`` cycles through them."""

    def __init__(self, args, shape, rank):
        self.batches = synthetic_batches(args.batch_size, shape, args.num_classes, args.seed + rank)

    def first(self):
        return self.batches[0][0]

    def epoch_batches(self, global_batch):
        return IMAGENET_TRAIN_IMAGES // global_batch

    def take(self, num_batches):
        for nbatch in range(num_batches):
            yield self.batches[nbatch % len(self.batches)]


class RecordData:
    """ImageRecordIter over a converted train set, as MXNet's train_imagenet.py reads ImageNet.

    Each worker reads its own part of the file. Parts differ in size, and every
    worker must run the same number of batches (dist_sync waits for all), so an
    epoch is a fixed number of batches: the records over the global batch. A
    worker whose part runs out starts its part again.
    """

    def __init__(self, args, shape, kv, threads):
        height = shape[1]
        self.images = args.data_images
        self.iterator = mx.io.ImageRecordIter(
            path_imgrec=args.data_train, path_imgidx=args.data_train_idx, data_shape=shape,
            batch_size=args.batch_size, num_parts=kv.num_workers, part_index=kv.rank,
            resize=height * 256 // 224,  # shorter edge, then a random crop: 256 for 224, 341 for 299
            rand_crop=True, rand_mirror=True, shuffle=True, seed=args.seed + kv.rank, round_batch=True,
            mean_r=123.68, mean_g=116.779, mean_b=103.939, std_r=58.393, std_g=57.12, std_b=57.375,
            preprocess_threads=threads)
        self.pending = None

    def _next(self):
        try:
            batch = self.iterator.next()
        except StopIteration:
            self.iterator.reset()
            batch = self.iterator.next()
        cpu = mx.cpu()  # the iterator hands out pinned memory; the network's parameters live on cpu(0)
        return batch.data[0].as_in_context(cpu), batch.label[0].as_in_context(cpu)

    def first(self):
        self.pending = self._next()
        return self.pending[0]

    def epoch_batches(self, global_batch):
        return max(1, self.images // global_batch)

    def take(self, num_batches):
        for _ in range(num_batches):
            if self.pending is not None:
                batch, self.pending = self.pending, None
            else:
                batch = self._next()
            yield batch


def open_data(args, shape, kv):
    if not args.data_train:
        return SyntheticData(args, shape, kv.rank)
    threads = int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
    logging.info("data: %s (%d images), ImageRecordIter part %d of %d", args.data_train, args.data_images,
                 kv.rank, kv.num_workers)
    return RecordData(args, shape, kv, threads)


class P3Sync:
    """P3's two mechanisms through stock MXNet's public kvstore API.

    Every trainable parameter is cut into slices (keys) of at most ``slice_size``
    elements; gradient slices are pushed output-layer first, as backward produces
    them, and weight slices are pulled back with their layer's priority, so layers
    nearer the input arrive first. MXNet's engine tracks each array on its own: a
    push starts when its gradient is ready (overlapping the rest of backward), and
    the next forward pass of a layer waits only for that layer's weights. The
    optimizer runs on the servers, as it does for the baseline.
    """

    def __init__(self, kv, net, optimizer, slice_size, use_priority):
        self.kv = kv
        self.params = [p for p in net.collect_params().values() if p.grad_req != "null"]  # forward order
        self.slices = plan_slices([p.data().size for p in self.params], slice_size, bool(use_priority))
        self.by_param = [[] for _ in self.params]
        for number, s in enumerate(self.slices):
            self.by_param[s.param].append(number)
        # No views anywhere: the kvstore refuses them, and MKLDNN keeps weights in blocked layouts.
        # Operators write into these buffers instead; MXNet's engine tracks each array on its own.
        self.grad_flat = [mx.nd.zeros((p.data().size,)) for p in self.params]
        self.weight_flat = [mx.nd.zeros((p.data().size,)) for p in self.params]
        self.grad_bufs, self.weight_bufs = [], []
        for s in self.slices:
            whole = len(self.by_param[s.param]) == 1
            self.grad_bufs.append(self.grad_flat[s.param] if whole else mx.nd.zeros((s.size,)))
            self.weight_bufs.append(self.weight_flat[s.param] if whole else mx.nd.zeros((s.size,)))
        for index, param in enumerate(self.params):
            mx.nd.reshape(param.data(), shape=(-1,), out=self.weight_flat[index])
            self._split(self.weight_flat, self.weight_bufs, index)
        kv.init([s.key for s in self.slices], self.weight_bufs)  # one call: every init is a barrier
        kv.set_optimizer(optimizer)
        self.pull()  # every worker starts from rank 0's initial weights

    def _split(self, flat, bufs, index):
        for number in self.by_param[index]:
            if bufs[number] is not flat[index]:
                s = self.slices[number]
                mx.nd.slice_axis(flat[index], axis=0, begin=s.start, end=s.stop, out=bufs[number])

    def pull(self):
        for index, numbers in enumerate(self.by_param):  # input layer first
            for number in numbers:
                self.kv.pull(self.slices[number].key, out=self.weight_bufs[number],
                             priority=self.slices[number].priority)
            if len(numbers) > 1:
                mx.nd.concat(*[self.weight_bufs[n] for n in numbers], dim=0, out=self.weight_flat[index])
            param = self.params[index]
            mx.nd.reshape(self.weight_flat[index], shape=param.shape, out=param.data())

    def step(self):
        for index in reversed(range(len(self.params))):  # backward produces the output layer's first
            mx.nd.reshape(self.params[index].grad(), shape=(-1,), out=self.grad_flat[index])
            self._split(self.grad_flat, self.grad_bufs, index)
            for number in reversed(self.by_param[index]):
                self.kv.push(self.slices[number].key, self.grad_bufs[number],
                             priority=self.slices[number].priority)
        self.pull()


def parameter_checksum(net):
    """sha256 over every trainable parameter's bytes, in name order.

    Equal on all workers iff synchronous training kept them in step. BatchNorm's
    running statistics (grad_req "null") are per-worker state that the kvstore
    never synchronises, so they are left out.
    """
    digest = hashlib.sha256()
    params = net.collect_params()
    names = sorted(name for name in params.keys() if params[name].grad_req != "null")
    for name in names:
        digest.update(name.encode())
        digest.update(params[name].data().asnumpy().tobytes())
    return digest.hexdigest(), len(names)


def main(argv=None):
    args = parse_args(argv)
    # MXNet's examples log with this format; Speedometer goes through logging (stderr).
    logging.basicConfig(level=logging.INFO, format="%(asctime)-15s %(message)s")
    shape = tuple(int(x) for x in args.image_shape.split(","))

    kv = mx.kv.create(args.kv_store)
    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    logging.info("worker rank %d of %d, model %s, batch %d, shape %s, kvstore %s",
                 kv.rank, kv.num_workers, args.network, args.batch_size,
                 args.image_shape, args.kv_store)

    net = vision.get_model(args.network, classes=args.num_classes)
    net.initialize(mx.init.Xavier(magnitude=2), ctx=mx.cpu())
    net.hybridize(static_alloc=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    data = open_data(args, shape, kv)
    global_batch = args.batch_size * kv.num_workers
    sgd = {"learning_rate": args.lr, "momentum": 0.9, "wd": 1e-4}
    if args.variant == "p3":
        # Shapes are known only after a first forward pass (deferred initialisation).
        net(data.first())
        sync = P3Sync(kv, net, mx.optimizer.SGD(rescale_grad=1.0 / global_batch, **sgd),
                      args.p3_slice_size, args.p3_priority)
        logging.info("P3: %d slices of at most %s elements, priority %s", len(sync.slices),
                     args.p3_slice_size or "unlimited", "on" if args.p3_priority else "off")
        step = sync.step
    else:
        trainer = gluon.Trainer(net.collect_params(), "sgd", sgd, kvstore=kv)

        def step():
            trainer.step(global_batch)
    num_batches = args.num_batches or data.epoch_batches(global_batch)

    metric = mx.metric.Accuracy()
    speedometer = mx.callback.Speedometer(args.batch_size, args.disp_batches, auto_reset=True)
    for epoch in range(args.num_epochs):
        tic = time.time()
        metric.reset()
        for nbatch, (images, label) in enumerate(data.take(num_batches)):
            with autograd.record():
                output = net(images)
                loss = loss_fn(output, label)
            loss.backward()
            step()
            metric.update([label], [output])
            speedometer(mx.model.BatchEndParam(epoch=epoch, nbatch=nbatch,
                                               eval_metric=metric, locals=None))
        mx.nd.waitall()
        logging.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)

    digest, count = parameter_checksum(net)
    logging.info("Parameter checksum: rank=%d sha256=%s params=%d", kv.rank, digest, count)
    if args.save_params and kv.rank == 0:
        params = net.collect_params()
        np.savez(args.save_params, **{name: params[name].data().asnumpy() for name in params.keys()
                                      if params[name].grad_req != "null"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
