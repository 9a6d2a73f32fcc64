"""Run settings of program:p3: models, profiles and validation of user input.

The paper's defaults live in the program entry's ``run_vars``; a profile fills
in what the user left empty. The ``smoke`` profile makes a 2-core laptop finish
in about a minute (small images, a bounded number of batches); ``paper``
restores the paper's settings (224x224 or 299x299 images, one full epoch).
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from reprokit.cluster.hosts import MAX_ROLES
from reprokit.cluster.testbed import slurm_testbed_of, testbed_of
from reprokit.core.errors import UserError
from reprokit.core.paths import MB, check_room
from reprokit.core.values import SHOWN_PATH_CHARACTERS, shown, whole_number
from reprokit.emulation.profile import (
    EMULATED,
    PROFILE_FILE,
    REAL,
    SLEEP,
    ComputeProfile,
    check_compute,
    check_compute_wait,
    check_dilation,
    check_name,
    named_profiles,
    resolve_profile,
)
from reprokit.engines.base import Engine, P3Knobs, SchedulerKnobs
from reprokit.engines.bytescheduler import ByteSchedulerVariant
from reprokit.vocabulary import DEFAULT_VARIANT, VARIANTS, Variant

IMAGE_SCRIPT = "train.py"  # program/p3's image-classification training script
TRANSLATION_SCRIPT = "sockeye_run.py"  # program/p3's launcher of Sockeye's own trainer
# train.py's network for an emulated run of a model it does not build (Sockeye): Gluon parameters holding exactly the
# emulated-compute profile's arrays, in the profile's (the model's key) order.
PROFILE_NETWORK = "profile"
PAPER_BATCH_SIZE = 32  # the original workflow's BATCH_SIZE


@dataclass(frozen=True)
class Model:
    cmd_key: str
    network: str  # what the training script builds: a gluon model zoo name, or sockeye's architecture
    script: str  # the training script in program/p3 that every role runs
    paper_image_shape: str = ""  # C,H,W as in the paper and the original workflow; "" for text
    smoke_image_shape: str = ""
    min_image_side: int = 1  # smaller inputs make the model fail deep inside MXNet
    params_mb: int = 0  # its trainable parameters as SAVE_PARAMS writes them (float32, paper shape), rounded up
    # The smoke profile's per-model fill-ins, for models too heavy for its generic values.
    smoke_batch_size: int = PAPER_BATCH_SIZE
    smoke_num_batches: int | None = None
    smoke_disp_batches: int | None = None
    title: str = ""  # the model's name in a page or a figure (ResNet-50)

    @property
    def is_image(self) -> bool:
        return self.script == IMAGE_SCRIPT


# Sockeye's architecture as the original workflow ran it: an LSTM encoder-decoder with MLP attention.
SOCKEYE_NETWORK = "rnn-lstm-2:2-h512-e512:512-mlp512"

MODELS: dict[str, Model] = {
    "resnet": Model("resnet", "resnet50_v1", IMAGE_SCRIPT, "3,224,224", "3,32,32", params_mb=100, title="ResNet-50"),
    # Inception-v3 needs 299x299 (its last pooling is 8x8); the smoke profile keeps that shape and
    # makes the run affordable with a smaller batch and fewer, more frequent reports instead.
    "inception-v3": Model("inception-v3", "inceptionv3", IMAGE_SCRIPT, "3,299,299", "3,299,299",
                          min_image_side=299, params_mb=100, smoke_batch_size=8, smoke_num_batches=7, smoke_disp_batches=2,
                          title="Inception-v3"),
    "vgg": Model("vgg", "vgg19", IMAGE_SCRIPT, "3,224,224", "3,32,32", params_mb=550, title="VGG-19"),  # VGG-19, as P3's paper
    # VGG-16, as ByteScheduler's paper (138,357,544 parameters at 224x224: 528 MB)
    "vgg16": Model("vgg16", "vgg16", IMAGE_SCRIPT, "3,224,224", "3,32,32", params_mb=530, title="VGG-16"),
    # Sockeye's LSTM is slow on a CPU: the smoke profile takes smaller batches and reports every 5.
    "sockeye": Model("sockeye", SOCKEYE_NETWORK, TRANSLATION_SCRIPT, params_mb=200,
                     smoke_batch_size=16, smoke_num_batches=16, smoke_disp_batches=5, title="Sockeye"),
}


@dataclass(frozen=True)
class Profile:
    name: str
    num_batches: int  # batches per epoch; 0 = a full ImageNet-1k epoch
    disp_batches: int  # Speedometer period
    use_smoke_shape: bool
    timeout_s: int  # global timeout of the whole run


P3_DEFAULT_SLICE_SIZE = 50_000  # the paper's slice size, in elements (upstream's default is 40,000)
P3_DEFAULT_WATER_MARK = 10  # ZMQ_SNDHWM, as upstream's tools/launch.py --p3 sets it; 0: no limit
TIMELINE_FILE = "timeline-worker-{rank}.json"  # each worker's Chrome trace, in its working folder

# Limits, checked before anything starts; they mean the same on a 2-core laptop and a 1000-node cluster.
# A host runs its workers and servers at once; past a few per core they only queue for the CPU (and each
# holds the model, a few hundred MB): at most ROLES_PER_CORE workers + servers per core of their host
# (this machine's cores here, each host's own, asked over SSH, before a cluster run starts).
ROLES_PER_CORE = 4
MAX_SEED = 2**32 - 1  # NumPy's and MXNet's seeds are 32-bit
MAX_TIMEOUT_S = 30 * 24 * 3600
MAX_IMAGE_SIDE = 4096
OUTPUT_SETTINGS = {"SAVE_PARAMS": "save_params", "OUTPUT_FILE": "output_file"}  # paths the run writes

PROFILES: dict[str, Profile] = {
    # 31 batches give Speedometer reports at 10, 20 and 30: the first is warm-up,
    # the other two are measured.
    "smoke": Profile("smoke", num_batches=31, disp_batches=10, use_smoke_shape=True, timeout_s=600),
    "paper": Profile("paper", num_batches=0, disp_batches=20, use_smoke_shape=False, timeout_s=48 * 3600),
}


@dataclass(frozen=True)
class RunSettings:
    model: str
    network: str
    script: str
    profile: str
    batch_size: int
    image_shape: str  # "" for translation
    num_epochs: int
    num_batches: int
    disp_batches: int
    num_workers: int | None  # None: the target's default layout
    num_servers: int | None
    worker_threads: int  # OMP threads per worker; 0: the host's cores shared between its workers
    timeout_s: int
    ps_root_port: int | None  # None: pick a free port
    seed: int
    variant: Variant
    p3_slice_size: int  # elements per slice; 0: no slicing
    p3_priority: bool
    p3_water_mark: int  # messages queued in ZMQ per connection before P3's priority queue holds them; 0: no limit
    timeline: bool  # each worker writes a Chrome trace of its communication
    save_params: str  # rank 0 saves its trainable parameters there (.npz); empty: not saved
    output_file: str  # sockeye: the model folder of worker 0 (others add .worker-N); empty: in the role's folder
    compute: str = REAL  # emulated: forward and backward are per-layer waits (reprokit/emulation, emulated_compute.py)
    compute_profile: str = ""  # emulated only: a stored profile's name or a profile file's absolute path
    dilation: float = 1.0  # emulated only: every wait times this, every shaped link's rate divided by it
    compute_wait: str = SLEEP  # emulated only: sleep (a GPU host's free CPU) or busy (a CPU device's held core)
    bytescheduler_partition: int | None = None  # bytescheduler only: parameters per partition (BYTESCHEDULER_PARTITION)
    bytescheduler_credit: int | None = None  # bytescheduler only: parameters in flight (BYTESCHEDULER_CREDIT)

    def __post_init__(self) -> None:
        object.__setattr__(self, "variant", Variant(self.variant))  # also given as its stored string

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "variant": self.variant.value}

    @property
    def p3_knobs(self) -> P3Knobs:
        """P3's knobs as this run set them, for the engine to apply those it takes."""
        return P3Knobs(slice_size=self.p3_slice_size, priority=self.p3_priority, water_mark=self.p3_water_mark)

    @property
    def scheduler_knobs(self) -> SchedulerKnobs | None:
        """ByteScheduler's knobs as this run set them; None for a run of another variant."""
        if self.bytescheduler_partition is None or self.bytescheduler_credit is None:
            return None
        return SchedulerKnobs(partition=self.bytescheduler_partition, credit=self.bytescheduler_credit)

    def train_args(self, engine: Engine) -> list[str]:
        """Command-line arguments of the training script for this run on ``engine`` (its van, priorities, probes and
        keys as ``engine.script_knobs`` says: one of the authors' builds runs train.py for emulated compute only)."""
        knobs = engine.script_knobs(self.variant, self.p3_knobs)
        if self.image_shape:
            model_args = ["--network", self.network, "--image-shape", self.image_shape]
        elif self.script == IMAGE_SCRIPT:  # emulated Sockeye: train.py waits the profile over its arrays
            model_args = ["--network", PROFILE_NETWORK]
        else:
            model_args = ["--output", self.output_file] if self.output_file else []
        return [
            *model_args,
            "--batch-size", str(self.batch_size),
            "--num-epochs", str(self.num_epochs),
            "--num-batches", str(self.num_batches),
            "--disp-batches", str(self.disp_batches),
            "--seed", str(self.seed),
            "--kv-store", "dist_sync",
            "--variant", self.variant.value,
            "--ps-van", knobs.ps_van.value,
            "--p3-priority", "1" if knobs.p3_priority else "0",
            *(ByteSchedulerVariant.train_args() if self.variant is Variant.BYTESCHEDULER else []),
            *(["--timeline", TIMELINE_FILE] if self.timeline else []),
            *(["--save-params", self.save_params] if self.save_params else []),
            *(["--compute", EMULATED, "--compute-profile", PROFILE_FILE, "--dilation", repr(self.dilation),
               "--compute-wait", self.compute_wait, "--comm-probes", "1" if knobs.comm_probes else "0",
               *(["--string-keys", "1"] if knobs.string_keys else [])]
              if self.compute == EMULATED else []),
        ]


def _positive_int(env: Mapping[str, str], key: str, default: int | None = None, allow_zero: bool = False,
                  high: int | None = None) -> int:
    raw = str(env.get(key, "")).strip()
    if raw == "":
        if default is None:
            raise UserError(f"{key} is not set; give it with --env.{key}=N")
        return default
    return whole_number(raw, key, f"--env.{key}=N", low=0 if allow_zero else 1, high=high)


def _optional_int(env: Mapping[str, str], key: str, high: int | None = None) -> int | None:
    return _positive_int(env, key, high=high) if str(env.get(key, "")).strip() else None


def check_roles_fit(roles_per_host: Mapping[str, int], cores: Mapping[str, int | None],
                    layout: str = "the layout") -> None:
    """Refuse a layout putting more workers and servers on a host than ROLES_PER_CORE per core of it."""
    for host, count in roles_per_host.items():
        host_cores = cores.get(host)
        if host_cores and count > ROLES_PER_CORE * host_cores:
            raise UserError(f"{layout} puts {count} workers and servers on {host}, which has {host_cores} "
                            f"core(s): at most {ROLES_PER_CORE * host_cores} fit ({ROLES_PER_CORE} per core); "
                            f"lower --env.NUM_WORKERS/--env.NUM_SERVERS (or the host's workers/servers in "
                            f"hosts.json), or run on more hosts")


LOCAL_WORKERS, LOCAL_SERVERS = 2, 1  # the layout of a run on this machine unless NUM_WORKERS/NUM_SERVERS say otherwise


def local_layout(settings: RunSettings) -> tuple[int, int]:
    """(workers, servers) of a run on this machine, checked against its cores."""
    workers, servers = settings.num_workers or LOCAL_WORKERS, settings.num_servers or LOCAL_SERVERS
    check_roles_fit({"this machine": workers + servers}, {"this machine": os.cpu_count() or 1},
                    f"NUM_WORKERS={workers} with NUM_SERVERS={servers}")
    return workers, servers


def output_paths(settings: RunSettings) -> dict[str, str]:
    """The paths the run writes outside its run folder, by setting name (only those given)."""
    return {name: getattr(settings, field) for name, field in OUTPUT_SETTINGS.items() if getattr(settings, field)}


def with_local_outputs(settings: RunSettings, run_dir: str) -> RunSettings:
    """For a run on this machine: output paths made absolute (relative ones are in the run folder) and
    checked writable now, so a typo fails before training instead of after it."""
    absolute: dict[str, Any] = {OUTPUT_SETTINGS[name]: os.path.join(run_dir, path)
                                for name, path in output_paths(settings).items()}
    for name, field in OUTPUT_SETTINGS.items():
        if field in absolute:
            check_writable_here(name, absolute[field], output_need_bytes(settings), folder_ok=name == "OUTPUT_FILE")
    return replace(settings, **absolute)


def absolute_outputs(settings: RunSettings) -> None:
    """On a cluster, output paths must be absolute: each host's run folder is removed after the run."""
    for name, path in output_paths(settings).items():
        if not os.path.isabs(path):
            raise UserError(f"{name}={shown(path, SHOWN_PATH_CHARACTERS)} is relative, but on a cluster the roles' "
                            f"run folders are removed after the run; give an absolute path on the worker hosts: "
                            f"--env.{name}=/PATH")


def output_need_bytes(settings: RunSettings) -> int:
    """The free space an output path needs: the model's parameters (a Sockeye model folder holds them too)."""
    return MODELS[settings.model].params_mb * MB


def check_writable_here(name: str, path: str, need_bytes: int, folder_ok: bool = False) -> None:
    """``path``'s folder exists, a file can be created in it (tried for real: root passes any mode check), its name
    fits and ``need_bytes`` are free there; ``folder_ok``: the run writes a folder there (Sockeye's model), else a
    file, which an existing folder blocks."""
    folder = os.path.dirname(os.path.abspath(path)) or "/"
    fix = f"create the folder, or give another path with --env.{name}=PATH"
    given, there = shown(path, SHOWN_PATH_CHARACTERS), shown(folder, SHOWN_PATH_CHARACTERS, quoted=False)
    if not folder_ok and os.path.isdir(path):
        raise UserError(f"{name}={given} is a folder, and the run writes a file there; give a file path with "
                        f"--env.{name}=PATH")
    if not os.path.isdir(folder):
        raise UserError(f"{name}={given}: the folder {there} does not exist (or is not a folder); {fix}")
    try:
        fd, probe = tempfile.mkstemp(prefix=".reprokit-write-check-", dir=folder)
    except OSError as exc:
        raise UserError(f"{name}={given}: cannot write into {there} ({exc.strerror}); {fix}") from None
    os.close(fd)
    os.unlink(probe)
    check_room(path, need_bytes, f"{name}={given}")


def resolve_port(raw: str, option: str = "--env.PS_ROOT_PORT") -> int | None:
    """A scheduler port from user input, given as ``option``; None when empty (pick a free one)."""
    if not raw.strip():
        return None
    return whole_number(raw, option.removeprefix("--env.").removeprefix("--"),
                        f"{option}=N (1024-65535), or leave it empty to pick a free port", low=1024, high=65535)


def _image_shape(raw: str, model: Model) -> str:
    parts = raw.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() and 0 < int(p) <= MAX_IMAGE_SIDE for p in parts):
        raise UserError(f"IMAGE_SHAPE must be C,H,W with whole numbers from 1 to {MAX_IMAGE_SIDE} (e.g. 3,224,224), "
                        f"got {shown(raw)}")
    channels, height, width = (int(p) for p in parts)
    if min(height, width) < model.min_image_side:
        raise UserError(f"IMAGE_SHAPE {shown(raw, quoted=False)} is too small for {model.cmd_key}, which needs at "
                        f"least {model.min_image_side}x{model.min_image_side}; fix it with --env.IMAGE_SHAPE="
                        f"{model.paper_image_shape} or leave it empty")
    return f"{channels},{height},{width}"


def default_profile(cluster_data: Any, slurm_environ: Mapping[str, str] | None = None) -> str:
    """The profile when PROFILE is empty: ``smoke`` on this machine and on a testbed made by ``ck testbed cluster``
    (namespaces sharing this machine's CPU), ``paper`` on a cluster (``cluster_data``: the machine's hosts.json).
    ``slurm_environ``: the environment of a run in a Slurm allocation, which is on the testbed when its SLURM_CONF
    is a Slurm testbed's."""
    if cluster_data is None or testbed_of(cluster_data) is not None:
        return "smoke"
    return "smoke" if slurm_environ is not None and slurm_testbed_of(slurm_environ) is not None else "paper"


def resolve(cmd_key: str, env: Mapping[str, str], default_profile: str) -> RunSettings:
    """Turn the program's environment (run_vars merged with --env.*) into validated settings."""
    model = MODELS.get(cmd_key)
    if model is None:
        raise UserError(f"unknown cmd_key {shown(cmd_key)}; valid ones: {', '.join(sorted(MODELS))}")
    profile_name = str(env.get("PROFILE", "")).strip() or default_profile
    profile = PROFILES.get(profile_name)
    if profile is None:
        raise UserError(f"unknown PROFILE {shown(profile_name)}; valid ones: {', '.join(sorted(PROFILES))}")
    shape_raw = str(env.get("IMAGE_SHAPE", "")).strip()
    smoke = profile.use_smoke_shape
    if not model.is_image:
        if shape_raw:
            raise UserError(f"IMAGE_SHAPE does not apply to {model.cmd_key} (a translation model); "
                            f"drop --env.IMAGE_SHAPE")
        image_shape = ""
    elif shape_raw:
        image_shape = _image_shape(shape_raw, model)
    else:
        image_shape = model.smoke_image_shape if smoke else model.paper_image_shape
    num_batches = (model.smoke_num_batches if smoke else None) or profile.num_batches
    disp_batches = (model.smoke_disp_batches if smoke else None) or profile.disp_batches
    ps_root_port = resolve_port(str(env.get("PS_ROOT_PORT", "")))
    batch_size = _positive_int(env, "BATCH_SIZE", model.smoke_batch_size if smoke else PAPER_BATCH_SIZE, high=65536)
    compute, compute_profile, dilation, compute_wait = _compute(env, model, image_shape, batch_size)
    variant = _variant(env)
    partition, credit = ByteSchedulerVariant.knobs(env, variant, model.is_image)
    output_file = str(env.get("OUTPUT_FILE", "")).strip()
    if compute == EMULATED and output_file:
        raise UserError("OUTPUT_FILE applies to real Sockeye runs, which write a model; an emulated run builds no "
                        "model: drop --env.OUTPUT_FILE or --env.COMPUTE=emulated")
    return RunSettings(
        model=model.cmd_key,
        network=model.network,
        # Emulated compute builds no real model: every model's emulated run is train.py's (Sockeye's too).
        script=IMAGE_SCRIPT if compute == EMULATED else model.script,
        profile=profile.name,
        batch_size=batch_size,
        image_shape=image_shape,
        num_epochs=_positive_int(env, "NUM_EPOCHS", 1, high=100_000),
        num_batches=_positive_int(env, "NUM_BATCHES", num_batches, allow_zero=True, high=10**9),
        disp_batches=_positive_int(env, "DISP_BATCHES", disp_batches, high=10**9),
        num_workers=_optional_int(env, "NUM_WORKERS", high=MAX_ROLES),
        num_servers=_optional_int(env, "NUM_SERVERS", high=MAX_ROLES),
        worker_threads=_positive_int(env, "WORKER_THREADS", 0, allow_zero=True, high=1024),
        timeout_s=_positive_int(env, "RUN_TIMEOUT", profile.timeout_s, high=MAX_TIMEOUT_S),
        ps_root_port=ps_root_port,
        seed=_positive_int(env, "SEED", 42, allow_zero=True, high=MAX_SEED),
        variant=variant,
        p3_slice_size=_positive_int(env, "P3_SLICE_SIZE", P3_DEFAULT_SLICE_SIZE, allow_zero=True,
                                    high=P3Knobs.MAX_SLICE_SIZE),
        # The priority-off ablation is P3's; every other variant keeps the trainer's own priorities.
        p3_priority=_flag(env, "P3_PRIORITY", True) if variant is Variant.P3 else True,
        p3_water_mark=_positive_int(env, "P3_WATER_MARK", P3_DEFAULT_WATER_MARK, allow_zero=True, high=10**6),
        timeline=_flag(env, "TIMELINE", False),
        save_params=str(env.get("SAVE_PARAMS", "")).strip(),
        output_file=output_file,
        compute=compute, compute_profile=compute_profile, dilation=dilation, compute_wait=compute_wait,
        bytescheduler_partition=partition, bytescheduler_credit=credit,
    )


def _compute(env: Mapping[str, str], model: Model, image_shape: str,
             batch_size: int) -> tuple[str, str, float, str]:
    """COMPUTE, COMPUTE_PROFILE, DILATION and COMPUTE_WAIT, checked together (the profile must exist for the model
    and shape)."""
    compute = check_compute(str(env.get("COMPUTE", "")))
    raw_profile, raw_dilation = str(env.get("COMPUTE_PROFILE", "")).strip(), str(env.get("DILATION", "")).strip()
    wait = check_compute_wait(str(env.get("COMPUTE_WAIT", "")))
    if compute == REAL:
        given = [name for name, wrong in (("COMPUTE_PROFILE", bool(raw_profile)),
                                          ("DILATION", check_dilation(raw_dilation) != 1.0),
                                          ("COMPUTE_WAIT", wait != SLEEP)) if wrong]
        if given:
            raise UserError(f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to emulated "
                            f"compute; add --env.COMPUTE=emulated, or "
                            f"drop --env.{given[0]}")
        return compute, "", 1.0, SLEEP
    dilation = check_dilation(raw_dilation)
    name = check_name(raw_profile)
    if name not in named_profiles():
        name = os.path.abspath(name)  # a profile file: every role reads it from its own folder
    resolve_profile(name, model.cmd_key, image_shape, batch_size)  # refuses a profile that does not fit now
    return compute, name, dilation, wait


def compute_profile_of(settings: RunSettings) -> ComputeProfile:
    """The profile an emulated run waits, at its batch size."""
    return resolve_profile(settings.compute_profile, settings.model, settings.image_shape, settings.batch_size)


def _variant(env: Mapping[str, str]) -> Variant:
    variant = str(env.get("VARIANT", "")).strip() or DEFAULT_VARIANT.value
    if variant not in VARIANTS:
        raise UserError(f"unknown VARIANT {shown(variant)}; valid ones: {', '.join(VARIANTS)}")
    return Variant(variant)


def _flag(env: Mapping[str, str], key: str, default: bool) -> bool:
    raw = str(env.get(key, "")).strip()
    if raw == "":
        return default
    if raw not in ("0", "1"):
        raise UserError(f"{key} must be 0 or 1, got {shown(raw)}; fix it with --env.{key}=0 or --env.{key}=1")
    return raw == "1"
