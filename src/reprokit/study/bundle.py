"""Move a study's results between evaluators: `ck export study:NAME --out=F.tar.gz`, `ck import study --in=F`.

A bundle is a gzip'd tar with ``manifest.json`` (format, study, the exporting
store's origin, and the sha256 and size of every other file) plus
``records/*.json`` and the run folders under ``runs/``. Import checks
everything before anything lands in the store: only regular files under
known folders, no absolute or upward paths, the manifest's format and study,
every file's size and checksum, every record's study and origin. It unpacks
into a hidden staging folder and renames it into ``imported/<bundle id>`` as
the last step, so a refused bundle changes nothing, and a bundle already
imported is not imported twice. Imported records keep their origin and
provenance; the analysis shows them as their own setups beside local ones.

Bundles leave the workers' timelines (``timeline-worker-*.json``) out: about
15 MB per worker for ResNet-50 at 31 batches, so a quick sweep's would make a
bundle of hundreds of MB, held in memory whole by export and import; no verdict
needs them (the records keep every figure). The manifest counts what was left
out; the report draws timelines from local runs.
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import time
import uuid
from pathlib import Path, PurePosixPath

from reprokit.errors import UserError
from reprokit.jsonfile import write_json
from reprokit.run.settings import TIMELINE_FILE
from reprokit.study.claims import now_iso
from reprokit.study.store import Record, Store

BUNDLE_FORMAT = "reprokit-study-bundle/1"
MANIFEST = "manifest.json"
MAX_MEMBER_BYTES = 256 * 1024 * 1024
LEFT_OUT = TIMELINE_FILE.format(rank="*")  # the workers' timelines: too large to carry (see above)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def export(store: Store, out: Path) -> dict:
    """Write every local record and its run folders into a bundle at ``out`` (written atomically)."""
    origin = store.origin()
    stored = store.local_record_files()
    if not stored:
        raise UserError(f"nothing to export: no runs stored in {store.root} (run: ck reproduce study:{store.study})")
    files: dict[str, bytes] = {}
    left_out = {"timelines": 0, "bytes": 0}
    for path, _ in stored:  # the stored bytes, as written: a bundle's records are the store's own
        files[f"records/{path.name}"] = path.read_bytes()
        run_root = store.runs_dir / path.stem  # the listed file's name (store.local_record_files), not its content
        for path in sorted(p for p in run_root.rglob("*") if p.is_file() and not p.is_symlink()):
            if path.match(LEFT_OUT):
                left_out["timelines"] += 1
                left_out["bytes"] += path.stat().st_size
                continue
            files[str(PurePosixPath("runs") / path.relative_to(store.runs_dir).as_posix())] = path.read_bytes()
    manifest = {"format": BUNDLE_FORMAT, "study": store.study, "origin": origin.to_dict(), "created": now_iso(),
                "nonce": uuid.uuid4().hex, "records": len(stored), "left_out": left_out,
                "files": {name: {"sha256": _sha256(data), "size": len(data)} for name, data in sorted(files.items())}}
    out = out.expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for name, data in [(MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode()), *sorted(files.items())]:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)
    return {"path": out, "records": len(stored), "files": len(files), "left_out": left_out}


def _refuse(bundle: Path, why: str) -> UserError:
    return UserError(f"refusing bundle {bundle}: {why}; nothing was imported")


def _safe_name(name: str) -> bool:
    path = PurePosixPath(name)
    return (not path.is_absolute() and ".." not in path.parts and name == path.as_posix()
            and (name == MANIFEST or path.parts[0] in ("records", "runs")))


def read_bundle(bundle: Path, study: str) -> tuple[dict, dict[str, bytes]]:
    """The manifest and files of a bundle, all checked; UserError (one line) on anything wrong."""
    if not bundle.is_file():
        raise UserError(f"no bundle at {bundle}; give the file written by: ck export study:{study} --out=FILE.tar.gz")
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(bundle, "r:gz") as tar:
            for member in tar:
                if member.isdir():
                    continue
                if not member.isfile():
                    raise _refuse(bundle, f"{member.name!r} is not a regular file")
                if not _safe_name(member.name):
                    raise _refuse(bundle, f"unexpected path {member.name!r}")
                if member.size > MAX_MEMBER_BYTES or member.name in files:
                    raise _refuse(bundle, f"{member.name!r} is too large or repeated")
                handle = tar.extractfile(member)
                files[member.name] = handle.read() if handle else b""
    except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
        raise _refuse(bundle, f"not a readable .tar.gz ({exc})") from None
    if MANIFEST not in files:
        raise _refuse(bundle, f"no {MANIFEST}: not a study bundle (made by ck export study:NAME)")
    try:
        manifest = json.loads(files.pop(MANIFEST))
    except ValueError:
        raise _refuse(bundle, f"{MANIFEST} is not JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise _refuse(bundle, f"format {manifest.get('format') if isinstance(manifest, dict) else None!r} "
                              f"is not {BUNDLE_FORMAT}")
    if manifest.get("study") != study:
        raise _refuse(bundle, f"it holds results of study {manifest.get('study')!r}, not {study!r}")
    listed = manifest.get("files")
    if not isinstance(listed, dict) or set(listed) != set(files):
        extra = sorted(set(files) - set(listed or {}))[:3]
        missing = sorted(set(listed or {}) - set(files))[:3]
        raise _refuse(bundle, f"its files do not match the manifest (unlisted: {extra}, missing: {missing})")
    for name, data in files.items():
        entry = listed[name]
        if not isinstance(entry, dict) or entry.get("size") != len(data) or entry.get("sha256") != _sha256(data):
            raise _refuse(bundle, f"{name} does not match its checksum in the manifest (corrupted or tampered with)")
    origin = manifest.get("origin")
    if not isinstance(origin, dict) or not isinstance(origin.get("id"), str):
        raise _refuse(bundle, "the manifest names no origin")
    for name in (n for n in files if n.startswith("records/")):
        try:
            record = Record.from_dict(json.loads(files[name]), name)
        except ValueError:
            raise _refuse(bundle, f"{name} is not JSON") from None
        except UserError as exc:
            raise _refuse(bundle, f"{exc}") from None
        if record.study != study or record.origin.id != origin["id"] or PurePosixPath(name).stem != record.record_id:
            raise _refuse(bundle, f"{name} is not a run record of study {study} from the bundle's origin")
    return manifest, files


def bundle_study(bundle: Path) -> str:
    """The study a bundle belongs to, from its manifest (checked in full later, by read_bundle)."""
    try:
        with tarfile.open(bundle.expanduser(), "r:gz") as tar:
            handle = tar.extractfile(MANIFEST)
            study = json.loads(handle.read()).get("study") if handle else None
    except (tarfile.TarError, OSError, EOFError, ValueError, KeyError, AttributeError):
        study = None
    if not isinstance(study, str) or not study:
        raise _refuse(bundle, "it has no readable manifest naming its study (made by ck export study:NAME)")
    return study


def import_bundle(store: Store, bundle: Path) -> dict:
    bundle = bundle.expanduser().resolve()
    manifest, files = read_bundle(bundle, store.study)
    own = store.origin()
    if manifest["origin"]["id"] == own.id:
        raise _refuse(bundle, f"it was exported from this store ({store.root}); its runs are here already")
    bundle_id = f"{manifest['origin']['id'][:12]}-{_sha256(json.dumps(manifest, sort_keys=True).encode())[:12]}"
    final = store.imported_dir / bundle_id
    if final.exists():
        return {"bundle_id": bundle_id, "records": manifest.get("records"), "already": True, "path": final}
    staging = store.imported_dir / f".staging-{uuid.uuid4().hex}"
    try:
        for name, data in files.items():
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        write_json(staging / "bundle.json",
                   {"manifest": manifest, "source": str(bundle), "imported": now_iso()})
        staging.rename(final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return {"bundle_id": bundle_id, "records": manifest.get("records"), "already": False, "path": final}
