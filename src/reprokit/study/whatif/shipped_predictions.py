"""The iteration model's predictions that every report asks for, computed once per release and shipped with it.

A report predicts the same few hundred settings each time (the predicted verdicts over the paper's GPU's range, the
sensitivity figure, the map of today's hardware), and VGG-19 with P3's slices takes a quarter of a second each: half
a minute on every `ck report` and at the end of every sweep. They depend on nothing a store holds, only on the
release (gpus.json, the study's claims, the validation record and the model), so they are computed when the release
is made and kept beside this file:

    python -m reprokit.study.report.ship_predictions   # rewrites shipped_predictions.json

A shipped prediction is used only for the same input (ModelInput's repr: every layer's times and sizes, the policy,
the bandwidth, the costs) to the same model (the hash of iteration_model.py's source): it is exactly what
``simulate`` would return. Anything else is simulated. The file is part of the package, never written at run time,
so nothing outside the release can change a prediction; a unit test keeps it in step with the model.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any

from reprokit.study.whatif import iteration_model
from reprokit.study.whatif.iteration_model import ModelInput, Prediction

SHIPPED = Path(__file__).with_name("shipped_predictions.json")
_asked: dict[str, Prediction] = {}  # every prediction this process gave, shipped or simulated (write_asked ships them)


@cache
def model_version() -> str:
    """The hash of the model's source: predictions of another version of it are never used."""
    return hashlib.sha256(Path(iteration_model.__file__).read_bytes()).hexdigest()[:16]


def key_of(spec: ModelInput) -> str:
    return hashlib.sha256(repr(spec).encode()).hexdigest()[:32]


def _prediction(data: Any) -> Prediction:
    return Prediction(**{**data, "iteration_times": tuple(data["iteration_times"])})


@cache
def shipped() -> dict[str, Prediction]:
    """The shipped predictions of this model version; none when the file is of another (then every report
    simulates until the file is made again)."""
    try:
        data = json.loads(SHIPPED.read_text())
    except (OSError, ValueError):
        return {}
    if data.get("model_version") != model_version():
        return {}
    return {k: _prediction(v) for k, v in data["predictions"].items()}


def simulate(spec: ModelInput) -> Prediction:
    """iteration_model.simulate, or its shipped answer for this very input."""
    key = key_of(spec)
    found = _asked.get(key) or shipped().get(key)
    if found is None:
        found = iteration_model.simulate(spec)
    _asked[key] = found
    return found


def write_asked() -> int:
    """Ship every prediction this process gave (SHIPPED rewritten); how many. The writer
    (report/ship_predictions.py) first asks what a report asks: it stands above the analysis and this model."""
    SHIPPED.write_text(json.dumps({"model_version": model_version(),
                                   "predictions": {k: asdict(v) for k, v in sorted(_asked.items())}},
                                  separators=(",", ":")) + "\n")
    return len(_asked)
