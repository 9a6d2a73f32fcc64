"""GPUs as data: each one's training throughput per model with its source and plausible range (gpus.json).

The one place the compute of a GPU is stated. An emulated run waits a GPU's per-layer profile (profiles/NAME.json,
made from these figures by ``python -m reprokit.study.profiles.emulation_profiles``), and the iteration model predicts with the
same figures (`ck predict --gpu=NAME`, the report's predicted verdicts). A figure of a GPU we hold no benchmark of
(``estimated``) is the nearest GPU's scaled by the spec ratios; its range says how far that may be off
(``range_rule`` in the file). ``measured:FILE`` names a profile a real run measured of itself instead
(``--env.TIMELINE=1`` writes measured-compute.json): any evaluator's own GPU.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from reprokit.core import schema as s
from reprokit.core.errors import UserError
from reprokit.core.values import shown

GPUS_FILE = Path(__file__).with_name("gpus.json")
MEASURED_PREFIX = "measured:"  # --gpu/--emulate=measured:FILE: a profile a run measured of itself

# A model's samples: images for the image models, sentence pairs for the translation model (Sockeye), each named
# in its figure's key (images_per_sec, sentences_per_sec).
SENTENCE_MODELS = frozenset({"sockeye"})
UNITS = ("images", "sentences")


def unit_of(model: str) -> str:
    return "sentences" if model in SENTENCE_MODELS else "images"


def rate_label(unit: str) -> str:
    """How figures name a unit's rate: img/s or sent/s."""
    return "img/s" if unit == "images" else "sent/s"


def _figure_key(unit: str) -> str:
    return f"{unit}_per_sec"


def _throughput_schema(unit: str) -> s.Spec:
    key = _figure_key(unit)
    return s.Where(
        s.Obj(required={key: s.Number(1e-3, 1e6), "low": s.Number(1e-3, 1e6), "high": s.Number(1e-3, 1e6),
                        "batch": s.Int(1, 65536), "precision": s.OneOf(("FP32", "TF32")), "estimated": s.Bool(),
                        "source": s.Text(2000)}),
        lambda x: x["low"] <= x[key] <= x["high"], f"a range holding its figure (low <= {key} <= high)")


THROUGHPUT_SCHEMAS = {unit: _throughput_schema(unit) for unit in UNITS}


class _ModelsSpec(s.Spec):
    """A GPU's models: each figure in its model's unit (sockeye in sentences/s, the image models in images/s)."""

    def check(self, value: Any, where: str) -> None:
        s.MapOf(s.Name(), s.Json(depth=1), max_items=32).check(value, where)  # each model's figure: below
        for model, rate in value.items():
            THROUGHPUT_SCHEMAS[unit_of(model)].check(rate, f"{where}.{model}" if where else str(model))


GPU_SCHEMA = s.Obj(required={"label": s.Text(40), "device": s.Text(300), "fp32_tflops": s.Number(0.01, 1e4),
                             "memory_gb_per_s": s.Number(1.0, 1e6), "spec_source": s.Text(2000),
                             "models": _ModelsSpec()})
GPUS_SCHEMA = s.Obj(required={"what": s.Text(2000), "range_rule": s.Text(2000), "paper_gpu": s.Name(),
                              "gpus": s.MapOf(s.Name(), GPU_SCHEMA, max_items=64)})


@dataclass(frozen=True)
class Throughput:
    """One GPU's training throughput of one model: ``per_sec`` samples (``unit``: images, or sentence pairs for
    Sockeye) per second at ``batch``, plausibly ``low`` to ``high``."""
    per_sec: float
    low: float
    high: float
    batch: int
    precision: str
    estimated: bool  # scaled from another GPU by spec ratios: no benchmark of this GPU was found
    source: str
    unit: str = "images"

    @property
    def short_unit(self) -> str:
        """How figures name it: img/s or sent/s."""
        return rate_label(self.unit)

    def seconds_per_image_range(self) -> tuple[float, float]:
        """Compute per image at the fast end and the slow end of the range."""
        return 1 / self.high, 1 / self.low


@dataclass(frozen=True)
class Gpu:
    name: str
    label: str  # how setting labels name it ("P4000")
    device: str
    fp32_tflops: float
    memory_gb_per_s: float
    spec_source: str
    models: dict[str, Throughput]

    def throughput(self, model: str) -> Throughput:
        if model not in self.models:
            raise UserError(f"the GPU profile {self.name} states no throughput of {model} (it has "
                            f"{', '.join(self.models)}); pick a model it has or another GPU")
        return self.models[model]

    @classmethod
    def from_dict(cls, name: str, data: Any) -> Gpu:
        return cls(name, str(data["label"]), str(data["device"]), float(data["fp32_tflops"]),
                   float(data["memory_gb_per_s"]), str(data["spec_source"]),
                   {model: Throughput(float(t[_figure_key(unit_of(model))]), float(t["low"]), float(t["high"]),
                                      int(t["batch"]), str(t["precision"]), bool(t["estimated"]), str(t["source"]),
                                      unit_of(model))
                    for model, t in data["models"].items()})


def parse(data: Any, where: str) -> tuple[str, dict[str, Gpu]]:
    """The paper's GPU and every GPU of a gpus.json document, checked (one line on the first problem)."""
    try:
        GPUS_SCHEMA.check(data, "")
    except s.Invalid as exc:
        raise UserError(f"{where}: {exc}") from None
    gpus = {name: Gpu.from_dict(name, raw) for name, raw in data["gpus"].items()}
    if data["paper_gpu"] not in gpus:
        raise UserError(f"{where}: paper_gpu {shown(data['paper_gpu'])} is not one of its GPUs")
    return str(data["paper_gpu"]), gpus


@cache
def _stored() -> tuple[str, dict[str, Gpu]]:
    return parse(json.loads(GPUS_FILE.read_text()), str(GPUS_FILE))


def gpus() -> dict[str, Gpu]:
    return _stored()[1]


def paper_gpu(name: str = "") -> Gpu:
    """The GPU a paper's cluster had, the compute its claims are judged at: ``name`` (a study's ``paper.gpu``,
    Study.gpu), or gpus.json's ``paper_gpu`` (P3's) when none is named."""
    default, table = _stored()
    return gpu(name) if name else table[default]


def valid_names() -> str:
    """Every GPU name, the paper's marked, and the measured form: for refusals."""
    paper = paper_gpu().name
    listed = ", ".join(f"{n} (the paper's)" if n == paper else n for n in gpus())
    return f"{listed}, or {MEASURED_PREFIX}FILE (a profile a run measured of itself with --env.TIMELINE=1)"


def gpu(name: str, option: str = "--gpu") -> Gpu:
    """A GPU by name; one line listing the valid ones otherwise."""
    table = gpus()
    if name not in table:
        raise UserError(f"unknown {option} {shown(name)}; valid ones: {valid_names()}")
    return table[name]


def measured_path(raw: str) -> Path | None:
    """The file of ``measured:FILE``; None for anything else."""
    return Path(raw[len(MEASURED_PREFIX):]) if raw.startswith(MEASURED_PREFIX) else None
