"""The authors' artifact as an engine: build flags, fetch checks, engine selection and the artifact's command line."""
import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from support.loopback import FileServer
from reprokit.data.fetch import extract_zip
from reprokit.engines.artifact import Cuda, InstallError, Steps, ZipSource, detect_cuda, fetch_zip, make_args, request_from_env
from reprokit.engines.artifact_run import artifact_command
from reprokit.engines.choice import EngineChoice, select_engine
from reprokit.errors import UserError


def fake_toolkit(root: Path, cudnn: bool = False) -> Path:
    """A folder shaped like a CUDA toolkit (bin/nvcc, include/cuda_runtime.h): detection only looks at paths."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    if cudnn:
        (root / "include" / "cudnn.h").write_text("")
    return root


def test_cuda_toolkit_given_by_cuda_path_is_used_with_cudnn_when_its_header_is_there(tmp_path):
    toolkit = fake_toolkit(tmp_path / "cuda", cudnn=True)
    assert detect_cuda({"CUDA_PATH": str(toolkit)}, which=lambda _: None) == Cuda(str(toolkit), cudnn=True)


def test_nvcc_wrapper_outside_a_toolkit_is_not_taken_for_the_toolkit(tmp_path):
    wrapper = tmp_path / "bin" / "nvcc"  # like /usr/local/bin/nvcc, a script that execs the real one
    wrapper.parent.mkdir()
    wrapper.write_text("#!/bin/sh\n")
    toolkit = fake_toolkit(tmp_path / "cuda-home")
    found = detect_cuda({"CUDA_HOME": str(toolkit)}, which=lambda _: str(wrapper))
    assert found is not None and found.path == str(toolkit)


def test_use_cuda_0_forces_a_cpu_build(tmp_path):
    toolkit = fake_toolkit(tmp_path / "cuda")
    assert detect_cuda({"USE_CUDA": "0", "CUDA_PATH": str(toolkit)}) is None


def test_cuda_path_that_is_no_toolkit_is_refused_with_the_fix(tmp_path):
    with pytest.raises(UserError, match="not a CUDA toolkit.*--env.USE_CUDA=0"):
        detect_cuda({"CUDA_PATH": str(tmp_path)})


def test_make_line_turns_cuda_off_explicitly_for_a_cpu_build():
    # The fork's make/config.mk defaults to USE_CUDA=1: a CPU build must say 0 on the command line.
    assert make_args(None, 2) == ["make", "-j2", "USE_OPENCV=1", "USE_BLAS=openblas", "USE_DIST_KVSTORE=1",
                                  "USE_CUDA=0", "USE_CUDNN=0", "USE_CUDA_PATH=NONE"]
    assert make_args(Cuda("/opt/cuda", cudnn=False), 8)[-3:] == ["USE_CUDA=1", "USE_CUDNN=0", "USE_CUDA_PATH=/opt/cuda"]


@pytest.mark.parametrize("env, problem", [
    ({"P3_BUILD": "p3", "PACKAGE_URL": ""}, "PACKAGE_URL is empty"),
    ({"P3_BUILD": "p4", "PACKAGE_URL": "u"}, "P3_BUILD must be one of p3, baseline"),
    ({"P3_BUILD": "p3", "PACKAGE_URL": "u", "PACKAGE_SOURCE": "zip", "PACKAGE_MD5": "xyz"}, "PACKAGE_MD5 must be 32 hex"),
    ({"P3_BUILD": "p3", "PACKAGE_URL": "u", "PACKAGE_SOURCE": "svn"}, "PACKAGE_SOURCE must be git or zip"),
    ({"P3_BUILD": "p3", "PACKAGE_URL": "u", "CK_HOST_CPU_NUMBER_OF_PROCESSORS": "0"}, "build jobs"),
])
def test_bad_install_settings_are_refused_in_one_line(tmp_path, env, problem):
    with pytest.raises(UserError, match=problem):
        request_from_env({"INSTALL_DIR": str(tmp_path), "USE_CUDA": "0", **env})


def test_install_settings_from_the_package_environment(tmp_path):
    request = request_from_env({"INSTALL_DIR": str(tmp_path), "P3_BUILD": "baseline", "PACKAGE_URL": "file:///x.git",
                                "PACKAGE_BRANCH": "baseline", "USE_CUDA": "0", "CK_HOST_CPU_NUMBER_OF_PROCESSORS": "3",
                                "ARTIFACT_PIP_PACKAGES": "numpy==1.23.5 requests"})
    assert (request.build, request.source.branch, request.jobs, request.cuda) == ("baseline", "baseline", 3, None)
    assert request.pip_packages == ["numpy==1.23.5", "requests"]


# ----------------------------------------------------------------------------- fetch checks


def _zip_bytes(names: list[str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name in names:
            zf.writestr(name, "x")
    return buffer.getvalue()


def test_zip_with_a_path_outside_its_folder_is_refused(tmp_path):
    archive = tmp_path / "evil.zip"
    archive.write_bytes(_zip_bytes(["top/ok.txt", "../escaped.txt"]))
    with pytest.raises(UserError, match="outside its folder"):
        extract_zip(archive, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()


def test_zip_without_a_single_top_folder_is_refused(tmp_path):
    archive = tmp_path / "flat.zip"
    archive.write_bytes(_zip_bytes(["a.txt", "b/c.txt"]))
    with pytest.raises(UserError, match="should hold one top folder"):
        extract_zip(archive, tmp_path / "out")


def test_download_cut_short_by_the_server_is_a_fetch_step_error(tmp_path):
    """The loopback server stands in for Zenodo; one file announces its whole length and sends half."""
    body = _zip_bytes(["top-c647954/a.txt"])
    steps = Steps(tmp_path / "log.txt", io.StringIO())
    with FileServer() as server:
        server.add("p3.zip", body)
        server.add_truncated("cut.zip", body[: len(body) // 2], claimed=len(body))
        for name, dest in (("p3.zip", "whole"), ("cut.zip", "cut"), ("missing.zip", "none")):
            (tmp_path / name).mkdir()
        assert fetch_zip(ZipSource(server.url("p3.zip"), md5=hashlib.md5(body).hexdigest()), tmp_path / "p3.zip",
                         tmp_path / "whole", steps) == "c647954"
        with pytest.raises(InstallError, match="step fetch failed: .*cut short"):
            fetch_zip(ZipSource(server.url("cut.zip")), tmp_path / "cut.zip", tmp_path / "cut", steps)
        with pytest.raises(InstallError, match="step fetch failed: cannot download .*HTTP 404"):
            fetch_zip(ZipSource(server.url("missing.zip")), tmp_path / "missing.zip", tmp_path / "none", steps)
    assert (tmp_path / "whole" / "a.txt").exists() and not (tmp_path / "cut").exists()


def test_checksum_mismatch_names_both_checksums(tmp_path):
    staging = tmp_path / "staging"
    staging.mkdir()
    with FileServer() as server:
        server.add("p3.zip", _zip_bytes(["top/a.txt"]))
        with pytest.raises(InstallError, match=f"checksum mismatch .*MD5 [0-9a-f]{{32}}, expected {'0' * 32}"):
            fetch_zip(ZipSource(server.url("p3.zip"), md5="0" * 32), staging, staging / "src",
                      Steps(tmp_path / "log.txt", io.StringIO()))
    assert not (staging / "src").exists()


# ----------------------------------------------------------------------------- engine selection

STOCK = EngineChoice("stock1", "stock", "mxnet-1.9.1-cpu", "/e/bin/python", (1, 9, 1))
STOCK_OLD = EngineChoice("stock0", "stock", "mxnet-1.8.0-cpu", "/o/bin/python", (1, 8, 0))
P3 = EngineChoice("p3env", "p3", "sysml19-p3@c647954", "/a/prefix/bin/python", ("2026-01-01",), tree="/a/src")
P3_NEWER = EngineChoice("p3new", "p3", "sysml19-p3@abc1234", "/n/prefix/bin/python", ("2026-02-01",), tree="/n/src")
BASELINE = EngineChoice("baseenv", "baseline", "sysml19-p3-baseline@1234567", "/b/prefix/bin/python", ("2026-01-01",),
                        tree="/b/src")


@pytest.mark.parametrize("variant", ["p3", "baseline"])
def test_embedded_world_runs_both_variants_on_the_newest_stock_engine(variant):
    assert select_engine([STOCK_OLD, STOCK], variant) == STOCK


def test_artifact_world_runs_each_variant_on_its_own_build():
    everything = [STOCK, P3, BASELINE]
    assert select_engine(everything, "p3") == P3
    assert select_engine(everything, "baseline") == BASELINE
    assert select_engine([STOCK, P3, P3_NEWER, BASELINE], "p3") == P3_NEWER


def test_missing_build_is_refused_naming_its_package_and_the_embedded_switch():
    with pytest.raises(UserError) as refused:
        select_engine([STOCK, P3], "baseline")
    assert "ck install package:sysml19-p3-baseline-github" in str(refused.value)
    assert "--env.ENGINE=embedded" in str(refused.value)
    with pytest.raises(UserError, match="package:sysml19-p3-github"):
        select_engine([STOCK, BASELINE], "p3")


def test_engine_knob_forces_a_side():
    assert select_engine([STOCK, P3, BASELINE], "baseline", engine="embedded") == STOCK
    with pytest.raises(UserError, match="sysml19-p3-github"):
        select_engine([STOCK], "p3", engine="artifact")
    with pytest.raises(UserError, match="unknown ENGINE 'gpu'"):
        select_engine([STOCK], "p3", engine="gpu")
    with pytest.raises(UserError, match="ck install package:lib-mxnet"):
        select_engine([P3], "p3", engine="embedded")


def test_pinned_engine_wins_but_never_runs_the_other_variant():
    assert select_engine([STOCK, P3, BASELINE], "baseline", pinned="stock1") == STOCK
    assert select_engine([STOCK, P3, P3_NEWER, BASELINE], "p3", pinned="p3env") == P3
    with pytest.raises(UserError, match="baseline build and cannot run VARIANT=p3"):
        select_engine([STOCK, P3, BASELINE], "p3", pinned="baseenv")
    with pytest.raises(UserError, match="ENGINE_ENV=nope is not a registered engine"):
        select_engine([STOCK], "p3", pinned="nope")


# ----------------------------------------------------------------------------- the artifact's command line


def test_image_run_is_the_artifacts_train_imagenet_with_the_seeds_arguments():
    run = artifact_command(P3, "resnet", 32, "3,32,32", 1, 31, 10, num_workers=2)
    assert run.command[:2] == ["/a/prefix/bin/python", "/a/src/example/image-classification/train_imagenet.py"]
    assert run.command[2:] == ["--network", "resnet", "--num-layers", "50", "--batch-size", "32",
                               "--image-shape", "3,32,32", "--num-epochs", "1", "--kv-store", "dist_sync",
                               "--disp-batches", "10", "--benchmark", "1", "--num-examples", str(31 * 32)]
    assert run.extra_env == {}


def test_cuda_build_trains_on_gpu_0_with_device_sync_on_the_registered_data():
    cuda_build = EngineChoice("g", "p3", "sysml19-p3@x", "/g/bin/python", (), tree="/g/src", cuda=True)
    run = artifact_command(cuda_build, "vgg", 32, "3,224,224", 1, 0, 20, num_workers=4,
                           data_train="/data/imagenet1k_train.rec")
    args = run.command
    assert args[args.index("--network") + 1: args.index("--network") + 4] == ["vgg", "--num-layers", "19"]
    assert args[args.index("--kv-store") + 1] == "dist_device_sync"
    assert args[args.index("--gpus") + 1] == "0"
    assert args[args.index("--data-train") + 1] == "/data/imagenet1k_train.rec"
    assert "--benchmark" not in args


def test_full_epoch_on_synthetic_data_splits_imagenet_over_the_workers():
    run = artifact_command(BASELINE, "inception-v3", 32, "3,299,299", 1, 0, 20, num_workers=4)
    assert run.command[2:4] == ["--network", "inception-v3"]
    assert run.command[-2:] == ["--num-examples", str(1281167 // 4)]


def test_sockeye_run_is_the_bundled_sockeye_on_the_bundled_iwslt15():
    run = artifact_command(P3, "sockeye", 64, "", 1, 31, 10, num_workers=2, sockeye_output="/out/model")
    args = run.command
    assert args[:3] == ["/a/prefix/bin/python", "-m", "sockeye.train"]
    assert run.extra_env == {"PYTHONPATH": "/a/src/example/sockeye/source"}
    assert args[args.index("--source") + 1] == "/a/src/example/sockeye/dataset/iwslt15_en-vi/train-preproc.en"
    for flag, value in [("--num-layers", "2:2"), ("--rnn-num-hidden", "512"), ("--num-embed", "512:512"),
                        ("--attention-type", "mlp"), ("--attention-num-hidden", "512"), ("--bucket-width", "10"),
                        ("--batch-size", "64"), ("--output", "/out/model"), ("--kv-store", "dist_sync"),
                        ("--max-updates", "31")]:
        assert args[args.index(flag) + 1] == value, flag
    assert "--use-cpu" in args


def test_unknown_model_for_the_artifact_is_refused():
    with pytest.raises(UserError, match="no run for cmd_key 'alexnet'.*--env.ENGINE=embedded"):
        artifact_command(P3, "alexnet", 32, "3,224,224", 1, 0, 20, num_workers=2)
