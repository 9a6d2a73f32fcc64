"""Emulated and predicted verdicts beside the measured ones, for each claim stated at a bandwidth.

"Emulated": the real communication stack with emulated compute (docs/emulation.md) at the paper's cluster size
and bandwidth divided by the dilation k. "Predicted": the iteration model (iteration_model.py, docs/study.md).
Each is given only when its check holds: the emulation's self-check (this machine's own profile emulated, its
throughput within 10% of the real run's, ``emulation/selfcheck.json``), the model's validation against real and
emulated runs (within 10% for throughput, 15% for P3's speedup). Neither counts towards a badge: the badge
judges what was measured.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources
from collections.abc import Mapping, Sequence

from reprokit.study.claims import Claim

EXPLANATION = ("An emulated verdict comes from runs of the real communication stack in which each device's compute "
               "is replaced by waits of its measured or sourced duration (times k, with every bandwidth divided by "
               "k); a predicted verdict comes from a discrete-event model of one iteration, with no run at all. "
               "Both are labelled and shown beside the measured verdict, and neither counts towards a badge.")
MODEL_NOT_VALIDATED = ("not given: the iteration model is not validated against real runs yet (it must be within 10% "
                       "for throughput and 15% for P3's speedup; docs/study.md)")


@dataclass(frozen=True)
class LabelledVerdict:
    claim: str
    bandwidth: str
    measured: str  # the claim's overall measured verdict
    emulated: str
    predicted: str

    def to_dict(self) -> dict:
        return asdict(self)


def self_check() -> dict:
    return json.loads(resources.files("reprokit.emulation").joinpath("selfcheck.json").read_text())


def emulation_status(check: Mapping) -> str:
    """Why no emulated verdict is given, or "" when the self-check holds."""
    low, high = check["ci95"]
    if abs(check["ratio"] - 1) <= check["tolerance"] and abs(low - 1) <= check["tolerance"] \
            and abs(high - 1) <= check["tolerance"]:
        return ""
    return (f"not given: the emulation's self-check is outside {check['tolerance']:.0%} (real/emulated throughput "
            f"{check['ratio']:.2f}x [{low:.2f}, {high:.2f}], n={check['n_pairs']}, {check['model']}; "
            f"docs/emulation.md)")


def labelled_verdicts(claims: Sequence[Claim], overall: Mapping[str, str], check: Mapping | None = None) -> \
        list[LabelledVerdict]:
    emulated = emulation_status(self_check() if check is None else check)
    # No emulated runs are stored yet even where the self-check holds: say so rather than show nothing.
    emulated = emulated or "not given: no emulated runs at the paper's settings are stored"
    return [LabelledVerdict(c.id, c.bandwidth, overall.get(c.id, "not measured"), emulated, MODEL_NOT_VALIDATED)
            for c in claims if c.bandwidth]
