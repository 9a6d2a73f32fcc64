"""Per-layer trainable parameters and forward FLOPs of the image models, as program:p3's train.py builds them.

Run once in the engine's interpreter (MXNet 1.9.1), not in the framework's; it wrote the framework's data file
src/reprokit/study/profiles/layer_profiles.json:

    /root/CK-TOOLS/lib-mxnet-1.9.1-linux-64/prefix/bin/python program/p3/layer_profile.py \\
        > src/reprokit/study/profiles/layer_profiles.json

A layer is a Gluon block that holds trainable parameters of its own (Conv2D, Dense, BatchNorm), in the order one
forward pass reaches it (input first), which is also the order of net.collect_params() for these models (checked:
the script stops if not), so a layer's index is its keys' priority order under P3 (Gluon's Trainer pushes key i
at priority -i). Per layer: each trainable array's element count (what the kvstore sends, one key each) and the
forward pass's floating-point operations for one image (multiply and add counted as 2):
Conv2D 2 * output elements * input channels / groups * kernel area (+ output elements for a bias);
Dense 2 * in * out (+ out); BatchNorm 4 * elements. Pooling, activations and the loss hold no parameters and are
not counted.
"""
from __future__ import annotations

import json
import sys

import mxnet as mx
from mxnet.gluon import nn
from mxnet.gluon.model_zoo import vision

# (study model name, model zoo name, image shapes the study entry lists parameters for)
MODELS = (("resnet", "resnet50_v1", ((3, 224, 224), (3, 32, 32))),
          ("inception-v3", "inceptionv3", ((3, 299, 299),)),
          ("vgg", "vgg19", ((3, 224, 224), (3, 32, 32))))
CLASSES = 1000


def _flops(block, x_shape, y_shape) -> int:
    out = 1
    for d in y_shape[1:]:
        out *= int(d)
    if isinstance(block, nn.Conv2D):
        w = block.weight.shape  # (out channels, in channels / groups, kh, kw)
        return 2 * out * int(w[1]) * int(w[2]) * int(w[3]) + (out if block.bias is not None else 0)
    if isinstance(block, nn.Dense):
        w = block.weight.shape  # (out units, in units)
        return 2 * int(w[0]) * int(w[1]) + (int(w[0]) if block.bias is not None else 0)
    if isinstance(block, nn.BatchNorm):
        return 4 * out
    raise SystemExit(f"layer_profile: no FLOP rule for {type(block).__name__}")


def profile(zoo_name: str, shape: tuple) -> dict:
    net = vision.get_model(zoo_name, classes=CLASSES)
    net.initialize(mx.init.Xavier(magnitude=2), ctx=mx.cpu())
    layers: list[dict] = []

    def blocks(block):  # every block: a Dense with an activation has that activation as a child
        yield block
        for child in block._children.values():
            yield from blocks(child)

    def hook(block, inputs, output):
        params = [p for p in block._reg_params.values() if p.grad_req != "null"]
        layers.append({"name": block.name, "kind": type(block).__name__,
                       "arrays": [int(p.data().size) for p in params],
                       "params": [p.name for p in params],
                       "forward_flops": _flops(block, inputs[0].shape, output.shape)})

    for block in blocks(net):
        if any(p.grad_req != "null" for p in block._reg_params.values()):
            block.register_forward_hook(hook)
    net(mx.nd.zeros((1,) + shape))  # not hybridized: the hooks see every leaf
    order = [p.name for p in net.collect_params().values() if p.grad_req != "null"]
    if [n for layer in layers for n in layer["params"]] != order:
        raise SystemExit(f"layer_profile: {zoo_name}: forward order differs from collect_params order: "
                         f"{[n for layer in layers for n in layer['params']]} {order}")
    for layer in layers:
        del layer["params"]
    return {"zoo_name": zoo_name, "image_shape": ",".join(map(str, shape)), "classes": CLASSES,
            "parameters": sum(sum(layer["arrays"]) for layer in layers),
            "forward_flops": sum(layer["forward_flops"] for layer in layers), "layers": layers}


def main() -> None:
    out: dict = {"source": ("program/p3/layer_profile.py in MXNet " + mx.__version__ + "'s interpreter: "
                            "Gluon model zoo, classes=1000, trainable arrays per block that holds its own, in forward (= key) order, "
                            "forward FLOPs per image (multiply-add = 2)"),
                 "command": ("/root/CK-TOOLS/lib-mxnet-1.9.1-linux-64/prefix/bin/python program/p3/layer_profile.py "
                             "> src/reprokit/study/profiles/layer_profiles.json"),
                 "models": {}}
    for model, zoo_name, shapes in MODELS:
        out["models"][model] = {",".join(map(str, s)): profile(zoo_name, s) for s in shapes}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
