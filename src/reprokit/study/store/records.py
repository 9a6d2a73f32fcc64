"""The results store of a study: one record per run, written once, never rewritten.

Layout (default root: ``<CK local repo>/study-results/<study>``, or ``--store=DIR``)::

    origin.json                 who this store belongs to (its id and host), made once
    origin.key                  the store's signing key (identity.py): never exported
    sweeps/<sweep>.json         a sweep's plan: target, matrix, run settings, the ck command's options
    records/<record>.json       one run: its configuration, unified result and provenance
    runs/<record>/attempt-N/    the run folder ck used for attempt N (logs, p3-run.json, p3-result.json)
    imported/<bundle>/          bundles imported from other evaluators: bundle.json, records/, runs/

Records are created with a hard link from a fully written temporary file, so
a reader sees a whole record or none, and an existing record is never
replaced (os.link refuses an existing name). A run that was killed leaves an
attempt folder without a record; resuming runs it again in a new attempt
folder, so the logs of the killed attempt stay too.

The documents are typed: ``Origin``, ``Record`` (its ``RecordConfig``,
``StoredResult`` and ``Provenance``) and ``Sweep``, each with
``to_dict``/``from_dict`` for exactly the JSON on disk.
A record is checked against RECORD_SCHEMA before it becomes a ``Record``,
whether read from this store or from a bundle: identifiers are plain names,
numbers the analysis reads are finite and in range, text has no control
characters.

Which runs are this evaluator's own: those in ``records/``, which only
``ck reproduce`` writes (import writes under ``imported/`` only). A run is
known by its run id, its origin's id and its record id, which export and
re-export keep, so the same run imported twice is counted once.
"""
from __future__ import annotations

import json
import math
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reprokit.cluster.testbed import LINK_SHARING
from reprokit.core import schema as s
from reprokit.core.errors import UserError
from reprokit.core.jsonfile import read_json
from reprokit.core.outputs import create_once
from reprokit.core.paths import MB, check_room, disk_errors
from reprokit.core.values import shown, tc_rate_bps
from reprokit.emulation.profile import DILATION_RANGE, dilated_rate, dilation_of, emulates
from reprokit.engines.base import EMBEDDED
from reprokit.engines.choice import ENGINE_KINDS, engine_kind
from reprokit.run.folders import RUN_FOLDER_NEED_MB
from reprokit.run.result import Result
from reprokit.study.paper.planning import RunConfig, plan_runs
from reprokit.study.paper.rates import NATIVE
from reprokit.study.paper.target import Target
from reprokit.study.store import identity
from reprokit.study.store.sweep_plan import BandwidthChoice, Forecast
from reprokit.vocabulary import RunStatus

RECORD_FORMAT = "reprokit-study-run/1"
MAX_RECORD_BYTES = 4 << 20  # one run's record (a few KB; its texts are cut to fit the schema)
SWEEP_FORMAT = "reprokit-study-sweep/1"


def now_iso() -> str:
    """The time stamp of a sweep's or bundle's document: local time with its UTC offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def default_store(local_repo: str, study_name: str) -> Path:
    """A study's store in CK's local repository: <repo>/study-results/<study>."""
    return Path(local_repo) / "study-results" / study_name


def store_dir(given: str, local_repo: str, study_name: str) -> Path:
    """--store=DIR when given, else the default store."""
    return Path(given).expanduser().resolve() if given else default_store(local_repo, study_name)


def typed_result(data: Mapping[str, Any]) -> Result:
    """A unified result (p3-result.json, or a record's ``result``) as reprokit.run.result.Result: keys it does
    not know are left out, and one without run_success (RESULT_SCHEMA allows that) reads as not successful."""
    return Result.from_dict({"run_success": False, **data})


class AlreadyStored(Exception):
    """The name exists: the store never replaces what it holds."""


def write_once(path: Path, data: object) -> None:
    """Create ``path`` with ``data`` as JSON, atomically, or raise AlreadyStored if it exists.

    Unlike jsonfile.write_json (atomic replace), this never overwrites: records are immutable.
    """
    payload = (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
    check_room(path, len(payload), "the study store")
    with disk_errors("the study store", path):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not create_once(path, payload):
            raise AlreadyStored(str(path))
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _json_files(folder: Path) -> list[Path]:
    # Names starting with "." are temporary files of a writer that has not finished (or was killed).
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")) if folder.is_dir() else []


# --- the documents -------------------------------------------------------------------------------

def _check_format(data: Mapping[str, Any], expected: str, what: str) -> None:
    if data.get("format") != expected:
        raise UserError(f"{what} has format {shown(data.get('format'))}, not {expected}")


_T = TypeVar("_T")


def _parse(cls: type, data: Any, what: str, parse: Callable[[Mapping[str, Any]], _T]) -> _T:
    """``parse(data)``, with a missing key or a wrong type as one UserError naming ``what``."""
    if not isinstance(data, Mapping):
        raise UserError(f"{what} is not a JSON object")
    try:
        return parse(data)
    except KeyError as exc:
        raise UserError(f"{what} has no {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{what} is malformed ({cls.__name__}: {exc})") from None


# --- what a record may hold (checked before a Record is built from JSON) ---------------------------

NAME = s.Name()
BANDWIDTH = s.Where(s.Text(32), lambda v: v == NATIVE or tc_rate_bps(v) is not None, "a rate like 100mbit or 4gbit, or native")
ORIGIN_SCHEMA = s.Obj(required={"id": NAME, "host": s.Host(), "study": NAME})
TARGET_SCHEMA = s.Obj(
    required={"name": s.Name(allow_empty=True), "kind": s.OneOf(("embedded", "testbed", "cluster")),
              "hosts": s.ListOf(s.Host(), max_items=1024, min_items=1), "shaping": s.Bool()},
    optional={"link_capacity": s.Optional(BANDWIDTH), "testbed": s.Optional(NAME), "label": s.Text(200),
              "link_sharing": s.OneOf(LINK_SHARING), "tcp": s.Name()})
CONFIG_SCHEMA = s.Obj(required={"model": NAME, "variant": NAME, "bandwidth": BANDWIDTH,
                                "repetition": s.Int(1, 100_000), "profile": NAME, "target": TARGET_SCHEMA},
                      optional={"engine": s.OneOf(tuple(ENGINE_KINDS))})  # records before engines: none
_SECONDS = s.Optional(s.Number(0, 1e9))
# The unified result's keys the study reads, typed; any other key is bounded JSON (engines add their own).
RESULT_SCHEMA = s.Obj(optional={
    "status": s.OneOf(tuple(v.value for v in RunStatus)), "run_success": s.Bool(), "failure_reason": s.Optional(s.Text()),
    **{key: s.Optional(s.Text(200)) for key in ("model", "network", "profile", "variant", "engine", "data",
                                                "image_shape", "run_id")},
    **{key: s.Optional(s.Int(0, 10**9)) for key in ("batch_size", "num_epochs", "num_workers", "num_servers")},
    "wall_time_s": _SECONDS, "launch_time_s": _SECONDS, "comm_wait_s_per_iter": _SECONDS, "comm_s_per_iter": _SECONDS,
    "compute_s_per_iter": _SECONDS, "overlap": s.Optional(s.Number(-1e6, 1e6)),
    "throughput_samples_per_sec": s.Optional(s.Number(0, 1e9)), "params_in_sync": s.Optional(s.Bool()),
}, extra=s.Json())
# Provenance: what the report shows is text; the rest bounded JSON.
PROVENANCE_SCHEMA = s.Obj(optional={key: s.Optional(s.Text(300)) for key in (
    "repo_revision", "ck_version", "python_version", "engine", "engine_python_version", "mxnet_version",
    "controller_host")}, extra=s.Json())
RECORD_SCHEMA = s.Obj(required={
    "format": s.OneOf((RECORD_FORMAT,)), "record_id": s.Name(200), "study": NAME, "sweep_id": NAME,
    "origin": ORIGIN_SCHEMA, "config": CONFIG_SCHEMA, "status": s.OneOf((RunStatus.OK.value, RunStatus.FAILED.value)),
    "failure_reason": s.Optional(s.Text()), "result": s.Optional(RESULT_SCHEMA), "provenance": PROVENANCE_SCHEMA,
    "run_folder": s.Optional(s.Text(400)),
})


def _fit_text(value: Any, limit: int = s.Text.max_len) -> Any:
    """``value`` with control characters in its text shown escaped (as repr shows them), text longer than a
    Text field may hold cut (its end kept: a failure's cause is at the end of a log), no NaN or infinity."""
    if isinstance(value, str):
        value = s.CONTROL.sub(lambda m: repr(m.group())[1:-1], value)
        return value if len(value) <= limit else "..." + value[-(limit - 3):]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; the schema refuses it
    if isinstance(value, dict):
        return {k: _fit_text(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_fit_text(v, limit) for v in value]
    return value


def check_record(data: Any) -> None:
    """Raise schema.Invalid unless ``data`` is a record this study can hold (RECORD_SCHEMA, and its run folder
    is its own: ``runs/<record_id>/attempt-N``)."""
    RECORD_SCHEMA.check(data, "")
    overrides = data["provenance"].get("env_overrides")
    if isinstance(overrides, dict):
        try:
            dilation_of(overrides)  # the report groups emulated runs by it
        except UserError:
            raise s.Invalid("provenance.env_overrides.DILATION",
                            f"must be {DILATION_RANGE}, got {shown(overrides.get('DILATION'))}") from None
    folder = data["run_folder"]
    if folder is not None and not re.fullmatch(rf"runs/{re.escape(data['record_id'])}/attempt-[1-9][0-9]{{0,5}}",
                                               folder):
        raise s.Invalid("run_folder", f"must be runs/<record_id>/attempt-N, got {shown(folder)}")


@dataclass(frozen=True)
class Origin:
    """Whose store a record or sweep comes from: a random id made once per store, and its host."""
    id: str
    host: str
    study: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "host": self.host, "study": self.study}

    @classmethod
    def from_dict(cls, data: Any, what: str = "an origin") -> Origin:
        try:
            ORIGIN_SCHEMA.check(data, "")
        except s.Invalid as exc:
            raise UserError(f"{what} is invalid: {exc}") from None
        return cls(id=data["id"], host=data["host"], study=data["study"])


@dataclass(frozen=True)
class RecordConfig:
    """The configuration a stored run ran: the planned run (RunConfig), its profile and its target."""
    model: str
    variant: str
    bandwidth: str
    repetition: int  # 1-based
    profile: str
    target: Target
    engine: str = EMBEDDED  # embedded (stock MXNet, our scripts) or artifact (the authors' builds)

    @property
    def run(self) -> RunConfig:
        return RunConfig(self.model, self.variant, self.bandwidth, self.repetition, self.engine)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "variant": self.variant, "bandwidth": self.bandwidth,
                "repetition": self.repetition, "profile": self.profile, "target": self.target.to_dict(),
                "engine": self.engine}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], engine_name: object = None) -> RecordConfig:
        """``engine_name``: the engine the run's provenance names, the kind of a record stored before configs
        had one (a sweep then took the authors' build whenever one was registered); absent: embedded."""
        engine = str(data["engine"]) if "engine" in data else engine_kind(str(engine_name or ""))
        if engine not in ENGINE_KINDS:
            raise ValueError(f"engine {engine!r}")
        return cls(model=str(data["model"]), variant=str(data["variant"]), bandwidth=str(data["bandwidth"]),
                   repetition=int(data["repetition"]), profile=str(data["profile"]),
                   target=Target.from_dict(data["target"]), engine=engine)


@dataclass(frozen=True)
class StoredResult:
    """A run's unified result as its record keeps it: ``stored`` exactly as the run wrote it (to_dict gives it back;
    results of older versions lack keys, engines may add their own), read by the study as ``typed``."""
    stored: Mapping[str, Any]

    @cached_property
    def typed(self) -> Result:
        """The result as reprokit.run.result.Result (typed_result); read when first asked for."""
        return typed_result(self.stored)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.stored)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoredResult:
        return cls(dict(data))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _texts(value: Any) -> tuple[str, ...] | None:
    return tuple(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def _object(value: Any) -> Mapping[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def _objects(value: Any) -> tuple[Mapping[str, Any], ...] | None:
    if isinstance(value, list) and all(isinstance(v, Mapping) for v in value):
        return tuple(dict(v) for v in value)
    return None


# Provenance's fields read from what is stored: a value of another type reads as None.
_PROVENANCE_READERS: dict[str, Callable[[Any], Any]] = {
    "repo_revision": _text, "repo_dirty": _flag, "ck_version": _text, "python_version": _text,
    "controller_host": _text, "platform": _text,
    "engine": _text, "mxnet_version": _text, "engine_env_uid": _text, "engine_python": _text,
    "engine_python_version": _text, "hosts": _texts, "role_plan": _objects, "env_overrides": _object,
    "started_at": _text, "ended_at": _text, "duration_s": _number, "command": _texts, "command_line": _text,
    "ck_exit_code": _whole,
    "bandwidth": _text, "bandwidth_shaped": _flag, "target": _object, "links_shaped_to": _text,
}
# Stored only when they have a value (every other field is stored, null included).
_PROVENANCE_WHEN_SET = ("engine_python_version", "links_shaped_to")


@dataclass(frozen=True)
class Provenance:
    """Where and how a stored run ran, as the sweep builds it (study.sweep.provenance): what does not change between
    the runs of a sweep (``environment``), the run's own part (``run_provenance``: its specification, command and
    times), then the sweep's bandwidth, target and link rate for it.

    Read back from a record (from_dict), each field is typed from what is stored (a value stored with another type
    than the field's reads as None), and ``to_dict`` gives the stored object back as it was read: keys of other
    versions, nulls and absent keys kept, so that a record read and written again keeps its bytes (unless a field
    was changed since: then the fields, with the keys only other versions know)."""
    # the sweep's environment: this repository, the framework, the host
    repo_revision: str | None = None
    repo_dirty: bool | None = None  # whether the checkout had uncommitted changes
    ck_version: str | None = None
    python_version: str | None = None
    controller_host: str | None = None
    platform: str | None = None
    # the run: its engine and role plan (from its own specification), command and times
    engine: str | None = None  # the engine's name as the run's specification gave it (mxnet-1.9.1-cpu, sysml19-p3@c6479)
    mxnet_version: str | None = None
    engine_env_uid: str | None = None
    engine_python: str | None = None
    engine_python_version: str | None = None
    hosts: tuple[str, ...] | None = None
    role_plan: tuple[Mapping[str, Any], ...] | None = None  # {kind, index, host} per role
    env_overrides: Mapping[str, Any] | None = None  # the run settings its sweep gave (COMPUTE, DILATION, ...)
    started_at: str | None = None  # local time with its UTC offset, then the epoch seconds in parentheses
    ended_at: str | None = None  # as started_at, when the run's ``ck run`` returned
    duration_s: float | None = None  # how long the run's ``ck run`` took
    command: tuple[str, ...] | None = None
    command_line: str | None = None
    ck_exit_code: int | None = None
    # the sweep's, for this run
    bandwidth: str | None = None
    bandwidth_shaped: bool | None = None
    target: Mapping[str, Any] | None = None  # the target as the record's config stores it
    links_shaped_to: str | None = None  # the rate an emulated run's links were shaped to (its bandwidth / k)
    read_from: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)  # what from_dict was given

    def to_dict(self) -> dict[str, Any]:
        if self.read_from is not None and self == Provenance.from_dict(self.read_from):
            return dict(self.read_from)
        data: dict[str, Any] = {}
        for key in _PROVENANCE_READERS:
            value = getattr(self, key)
            if value is None and key in _PROVENANCE_WHEN_SET:
                continue
            if isinstance(value, tuple):
                value = [dict(v) if isinstance(v, Mapping) else v for v in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            data[key] = value
        others = {k: v for k, v in (self.read_from or {}).items() if k not in _PROVENANCE_READERS}
        return {**others, **data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        stored = dict(data)
        return cls(**{key: read(stored.get(key)) for key, read in _PROVENANCE_READERS.items()}, read_from=stored)


@dataclass(frozen=True)
class Record:
    """One run of a sweep, as stored in ``records/<record_id>.json`` (format RECORD_FORMAT)."""
    record_id: str
    study: str
    sweep_id: str
    origin: Origin
    config: RecordConfig
    status: RunStatus  # ok or failed: an interrupted run is not stored
    failure_reason: str | None
    result: StoredResult | None  # the run's unified result (p3-result.json); None if it wrote none
    provenance: Provenance = field(default_factory=Provenance)
    run_folder: str | None = None  # the attempt folder, relative to the store's root
    imported_from: str | None = None  # the bundle it was imported with; not stored: the folder it is read from

    def __post_init__(self) -> None:
        # Each also given as what is stored: the status's string, the result's JSON object.
        object.__setattr__(self, "status", RunStatus(self.status))
        if isinstance(self.result, Mapping):
            object.__setattr__(self, "result", StoredResult.from_dict(self.result))

    @property
    def ok(self) -> bool:
        return self.status.ok

    @property
    def emulated(self) -> bool:
        """An emulated-compute run (--emulate): its sweep set COMPUTE=emulated, whatever the run wrote."""
        return emulates(self._env_overrides)

    @property
    def dilation(self) -> float:
        """k of an emulated run (its sweep's DILATION); 1 for a measured one."""
        return dilation_of(self._env_overrides)

    @property
    def gpu(self) -> str:
        """The compute an emulated run waited (its sweep's COMPUTE_PROFILE: a GPU of gpus.json, or a profile file);
        "" for a measured run."""
        return str(self._env_overrides.get("COMPUTE_PROFILE", "")) if self.emulated else ""

    @property
    def _env_overrides(self) -> Mapping[str, Any]:
        return self.provenance.env_overrides or {}

    @property
    def run_result(self) -> Result | None:
        """The unified result typed (StoredResult.typed); None if the run wrote none."""
        return None if self.result is None else self.result.typed

    @property
    def run_id(self) -> str:
        """Which run this is, wherever it was read from: export and re-export keep it."""
        return f"{self.origin.id}/{self.record_id}"

    def to_dict(self) -> dict[str, Any]:
        """The stored document (without imported_from, which is where it was read from)."""
        return {"format": RECORD_FORMAT, "record_id": self.record_id, "study": self.study, "sweep_id": self.sweep_id,
                "origin": self.origin.to_dict(), "config": self.config.to_dict(), "status": self.status.value,
                "failure_reason": self.failure_reason, "result": None if self.result is None else self.result.to_dict(),
                "provenance": self.provenance.to_dict(), "run_folder": self.run_folder}

    @classmethod
    def from_dict(cls, data: Any, what: str = "a run record", imported_from: str | None = None) -> Record:
        """The record in ``data``, checked in full (check_record); UserError naming ``what`` and the field."""
        if isinstance(data, Mapping) and "format" in data:
            _check_format(data, RECORD_FORMAT, what)
        try:
            check_record(data)
        except s.Invalid as exc:
            raise UserError(f"{what} is invalid: {exc}") from None
        d = data
        provenance = Provenance.from_dict(d["provenance"])
        return cls(record_id=d["record_id"], study=d["study"], sweep_id=d["sweep_id"],
                   origin=Origin.from_dict(d["origin"], f"{what}: its origin"),
                   config=RecordConfig.from_dict(d["config"], provenance.engine), status=RunStatus(d["status"]),
                   failure_reason=d["failure_reason"],
                   result=None if d["result"] is None else StoredResult.from_dict(d["result"]),
                   provenance=provenance, run_folder=d["run_folder"], imported_from=imported_from)


@dataclass(frozen=True)
class Sweep:
    """A sweep's plan, as stored in ``sweeps/<sweep_id>.json`` (format SWEEP_FORMAT)."""
    sweep_id: str
    study: str
    created: str
    target: Target
    models: tuple[str, ...]
    variants: tuple[str, ...]
    bandwidths: tuple[str, ...]
    repetitions: int
    profile: str
    env: dict[str, str]  # run settings of every run (matrix env, then the user's --env.*)
    quick: bool
    options: dict[str, Any]  # the options given to the ck command, as given
    origin: Origin
    restore_rate: str | None  # the rate a testbed's links had before the sweep, restored after it
    choices: tuple[BandwidthChoice, ...] = ()  # per model: bandwidths chosen from a baseline probe (choice.py)
    timeline_repetition: int | None = None  # its runs record timelines (TIMELINE=1)
    engines: tuple[str, ...] = (EMBEDDED,)  # engine kinds every configuration runs on (sweeps before: embedded)
    why: str = ""  # why the matrix is this size (the study entry's, e.g. the quick study's time budget)
    forecast: Forecast | None = None  # what its runs were expected to take before the first one (forecast.py)
    # (model, bandwidth, variant) when the sweep runs only these of its combinations (an emulated sweep: each
    # claim's variant and baseline at the claim's bandwidth); empty: every combination
    only: tuple[tuple[str, str, str], ...] = ()

    @property
    def dilation(self) -> float:
        """k of an emulated sweep (--emulate): each link is shaped to its bandwidth divided by k; 1 otherwise."""
        return dilation_of(self.env)

    def link_rate(self, bandwidth: str) -> str:
        """The tc rate the links get for a run at ``bandwidth``."""
        return bandwidth if self.dilation == 1.0 else dilated_rate(bandwidth, self.dilation)

    def model_bandwidths(self, model: str) -> tuple[str, ...]:
        """The bandwidths a model runs at: its probe's choice, or the sweep's."""
        return next((c.bandwidths for c in self.choices if c.model == model), self.bandwidths)

    def runs(self) -> list[RunConfig]:
        """Every run of the sweep, interleaved (planning.plan_runs)."""
        return plan_runs(self.models, self.variants, self.bandwidths, self.repetitions,
                         per_model={c.model: c.bandwidths for c in self.choices}, engines=self.engines, only=self.only)

    def to_dict(self) -> dict[str, Any]:
        return {"format": SWEEP_FORMAT, "sweep_id": self.sweep_id, "study": self.study, "created": self.created,
                "target": self.target.to_dict(), "models": list(self.models), "variants": list(self.variants),
                "bandwidths": list(self.bandwidths), "repetitions": self.repetitions, "profile": self.profile,
                "env": dict(self.env), "quick": self.quick, "options": dict(self.options),
                "origin": self.origin.to_dict(), "restore_rate": self.restore_rate,
                "choices": [c.to_dict() for c in self.choices], "timeline_repetition": self.timeline_repetition,
                "engines": list(self.engines), "why": self.why,
                "forecast": None if self.forecast is None else self.forecast.to_dict(),
                **({"only": [list(c) for c in self.only]} if self.only else {})}

    @classmethod
    def from_dict(cls, data: Any, what: str = "a sweep plan") -> Sweep:
        def parse(d: Mapping[str, Any]) -> Sweep:
            _check_format(d, SWEEP_FORMAT, what)
            return cls(sweep_id=str(d["sweep_id"]), study=str(d["study"]), created=str(d["created"]),
                       target=Target.from_dict(d["target"]), models=tuple(d["models"]), variants=tuple(d["variants"]),
                       bandwidths=tuple(d["bandwidths"]), repetitions=int(d["repetitions"]), profile=str(d["profile"]),
                       env={str(k): str(v) for k, v in d["env"].items()}, quick=bool(d["quick"]),
                       options=dict(d["options"]), origin=Origin.from_dict(d["origin"], f"{what}: its origin"),
                       restore_rate=d["restore_rate"],
                       choices=tuple(BandwidthChoice.from_dict(c) for c in d.get("choices", [])),
                       timeline_repetition=d.get("timeline_repetition"),
                       engines=_engines(d.get("engines", [EMBEDDED])), why=str(d.get("why", "")),
                       forecast=None if d.get("forecast") is None else Forecast.from_dict(d["forecast"]),
                       only=tuple((str(m), str(b), str(v)) for m, b, v in d.get("only", [])))

        return _parse(cls, data, what, parse)


def _engines(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or any(e not in ENGINE_KINDS for e in raw):
        raise ValueError(f"engines {raw!r}")
    return tuple(raw)


# --- the store -----------------------------------------------------------------------------------

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

    def signing_key(self) -> Ed25519PrivateKey:
        """The store's Ed25519 key (identity.py), made on first use; never exported."""
        return identity.load_or_create_key(self.root / identity.KEY_FILE)

    def public_key(self) -> str | None:
        """The store's public key, or None when it has no key yet (made before keys, never exported since)."""
        return identity.public_hex(self.signing_key()) if (self.root / identity.KEY_FILE).exists() else None

    def origin(self) -> Origin:
        """This store's identity, created on first use (its id: the fingerprint of its signing key; a store
        made before keys keeps its random id); imported records keep their own."""
        path = self.root / "origin.json"
        if not path.exists():
            try:
                own_id = identity.fingerprint(identity.public_hex(self.signing_key()))
                write_once(path, Origin(own_id, socket.gethostname(), self.study).to_dict())
            except AlreadyStored:
                pass  # another process made it first: use theirs
        raw = read_json(path, "the store's origin")
        if raw.get("study") != self.study:
            raise UserError(f"{self.root} holds results of study {shown(raw.get('study'))}, not {self.study!r}; "
                            f"choose another --store")
        return Origin.from_dict(raw, f"the store's origin {path}")

    # records
    def record_path(self, record_id: str) -> Path:
        return self.records_dir / f"{record_id}.json"

    def has_record(self, record_id: str) -> bool:
        return self.record_path(record_id).exists()

    def put_record(self, record: Record) -> Path:
        """Store a run's record, made fit for the schema every later read checks (a run's own text, such as a
        log tail with terminal escapes or a long failure, must not make the store unreadable); refused here,
        not at every later read, if it still does not fit."""
        path = self.record_path(record.record_id)
        data = _fit_text(record.to_dict())
        try:
            check_record(data)
        except s.Invalid as exc:
            raise UserError(f"run record {record.record_id} cannot be stored: {exc}") from None
        write_once(path, data)
        return path

    @staticmethod
    def read_record(path: Path, imported_from: str | None = None) -> Record:
        what = "imported run record" if imported_from else "run record"
        return Record.from_dict(read_json(path, f"a {what}", MAX_RECORD_BYTES), f"{what} {path}",
                                imported_from=imported_from)

    def local_record_files(self) -> list[tuple[Path, Record]]:
        """Every local record with its file; a record whose id is not its file's name is refused."""
        out = []
        for path in _json_files(self.records_dir):
            record = self.read_record(path)
            if record.record_id != path.stem:
                raise UserError(f"{path} holds record {record.record_id!r}, not {path.stem!r}: the store was edited "
                                f"by hand; restore the file or remove it")
            out.append((path, record))
        return out

    def local_records(self) -> list[Record]:
        return [record for _, record in self.local_record_files()]

    def imported_record_files(self, left_out: list[str] | None = None) -> list[tuple[Path, Record]]:
        """Every imported record with its file. A bundle with an unreadable record (imported by a version that
        did not check records) raises, or, given ``left_out``, is left out whole and named there with the fix."""
        out: list[tuple[Path, Record]] = []
        bundles = sorted(d for d in self.imported_dir.iterdir() if d.is_dir() and not d.name.startswith(".")) \
            if self.imported_dir.is_dir() else []
        for bundle in bundles:
            try:
                out.extend((p, self.read_record(p, imported_from=bundle.name)) for p in _json_files(bundle / "records"))
            except UserError as exc:
                if left_out is None:
                    raise
                out = [(p, r) for p, r in out if r.imported_from != bundle.name]
                left_out.append(f"{exc}; its bundle is left out: remove {bundle} and import the bundle again")
        return out

    def imported_records(self, left_out: list[str] | None = None) -> list[Record]:
        return [record for _, record in self.imported_record_files(left_out)]

    def all_records(self, left_out: list[str] | None = None) -> list[Record]:
        """Local records, then imported ones (``left_out``: see imported_record_files); a run already read (its
        run id) is counted once."""
        seen: set[str] = set()
        records = []
        for record in self.local_records() + self.imported_records(left_out):
            if record.run_id not in seen:
                seen.add(record.run_id)
                records.append(record)
        return records

    # run folders
    def new_attempt_dir(self, record_id: str) -> Path:
        """A fresh run folder for this record: earlier attempts (killed runs) keep theirs."""
        parent = self.runs_dir / record_id
        check_room(parent / "attempt-N", RUN_FOLDER_NEED_MB * MB, "the study store")
        with disk_errors("the study store", parent):
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
    def sweep_path(self, sweep_id: str) -> Path:
        return self.sweeps_dir / f"{sweep_id}.json"

    def new_sweep(self, sweep: Sweep) -> None:
        write_once(self.sweep_path(sweep.sweep_id), sweep.to_dict())

    def _read_sweep(self, path: Path) -> Sweep:
        return Sweep.from_dict(read_json(path, "a sweep plan"), f"sweep plan {path}")

    def sweeps(self) -> list[Sweep]:
        return sorted((self._read_sweep(p) for p in _json_files(self.sweeps_dir)), key=lambda s: (s.created, s.sweep_id))

    def sweep(self, sweep_id: str) -> Sweep:
        path = self.sweep_path(sweep_id)
        if not path.exists():
            known = ", ".join(s.sweep_id for s in self.sweeps()) or "none"
            raise UserError(f"there is no sweep {shown(sweep_id)} in {self.root} (sweeps: {known})")
        return self._read_sweep(path)
