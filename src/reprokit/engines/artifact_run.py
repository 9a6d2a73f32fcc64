"""The artifact's own training command for a run (P3 is compiled into the fork: none of our scripts is shipped)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from pathlib import Path

from reprokit.errors import UserError

IMAGENET_TRAIN_IMAGES = 1281167


# The seed's --network arguments of the artifact's example/image-classification/train_imagenet.py.
IMAGE_NETWORKS: dict[str, list[str]] = {
    "resnet": ["--network", "resnet", "--num-layers", "50"],
    "inception-v3": ["--network", "inception-v3"],
    "vgg": ["--network", "vgg", "--num-layers", "19"],
}
TRAIN_IMAGENET = Path("example") / "image-classification" / "train_imagenet.py"
SOCKEYE_SOURCE = Path("example") / "sockeye" / "source"  # holds the bundled sockeye package (1.5)
SOCKEYE_DATA = Path("example") / "sockeye" / "dataset" / "iwslt15_en-vi"  # bundled IWSLT15 en-vi


class ArtifactBuild(Protocol):
    """What the command line needs of an installed build."""
    python: str
    tree: str
    cuda: bool


@dataclass(frozen=True)
class ArtifactRun:
    command: list[str]
    extra_env: dict[str, str]


def artifact_command(engine: ArtifactBuild, model: str, batch_size: int, image_shape: str, num_epochs: int,
                     num_batches: int, disp_batches: int, num_workers: int, data_train: str = "",
                     sockeye_output: str = "") -> ArtifactRun:
    """The artifact's own training command for one role, as the seed ran it (every role runs the same command).

    Image models: example/image-classification/train_imagenet.py with the
    seed's arguments; on a registered RecordIO file (``data_train``), else on
    the script's own synthetic data (``--benchmark 1``) for the same number of
    batches per worker as the embedded engine runs. Sockeye: the bundled
    sockeye 1.5 (``python -m sockeye.train``) on the bundled IWSLT15 en-vi.
    ``dist_device_sync`` and GPU 0 for a CUDA build, ``dist_sync`` on the CPU.
    """
    tree = Path(engine.tree)
    kv_store = "dist_device_sync" if engine.cuda else "dist_sync"
    if model == "sockeye":
        data = tree / SOCKEYE_DATA
        args = [
            engine.python, "-m", "sockeye.train",
            "--source", str(data / "train-preproc.en"), "--target", str(data / "train-preproc.vi"),
            "--validation-source", str(data / "tst2012.en"), "--validation-target", str(data / "tst2012.vi"),
            "--source-vocab", str(data / "vocab.en"), "--target-vocab", str(data / "vocab.vi"),
            "--output", sockeye_output or "sockeye-model", "--overwrite-output",
            "--encoder", "rnn", "--decoder", "rnn", "--num-layers", "2:2", "--rnn-cell-type", "lstm",
            "--rnn-num-hidden", "512", "--rnn-encoder-reverse-input", "--num-embed", "512:512",
            "--attention-type", "mlp", "--attention-num-hidden", "512", "--batch-size", str(batch_size),
            "--bucket-width", "10", "--metrics", "perplexity", "--optimized-metric", "bleu",
            "--checkpoint-frequency", "10000000000", "--max-num-checkpoint-not-improved", "-1",
            "--weight-init", "uniform", "--weight-init-scale", "0.1", "--learning-rate-reduce-factor", "1.0",
            "--monitor-bleu", "-1", "--kv-store", kv_store,
            *(["--device-ids", "0"] if engine.cuda else ["--use-cpu"]),
            *(["--max-updates", str(num_batches)] if num_batches else []),
        ]
        return ArtifactRun(args, {"PYTHONPATH": str(tree / SOCKEYE_SOURCE)})
    network = IMAGE_NETWORKS.get(model)
    if network is None:
        raise UserError(f"the artifact has no run for cmd_key {model!r}; valid ones: "
                        f"{', '.join(sorted([*IMAGE_NETWORKS, 'sockeye']))}, or use --env.ENGINE=embedded")
    args = [engine.python, str(tree / TRAIN_IMAGENET), *network, "--batch-size", str(batch_size),
            "--image-shape", image_shape, "--num-epochs", str(num_epochs), "--kv-store", kv_store,
            "--disp-batches", str(disp_batches)]
    if engine.cuda:
        args += ["--gpus", "0"]
    if data_train:
        args += ["--data-train", data_train]
    else:
        per_worker = num_batches * batch_size if num_batches else IMAGENET_TRAIN_IMAGES // max(1, num_workers)
        args += ["--benchmark", "1", "--num-examples", str(per_worker)]
    return ArtifactRun(args, {})
