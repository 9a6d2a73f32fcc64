"""The authors' artifact as an engine: build flags, fetch checks, engine selection and the artifact's command line."""
import hashlib
import io
import json
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

import reprokit.engines.artifact.config as artifact
import reprokit.run.launch as launch
from reprokit.core.errors import UserError
from reprokit.core.paths import REPO_ROOT
from reprokit.core.shipping import shipped_name
from reprokit.data.fetch import extract_zip
from reprokit.engines.artifact.command import WorkerSlot, count_records, worker_slots
from reprokit.engines.artifact.config import (
    Cuda,
    GitSource,
    ZipSource,
    build_env,
    detect_cuda,
    make_args,
    request_from_env,
)
from reprokit.engines.artifact.install import InstallError, Steps, apply_patches, fetch_git, fetch_zip, make_deps
from reprokit.engines.base import InstalledEngine, JobData, P3Knobs, RoleCommand, RunJob, get_engine
from reprokit.engines.choice import select_engine
from reprokit.engines.stock import FINISH_LINE
from reprokit.run.settings import resolve
from reprokit.run.spec import check_emulation_on
from support.loopback import FileServer
from support.runs import fake_plan, no_process_left


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
                                  "USE_CUDA=0", "USE_CUDNN=0", "USE_CUDA_PATH=NONE", "USE_GPERFTOOLS=0",
                                  "USE_JEMALLOC=0"]
    assert make_args(Cuda("/opt/cuda", cudnn=False), 8)[5:8] == ["USE_CUDA=1", "USE_CUDNN=0", "USE_CUDA_PATH=/opt/cuda"]


def test_make_line_links_ps_lite_against_the_deps_folder_as_shared_libraries(tmp_path):
    # One argument each: make gets PS_LDFLAGS_A with its space, no shell splits it.
    assert make_args(None, 2, tmp_path / "deps")[-2:] == [f"DEPS_PATH={tmp_path / 'deps'}",
                                                          "PS_LDFLAGS_A=-lprotobuf-lite -lzmq"]


def test_deps_folder_links_the_system_zmq_and_protobuf_only_for_a_tree_with_ps_lite(tmp_path):
    steps = Steps(tmp_path / "log.txt", io.StringIO())
    (tmp_path / "plain" / "src").mkdir(parents=True)
    assert make_deps(tmp_path / "plain" / "src", steps) is None
    (tmp_path / "fork" / "src" / "ps-lite").mkdir(parents=True)
    if not Path("/usr/include/zmq.h").exists():
        with pytest.raises(InstallError, match="step deps failed: .*apt-get install libzmq3-dev"):
            make_deps(tmp_path / "fork" / "src", steps)
        return
    deps = make_deps(tmp_path / "fork" / "src", steps)
    assert (deps / "include" / "zmq.h").resolve() == Path("/usr/include/zmq.h").resolve()
    assert (deps / "bin" / "protoc").is_symlink()


def test_ccache_goes_first_on_path_not_into_cxx(tmp_path, monkeypatch):
    wrappers = tmp_path / "ccache"
    wrappers.mkdir()
    monkeypatch.setattr(artifact, "CCACHE_WRAPPERS", wrappers)
    env = build_env(tmp_path / "tools" / "pkg", True, {"PATH": "/usr/bin"})
    assert env["PATH"] == f"{wrappers}:/usr/bin" and "CXX" not in env
    assert env["CCACHE_BASEDIR"] == str(tmp_path / "tools")  # every package's tree: the second build hits the first
    assert build_env(tmp_path / "tools" / "pkg", False, {"PATH": "/usr/bin"}) == {"PATH": "/usr/bin"}


def _git_tree(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "a.txt").write_text("one\n")
    for args in (["init", "-q"], ["add", "a.txt"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, timeout=60, capture_output=True)
    return root


def test_patches_apply_in_order_and_a_patch_that_does_not_apply_names_itself(tmp_path):
    tree = _git_tree(tmp_path / "src")
    good = tmp_path / "0001-good.patch"
    good.write_text("ours\n\ndiff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n")
    steps = Steps(tmp_path / "log.txt", io.StringIO())
    assert apply_patches([good], tree, steps) == ["0001-good.patch"]
    assert (tree / "a.txt").read_text() == "two\n"
    with pytest.raises(InstallError, match="step patch failed: git exited with code 1 .*log: "):
        apply_patches([good], tree, steps)  # applied already: the context no longer matches


def test_patches_in_a_plain_tree_inside_another_repository_are_not_skipped(tmp_path):
    outer = _git_tree(tmp_path / "outer")
    tree = outer / "staging" / "src"  # an unpacked zip inside a work tree: git apply would skip silently
    tree.mkdir(parents=True)
    (tree / "a.txt").write_text("one\n")
    patch = tmp_path / "0001.patch"
    patch.write_text("diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n")
    apply_patches([patch], tree, Steps(tmp_path / "log.txt", io.StringIO()))
    assert (tree / "a.txt").read_text() == "two\n"


def test_patch_folder_is_the_packages_own_unless_given(tmp_path):
    base = {"INSTALL_DIR": str(tmp_path), "P3_BUILD": "p3", "PACKAGE_URL": "u", "USE_CUDA": "0"}
    (tmp_path / "pkg" / "patches").mkdir(parents=True)
    for name in ("0002-b.patch", "0001-a.patch", "README.md"):
        (tmp_path / "pkg" / "patches" / name).write_text("")
    request = request_from_env({**base, "ORIGINAL_PACKAGE_DIR": str(tmp_path / "pkg")})
    assert [p.name for p in request.patches] == ["0001-a.patch", "0002-b.patch"]
    assert request_from_env(base).patches == []
    with pytest.raises(UserError, match="ARTIFACT_PATCH_DIR=.* is not a folder"):
        request_from_env({**base, "ARTIFACT_PATCH_DIR": str(tmp_path / "nope")})


def test_one_copy_of_each_patch_serves_every_package_that_names_it(tmp_path):
    """The baseline and Zenodo packages take the P3 package's patches; the baseline only those its meta lists."""
    base = {"INSTALL_DIR": str(tmp_path), "PACKAGE_URL": "u", "USE_CUDA": "0"}
    applied = {}
    for package in ("sysml19-p3-github", "sysml19-p3-zenodo", "sysml19-p3-baseline-github"):
        meta = json.loads((REPO_ROOT / "package" / package / ".cm" / "meta.json").read_text())
        env = {**base, **meta["customize"]["install_env"], "ORIGINAL_PACKAGE_DIR": str(REPO_ROOT / "package" / package),
               "P3_BUILD": "baseline" if "baseline" in package else "p3"}
        applied[package] = [p.name for p in request_from_env(env).patches]
    assert len(applied["sysml19-p3-github"]) == 5 and applied["sysml19-p3-zenodo"] == applied["sysml19-p3-github"]
    assert applied["sysml19-p3-baseline-github"] == ["0001-opencv4-pkgconfig.patch", "0002-opencv4-constants.patch",
                                                     "0004-image-benchmark-batches.patch",
                                                     "0005-sockeye-measure-speed-every.patch"]
    patch_files = sorted(p.relative_to(REPO_ROOT / "package") for p in (REPO_ROOT / "package").rglob("*.patch")
                         if not p.relative_to(REPO_ROOT / "package").parts[0].startswith("bytescheduler"))
    assert [p.parts[0] for p in patch_files] == ["sysml19-p3-github"] * 5  # one copy of each (ByteScheduler's: its own)
    listed = {**base, "P3_BUILD": "baseline", "ORIGINAL_PACKAGE_DIR": str(REPO_ROOT / "package" / "x"),
              "ARTIFACT_PATCHES_FROM": "sysml19-p3-github", "ARTIFACT_PATCHES": "0009-none.patch"}
    with pytest.raises(UserError, match="ARTIFACT_PATCHES names 0009-none.patch, which .* does not hold"):
        request_from_env(listed)


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


def test_an_unreachable_clone_names_the_offline_way(tmp_path):
    steps = Steps(tmp_path / "log.txt", io.StringIO())
    with pytest.raises(InstallError) as err:
        fetch_git(GitSource(str(tmp_path / "no-such-repository")), tmp_path / "clone", steps, step="sockeye",
                  setting="SOCKEYE_URL")
    message = str(err.value)
    assert message.startswith("step sockeye failed: git exited with code 128")
    assert message.endswith("; no network or the source unreachable? give a local copy with --env.SOCKEYE_URL=PATH "
                            "(a git clone)")


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
        for name, _dest in (("p3.zip", "whole"), ("cut.zip", "cut"), ("missing.zip", "none")):
            (tmp_path / name).mkdir()
        assert fetch_zip(ZipSource(server.url("p3.zip"), md5=hashlib.md5(body).hexdigest()), tmp_path / "p3.zip",
                         tmp_path / "whole", steps) == "c647954"
        with pytest.raises(InstallError, match="step fetch failed: .*cut short"):
            fetch_zip(ZipSource(server.url("cut.zip")), tmp_path / "cut.zip", tmp_path / "cut", steps)
        with pytest.raises(InstallError, match="step fetch failed: cannot download .*HTTP 404.*; no network or the "
                                               "source unreachable\\? give a local copy with --env.PACKAGE_URL=PATH"):
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

STOCK = InstalledEngine(env_uid="stock1", build="stock", name="mxnet-1.9.1-cpu", python="/e/bin/python",
                        rank=(1, 9, 1))
STOCK_OLD = InstalledEngine(env_uid="stock0", build="stock", name="mxnet-1.8.0-cpu", python="/o/bin/python",
                            rank=(1, 8, 0))
P3 = InstalledEngine(env_uid="p3env", build="p3", name="sysml19-p3@c647954", python="/a/prefix/bin/python",
                     rank=("2026-01-01",), tree="/a/src")
P3_NEWER = InstalledEngine(env_uid="p3new", build="p3", name="sysml19-p3@abc1234", python="/n/prefix/bin/python",
                           rank=("2026-02-01",), tree="/n/src")
BASELINE = InstalledEngine(env_uid="baseenv", build="baseline", name="sysml19-p3-baseline@1234567",
                           python="/b/prefix/bin/python", rank=("2026-01-01",), tree="/b/src")


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


def artifact_role_command(engine: InstalledEngine, model: str, batch_size: int, image_shape: str, num_epochs: int,
                          num_batches: int, disp_batches: int, workers: list[str] | int, data_train: str = "",
                          sockeye_output: str = "", corpus: str = "", corpus_name: str = "") -> RoleCommand:
    """The registered engine's role command for a run of these values (``workers``: each worker's host in rank
    order, or their number when all are on one host; ``corpus``: a registered corpus folder)."""
    job = RunJob(variant=engine.build.value, model=model, batch_size=batch_size, image_shape=image_shape,
                 num_epochs=num_epochs, num_batches=num_batches, disp_batches=disp_batches, output_file=sockeye_output,
                 worker_hosts=["here"] * workers if isinstance(workers, int) else list(workers),
                 data=JobData(corpus_name, ["--data-dir", corpus] if corpus else [], data_train),
                 script="", script_args=[], p3=P3Knobs(0, True, 0))
    return get_engine(engine.build).role_command(engine, job)


def test_image_run_is_the_artifacts_train_imagenet_with_the_runs_batch_budget():
    run = artifact_role_command(P3, "resnet", 32, "3,32,32", 1, 31, 10, workers=2)
    assert run.command[:2] == ["/a/prefix/bin/python", "/a/src/example/image-classification/train_imagenet.py"]
    # --benchmark-batches (our patch) bounds the fixed 500-batch synthetic iterator; --num-examples counts all workers.
    assert run.command[2:] == ["--network", "resnet", "--num-layers", "50", "--batch-size", "32",
                               "--image-shape", "3,32,32", "--num-epochs", "1", "--kv-store", "dist_sync",
                               "--disp-batches", "10", "--benchmark", "1", "--benchmark-batches", "31",
                               "--num-examples", str(31 * 32 * 2)]
    assert run.extra_env == {} and run.role_args == {}


def test_cuda_build_gives_each_local_worker_its_own_gpu_on_the_registered_data(tmp_path):
    rec = tmp_path / "imagenet1k_train.rec"
    rec.write_bytes(b"")
    (tmp_path / "imagenet1k_train.idx").write_text("".join(f"{i}\t{i * 8}\n" for i in range(4 * 32)))
    cuda_build = InstalledEngine(env_uid="g", build="p3", name="sysml19-p3@x", python="/g/bin/python", tree="/g/src",
                                 cuda=True)
    slots = worker_slots(["h1", "h1", "h2", "h2"])
    assert slots == [WorkerSlot(0, 0), WorkerSlot(1, 1), WorkerSlot(2, 0), WorkerSlot(3, 1)]
    run = artifact_role_command(cuda_build, "vgg", 32, "3,224,224", 1, 0, 20, workers=["h1", "h1", "h2", "h2"], data_train=str(rec))
    args = run.command
    assert args[args.index("--network") + 1: args.index("--network") + 4] == ["vgg", "--num-layers", "19"]
    assert args[args.index("--kv-store") + 1] == "dist_device_sync"
    assert args[args.index("--data-train") + 1] == str(rec)
    assert "--benchmark" not in args and "--gpus" not in args
    assert run.role_args == {"worker#0": ["--gpus", "0"], "worker#1": ["--gpus", "1"],
                               "worker#2": ["--gpus", "0"], "worker#3": ["--gpus", "1"]}


def _recordio(path: Path, sizes: list[int]) -> Path:
    with open(path, "wb") as out:
        for size in sizes:
            out.write(struct.pack("<II", 0xCED7230A, size) + b"x" * size + b"\0" * (-size % 4))
    return path


def test_recordio_records_are_counted_from_their_headers(tmp_path):
    rec = _recordio(tmp_path / "a.rec", [5, 8, 1, 3])
    assert count_records(rec, 100) == 4 and count_records(rec, 2) == 2
    (tmp_path / "bad.rec").write_bytes(b"not a recordio file")
    with pytest.raises(UserError, match="not a RecordIO file"):
        count_records(tmp_path / "bad.rec", 10)


def test_recordio_set_smaller_than_a_batch_per_worker_is_refused_in_one_line(tmp_path):
    rec = _recordio(tmp_path / "tiny.rec", [10] * 63)
    with pytest.raises(UserError) as refused:
        artifact_role_command(P3, "resnet", 32, "3,224,224", 1, 0, 20, workers=2, data_train=str(rec))
    message = str(refused.value)
    assert "holds 63 images, fewer than one batch per worker (32 x 2 workers)" in message
    assert "--env.DATA=synthetic" in message and "\n" not in message
    _recordio(rec, [10] * 64)
    assert "--data-train" in artifact_role_command(P3, "resnet", 32, "3,224,224", 1, 0, 20, workers=2,
                                              data_train=str(rec)).command


def test_full_epoch_on_synthetic_data_splits_imagenet_over_the_workers():
    run = artifact_role_command(BASELINE, "inception-v3", 32, "3,299,299", 1, 0, 20, workers=4)
    assert run.command[2:4] == ["--network", "inception-v3"]
    batches = -(-1281167 // (4 * 32))
    assert run.command[-4:] == ["--benchmark-batches", str(batches), "--num-examples", str(batches * 32 * 4)]


def bundled_tree(root: Path, files=("train-preproc.en", "train-preproc.vi", "tst2012.en", "tst2012.vi",
                                    "vocab.en", "vocab.vi")) -> InstalledEngine:
    data = root / "example/sockeye/dataset/iwslt15_en-vi"
    data.mkdir(parents=True)
    for name in files:
        (data / name).write_text("x\n")
    return InstalledEngine(env_uid="p3env", build="p3", name="sysml19-p3@c647954", python="/a/prefix/bin/python",
                           tree=str(root))


def test_sockeye_run_is_the_bundled_sockeye_on_the_bundled_iwslt15_with_our_report_period(tmp_path):
    engine = bundled_tree(tmp_path / "src")
    run = artifact_role_command(engine, "sockeye", 64, "", 1, 31, 10, workers=2, sockeye_output="/out/model",
                           corpus="/corpus", corpus_name="iwslt15-synthetic")
    args = run.command
    assert args[:3] == ["/a/prefix/bin/python", "-m", "sockeye.train"]
    assert run.extra_env == {"PYTHONPATH": f"{tmp_path}/src/example/sockeye/source",
                             "SOCKEYE_MEASURE_SPEED_EVERY": "10"}
    assert args[args.index("--source") + 1] == f"{tmp_path}/src/example/sockeye/dataset/iwslt15_en-vi/train-preproc.en"
    assert run.data == "iwslt15-bundled"  # not "synthetic", not the registered corpus it did not read
    for flag, value in [("--num-layers", "2:2"), ("--rnn-num-hidden", "512"), ("--num-embed", "512:512"),
                        ("--attention-type", "mlp"), ("--attention-num-hidden", "512"), ("--bucket-width", "10"),
                        ("--batch-size", "64"), ("--kv-store", "dist_sync"), ("--max-updates", "31")]:
        assert args[args.index(flag) + 1] == value, flag
    assert "--use-cpu" in args and "--output" not in args and "--device-ids" not in args
    # Sockeye removes its output folder first: one per worker.
    assert run.role_args == {"worker#0": ["--output", "/out/model"], "worker#1": ["--output", "/out/model.worker-1"]}


def test_sockeye_without_the_bundled_training_files_reads_the_registered_corpus_and_says_so(tmp_path):
    engine = bundled_tree(tmp_path / "src", files=("tst2012.en", "tst2012.vi", "vocab.en", "vocab.vi"))
    run = artifact_role_command(engine, "sockeye", 64, "", 1, 31, 10, workers=1, corpus="/corpus",
                           corpus_name="iwslt15-synthetic")
    assert run.command[run.command.index("--source") + 1] == "/corpus/train.en"
    assert run.command[run.command.index("--validation-source") + 1] == "/corpus/tst2012.en"
    assert run.data == "iwslt15-synthetic"
    with pytest.raises(UserError, match="lacks train-preproc.en, train-preproc.vi .*ck install package:dataset-iwslt15"):
        artifact_role_command(engine, "sockeye", 64, "", 1, 31, 10, workers=1)


def test_sockeye_on_a_cuda_build_gives_each_local_worker_its_own_device(tmp_path):
    engine = bundled_tree(tmp_path / "src")
    cuda_build = InstalledEngine(env_uid="g", build="p3", name="x", python="/g/bin/python", tree=engine.tree, cuda=True)
    run = artifact_role_command(cuda_build, "sockeye", 64, "", 1, 31, 10, workers=["a", "a", "b"])
    assert "--use-cpu" not in run.command and "--device-ids" not in run.command
    assert {k: v[v.index("--device-ids") + 1] for k, v in run.role_args.items()} == \
        {"worker#0": "0", "worker#1": "1", "worker#2": "0"}
    assert run.role_args["worker#0"][:2] == ["--output", "sockeye-model"]


def test_unknown_model_for_the_artifact_is_refused():
    with pytest.raises(UserError, match="no run for cmd_key 'alexnet'.*--env.ENGINE=embedded"):
        artifact_role_command(P3, "alexnet", 32, "3,224,224", 1, 0, 20, workers=2)


# ----------------------------------------------------------------------------- ending a run whose roles hang at exit


def test_image_and_sockeye_runs_carry_the_line_their_training_ends_with(tmp_path):
    assert artifact_role_command(P3, "resnet", 32, "3,32,32", 2, 31, 10, workers=2).finish_pattern == \
        r"Epoch\[1\] Time cost="
    engine = bundled_tree(tmp_path / "src")
    assert artifact_role_command(engine, "sockeye", 16, "", 1, 16, 5, workers=2).finish_pattern == r"Training finished\."


def test_run_whose_worker_hangs_after_its_training_ends_cleanly_after_the_grace(run_dir):
    """As the authors' builds do here: a worker trains, logs its end of training, then waits forever at exit."""
    plan = fake_plan("--hang", "worker#1", timeout_s=20)
    plan.finish_pattern, plan.finish_grace_s, plan.finish_note = r"worker#\d started", 1.0, "as expected here"
    outcome = launch.run_local(plan, run_dir, console=io.StringIO())
    assert outcome.success, outcome.reason
    assert outcome.wall_s < 15
    [warning] = outcome.warnings
    assert "worker#1" in warning and "after every worker printed the end of its training" in warning
    assert warning.endswith("torn down (as expected here)")
    assert no_process_left(plan.run_id)
    # Without the pattern the same run waits for its timeout and fails.
    plan = fake_plan("--hang", "worker#1", timeout_s=3)
    outcome = launch.run_local(plan, run_dir, console=io.StringIO())
    assert not outcome.success and "exceeded its timeout" in outcome.reason


# ----------------------------------------------------------------------------- emulated compute on their builds


@pytest.mark.parametrize("build", [P3, BASELINE])
def test_an_emulated_run_on_their_builds_is_our_train_py_in_their_interpreter_without_stock_knobs(build):
    settings = resolve("resnet", {"COMPUTE": "emulated", "VARIANT": build.build.value}, "smoke")
    args = settings.train_args(get_engine(build.build))
    job = RunJob(variant=build.build.value, model="resnet", batch_size=32, image_shape="3,32,32", num_epochs=1,
                 num_batches=31, disp_batches=10, output_file="", worker_hosts=["here", "here"],
                 data=JobData("synthetic", []), script="train.py", script_args=args, p3=settings.p3_knobs,
                 emulated=True)
    run = get_engine(build.build).role_command(build, job)
    assert run.command == [build.python, "train.py", *args]
    assert {"train.py", "emulated_compute.py", "comm_probes.py", "reprokit/__init__.py", "reprokit/wire/role_van.py"} \
        <= {shipped_name(f) for f in run.files}
    assert run.extra_env == {}  # stock MXNet's knobs (DMLC_PS_VAN_TYPE=p3, slice threshold) would mean nothing there
    assert run.finish_pattern == FINISH_LINE and run.finish_grace_s is not None  # their roles may hang at exit


def test_busy_waits_are_refused_on_their_builds_and_allowed_on_stock_mxnet():
    busy = resolve("resnet", {"COMPUTE": "emulated", "COMPUTE_WAIT": "busy"}, "smoke")
    check_emulation_on(STOCK, busy)
    check_emulation_on(P3, resolve("resnet", {"COMPUTE": "emulated"}, "smoke"))
    with pytest.raises(UserError, match=r"COMPUTE_WAIT=busy .* sysml19-p3@c647954 \(MXNet 1.1\) lacks; drop "
                                        r"--env.COMPUTE_WAIT .* or use --env.ENGINE=embedded$"):
        check_emulation_on(P3, busy)
