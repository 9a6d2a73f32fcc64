"""Every dataset package installed twice through the real ck CLI (reinstall and upgrade), the two packages of
the original workflow for full ImageNet (imagenet-2012-train, dataset-imagenet-2012-train-p3-ready) against
loopback stand-ins, and the repair of env entries registered by an older reprokit.

Installs go to `bare_ck` or to CKs of their own, never to the shared session fixture `ck`.
"""
import hashlib
import json
from pathlib import Path

import pytest

from reprokit.data import iwslt
from reprokit.data.imagenet import RECORDIO_ENV, RECORDIO_TAGS, TRAIN_ENV, TRAIN_TAGS, make_synthetic
from support.ckcli import CkCli, own_ck
from support.loopback import FileServer, imagenet_like_tarball, imagenet_train_tarball, recordio_file

IWSLT_ENV = iwslt.ENV


def envs(cli: CkCli, tags: str) -> list[dict]:
    return json.loads(cli("search", "env", f"--tags={tags}", "--add_meta", "--out=json", check=True).stdout)["lst"]


@pytest.fixture
def mirror(tmp_path):
    """One loopback server standing in for every download: Dropbox's subset, the user's ImageNet, Stanford's
    corpus and the authors' FTP (both .rec files), each in a first and a second (upgraded) version."""
    md5s = {}
    with FileServer() as server:
        for version, classes in ((1, 3), (2, 4)):
            full = imagenet_train_tarball(tmp_path / f"full{version}", classes=classes)
            server.add(f"v{version}/ILSVRC2012_img_train.tar", full)
            md5s[f"full{version}"] = hashlib.md5(full).hexdigest()
            corpus = Path(iwslt.make_synthetic(tmp_path / f"corpus{version}", train_pairs=30 * version).folder)
            for name in iwslt.FILES:
                server.add(f"v{version}/iwslt15.en-vi/{name}", (corpus / name).read_bytes(), "text/plain")
            labels = [i % (5 * version) for i in range(20 * version)]
            server.add(f"v{version}/ftp/imagenet1k_train.rec", recordio_file(labels))
            server.add(f"v{version}/ftp/imagenet1k_val.rec", recordio_file(labels[:5]))
        subset = imagenet_like_tarball(tmp_path / "subset")
        server.add("ILSVRC2012_img_train_min.tar", subset)
        md5s["min"] = hashlib.md5(subset).hexdigest()
        yield server, md5s


def package_args(mirror: tuple[FileServer, dict], package: str, version: int) -> list[str]:
    server, md5s = mirror
    url = lambda name: server.url(f"v{version}/{name}")  # noqa: E731
    return {
        "imagenet-2012-train-synthetic": [f"--env.CLASSES={2 + version}", "--env.IMAGES_PER_CLASS=2"],
        "imagenet-2012-train-min": [f"--env.PACKAGE_URL={server.url('ILSVRC2012_img_train_min.tar')}",
                                    f"--env.PACKAGE_MD5={md5s['min']}"],
        "imagenet-2012-train": [f"--env.PACKAGE_URL={url('ILSVRC2012_img_train.tar')}",
                                f"--env.PACKAGE_MD5={md5s[f'full{version}']}"],
        "dataset-iwslt15-en-vi": [f"--env.PACKAGE_URL={url('iwslt15.en-vi/')}"],
        "dataset-iwslt15-en-vi-synthetic": [f"--env.TRAIN_PAIRS={30 * version}"],
        "dataset-imagenet-2012-train-p3-ready": [f"--env.PACKAGE_URL={url('ftp/')}"],
    }[package]


# package: (tags of its env, data folder, env prefix, what the env says after the first and the second install)
PACKAGES = {
    "imagenet-2012-train-synthetic": (TRAIN_TAGS, "train", TRAIN_ENV, ("imagenet-synthetic", "3"), ("imagenet-synthetic", "4")),
    "imagenet-2012-train-min": (TRAIN_TAGS, "train", TRAIN_ENV, ("imagenet-min", "3"), ("imagenet-min", "3")),
    "imagenet-2012-train": (TRAIN_TAGS, "train", TRAIN_ENV, ("imagenet", "3"), ("imagenet", "4")),
    "dataset-iwslt15-en-vi": (iwslt.TAGS, "corpus", IWSLT_ENV, ("iwslt15", "30"), ("iwslt15", "60")),
    "dataset-iwslt15-en-vi-synthetic": (iwslt.TAGS, "corpus", IWSLT_ENV, ("iwslt15-synthetic", "30"),
                                        ("iwslt15-synthetic", "60")),
    "dataset-imagenet-2012-train-p3-ready": (RECORDIO_TAGS, "recordio", RECORDIO_ENV, ("imagenet", "20"),
                                             ("imagenet", "40")),
}
SIZE = {TRAIN_ENV: "CLASSES", IWSLT_ENV: "PAIRS", RECORDIO_ENV: "IMAGES"}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_dataset_package_installs_twice_with_one_correct_registration_and_no_nested_copy(bare_ck, mirror, package):
    tags, data_dir, prefix, *expected = PACKAGES[package]
    uids = []
    for version in (1, 2):
        proc = bare_ck("install", f"package:{package}", "--quiet", *package_args(mirror, package, version))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        [env] = envs(bare_ck, tags)
        uids.append(env["data_uid"])
        [install] = list(Path(bare_ck.env["CK_TOOLS"]).iterdir())
        variables, customize = env["meta"]["env"], env["meta"]["customize"]
        assert variables[prefix] == str(install / data_dir)
        assert customize["path_install"] == str(install)  # where CK installs it again
        assert (variables[f"{prefix}_KIND"], variables[f"{prefix}_{SIZE[prefix]}"]) == expected[version - 1]
        assert sorted(p.name for p in install.iterdir()) == ["ck-install.json", data_dir]
        assert not (install / data_dir / data_dir).exists()
    assert uids[0] == uids[1]  # the same entry, updated
    env_sh = Path(envs(bare_ck, tags)[0]["path"]) / "env.sh"
    assert f"export {prefix}={install / data_dir}\n" in env_sh.read_text()


def test_the_authors_ready_set_gets_an_index_with_every_records_id_and_offset(bare_ck, mirror):
    bare_ck("install", "package:dataset-imagenet-2012-train-p3-ready", "--quiet",
            *package_args(mirror, "dataset-imagenet-2012-train-p3-ready", 1), check=True)
    [env] = envs(bare_ck, RECORDIO_TAGS)
    assert {"ready", "ilsvrc2012", "train-p3"} <= set(env["meta"]["tags"])
    v = env["meta"]["env"]
    rec = Path(v[f"{RECORDIO_ENV}_REC"])
    assert rec.read_bytes() == mirror[0].files["v1/ftp/imagenet1k_train.rec"][0]
    record_size = 8 + 24 + 20  # header, IRHeader, payload (already a multiple of 4)
    assert Path(v[f"{RECORDIO_ENV}_IDX"]).read_text() == "".join(f"{i}\t{i * record_size}\n" for i in range(20))
    assert (v[f"{RECORDIO_ENV}_CLASSES"], v[f"{RECORDIO_ENV}_VAL_IMAGES"]) == ("5", "5")


def test_an_env_entry_of_an_older_reprokit_is_repaired_and_the_reinstall_does_not_nest(bare_ck):
    bare_ck("install", "package:imagenet-2012-train-synthetic", "--quiet", "--env.CLASSES=2", check=True)
    [env] = envs(bare_ck, TRAIN_TAGS)
    meta_file = Path(env["path"]) / ".cm" / "meta.json"
    meta = json.loads(meta_file.read_text())
    install = Path(meta["customize"]["path_install"])
    meta["customize"]["path_install"] = str(install / "train")  # what reprokit recorded before
    meta_file.write_text(json.dumps(meta))
    proc = bare_ck("install", "package:imagenet-2012-train-synthetic", "--quiet", "--env.CLASSES=3")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert f"now records its install folder {install} (was {install / 'train'})" in proc.stdout
    [again] = envs(bare_ck, TRAIN_TAGS)
    assert again["data_uid"] == env["data_uid"] and again["meta"]["customize"]["path_install"] == str(install)
    assert again["meta"]["env"][f"{TRAIN_ENV}_CLASSES"] == "3"
    assert sorted(p.name for p in install.iterdir()) == ["ck-install.json", "train"]
    assert not (install / "train" / "train").exists()


# ---------------------------------------------------------------- with the engine: conversions and a run


@pytest.fixture(scope="module")
def converted_ck(ck, tmp_path_factory) -> CkCli:
    """Own CK: the session's engine (detected), the synthetic set converted twice."""
    cli = own_ck(tmp_path_factory.mktemp("converted-ck"), engine_from=ck)
    cli("install", "package:imagenet-2012-train-synthetic", "--quiet", "--env.CLASSES=4", "--env.IMAGES_PER_CLASS=20",
        check=True)
    for _ in range(2):
        cli("install", "package:dataset-imagenet-2012-train-p3", "--env.NUM_THREADS=2", "--quiet", check=True)
    return cli


def test_a_conversion_installs_again_in_place_and_another_kind_gets_its_own(converted_ck, tmp_path):
    [synthetic] = envs(converted_ck, RECORDIO_TAGS)
    first = Path(synthetic["meta"]["customize"]["path_install"])
    assert first.name.endswith("-imagenet-synthetic-linux-64")
    assert sorted(p.name for p in first.iterdir()) == ["ck-install.json", "recordio"]
    # The flow of docs/howto/data.md: the small set first, then the "full" one (a detected folder is taken as real
    # ImageNet).
    real = make_synthetic(tmp_path / "imagenet", classes=3, images_per_class=4).root
    (real / "reprokit-dataset.json").unlink()
    converted_ck("detect", "soft:dataset.imagenet.train", f"--search_dirs={tmp_path / 'imagenet'}", "--quiet",
                 check=True)
    converted_ck("install", "package:dataset-imagenet-2012-train-p3", "--env.NUM_THREADS=2", "--quiet", check=True)
    by_kind = {e["meta"]["env"][f"{RECORDIO_ENV}_KIND"]: e for e in envs(converted_ck, RECORDIO_TAGS)}
    assert sorted(by_kind) == ["imagenet", "imagenet-synthetic"]
    assert by_kind["imagenet-synthetic"]["data_uid"] == synthetic["data_uid"]
    assert (first / "recordio" / "recordio.json").is_file()  # the small set's conversion is still there
    assert by_kind["imagenet"]["meta"]["env"][f"{RECORDIO_ENV}_IMAGES"] == "11"  # 12 at ratio 0.95 (im2rec rounds)
    assert "imagenet-synthetic" not in by_kind["imagenet"]["meta"]["tags"]


def test_the_ready_set_served_from_a_conversion_indexes_as_im2rec_did_and_a_run_reads_it(converted_ck, ck, tmp_path):
    [conversion] = [e for e in envs(converted_ck, RECORDIO_TAGS)
                    if e["meta"]["env"][f"{RECORDIO_ENV}_KIND"] == "imagenet-synthetic"]
    folder = Path(conversion["meta"]["env"][f"{RECORDIO_ENV}_REC"]).parent
    cli = own_ck(tmp_path / "ck", engine_from=ck)
    with FileServer() as ftp:
        for name in ("imagenet1k_train.rec", "imagenet1k_val.rec"):
            ftp.add(f"pub/{name}", (folder / name).read_bytes(), "application/octet-stream")
        cli("install", "package:dataset-imagenet-2012-train-p3-ready", f"--env.PACKAGE_URL={ftp.url('pub')}",
            "--quiet", check=True)
    [ready] = envs(cli, RECORDIO_TAGS)
    v = ready["meta"]["env"]
    for part in ("train", "val"):
        assert Path(folder / f"imagenet1k_{part}.idx").read_text() == Path(v[f"{RECORDIO_ENV}_{'VAL_' if part == 'val' else ''}IDX"]).read_text()
    assert (v[f"{RECORDIO_ENV}_IMAGES"], v[f"{RECORDIO_ENV}_CLASSES"]) == ("76", "4")  # 80 images at ratio 0.95
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc, _ = cli.run_p3(run_dir, "--cmd_key=resnet", "--env.DATA=recordio", "--env.VARIANT=baseline", "--env.BATCH_SIZE=8",
                         "--env.NUM_BATCHES=6", "--env.DISP_BATCHES=2")
    result = json.loads((run_dir / "p3-result.json").read_text())
    assert proc.returncode == 0 and result["run_success"], proc.stdout[-3000:] + json.dumps(result)
    assert result["data"] == "imagenet"  # the authors' set is ImageNet itself
    assert json.loads((run_dir / "p3-run.json").read_text())["data"]["rec"] == v[f"{RECORDIO_ENV}_REC"]
