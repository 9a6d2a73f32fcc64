"""The artifact's own training commands (P3 is compiled into the fork: none of our scripts is shipped).

What the authors' scripts do, and what this command line does about it:

- ``train_imagenet.py --benchmark 1`` trains on a synthetic iterator of a fixed
  500 batches per epoch; ``--num-examples`` only feeds the learning-rate
  schedule (and counts every worker's examples). Our patch
  (``*-image-benchmark-batches.patch``) adds ``--benchmark-batches``: the
  run's NUM_BATCHES goes there, so a smoke run is bounded like an embedded one.
  On a RecordIO file the script reads its whole share per epoch (it has no batch
  limit); a file with fewer images than one batch per worker is refused here,
  since the script aborts on it.
- The bundled Sockeye 1.5.1 reports every MEASURE_SPEED_EVERY = 100 updates;
  our patch (``*-sockeye-measure-speed-every.patch``) reads
  SOCKEYE_MEASURE_SPEED_EVERY, set to the run's DISP_BATCHES. It trains on the
  bundled IWSLT15 (``example/sockeye/dataset/iwslt15_en-vi``), or, when the
  source copy lacked those training files, on the registered IWSLT15 corpus;
  the result's ``data`` says which. Every worker writes its own output folder.
- A CUDA build: worker k of a host trains on that host's GPU k.
- Their processes can hang at exit after training (seen here with both builds:
  a worker waits forever in KVStoreDist's destructor): the run carries the line
  each script logs at the end of training (``finish_pattern``); once every
  worker has logged it, our launcher ends the run a grace period later, with a
  warning naming the roles it tore down.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reprokit.core.errors import UserError
from reprokit.data.imagenet import IMAGENET_TRAIN_IMAGES, epoch_batches
from reprokit.data.recordio import record_heads
from reprokit.engines.base import InstalledEngine, RoleCommand, RunJob

# The seed's --network arguments of the artifact's example/image-classification/train_imagenet.py.
IMAGE_NETWORKS: dict[str, list[str]] = {
    "resnet": ["--network", "resnet", "--num-layers", "50"],
    "inception-v3": ["--network", "inception-v3"],
    "vgg": ["--network", "vgg", "--num-layers", "19"],
    "vgg16": ["--network", "vgg", "--num-layers", "16"],
}
TRAIN_IMAGENET = Path("example") / "image-classification" / "train_imagenet.py"
SOCKEYE_SOURCE = Path("example") / "sockeye" / "source"  # holds the bundled sockeye package (1.5)
SOCKEYE_DATA = Path("example") / "sockeye" / "dataset" / "iwslt15_en-vi"  # bundled IWSLT15 en-vi
BUNDLED_IWSLT = "iwslt15-bundled"  # the result's data field for the artifact's own copy
# Bundled: preprocessed training pairs; a registered corpus (reprokit.data.iwslt): the plain ones.
BUNDLED_FILES = {"train": ("train-preproc.en", "train-preproc.vi")}
CORPUS_FILES = {"train": ("train.en", "train.vi")}
COMMON_FILES = {"valid": ("tst2012.en", "tst2012.vi"), "vocab": ("vocab.en", "vocab.vi")}
SOCKEYE_OUTPUT = "sockeye-model"  # worker 0's output folder when none is given; worker k adds .worker-k
SPEED_PERIOD_ENV = "SOCKEYE_MEASURE_SPEED_EVERY"  # read by our patch of the bundled Sockeye
SOCKEYE_FINISHED = r"Training finished\."  # sockeye/training.py's last log line of fit()


@dataclass(frozen=True)
class WorkerSlot:
    """One worker of the run: its rank (DMLC_WORKER_ID) and its index among the workers of its host."""
    rank: int
    local: int


def worker_slots(hosts_of_workers: Sequence[str]) -> list[WorkerSlot]:
    """Workers in rank order, given each one's host: the k-th worker on a host gets local index k."""
    seen: dict[str, int] = {}
    slots = []
    for rank, host in enumerate(hosts_of_workers):
        slots.append(WorkerSlot(rank, seen.get(host, 0)))
        seen[host] = seen.get(host, 0) + 1
    return slots


def count_records(path: str | Path, stop: int) -> int:
    """Images in a RecordIO file (its .idx when there, else its record headers), counting no further than ``stop``."""
    path = Path(path)
    index = path.with_suffix(".idx")
    if index.is_file():
        with open(index, "rb") as handle:
            return min(stop, sum(1 for line in handle if line.strip()))
    count = 0
    try:
        for _ in record_heads(path):
            count += 1
            if count >= stop:
                break
    except UserError as exc:
        raise UserError(f"{exc}; convert the set again with: ck install package:dataset-imagenet-2012-train-p3") from None
    return count


def check_recordio_size(data_train: str, batch_size: int, num_workers: int) -> None:
    """The authors' ImageRecordIter aborts when a worker's part holds fewer images than a batch: refuse it here."""
    needed = batch_size * max(1, num_workers)
    try:
        found = count_records(data_train, needed)
    except OSError:
        return  # not readable here (a path on the cluster's hosts): the script decides there
    if found < needed:
        raise UserError(f"the RecordIO set {data_train} holds {found} images, fewer than one batch per worker "
                        f"({batch_size} x {num_workers} workers) which the authors' train_imagenet.py aborts on; "
                        f"use a larger set, a smaller --env.BATCH_SIZE, or --env.DATA=synthetic")


def sockeye_data(tree: Path, corpus: str, chosen: str) -> tuple[dict[str, Path], str]:
    """The files Sockeye trains on and the result's data name: the bundled IWSLT15, else the registered corpus."""
    bundled = tree / SOCKEYE_DATA
    names = {**BUNDLED_FILES, **COMMON_FILES}
    if all((bundled / f).is_file() for pair in names.values() for f in pair):
        return {f"{kind}.{i}": bundled / f for kind, pair in names.items() for i, f in enumerate(pair)}, BUNDLED_IWSLT
    if corpus:
        folder = Path(corpus)
        names = {**CORPUS_FILES, **COMMON_FILES}
        return {f"{kind}.{i}": folder / f for kind, pair in names.items() for i, f in enumerate(pair)}, chosen
    missing = [f for pair in names.values() for f in pair if not (bundled / f).is_file()]
    raise UserError(f"the artifact's bundled IWSLT15 lacks {', '.join(missing)} in {bundled} (the source copy it "
                    f"was built from did not have them) and no IWSLT15 corpus is registered; install one with: "
                    f"ck install package:dataset-iwslt15-en-vi --quiet (or dataset-iwslt15-en-vi-synthetic)")


def corpus_folder(train_args: Sequence[str]) -> str:
    """The registered corpus folder in a run's data arguments (``--data-dir FOLDER``), or ""."""
    args = list(train_args)
    return args[args.index("--data-dir") + 1] if "--data-dir" in args[:-1] else ""


def kv_store(installed: InstalledEngine) -> str:
    """``dist_device_sync`` for a CUDA build (one GPU per local worker), ``dist_sync`` on the CPU."""
    return "dist_device_sync" if installed.cuda else "dist_sync"


def sockeye_command(installed: InstalledEngine, job: RunJob, slots: Sequence[WorkerSlot]) -> RoleCommand:
    """The bundled sockeye 1.5 (``python -m sockeye.train``) on the bundled IWSLT15, else the registered corpus."""
    tree = Path(installed.tree)
    files, data = sockeye_data(tree, corpus_folder(job.data.args), job.data.name)
    args = [
        installed.python, "-m", "sockeye.train",
        "--source", str(files["train.0"]), "--target", str(files["train.1"]),
        "--validation-source", str(files["valid.0"]), "--validation-target", str(files["valid.1"]),
        "--source-vocab", str(files["vocab.0"]), "--target-vocab", str(files["vocab.1"]),
        "--overwrite-output",
        "--encoder", "rnn", "--decoder", "rnn", "--num-layers", "2:2", "--rnn-cell-type", "lstm",
        "--rnn-num-hidden", "512", "--rnn-encoder-reverse-input", "--num-embed", "512:512",
        "--attention-type", "mlp", "--attention-num-hidden", "512", "--batch-size", str(job.batch_size),
        "--bucket-width", "10", "--metrics", "perplexity", "--optimized-metric", "bleu",
        "--checkpoint-frequency", "10000000000", "--max-num-checkpoint-not-improved", "-1",
        "--weight-init", "uniform", "--weight-init-scale", "0.1", "--learning-rate-reduce-factor", "1.0",
        "--monitor-bleu", "-1", "--kv-store", kv_store(installed),
        *([] if installed.cuda else ["--use-cpu"]),
        *(["--max-updates", str(job.num_batches)] if job.num_batches else []),
    ]
    base = job.output_file or SOCKEYE_OUTPUT
    per_worker = {}
    for slot in slots:
        # Sockeye removes and rewrites its output folder: one per worker (as our embedded run does).
        own = ["--output", base if slot.rank == 0 else f"{base}.worker-{slot.rank}"]
        if installed.cuda:
            own += ["--device-ids", str(slot.local)]  # with device locking, distinct GPUs per host
        per_worker[f"worker#{slot.rank}"] = own
    env = {"PYTHONPATH": str(tree / SOCKEYE_SOURCE), SPEED_PERIOD_ENV: str(job.disp_batches)}
    return RoleCommand(args, extra_env=env, role_args=per_worker, finish_pattern=SOCKEYE_FINISHED, data=data)


def image_command(installed: InstalledEngine, job: RunJob, slots: Sequence[WorkerSlot]) -> RoleCommand:
    """example/image-classification/train_imagenet.py with the seed's arguments, on the run's RecordIO file or on
    the script's synthetic data for NUM_BATCHES per epoch (0: a full ImageNet-1k epoch split over the workers)."""
    network = IMAGE_NETWORKS.get(job.model)
    if network is None:
        raise UserError(f"the artifact has no run for cmd_key {job.model!r}; valid ones: "
                        f"{', '.join(sorted([*IMAGE_NETWORKS, 'sockeye']))}, or use --env.ENGINE=embedded")
    num_workers = max(1, len(slots))
    args = [installed.python, str(Path(installed.tree) / TRAIN_IMAGENET), *network,
            "--batch-size", str(job.batch_size), "--image-shape", job.image_shape,
            "--num-epochs", str(job.num_epochs), "--kv-store", kv_store(installed),
            "--disp-batches", str(job.disp_batches)]
    if job.data.rec:
        check_recordio_size(job.data.rec, job.batch_size, num_workers)
        args += ["--data-train", job.data.rec]
    else:
        batches = job.num_batches or epoch_batches(IMAGENET_TRAIN_IMAGES, num_workers * job.batch_size)
        # --num-examples counts every worker's examples (fit.py divides by the workers for the lr schedule).
        args += ["--benchmark", "1", "--benchmark-batches", str(batches),
                 "--num-examples", str(batches * job.batch_size * num_workers)]
    per_worker = {f"worker#{s.rank}": ["--gpus", str(s.local)] for s in slots} if installed.cuda else {}
    # Module.fit logs "Epoch[N] Time cost=..." at the end of each epoch: the last one ends the training.
    return RoleCommand(args, role_args=per_worker,
                       finish_pattern=rf"Epoch\[{max(1, job.num_epochs) - 1}\] Time cost=")
