"""ImageNet-format train folders without CK: the synthetic set, bounded detection, downloads, dataset choice."""
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from PIL import Image

from reprokit.core.errors import UserError
from reprokit.data import imagenet as datasets
from reprokit.data.fetch import download
from reprokit.data.imagenet import (
    KIND_IMAGENET,
    KIND_MIN,
    KIND_SYNTHETIC,
    RECORDIO_ENV,
    TRAIN_ENV,
    choose_recordio,
    choose_train_folder,
    describe,
    fetch,
    find_train_roots,
    make_synthetic,
)
from reprokit.data.recordio import fetch_ready, index_records, read_manifest
from reprokit.data.registered import EnvEntry
from reprokit.run.spec import RunData
from support.loopback import FileServer, imagenet_like_tarball, imagenet_train_tarball, recordio_file


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_synthetic_set_is_deterministic_small_and_shaped_like_imagenet(tmp_path):
    first = make_synthetic(tmp_path / "a", classes=4, images_per_class=5, seed=7)
    again = make_synthetic(tmp_path / "b", classes=4, images_per_class=5, seed=7)
    other = make_synthetic(tmp_path / "c", classes=4, images_per_class=5, seed=8)
    assert tree_digest(first.root) == tree_digest(again.root)
    assert tree_digest(first.root) != tree_digest(other.root)
    assert (first.kind, first.classes) == (KIND_SYNTHETIC, 4)
    images = sorted(first.root.glob("*/*"))
    assert len(images) == 20
    for image in images:
        wnid = image.parent.name
        assert wnid.startswith("n") and len(wnid) == 9 and wnid[1:].isdigit()
        assert image.name.startswith(wnid + "_") and image.suffix == ".JPEG"
        with Image.open(image) as decoded:
            assert decoded.format == "JPEG" and decoded.mode == "RGB"
    assert json.loads((first.root / datasets.MARKER).read_text())["kind"] == KIND_SYNTHETIC
    # The package's default (10 classes of 30) stays a few MB.
    default = make_synthetic(tmp_path / "d")
    assert sum(p.stat().st_size for p in default.root.rglob("*")) < 5_000_000


def test_a_new_synthetic_set_replaces_the_old_one_whole(tmp_path):
    make_synthetic(tmp_path, classes=3, images_per_class=2)
    make_synthetic(tmp_path, classes=2, images_per_class=2)
    assert describe(tmp_path / "train").classes == 2
    assert [p.name for p in tmp_path.iterdir()] == ["train"]  # no staging or .old left


def test_detection_search_is_bounded_and_never_enters_class_folders(tmp_path):
    shallow = make_synthetic(tmp_path / "data" / "imagenet", classes=2, images_per_class=1).root  # depth 2
    deep = make_synthetic(tmp_path / "data" / "a" / "b" / "c", classes=2, images_per_class=1).root  # depth 4
    # A train folder inside a class folder would only be found by a walk through the class folders.
    make_synthetic(shallow / "n00000000" / "nested", classes=2, images_per_class=1)
    (tmp_path / "data" / "empty" / "n12345678").mkdir(parents=True)  # a class-like folder without images
    assert find_train_roots([tmp_path / "data"]) == [shallow]
    assert sorted(find_train_roots([tmp_path / "data"], max_depth=4)) == sorted([deep, shallow])
    assert find_train_roots([tmp_path / "missing"]) == []


def test_describe_refuses_a_folder_without_class_folders(tmp_path):
    with pytest.raises(UserError, match="not an ImageNet train folder"):
        describe(tmp_path)


@pytest.fixture
def server(tmp_path):
    with FileServer() as srv:
        yield srv


def test_download_streams_and_verifies_the_md5(server, tmp_path):
    payload = b"x" * 3_000_000
    server.add("file.bin", payload)
    dest = tmp_path / "file.bin"
    md5 = hashlib.md5(payload).hexdigest()
    assert download(server.url("file.bin"), dest, md5) == md5
    assert dest.read_bytes() == payload


@pytest.mark.parametrize("name, md5, message", [
    ("file.bin", "0" * 32, "checksum mismatch"),
    ("truncated.bin", "", "truncated|broke off"),
    ("page.html", "", "web page"),
    ("missing.bin", "", "cannot download"),
])
def test_a_failed_download_leaves_no_file(server, tmp_path, name, md5, message):
    server.add("file.bin", b"payload")
    server.add_truncated("truncated.bin", b"y" * 1000, claimed=5000)
    server.add("page.html", b"<html>preview</html>", content_type="text/html")
    dest = tmp_path / "out.bin"
    with pytest.raises(UserError, match=message):
        download(server.url(name), dest, md5)
    assert list(tmp_path.glob("out.bin*")) == []


def test_fetch_unpacks_the_train_folder_and_marks_it_as_the_min_subset(server, tmp_path):
    tarball = imagenet_like_tarball(tmp_path / "src")
    server.add("ILSVRC2012_img_train_min.tar", tarball)
    folder = fetch(server.url("ILSVRC2012_img_train_min.tar"), hashlib.md5(tarball).hexdigest(), tmp_path / "inst")
    assert folder.root == tmp_path / "inst" / "train"
    assert (folder.kind, folder.classes) == (KIND_MIN, 3)
    assert (folder.root / "n01440764" / "n01440764_10026.JPEG").is_file()
    assert [p.name for p in (tmp_path / "inst").iterdir()] == ["train"]


def test_a_failed_fetch_keeps_the_earlier_install(server, tmp_path):
    tarball = imagenet_like_tarball(tmp_path / "src")
    server.add("good.tar", tarball)
    server.add("bad.tar", tarball[: len(tarball) // 2])
    fetch(server.url("good.tar"), hashlib.md5(tarball).hexdigest(), tmp_path / "inst")
    before = tree_digest(tmp_path / "inst")
    with pytest.raises(UserError, match="checksum mismatch"):
        fetch(server.url("bad.tar"), hashlib.md5(tarball).hexdigest(), tmp_path / "inst")
    assert tree_digest(tmp_path / "inst") == before


def test_unpack_refuses_members_outside_the_folder_also_inside_a_class_tar(tmp_path):
    def evil_tar(path: Path) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(str(path))
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
        return buffer.getvalue()

    (tmp_path / "evil.tar").write_bytes(evil_tar(Path("../escaped.txt")))
    (tmp_path / "nested.tar").write_bytes(wrap_in_tar({"n01440764.tar": evil_tar(Path("../../escaped.txt"))}))
    for archive in ("evil.tar", "nested.tar"):
        with pytest.raises(UserError, match="cannot unpack"):
            datasets.unpack_train_archive(tmp_path / archive, tmp_path / "deep" / "out")
        assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "deep" / "escaped.txt").exists()


def wrap_in_tar(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


def test_fetch_unpacks_imagenets_tar_of_class_tars_and_reads_a_local_archive_in_place(tmp_path):
    archive = tmp_path / "ILSVRC2012_img_train.tar"
    archive.write_bytes(imagenet_train_tarball(tmp_path / "src"))
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    folder = fetch(f"file://{archive}", md5, tmp_path / "inst", KIND_IMAGENET)
    assert (folder.kind, folder.classes) == (KIND_IMAGENET, 3)
    assert (folder.root / "n01440764" / "n01440764_10026.JPEG").is_file()
    assert sorted(p.name for p in (tmp_path / "inst").iterdir()) == ["train"]
    assert archive.is_file()  # read, not moved or removed
    with pytest.raises(UserError, match="checksum mismatch"):
        fetch(str(archive), "0" * 32, tmp_path / "inst", KIND_IMAGENET)
    with pytest.raises(UserError, match="is not a file"):
        fetch(str(tmp_path / "missing.tar"), md5, tmp_path / "inst", KIND_IMAGENET)
    assert describe(tmp_path / "inst" / "train").classes == 3


def recordio_entry(tmp_path: Path, uid: str, kind: str, converted_at: str = "2026-01-01T00:00:00+00:00") -> EnvEntry:
    folder = tmp_path / uid
    folder.mkdir()
    for name in ("t.rec", "t.idx"):
        (folder / name).write_bytes(b"")
    return EnvEntry(uid=uid, alias=uid, variables={
        f"{RECORDIO_ENV}_REC": str(folder / "t.rec"), f"{RECORDIO_ENV}_IDX": str(folder / "t.idx"),
        f"{RECORDIO_ENV}_KIND": kind, f"{RECORDIO_ENV}_IMAGES": "95", f"{RECORDIO_ENV}_CLASSES": "10",
        f"{RECORDIO_ENV}_CONVERTED_AT": converted_at})


def test_the_most_real_then_newest_conversion_is_read(tmp_path):
    synthetic = recordio_entry(tmp_path, "s1", KIND_SYNTHETIC, "2026-03-01T00:00:00+00:00")
    old_min = recordio_entry(tmp_path, "m1", KIND_MIN, "2026-01-01T00:00:00+00:00")
    new_min = recordio_entry(tmp_path, "m2", KIND_MIN, "2026-02-01T00:00:00+00:00")
    assert choose_recordio([synthetic, old_min, new_min]) is None  # the default reads none of them
    chosen = choose_recordio([synthetic, old_min, new_min], mode="recordio")
    assert (chosen.name, chosen.env_uid, chosen.images) == (KIND_MIN, "m2", 95)
    assert chosen.train_args() == ["--data-train", chosen.rec, "--data-train-idx", chosen.idx, "--data-images", "95"]
    assert choose_recordio([synthetic, new_min], pinned="s1").name == KIND_SYNTHETIC
    assert choose_recordio([synthetic], mode="synthetic") is None
    assert choose_recordio([]) is None


def test_dataset_choice_refuses_bad_input_in_one_line(tmp_path):
    entry = recordio_entry(tmp_path, "s1", KIND_SYNTHETIC)
    with pytest.raises(UserError, match="unknown DATA 'imagenet' for image models; valid ones: synthetic, recordio"):
        choose_recordio([entry], mode="imagenet")
    with pytest.raises(UserError, match="DATASET_ENV=nope is not a registered env entry"):
        choose_recordio([entry], pinned="nope")
    with pytest.raises(UserError, match="DATA=recordio needs a converted ImageNet train set"):
        choose_recordio([], mode="recordio")
    with pytest.raises(UserError, match="drop one of them"):
        choose_recordio([entry], mode="synthetic", pinned="s1")
    Path(entry.variables[f"{RECORDIO_ENV}_REC"]).unlink()
    with pytest.raises(UserError, match="DATA=recordio needs a converted ImageNet train set"):
        choose_recordio([entry], mode="recordio")  # its files were removed: not usable
    with pytest.raises(UserError, match="files of env s1 are gone"):
        choose_recordio([entry], pinned="s1")


def test_the_train_folder_to_convert_prefers_real_imagenet(tmp_path):
    synthetic = make_synthetic(tmp_path / "s", classes=2, images_per_class=1).root
    real = make_synthetic(tmp_path / "r", classes=3, images_per_class=1).root
    (real / datasets.MARKER).unlink()  # a detected folder without our marker is taken as real ImageNet
    entries = [EnvEntry("u1", "u1", {TRAIN_ENV: str(synthetic)}), EnvEntry("u2", "u2", {TRAIN_ENV: str(real)}),
               EnvEntry("u3", "u3", {TRAIN_ENV: str(tmp_path / "gone")})]
    assert choose_train_folder(entries).root == real
    assert choose_train_folder(entries, pinned="u1").kind == KIND_SYNTHETIC
    assert describe(real).kind == KIND_IMAGENET
    with pytest.raises(UserError, match="no ImageNet train folder is registered.*imagenet-2012-train-synthetic"):
        choose_train_folder([])


def test_index_records_writes_every_records_id_and_offset_and_refuses_a_cut_or_foreign_file(tmp_path):
    rec = tmp_path / "a.rec"
    rec.write_bytes(recordio_file([3, 0, 7]))
    assert index_records(rec) == (3, 8)
    record_size = len(recordio_file([0]))
    assert (tmp_path / "a.idx").read_text() == "".join(f"{i}\t{i * record_size}\n" for i in range(3))
    for name, body, message in [("cut.rec", recordio_file([1, 2])[:-6], "ends inside a record"),
                                ("head.rec", recordio_file([1])[:5], "ends inside a record"),
                                ("foreign.rec", b"JFIF" * 20, "not a RecordIO file")]:
        (tmp_path / name).write_bytes(body)
        with pytest.raises(UserError, match=message):
            index_records(tmp_path / name)


def test_the_ready_set_from_a_local_folder_is_linked_not_copied_and_swapped_in_whole(tmp_path):
    source = tmp_path / "authors"
    source.mkdir()
    (source / "imagenet1k_train.rec").write_bytes(recordio_file([0, 1, 2, 3, 4, 0]))
    (source / "imagenet1k_val.rec").write_bytes(recordio_file([4, 2]))
    manifest = fetch_ready(f"file://{source}", tmp_path / "install", progress=lambda message: None)
    assert (manifest.kind, manifest.classes, manifest.images) == ("imagenet", 5, 8)
    linked = tmp_path / "install" / "recordio" / "imagenet1k_train.rec"
    assert linked.samefile(source / "imagenet1k_train.rec")  # a hard link (same file system), not a copy
    assert read_manifest(tmp_path / "install").parts["val"].images == 2
    (source / "imagenet1k_val.rec").write_bytes(b"not RecordIO at all")
    with pytest.raises(UserError, match="not a RecordIO file"):
        fetch_ready(str(source), tmp_path / "install", progress=lambda message: None)
    assert sorted(p.name for p in (tmp_path / "install").iterdir()) == ["recordio"]
    assert read_manifest(tmp_path / "install").images == 8  # the earlier set, untouched


def test_a_registered_set_smaller_than_a_batch_per_worker_is_refused_before_launch():
    images = RunData("imagenet-min", rec="t.rec", env_uid="u1", samples=12, unit="images", split=True)
    images.check_feeds_every_worker(batch_size=6, workers=2)  # 6 each: one batch each
    with pytest.raises(UserError) as err:
        images.check_feeds_every_worker(batch_size=8, workers=2)
    assert str(err.value) == ("the data set imagenet-min (env u1) holds 12 images, 6 per worker, fewer than one batch "
                              "of 8 per worker; use --env.BATCH_SIZE=6 or less, a larger set, or --env.DATA=synthetic")
    with pytest.raises(UserError, match="use at most 12 workers"):
        images.check_feeds_every_worker(batch_size=1, workers=13)
    corpus = RunData("iwslt15-synthetic", env_uid="c1", samples=20, unit="sentence pairs")  # every worker reads all
    corpus.check_feeds_every_worker(batch_size=20, workers=8)
    with pytest.raises(UserError, match="holds 20 sentence pairs fewer than one batch of 32 per worker"):
        corpus.check_feeds_every_worker(batch_size=32, workers=1)
    RunData().check_feeds_every_worker(batch_size=10**6, workers=64)  # generated data never runs out
    assert RunData().describe() == "data synthetic (generated; --env.DATA names registered data)"
    assert images.describe() == "data imagenet-min (12 images, env u1)"
