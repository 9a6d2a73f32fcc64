"""Per-layer forward and backward times of an image model on this machine: a measured emulated-compute profile.

Runs in MXNet 1.9.1's interpreter (MXNet and the standard library only), by hand or from
benchmarks/emulation_selfcheck.py; not shipped into the roles' folders::

    python compute_profile.py --model resnet --network resnet50_v1 --image-shape 3,32,32 --batch-size 32 \
        --out measured.json

The network is built and run as train.py's real loop runs it (Gluon model zoo, hybridized with static_alloc,
forward in autograd then backward), without a kvstore: iterations one at a time (the engine emptied between
them). Engine probes (engine_probe.py) note, per layer (the trainable arrays of one block, in key order), when
forward last read its weights and when backward wrote its gradients. A layer's forward time is the time from the
previous layer's forward end to its own; its backward time from the next layer's gradients (the loss, for the
last layer) to its own: so the layers without parameters (activations, pooling, the loss) are counted in the layer
after them, and every second of the iteration is in some layer. MXNet runs operators in bulks of up to 15
(MXNET_EXEC_BULK_EXEC_*), so inside a bulk the times fall on its last layer, as readiness does in a real run.
Mean over the measured iterations, after warm-up ones.
"""
import argparse
import functools
import json
import os
import platform
import time

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon.model_zoo import vision

from engine_probe import Engine  # shipped beside this file


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the run's cmd_key (resnet, inception-v3, vgg)")
    parser.add_argument("--network", required=True, help="gluon model zoo name, e.g. resnet50_v1")
    parser.add_argument("--image-shape", required=True, help="C,H,W")
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--name", default="measured")
    parser.add_argument("--note", default="", help="added to the profile's source (how it was run)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", required=True)
    return parser.parse_args(argv)


def layer_groups(names):
    """Consecutive trainable arrays of one block (``block_weight``, ``block_bias``): the indices per layer."""
    groups, last = [], None
    for i, name in enumerate(names):
        block = name.rsplit("_", 1)[0]
        if block != last:
            groups.append([])
            last = block
        groups[-1].append(i)
    return groups


def _note(times, g, t):
    times[g] = t


def measure(args):
    mx.random.seed(args.seed)
    shape = tuple(int(x) for x in args.image_shape.split(","))
    net = vision.get_model(args.network, classes=1000)
    net.initialize(mx.init.Xavier(magnitude=2), ctx=mx.cpu())
    net.hybridize(static_alloc=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    images = mx.nd.random.uniform(-1, 1, (args.batch_size,) + shape)
    label = mx.nd.array([i % 1000 for i in range(args.batch_size)])
    engine = Engine()
    params = groups = None
    sums = None
    measured = 0
    for it in range(args.warmup + args.iterations):
        mx.nd.waitall()
        forward_end, grad_ready = {}, {}
        start = time.time()
        with autograd.record():
            loss = loss_fn(net(images), label)
        if params is None:
            params = [p for p in net.collect_params().values() if p.grad_req != "null"]
            groups = layer_groups([p.name for p in params])
            sums = [[0.0, 0.0] for _ in groups]
        for g, members in enumerate(groups):
            engine.probe(functools.partial(_note, forward_end, g), mutable=[params[i].data() for i in members],
                         name="ForwardEnd")
        loss.backward()
        for g, members in enumerate(groups):
            engine.probe(functools.partial(_note, grad_ready, g), const=[params[i].grad() for i in members],
                         name="GradReady")
        mx.nd.waitall()
        if it < args.warmup:
            continue
        measured += 1
        previous = start
        for g in range(len(groups)):
            sums[g][0] += max(0.0, forward_end[g] - previous)
            previous = max(previous, forward_end[g])
        for g in reversed(range(len(groups))):
            sums[g][1] += max(0.0, grad_ready[g] - previous)
            previous = max(previous, grad_ready[g])
    layers = []
    for g, members in enumerate(groups):
        layers.append({"name": params[members[0]].name.rsplit("_", 1)[0],
                       "arrays": [int(params[i].data().size) for i in members],
                       "forward_s": sums[g][0] / measured, "backward_s": sums[g][1] / measured})
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    source = (f"measured on {platform.node()} ({os.cpu_count()} cores, {platform.processor() or platform.machine()}) "
              f"by program/p3/compute_profile.py with MXNet {mx.__version__}: mean of {measured} iterations after "
              f"{args.warmup} warm-up, OMP_NUM_THREADS={threads}, per layer from engine probes{args.note}")
    return {"name": args.name, "model": args.model, "image_shape": args.image_shape, "batch_size": args.batch_size,
            "source": source, "factors": [], "layers": layers}


def main(argv=None):
    args = parse_args(argv)
    profile = measure(args)
    with open(args.out, "w") as f:
        json.dump(profile, f, indent=1)
    total = sum(x["forward_s"] + x["backward_s"] for x in profile["layers"])
    print(f"compute-profile: model={args.model} layers={len(profile['layers'])} total_s={total:.4f} out={args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
