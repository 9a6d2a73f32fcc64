"""Convert an ImageNet train folder to MXNet RecordIO, as the original workflow's im2rec steps did.

    <engine python> -m reprokit.data.recordio --source TRAIN_ROOT --dest DIR [--threads N]

Runs in the MXNet engine's interpreter (it needs mxnet and cv2) and reuses
the engine's own ``mxnet/tools/im2rec.py`` for the two steps the original
package ran::

    im2rec.py --list --recursive --train-ratio 0.95 imagenet1k TRAIN_ROOT
    im2rec.py --resize 480 --quality 95 --num-thread N imagenet1k TRAIN_ROOT

so the lists, labels (class folders in sorted order), resizing (shorter edge)
and JPEG encoding are MXNet's. What it adds: a progress bar, worker processes
that are always torn down, a per-image time limit, and atomic output: all
files are written into ``DIR/recordio.partial`` and swapped in as
``DIR/recordio`` only when complete, with ``recordio.json`` (what was
converted, how) written last. An interrupted conversion leaves at most a
``.partial`` folder that nothing registers and the next attempt removes.

The authors' own conversion (package dataset-imagenet-2012-train-p3-ready) goes
into the same layout, with the .idx files written from the records' headers;
that needs no MXNet (the framework's interpreter runs it)::

    python -m reprokit.data.recordio --ready-url URL_OR_FOLDER --dest DIR
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import multiprocessing
import os
import shutil
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from reprokit.core.errors import UserError, one_line_errors
from reprokit.core.schema import fields_of
from reprokit.data.fetch import download, local_file, swap_in
from reprokit.data.imagenet import class_dirs, is_train_root

OUTPUT_DIR = "recordio"
MANIFEST = "recordio.json"
PREFIX = "imagenet1k"  # the original workflow's file names: imagenet1k_train.rec, imagenet1k_val.rec
LABELS = "labels.txt"
TRAIN_RATIO = 0.95
RESIZE = 480
QUALITY = 95
IMAGE_TIMEOUT_S = 120  # one image; a worker stuck longer fails the conversion
CHUNK = 8  # images per task handed to a worker process: fewer round trips, still a smooth progress bar


def _chunks(jobs: list[Any], size: int) -> list[list[Any]]:
    return [jobs[start:start + size] for start in range(0, len(jobs), size)]


@dataclass(frozen=True)
class Part:
    name: str  # train or val
    rec: str
    idx: str
    images: int
    skipped: int = 0
    lst: str = ""  # im2rec's list (a conversion of ours); the authors' set has none


@dataclass(frozen=True)
class RecordioManifest:
    """recordio.json, written last into a finished conversion (ours, or the authors' set fetched): what
    soft:dataset.imagenet.train.p3 registers. Ours adds how it was converted and how fast."""
    kind: str  # imagenet (the authors' set), imagenet-min, imagenet-synthetic
    source: str
    classes: int
    parts: dict[str, Part]
    images: int
    converted_at: str
    converted_by: str | None = None  # "the P3 authors" for their set
    train_ratio: float | None = None
    resize: int | None = None
    quality: int | None = None
    threads: int | None = None
    seconds: float | None = None
    images_per_sec: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecordioManifest:
        parts = {name: Part(**part) for name, part in data["parts"].items()}
        return cls(**{**fields_of(cls, data), "parts": parts})

    def save(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    def summary(self) -> str:
        return ", ".join(f"{p.name} {p.images}" for p in self.parts.values())


RECORDIO_MAGIC = 0xCED7230A  # dmlc's RecordIOWriter::kMagic, before every record
IR_HEADER = struct.Struct("<IfQQ")  # mx.recordio.IRHeader: flag, label, id, id2
READY_FILES = {"train": f"{PREFIX}_train.rec", "val": f"{PREFIX}_val.rec"}  # the authors' converted set
READY_ORIGINAL_URL = "ftp://198.162.52.84/pub"  # the original package's PACKAGE_URL1/2 (the authors' FTP)
READY_NEEDS_URL = (
    "package:dataset-imagenet-2012-train-p3-ready needs to be told where the authors' converted ImageNet "
    f"({READY_FILES['train']} and {READY_FILES['val']}, about 46 GB) is: give the folder holding both with "
    f"--env.PACKAGE_URL=URL (the original workflow's {READY_ORIGINAL_URL}, a mirror, or a local folder), or "
    "convert your own ImageNet: ck detect soft:dataset.imagenet.train --search_dirs=DIR --quiet, then "
    "ck install package:dataset-imagenet-2012-train-p3 --quiet")


@dataclass(frozen=True)
class RecordHead:
    offset: int  # of the record's magic: what an .idx line holds
    flag: int  # 0: one label in the header; -1: no image header (not an image record)
    label: float
    id: int


def record_heads(path: str | Path) -> Iterator[RecordHead]:
    """The header of every record of a RecordIO file, read by seeking from record to record (never the images)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        while True:
            offset = handle.tell()
            head = handle.read(8)
            if not head:
                return
            magic, lrec = struct.unpack("<II", head) if len(head) == 8 else (RECORDIO_MAGIC, 1 << 29)
            if magic != RECORDIO_MAGIC:
                raise UserError(f"{path} is not a RecordIO file or is damaged (bad magic at byte {offset})")
            cflag, length = lrec >> 29, lrec & ((1 << 29) - 1)
            padded = (length + 3) // 4 * 4  # every record is padded to 4 bytes, the last one too
            if len(head) < 8 or offset + 8 + padded > size:
                raise UserError(f"{path} ends inside a record (byte {offset}): the file is cut short")
            if cflag in (0, 1) and length >= IR_HEADER.size:  # a whole record, or the first part of a split one
                header = handle.read(IR_HEADER.size)
                if len(header) < IR_HEADER.size:
                    raise UserError(f"{path} ends inside a record (byte {offset}): the file is cut short")
                flag, label, record_id, _ = IR_HEADER.unpack(header)
                yield RecordHead(offset, flag, label, record_id)
                padded -= IR_HEADER.size
            elif cflag in (0, 1):  # too short for an image header: a record, but not one im2rec wrote
                yield RecordHead(offset, -1, 0.0, -1)
            handle.seek(padded, os.SEEK_CUR)


def index_records(rec: Path) -> tuple[int, int]:
    """Write ``rec``'s .idx as im2rec does ("id<TAB>offset" per record); returns (images, classes)."""
    images, top = 0, -1
    with open(rec.with_suffix(".idx"), "w") as out:
        for head in record_heads(rec):
            if head.flag < 0:
                raise UserError(f"{rec} holds a record without an image header at byte {head.offset}: it is not "
                                f"an image set written by im2rec")
            out.write(f"{head.id}\t{head.offset}\n")
            images += 1
            if head.flag == 0:
                top = max(top, int(head.label))
    return images, top + 1


def fetch_ready(base_url: str, dest: Path, progress: Callable[[str], None] = print) -> RecordioManifest:
    """The authors' converted ImageNet (imagenet1k_train.rec, imagenet1k_val.rec under ``base_url``) into ``dest/recordio``.

    Downloaded, or linked when ``base_url`` is a local folder (a hard link, else
    a symbolic one: 46 GB are not copied); the .idx files the original package
    never had are written from the records' headers; ``recordio.json`` last.
    ``dest/recordio`` changes only on success.
    """
    base = base_url if base_url.endswith("/") else base_url + "/"
    dest.mkdir(parents=True, exist_ok=True)
    staging = dest / (OUTPUT_DIR + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        parts: dict[str, Part] = {}
        classes = 0
        for name, file in READY_FILES.items():
            target = staging / file
            source = local_file(base + file)
            if source is None:
                progress(f"downloading {base}{file}")
                download(base + file, target, progress=progress)
            else:
                try:
                    os.link(source, target)
                except OSError:
                    os.symlink(source, target)
                progress(f"linked {source}")
            progress(f"indexing {file}")
            images, found = index_records(target)
            if not images:
                raise UserError(f"{base}{file} holds no records; give the folder of the authors' set with "
                                f"--env.PACKAGE_URL=URL")
            parts[name] = Part(name, file, target.with_suffix(".idx").name, images)
            classes = max(classes, found)
        manifest = RecordioManifest(kind="imagenet", source=base, classes=classes, converted_by="the P3 authors",
                                    parts=parts, images=sum(p.images for p in parts.values()),
                                    converted_at=datetime.now(UTC).isoformat(timespec="seconds"))
        manifest.save(staging)  # last: marks completion
        swap_in(staging, dest / OUTPUT_DIR)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def load_im2rec() -> ModuleType:
    """MXNet's own tools/im2rec.py from the engine's site-packages, imported as a module.

    The one module loaded by path (tests/unit/test_import_direction.py's LOADERS): im2rec is not ours but MXNet's, a
    script in the wheel's tools/ folder, not part of any package the engine's interpreter could import by name."""
    try:
        import cv2  # noqa: F401, PLC0415  (im2rec and pack_img encode with OpenCV; the engine only)
    except ImportError:
        raise UserError(f"the MXNet engine at {sys.prefix} has no OpenCV (cv2), which im2rec needs; reinstall it "
                        f"with: ck install package:lib-mxnet --quiet") from None
    import mxnet  # noqa: PLC0415  engine's interpreter only (--ready-url runs in ours, without mxnet)

    path = Path(mxnet.__file__).parent / "tools" / "im2rec.py"
    if not path.exists():
        raise UserError(f"{path} is missing from the MXNet engine; reinstall it with: ck install package:lib-mxnet --quiet")
    spec = importlib.util.spec_from_file_location("mxnet_im2rec", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def list_args(source: Path, prefix: Path, train_ratio: float) -> argparse.Namespace:
    """im2rec's options for ``--list --recursive --train-ratio R`` (shuffled with its fixed seed)."""
    return argparse.Namespace(root=str(source), prefix=str(prefix), recursive=True, exts=[".jpeg", ".jpg", ".png"],
                              chunks=1, train_ratio=train_ratio, test_ratio=0.0, shuffle=True)


def pack_args(source: Path, resize: int, quality: int) -> argparse.Namespace:
    """im2rec's options for ``--resize R --quality Q`` (JPEG, colour, no crop)."""
    return argparse.Namespace(root=str(source), pass_through=False, resize=resize, center_crop=False,
                              quality=quality, color=1, encoding=".jpg", pack_label=False)


class Progress:
    """A progress bar on a terminal; on a pipe, a line every 10 %."""

    def __init__(self, total: int, label: str, out: TextIO = sys.stderr):
        self.total, self.label, self.out = total, label, out
        self.tty = out.isatty()
        self.started = time.monotonic()
        self.last_draw = 0.0
        self.last_tenth = -1

    def line(self, done: int) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = done / elapsed
        eta = (self.total - done) / rate if rate > 0 else 0.0
        filled = int(30 * done / self.total) if self.total else 30
        return (f"{self.label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{self.total} images, "
                f"{rate:.1f} images/s, ETA {eta:.0f} s")

    def update(self, done: int) -> None:
        if self.tty:
            now = time.monotonic()
            if now - self.last_draw > 0.2 or done == self.total:
                self.last_draw = now
                self.out.write("\r" + self.line(done))
                if done == self.total:
                    self.out.write("\n")
                self.out.flush()
        else:
            tenth = 10 * done // self.total if self.total else 10
            if tenth > self.last_tenth:
                self.last_tenth = tenth
                print(self.line(done), file=self.out, flush=True)


class _Collect:
    """Stands in for im2rec's output queue: image_encode puts one (i, record, item) into it."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def put(self, value: Any) -> None:
        self.items.append(value)


_WORKER: dict[str, Any] = {}  # per worker process: im2rec module and options
_INTERRUPTED: list[int] = []  # signals received; im2rec's bare `except:` around imread swallows KeyboardInterrupt


def _interrupt(signum: int, frame: object) -> None:
    _INTERRUPTED.append(signum)
    raise KeyboardInterrupt


def _load(args: argparse.Namespace) -> None:
    _WORKER["im2rec"] = load_im2rec()
    _WORKER["args"] = args


def _init_worker(args: argparse.Namespace) -> None:
    """In each pool process: the parent decides about interruptions (it terminates the pool)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _load(args)


def _encode(job: tuple[int, list[Any]]) -> tuple[int, bytes | None, str]:
    """One image through im2rec's own image_encode (read, resize, JPEG, header); None if unreadable."""
    i, item = job
    out = _Collect()
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):  # im2rec prints per-image errors
        _WORKER["im2rec"].image_encode(_WORKER["args"], i, item, out)
    _, record, _ = out.items[0]
    lines = said.getvalue().strip().splitlines()
    return i, record, lines[-1] if record is None and lines else ""


def _encode_chunk(jobs: list[tuple[int, list[Any]]]) -> list[tuple[int, bytes | None, str]]:
    encoded = []
    for job in jobs:
        encoded.append(_encode(job))
        if _INTERRUPTED:  # a signal im2rec caught as a read error
            raise KeyboardInterrupt
    return encoded


def pack(im2rec: ModuleType, lst: Path, out_dir: Path, args: argparse.Namespace, threads: int,
         label: str) -> Part:
    """Pack every image of ``lst`` into ``<lst stem>.rec``/``.idx`` in list order; unreadable images are skipped."""
    import mxnet as mx  # noqa: PLC0415  engine's interpreter only (--ready-url runs in ours, without mxnet)

    items = list(im2rec.read_list(str(lst)))
    rec, idx = out_dir / (lst.stem + ".rec"), out_dir / (lst.stem + ".idx")
    writer = mx.recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    progress = Progress(len(items), label)
    skipped: list[str] = []
    pool = None
    next_chunk: Callable[[], list[tuple[int, bytes | None, str]]]  # the next chunk's encoded images, in list order
    try:
        if threads > 1:
            # fork: the workers inherit the loaded engine instead of importing it again
            pool = multiprocessing.get_context("fork").Pool(threads, initializer=_init_worker, initargs=(args,))
            # Our own chunks (imap's chunksize would lose the per-result timeout); in list order.
            results = pool.imap(_encode_chunk, [chunk for chunk in _chunks(list(enumerate(items)), CHUNK)])
            next_chunk = lambda: results.next(timeout=IMAGE_TIMEOUT_S * CHUNK)  # noqa: E731
        else:
            _load(args)
            chunks = iter(_chunks(list(enumerate(items)), CHUNK))
            next_chunk = lambda: _encode_chunk(next(chunks))  # noqa: E731
        progress.update(0)
        done = 0
        while done < len(items):
            try:
                encoded = next_chunk()
            except multiprocessing.TimeoutError:
                raise UserError(f"a conversion worker took more than {IMAGE_TIMEOUT_S} s per image "
                                f"(near {items[done][1]}); stopped") from None
            for i, record, problem in encoded:
                if record is None:
                    skipped.append(f"{items[i][1]}{': ' + problem if problem else ''}")
                else:
                    writer.write_idx(items[i][0], record)
            done += len(encoded)
            progress.update(done)
    finally:
        writer.close()
        if pool is not None:
            pool.terminate()
            pool.join()
    if skipped:
        print(f"recordio: warning: skipped {len(skipped)} unreadable image(s) in {lst.name}, e.g. {skipped[0]}",
              file=sys.stderr, flush=True)
    if len(skipped) == len(items) and items:
        raise UserError(f"none of the {len(items)} images in {lst.name} could be read (e.g. {skipped[0]})")
    return Part(name=label, rec=rec.name, idx=idx.name, lst=lst.name, images=len(items) - len(skipped),
                skipped=len(skipped))


def convert(source: Path, dest: Path, kind: str, threads: int, train_ratio: float = TRAIN_RATIO,
            resize: int = RESIZE, quality: int = QUALITY) -> RecordioManifest:
    """Convert ``source`` into ``dest/recordio``; returns the manifest. ``dest/recordio`` changes only on success."""
    if not is_train_root(source):
        raise UserError(f"{source} is not an ImageNet train folder (class folders nXXXXXXXX holding images)")
    if not 0 < train_ratio <= 1:
        raise UserError(f"the train ratio must be in (0, 1], got {train_ratio}; fix it with --env.TRAIN_RATIO=R")
    if threads < 1:
        raise UserError(f"the number of threads must be at least 1, got {threads}; fix it with --env.NUM_THREADS=N")
    im2rec = load_im2rec()
    dest.mkdir(parents=True, exist_ok=True)
    staging = dest / (OUTPUT_DIR + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    started = time.monotonic()
    try:
        with contextlib.redirect_stdout(io.StringIO()) as mapping:  # im2rec prints "class_folder label" per class
            im2rec.make_list(list_args(source, staging / PREFIX, train_ratio))
        (staging / LABELS).write_text(mapping.getvalue())
        args = pack_args(source, resize, quality)
        parts = []
        for name in ("train", "val"):
            lst = staging / f"{PREFIX}_{name}.lst"
            if not lst.exists():  # train ratio 1: im2rec writes PREFIX.lst only
                if name == "val":
                    continue
                os.replace(staging / f"{PREFIX}.lst", lst)
            parts.append(pack(im2rec, lst, staging, args, threads, name))
        seconds = time.monotonic() - started
        images = sum(p.images for p in parts)
        manifest = RecordioManifest(
            kind=kind, source=str(source), classes=len(class_dirs(source)),
            train_ratio=train_ratio, resize=resize, quality=quality, threads=threads,
            parts={p.name: p for p in parts}, images=images,
            seconds=round(seconds, 3), images_per_sec=round(images / seconds, 2) if seconds else None,
            converted_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        manifest.save(staging)  # last: marks completion
        swap_in(staging, dest / OUTPUT_DIR)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def read_manifest(dest: str | Path) -> RecordioManifest:
    """The manifest of a finished conversion under ``dest`` (its install folder or its recordio folder), its parts'
    files as absolute paths that exist."""
    path = Path(dest)
    if path.name != OUTPUT_DIR:
        path = path / OUTPUT_DIR
    try:
        manifest = RecordioManifest.from_dict(json.loads((path / MANIFEST).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(f"{path} holds no finished conversion ({MANIFEST} is missing or damaged); convert again "
                        f"with: ck install package:dataset-imagenet-2012-train-p3 --quiet") from None
    parts = {name: replace(part, rec=str(path / part.rec), idx=str(path / part.idx))
             for name, part in manifest.parts.items()}
    for part in parts.values():
        for file in (part.rec, part.idx):
            if not os.path.exists(file):
                raise UserError(f"{file} is missing; convert again with: "
                                f"ck install package:dataset-imagenet-2012-train-p3 --quiet")
    return replace(manifest, parts=parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reprokit.data.recordio", description=__doc__.splitlines()[0])
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--source", type=Path, help="the ImageNet train folder to convert")
    given.add_argument("--ready-url", help="a folder URL (or local folder) holding the authors' converted set")
    parser.add_argument("--dest", required=True, type=Path, help="the install folder; output goes to DEST/recordio")
    parser.add_argument("--kind", default="imagenet", help="what the source is (imagenet, imagenet-min, ...)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--train-ratio", type=float, default=TRAIN_RATIO)
    parser.add_argument("--resize", type=int, default=RESIZE)
    parser.add_argument("--quality", type=int, default=QUALITY)
    args = parser.parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGINT):  # tear the workers down and drop the partial output
        signal.signal(signum, _interrupt)

    def say(message: str) -> None:
        print(f"recordio: {message}", flush=True)

    with one_line_errors("recordio", "no partial output was kept"):
        if args.ready_url:
            manifest = fetch_ready(args.ready_url, args.dest, progress=say)
        else:
            manifest = convert(args.source, args.dest, args.kind, args.threads, args.train_ratio, args.resize,
                               args.quality)
    parts = manifest.summary()
    if args.ready_url:
        say(f"registered the authors' set: {manifest.images} images ({parts}), {manifest.classes} classes, "
            f"in {args.dest / OUTPUT_DIR}")
        return 0
    say(f"converted {manifest.images} images ({parts}) of {manifest.kind} in "
        f"{manifest.seconds or 0:.1f} s ({manifest.images_per_sec} images/s, {args.threads} thread(s)) "
        f"into {args.dest / OUTPUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
