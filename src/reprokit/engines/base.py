"""What an engine is: the protocol every registered engine follows, the typed values it gives and takes, and the
engines by name (``@register_engine(kind)`` on an engine's class, ``get_engine(kind)``, ``engines()``).

An engine is one way of running a variant: stock MXNet 1.9.1
with program/p3's scripts (its P3 switched on by DMLC_PS_VAN_TYPE=p3), or one
of the authors' 2018 builds with their own scripts. It knows

- which variants it runs (``variants``) and which side of the ENGINE knob it is (``side``);
- how a CK env entry registers it (``env_tags``, ``installed_from_env``);
- what makes a variant in it: every role's environment (``role_env``), the variables that switch its mechanism
  (``switches``) and what program/p3's training script is told about it (``script_knobs``);
- the command every role of a run runs (``role_command``), from plain values of the run (``RunJob``);
- which optional result fields its runs report (``reports``).

``InstalledEngine`` is one installed engine, as the selection, the run
specification (``p3-run.json``'s ``engine``) and the result see it.

Adding an engine is one module holding its class under ``@register_engine``,
plus that module's name in ENGINE_MODULES (imported the first time an engine is
asked for, as ReFrame's scheduler backends are). The registry lives here, beside
the protocol, because an install names its engine (``InstalledEngine.engine``).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, ClassVar, Protocol, TypeVar

from reprokit.data.registered import EnvEntry
from reprokit.vocabulary import PsVan, Variant

# The ENGINE knob's sides: stock MXNet with our scripts, the authors' builds with theirs.
EMBEDDED, ARTIFACT = "embedded", "artifact"


class EngineKind(StrEnum):
    """Which build an installed engine is (the stored ``build`` of a run specification)."""
    STOCK = "stock"  # MXNet 1.9.1 from PyPI, with its own P3
    P3 = "p3"  # the authors' fork, P3 compiled in
    BASELINE = "baseline"  # the authors' unmodified MXNet build


@dataclass(frozen=True)
class InstalledEngine:
    """One installed engine a run may use, and the one it did use (stored as ``engine`` in ``p3-run.json``)."""
    name: str  # recorded in every result: mxnet-1.9.1-cpu, mxnet-1.9.1-cpu+sockeye-1.18.106, sysml19-p3@c647954
    python: str
    env_uid: str
    build: EngineKind = EngineKind.STOCK
    tree: str = ""  # the artifact's source tree; empty for stock MXNet
    cuda: bool = False
    # Higher is preferred among installs of the same build (version, install time); not stored with a run.
    rank: tuple[Any, ...] = field(default=(), compare=False)

    STORED: ClassVar[tuple[str, ...]] = ("name", "python", "env_uid", "build", "tree", "cuda")

    def __post_init__(self) -> None:
        object.__setattr__(self, "build", EngineKind(self.build))

    @property
    def engine(self) -> Engine:
        """The registered engine this install is of."""
        return get_engine(self.build)

    def named(self, name: str) -> InstalledEngine:
        return replace(self, name=name)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "python": self.python, "env_uid": self.env_uid, "build": self.build.value,
                "tree": self.tree, "cuda": self.cuda}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InstalledEngine:
        return cls(**{k: data[k] for k in cls.STORED if k in data})


@dataclass(frozen=True)
class P3Knobs:
    """P3's knobs as the run set them (P3_SLICE_SIZE, P3_PRIORITY, P3_WATER_MARK); an engine applies those it takes."""
    slice_size: int  # elements per slice; 0: no slicing
    priority: bool
    water_mark: int  # messages queued per connection before P3's priority queue holds them; 0: no limit

    # MXNet's P3 reads its slice bound as a C int, and the largest int stands for "no slicing" (engines.stock).
    MAX_SLICE_SIZE: ClassVar[int] = 2**31 - 2


@dataclass(frozen=True)
class SchedulerKnobs:
    """ByteScheduler's knobs as a bytescheduler run set them (BYTESCHEDULER_PARTITION, BYTESCHEDULER_CREDIT)."""
    partition: int  # parameters per partition
    credit: int  # parameters in flight


@dataclass(frozen=True)
class ScriptKnobs:
    """What program/p3's training script is told about the engine it runs in, for one variant."""
    ps_van: PsVan  # the van every role runs (role_van.py checks each role's)
    p3_priority: bool  # the Trainer's priorities: off only where the engine takes P3_PRIORITY and the run set it 0
    comm_probes: bool  # the engine probes can run (MXNet 1.9.1's engine call): an emulated run's p3-comm lines
    string_keys: bool  # the kvstore's keys are strings (train.py's StringKeys says why)


@dataclass(frozen=True)
class JobData:
    """What the run reads, as an engine needs it."""
    name: str  # the result's data field: imagenet, iwslt15, synthetic, ...
    args: list[str]  # program/p3's scripts' data arguments (--data-train FILE, --data-dir FOLDER)
    rec: str = ""  # the RecordIO train file, for the authors' train_imagenet.py


@dataclass(frozen=True)
class RunJob:
    """The run, in plain values: what an engine builds its roles' command from."""
    variant: Variant
    model: str  # cmd_key: resnet, inception-v3, vgg, vgg16, sockeye, ...
    batch_size: int
    image_shape: str  # "" for translation
    num_epochs: int
    num_batches: int
    disp_batches: int
    output_file: str  # sockeye: worker 0's model folder; "": in the role's folder
    worker_hosts: list[str]  # each worker's host, in rank order
    data: JobData
    script: str  # program/p3's training script for the model
    script_args: list[str]  # its arguments for this run
    p3: P3Knobs  # P3's knobs as the run set them
    emulated: bool = False  # emulated compute: every engine runs ``script`` (program/p3's train.py) with ``script_args``
    scheduler: SchedulerKnobs | None = None  # ByteScheduler's knobs: a bytescheduler run's only


@dataclass(frozen=True)
class RoleCommand:
    """What every role of a run runs, and how the run ends when the roles linger after training."""
    command: list[str]  # every role's
    files: list[str] = field(default_factory=list)  # copied into each role's working folder first (core.shipping)
    extra_env: dict[str, str] = field(default_factory=dict)
    role_args: dict[str, list[str]] = field(default_factory=dict)  # "worker#k" -> appended for that worker only
    finish_pattern: str = ""  # what a worker logs when its training is over; "": the roles exit by themselves
    finish_grace_s: float | None = None  # None: the launcher's default grace after every worker logged it
    finish_note: str = ""  # why roles may linger, for the warning that says they were ended
    data: str = ""  # what the run reads, for the result, when not the data chosen for it


@dataclass(frozen=True)
class Reports:
    """The optional result fields an engine's runs report."""
    p3_knobs: bool = False  # p3_slice_size, p3_priority, p3_water_mark (on a p3 run): the knobs the run set
    ps_van: bool = False  # ps_van: every role logged the ps-lite van it ran (a mixed run fails)
    comm_probes: bool = False  # each worker's p3-comm line and trace: comm_*, overlap, mechanism, timelines

    FIELDS: ClassVar[dict[str, tuple[str, ...]]] = {
        "p3_knobs": ("p3_slice_size", "p3_priority", "p3_water_mark"),
        "ps_van": ("ps_van",),
        "comm_probes": ("comm_wait_s_per_iter", "overlap", "comm_s_per_iter", "compute_s_per_iter",
                        "comm_per_worker", "mechanism", "timelines"),
    }

    def field_names(self) -> list[str]:
        """The result fields these reports may fill."""
        return [name for f in fields(self) if getattr(self, f.name) for name in self.FIELDS[f.name]]


class Engine(Protocol):
    """One registered engine (``@register_engine(kind)``)."""
    kind: EngineKind
    side: str  # EMBEDDED or ARTIFACT: which value of the ENGINE knob chooses it
    # The environment variables that switch its mechanism (the van, P3's slicing, where the optimizer runs). A role
    # gets them from its run's plan only: inherited from a launching shell they would turn one variant into another.
    switches: tuple[str, ...]
    busy_waits: bool  # emulated compute may spin on its engine thread (MXEnginePushSync): COMPUTE_WAIT=busy
    variants: tuple[Variant, ...]  # the variants it runs
    reports: Reports
    env_tags: str  # the CK env entries that register it
    install_hint: str  # the command that installs it

    def installed_from_env(self, entry: EnvEntry) -> InstalledEngine | None:
        """The install a CK env entry registers, or None (another engine's entry, or an install since removed)."""
        ...

    def for_run(self, installed: InstalledEngine, image_model: bool, variant: Variant) -> InstalledEngine:
        """The engine as a run of an image model (or Sockeye) and ``variant`` records it, checked for what the run
        needs of it (Sockeye, ByteScheduler)."""
        ...

    def role_env(self, variant: Variant, p3: P3Knobs, scheduler: SchedulerKnobs | None = None) -> dict[str, str]:
        """What every role's environment gets to run ``variant`` (scheduler, servers and workers alike)."""
        ...

    def script_knobs(self, variant: Variant, p3: P3Knobs) -> ScriptKnobs:
        """What program/p3's training script is told about this engine for ``variant``."""
        ...

    def role_command(self, installed: InstalledEngine, job: RunJob) -> RoleCommand:
        """What every role of ``job`` runs."""
        ...


ENGINE_MODULES = (
    "reprokit.engines.stock",  # stock MXNet 1.9.1, with its P3
    "reprokit.engines.artifact.engine",  # the authors' P3 fork and their baseline build
)
_ENGINES: dict[EngineKind, Engine] = {}
E = TypeVar("E", bound=Engine)


def register_engine(kind: EngineKind | str) -> Callable[[type[E]], type[E]]:
    """Class decorator: registers one instance of the engine class under ``kind``."""
    engine_kind = EngineKind(kind)

    def register(cls: type[E]) -> type[E]:
        if engine_kind in _ENGINES:
            raise ValueError(f"an engine is already registered as {engine_kind.value!r}")
        cls.kind = engine_kind
        _ENGINES[engine_kind] = cls()
        return cls

    return register


def _load() -> None:
    for module in ENGINE_MODULES:
        importlib.import_module(module)


def get_engine(kind: EngineKind | str) -> Engine:
    """The engine registered as ``kind`` (stock, p3, baseline)."""
    _load()
    try:
        return _ENGINES[EngineKind(kind)]
    except (KeyError, ValueError):
        raise KeyError(f"no engine is registered as {str(kind)!r}; registered: "
                       f"{', '.join(k.value for k in _ENGINES)}") from None


def engines() -> list[Engine]:
    """Every registered engine, in EngineKind's order (stock, then the authors' P3 fork and baseline build)."""
    _load()
    return [_ENGINES[kind] for kind in EngineKind if kind in _ENGINES]


def engines_on(side: str = "") -> list[Engine]:
    """The engines one value of the ENGINE knob chooses (embedded, artifact), in registration order; all for ""."""
    return [e for e in engines() if not side or e.side == side]


def engine_switches() -> tuple[str, ...]:
    """Every registered engine's switches (``Engine.switches``), each once: what no role inherits from a shell."""
    return tuple(dict.fromkeys(name for engine in engines() for name in engine.switches))


def builds(side: str) -> tuple[str, ...]:
    """The stored kinds of the engines on one side of the ENGINE knob (artifact: p3, baseline)."""
    return tuple(e.kind.value for e in engines() if e.side == side)
