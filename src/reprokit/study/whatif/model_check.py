"""The iteration model checked against runs: what the model is given for a stored run, its errors by configuration,
and the validation record (``model_validation.json``) whose checks gate the predicted verdicts.

benchmarks/model_validation.py runs the checks and writes the record through ``recorded_check``; the report reads
it through ``ModelValidation``. A check's configurations and speedups each name their model, bandwidth, variant
and dilation, so the gate judges a claim by its own network and variants."""
from __future__ import annotations

import json
import math
import statistics
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from reprokit.core.errors import UserError
from reprokit.emulation.profile import MEASURED_FILE, PROFILE_FILE, ComputeProfile
from reprokit.run.result import RESULT_FILE, Result
from reprokit.study.paper.rates import shaped_bps
from reprokit.study.store.records import Store
from reprokit.study.whatif.compute import layers_of
from reprokit.study.whatif.iteration_model import (
    BYTESCHEDULER_CREDIT,
    BYTESCHEDULER_PARTITION,
    VARIANT_POLICY,
    ModelInput,
    simulate,
)

UNSHAPED = "off"  # ck testbed --shape=off: the links as the kernel gives them


@dataclass(frozen=True, order=True)
class Configuration:
    """What a set of runs repeated: the network, the paper's bandwidth, the study's variant and the dilation k."""
    model: str
    bandwidth: str
    variant: str
    dilation: float = 1.0

    @property
    def name(self) -> str:
        return f"{self.model} {self.bandwidth} {self.variant}" + (f" (k={self.dilation:g})" if self.dilation != 1
                                                                  else "")

    @property
    def baseline(self) -> Configuration:
        return Configuration(self.model, self.bandwidth, "baseline", self.dilation)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "bandwidth": self.bandwidth, "variant": self.variant, "dilation": self.dilation}


@dataclass(frozen=True)
class StackCosts:
    """The hosts' own cost per payload byte and per message (ModelInput.stack_s_*), as model_validation.py --stack
    measured it, and the bytes each host's egress holds below the van's order (ModelInput.fifo_bytes), as its
    sockets and qdisc were sampled holding them under a sweep."""
    per_byte: float = 0.0
    per_message: float = 0.0
    fifo_bytes: float = 0.0


@dataclass(frozen=True)
class ObservedRun:
    """One run to predict: its configuration, its result, the profile it computed or waited (its layers' times
    before dilation), and the rate its links were shaped to (UNSHAPED: none)."""
    config: Configuration
    result: Result
    profile_file: Path
    link_rate: str


Rows = dict[Configuration, list[tuple[float, float]]]  # per configuration: (measured, predicted) s per iteration


def model_input(run: ObservedRun, costs: StackCosts = StackCosts()) -> ModelInput:
    """What the model is given for a run: each layer's time from its profile times its dilation, the links at the
    rate they were shaped to (each host's egress only, as the testbed shapes them), the run's workers, servers, slice
    and ByteScheduler's knobs (its result's, else their defaults), and the policy of the configuration's variant, the study's (the run's own says only program:p3's VARIANT: slicing alone runs as p3 with P3_PRIORITY=0)."""
    profile = ComputeProfile.from_dict(json.loads(run.profile_file.read_text()), run.profile_file.name)
    result = run.result
    layers = layers_of(profile, run.config.dilation * late_compute(result))
    assert result.num_workers is not None and result.num_servers is not None
    knobs = result.bytescheduler or {}  # ByteScheduler's partition and credit as its core ran them
    return ModelInput(layers, result.num_workers, result.num_servers,
                      math.inf if run.link_rate == UNSHAPED else shaped_bps(run.link_rate),
                      VARIANT_POLICY[run.config.variant], slice_elements=result.p3_slice_size or 50_000,
                      stack_s_per_byte=costs.per_byte, stack_s_per_message=costs.per_message,
                      fifo_bytes=costs.fifo_bytes, ingress_shaped=False,
                      partition_elements=int(knobs.get("partition") or BYTESCHEDULER_PARTITION),
                      credit_elements=float(knobs.get("credit") or BYTESCHEDULER_CREDIT))


def late_compute(result: Result) -> float:
    """How late an emulated run's compute ran: the forward and backward seconds its workers measured per iteration
    (``compute_s_per_iter``, waits for pulls excluded; the mean of the workers) over the seconds its profile told them
    to wait (``emulated_wait_s_per_iter``). A measured input of the run, given to every variant alike: a worker's
    sleeps end late when its process is busy elsewhere (ByteScheduler's core and engine callbacks in Python take the
    interpreter's lock between them). 1 for a run that measured either not (a real run's layers are measured already)."""
    measured, told = result.compute_s_per_iter, result.emulated_wait_s_per_iter
    return measured / told if measured and told else 1.0


def measured_s(result: Result) -> float:
    """A run's iteration time: its batch over its workers' mean throughput."""
    assert result.batch_size is not None and result.throughput_per_worker
    return result.batch_size / statistics.mean(result.throughput_per_worker)


def compared(observed: Iterable[ObservedRun], costs: StackCosts = StackCosts()) -> Rows:
    """Each run's measured and predicted iteration time, by configuration."""
    rows: Rows = {}
    for run in observed:
        rows.setdefault(run.config, []).append((measured_s(run.result), simulate(model_input(run, costs)).iteration_s))
    return rows


def validation_folder(work: Path, model: str, rate: str, variant: str, repetition: int) -> Path:
    """Where benchmarks/model_validation.py keeps one run of a check (``rate``: the links' tc rate, or UNSHAPED)."""
    return work / f"{model}-{rate}-{variant}-{repetition}"


def validation_runs(work: Path) -> list[ObservedRun]:
    """The runs benchmarks/model_validation.py left in ``work`` (validation_folder), each with the per-layer compute
    its workers measured; a run without it (older versions measured none) is left out. Empty if there is none."""
    folders = [(d, d.name.split("-", 3)) for d in sorted(work.glob("*-*-*-*"))
               if (d / RESULT_FILE).is_file() and (d / MEASURED_FILE).is_file()]
    return [ObservedRun(Configuration(model, rate, variant), Result.load(d), d / MEASURED_FILE, rate)
            for d, (model, rate, variant, _) in folders]


def stored_emulated(roots: Iterable[Path], study: str) -> list[ObservedRun]:
    """Every emulated run stored in ``study``'s stores ``roots``, store by store, whose variant the model has a
    policy for (it has no optimizer, so not the worker-update baseline); empty if there is none."""
    return [run for root in roots for run in _stored_emulated(root, study)]


def _stored_emulated(root: Path, study: str) -> list[ObservedRun]:
    observed = []
    for record in Store(root, study).all_records():
        result = record.run_result if record.ok and record.emulated and record.run_folder else None
        if result is None or record.config.variant not in VARIANT_POLICY:
            continue
        link_rate = record.provenance.links_shaped_to
        if link_rate is None:  # an emulated sweep shapes every link to its bandwidth divided by k, and says so
            raise UserError(f"the emulated run {record.run_id} in {root} does not say the rate its links were shaped "
                            f"to (its provenance has no links_shaped_to)")
        config = Configuration(record.config.model, str(record.config.bandwidth), record.config.variant,
                               result.dilation or 1.0)
        observed.append(ObservedRun(config, result, root / str(record.run_folder) / PROFILE_FILE, link_rate))
    return observed


@dataclass(frozen=True)
class Errors:
    """Per configuration the mean measured and predicted iteration time and n, and per variant other than the
    baseline its speedup over the baseline measured and predicted; each error is predicted/measured - 1."""
    times: list[tuple[Configuration, int, float, float]]  # configuration, n, measured s, predicted s
    speedups: list[tuple[Configuration, float, float]]  # configuration, measured x, predicted x

    @staticmethod
    def of(rows: Rows) -> Errors:
        def mean(pairs: list[tuple[float, float]], i: int) -> float:
            return statistics.mean(p[i] for p in pairs)

        ordered = sorted(rows)
        times = [(c, len(rows[c]), mean(rows[c], 0), mean(rows[c], 1)) for c in ordered]
        speedups = [(c, mean(rows[c.baseline], 0) / mean(rows[c], 0), mean(rows[c.baseline], 1) / mean(rows[c], 1))
                    for c in ordered if c.variant != "baseline" and c.baseline in rows]
        return Errors(times, speedups)


def error(predicted: float, measured: float) -> float:
    return round(predicted / measured - 1, 4)


def interval_spreads(observed: Iterable[ObservedRun], rows: Rows) -> dict[Configuration, tuple[float, float, float]]:
    """Per configuration: its fastest interval (s per iteration, over every run and worker), the mean prediction's
    error against it, and the mean over runs and workers of the intervals' coefficient of variation."""
    fastest: dict[Configuration, float] = {}
    cvs: dict[Configuration, list[float]] = {}
    for run in observed:
        result = run.result
        assert result.batch_size and result.throughput_max and result.throughput_per_worker
        fastest[run.config] = min(fastest.get(run.config, math.inf), result.batch_size / result.throughput_max)
        cvs.setdefault(run.config, []).extend(std / mean for std, mean in zip(result.throughput_std_per_worker or [],
                                                                              result.throughput_per_worker))
    return {c: (fastest[c], statistics.mean(p[1] for p in pairs) / fastest[c] - 1,
                statistics.mean(cvs[c]) if cvs[c] else math.nan) for c, pairs in rows.items()}


def recorded_errors(observed: list[ObservedRun], costs: StackCosts) -> dict[str, list[dict[str, Any]]]:
    """A check's figures as the record keeps them: per configuration its n and iteration-time error (with
    ``costs`` and without), the error against its fastest interval and its intervals' cv; per speedup its error."""
    rows, bare = compared(observed, costs), compared(observed)
    spreads = interval_spreads(observed, rows)
    with_costs, without = Errors.of(rows), Errors.of(bare)
    configurations = [{**c.to_dict(), "n": n, "iteration_time_error": error(pred, meas),
                       "without_stack_costs": error(bare_pred, meas),
                       "error_against_fastest": round(spreads[c][1], 4), "cv": round(spreads[c][2], 4)}
                      for (c, n, meas, pred), (_, _, _, bare_pred) in zip(with_costs.times, without.times)]
    speedups = [{**c.to_dict(), "error": error(pred, meas), "without_stack_costs": error(bare_pred, meas)}
                for (c, meas, pred), (_, _, bare_pred) in zip(with_costs.speedups, without.speedups)]
    return {"configurations": configurations, "speedups": speedups}


@dataclass(frozen=True)
class ModelValidation:
    """``study/model_validation.json``: the iteration model against runs (benchmarks/model_validation.py), and the
    stack costs of a testbed host with one core of its own, the most a predicted verdict allows the paper's hosts."""
    iteration_bar: float  # |predicted/measured - 1| of the iteration time
    speedup_bar: float  # the same of P3's speedup over the baseline
    checks: tuple[Mapping[str, Any], ...]  # each: "against", where its runs ran, "configurations", "speedups"
    stack_s_per_byte: float
    stack_s_per_message: float
    fifo_bytes: float = 0.0  # a testbed host's egress below the van's order: the most a predicted verdict allows

    @classmethod
    def stored(cls) -> ModelValidation:
        data = json.loads(resources.files("reprokit.study.whatif").joinpath("model_validation.json").read_text())
        return cls(float(data["bars"]["iteration_time"]), float(data["bars"]["speedup"]), tuple(data["checks"]),
                   float(data["stack_costs"]["per_byte_s"]), float(data["stack_costs"]["per_message_s"]),
                   float(data["stack_costs"].get("fifo_bytes", 0.0)))

    def within(self) -> list[Mapping[str, Any]]:
        """The checks inside the model's assumptions (docs/explanation/iteration-model.md) that no later check repeats.
        Each host's egress is shared evenly among the hosts it sends to: links shared fairly (ck testbed
        --link_sharing=fair), or 2 hosts (one destination each, so one queue is as even); on one queue per host with
        more destinations TCP's flows share it unevenly. A host's compute is not slowed by other hosts' work: emulated
        compute (waits), or hosts with cores of their own; real compute on hosts that share cores takes turns with the
        other hosts' network stacks. A check that another one ``repeats`` (the same runs on Linux's default TCP, cubic,
        where it ran on this machine's bbr) is kept in the record and judged no more: the repetition is."""
        repeated = {c["repeats"] for c in self.checks if c.get("repeats")}
        return [c for c in self.checks if c["against"] not in repeated
                and (c["links"] == "fair" or int(c["hosts"]) <= 2) and (c["compute"] == "emulated" or c["cores"] == "own")]

    def missed(self, hosts: int = 0, variants: Collection[str] = (), model: str = "", gpu: str = "") -> list[str]:
        """Each check inside the model's assumption whose errors are not all within the bars, said in a few words;
        and, when none of them has at least ``hosts`` hosts, that too. Empty: validated. ``variants`` and
        ``model``: judge only the configurations of these variants of this model and their speedups (a claim's
        variant and its baseline, of the claim's network: the model's error depends on the network's layers);
        every one when empty. ``gpu``: a predicted verdict at this GPU's compute also needs a check that ran at it
        (a check's ``gpu``: the profile its emulated runs waited, or "measured" for real compute): how much of the
        communication the compute can hide decides the speedup, and a check at one GPU's compute does not vouch for
        another's."""
        def judged(row: Mapping[str, Any]) -> bool:
            return (not variants or row["variant"] in variants) and (not model or row["model"] == model)

        out = []
        relevant = []
        for c in self.within():
            times = [r["iteration_time_error"] for r in c["configurations"] if judged(r)]
            speedups = [r["error"] for r in c["speedups"] if judged(r)]
            if not times and not speedups:
                continue
            relevant.append(c)
            inside = (sum(abs(e) <= self.iteration_bar for e in times), sum(abs(e) <= self.speedup_bar for e in speedups))
            if inside != (len(times), len(speedups)):
                out.append(f"{c['against']}: iteration time within {self.iteration_bar:.0%} in {inside[0]} of "
                           f"{len(times)}, speedup within {self.speedup_bar:.0%} in {inside[1]} of {len(speedups)}")
        if hosts and not any(int(c["hosts"]) >= hosts for c in relevant):
            out.append(f"no check inside the model's assumptions has {hosts} hosts")
        at_gpu = [c for c in relevant if c["gpu"] == gpu]
        if gpu and not at_gpu:
            held = sorted({str(c["gpu"]) for c in relevant})
            out.append(f"no check inside the model's assumptions ran at the {gpu} profile's compute (they ran at "
                       f"{', '.join(held) or 'none'})")
        elif gpu:  # and there, each of the claim's variants: a baseline's check does not vouch for the variant
            ran = {r["variant"] for c in at_gpu for r in c["configurations"] if judged(r)}
            lacking = [v for v in variants if v not in ran]
            if lacking:
                out.append(f"no check at the {gpu} profile's compute ran {' or '.join(lacking)}")
        return out
