"""Data-parallel training of one role of a parameter-server job on stock MXNet.

Runs inside the engine's own interpreter, so it imports only MXNet, NumPy and
the standard library. Every role (scheduler, server, worker) runs this same
file: for scheduler and server roles, importing mxnet starts the parameter
server and exits when the job ends (MXNet's kvstore_server does that at
import time, driven by DMLC_ROLE).

Workers log MXNet's own Speedometer lines, so one log parser serves these runs
and the original artifact's logs alike.

Every variant trains through Gluon's stock Trainer; what differs is the
environment the run gives every role (reprokit.run.settings): ``baseline``
updates on the servers, ``baseline-worker-update`` on the workers
(MXNET_UPDATE_ON_KVSTORE=0), and ``p3`` runs MXNet 1.9.1's own P3
(DMLC_PS_VAN_TYPE=p3: P3StoreDist slices every array and ps-lite's P3 van sends
the slices in priority order), which updates on the workers because its store
cannot update on the servers. The Trainer already passes ``priority=-index``.
``bytescheduler`` is the one variant that changes the worker's code: ``--scheduler bytescheduler`` puts the
kvstore inside ByteScheduler's ScheduledKVStore (bytescheduler_kv.py), which schedules the Trainer's pushpulls.

``--network profile`` (emulated compute only) builds no model: the worker's Gluon parameters are exactly the
emulated-compute profile's arrays, in its order (``ProfileArrays``), for a model this script does not build
(Sockeye, whose profile holds the arrays Sockeye 1.18 gives the kvstore, in its key order). Everything else is the
image models' emulated path: the same waits, Trainer, kvstore and Speedometer (samples: sentence pairs).
"""
import argparse
import hashlib
import logging
import os
import time

import role_exit  # shipped beside this file; standard library only
from reprokit.wire import role_van  # shipped beside this file, in reprokit/wire/; standard library only

role_van.check()  # before MXNet starts a server or scheduler role: one van for the whole job

import mxnet as mx  # noqa: E402  starts and finishes the server/scheduler roles at import
import numpy as np  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon.model_zoo import vision  # noqa: E402

import bytescheduler_kv  # noqa: E402  shipped beside this file; imports bytescheduler only when started
from comm_probes import CommProbes, flatten_priorities, mechanism, timeline_path  # noqa: E402
from emulated_compute import EmulatedCompute, load_profile  # noqa: E402

role_exit.name_crashes()  # after MXNet's import, so that its own handler still runs after the stacks are printed

IMAGENET_TRAIN_IMAGES = 1281167  # one epoch of ImageNet-1k, for full-epoch runs on synthetic data (pinned to the core's)
PROFILE_NETWORK = "profile"  # --network: the profile's arrays (pinned to the core's)
# One epoch of IWSLT15 en-vi, the corpus the paper's Sockeye trained on (133,317 pairs: stefan-it/nmt-en-vi README),
# for full-epoch emulated runs of --network profile.
IWSLT15_TRAIN_PAIRS = 133317


def parse_args(argv):
    # What the run always passes is required: its defaults live in the core (run/settings.py), once.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", required=True,
                        help=f"gluon model zoo name, e.g. resnet50_v1; {PROFILE_NETWORK}: the emulated-compute "
                             f"profile's arrays (--compute emulated only)")
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--image-shape", help="C,H,W (required for every network but profile)")
    parser.add_argument("--num-epochs", type=int, required=True)
    parser.add_argument("--num-batches", type=int, required=True,
                        help="batches per epoch; 0 means a full ImageNet-1k epoch")
    parser.add_argument("--disp-batches", type=int, required=True)
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--kv-store", required=True)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--variant", required=True,
                        help="the run's variant, for the p3-comm line (the environment makes the difference)")
    parser.add_argument(role_van.VAN_OPTION, required=True,
                        help="the ps-lite van every role of the run must have (role_van.py checks it)")
    parser.add_argument("--p3-priority", type=int, choices=(0, 1), required=True,
                        help="1: the Trainer's priorities (layers nearer the input first); 0: every push priority 0")
    parser.add_argument("--scheduler", choices=("", "bytescheduler"), default="",
                        help="bytescheduler: the kvstore inside ByteScheduler's ScheduledKVStore (bytescheduler_kv.py)")
    parser.add_argument("--timeline", default="",
                        help="each worker writes a Chrome trace of its communication here "
                             "({rank} is replaced; otherwise .worker-RANK goes before the suffix)")
    parser.add_argument("--save-params", default="", help="rank 0 saves its trainable parameters here (.npz)")
    parser.add_argument("--data-train", default="", help="RecordIO train set (.rec); empty: synthetic batches")
    parser.add_argument("--data-train-idx", default="", help="its index (.idx)")
    parser.add_argument("--data-images", type=int, default=0, help="records in --data-train (one epoch)")
    parser.add_argument("--compute", choices=("real", "emulated"), default="real",
                        help="emulated: forward and backward are per-layer waits in MXNet's engine "
                             "(emulated_compute.py); the communication is real")
    parser.add_argument("--compute-profile", default="", help="the emulated compute's profile (JSON)")
    parser.add_argument("--dilation", type=float, default=1.0, help="every emulated wait is multiplied by this")
    parser.add_argument("--compute-wait", choices=("sleep", "busy"), default="sleep",
                        help="emulated waits asleep (a GPU host's free CPU) or busy on the engine's CPU thread (a CPU "
                             "device)")
    parser.add_argument("--comm-probes", type=int, choices=(0, 1), default=1,
                        help="emulated runs: 0 leaves out the engine probes of the p3-comm line (the authors' MXNet 1.1 "
                             "builds lack the engine call they use)")
    parser.add_argument("--string-keys", type=int, choices=(0, 1), default=0,
                        help="1: every kvstore key is the parameter's index as a string (the authors' builds; "
                             "see StringKeys)")
    return parser.parse_args(argv)


def _named(key):
    return [str(k) for k in key] if isinstance(key, (list, tuple)) else str(key)


class StringKeys(mx.kvstore.KVStore):
    """The kvstore with the Trainer's integer keys passed as strings, for the authors' P3 fork.

    Its kvstore slices an array of key k into ps-lite keys k, k+1, ... (kvstore_dist.h, EncodeDefaultKey), which
    collide with the next parameters' keys: with the Gluon Trainer's integer keys, ResNet-50's initialisation
    hung here (two keys of 2,048,000 elements are enough). It spaces string keys 100,001 apart (kvstore_local.h),
    and the authors' own scripts (Module) use string keys.
    """


def _with_named_key(method):
    def named(self, key, *args, **kwargs):
        return method(self, _named(key), *args, **kwargs)
    return named


for _method in ("init", "push", "pull", "pushpull", "broadcast", "row_sparse_pull"):  # what this MXNet has of them
    if hasattr(mx.kvstore.KVStore, _method):
        setattr(StringKeys, _method, _with_named_key(getattr(mx.kvstore.KVStore, _method)))


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
        return -(-IMAGENET_TRAIN_IMAGES // global_batch)  # the last batch partial, as data/imagenet.epoch_batches

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


class ProfileArrays(gluon.Block):
    """Gluon parameters with exactly a profile's arrays (one flat array per size, in the profile's order, which is the
    Trainer's key order): what the kvstore, P3's slicing and the van see of a model this script does not build."""

    def __init__(self, profile):
        super().__init__(prefix="")
        names = [str(layer["name"]) for layer in profile["layers"]]
        if len(set(names)) < len(names):  # each layer's arrays must be a parameter group of its own
            names = [f"{name}{i}" for i, name in enumerate(names)]
        # Named LAYER_J: the engine probes group a layer's parameters by their names before the last "_"
        # (p3_timeline.layer_groups), so a run with a timeline measures the profile's own layers.
        with self.name_scope():
            self.arrays = [self.params.get(f"{name}_{j}", shape=(int(size),))
                           for name, layer in zip(names, profile["layers"])
                           for j, size in enumerate(layer["arrays"])]

    def forward(self, x):
        return x


class NoData:
    """--network profile: nothing to read; an epoch is the corpus's pairs over the global batch."""

    def epoch_batches(self, global_batch):
        return -(-IWSLT15_TRAIN_PAIRS // global_batch)

    def take(self, num_batches):
        for _ in range(num_batches):
            yield None, None


def start_profile_emulation(args, net, rank, trainer, global_batch):
    """start_emulation for ProfileArrays: its one real iteration is a pass that touches every array (zero
    gradients), then the kvstore's start and the Trainer's first step, as the real loop's first iteration."""
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    with autograd.record():
        loss = mx.nd.add_n(*[(p.data() * 0).sum() for p in params])
    loss.backward()
    start_kvstore(trainer, global_batch)
    trainer.step(global_batch)
    mx.nd.waitall()
    return _emulated(args, params, rank)


def open_data(args, shape, kv):
    if shape is None:
        return NoData()
    if not args.data_train:
        return SyntheticData(args, shape, kv.rank)
    threads = int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
    logging.info("data: %s (%d images), ImageRecordIter part %d of %d", args.data_train, args.data_images,
                 kv.rank, kv.num_workers)
    return RecordData(args, shape, kv, threads)


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


def host_cpu():
    """This host's CPU time so far over every core, as (busy, total) ticks of /proc/stat (every process, not just
    ours: on a testbed every host is this machine); None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


def log_host_cpu(rank, start):
    """The host-cpu line: the share of the host's CPU busy since ``start`` (host_cpu()), all cores together."""
    end = host_cpu()
    if start is None or end is None or end[1] <= start[1]:
        return
    logging.info("host-cpu: rank=%d busy=%.3f cores=%d", rank, (end[0] - start[0]) / (end[1] - start[1]),
                 os.cpu_count() or 0)


def start_kvstore(trainer, batch_size):
    """The Trainer's kvstore started, and every parameter's first value pulled, before the first push.

    Left to itself the Trainer does this inside its first step and pushes the gradients at once. A parameter's
    first pull (into the parameter) and its first push (from its gradient) touch different arrays and have the
    same priority (MXNet 1.1's Trainer: both -index), so nothing orders them: MXNet's engine and P3's van queue
    by priority alone, and a pending pull can read the sum the push made (tests/engine/test_kvstore_start.py).
    On the authors' P3 fork, 2 workers: worker 1 began with zeros in some of the 52 slices of ResNet-50's last
    layer (7 in the run examined) and the workers ended apart, in every run; with this wait, in step and equal to
    their baseline.
    """
    # What step sets first: under a server-side update the kvstore sends the optimizer to the servers with it.
    trainer._optimizer.rescale_grad = trainer._scale / batch_size
    if not trainer._kv_initialized:
        trainer._init_kvstore()
    if getattr(trainer, "_params_to_init", None):  # MXNet >= 1.3 pulls the first values in a second call
        trainer._init_params()
    mx.nd.waitall()


def start_emulation(args, net, data, rank, trainer, loss_fn, global_batch):
    """One real iteration first (not measured): it gives the parameters their shapes, starts the kvstore
    (start_kvstore) and takes the Trainer's own first step, as the real loop does; then the waits replace every
    forward and backward pass.

    Initialising the kvstore without it (Trainer._init_kvstore/_init_params after a forward pass outside
    autograd) made the server abort here ("init 4 first": another worker's first pull reached it before rank 0's
    initial push), with 2 workers, in 2 of 2 tries.
    """
    images, label = next(iter(data.take(1)))
    # One image is enough for the shapes and the kvstore's first push and pull (these do not depend on the batch),
    # and keeps the memory a real batch's activations would hold (VGG-19 at 224x224 and batch 32: several GB per
    # worker, which four workers on one machine would not have) out of the emulated run.
    images, label = images[:1], label[:1]
    with autograd.record():
        loss = loss_fn(net(images), label)
    loss.backward()
    start_kvstore(trainer, global_batch)
    trainer.step(global_batch)
    mx.nd.waitall()
    return _emulated(args, [p for p in net.collect_params().values() if p.grad_req != "null"], rank)


def _emulated(args, params, rank):
    profile = load_profile(args.compute_profile)
    emulated = EmulatedCompute(profile, params, args.dilation, busy=args.compute_wait == "busy")
    logging.info("emulated-compute: rank=%d profile=%s dilation=%g wait_s_per_iter=%.6f layers=%d lag_ms=%.3f "
                 "custom_op_threads=%s wait=%s waits_per_iter=%d", rank, profile.get("name"), args.dilation,
                 emulated.wait_s_per_iteration, len(emulated.groups), emulated.lag * 1000,
                 os.environ.get("MXNET_CUSTOM_OP_NUM_THREADS", "16"), args.compute_wait, emulated.waits_per_iteration)
    return emulated


class NoProbes:
    """--comm-probes 0: the probes' calls, each doing nothing (no p3-comm line)."""

    def before_forward(self):
        pass

    def after_forward(self, weights):
        pass

    def before_step(self, grads):
        pass

    def after_step(self, weights):
        pass

    def close(self, mechanism):
        pass


def emulated_step(emulated, probes, trainer, global_batch, weights, grads):
    """One iteration: the waits, then the stock Trainer's push and pull; waits for the forward's end where the real
    loop's metric does."""
    probes.before_forward()
    forward_end = emulated.iteration()
    probes.after_forward(weights)
    probes.before_step(grads)
    trainer.step(global_batch)
    probes.after_step(weights)
    forward_end.wait_to_read()


def main(argv=None):
    args = parse_args(argv)
    # MXNet's examples log with this format; Speedometer goes through logging (stderr).
    logging.basicConfig(level=logging.INFO, format="%(asctime)-15s %(message)s")
    profile_network = args.network == PROFILE_NETWORK
    if profile_network and args.compute != "emulated":
        raise SystemExit(f"train.py: --network {PROFILE_NETWORK} builds no model to compute with; it needs "
                         f"--compute emulated")
    if not profile_network and not args.image_shape:
        raise SystemExit(f"train.py: --network {args.network} needs --image-shape C,H,W")
    shape = None if profile_network else tuple(int(x) for x in args.image_shape.split(","))

    kv = mx.kv.create(args.kv_store)
    if args.string_keys:
        kv.__class__ = StringKeys  # the same store (and handle), its keys named
    scheduled = None
    if args.scheduler:
        scheduled = bytescheduler_kv.start(kv)  # or the role ends with one line
        kv = scheduled.kv
    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    logging.info("worker rank %d of %d, model %s, batch %d, shape %s, kvstore %s",
                 kv.rank, kv.num_workers, args.network, args.batch_size,
                 args.image_shape, args.kv_store)

    if profile_network:
        net = ProfileArrays(load_profile(args.compute_profile))
        net.initialize(mx.init.Uniform(0.1), ctx=mx.cpu())
    else:
        net = vision.get_model(args.network, classes=args.num_classes)
        net.initialize(mx.init.Xavier(magnitude=2), ctx=mx.cpu())
        # An emulated run computes one real pass only (start_emulation); MXNet 1.1's CachedOp refuses static_alloc.
        net.hybridize(static_alloc=True) if args.compute == "real" else net.hybridize()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    data = open_data(args, shape, kv)
    global_batch = args.batch_size * kv.num_workers
    sgd = {"learning_rate": args.lr, "momentum": 0.9, "wd": 1e-4}
    timeline = timeline_path(args.timeline, kv.rank)

    def trainable():
        params = [p for p in net.collect_params().values() if p.grad_req != "null"]  # forward order
        return [p.name for p in params], [p.data() for p in params], [p.grad() for p in params]

    if not args.p3_priority:
        flatten_priorities()
    # Stock Gluon, as it always ran: parameters initialised by the first training pass, the kvstore just before the
    # first step (start_kvstore); the Trainer itself decides where the optimizer runs (on the workers under MXNet's P3).
    trainer = gluon.Trainer(net.collect_params(), "sgd", sgd, kvstore=kv)
    probes = weights = grads = None
    num_batches = args.num_batches or data.epoch_batches(global_batch)
    emulated = None
    if profile_network:
        emulated = start_profile_emulation(args, net, kv.rank, trainer, global_batch)
    elif args.compute == "emulated":
        emulated = start_emulation(args, net, data, kv.rank, trainer, loss_fn, global_batch)
    if emulated is not None:
        names, weights, grads = trainable()
        probes = CommProbes(names, args.variant, kv.rank, timeline) if args.comm_probes else NoProbes()

    metric = mx.metric.Accuracy()
    speedometer = mx.callback.Speedometer(args.batch_size, args.disp_batches, auto_reset=True)
    cpu_start = host_cpu()
    for epoch in range(args.num_epochs):
        tic = time.time()
        metric.reset()
        for nbatch, (images, label) in enumerate(data.take(num_batches)):
            if emulated is not None:
                emulated_step(emulated, probes, trainer, global_batch, weights, grads)
                speedometer(mx.model.BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=metric, locals=None))
                continue
            if probes is not None:
                probes.before_forward()
            with autograd.record():
                output = net(images)
                loss = loss_fn(output, label)
            if probes is None:  # made once the first forward pass knows the shapes
                names, weights, grads = trainable()
                probes = CommProbes(names, args.variant, kv.rank, timeline)
            probes.after_forward(weights)
            loss.backward()
            if nbatch == 0 and epoch == 0:
                start_kvstore(trainer, global_batch)
            probes.before_step(grads)
            trainer.step(global_batch)
            probes.after_step(weights)
            metric.update([label], [output])
            speedometer(mx.model.BatchEndParam(epoch=epoch, nbatch=nbatch,
                                               eval_metric=metric, locals=None))
        mx.nd.waitall()
        logging.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
    log_host_cpu(kv.rank, cpu_start)

    if probes is not None:  # logs the p3-comm line (comm_probes.py documents it)
        probes.close(mechanism(trainer._update_on_kvstore, args.p3_priority, args.scheduler))
    if scheduled is not None:  # every pushpull went through ByteScheduler, or the role ends with one line
        bytescheduler_kv.finish(scheduled)
    digest, count = parameter_checksum(net)
    if args.save_params and kv.rank == 0:
        params = net.collect_params()
        role_exit.save_output("SAVE_PARAMS", args.save_params, lambda: np.savez(
            args.save_params, **{name: params[name].data().asnumpy() for name in params.keys()
                                 if params[name].grad_req != "null"}))
    # The last line: every output is written. Under the P3 van the process then never exits by itself
    # (ps-lite's sender thread is never joined), so the launcher ends it once every worker printed this.
    logging.info("Parameter checksum: rank=%d sha256=%s params=%d", kv.rank, digest, count)
    if scheduled is not None:
        bytescheduler_kv.close(scheduled)  # or the process would abort at exit (bytescheduler_kv.close says why)
    return 0


if __name__ == "__main__":
    role_exit.run(main)
