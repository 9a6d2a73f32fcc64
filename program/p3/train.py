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
    return parser.parse_args(argv)


def synthetic_batches(batch_size, shape, num_classes, seed, count=4):
    """A few fixed random batches, deterministic per seed, cycled through."""
    rng = np.random.RandomState(seed)
    return [
        (mx.nd.array(rng.uniform(-1, 1, (batch_size,) + shape).astype("float32")),
         mx.nd.array(rng.randint(0, num_classes, (batch_size,)).astype("float32")))
        for _ in range(count)
    ]


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
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": args.lr, "momentum": 0.9, "wd": 1e-4},
                            kvstore=kv)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    batches = synthetic_batches(args.batch_size, shape, args.num_classes, args.seed + kv.rank)
    global_batch = args.batch_size * kv.num_workers
    num_batches = args.num_batches or IMAGENET_TRAIN_IMAGES // global_batch

    metric = mx.metric.Accuracy()
    speedometer = mx.callback.Speedometer(args.batch_size, args.disp_batches, auto_reset=True)
    for epoch in range(args.num_epochs):
        tic = time.time()
        metric.reset()
        for nbatch in range(num_batches):
            data, label = batches[nbatch % len(batches)]
            with autograd.record():
                output = net(data)
                loss = loss_fn(output, label)
            loss.backward()
            trainer.step(global_batch)
            metric.update([label], [output])
            speedometer(mx.model.BatchEndParam(epoch=epoch, nbatch=nbatch,
                                               eval_metric=metric, locals=None))
        mx.nd.waitall()
        logging.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)

    digest, count = parameter_checksum(net)
    logging.info("Parameter checksum: rank=%d sha256=%s params=%d", kv.rank, digest, count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
