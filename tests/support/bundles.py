"""Study bundles for the tests: a filled store to export, and a generator of hand-made (hostile) bundles.

``make_bundle`` writes a gzip'd tar member by member from raw headers, so a test can give any member any
type, name or declared size, put members in any order, sign the manifest with any key, or leave it unsigned.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reprokit.study.store import identity
from reprokit.study.store.bundle import BUNDLE_FORMAT, _signed_bytes
from reprokit.study.store.records import Provenance, Store
from support.study_data import records

STUDY = "sysml19-p3"


def filled_store(root: Path, host: str, values=((100.0, 101.0, 99.0), (126.0, 125.0, 127.0)),
                 bandwidth: str = "4gbit", sweep: str = "s") -> Store:
    """A store with one configuration's baseline and p3 runs (3 each), each with a run folder and a log."""
    store = Store(root, STUDY)
    origin = store.origin()
    for record in records("resnet", bandwidth, list(values[0]), list(values[1])):
        record_id = record.record_id.replace("--o-local", "").replace("s--", f"{sweep}--", 1)
        run = store.new_attempt_dir(record_id)
        (run / "logs").mkdir()
        (run / "logs" / "worker-0.log").write_text(f"Speed: 1 samples/sec from {host}\n")
        store.put_record(replace(record, record_id=record_id, sweep_id=sweep, origin=origin,
                                 run_folder=str(run.relative_to(root)),
                                 provenance=Provenance(repo_revision="abc", controller_host=host)))
    return store


@dataclass
class Member:
    """One tar member as written: ``size`` is what its header declares (default: len(data))."""
    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    size: int | None = None
    linkname: str = ""
    listed: bool = True  # in the manifest's files (with the real size and sha256 of data)


@dataclass
class Forgery:
    """A bundle's content before it is written: its manifest fields and members, and the key that signs."""
    origin: dict
    members: list[Member]
    key: Ed25519PrivateKey | None
    manifest: dict = field(default_factory=dict)  # fields that override the computed ones

    def record(self, record_id: str | None = None) -> dict:
        member = next(m for m in self.members if m.name.startswith("records/")
                      and (record_id is None or m.name == f"records/{record_id}.json"))
        return json.loads(member.data)

    def set_record(self, data: dict, record_id: str | None = None) -> None:
        member = next(m for m in self.members if m.name.startswith("records/")
                      and (record_id is None or m.name == f"records/{record_id}.json"))
        member.data = json.dumps(data, indent=2, sort_keys=True).encode()

    def claim_origin(self, origin: dict) -> None:
        """The bundle and every record in it claim ``origin``; records written back as export writes them."""
        self.origin = origin
        for member in self.members:
            if member.name.startswith("records/"):
                data = json.loads(member.data)
                data["origin"] = origin
                member.data = json.dumps(data, indent=2, sort_keys=True).encode() + b"\n"

    def build_manifest(self) -> dict:
        listed = [m for m in self.members if m.listed and m.type in (tarfile.REGTYPE, tarfile.AREGTYPE)]
        files = {m.name: {"sha256": hashlib.sha256(m.data).hexdigest(), "size": len(m.data)} for m in listed}
        manifest = {"format": BUNDLE_FORMAT, "study": STUDY, "origin": self.origin,
                    "public_key": identity.public_hex(self.key) if self.key else "0" * 64,
                    "created": "2026-01-01T00:00:00+0000", "nonce": "n1",
                    "records": sum(1 for n in files if n.startswith("records/")),
                    "left_out": {"timelines": 0, "bytes": 0}, "total_bytes": sum(f["size"] for f in files.values()),
                    "files": files}
        manifest.update(self.manifest)
        if self.key is not None and "signature" not in self.manifest:
            manifest["signature"] = identity.sign(self.key, _signed_bytes(manifest))
        return manifest

    def write(self, path: Path, manifest_first: bool = True) -> Path:
        manifest = Member("manifest.json", json.dumps(self.build_manifest(), indent=2, sort_keys=True).encode())
        members = [manifest, *self.members] if manifest_first else [*self.members, manifest]
        write_members(path, members)
        return path


def write_members(path: Path, members: Iterable[Member], tail: bytes = b"\0" * 1024) -> None:
    with gzip.open(path, "wb", compresslevel=1) as out:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type, info.linkname, info.mode, info.mtime = m.type, m.linkname, 0o644, 0
            info.size = len(m.data) if m.size is None else m.size
            out.write(info.tobuf(format=tarfile.PAX_FORMAT))
            if m.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
                out.write(m.data)
                out.write(b"\0" * (-len(m.data) % 512))
        out.write(tail)


def forgery_of(store: Store, key: Ed25519PrivateKey | None = None) -> Forgery:
    """The store's runs as a bundle would carry them; signed by ``key`` (default: a new evaluator's own key,
    with the origin id that key proves), so the content, not the signature, is what a test makes hostile."""
    key = key or Ed25519PrivateKey.generate()
    origin_id = identity.fingerprint(identity.public_hex(key))
    members = []
    for path in sorted(store.records_dir.glob("*.json")):
        data = json.loads(path.read_text())
        data["origin"] = {"id": origin_id, "host": "mallory", "study": STUDY}
        members.append(Member(f"records/{path.name}", json.dumps(data, indent=2, sort_keys=True).encode()))
    for path in sorted(p for p in store.runs_dir.rglob("*") if p.is_file()):
        members.append(Member(f"runs/{path.relative_to(store.runs_dir).as_posix()}", path.read_bytes()))
    return Forgery({"id": origin_id, "host": "mallory", "study": STUDY}, members, key)
