"""Emulated compute's profiles, settings and arithmetic (no engine)."""
import json
import re

import pytest

from reprokit.core.errors import UserError
from reprokit.emulation import profile as em
from reprokit.emulation.gpus import gpus
from reprokit.engines.base import get_engine
from reprokit.run.settings import resolve
from reprokit.study.profiles import emulation_profiles, layer_profiles

STOCK, FORK = get_engine("stock"), get_engine("p3")


def test_every_stored_profile_is_what_its_gpus_figures_make_and_every_gpu_has_one():
    assert set(em.named_profiles()) == set(gpus())
    for gpu in gpus().values():
        stored = json.loads((em.PROFILES_DIR / f"{gpu.name}.json").read_text())
        assert stored == json.loads(json.dumps(emulation_profiles.collection(gpu).to_dict())), gpu.name


def test_v100_resnet_at_224_is_the_published_throughput_and_splits_by_flops():
    p = em.resolve_profile("v100", "resnet", "3,224,224", 96)
    assert 96 / p.total_s == pytest.approx(384 * 1.05)
    assert p.backward_s == pytest.approx(2 * p.forward_s)
    flops = layer_profiles.profile("resnet").layers
    shares = [x.forward_s / p.forward_s for x in p.layers]
    assert shares == pytest.approx([x.forward_flops / sum(y.forward_flops for y in flops) for x in flops])
    assert [x.arrays for x in p.layers] == [x.arrays for x in flops]
    assert {f.name for f in p.factors} >= {"v100_images_per_sec", "batch"}
    assert all(f.source for f in p.factors)


def test_vgg_is_scaled_by_its_titan_x_speed_and_smaller_images_by_their_flops():
    resnet = em.resolve_profile("v100", "resnet", "3,224,224", 1).total_s
    vgg = em.resolve_profile("v100", "vgg", "3,224,224", 1).total_s
    assert resnet / vgg == pytest.approx(178.25 / 403.2)  # gpus.json: 403.2 times 48.62/109.98, rounded
    small = em.resolve_profile("v100", "resnet", "3,32,32", 1).total_s
    assert small / resnet == pytest.approx(layer_profiles.profile("resnet", "3,32,32").forward_flops /
                                           layer_profiles.profile("resnet").forward_flops)


def test_every_gpu_profile_has_vgg16_at_both_shapes_with_its_own_throughput():
    for gpu in gpus().values():
        for shape in ("3,224,224", "3,32,32"):
            p = em.resolve_profile(gpu.name, "vgg16", shape, 1)
            assert [x.arrays for x in p.layers] == [x.arrays for x in layer_profiles.profile("vgg16", shape).layers]
            assert sum(sum(x.arrays) for x in p.layers) == layer_profiles.profile("vgg16", shape).parameters
        at_224 = em.resolve_profile(gpu.name, "vgg16", "3,224,224", 1).total_s
        assert 1 / at_224 == pytest.approx(gpu.throughput("vgg16").per_sec)
        # VGG-16 is faster than VGG-19 on every GPU, by less than their FLOPs' ratio would say at most
        assert 1.1 < gpu.throughput("vgg16").per_sec / gpu.throughput("vgg").per_sec < 1.3, gpu.name
    titan_x = em.resolve_profile("titan-x-maxwell", "vgg16", "3,224,224", 30).total_s
    assert 30 / titan_x == pytest.approx(59.80)  # knjcode/mxnet-finetuner's VGG16 at batch 30, measured


def test_batch_scaling_is_linear_and_kept_as_a_factor():
    one = em.resolve_profile("v100", "resnet", "3,32,32", 1)
    assert one.at_batch(32).total_s == pytest.approx(32 * one.total_s)
    assert one.at_batch(32).factors[-1].name == "batch" and one.at_batch(1) is one


def test_a_profile_survives_its_document_and_a_bad_one_is_one_line(tmp_path):
    p = em.resolve_profile("v100", "vgg", "3,32,32", 4)
    assert em.ComputeProfile.from_dict(p.to_dict()) == p
    bad = p.to_dict()
    bad["layers"][0]["forward_s"] = -1
    with pytest.raises(UserError, match=r"layers\[0\]\.forward_s must be from 0"):
        em.ComputeProfile.from_dict(bad)


def test_average_is_layer_by_layer():
    p = em.resolve_profile("v100", "vgg", "3,32,32", 4)
    doubled = p.scaled(em.Factor("x", 3.0, "test"))
    mean = em.average([p, doubled], "m", "src")
    assert mean.total_s == pytest.approx(2 * p.total_s) and mean.name == "m"


def test_dilation_divides_rates_and_multiplies_throughput():
    assert em.dilated_rate("1gbit", 4) == "250000000bit"
    assert em.dilated_rate("100mbit", 0.5) == "200000000bit"
    assert em.dedilated(10.0, 4) == 40.0


@pytest.mark.parametrize("env, problem", [
    ({"COMPUTE": "gpu"}, "unknown COMPUTE 'gpu'; valid ones: real, emulated"),
    ({"COMPUTE": "emulated", "DILATION": "0"}, "DILATION must be a number above 0"),
    ({"COMPUTE": "emulated", "DILATION": "-2"}, "DILATION must be a number above 0"),
    ({"COMPUTE": "emulated", "DILATION": "nan"}, "DILATION must be a number above 0"),
    ({"COMPUTE": "emulated", "COMPUTE_PROFILE": "rtx"}, "unknown --env.COMPUTE_PROFILE 'rtx'; valid ones: p4000 (the "
                                                        "paper's), titan-x-maxwell, v100, a100, h100, or measured:FILE"),
    ({"COMPUTE": "emulated", "COMPUTE_PROFILE": "measured:/no/such.json"}, "'/no/such.json' is not a file"),
    ({"COMPUTE": "emulated", "COMPUTE_PROFILE": "/nonexistent/p.json"}, "is not a file"),
    ({"COMPUTE": "emulated", "IMAGE_SHAPE": "3,64,64"}, "has no profile for resnet at image shape 3,64,64"),
    ({"DILATION": "2"}, "DILATION applies only to emulated compute; add --env.COMPUTE=emulated"),
    ({"COMPUTE_PROFILE": "v100"}, "COMPUTE_PROFILE applies only to emulated compute"),
    ({"COMPUTE_WAIT": "busy"}, "COMPUTE_WAIT applies only to emulated compute"),
    ({"DILATION": "2", "COMPUTE_WAIT": "busy"}, "DILATION and COMPUTE_WAIT apply only to emulated compute"),
    ({"COMPUTE": "emulated", "COMPUTE_WAIT": "spin"}, "unknown COMPUTE_WAIT 'spin'; valid ones: sleep, busy"),
])
def test_bad_emulation_settings_are_one_line_naming_the_fix(env, problem):
    with pytest.raises(UserError, match=re.escape(problem)) as info:
        resolve("resnet", env, "smoke")
    assert "\n" not in str(info.value) and "--env." in str(info.value)


def test_emulated_sockeye_runs_train_py_over_its_profiles_arrays_and_real_sockeye_is_unchanged():
    settings = resolve("sockeye", {"COMPUTE": "emulated"}, "smoke")
    assert (settings.script, settings.compute_profile, settings.image_shape) == ("train.py", "p4000", "")
    args = settings.train_args(STOCK)
    assert args[:2] == ["--network", "profile"] and "--image-shape" not in args
    assert args[args.index("--compute"):args.index("--compute") + 4] == ["--compute", "emulated",
                                                                        "--compute-profile", em.PROFILE_FILE]
    real = resolve("sockeye", {"OUTPUT_FILE": "model"}, "smoke")
    assert real.script == "sockeye_run.py" and real.train_args(STOCK)[:2] == ["--output", "model"]
    assert "--compute" not in real.train_args(STOCK)
    with pytest.raises(UserError, match="OUTPUT_FILE applies to real Sockeye runs"):
        resolve("sockeye", {"COMPUTE": "emulated", "OUTPUT_FILE": "model"}, "smoke")


def test_emulated_settings_reach_the_training_script():
    settings = resolve("resnet", {"COMPUTE": "emulated", "DILATION": "2.5"}, "smoke")
    assert (settings.compute, settings.compute_profile, settings.dilation) == ("emulated", "p4000", 2.5)  # the paper's
    args = settings.train_args(STOCK)
    assert args[args.index("--compute"):] == ["--compute", "emulated", "--compute-profile", em.PROFILE_FILE,
                                              "--dilation", "2.5", "--compute-wait", "sleep", "--comm-probes", "1"]
    busy = resolve("resnet", {"COMPUTE": "emulated", "COMPUTE_WAIT": "busy"}, "smoke").train_args(STOCK)
    assert busy[-4:] == ["--compute-wait", "busy", "--comm-probes", "1"]


def test_on_the_authors_builds_an_emulated_run_has_their_van_and_no_engine_probes():
    """Their P3 is compiled into ps-lite's own van (no DMLC_PS_VAN_TYPE), and MXNet 1.1 lacks the probes' engine call."""
    settings = resolve("resnet", {"COMPUTE": "emulated", "VARIANT": "p3"}, "smoke")
    stock, fork = settings.train_args(STOCK), settings.train_args(FORK)
    assert stock[stock.index("--ps-van") + 1] == "p3" and stock[-2:] == ["--comm-probes", "1"]  # integer keys
    assert fork[fork.index("--ps-van") + 1] == "zmq" and fork[-4:] == ["--comm-probes", "0", "--string-keys", "1"]
    unprioritised = resolve("resnet", {"COMPUTE": "emulated", "VARIANT": "p3", "P3_PRIORITY": "0"}, "smoke")
    assert unprioritised.train_args(STOCK)[unprioritised.train_args(STOCK).index("--p3-priority") + 1] == "0"
    fork = unprioritised.train_args(FORK)
    assert fork[fork.index("--p3-priority") + 1] == "1"  # stock MXNet's knob: their builds keep the Trainer's priorities
    assert "--compute" not in resolve("resnet", {}, "smoke").train_args(STOCK)
