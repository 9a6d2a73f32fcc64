"""ImageNet data through the real ck CLI: detection, the packages, the RecordIO conversion and a run that reads it.

Dataset envs change what later runs read, so nothing here installs into the
shared session fixture `ck`: installs go to `bare_ck` or to this module's own CK.
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reprokit.data.imagenet import MARKER, RECORDIO_ENV, RECORDIO_TAGS, TRAIN_ENV, TRAIN_TAGS, make_synthetic
from support.ckcli import REPO_ROOT, CkCli, own_ck
from support.loopback import FileServer, imagenet_like_tarball

SRC = str(REPO_ROOT / "src")


def envs(cli: CkCli, tags: str) -> list[dict]:
    return json.loads(cli("search", "env", f"--tags={tags}", "--add_meta", "--out=json", check=True).stdout)["lst"]


def engine_env(cli: CkCli) -> dict:
    [entry] = envs(cli, "lib,mxnet")
    return entry["meta"]["env"]


# ---------------------------------------------------------------- detection


def test_detect_registers_a_train_folder_within_bounded_depth(bare_ck, tmp_path):
    folder = make_synthetic(tmp_path / "data" / "imagenet", classes=2, images_per_class=1).root
    (folder / MARKER).unlink()  # as a real ImageNet folder: no marker of ours
    make_synthetic(tmp_path / "data" / "x" / "y" / "z", classes=3, images_per_class=1)  # 4 levels down: not searched
    proc = bare_ck("detect", "soft:dataset.imagenet.train", f"--search_dirs={tmp_path / 'data'}", "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [env] = envs(bare_ck, TRAIN_TAGS)
    variables = env["meta"]["env"]
    assert variables[TRAIN_ENV] == str(folder)
    assert variables[f"{TRAIN_ENV}_KIND"] == "imagenet"
    assert variables[f"{TRAIN_ENV}_CLASSES"] == "2"


def test_detect_finding_nothing_says_so_in_one_line(bare_ck, tmp_path):
    make_synthetic(tmp_path / "data" / "x" / "y" / "z", classes=2, images_per_class=1)
    proc = bare_ck("detect", "soft:dataset.imagenet.train", f"--search_dirs={tmp_path / 'data'}", "--quiet")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "no ImageNet train folder (class folders like n01440764 holding JPEG files) within 3 levels" in output
    assert "--search_dirs=DIR" in output and "Traceback" not in output
    assert envs(bare_ck, TRAIN_TAGS) == []


# ---------------------------------------------------------------- imagenet-2012-train-min


@pytest.fixture
def dropbox(tmp_path):
    """A loopback HTTP server standing in for the Dropbox URL of ILSVRC2012_img_train_min.tar."""
    tarball = imagenet_like_tarball(tmp_path / "tarball")
    with FileServer() as server:
        server.add("ILSVRC2012_img_train_min.tar", tarball)
        server.add_truncated("truncated.tar", tarball[:20_000], claimed=len(tarball))
        yield server, hashlib.md5(tarball).hexdigest()


def test_min_subset_installs_from_a_loopback_stand_in_for_dropbox(bare_ck, dropbox):
    server, md5 = dropbox
    proc = bare_ck("install", "package:imagenet-2012-train-min", "--quiet",
                   f"--env.PACKAGE_URL={server.url('ILSVRC2012_img_train_min.tar')}", f"--env.PACKAGE_MD5={md5}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [env] = envs(bare_ck, TRAIN_TAGS)
    assert {"min", "2012"} <= set(env["meta"]["tags"])
    variables = env["meta"]["env"]
    assert variables[f"{TRAIN_ENV}_KIND"] == "imagenet-min"
    assert Path(variables[TRAIN_ENV], "n01440764", "n01440764_10026.JPEG").is_file()
    assert env["meta"]["customize"]["version"] == "2012-min"


@pytest.mark.parametrize("name, md5, message", [
    ("ILSVRC2012_img_train_min.tar", "0" * 32, "dataset: error: checksum mismatch"),
    ("truncated.tar", "", "dataset: error: the download of"),
])
def test_min_subset_failure_says_why_and_registers_nothing(bare_ck, dropbox, name, md5, message):
    server, right_md5 = dropbox
    proc = bare_ck("install", "package:imagenet-2012-train-min", "--quiet",
                   f"--env.PACKAGE_URL={server.url(name)}", f"--env.PACKAGE_MD5={md5 or right_md5}")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert message in output and "Traceback" not in output
    assert envs(bare_ck, TRAIN_TAGS) == []
    installs = list(Path(bare_ck.env["CK_TOOLS"]).glob("imagenet-2012-train-min*"))
    assert all(not (d / "train").exists() and not list(d.glob(".staging-*")) for d in installs)


def test_a_failed_install_of_ours_ends_with_our_line_and_no_ck_box(tmp_path):
    """As `make setup` leaves CK (bootstrap --repo-only): no "CK detected a PROBLEM" box after our package's install
    script failed, and not CK's `package installation failed` line after ours."""
    cli = CkCli(tmp_path / "ck")
    setup = subprocess.run([sys.executable, "-m", "reprokit.bootstrap", "--repo-only"], env=cli.env, cwd=tmp_path,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    missing = tmp_path / "ILSVRC2012_img_train.tar"
    run = cli.popen("install", "package:imagenet-2012-train", f"--env.PACKAGE_URL={missing}", "--quiet")
    output, _ = run.communicate(timeout=300)
    ours = f"dataset: error: {missing} is not a file; give the archive's path or URL with --env.PACKAGE_URL=..."
    assert run.returncode == 1, output
    assert [line for line in output.splitlines() if line.strip()][-1] == ours, output[-2000:]
    assert "PROBLEM" not in output and "CK error" not in output
    assert envs(cli, TRAIN_TAGS) == []


def test_conversion_without_a_train_folder_says_how_to_get_one(bare_ck):
    proc = bare_ck("install", "package:dataset-imagenet-2012-train-p3", "--quiet")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "no ImageNet train folder is registered" in output
    assert "ck install package:imagenet-2012-train-synthetic --quiet" in output and "Traceback" not in output
    assert envs(bare_ck, RECORDIO_TAGS) == []


# ---------------------------------------------------------------- synthetic set, conversion, a run


@pytest.fixture(scope="module")
def data_ck(ck, tmp_path_factory) -> CkCli:
    """Own CK: the session's engine (detected, not reinstalled), the synthetic set, converted with 2 processes."""
    cli = own_ck(tmp_path_factory.mktemp("data-ck"), engine_from=ck)
    cli("install", "package:imagenet-2012-train-synthetic", "--quiet", check=True)
    cli("install", "package:dataset-imagenet-2012-train-p3", "--env.NUM_THREADS=2", "--quiet", check=True)
    return cli


READ_BACK = """
import json, sys
import mxnet as mx
rec, idx, lst = sys.argv[1:4]
labels = {int(l.split("\\t")[0]): float(l.split("\\t")[1]) for l in open(lst)}
reader = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
out = {"records": 0, "labels_match": True, "labels": set(), "shorter_edges": set()}
for key in reader.keys:
    header, jpeg = mx.recordio.unpack(reader.read_idx(key))
    image = mx.image.imdecode(jpeg)  # MXNet's own JPEG decoder
    out["records"] += 1
    out["labels"].add(header.label)
    out["labels_match"] &= labels[key] == header.label and header.id == key
    out["shorter_edges"].add(min(image.shape[:2]))
    assert image.shape[2] == 3
print(json.dumps({k: sorted(v) if isinstance(v, set) else v for k, v in out.items()}))
"""


def test_conversion_registers_rec_and_idx_whose_records_read_back(data_ck, ck):
    [env] = envs(data_ck, RECORDIO_TAGS)
    assert "imagenet-synthetic" in env["meta"]["tags"]  # nobody mistakes it for ImageNet
    v = env["meta"]["env"]
    assert v[f"{RECORDIO_ENV}_KIND"] == "imagenet-synthetic"
    assert (v[f"{RECORDIO_ENV}_IMAGES"], v[f"{RECORDIO_ENV}_VAL_IMAGES"]) == ("285", "15")  # 300 at ratio 0.95
    rec = v[f"{RECORDIO_ENV}_REC"]
    assert rec.endswith("/recordio/imagenet1k_train.rec")
    assert not list(Path(rec).parent.parent.glob("recordio.partial"))
    proc = subprocess.run([engine_env(ck)["CK_ENV_LIB_MXNET_PYTHON"], "-c", READ_BACK, rec,
                           v[f"{RECORDIO_ENV}_IDX"], rec.replace(".rec", ".lst")],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    read = json.loads(proc.stdout.splitlines()[-1])
    assert read["records"] == 285
    assert read["labels_match"]
    assert read["labels"] == [float(label) for label in range(10)]  # class folders in sorted order
    assert read["shorter_edges"] == [480]  # --resize 480


def test_a_run_reads_the_converted_recordio_when_asked_and_says_so(data_ck, tmp_path):
    proc, out = data_ck.run_p3(tmp_path, "--cmd_key=resnet", "--env.DATA=recordio", "--env.VARIANT=baseline",
                               "--env.BATCH_SIZE=8", "--env.NUM_BATCHES=6", "--env.DISP_BATCHES=2")
    result = json.loads((tmp_path / "p3-result.json").read_text())
    assert proc.returncode == 0 and result["run_success"], proc.stdout[-3000:] + json.dumps(result)
    assert result["data"] == "imagenet-synthetic"
    [env] = envs(data_ck, RECORDIO_TAGS)
    spec = json.loads((tmp_path / "p3-run.json").read_text())
    assert spec["data"]["rec"] == env["meta"]["env"][f"{RECORDIO_ENV}_REC"]
    for log in sorted((tmp_path / "logs").glob("worker-*.log")):
        assert "ImageRecordIter part" in log.read_text()


def test_a_registered_set_never_changes_the_default_and_too_small_a_one_is_refused_before_launch(data_ck, tmp_path):
    """The conversion holds 285 images: the default still runs on generated batches; asked for with a batch
    larger than each worker's share (285 // 2 = 142), it is refused in one line, exit 2, no role started."""
    default_dir, small_dir = tmp_path / "default", tmp_path / "small"
    proc, _ = data_ck.run_p3(default_dir, "--cmd_key=resnet", "--env.NUM_BATCHES=6", "--env.DISP_BATCHES=2",
                             "--env.BATCH_SIZE=8")
    result = json.loads((default_dir / "p3-result.json").read_text())
    assert proc.returncode == 0 and result["run_success"] and result["data"] == "synthetic", proc.stdout[-3000:]
    assert "data synthetic (generated; --env.DATA names registered data)" in proc.stdout  # the plan line
    proc, _ = data_ck.run_p3(small_dir, "--cmd_key=resnet", "--env.DATA=recordio", "--env.BATCH_SIZE=150")
    [line] = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("p3: error:")]
    assert proc.returncode == 2 and "holds 285 images, 142 per worker, fewer than one batch of 150" in line
    assert "--env.BATCH_SIZE=142 or less" in line and "Traceback" not in proc.stdout + proc.stderr
    assert not (small_dir / "logs").exists()  # nothing was launched


def test_data_recordio_without_a_conversion_fails_in_one_line(ck, tmp_path):
    proc, out = ck.run_p3(tmp_path, "--cmd_key=resnet", "--env.DATA=recordio")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "p3: error: DATA=recordio needs a converted ImageNet train set" in output
    assert "ck install package:dataset-imagenet-2012-train-p3 --quiet" in output


def test_an_interrupted_conversion_keeps_the_earlier_one_and_leaves_no_partial_output(ck, tmp_path):
    python = engine_env(ck)["CK_ENV_LIB_MXNET_PYTHON"]
    env = {**os.environ, "PYTHONPATH": SRC}
    dest = tmp_path / "install"

    def convert(source: Path, **kwargs):
        return subprocess.Popen([python, "-m", "reprokit.data.recordio", f"--source={source}", f"--dest={dest}",
                                 "--threads=1"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **kwargs)

    small = make_synthetic(tmp_path / "small", classes=2, images_per_class=2).root
    assert convert(small).wait(timeout=300) == 0
    earlier = (dest / "recordio" / "recordio.json").read_text()
    # About 3 s of packing even on a quiet machine: the signal below lands well inside it.
    big = make_synthetic(tmp_path / "big", classes=10, images_per_class=300).root
    run = convert(big)
    try:
        for line in run.stderr:  # progress lines: "train [......] 0/2850 images, ..." comes before any packing
            if line.startswith("train ["):
                break
        assert (dest / "recordio.partial").is_dir()
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 130
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert "interrupted; no partial output was kept" in run.stderr.read()
    assert sorted(p.name for p in dest.iterdir()) == ["recordio"]
    assert (dest / "recordio" / "recordio.json").read_text() == earlier
