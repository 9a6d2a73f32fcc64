"""The stored profiles of emulated compute (reprokit/emulation/profiles/NAME.json), one per GPU of
reprokit/emulation/gpus.json, made from its throughputs and the real models' per-layer FLOPs (layer_profiles.json).

    python -m reprokit.study.profiles.emulation_profiles   # rewrites profiles/NAME.json for every GPU

Per image (per sentence pair for Sockeye), forward + backward on the GPU: 1 / (its throughput of the model at the
model's published image shape), times the run's image shape's FLOPs over that shape's. Split over layers by forward FLOPs, one third forward and
two thirds backward, as the iteration model does (layer_profiles.py). A test keeps the files equal to what this
makes of gpus.json.
"""
from __future__ import annotations

import sys

from reprokit.core.jsonfile import write_json
from reprokit.emulation.gpus import Gpu, gpus
from reprokit.emulation.profile import PROFILES_DIR, Collection, ComputeProfile, Factor, device_profile
from reprokit.study.profiles import layer_profiles

RANGE_NOTE = ("the central figure of a plausible range (reprokit/emulation/gpus.json); predicted verdicts are judged "
              "over the whole range")


def profile(gpu: Gpu, model: str, image_shape: str) -> ComputeProfile:
    layered = layer_profiles.profile(model, image_shape)
    published = layer_profiles.profile(model, layer_profiles.DEFAULT_SHAPE[model])
    rate = gpu.throughput(model)
    at = f" at {published.image_shape}" if published.image_shape else ""
    factors = (
        Factor(f"{gpu.name}_{rate.unit}_per_sec", rate.per_sec,
               f"{model}{at}, batch {rate.batch}, {rate.precision}"
               f"{', estimated from another GPU' if rate.estimated else ''} ({rate.low:g} to {rate.high:g}; "
               f"{RANGE_NOTE}): {rate.source}"),
        Factor("image_shape_flops_ratio", layered.forward_flops / published.forward_flops,
               f"forward FLOPs at {image_shape} over {published.image_shape} (layer_profiles.json)"),
    )
    seconds_per_image = factors[1].value / rate.per_sec
    layers = [(x.name, x.arrays, x.forward_flops) for x in layered.layers]
    return device_profile(gpu.name, model, image_shape, layers, seconds_per_image, factors, collection_source(gpu),
                          layer_profiles.FORWARD_SHARE)


def collection_source(gpu: Gpu) -> str:
    return (f"one {gpu.device} per image (per sentence pair for sockeye), from its training throughput (reprokit/emulation/gpus.json); per-layer "
            f"split by forward FLOPs (src/reprokit/study/profiles/layer_profiles.json), forward 1/3, backward 2/3; gradients' "
            f"values are not modelled")


def collection(gpu: Gpu) -> Collection:
    data = layer_profiles._data()["models"]
    return Collection(gpu.name, collection_source(gpu),
                      tuple(profile(gpu, model, shape) for model in sorted(data) if model in gpu.models
                            for shape in sorted(data[model])))


def main() -> int:
    for gpu in gpus().values():
        path = PROFILES_DIR / f"{gpu.name}.json"
        write_json(path, collection(gpu).to_dict())
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
