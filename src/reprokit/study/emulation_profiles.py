"""The stored device profile of emulated compute (reprokit/emulation/profiles/v100.json), made from a published
throughput and the real models' per-layer FLOPs (layer_profiles.json).

    python -m reprokit.study.emulation_profiles   # rewrites profiles/v100.json

Per image, forward + backward on one V100 at FP32: 1 / (ResNet-50 v1.5's published MXNet training throughput),
times ResNet-50 v1's speed over v1.5's (the same source: v1.5 is about 5% slower), times the model's speed relative
to ResNet-50 on one TITAN X (the only figures we hold for all three models, layer_profiles.THROUGHPUT_SOURCE), times
the image shape's FLOPs over the published shape's (224x224, 299x299 for Inception-v3). Split over layers by
forward FLOPs, one third forward and two thirds backward, as the iteration model does (layer_profiles.py).
"""
from __future__ import annotations

import sys

from reprokit.emulation.profile import PROFILES_DIR, Collection, ComputeProfile, Factor, device_profile
from reprokit.jsonfile import write_json
from reprokit.study import layer_profiles

NAME = "v100"
V100_IMAGES_PER_SEC = 384.0
V100_SOURCE = ("NVIDIA DeepLearningExamples, MxNet/Classification/RN50v1.5/README.md, 'Training performance: NVIDIA "
               "DGX-1 (8x V100 16GB)': 1 GPU, FP32, batch 96, 384 img/s (mxnet-20.12-py3 NGC container), "
               "https://github.com/NVIDIA/DeepLearningExamples/blob/master/MxNet/Classification/RN50v1.5/README.md")
V1_OVER_V15 = 1.05
V1_SOURCE = ("the same README: 'ResNet-50 v1.5 ... comes with a small performance drawback (~5% imgs/sec)' "
             "against v1 (the model zoo's resnet50_v1 trained here)")
COLLECTION_SOURCE = (f"one V100 (FP32) per image: {V100_SOURCE}; per-layer split by forward FLOPs "
                     f"(src/reprokit/study/layer_profiles.json), forward 1/3, backward 2/3; gradients' values are not "
                     f"modelled")


def profile(model: str, image_shape: str) -> ComputeProfile:
    layered = layer_profiles.profile(model, image_shape)
    published = layer_profiles.profile(model, layer_profiles.DEFAULT_SHAPE[model])
    titan = layer_profiles.THROUGHPUT_IMAGES_PER_SEC
    factors = (
        Factor("v100_resnet50_v1.5_images_per_sec", V100_IMAGES_PER_SEC, V100_SOURCE),
        Factor("resnet50_v1_over_v1.5_speed", V1_OVER_V15, V1_SOURCE),
        Factor("model_speed_over_resnet50", titan[model] / titan["resnet"],
               f"TITAN X images/s, {model} {titan[model]} over ResNet-50 {titan['resnet']}: "
               f"{layer_profiles.THROUGHPUT_SOURCE}"),
        Factor("image_shape_flops_ratio", layered.forward_flops / published.forward_flops,
               f"forward FLOPs at {image_shape} over {published.image_shape} (layer_profiles.json)"),
    )
    images_per_sec = V100_IMAGES_PER_SEC * V1_OVER_V15 * factors[2].value / factors[3].value
    layers = [(x.name, x.arrays, x.forward_flops) for x in layered.layers]
    return device_profile(NAME, model, image_shape, layers, 1 / images_per_sec, factors, COLLECTION_SOURCE,
                          layer_profiles.FORWARD_SHARE)


def v100() -> Collection:
    data = layer_profiles._data()["models"]
    return Collection(NAME, COLLECTION_SOURCE,
                      tuple(profile(model, shape) for model in sorted(data) for shape in sorted(data[model])))


def main() -> int:
    path = PROFILES_DIR / f"{NAME}.json"
    write_json(path, v100().to_dict())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
