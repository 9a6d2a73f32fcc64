"""The iteration model (study/iteration_model.py) against real runs on a testbed (needs root and sshd).

    .venv/bin/python benchmarks/model_validation.py [--repetitions 3] [--models resnet,vgg]
                                                    [--bandwidths 300mbit,1gbit] [--hosts 3] [--cpus_per_host C]
                                                    [--link_sharing fifo|fair]

--hosts: the testbed's hosts, a worker and a server on each (3 by default). --cpus_per_host C pins each host to C
CPUs of its own (`ck testbed --cpus_per_host`), so hosts do not compete for cores as they do by default; e.g.
`--hosts 2 --cpus_per_host 1` on a 2-core machine.

For each model, bandwidth (tc on every host's link) and variant (baseline, p3), interleaved over repetitions:
one `ck run program:p3 --target=mv3` with the smoke profile (a worker and a server per host, batch 32,
3x32x32), with TIMELINE=1. The model is given what the run measured of itself, nothing fitted: each layer's
forward and backward time as the workers' probes measured it inside the run (measured-compute.json, the mean of the
workers), the shaped bandwidth, the run's workers and co-located servers, the run's slice size and the policy. Prints, per configuration, the measured iteration
time (batch / mean per-worker throughput; mean over runs, n stated) beside the predicted one and their error,
then P3's speedup measured and predicted. The issue's bar: 10% for throughput, 15% for the speedup.

    .venv/bin/python benchmarks/model_validation.py --again WORK

predicts again, with the model as it is now, the runs an earlier run left in its folder WORK (it prints it).

    .venv/bin/python benchmarks/model_validation.py --emulated STORE [STORE ...]

runs nothing: it predicts every emulated run stored in study stores (`ck reproduce ... --emulate`, e.g.
benchmarks/emulated_sweep.py) from what that run was given: its profile (emulated-compute.json in its run folder)
with every layer times k, the link rate it ran at (the bandwidth divided by k), its workers and servers, its slice
size and its variant's policy; and compares with its measured iteration time (batch / mean per-worker throughput).

    .venv/bin/python benchmarks/model_validation.py --stack [--repetitions 3] [--models resnet,vgg]

measures the hosts' own cost of communication, apart from every run above: on the same testbed with unshaped
links, runs whose every layer waits the V100 profile divided by 1000 (so communication alone sets the pace), then
fits the model's two stack costs (per payload byte and per message, ModelInput.stack_s_*) to them by least squares
and writes them to WORK/stack.json. `--costs WORK/stack.json` adds them to any of the modes above.

    ... --again WORK | --emulated STORE ... [--costs STACK_JSON] --record AGAINST

writes the errors it prints, and the same without the stack costs, into the check AGAINST of
src/reprokit/study/model_validation.json (the check must be there, with what it says of its runs), so that the record's
figures are this script's output, never copied by hand.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from scipy.optimize import least_squares

from reprokit.bootstrap import CPUS_PER_HOST_HELP, LINK_SHARING_HELP, ck as ck_cli, isolated_ck, testbed_up
from reprokit.cluster.testbed import DEFAULT_LINK_SHARING, LINK_SHARING
from reprokit.emulation.profile import MEASURED_FILE, PROFILE_FILE, ComputeProfile
from reprokit.run.result import RESULT_FILE, Result
from reprokit.study.store import Store
from reprokit.study.iteration_model import VARIANT_POLICY as POLICY, Layer, ModelInput, simulate
from reprokit.study.rates import shaped_bps

CK = str(Path(sys.executable).with_name("ck"))
NAME = "mv3"
BATCHES = ["--env.NUM_BATCHES=11", "--env.DISP_BATCHES=2"]
RUN = [*BATCHES, "--env.TIMELINE=1"]
UNSHAPED = "off"  # ck testbed --shape=off: the links as the kernel gives them
# Communication alone: every layer waits the V100 profile's time divided by 1000 (microseconds).
NO_COMPUTE = [*BATCHES, "--env.COMPUTE=emulated", "--env.COMPUTE_PROFILE=v100", "--env.DILATION=0.001"]
VALIDATED = ("baseline", "p3")  # the variants the testbed runs
STUDY = "sysml19-p3"


Key = tuple[str, str, str]  # model, bandwidth, variant
Rows = dict[Key, list[tuple[float, float]]]  # per configuration: (measured, predicted) s per iteration, per run


def one_run(env: dict, model: str, variant: str, run_dir: Path, settings: Sequence[str] = tuple(RUN)) -> Result:
    proc = subprocess.run([CK, "run", "program:p3", f"--cmd_key={model}", f"--target={NAME}",
                           f"--env.VARIANT={variant}", *settings, f"--tmp_dir={run_dir}",
                           "--treat_return_code_as_exit_code=yes"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark: {model} {variant} failed:\n{proc.stdout[-2000:]}")
    return Result.load(run_dir)


@dataclass(frozen=True)
class StackCosts:
    """The hosts' own cost per payload byte and per message (ModelInput.stack_s_*), as --stack measured it."""
    per_byte: float = 0.0
    per_message: float = 0.0


def model_input(result: Result, variant: str, profile_file: Path, link_rate: str, dilation: float = 1.0,
                costs: StackCosts = StackCosts()) -> ModelInput:
    """What the model is given for a run: each layer's time from ``profile_file`` times ``dilation``, the links at
    ``link_rate`` (the rate they were shaped to; off: none), the run's workers, servers and slice, and the policy of
    ``variant``, the study's (the run's own says only program:p3's VARIANT: slicing alone runs as p3 with
    P3_PRIORITY=0)."""
    profile = ComputeProfile.from_dict(json.loads(profile_file.read_text()), profile_file.name)
    layers = tuple(Layer(x.name, x.forward_s * dilation, x.backward_s * dilation, x.arrays) for x in profile.layers)
    assert result.num_workers is not None and result.num_servers is not None and result.variant is not None
    return ModelInput(layers, result.num_workers, result.num_servers,
                      math.inf if link_rate == UNSHAPED else shaped_bps(link_rate), POLICY[variant],
                      slice_elements=result.p3_slice_size or 50_000, stack_s_per_byte=costs.per_byte,
                      stack_s_per_message=costs.per_message)


def predicted_s(result: Result, variant: str, profile_file: Path, link_rate: str, dilation: float = 1.0,
                costs: StackCosts = StackCosts()) -> float:
    return simulate(model_input(result, variant, profile_file, link_rate, dilation, costs)).iteration_s


def measured_s(result: Result) -> float:
    assert result.batch_size is not None and result.throughput_per_worker
    return result.batch_size / statistics.mean(result.throughput_per_worker)


def compared(observed: Iterable[tuple[Key, Result, Path, str, float]], costs: StackCosts) -> Rows:
    """Each run's measured and predicted iteration time, by configuration. ``observed``: per run its configuration,
    result, the profile it computed or waited, the rate its links were shaped to, and its dilation k."""
    rows: Rows = {}
    for key, result, profile_file, link_rate, dilation in observed:
        rows.setdefault(key, []).append((measured_s(result),
                                         predicted_s(result, key[2], profile_file, link_rate, dilation, costs)))
    return rows


Observed = list[tuple[Key, Result, Path, str, float]]  # per run: see compared()


def stored_again(work: Path) -> Observed:
    """The runs an earlier run of this benchmark left in ``work`` (folders MODEL-RATE-VARIANT-REP)."""
    folders = [(d, d.name.split("-", 3)) for d in sorted(work.glob("*-*-*-*"))
               if (d / RESULT_FILE).is_file() and (d / MEASURED_FILE).is_file()]  # older runs measured no profile
    observed = [((model, rate, variant), Result.load(d), d / MEASURED_FILE, rate, 1.0)
                for d, (model, rate, variant, _) in folders]
    if not observed:
        raise SystemExit(f"benchmark: no runs of this benchmark are in {work}")
    return observed


def stored_emulated(root: Path) -> Observed:
    """Every emulated run stored in the study store ``root`` whose variant the model has a policy for."""
    runs = [(r, r.run_result) for r in Store(root, STUDY).all_records()
            if r.ok and r.emulated and r.run_folder and r.config.variant in POLICY]  # the model has no optimizer
    observed = [((r.config.model, r.config.bandwidth, r.config.variant), result,
                 root / str(r.run_folder) / PROFILE_FILE, r.provenance["links_shaped_to"], result.dilation or 1.0)
                for r, result in runs if result is not None]
    if not observed:
        raise SystemExit(f"benchmark: no emulated runs are stored in {root}")
    return observed


def predict_again(observed: Observed, heading: str, costs: StackCosts, record: str | None) -> int:
    """Predict ``observed`` with the model as it is now, print the errors, and with ``record`` write them (with
    and without the stack costs) as that check of the validation record (runs nothing)."""
    rows = compared(observed, costs)
    print(f"{heading}{stack_clause(costs)}")
    report(rows)
    spreads = interval_spreads(observed, rows)
    print("\nper configuration: the runs' speedometer intervals (steady state, every worker): the fastest, and the "
          "mean coefficient of variation of each worker's intervals; the model predicts an undisturbed iteration")
    for (model, rate, variant), (fastest, error, cv) in spreads.items():
        print(f"{model:7s} {rate:9s}  {variant:16s} fastest {fastest:8.3f} s (predicted {error:+6.1%})  cv {cv:5.1%}")
    if record:
        write_check(record, observed, rows, compared(observed, StackCosts()), spreads)
    return 0


def interval_spreads(observed: Observed, rows: Rows) -> dict[Key, tuple[float, float, float]]:
    """Per configuration: its fastest interval (s per iteration, over every run and worker), the mean prediction's
    error against it, and the mean over runs and workers of the intervals' coefficient of variation."""
    fastest: dict[Key, float] = {}
    cvs: dict[Key, list[float]] = {}
    for key, result, *_ in observed:
        assert result.batch_size and result.throughput_max and result.throughput_per_worker
        fastest[key] = min(fastest.get(key, math.inf), result.batch_size / result.throughput_max)
        cvs.setdefault(key, []).extend(std / mean for std, mean in zip(result.throughput_std_per_worker or [],
                                                                       result.throughput_per_worker))
    return {key: (fastest[key], statistics.mean(p[1] for p in pairs) / fastest[key] - 1,
                  statistics.mean(cvs[key]) if cvs[key] else math.nan) for key, pairs in rows.items()}


VALIDATION_RECORD = Path(__file__).resolve().parents[1] / "src" / "reprokit" / "study" / "model_validation.json"


def placeholders(argv: Sequence[str]) -> list[str]:
    """``argv`` with this machine's folders named by what they hold (WORK, STORE, STACK_JSON)."""
    names = {"--again": "WORK", "--emulated": "STORE", "--costs": "STACK_JSON"}
    out, current = [], None
    for arg in argv:
        if arg.startswith("--"):
            current = names.get(arg)
            out.append(arg)
        else:
            out.append(current or arg)
    return out


def write_check(against: str, observed: Observed, rows: Rows, without_costs: Rows,
                spreads: dict[Key, tuple[float, float, float]]) -> None:
    """Write the errors of ``rows`` (and of ``without_costs``) into the check ``against`` of the validation record,
    keeping what it says of the runs (command, measured_on, settings); predicted_by is this command."""
    dilation = {key: k for key, *_, k in observed}
    names = {key: " ".join(key) + (f" (k={dilation[key]:g})" if dilation[key] != 1 else "") for key in rows}
    ordered = dict(sorted(rows.items()))
    errors, bare = Errors.of(ordered), Errors.of({key: without_costs[key] for key in ordered})
    data = json.loads(VALIDATION_RECORD.read_text())
    check = next((c for c in data["checks"] if c["against"] == against), None)
    if check is None:
        known = "; ".join(repr(c["against"]) for c in data["checks"])
        raise SystemExit(f"benchmark: {VALIDATION_RECORD.name} has no check {against!r} (it has {known}); add its "
                         f"against, measured_on and settings there first")
    check.update({"predicted_by": " ".join(map(shlex.quote, [".venv/bin/python", "benchmarks/model_validation.py",
                                                               *placeholders(sys.argv[1:])])),
                  "configurations": [names[key] for key, *_ in errors.times],
                  "models": [model for (model, _, _), *_ in errors.times],
                  "variants": [variant for (_, _, variant), *_ in errors.times],
                  "speedup_models": [model for (model, _, _), *_ in errors.speedups],
                  "speedup_variants": [variant for (_, _, variant), *_ in errors.speedups],
                  "n": [n for _, n, *_ in errors.times],
                  "iteration_time_errors": errors.time_errors(), "speedup_errors": errors.speedup_errors(),
                  "without_stack_costs": {"iteration_time_errors": bare.time_errors(),
                                          "speedup_errors": bare.speedup_errors()},
                  "intervals": {"what": "not part of the check: the error against each configuration's fastest "
                                        "interval, and its intervals' mean coefficient of variation",
                                "errors_against_fastest": [round(spreads[key][1], 4) for key in ordered],
                                "cv": [round(spreads[key][2], 4) for key in ordered]}})
    VALIDATION_RECORD.write_text(json.dumps(data, indent=1) + "\n")
    print(f"\nrecorded as the check {against!r} of {VALIDATION_RECORD}")


@dataclass(frozen=True)
class Errors:
    """Per configuration the mean measured and predicted iteration time and n, and per variant other than the
    baseline its speedup over the baseline measured and predicted; each error is predicted/measured - 1."""
    times: list[tuple[Key, int, float, float]]  # configuration, n, measured s, predicted s
    speedups: list[tuple[Key, float, float]]  # configuration, measured x, predicted x

    @staticmethod
    def of(rows: Rows) -> Errors:
        times = [(key, len(pairs), *(statistics.mean(p[i] for p in pairs) for i in (0, 1)))
                 for key, pairs in rows.items()]
        speedups = []
        for (model, rate, variant), pairs in rows.items():
            base = rows.get((model, rate, "baseline"))
            if variant == "baseline" or base is None:
                continue
            speedups.append(((model, rate, variant),
                             *(statistics.mean(p[i] for p in base) / statistics.mean(p[i] for p in pairs)
                               for i in (0, 1))))
        return Errors(times, speedups)

    def time_errors(self) -> list[float]:
        return [round(pred / meas - 1, 4) for _, _, meas, pred in self.times]

    def speedup_errors(self) -> list[float]:
        return [round(pred / meas - 1, 4) for _, meas, pred in self.speedups]


def report(rows: Rows) -> None:
    """Per configuration the mean measured and predicted iteration time, then each variant's speedup over the
    baseline measured and predicted."""
    errors = Errors.of(rows)
    print("\nper configuration: mean over n runs (s/iteration), error = predicted/measured - 1")
    print("model   bandwidth  variant           n  measured  predicted   error")
    for (model, rate, variant), n, meas, pred in errors.times:
        print(f"{model:7s} {rate:9s}  {variant:16s} {n:2d} {meas:9.3f} {pred:10.3f} {pred / meas - 1:+7.1%}")
    print("\nspeedup over the baseline (baseline s / variant s): measured against predicted (bar: 15%)")
    for (model, rate, variant), meas, pred in errors.speedups:
        print(f"  {model:7s} {rate:9s} {variant:16s} measured {meas:.3f}x  predicted {pred:.3f}x  "
              f"error {pred / meas - 1:+.1%}")


def stack_clause(costs: StackCosts) -> str:
    return (f", with the hosts' stack at {costs.per_byte * 1e9:.3f} ns per byte and {costs.per_message * 1e6:.1f} us "
            f"per message" if costs != StackCosts() else "")


def read_costs(path: str | None) -> StackCosts:
    if not path:
        return StackCosts()
    data = json.loads(Path(path).read_text())
    return StackCosts(float(data["stack_s_per_byte"]), float(data["stack_s_per_message"]))


def fitted_costs(runs: list[tuple[str, Result, Path]]) -> StackCosts:
    """The per-byte and per-message costs with which the model best predicts ``runs`` (no compute, no shaping):
    least squares over the runs' log errors, both costs >= 0."""
    inputs = [(model_input(result, variant, profile, UNSHAPED, result.dilation or 1.0), measured_s(result))
              for variant, result, profile in runs]

    def log_errors(x: Sequence[float]) -> list[float]:
        costs = {"stack_s_per_byte": x[0] * 1e-9, "stack_s_per_message": x[1] * 1e-6}  # scaled near 1
        return [math.log(simulate(replace(spec, **costs)).iteration_s / measured) for spec, measured in inputs]

    fit = least_squares(log_errors, x0=[1.0, 10.0], bounds=([0.0, 0.0], [math.inf, math.inf]), diff_step=1e-3)
    return StackCosts(fit.x[0] * 1e-9, fit.x[1] * 1e-6)


def stack(env: dict, work: Path, models: list[str], repetitions: int, testbed: str) -> int:
    """Measure the hosts' own cost of communication: runs with (almost) no compute on unshaped links, so the
    stack sets the pace; then fit the model's per-byte and per-message costs to them, and write them to
    WORK/stack.json (``--costs`` reads it)."""
    ck_cli("testbed", f"cluster:{NAME}", "--shape=off", env=env, check=True)
    configs = [(m, v) for m in models for v in VALIDATED]
    runs: list[tuple[str, Result, Path]] = []  # variant, result, profile
    for rep in range(repetitions):
        for model, variant in (configs if rep % 2 == 0 else list(reversed(configs))):
            run_dir = work / f"{model}-{UNSHAPED}-{variant}-{rep}"
            result = one_run(env, model, variant, run_dir, NO_COMPUTE)
            runs.append((variant, result, run_dir / PROFILE_FILE))
            print(f"rep {rep + 1} {model} {variant}: {measured_s(result):.3f} s/iteration", flush=True)
    costs = fitted_costs(runs)
    (work / "stack.json").write_text(json.dumps(
        {"stack_s_per_byte": costs.per_byte, "stack_s_per_message": costs.per_message,
         "measured": "runs with no compute (COMPUTE=emulated, v100 profile, DILATION 0.001) on unshaped links, "
                     f"{NAME}: {testbed}",
         "load_average_at_end": os.getloadavg()}, indent=1) + "\n")
    print(f"\nfitted{stack_clause(costs)} (written to {work / 'stack.json'})")
    report(compared([((r.model or "", UNSHAPED, v), r, p, UNSHAPED, r.dilation or 1.0) for v, r, p in runs], costs))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--models", default="resnet,vgg")
    parser.add_argument("--bandwidths", default="300mbit,1gbit")
    parser.add_argument("--emulated", metavar="STORE", nargs="+",
                        help="predict the emulated runs of these study stores instead")
    parser.add_argument("--again", metavar="WORK", help="predict again the runs an earlier run left in WORK")
    parser.add_argument("--stack", action="store_true",
                        help="measure the hosts' stack costs (no compute, unshaped) and fit them instead")
    parser.add_argument("--costs", metavar="STACK_JSON", help="predict with the stack costs --stack wrote")
    parser.add_argument("--record", metavar="AGAINST", help="with --again or --emulated: write the errors (with and "
                        "without --costs) into that check of src/reprokit/study/model_validation.json")
    parser.add_argument("--hosts", type=int, default=3, help="testbed hosts (a worker and a server on each)")
    parser.add_argument("--cpus_per_host", type=int, help=CPUS_PER_HOST_HELP)
    parser.add_argument("--link_sharing", choices=LINK_SHARING, default=DEFAULT_LINK_SHARING, help=LINK_SHARING_HELP)
    args = parser.parse_args()
    costs = read_costs(args.costs)
    if args.emulated:
        return predict_again([run for store in args.emulated for run in stored_emulated(Path(store))],
                             f"emulated runs of {', '.join(args.emulated)}; bandwidth: the paper's (links shaped to "
                             f"it divided by k)", costs, args.record)
    if args.again:
        return predict_again(stored_again(Path(args.again)), f"the runs of {args.again}, predicted again", costs,
                             args.record)
    if args.record:
        raise SystemExit("benchmark: --record writes what --again or --emulated predicts; give one of them")
    if os.geteuid() != 0:
        raise SystemExit("benchmark: needs root (network namespaces)")
    models, rates = args.models.split(","), args.bandwidths.split(",")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    work, env = isolated_ck("model-validation-")
    print(f"runs kept in {work} (--again {work} predicts them again)", flush=True)
    testbed_up(NAME, args.hosts, args.cpus_per_host, env, args.link_sharing)
    state = Path(env["CK_TOOLS"]) / f"testbed-{NAME}"
    testbed = (f"{args.hosts} hosts" + (f" pinned to {args.cpus_per_host} CPU(s) each" if args.cpus_per_host else
                                        f" sharing {os.cpu_count()} CPUs")
               + f", links shared {args.link_sharing}, {args.hosts} workers, {args.hosts} co-located servers, "
                 f"smoke profile")
    print(f"testbed {NAME}: {testbed}", flush=True)
    rows: Rows = {}
    try:
        ck_cli("add", f"machine:{NAME}", "--type=cluster", f"--config_file={state / 'hosts.json'}", "--quiet",
               env=env, check=True)
        if args.stack:
            return stack(env, work, models, args.repetitions, testbed)
        configs = [(m, r, v) for m in models for r in rates for v in VALIDATED]
        for rep in range(args.repetitions):
            for model, rate, variant in (configs if rep % 2 == 0 else list(reversed(configs))):
                ck_cli("testbed", f"cluster:{NAME}", f"--shape={rate}", env=env, check=True)
                run_dir = work / f"{model}-{rate}-{variant}-{rep}"
                result = one_run(env, model, variant, run_dir)
                pair = (measured_s(result), predicted_s(result, variant, run_dir / MEASURED_FILE, rate, costs=costs))
                rows.setdefault((model, rate, variant), []).append(pair)
                print(f"rep {rep + 1} {model} {rate} {variant}: measured {pair[0]:.3f} s/iteration, predicted "
                      f"{pair[1]:.3f} s ({pair[1] / pair[0] - 1:+.1%})", flush=True)
    finally:
        subprocess.run([CK, "testbed", f"cluster:{NAME}", "--down"], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
