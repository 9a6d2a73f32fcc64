"""Move a study's results between evaluators: `ck export study:NAME --out=F.tar.gz`, `ck import study --in=F`.

A bundle is a gzip'd tar whose first member is ``manifest.json`` (format,
study, the exporting store's origin and public key, the sha256 and size of
every other file, their total, and an Ed25519 signature over all of it, made
with the store's key: identity.py), then ``records/<record id>.json`` and the
run folders as ``runs/<record id>/attempt-N/...``.

Import reads the archive as a stream and checks everything before anything is
stored:

- the manifest first (at most MAX_MANIFEST_BYTES): its schema (MANIFEST_SCHEMA),
  the study, a total of at most MAX_BUNDLE_BYTES, and its signature; then the
  origin: an origin id no store makes (``local``: identity.STORE_ID), a bundle
  that claims this store's origin, an origin id that is a key fingerprint but
  not its key's, or an origin pinned by an earlier import to another key, is
  refused;
- every other member: a regular file (no links, devices or folders), listed in
  the manifest, once, with the size it lists; streamed to disk in a hidden
  staging folder while its sha256 is computed. The bytes read from the gzip
  stream are granted member by member (the manifest's sizes plus room for the
  tar headers), so neither a gzip bomb nor a huge tar header can make import
  read or hold more than the manifest declares;
- every record against the record schema (store.RECORD_SCHEMA), its file name,
  study and origin; every run folder belongs to a record of the bundle;
- the archive ends where it should (a truncated or damaged archive is named so).

Runs already imported (same run id: origin id and record id) are left out, so
re-exports of one store count each run once; the same run id with other
content is refused. The staging folder is renamed into
``imported/<bundle id>`` as the last step, under a lock that serialises
concurrent imports: a refused or interrupted import stores nothing.

Bundles leave the workers' timelines (``timeline-worker-*.json``) out: about
15 MB per worker for ResNet-50 at 31 batches, so a quick sweep's would make a
bundle of hundreds of MB; no verdict needs them (the records keep every figure).
The manifest counts what was left out; the report draws timelines from local runs.
"""
from __future__ import annotations

import fcntl
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import time
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from reprokit.core import schema as s
from reprokit.core.errors import UserError
from reprokit.core.files import read_regular
from reprokit.core.jsonfile import read_json, write_json
from reprokit.core.paths import check_room, disk_error, disk_errors
from reprokit.core.values import shown
from reprokit.run.procscan import flock_holder, is_stopped
from reprokit.run.settings import TIMELINE_FILE
from reprokit.study.store import identity
from reprokit.study.store.records import MAX_RECORD_BYTES, NAME, ORIGIN_SCHEMA, Record, Store, now_iso

BUNDLE_FORMAT = "reprokit-study-bundle/2"
UNSIGNED_FORMAT = "reprokit-study-bundle/1"  # before bundles were signed
MANIFEST = "manifest.json"
MAX_BUNDLE_BYTES = 1 << 30  # the files of one bundle together (a quick sweep's come to a few MB)
MAX_FILES = 100_000
MAX_MANIFEST_BYTES = 16 << 20
HEADER_ROOM = 64 << 10  # gzip bytes tarfile may read per member beyond its data (headers, long names, padding)
CHUNK = 1 << 20
LOCK_TIMEOUT_S = 300.0
LEFT_OUT = TIMELINE_FILE.format(rank="*")  # the workers' timelines: too large to carry (see above)
TRUNCATED = "the archive is truncated (it ends before its last file); copy it again from the exporting evaluator"

_COMPONENT = re.compile(r"[^/\\\x00-\x1f\x7f]{1,255}\Z")


def member_name_ok(name: str) -> bool:
    """``records/<plain name>.json`` or ``runs/<plain name>/attempt-N/<file path>``: never absolute, never upward."""
    if not isinstance(name, str) or name != PurePosixPath(name).as_posix() or len(name) > 1024:
        return False
    parts = name.split("/")
    if parts[0] == "records":
        return len(parts) == 2 and parts[1].endswith(".json") and bool(s.PLAIN_NAME.match(parts[1][:-5]))
    return (parts[0] == "runs" and 4 <= len(parts) <= 24 and bool(s.PLAIN_NAME.match(parts[1]))
            and bool(re.fullmatch(r"attempt-[1-9][0-9]{0,5}", parts[2]))
            and all(_COMPONENT.match(p) and p not in (".", "..") for p in parts[3:]))


MEMBER = s.Where(s.Text(1024), member_name_ok, "records/<record id>.json or runs/<record id>/attempt-N/<file>")
MANIFEST_SCHEMA = s.Obj(required={
    "format": s.OneOf((BUNDLE_FORMAT,)), "study": NAME, "origin": ORIGIN_SCHEMA, "public_key": s.Hex(64),
    "signature": s.Hex(128), "created": s.Text(64), "nonce": NAME, "records": s.Int(1, MAX_FILES),
    "left_out": s.Obj(required={"timelines": s.Int(0, 10**9), "bytes": s.Int(0, 10**15)}),
    "total_bytes": s.Int(0, MAX_BUNDLE_BYTES),
    "files": s.MapOf(MEMBER, s.Obj(required={"sha256": s.Hex(64), "size": s.Int(0, MAX_BUNDLE_BYTES)}),
                     max_items=MAX_FILES),
})


def _signed_bytes(manifest: dict[str, Any]) -> bytes:
    """What the signature covers: the manifest without its signature, as canonical JSON."""
    return json.dumps({k: v for k, v in manifest.items() if k != "signature"}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True).encode()


def _file_entry(path: Path) -> dict[str, Any]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return {"sha256": digest.hexdigest(), "size": size}


# --- export --------------------------------------------------------------------------------------

def export(store: Store, out: Path) -> dict[str, Any]:
    """Write every local record and its run folders into a signed bundle at ``out`` (written atomically)."""
    origin, key = store.origin(), store.signing_key()
    stored = store.local_record_files()
    if not stored:
        raise UserError(f"nothing to export: no runs stored in {store.root} (run: ck reproduce study:{store.study})")
    paths: dict[str, Path] = {}
    left_out = {"timelines": 0, "bytes": 0}
    for path, record in stored:  # the stored bytes, as written: a bundle's records are the store's own
        paths[f"records/{path.name}"] = path
        run_root = store.runs_dir / record.record_id  # checked by the record schema: a plain name
        for path in sorted(p for p in run_root.rglob("*") if p.is_file() and not p.is_symlink()):
            if path.match(LEFT_OUT):
                left_out["timelines"] += 1
                left_out["bytes"] += path.stat().st_size
                continue
            name = str(PurePosixPath("runs") / path.relative_to(store.runs_dir).as_posix())
            if not member_name_ok(name):
                raise UserError(f"cannot export {path}: a bundle carries only run files under runs/<record>/attempt-N "
                                f"with printable names; rename or remove it")
            paths[name] = path
    files = {name: _file_entry(path) for name, path in sorted(paths.items())}
    total = sum(entry["size"] for entry in files.values())
    if total > MAX_BUNDLE_BYTES or len(files) > MAX_FILES:
        raise UserError(f"the runs in {store.root} come to {total / 1e6:.0f} MB in {len(files)} files, more than a "
                        f"bundle may hold ({MAX_BUNDLE_BYTES / 1e6:.0f} MB, {MAX_FILES} files)")
    manifest = {"format": BUNDLE_FORMAT, "study": store.study, "origin": origin.to_dict(),
                "public_key": identity.public_hex(key), "created": now_iso(), "nonce": uuid.uuid4().hex,
                "records": len(stored), "left_out": left_out, "total_bytes": total, "files": files}
    manifest["signature"] = identity.sign(key, _signed_bytes(manifest))
    out = out.expanduser().resolve()
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex[:8]}.tmp")
    # Compressed, the bundle is at most about the size of its files: that much must be free where it goes.
    check_room(tmp, total + len(files) * tarfile.BLOCKSIZE * 2, "ck export")
    try:
        with disk_errors("ck export", tmp):
            out.parent.mkdir(parents=True, exist_ok=True)
            with tarfile.open(tmp, "w:gz") as tar:
                now = int(time.time())
                data = json.dumps(manifest, indent=2, sort_keys=True).encode()
                tar.addfile(_info(MANIFEST, len(data), now), io.BytesIO(data))  # first: import reads it first
                for name, path in sorted(paths.items()):
                    with open(path, "rb") as handle:
                        tar.addfile(_info(name, files[name]["size"], now), handle)
            tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return {"path": out, "records": len(stored), "files": len(files), "left_out": left_out}


def _info(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o644
    return info


# --- reading a bundle ----------------------------------------------------------------------------

class _Refused(Exception):
    """Raised inside the reader; turned into one UserError naming the bundle."""


def _refuse(bundle: Path, why: str) -> UserError:
    return UserError(f"refusing bundle {shown(bundle)}: {why}; nothing was imported")


class _Budget:
    """The decompressed stream, read only as far as granted: the manifest's sizes, member by member."""

    def __init__(self, stream: gzip.GzipFile):
        self.stream, self.granted, self.used = stream, 0, 0

    def grant(self, n: int) -> None:
        self.granted += n

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = max(0, self.granted - self.used) + 1
        try:
            data = self.stream.read(n)
        except EOFError:
            raise _Refused(TRUNCATED) from None
        except gzip.BadGzipFile as exc:
            if self.used:  # a bad checksum or length at the end
                raise _Refused(f"it is damaged ({exc}); copy it again from the exporting evaluator") from None
            raise _Refused(f"it is not a .tar.gz made by ck export ({exc})") from None
        except zlib.error:
            raise _Refused("its compressed data is damaged; copy it again from the exporting evaluator") from None
        self.used += len(data)
        if self.used > self.granted + HEADER_ROOM:
            raise _Refused(f"its archive holds more than its manifest declares (over {self.granted} bytes): "
                           f"not a bundle as ck export writes it")
        return data


@contextmanager
def _archive(bundle: Path, first_grant: int) -> Iterator[tuple[tarfile.TarFile, _Budget]]:
    """The bundle as a tar stream whose reads are bounded by grants; every read problem as one refusal."""
    if not os.path.isfile(bundle):  # False for a name too long to look up, where is_file() raises
        raise _refuse(bundle, "there is no such file (give the one written by: ck export study:NAME --out=FILE.tar.gz)")
    try:
        with open(bundle, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            budget = _Budget(gz)
            budget.grant(first_grant)
            with tarfile.open(fileobj=budget, mode="r|") as tar:  # type: ignore[call-overload]  # a stream read: read() is enough
                yield tar, budget
    except _Refused as exc:
        raise _refuse(bundle, str(exc)) from None
    except tarfile.ReadError as exc:
        if "unexpected end" in str(exc):
            raise _refuse(bundle, TRUNCATED) from None
        raise _refuse(bundle, f"its content is not a tar archive ({exc}): not a bundle made by ck export") from None
    except (tarfile.TarError, ValueError, UnicodeError) as exc:
        raise _refuse(bundle, f"its archive is damaged ({exc}); copy it again from the exporting evaluator") from None
    except OSError as exc:
        # Writing the store (a full disk, an overlong name) is the store's problem, not the bundle's.
        raise disk_error(exc, "ck import") or _refuse(bundle, f"it cannot be read ({exc.strerror or exc})") from None


def _read_manifest(tar: tarfile.TarFile, study: str | None) -> dict[str, Any]:
    """The first member, which must be a valid, signed manifest (of ``study`` when given)."""
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isfile():
        raise _Refused(f"it does not start with {MANIFEST}: not a study bundle (made by ck export study:NAME)")
    if first.size > MAX_MANIFEST_BYTES:
        raise _Refused(f"its {MANIFEST} is {first.size} bytes, more than {MAX_MANIFEST_BYTES}")
    handle = tar.extractfile(first)
    raw = handle.read() if handle else b""
    if len(raw) != first.size:
        raise _Refused(TRUNCATED)
    try:
        manifest = json.loads(raw)
    except (ValueError, UnicodeError):
        raise _Refused(f"its {MANIFEST} is not JSON") from None
    if isinstance(manifest, dict) and manifest.get("format") == UNSIGNED_FORMAT:
        raise _Refused("it was made by an earlier version without a signature; ask its evaluator to export it "
                       "again with: ck export study:NAME --out=FILE.tar.gz")
    try:
        MANIFEST_SCHEMA.check(manifest, "")
    except s.Invalid as exc:
        raise _Refused(f"its {MANIFEST} is invalid: {exc}") from None
    if study is not None and manifest["study"] != study:
        raise _Refused(f"it holds results of study {manifest['study']!r}, not {study!r}")
    if manifest["origin"]["study"] != manifest["study"]:
        raise _Refused(f"its origin belongs to study {manifest['origin']['study']!r}, not {manifest['study']!r}")
    if sum(e["size"] for e in manifest["files"].values()) != manifest["total_bytes"]:
        raise _Refused(f"its {MANIFEST}'s total_bytes is not the sum of its files' sizes")
    if sum(1 for n in manifest["files"] if n.startswith("records/")) != manifest["records"]:
        raise _Refused(f"its {MANIFEST} counts {manifest['records']} records but lists another number")
    if not identity.verify(manifest["public_key"], manifest["signature"], _signed_bytes(manifest)):
        raise _Refused("its manifest's signature does not match (it was changed after export, or forged)")
    checked: dict[str, Any] = manifest  # BUNDLE_SCHEMA's object
    return checked


def bundle_study(bundle: Path) -> str:
    """The study a bundle belongs to, from its manifest (the rest is checked by import_bundle)."""
    with _archive(bundle.expanduser(), MAX_MANIFEST_BYTES + HEADER_ROOM) as (tar, _):
        return str(_read_manifest(tar, None)["study"])


def _check_origin(manifest: dict[str, Any], store: Store, imported: _Imported) -> None:
    """Refuse a bundle whose origin it cannot prove: the signing key must be its origin's."""
    origin, key = manifest["origin"], manifest["public_key"]
    if not identity.STORE_ID.fullmatch(origin["id"]):
        # Checked first: an id like "local" or "here" would read in the report as this store's own runs.
        raise _Refused(f"its origin.id {shown(origin['id'])} is not one a store makes ({identity.STORE_ID_FORM}): "
                       f"it was edited or made by hand; ask its evaluator for the bundle ck export wrote")
    own = store.origin()
    own_key = store.public_key()
    if origin["id"] == own.id and key == own_key:
        raise _Refused(f"it was exported from this store ({store.root}); its runs are here already")
    if origin["id"] == own.id:
        raise _Refused(f"it claims this store's origin ({own.id}) but is not signed with its key: it is forged")
    if key == own_key:
        raise _Refused(f"it is signed with this store's key but claims origin {origin['id']}: it is forged")
    if identity.is_fingerprint(origin["id"]) and origin["id"] != identity.fingerprint(key):
        # an id made from a key (identity.fingerprint) can be claimed only with that key
        raise _Refused(f"its origin {origin['id']} is not the fingerprint of the key that signed it: it is forged")
    pinned = imported.keys.get(origin["id"])
    if pinned is not None and pinned != key:  # an id from before keys: the first key seen for it holds
        raise _Refused(f"its origin {origin['id']} was imported before signed by another key: it is forged or "
                       f"was signed again after an edit")
    for other in imported.origins - {origin["id"]}:
        if other[:8] == origin["id"][:8]:  # reports label setups by the first 8 characters
            raise _Refused(f"its origin {origin['id']} begins like origin {other} imported before; the report "
                           f"could not tell them apart")


class _Imported:
    """What earlier imports hold: each imported run's record digest, and each origin's key."""

    def __init__(self, store: Store):
        self.runs: dict[str, tuple[str, str]] = {}  # run id -> (bundle folder, sha256 of the record file)
        self.keys: dict[str, str] = {}
        self.origins: set[str] = set()
        for path, record in store.imported_record_files(left_out=[]):  # unreadable ones: the report says so
            self.runs.setdefault(record.run_id, (record.imported_from or "", hashlib.sha256(  # set on every imported one
                read_regular(path, "an imported run record", MAX_RECORD_BYTES)).hexdigest()))
            self.origins.add(record.origin.id)
        folder = store.imported_dir
        for bundle in sorted(d for d in folder.iterdir() if d.is_dir() and not d.name.startswith(".")) \
                if folder.is_dir() else []:
            info = bundle / "bundle.json"
            manifest = read_json(info, "an imported bundle's description").get("manifest") if info.is_file() else None
            if (isinstance(manifest, dict) and isinstance(manifest.get("public_key"), str)
                    and isinstance(manifest.get("origin"), dict)):  # bundles imported before signatures have none
                self.keys.setdefault(str(manifest["origin"].get("id")), manifest["public_key"])


def _copy_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, keep: bool) -> tuple[str, bytes]:
    """Stream a member into ``target``; its sha256, and its bytes when ``keep`` (records: small)."""
    handle = tar.extractfile(member)
    digest, size, kept = hashlib.sha256(), 0, []
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as out:
        while handle is not None and (chunk := handle.read(min(CHUNK, member.size - size))):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
            if keep:
                kept.append(chunk)
            if size >= member.size:
                break
    if size != member.size:
        raise _Refused(TRUNCATED)
    return digest.hexdigest(), b"".join(kept)


def _unpack(tar: tarfile.TarFile, budget: _Budget, manifest: dict[str, Any], staging: Path, study: str) -> dict[str, Record]:
    """Every member after the manifest into ``staging``, checked; the bundle's records by record id."""
    listed, origin = manifest["files"], manifest["origin"]
    seen: set[str] = set()
    folders: set[str] = set()  # every folder a member's path passes through
    records: dict[str, Record] = {}
    while True:
        budget.grant(HEADER_ROOM)
        member = tar.next()
        if member is None:
            break
        name = member.name
        kind = "a regular file" if member.isfile() else (
            "a symbolic link" if member.issym() else "a hard link" if member.islnk() else
            "a folder" if member.isdir() else "a device or pipe")
        if not member.isfile():
            raise _Refused(f"{shown(name)} is {kind}; a bundle holds regular files only")
        if name not in listed:
            raise _Refused(f"{shown(name)} is not listed in its manifest (unexpected path)")
        if name in seen:
            raise _Refused(f"{shown(name)} appears twice")
        parents = {str(p) for p in PurePosixPath(name).parents if str(p) != "."}
        if name in folders or parents & seen:
            raise _Refused(f"{shown(name)} is both a file and a folder of the bundle's files")
        folders |= parents
        if member.size != listed[name]["size"]:
            raise _Refused(f"{name} is {member.size} bytes in the archive, not the {listed[name]['size']} its manifest "
                           f"lists (corrupted or tampered with)")
        is_record = name.startswith("records/")
        if is_record and member.size > MAX_RECORD_BYTES:
            raise _Refused(f"{name} is {member.size} bytes, more than a record may be ({MAX_RECORD_BYTES})")
        budget.grant(member.size + 1024)
        digest, data = _copy_member(tar, member, staging / name, keep=is_record)
        if digest != listed[name]["sha256"]:
            raise _Refused(f"{name} does not match its checksum in the manifest (corrupted or tampered with)")
        seen.add(name)
        if is_record:
            try:
                record = Record.from_dict(json.loads(data), name)
            except (ValueError, UnicodeError):
                raise _Refused(f"{name} is not JSON") from None
            except UserError as exc:
                raise _Refused(str(exc)) from None
            if PurePosixPath(name).stem != record.record_id:
                raise _Refused(f"{name} holds record {record.record_id!r}, not the one its name says")
            if record.study != study or record.origin.to_dict() != origin:
                raise _Refused(f"{name} is not a run record of study {study} from the bundle's origin "
                               f"{origin['id']} on {origin['host']}")
            records[record.record_id] = record
    missing = sorted(set(listed) - seen)
    if missing:
        raise _Refused(f"the archive ends before {len(missing)} of the files its manifest lists "
                       f"(first: {missing[0]}): it is truncated or damaged; copy it again")
    while budget.read(CHUNK):  # the end of the gzip stream: its checksum, and nothing after the archive
        pass
    strays = sorted({n.split("/")[1] for n in listed if n.startswith("runs/")} - set(records))
    if strays:
        raise _Refused(f"it holds run files of {strays[0]!r}, which has no record in it")
    return records


@contextmanager
def _import_lock(store: Store) -> Iterator[None]:
    """One import into a store at a time: flock on the store's folder itself (no lock file left behind;
    released by the kernel when a holder dies); gives up after LOCK_TIMEOUT_S with one line."""
    fd = os.open(store.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = flock_holder(store.root)
                if holder is not None and is_stopped(holder):
                    raise UserError(f"another import into {store.root} (pid {holder}) is stopped (SIGSTOP or a "
                                    f"tracer) and holds the store; resume it (kill -CONT {holder}) or end it, then "
                                    f"import again") from None
                if not said:  # waiting in silence looks like a hang
                    who = f" (pid {holder})" if holder is not None else ""
                    print(f"study: waiting for another import into {store.root}{who} to finish (at most "
                          f"{LOCK_TIMEOUT_S:.0f} s)", file=sys.stderr, flush=True)
                    said = True
                if time.monotonic() > deadline:
                    raise UserError(f"another import into {store.root} has been running for over "
                                    f"{LOCK_TIMEOUT_S:.0f} s; try again when it has finished") from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # releases the lock


STAGING = ".import-staging-"


def import_bundle(store: Store, bundle: Path) -> dict[str, Any]:
    """Check ``bundle`` in full, then add the runs not imported yet under ``imported/<bundle id>``, at once."""
    bundle = bundle.expanduser().resolve()
    if not os.path.isfile(bundle):
        raise _refuse(bundle, f"there is no such file (give the one written by: ck export study:{store.study} "
                              f"--out=FILE.tar.gz)")
    store.origin()  # the store's identity (and folder), made before the lock
    with _import_lock(store):
        for stale in store.root.glob(f"{STAGING}*"):  # left by an import that was killed: never visible
            shutil.rmtree(stale, ignore_errors=True)
        staging = store.root / f"{STAGING}{uuid.uuid4().hex}"  # beside imported/: renamed into it at the end
        try:
            return _import_locked(store, bundle, staging)
        except OSError as exc:
            raise disk_error(exc, "ck import", store.root) or UserError(
                f"could not write into {store.root}: {exc.strerror or exc}; nothing was imported") from None
        except KeyboardInterrupt:  # Ctrl-C: the staging folder goes (below); say so in one line
            raise UserError(f"import of {bundle} interrupted; nothing was imported") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _import_locked(store: Store, bundle: Path, staging: Path) -> dict[str, Any]:
    imported = _Imported(store)
    with _archive(bundle, MAX_MANIFEST_BYTES + HEADER_ROOM) as (tar, budget):
        manifest = _read_manifest(tar, store.study)
        _check_origin(manifest, store, imported)
        free = shutil.disk_usage(store.root).free
        if manifest["total_bytes"] > free:
            raise _Refused(f"its {manifest['total_bytes'] / 1e6:.0f} MB do not fit in the "
                           f"{free / 1e6:.0f} MB free under {store.root}")
        staging.mkdir()
        records = _unpack(tar, budget, manifest, staging, store.study)
    listed = manifest["files"]
    skipped = []
    for record_id, record in sorted(records.items()):
        known = imported.runs.get(record.run_id)
        if known is None:
            continue
        if known[1] != listed[f"records/{record_id}.json"]["sha256"]:
            raise _refuse(bundle, f"run {record_id} of origin {record.origin.id} was imported before (in "
                                  f"{known[0]}) with other content: one of the two was edited")
        skipped.append(record_id)
        (staging / "records" / f"{record_id}.json").unlink()
        shutil.rmtree(staging / "runs" / record_id, ignore_errors=True)
    new = len(records) - len(skipped)
    bundle_id = f"{manifest['origin']['id'][:12]}-{hashlib.sha256(manifest['signature'].encode()).hexdigest()[:12]}"
    final = store.imported_dir / bundle_id
    if new == 0:
        return {"bundle_id": bundle_id, "records": 0, "skipped": len(skipped), "already": True,
                "path": store.imported_dir / imported.runs[next(iter(records.values())).run_id][0]}
    write_json(staging / "bundle.json", {"manifest": manifest, "source": str(bundle), "imported": now_iso(),
                                         "skipped": skipped})
    store.imported_dir.mkdir(exist_ok=True)
    staging.rename(final)  # the one step that makes the runs visible
    return {"bundle_id": bundle_id, "records": new, "skipped": len(skipped), "already": False, "path": final}
