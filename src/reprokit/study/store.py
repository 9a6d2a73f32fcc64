"""The results store of a study: one record per run, written once, never rewritten.

Layout (default root: ``<CK local repo>/study-results/<study>``, or ``--store=DIR``)::

    origin.json                 who this store belongs to (a random id and the host), made once
    sweeps/<sweep>.json         a sweep's plan: target, matrix, run settings, the ck command's options
    records/<record>.json       one run: its configuration, unified result and provenance
    runs/<record>/attempt-N/    the run folder ck used for attempt N (logs, p3-run.json, p3-result.json)
    imported/<bundle>/          bundles imported from other evaluators: bundle.json, records/, runs/

Records are created with a hard link from a fully written temporary file, so
a reader sees a whole record or none, and an existing record is never
replaced (os.link refuses an existing name). A run that was killed leaves an
attempt folder without a record; resuming runs it again in a new attempt
folder, so the logs of the killed attempt stay too.
"""
from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

from reprokit.errors import UserError

RECORD_FORMAT = "reprokit-study-run/1"
SWEEP_FORMAT = "reprokit-study-sweep/1"


class AlreadyStored(Exception):
    """The name exists: the store never replaces what it holds."""


def write_once(path: Path, data: object) -> None:
    """Create ``path`` with ``data`` as JSON, atomically, or raise AlreadyStored if it exists.

    Unlike plan.write_json (atomic replace), this never overwrites: records are immutable.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x") as handle:
            handle.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise AlreadyStored(str(path)) from None
        _fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {what} {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{what} {path} is not a JSON object")
    return data


def _json_files(folder: Path) -> list[Path]:
    # Names starting with "." are temporary files of a writer that has not finished (or was killed).
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")) if folder.is_dir() else []


@dataclass(frozen=True)
class Store:
    root: Path
    study: str

    @property
    def records_dir(self) -> Path:
        return self.root / "records"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def sweeps_dir(self) -> Path:
        return self.root / "sweeps"

    @property
    def imported_dir(self) -> Path:
        return self.root / "imported"

    def origin(self) -> dict:
        """This store's identity, created on first use; imported records keep their own."""
        path = self.root / "origin.json"
        if not path.exists():
            try:
                write_once(path, {"id": uuid.uuid4().hex, "host": socket.gethostname(), "study": self.study})
            except AlreadyStored:
                pass  # another process made it first: use theirs
        origin = read_json(path, "the store's origin")
        if origin.get("study") != self.study:
            raise UserError(f"{self.root} holds results of study {origin.get('study')!r}, not {self.study!r}; "
                            f"choose another --store")
        return origin

    # records
    def record_path(self, record_id: str) -> Path:
        return self.records_dir / f"{record_id}.json"

    def has_record(self, record_id: str) -> bool:
        return self.record_path(record_id).exists()

    def put_record(self, record: dict) -> Path:
        path = self.record_path(record["record_id"])
        write_once(path, {"format": RECORD_FORMAT, **record})
        return path

    def local_records(self) -> list[dict]:
        return [read_json(p, "run record") for p in _json_files(self.records_dir)]

    def imported_records(self) -> list[dict]:
        records = []
        if self.imported_dir.is_dir():
            for bundle in sorted(d for d in self.imported_dir.iterdir() if d.is_dir() and not d.name.startswith(".")):
                for path in _json_files(bundle / "records"):
                    record = read_json(path, "imported run record")
                    record["imported_from"] = bundle.name
                    records.append(record)
        return records

    def all_records(self) -> list[dict]:
        return self.local_records() + self.imported_records()

    # run folders
    def new_attempt_dir(self, record_id: str) -> Path:
        """A fresh run folder for this record: earlier attempts (killed runs) keep theirs."""
        parent = self.runs_dir / record_id
        parent.mkdir(parents=True, exist_ok=True)
        n = 1
        while True:
            candidate = parent / f"attempt-{n}"
            try:
                candidate.mkdir()
                return candidate
            except FileExistsError:
                n += 1

    # sweeps
    def new_sweep(self, sweep_id: str, plan: dict) -> None:
        write_once(self.sweeps_dir / f"{sweep_id}.json", {"format": SWEEP_FORMAT, "sweep_id": sweep_id, **plan})

    def sweeps(self) -> list[dict]:
        return sorted((read_json(p, "sweep plan") for p in _json_files(self.sweeps_dir)),
                      key=lambda s: (s.get("created", ""), s["sweep_id"]))

    def sweep(self, sweep_id: str) -> dict:
        path = self.sweeps_dir / f"{sweep_id}.json"
        if not path.exists():
            known = ", ".join(s["sweep_id"] for s in self.sweeps()) or "none"
            raise UserError(f"there is no sweep {sweep_id!r} in {self.root} (sweeps: {known})")
        return read_json(path, "sweep plan")
