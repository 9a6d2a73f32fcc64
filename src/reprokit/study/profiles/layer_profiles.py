"""Per-layer profiles of the models for the iteration model: parameters from the real models, compute
time split by FLOPs (the iteration model's layers of a profile: whatif/compute.py, ``profiled_layers``).

The parameters and FLOPs are in `layer_profiles.json` beside this file, written once by
program/p3/layer_profile.py in MXNet 1.9.1's interpreter (the command is in the file). Per-layer compute time:
a total per iteration (from a throughput) split over the layers by forward FLOPs, forward one third and backward
two thirds of each layer's share (backward computes the gradients of both the input and the weights, each about
the forward's FLOPs). FLOPs, not parameter share: on a GPU convolution and dense layers take time with their
arithmetic, and the parameters sit elsewhere (VGG-19's three dense layers hold 86% of its parameters and 0.6% of
its FLOPs). Layers without parameters (pooling, activations) are not profiled; their time is spread with the
rest.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from reprokit.core.errors import UserError
from reprokit.core.values import shown

DATA = Path(__file__).with_name("layer_profiles.json")
FORWARD_SHARE = 1 / 3  # of a layer's compute; backward the rest

# The default compute per iteration: a published single-GPU training throughput (images per second) at a batch
# size. Not the paper's GPUs (no source we hold states their per-iteration compute time); give --images_per_sec
# (and --batch) or --compute_scale to change it.
THROUGHPUT_SOURCE = ("MXNet training throughput on one Maxwell TITAN X, SGD, batch 30, from "
                     "github.com/knjcode/mxnet-finetuner docs/benchmark.md (a fine-tuning tool's benchmark; "
                     "whether every layer was trained is not stated)")
THROUGHPUT_BATCH = 30
THROUGHPUT_IMAGES_PER_SEC = {"resnet": 109.98, "inception-v3": 80.67, "vgg": 48.62, "vgg16": 59.80}
# The image shape of each model's published figures; "" for Sockeye, a text model (its entry is keyed "").
DEFAULT_SHAPE = {"resnet": "3,224,224", "inception-v3": "3,299,299", "vgg": "3,224,224", "vgg16": "3,224,224",
                 "sockeye": ""}


@dataclass(frozen=True)
class ProfiledLayer:
    name: str
    kind: str
    arrays: tuple[int, ...]  # elements of each trainable array, in the trainer's key order
    forward_flops: int  # per image


@dataclass(frozen=True)
class Profile:
    model: str
    zoo_name: str
    image_shape: str
    parameters: int
    layers: tuple[ProfiledLayer, ...]

    @property
    def forward_flops(self) -> int:
        return sum(layer.forward_flops for layer in self.layers)


@cache
def _data() -> dict[str, Any]:
    return dict(json.loads(DATA.read_text()))


def models() -> tuple[str, ...]:
    return tuple(_data()["models"])


def profile(model: str, image_shape: str = "") -> Profile:
    data = _data()["models"]
    if model not in data:
        raise UserError(f"no layer profile for model {shown(model)}; there are: {', '.join(data)}")
    shape = image_shape or DEFAULT_SHAPE.get(model, "")
    if shape not in data[model]:
        raise UserError(f"no layer profile for {model} at image shape {shown(shape)}; there are: {', '.join(data[model])}")
    raw = data[model][shape]
    layers = tuple(ProfiledLayer(str(x["name"]), str(x["kind"]), tuple(int(n) for n in x["arrays"]),
                                 int(x["forward_flops"])) for x in raw["layers"])
    return Profile(model, str(raw["zoo_name"]), shape, int(raw["parameters"]), layers)


def default_compute_s(model: str) -> float:
    """Seconds of forward + backward per iteration at the default throughput (THROUGHPUT_SOURCE)."""
    return THROUGHPUT_BATCH / THROUGHPUT_IMAGES_PER_SEC[model]
