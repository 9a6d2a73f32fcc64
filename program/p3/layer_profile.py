"""Per-layer trainable parameters and forward FLOPs of the models, as program:p3's train.py and Sockeye build them.

Run once in the engine's interpreter (MXNet 1.9.1, with Sockeye 1.18 beside it), not in the framework's; it wrote
the framework's data file src/reprokit/study/profiles/layer_profiles.json:

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

Sockeye (``sockeye_profile``): Sockeye 1.18's own training model, built with sockeye_run.py's ARCHITECTURE and
bound by Sockeye's TrainingModel (one Module, not bucketed: the arrays do not depend on the lengths); its arrays
in Module's param_names order, which is the kvstore's key order (key i pushed at priority -i). That order
interleaves the model's parts (the target embedding comes first), so a layer here is a run of consecutive keys
of one part (an LSTM layer's input or recurrent weights, the attention MLP, ...), and the emulated waits follow
key order, as for the image models. Forward FLOPs per sentence pair at the mean lengths SOURCE_LENGTH and
TARGET_LENGTH: each weight matrix 2 * its elements per use, each bias its elements per use, an embedding one
operation per element looked up; a part's uses per sentence: once per source word (encoder, embeddings, the
attention's projection of the encoder states), once per target word (decoder LSTMs, the attention's query,
the hidden and output layers), once per target and source word (the attention's score vector), once per
sentence (the decoder's initial states).
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile

import sockeye.multiprocessing_utils

sockeye.multiprocessing_utils.initialize()  # Sockeye refuses to start after MXNet is loaded
import mxnet as mx  # noqa: E402
from mxnet.gluon import nn  # noqa: E402
from mxnet.gluon.model_zoo import vision  # noqa: E402

# (study model name, model zoo name, image shapes the study entry lists parameters for)
MODELS = (("resnet", "resnet50_v1", ((3, 224, 224), (3, 32, 32))),
          ("inception-v3", "inceptionv3", ((3, 299, 299),)),
          ("vgg", "vgg19", ((3, 224, 224), (3, 32, 32))),
          ("vgg16", "vgg16", ((3, 224, 224), (3, 32, 32))))
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
            "parameters": sum(sum(int(n) for n in layer["arrays"]) for layer in layers),
            "forward_flops": sum(int(layer["forward_flops"]) for layer in layers), "layers": layers}


# Sockeye as sockeye_run.py runs it (its ARCHITECTURE, kept equal by a test), at the paper's batch.
SOCKEYE_ARCHITECTURE = ["--encoder", "rnn", "--decoder", "rnn", "--num-layers", "2:2", "--rnn-cell-type", "lstm",
                        "--rnn-num-hidden", "512", "--num-embed", "512:512", "--rnn-attention-type", "mlp",
                        "--rnn-attention-num-hidden", "512", "--bucket-width", "10"]
SOCKEYE_BATCH = 32
# IWSLT15 en-vi's published word lists (nlp.stanford.edu/projects/nmt: vocab.en 17,191 lines, vocab.vi 7,709), whose
# first three lines are special symbols, not words (an xnmt recipe drops them: tail -n +4); Sockeye puts its own four
# (<pad>, <unk>, <s>, </s>) before the words. Assumed: the workflow's Sockeye, built from train.en/train.vi with its
# defaults (--num-words 0:0, no limit; --word-min-count 1:1), keeps every word of the corpus, likely more than these lists;
# no count of those is at hand.
VOCAB_FILES = {"en": 17191, "vi": 7709}
SOCKEYE_SPECIALS = 4
FILE_SPECIALS = 3
# Mean words per sentence pair, source and target together: tensorflow/nmt's README (IWSLT English-Vietnamese
# benchmark) states 32.2K words/s counted on both sides at 0.17 s per batch of 128 pairs: 42.8 per pair. No split
# between English and Vietnamese is stated: assumed even, 21.4 each, plus the one end-of-sentence symbol Sockeye
# adds to each side.
WORDS_PER_PAIR = 32.2e3 * 0.17 / 128
SOURCE_LENGTH = TARGET_LENGTH = WORDS_PER_PAIR / 2 + 1


def _sockeye_uses(param: str, source: float, target: float) -> float:
    """How often a parameter is applied per sentence pair (see the module's docstring)."""
    if param.startswith("source_embed") or param.startswith("encoder_") or "_att_e2h" in param:
        return source
    if "_att_h2s" in param:
        return source * target
    if "enc2decinit" in param:
        return 1.0
    return target  # target embedding, decoder LSTMs, attention query, hidden and output layers


def _sockeye_flops(param: str, shape: tuple, source: float, target: float) -> int:
    size = 1
    for d in shape:
        size *= int(d)
    uses = _sockeye_uses(param, source, target)
    if param.endswith("embed_weight"):
        return round(int(shape[1]) * uses)  # a lookup: one operation per element
    return round((2 * size if len(shape) == 2 else size) * uses)


def _sockeye_part(param: str) -> str:
    """The part of the model a parameter belongs to: its name without _weight/_bias."""
    return re.sub(r"_(weight|bias)$", "", param)


def sockeye_profile() -> dict:
    import sockeye.arguments as arguments
    import sockeye.constants as C
    import sockeye.data_io as data_io
    import sockeye.train as train
    import sockeye.training as training

    folder = tempfile.mkdtemp(prefix="layer-profile-sockeye-")
    for name in ("train.en", "train.vi", "dev.en", "dev.vi"):  # the parser checks that the corpus files exist
        open(os.path.join(folder, name), "w").close()
    parser = arguments.ConfigArgumentParser(description="layer profile")
    arguments.add_train_cli_args(parser)
    args = parser.parse_args(["-s", os.path.join(folder, "train.en"), "-t", os.path.join(folder, "train.vi"),
                              "-vs", os.path.join(folder, "dev.en"), "-vt", os.path.join(folder, "dev.vi"),
                              "-o", os.path.join(folder, "model"), *SOCKEYE_ARCHITECTURE,
                              "--batch-size", str(SOCKEYE_BATCH), "--batch-type", "sentence", "--use-cpu"])
    source_vocab = VOCAB_FILES["en"] - FILE_SPECIALS + SOCKEYE_SPECIALS
    target_vocab = VOCAB_FILES["vi"] - FILE_SPECIALS + SOCKEYE_SPECIALS
    max_source, max_target = (n + C.SPACE_FOR_XOS for n in args.max_seq_len)
    config = train.create_model_config(args, [source_vocab], target_vocab, max_source, max_target,
                                       data_io.DataConfig(None, max_source, max_target, 1))
    os.makedirs(os.path.join(folder, "model"))
    model = training.TrainingModel(
        config, [mx.cpu()], os.path.join(folder, "model"),
        [mx.io.DataDesc(C.SOURCE_NAME, (SOCKEYE_BATCH, max_source, 1)),
         mx.io.DataDesc(C.TARGET_NAME, (SOCKEYE_BATCH, max_target))],
        [mx.io.DataDesc(C.TARGET_LABEL_NAME, (SOCKEYE_BATCH, max_target))], (max_source, max_target),
        bucketing=False)
    group = model.module._exec_group  # what Module._initialize_kvstore hands the kvstore, in key order
    names = list(group.param_names)
    shapes = [tuple(int(d) for d in arrays[0].shape) for arrays in group.param_arrays]
    if model.module._fixed_param_names:
        raise SystemExit(f"layer_profile: sockeye fixes parameters {model.module._fixed_param_names}")
    runs: list[list[int]] = []
    for i, name in enumerate(names):
        part = re.sub(r"_(i2h|h2h|e2h|q2h|h2s)$", "", _sockeye_part(name))
        if runs and re.sub(r"_(i2h|h2h|e2h|q2h|h2s)$", "", _sockeye_part(names[runs[-1][0]])) == part:
            runs[-1].append(i)
        else:
            runs.append([i])
    parts = [re.sub(r"_(i2h|h2h|e2h|q2h|h2s)$", "", _sockeye_part(names[run[0]])) for run in runs]
    layers: list[dict] = []
    for run, part in zip(runs, parts):
        name = part if parts.count(part) == 1 else _sockeye_part(names[run[0]])
        layers.append({"name": name, "kind": "Embedding" if part.endswith("embed") else
                       "LSTM" if re.search(r"_l\d+$", part) else "Dense",
                       "arrays": [_size(shapes[i]) for i in run], "params": [names[i] for i in run],
                       "forward_flops": sum(_sockeye_flops(names[i], shapes[i], SOURCE_LENGTH, TARGET_LENGTH)
                                            for i in run)})
    return {"zoo_name": "sockeye-" + sockeye.__version__, "image_shape": "",
            "architecture": " ".join(SOCKEYE_ARCHITECTURE), "batch": SOCKEYE_BATCH,
            "vocabulary": {"source": source_vocab, "target": target_vocab},
            "mean_length": {"source": round(SOURCE_LENGTH, 2), "target": round(TARGET_LENGTH, 2)},
            "assumptions": (f"vocabularies: IWSLT15 en-vi's published word lists (vocab.en {VOCAB_FILES['en']}, "
                            f"vocab.vi {VOCAB_FILES['vi']} lines, nlp.stanford.edu/projects/nmt) less their "
                            f"{FILE_SPECIALS} special lines plus Sockeye's {SOCKEYE_SPECIALS} "
                            f"(<pad>, <unk>, <s>, </s>): {source_vocab} and {target_vocab}; the workflow's Sockeye "
                            f"builds its vocabularies from train.en/train.vi with its defaults (--num-words 0:0, no "
                            f"limit; --word-min-count 1:1), so keeps every word, likely more than these lists (no count at "
                            f"hand): its embedding and output arrays would be larger. Mean lengths: "
                            f"{WORDS_PER_PAIR:.1f} words per pair on both sides (tensorflow/nmt README, IWSLT "
                            f"English-Vietnamese: 32.2K words/s at 0.17 s per batch of 128), split evenly (assumed), "
                            f"plus one end-of-sentence symbol each: {SOURCE_LENGTH:.1f} source, {TARGET_LENGTH:.1f} "
                            f"target; they set only the split of time over the layers"),
            "parameters": sum(sum(layer["arrays"]) for layer in layers),
            "forward_flops": sum(layer["forward_flops"] for layer in layers), "layers": layers}


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def main() -> None:
    out: dict = {"source": ("program/p3/layer_profile.py in MXNet " + mx.__version__ + "'s interpreter: "
                            "Gluon model zoo, classes=1000, trainable arrays per block that holds its own, in forward (= key) order, "
                            "forward FLOPs per image (multiply-add = 2); sockeye: Sockeye " + sockeye.__version__ +
                            "'s own training model, arrays in Module's key order, forward FLOPs per sentence pair"),
                 "command": ("/root/CK-TOOLS/lib-mxnet-1.9.1-linux-64/prefix/bin/python program/p3/layer_profile.py "
                             "> src/reprokit/study/profiles/layer_profiles.json"),
                 "models": {}}
    for model, zoo_name, shapes in MODELS:
        out["models"][model] = {",".join(map(str, s)): profile(zoo_name, s) for s in shapes}
    sockeye_entry = sockeye_profile()
    for layer in sockeye_entry["layers"]:
        del layer["params"]
    out["models"]["sockeye"] = {"": sockeye_entry}  # a text model: no image shape
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
