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
import math
from dataclasses import asdict, dataclass
from importlib import resources
from collections.abc import Mapping, Sequence

import pandas as pd

from reprokit.study.claims import MIN_RUNS, Claim, Tolerance
from reprokit.study.speedup import ENGINE_NAMES
from reprokit.study.verdict import NOT_MEASURED, ClaimVerdict, judge_at_bandwidth, measured_at_all

EXPLANATION = ("An emulated verdict comes from runs of the real communication stack in which each device's compute "
               "is replaced by waits of its measured or sourced duration (times k, with every bandwidth divided by "
               "k); a predicted verdict comes from a discrete-event model of one iteration, with no run at all. "
               "Both are labelled and shown beside the measured verdict, and neither counts towards a badge.")
MODEL_NOT_VALIDATED = ("not given: the iteration model is not validated for the paper's clusters: given this "
                       "testbed's own network-stack costs (measured apart), it held both bars (iteration time within "
                       "10%, P3's speedup within 15%) in all 6 emulated configurations whose hosts' CPU was at most "
                       "41% busy, but against real-compute testbed runs, which load the CPU, its iteration time was "
                       "within 10% in 4 of 8 only; and the paper's hosts' stack costs are not known "
                       "(docs/study.md, docs/emulation.md)")


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
    """Why no emulated verdict is given, or "" when the self-check holds: for every model it checked, the real over
    emulated throughput and both ends of its interval within the tolerance of 1."""
    tolerance = check["tolerance"]
    missed = [m for m in check["models"]
              if not all(abs(x - 1) <= tolerance for x in (m["ratio"], *m["ci95"]))]
    if not missed:
        return ""
    shown = "; ".join(f"{m['model']} {m['ratio']:.2f}x [{m['ci95'][0]:.2f}, {m['ci95'][1]:.2f}], n={m['n_pairs']}"
                      for m in missed)
    return (f"not given: the emulation's self-check is outside {tolerance:.0%} (real/emulated throughput {shown}; "
            f"docs/emulation.md)")


def emulated_verdict(claim: Claim, rows: pd.DataFrame, tolerance: Tolerance, withheld: str, study: str) -> str:
    """The claim's emulated figure (speedup with its interval, n, where) and its verdict by the rule of a measured
    claim at a bandwidth (verdict.judge_at_bandwidth). ``withheld``: why no verdict may be given (the self-check),
    or ""."""
    mine = rows[(rows["model"] == claim.model) & (rows["bandwidth"] == claim.bandwidth)
                & (rows["variant"] == claim.variant) & (rows["versus"] == claim.versus)] if not rows.empty else rows
    if mine.empty:
        return withheld or (f"not run: no emulated runs of {claim.model} at {claim.bandwidth} are stored (ck reproduce "
                            f"study:{study} --target=TESTBED --emulate=v100)")
    said = []
    need = max(MIN_RUNS, tolerance.min_runs)
    for _, row in mine.iterrows():
        n = int(min(row["n_variant"], row["n_versus"]))
        engine = ENGINE_NAMES.get(str(row.get("engine", "")), str(row.get("engine", "")))
        figure = (f"{row['speedup']:.2f}x [{row['ci_low']:.2f}, {row['ci_high']:.2f}], n={n}, {row['setup']}, "
                  f"{engine}, {row['profile']} profile, k={row['dilation']:g}")
        busy = float(row.get("host_cpu_busy", math.nan))
        if busy == busy:  # NaN: not recorded
            figure += f", hosts' CPU up to {busy:.0%} busy"
        if withheld:
            said.append(f"{figure}: {withheld}")
        elif row.get("params_apart", 0):  # a run whose workers ended with different parameters did not train
            said.append(f"{figure}: not given: the workers' parameters ended apart in {int(row['params_apart'])} of "
                        f"{int(row['n_variant'] + row['n_versus'])} runs, so the engine did not keep the training "
                        f"in step")
        elif row.get("cpu_bound", False):  # decided by each run's result (run/result.py)
            said.append(f"{figure}: not given: its runs warned they were CPU-bound, so the hosts' CPU rather than the "
                        f"links may have set the pace (raise --dilation)")
        elif n < need:
            said.append(f"{figure}: not given: n < {need}")
        else:
            kind, how = judge_at_bandwidth(row, claim, tolerance)
            said.append(f"{figure}: {kind} (emulated){':' if how.startswith(' ') else ''}{how}")
    return "; ".join(said)


def labelled_verdicts(claims: Sequence[Claim], overall: Mapping[str, str], study: str, check: Mapping | None = None,
                      emulated: pd.DataFrame | None = None, tolerance: Tolerance | None = None, *,
                      verdicts: Sequence[ClaimVerdict]) -> list[LabelledVerdict]:
    """``emulated``: the emulated runs' speedups (Analysis.emulated_speedups); figures are shown even where the
    self-check withholds a verdict, labelled so. ``verdicts``: the measured ones; a claim none of whose
    configurations was measured reads "not measured" rather than its overall "inconclusive"."""
    withheld = emulation_status(self_check() if check is None else check)
    rows = emulated if emulated is not None else pd.DataFrame()
    out = []
    for c in claims:
        if not c.bandwidth:
            continue
        if tolerance is None:
            # No emulated runs are stored yet even where the self-check holds: say so rather than show nothing.
            text = withheld or "not given: no emulated runs at the paper's settings are stored"
        else:
            text = emulated_verdict(c, rows, tolerance, withheld, study)
        measured = overall.get(c.id, NOT_MEASURED) if measured_at_all(c.id, verdicts) else NOT_MEASURED
        out.append(LabelledVerdict(c.id, c.bandwidth, measured, text, MODEL_NOT_VALIDATED))
    return out
