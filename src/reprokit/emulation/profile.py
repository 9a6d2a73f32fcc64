"""Emulated compute's profiles: per-layer forward and backward seconds, each factor with its source.

A profile (``ComputeProfile``) is what program/p3/emulated_compute.py waits, layer by layer, instead of computing:
the layers in the trainer's key order with their trainable array sizes (so the engine side can check they fit the
network), forward and backward seconds at the profile's batch size, and every factor that made those seconds, each
with its source. A run takes one by name (``COMPUTE_PROFILE``, profiles/NAME.json beside this file, one per model
and image shape) or from a file, scales it to its batch size (linearly: a stated assumption, kept as a factor) and
writes it into every role's folder (``PROFILE_FILE``). DILATION k multiplies every wait (engine side) and divides
every shaped bandwidth (``dilated_rate``); throughput is reported as measured and times k (``dedilated``).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from reprokit.core import schema as s
from reprokit.core.errors import UserError
from reprokit.core.jsonfile import read_json
from reprokit.core.values import shown, tc_rate_bps
from reprokit.emulation.gpus import measured_path, paper_gpu, valid_names

REAL, EMULATED = "real", "emulated"
COMPUTE_MODES = (REAL, EMULATED)
# How an emulated wait spends its time: asleep, as a GPU host's CPU is free for the network stack while the device
# computes; or busy on the engine's CPU worker thread (hashing, outside Python's lock), as a CPU device's compute holds
# a core and that thread, which the real run's communication then competes for: the self-check emulates this
# machine's own CPU so.
SLEEP, BUSY = "sleep", "busy"
COMPUTE_WAITS = (SLEEP, BUSY)
DEFAULT_PROFILE = paper_gpu().name  # the compute of the paper's cluster
PROFILE_FILE = "emulated-compute.json"  # in every role's folder
MEASURED_FILE = "measured-compute.json"  # in a run folder: each layer's compute as the run's workers measured it
MEASURED_NAME = "measured-in-run"
PROFILES_DIR = Path(__file__).with_name("profiles")
MAX_DILATION = 1000.0
DILATION_RANGE = f"a number above 0 and at most {MAX_DILATION:g}"  # what a dilation must be, wherever it is read
MAX_PROFILE_BYTES = 4 << 20

FACTOR_SCHEMA = s.Obj(required={"name": s.Name(), "value": s.Number(0.0, 1e12), "source": s.Text(2000)})
# A layer's forward or backward pass of more than a minute on one worker is no GPU's (a P4000's slowest, VGG-19's
# first convolution at batch 32, takes milliseconds); dilation stretches it further still.
MAX_LAYER_S = 60.0
LAYER_SCHEMA = s.Obj(required={"name": s.Text(200), "arrays": s.ListOf(s.Int(1, 2**40), max_items=64),
                               "forward_s": s.Number(0.0, MAX_LAYER_S), "backward_s": s.Number(0.0, MAX_LAYER_S)})
PROFILE_SCHEMA = s.Obj(required={
    "name": s.Name(), "model": s.Name(), "image_shape": s.Text(32), "batch_size": s.Int(1, 65536),
    "source": s.Text(4000), "factors": s.ListOf(FACTOR_SCHEMA, max_items=32),
    "layers": s.ListOf(LAYER_SCHEMA, max_items=10000, min_items=1)})
COLLECTION_SCHEMA = s.Obj(required={"name": s.Name(), "source": s.Text(4000),
                                    "profiles": s.ListOf(PROFILE_SCHEMA, max_items=64)})


@dataclass(frozen=True)
class Factor:
    name: str
    value: float
    source: str


@dataclass(frozen=True)
class LayerTime:
    name: str
    arrays: tuple[int, ...]  # elements of each trainable array, in the trainer's key order
    forward_s: float
    backward_s: float


@dataclass(frozen=True)
class ComputeProfile:
    name: str
    model: str
    image_shape: str
    batch_size: int
    source: str
    factors: tuple[Factor, ...]
    layers: tuple[LayerTime, ...]

    @property
    def forward_s(self) -> float:
        return sum(layer.forward_s for layer in self.layers)

    @property
    def backward_s(self) -> float:
        return sum(layer.backward_s for layer in self.layers)

    @property
    def total_s(self) -> float:
        """Forward and backward seconds of one iteration, undilated."""
        return self.forward_s + self.backward_s

    def scaled(self, factor: Factor) -> ComputeProfile:
        """Every layer's times multiplied by ``factor.value``; the factor is kept with its source."""
        layers = tuple(replace(x, forward_s=x.forward_s * factor.value, backward_s=x.backward_s * factor.value)
                       for x in self.layers)
        return replace(self, factors=(*self.factors, factor), layers=layers)

    def at_batch(self, batch_size: int) -> ComputeProfile:
        """This profile for a run at ``batch_size``: linear in the batch (an assumption, kept as a factor)."""
        if batch_size == self.batch_size:
            return self
        ratio = batch_size / self.batch_size
        scaled = self.scaled(Factor("batch", ratio, f"linear in the batch size: {self.batch_size} -> {batch_size} "
                                                    f"(assumed; a device is often faster per sample at larger batches)"))
        return replace(scaled, batch_size=batch_size)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "image_shape": self.image_shape,
                "batch_size": self.batch_size, "source": self.source,
                "factors": [{"name": f.name, "value": f.value, "source": f.source} for f in self.factors],
                "layers": [{"name": x.name, "arrays": list(x.arrays), "forward_s": x.forward_s,
                            "backward_s": x.backward_s} for x in self.layers]}

    @classmethod
    def from_dict(cls, data: Any, where: str = "profile") -> ComputeProfile:
        try:
            PROFILE_SCHEMA.check(data, "")
        except s.Invalid as exc:
            raise UserError(f"{where}: {exc}") from None
        return cls(str(data["name"]), str(data["model"]), str(data["image_shape"]), int(data["batch_size"]),
                   str(data["source"]),
                   tuple(Factor(str(f["name"]), float(f["value"]), str(f["source"])) for f in data["factors"]),
                   tuple(LayerTime(str(x["name"]), tuple(int(n) for n in x["arrays"]), float(x["forward_s"]),
                                   float(x["backward_s"])) for x in data["layers"]))


@dataclass(frozen=True)
class Collection:
    """A named set of profiles (one per model and image shape) sharing a source: profiles/NAME.json."""
    name: str
    source: str
    profiles: tuple[ComputeProfile, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "profiles": [p.to_dict() for p in self.profiles]}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Collection:
        try:
            COLLECTION_SCHEMA.check(data, "")
        except s.Invalid as exc:
            raise UserError(f"{where}: {exc}") from None
        return cls(str(data["name"]), str(data["source"]),
                   tuple(ComputeProfile.from_dict(p, where) for p in data["profiles"]))

    def find(self, model: str, image_shape: str) -> ComputeProfile | None:
        return next((p for p in self.profiles if p.model == model and p.image_shape == image_shape), None)


def named_profiles() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in PROFILES_DIR.glob("*.json")))


@cache
def collection(name: str) -> Collection:
    path = PROFILES_DIR / f"{name}.json"
    return Collection.from_dict(json.loads(path.read_text()), str(path))


def check_name(raw: str, option: str = "--env.COMPUTE_PROFILE") -> str:
    """COMPUTE_PROFILE as given: a GPU's name (gpus.json), or a profile file, given as ``measured:FILE`` or as a
    path (checked to exist). Returns the name or the file's path. ``option``: how the user gave it, for the fix."""
    raw = raw.strip() or DEFAULT_PROFILE
    if raw in named_profiles():
        return raw
    measured = measured_path(raw)
    if measured is not None or "/" in raw or raw.endswith(".json"):
        path = measured if measured is not None else Path(raw)
        if not os.path.isfile(path):  # False for a name too long to look up, where is_file() raises
            raise UserError(f"{option}={shown(raw)}: {shown(str(path))} is not a file; give a profile a run measured "
                            f"(--env.TIMELINE=1 writes measured-compute.json in its run folder) or one of "
                            f"{', '.join(named_profiles())}: {option}=NAME|measured:FILE")
        return str(path)
    raise UserError(f"unknown {option} {shown(raw)}; valid ones: {valid_names()}: {option}=NAME|measured:FILE")


def resolve_profile(raw: str, model: str, image_shape: str, batch_size: int) -> ComputeProfile:
    """The profile a run waits: by name (for its model and image shape) or from a file, at its batch size."""
    name = check_name(raw)
    if name in named_profiles():
        stored = collection(name)
        profile = stored.find(model, image_shape)
        if profile is None:
            held = ", ".join(f"{p.model} {p.image_shape}".strip() for p in stored.profiles)
            if not image_shape:  # a text model (Sockeye): no image shape to change
                raise UserError(f"COMPUTE_PROFILE={name} has no profile for {model} (it holds: {held}); pick "
                                f"another GPU with --env.COMPUTE_PROFILE=NAME|PATH")
            raise UserError(f"COMPUTE_PROFILE={name} has no profile for {model} at image shape {image_shape} "
                            f"(it holds: {held}); pick another with --env.COMPUTE_PROFILE=NAME|PATH or "
                            f"--env.IMAGE_SHAPE")
    else:
        profile = ComputeProfile.from_dict(read_json(Path(name), "a compute profile", MAX_PROFILE_BYTES), name)
        if (profile.model, profile.image_shape) != (model, image_shape):
            raise UserError(f"the compute profile {name} is for {profile.model} at {profile.image_shape}, but the "
                            f"run trains {model} at {image_shape}; give a profile of this model and shape")
        check_arrays(profile, name)
    return profile.at_batch(batch_size)


def arrays_of(profile: ComputeProfile) -> list[int]:
    return [size for layer in profile.layers for size in layer.arrays]


def check_arrays(profile: ComputeProfile, name: str) -> None:
    """A profile from a file must hold the network's trainable arrays, in its order: the named profiles were made
    from the network itself, so they are the reference. Otherwise every worker would fail at its first wait."""
    reference = collection(DEFAULT_PROFILE).find(profile.model, profile.image_shape)
    if reference is None:
        return
    theirs, ours = arrays_of(profile), arrays_of(reference)
    if theirs != ours:
        raise UserError(f"the compute profile {name} does not match {profile.model}'s network at "
                        f"{profile.image_shape}: {len(theirs)} arrays of {sum(theirs)} elements in all, where the "
                        f"network has {len(ours)} of {sum(ours)}; make it from a run of this model "
                        f"(--env.TIMELINE=1, then measured:FILE)")


def average(profiles: list[ComputeProfile], name: str, source: str) -> ComputeProfile:
    """Layer by layer means of profiles of the same model, shape, batch and layers (several workers' measurements)."""
    first = profiles[0]
    if any((p.model, p.image_shape, p.batch_size, [x.arrays for x in p.layers]) !=
           (first.model, first.image_shape, first.batch_size, [x.arrays for x in first.layers]) for p in profiles):
        raise UserError("profiles of different models, shapes, batches or layers cannot be averaged")
    n = len(profiles)
    layers = tuple(LayerTime(x.name, x.arrays, sum(p.layers[i].forward_s for p in profiles) / n,
                             sum(p.layers[i].backward_s for p in profiles) / n) for i, x in enumerate(first.layers))
    return replace(first, name=name, source=source, layers=layers)


def measured_in_run(traces: list[Path], model: str, image_shape: str, batch_size: int,
                    how: str) -> ComputeProfile | None:
    """The workers' own per-layer compute (their timelines' ``otherData.compute_profile``, p3_timeline.py), averaged
    over the workers; None when no trace holds one. ``how``: the run, for the source."""
    found = []
    for path in traces:
        try:
            measured = json.loads(path.read_text())["otherData"]["compute_profile"]
            layers, iterations = measured["layers"], int(measured["iterations"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.append(ComputeProfile.from_dict(
            {"name": MEASURED_NAME, "model": model, "image_shape": image_shape, "batch_size": batch_size,
             "source": "", "factors": [], "layers": layers}, str(path)))
        found_iterations = iterations
    if not found:
        return None
    source = (f"measured inside {how} by its {len(found)} workers' engine probes (p3_timeline.py: each layer from "
              f"its weights in place and the previous layer's end to its own end; mean of {found_iterations} "
              f"iterations per worker), averaged over the workers")
    return average(found, MEASURED_NAME, source)


def device_profile(name: str, model: str, image_shape: str, layers: list[tuple[str, tuple[int, ...], int]],
                   seconds_per_image: float, factors: tuple[Factor, ...], source: str,
                   forward_share: float = 1 / 3) -> ComputeProfile:
    """A device's profile at batch 1: ``seconds_per_image`` (forward + backward) split over ``layers`` (name, array
    sizes, forward FLOPs) by FLOPs, ``forward_share`` of each layer's share forward, the rest backward."""
    total = sum(flops for _, _, flops in layers)
    out = tuple(LayerTime(layer, arrays, seconds_per_image * flops / total * forward_share,
                          seconds_per_image * flops / total * (1 - forward_share)) for layer, arrays, flops in layers)
    return ComputeProfile(name, model, image_shape, 1, source, factors, out)


def check_dilation(raw: str, option: str = "--env.DILATION") -> float:
    """DILATION as given: a number above 0 (1: real time). ``option``: how the user gave it, named in the fix."""
    text = str(raw).strip()
    if text == "":
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_DILATION:  # also nan and inf
        raise UserError(f"{option} must be {DILATION_RANGE} (1: real time; 2: every "
                        f"emulated wait twice as long, every shaped link half as fast), got {shown(text)}; fix it "
                        f"with {option}=K")
    return value


def _one_of(name: str, raw: str, choices: tuple[str, ...], hint: str) -> str:
    """A setting's value among ``choices`` (empty: the first), or one line naming the valid ones."""
    value = str(raw).strip() or choices[0]
    if value not in choices:
        raise UserError(f"unknown {name} {shown(value)}; valid ones: {', '.join(choices)} ({hint})")
    return value


def check_compute_wait(raw: str) -> str:
    return _one_of("COMPUTE_WAIT", raw, COMPUTE_WAITS, "sleep: a GPU host's free CPU; busy: a CPU device holding a "
                                                       "core and the engine's CPU thread: "
                                                       "--env.COMPUTE_WAIT=sleep|busy")


def check_compute(raw: str) -> str:
    return _one_of("COMPUTE", raw, COMPUTE_MODES, "--env.COMPUTE=emulated replaces forward and backward by per-layer "
                                                  "waits")


# An emulated run stands for its device only while the hosts have CPU to spare for the communication stack: above
# this share of all cores busy over the training loop (averaged, so bursts were saturated), the host's CPU, not the
# shaped links, may have set the pace.
EMULATION_CPU_LIMIT = 0.8


def cpu_bound_warning(busy: float) -> str:
    """Why an emulated run whose hosts were ``busy`` (a share of all cores) may have measured the CPU."""
    return (f"the busiest host's CPU was {busy:.0%} busy during training (limit {EMULATION_CPU_LIMIT:.0%}): the "
            f"communication stack may have been bound by the CPU rather than the shaped links; raise the dilation "
            f"(DILATION, --dilation) so each link carries less per second")


def emulates(env: Mapping[str, Any]) -> bool:
    """Whether run settings (a sweep's, or a stored run's overrides) ask for emulated compute."""
    return str(env.get("COMPUTE", "")).strip() == EMULATED


def dilation_of(env: Mapping[str, Any]) -> float:
    """k of run settings (a sweep's, or a stored run's overrides) that emulate; 1 for real compute. UserError (one
    line) when it is not a dilation."""
    return check_dilation(str(env.get("DILATION", ""))) if emulates(env) else 1.0


def dilated_rate(rate: str, dilation: float) -> str:
    """A tc rate (``1gbit``) divided by the dilation, as a tc rate in bit/s (``250000000bit`` for k=4)."""
    whole = tc_rate_bps(rate)
    if whole is None:
        raise UserError(f"rate {shown(rate)} is not a tc rate of at least 1kbit like 100mbit, 1gbit or 500kbit")
    bps = whole / dilation
    if bps < 8:
        raise UserError(f"rate {rate} divided by DILATION={dilation:g} is below 8 bit/s; lower --env.DILATION")
    return f"{round(bps)}bit"


def dedilated(throughput: float, dilation: float) -> float:
    """Throughput as the emulated device would have it: the measured one times k (every time was k times longer)."""
    return throughput * dilation
