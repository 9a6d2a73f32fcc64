"""ImageNet-format train folders: download, synthesis, detection and the record of what kind each is.

An ImageNet train folder ("train root") holds one sub-folder per class named
like a WordNet id (``n01440764``) with that class's JPEG files in it. Three
kinds are told apart, because results must say which one a run read:

- ``imagenet``: a real ImageNet-1k train folder, detected where it lies;
- ``imagenet-min``: the original workflow's small subset (a tarball);
- ``imagenet-synthetic``: generated here, deterministic, a few MB; never ImageNet.

Installed and generated folders carry a marker file (``MARKER``) naming their
kind; a detected folder without one is taken as real ImageNet.

Runs in the framework's interpreter (Pillow for the synthetic JPEGs):

    python -m reprokit.data.imagenet fetch --url URL --md5 MD5 --dest DIR
    python -m reprokit.data.imagenet synthetic --dest DIR [--classes 10 --images-per-class 30 --seed 42]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sys
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reprokit.core.errors import UserError, one_line_errors
from reprokit.core.jsonfile import write_json
from reprokit.data.fetch import check_md5, download, fresh_staging, local_file, report_progress, swap_in
from reprokit.data.registered import EnvEntry, best_or_explain, data_mode, pinned_entries

IMAGENET_TRAIN_IMAGES = 1281167  # one epoch of ImageNet-1k (its train set)
KIND_IMAGENET = "imagenet"
KIND_MIN = "imagenet-min"
KIND_SYNTHETIC = "imagenet-synthetic"
KINDS = (KIND_IMAGENET, KIND_MIN, KIND_SYNTHETIC)


def epoch_batches(images: int, global_batch: int) -> int:
    """Batches in one epoch of ``images`` at ``global_batch`` over all workers: the last one partial, as MXNet's
    iterators with round_batch count it (train.py rounds the same way)."""
    return -(-images // global_batch)
VERSIONS = {KIND_IMAGENET: "2012", KIND_MIN: "2012-min", KIND_SYNTHETIC: "synthetic"}

MARKER = "reprokit-dataset.json"  # inside the train root; im2rec lists image files only, so it is never packed
TRAIN_DIR = "train"  # an installed package's train root, under its install folder

# The original workflow's subset (package imagenet-2012-train-min).

CLASS_DIR = re.compile(r"^n\d{8}$")
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")  # what im2rec packs
DETECT_DEPTH = 3  # a train root at most this many folders below a search folder


@dataclass(frozen=True)
class TrainFolder:
    root: Path
    kind: str
    classes: int

    @property
    def version(self) -> str:
        return VERSIONS[self.kind]


# ---------------------------------------------------------------- detection


def class_dirs(root: Path) -> list[Path]:
    try:
        return sorted(e for e in root.iterdir() if CLASS_DIR.match(e.name) and e.is_dir())
    except OSError:
        return []


def has_images(class_dir: Path) -> bool:
    """True if the folder holds at least one image file; stops at the first one."""
    try:
        with os.scandir(class_dir) as entries:
            return any(e.name.lower().endswith(IMAGE_SUFFIXES) and e.is_file() for e in entries)
    except OSError:
        return False


def is_train_root(path: Path) -> bool:
    """Class folders named like WordNet ids, the first of them holding an image."""
    dirs = class_dirs(path)
    return bool(dirs) and has_images(dirs[0])


def find_train_roots(search_dirs: Iterable[str | Path], max_depth: int = DETECT_DEPTH) -> list[Path]:
    """Train roots at most ``max_depth`` folders below each search folder.

    Never descends into a train root or a class folder (ImageNet has 1.28 M
    files there), skips hidden folders and visits each real folder once.
    """
    found: list[Path] = []
    seen: set[str] = set()

    def visit(path: Path, depth: int) -> None:
        real = os.path.realpath(path)
        if real in seen:
            return
        seen.add(real)
        if is_train_root(path):
            found.append(path)
            return
        if depth >= max_depth or CLASS_DIR.match(path.name):
            return
        try:
            children = sorted(e for e in path.iterdir() if not e.name.startswith(".") and e.is_dir())
        except OSError:
            return
        for child in children:
            visit(child, depth + 1)

    for d in search_dirs:
        if str(d).strip() and Path(d).is_dir():
            visit(Path(d), 0)
    return found


def read_marker(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe(root: str | Path) -> TrainFolder:
    """What a train root holds; raises UserError if it is not one."""
    path = Path(root)
    if not path.is_dir():
        raise UserError(f"{path} is not a folder; point at an ImageNet train folder (class folders nXXXXXXXX/*.JPEG)")
    if not is_train_root(path):
        raise UserError(f"{path} is not an ImageNet train folder: no class folders named like n01440764 "
                        f"holding images; pass the folder that contains them")
    kind = read_marker(path).get("kind", KIND_IMAGENET)
    if kind not in KINDS:
        raise UserError(f"{path / MARKER} names an unknown dataset kind {kind!r}; valid ones: {', '.join(KINDS)}")
    return TrainFolder(root=path, kind=kind, classes=len(class_dirs(path)))


def write_marker(root: Path, kind: str, **details: object) -> None:
    write_json(root / MARKER, {"kind": kind, **details})


# ---------------------------------------------------------------- install helpers


def fetch(url: str, md5: str, dest: Path, kind: str = KIND_MIN,
          progress: Callable[[str], None] | None = None) -> TrainFolder:
    """Download (or read in place, for a local file), verify and unpack a train-folder tarball into ``dest/train``.

    The tarball holds either class folders (the original workflow's subset) or,
    like ImageNet's own ILSVRC2012_img_train.tar, one tar per class
    (n01440764.tar, ...), unpacked into class folders as they are read.
    Nothing changes in ``dest/train`` on failure.
    """
    staging = fresh_staging(dest)
    try:
        archive = local_file(url)
        if archive is None:
            archive = staging / "archive.tar"
            report_progress(progress, f"downloading {url}")
            download(url, archive, md5, progress=progress)
        else:
            report_progress(progress, f"reading {archive} in place; checking its MD5")
            check_md5(archive, md5, progress)
        report_progress(progress, "checksum ok; unpacking")
        unpacked = staging / "unpacked"
        unpack_train_archive(archive, unpacked, progress)
        if archive.parent == staging:
            archive.unlink()
        roots = find_train_roots([unpacked])
        if len(roots) != 1:
            raise UserError(f"{url} holds {len(roots)} ImageNet train folders (class folders nXXXXXXXX with JPEGs), "
                            f"expected exactly one")
        write_marker(roots[0], kind, url=url, md5=md5)
        final = dest / TRAIN_DIR
        swap_in(roots[0], final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return describe(final)


CLASS_TAR = re.compile(r"^(n\d{8})\.tar$")  # a member of ILSVRC2012_img_train.tar: one class's images


def unpack_train_archive(archive: Path, dest: Path, progress: Callable[[str], None] | None = None) -> None:
    """Unpack ``archive`` into ``dest``; a member named like n01440764.tar becomes the class folder dest/n01440764.

    Streamed member by member, so a per-class tar never lands on disk, and every
    member, nested ones too, goes through tarfile's "data" filter (nothing outside ``dest``).
    """
    classes = 0
    try:
        with tarfile.open(archive) as outer:
            for member in outer:
                match = CLASS_TAR.match(os.path.basename(member.name))
                if not (match and member.isfile()):
                    outer.extract(member, dest, filter="data")
                    continue
                stream = outer.extractfile(member)
                assert stream is not None  # a regular file (isfile above)
                with stream, tarfile.open(fileobj=stream, mode="r|*") as inner:
                    inner.extractall(dest / match.group(1), filter="data")
                classes += 1
                if classes % 100 == 0:
                    report_progress(progress, f"unpacked {classes} class archives")
    except (tarfile.TarError, OSError) as exc:
        raise UserError(f"cannot unpack {archive.name}: {exc}; the archive is damaged or not a tar file") from None


# ---------------------------------------------------------------- synthetic set


def synthetic_wnid(index: int) -> str:
    """Class folder names shaped like WordNet ids but outside ImageNet's (which all start n0 with a non-zero)."""
    return f"n{index:08d}"


def make_synthetic(dest: Path, classes: int = 10, images_per_class: int = 30, seed: int = 42,
                   min_side: int = 96, max_side: int = 160, quality: int = 90) -> TrainFolder:
    """A deterministic ImageNet-format train folder in ``dest/train``: same seed, same bytes.

    Each class has its own colour and shape, drawn at a random size and place
    on a noisy background, so a model can learn something from it. The folder
    is built beside ``dest/train`` and swapped in when complete.
    """
    from PIL import Image, ImageDraw  # noqa: PLC0415  Pillow: the engine's interpreter (recordio) imports us

    if classes < 1 or images_per_class < 1:
        raise UserError(f"the synthetic set needs at least 1 class and 1 image per class, got {classes} and "
                        f"{images_per_class}")
    staging = fresh_staging(dest)
    root = staging / TRAIN_DIR
    try:
        for label in range(classes):
            wnid = synthetic_wnid(label)
            (root / wnid).mkdir(parents=True)
            rng = random.Random(seed * 100_003 + label)
            colour = tuple(rng.randrange(40, 256) for _ in range(3))
            for number in range(1, images_per_class + 1):
                width, height = rng.randint(min_side, max_side), rng.randint(min_side, max_side)
                background = tuple(rng.randrange(0, 256) for _ in range(3))
                image = Image.new("RGB", (width, height), background)
                draw = ImageDraw.Draw(image)
                for _ in range(40):  # speckle noise
                    x, y = rng.randrange(width), rng.randrange(height)
                    draw.point((x, y), fill=tuple(rng.randrange(256) for _ in range(3)))
                w, h = rng.randint(width // 3, width - 8), rng.randint(height // 3, height - 8)
                x, y = rng.randint(0, width - w), rng.randint(0, height - h)
                box = (x, y, x + w, y + h)
                (draw.ellipse if label % 2 else draw.rectangle)(box, fill=colour)
                image.save(root / wnid / f"{wnid}_{number}.JPEG", "JPEG", quality=quality)
        write_marker(root, KIND_SYNTHETIC, classes=classes, images_per_class=images_per_class, seed=seed,
                     note="generated by reprokit.data.imagenet; NOT ImageNet")
        swap_in(root, dest / TRAIN_DIR)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return describe(dest / TRAIN_DIR)


# ---------------------------------------------------------------- registered datasets

TRAIN_ENV = "CK_ENV_DATASET_IMAGENET_TRAIN"  # env prefix of soft:dataset.imagenet.train
TRAIN_TAGS = "dataset,imagenet,train,raw"
RECORDIO_ENV = "CK_ENV_DATASET_IMAGENET_TRAIN_P3"  # env prefix of soft:dataset.imagenet.train.p3
RECORDIO_TAGS = "dataset,imagenet,train-p3"  # the original program's dependency: dataset,imagenet,raw,train-p3
RANK = {KIND_IMAGENET: 2, KIND_MIN: 1, KIND_SYNTHETIC: 0}  # when several are registered, the most real one wins
TRAIN_INSTALL_HINT = ("install one with: ck install package:imagenet-2012-train-synthetic --quiet (synthetic, "
                      "a few MB), ck install package:imagenet-2012-train-min --quiet, or register a folder with: "
                      "ck detect soft:dataset.imagenet.train --search_dirs=DIR --quiet")
RECORDIO_INSTALL = "ck install package:dataset-imagenet-2012-train-p3 --quiet"
FULL_TRAIN_MD5 = "1d675b47d978889d74fa0da5fadfb00e"  # ILSVRC2012_img_train.tar (ck-env's imagenet-2012-train)
FULL_TRAIN_NEEDS_URL = (
    "ImageNet's train set (ILSVRC2012_img_train.tar, 138 GB) needs a login at image-net.org, so "
    "package:imagenet-2012-train cannot download it by itself: give your copy with --env.PACKAGE_URL=URL "
    "(a file:///path/ILSVRC2012_img_train.tar or a path is read in place; its MD5 must be the official "
    f"{FULL_TRAIN_MD5}, another archive needs --env.PACKAGE_MD5=MD5), or register an unpacked train folder "
    "with: ck detect soft:dataset.imagenet.train --search_dirs=DIR --quiet")


@dataclass(frozen=True)
class RecordioData:
    """A converted train set a run reads (ImageRecordIter)."""
    name: str  # the result's data field: imagenet, imagenet-min or imagenet-synthetic
    rec: str
    idx: str
    images: int
    classes: int
    env_uid: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def train_args(self) -> list[str]:
        return ["--data-train", self.rec, "--data-train-idx", self.idx, "--data-images", str(self.images)]


def choose_train_folder(entries: list[EnvEntry], pinned: str = "") -> TrainFolder:
    """The train folder to convert: pinned by IMAGENET_TRAIN_ENV=UID, else the most real registered one."""
    usable = []
    for entry in pinned_entries(entries, pinned, "IMAGENET_TRAIN_ENV", TRAIN_TAGS):
        try:
            usable.append((entry, describe(entry.variables.get(TRAIN_ENV, ""))))
        except UserError:
            continue  # its folder was removed
    if not usable:
        if pinned:
            raise UserError(f"the folder of env {pinned} is gone; register it again or pin another with "
                            f"--env.IMAGENET_TRAIN_ENV=UID")
        raise UserError(f"no ImageNet train folder is registered (CK env with tags {TRAIN_TAGS}); {TRAIN_INSTALL_HINT}")
    return max(usable, key=lambda pair: RANK[pair[1].kind])[1]


def choose_recordio(entries: list[EnvEntry], mode: str = "", pinned: str = "") -> RecordioData | None:
    """The converted train set a run reads, or None for synthetic batches.

    ``mode`` (--env.DATA): synthetic (default) reads none; recordio requires one.
    ``pinned`` (--env.DATASET_ENV) picks a conversion by env UID (and implies recordio);
    otherwise the most real kind, then the newest.
    """
    mode = data_mode(mode, pinned, "recordio", "image models")
    if mode == "synthetic":
        return None
    usable = []
    for entry in pinned_entries(entries, pinned, "DATASET_ENV", RECORDIO_TAGS):
        v = entry.variables
        rec, idx = v.get(f"{RECORDIO_ENV}_REC", ""), v.get(f"{RECORDIO_ENV}_IDX", "")
        kind = v.get(f"{RECORDIO_ENV}_KIND", "")
        if not (rec and idx and os.path.isfile(rec) and os.path.isfile(idx)) or kind not in RANK:
            continue  # removed, or not one of ours
        data = RecordioData(name=kind, rec=rec, idx=idx, images=int(v.get(f"{RECORDIO_ENV}_IMAGES", "0") or 0),
                            classes=int(v.get(f"{RECORDIO_ENV}_CLASSES", "0") or 0), env_uid=entry.uid)
        usable.append(((RANK[kind], v.get(f"{RECORDIO_ENV}_CONVERTED_AT", "")), data))
    return best_or_explain(
        usable, pinned, gone=f"the RecordIO files of env {pinned} are gone; convert again with: {RECORDIO_INSTALL}",
        missing=f"DATA=recordio needs a converted ImageNet train set (CK env with tags {RECORDIO_TAGS}); "
                f"convert one with: {RECORDIO_INSTALL}")


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reprokit.data.imagenet", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="download, verify and unpack a train-folder tarball")
    f.add_argument("--url", required=True)
    f.add_argument("--md5", default="")
    f.add_argument("--dest", required=True, type=Path)
    f.add_argument("--kind", default=KIND_MIN, choices=KINDS)
    s = sub.add_parser("synthetic", help="generate the deterministic synthetic train set")
    s.add_argument("--dest", required=True, type=Path)
    s.add_argument("--classes", type=int, default=10)
    s.add_argument("--images-per-class", type=int, default=30)
    s.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up the staging folder on SIGTERM too

    def say(message: str) -> None:
        print(f"dataset: {message}", flush=True)

    with one_line_errors("dataset", "nothing was installed"):
        if args.command == "fetch":
            folder = fetch(args.url, args.md5, args.dest, args.kind, progress=say)
        else:
            folder = make_synthetic(args.dest, args.classes, args.images_per_class, args.seed)
    say(f"{folder.kind} train folder with {folder.classes} classes at {folder.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
