"""The iteration model (study/iteration_model.py) against real runs on a testbed (needs root and sshd).

    .venv/bin/python benchmarks/model_validation.py [--repetitions 3] [--models resnet,vgg]
                                                    [--bandwidths 300mbit,1gbit] [--hosts 3] [--cpus_per_host C]
                                                    [--link_sharing fifo|fair] [--tcp cubic]

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
size (or ByteScheduler's partition and credit) and its variant's policy; and compares with its measured iteration
time (batch / mean per-worker throughput). Each store is read as the study its origin names (sysml19-p3,
sosp19-bytescheduler, ...).

    .venv/bin/python benchmarks/model_validation.py --stack [--repetitions 3] [--models resnet,vgg]

measures the hosts' own cost of communication, apart from every run above: on the same testbed with unshaped
links, runs whose every layer waits the V100 profile divided by 1000 (so communication alone sets the pace), then
fits the model's two stack costs (per payload byte and per message, ModelInput.stack_s_*) to them by least squares
and writes them to WORK/stack.json. `--costs WORK/stack.json` adds them to any of the modes above.

    ... --again WORK | --emulated STORE ... [--costs STACK_JSON] --record AGAINST

writes the errors it prints, and the same without the stack costs, into the check AGAINST of
src/reprokit/study/whatif/model_validation.json (the check must be there, with what it says of its runs), so that the record's
figures are this script's output, never copied by hand.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from scipy.optimize import least_squares

from reprokit.bootstrap import CPUS_PER_HOST_HELP, LINK_SHARING_HELP, TCP_HELP, ck as ck_cli, isolated_ck, testbed_up
from reprokit.cluster.testbed import DEFAULT_LINK_SHARING, LINK_SHARING
from reprokit.emulation.profile import MEASURED_FILE, PROFILE_FILE
from reprokit.run.result import Result
from reprokit.study.store.records import Origin
from reprokit.study.whatif import model_check as model_check_module
from reprokit.study.whatif.iteration_model import VARIANT_POLICY, Policy, simulate, simulate_hosts
from reprokit.study.whatif.model_check import (
    UNSHAPED,
    Configuration,
    Errors,
    ObservedRun,
    Rows,
    StackCosts,
    compared,
    interval_spreads,
    measured_s,
    model_input,
    recorded_errors,
    stored_emulated,
    validation_folder,
    validation_runs,
)

CK = str(Path(sys.executable).with_name("ck"))
NAME = "mv3"
STUDY = "sysml19-p3"  # the study of the testbed's runs, and of a store without an origin
BATCHES = ["--env.NUM_BATCHES=11", "--env.DISP_BATCHES=2"]
RUN = [*BATCHES, "--env.TIMELINE=1"]
# Communication alone: every layer waits the V100 profile's time divided by 1000 (microseconds).
NO_COMPUTE = [*BATCHES, "--env.COMPUTE=emulated", "--env.COMPUTE_PROFILE=v100", "--env.DILATION=0.001"]
VALIDATED = ("baseline", "p3")  # the variants the testbed runs


def one_run(env: dict, model: str, variant: str, run_dir: Path, settings: Sequence[str] = tuple(RUN)) -> Result:
    proc = subprocess.run([CK, "run", "program:p3", f"--cmd_key={model}", f"--target={NAME}",
                           f"--env.VARIANT={variant}", *settings, f"--tmp_dir={run_dir}",
                           "--treat_return_code_as_exit_code=yes"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark: {model} {variant} failed:\n{proc.stdout[-2000:]}")
    return Result.load(run_dir)


def stored_again(work: Path) -> list[ObservedRun]:
    """The runs an earlier run of this benchmark left in ``work``."""
    observed = validation_runs(work)
    if not observed:
        raise SystemExit(f"benchmark: no runs of this benchmark are in {work}")
    return observed


def emulated_in(stores: list[str]) -> list[ObservedRun]:
    """The emulated runs of ``stores``, each store read as the study its origin names (sysml19-p3's, or another's
    such as sosp19-bytescheduler)."""
    observed = [run for store in stores for run in stored_emulated([Path(store)], store_study(Path(store)))]
    if not observed:
        raise SystemExit(f"benchmark: no emulated runs are stored in {', '.join(stores)}")
    return observed


def store_study(root: Path) -> str:
    """The study a store holds (its origin.json), or STUDY for a store that has none yet."""
    origin = root / "origin.json"
    if not origin.is_file():
        return STUDY
    return str(Origin.from_dict(json.loads(origin.read_text()), f"the store's origin {origin}").study)


def predict_again(observed: list[ObservedRun], heading: str, costs: StackCosts, record: str | None) -> int:
    """Predict ``observed`` with the model as it is now, print the errors, and with ``record`` write them (with
    and without the stack costs) as that check of the validation record (runs nothing)."""
    rows = compared(observed, costs)
    print(f"{heading}{stack_clause(costs)}")
    report(rows)
    spreads = interval_spreads(observed, rows)
    print("\nper configuration: the runs' speedometer intervals (steady state, every worker): the fastest, and the "
          "mean coefficient of variation of each worker's intervals; the model predicts an undisturbed iteration")
    for c, (fastest, error, cv) in sorted(spreads.items()):
        print(f"{c.model:7s} {c.bandwidth:9s}  {c.variant:16s} fastest {fastest:8.3f} s (predicted {error:+6.1%})  "
              f"cv {cv:5.1%}")
    both_simulators(observed, rows, costs)
    if record:
        write_check(record, observed, costs)
    return 0


def both_simulators(observed: list[ObservedRun], rows: Rows, costs: StackCosts) -> None:
    """Where a scheduled policy ran (ByteScheduler: simulated host by host only), the baseline beside it simulated
    both ways, averaged (as its prediction in ``rows``, compared's, is) and host by host (as the scheduled variant's
    is), with the speedup each gives: a diagnosis of which simulator a miss comes from."""
    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    settings = {(r.config.model, r.config.bandwidth, r.config.dilation) for r in observed
                if VARIANT_POLICY.get(r.config.variant, Policy.BASELINE).scheduled}
    if not settings:
        return
    print("\nthe baseline simulated both ways beside each scheduled variant (s/iteration; means over the runs):")
    print("model   bandwidth  baseline measured  averaged  host by host  variant          measured  predicted  "
          "speedup measured  vs averaged  vs host by host")
    for model, bandwidth, dilation in sorted(settings):
        mine = [r for r in observed if (r.config.model, r.config.bandwidth, r.config.dilation) == (model, bandwidth,
                                                                                                   dilation)]
        base = [r for r in mine if r.config.variant == "baseline"]
        if not base:
            continue
        measured_base = mean([measured for measured, _ in rows[base[0].config]])
        averaged = mean([predicted for _, predicted in rows[base[0].config]])
        by_host = mean([simulate_hosts(model_input(r, costs)).iteration_s for r in base])
        for variant in sorted({r.config.variant for r in mine if VARIANT_POLICY.get(r.config.variant,
                                                                                    Policy.BASELINE).scheduled}):
            config = next(r.config for r in mine if r.config.variant == variant)
            measured_v = mean([measured for measured, _ in rows[config]])
            predicted_v = mean([predicted for _, predicted in rows[config]])
            print(f"{model:7s} {bandwidth:9s}  {measured_base:17.3f} {averaged:9.3f} {by_host:13.3f}  {variant:16s} "
                  f"{measured_v:8.3f} {predicted_v:10.3f}  {measured_base / measured_v:15.3f}x "
                  f"{averaged / predicted_v:11.3f}x {by_host / predicted_v:15.3f}x")


VALIDATION_RECORD = Path(model_check_module.__file__).with_name("model_validation.json")  # the record the library reads


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


def write_check(against: str, observed: list[ObservedRun], costs: StackCosts) -> None:
    """Write the errors of ``observed`` predicted with ``costs`` (and without) into the check ``against`` of the
    validation record, keeping what it says of the runs (command, measured_on, settings); predicted_by is this
    command."""
    data = json.loads(VALIDATION_RECORD.read_text())
    check = next((c for c in data["checks"] if c["against"] == against), None)
    if check is None:
        known = "; ".join(repr(c["against"]) for c in data["checks"])
        raise SystemExit(f"benchmark: {VALIDATION_RECORD.name} has no check {against!r} (it has {known}); add its "
                         f"against, measured_on and settings there first")
    check.update({"predicted_by": " ".join(map(shlex.quote, [".venv/bin/python", "benchmarks/model_validation.py",
                                                               *placeholders(sys.argv[1:])])),
                  **recorded_errors(observed, costs)})
    VALIDATION_RECORD.write_text(json.dumps(data, indent=1) + "\n")
    print(f"\nrecorded as the check {against!r} of {VALIDATION_RECORD}")


def report(rows: Rows) -> None:
    """Per configuration the mean measured and predicted iteration time, then each variant's speedup over the
    baseline measured and predicted."""
    errors = Errors.of(rows)
    print("\nper configuration: mean over n runs (s/iteration), error = predicted/measured - 1")
    print("model   bandwidth  variant           n  measured  predicted   error")
    for c, n, meas, pred in errors.times:
        print(f"{c.model:7s} {c.bandwidth:9s}  {c.variant:16s} {n:2d} {meas:9.3f} {pred:10.3f} {pred / meas - 1:+7.1%}")
    print("\nspeedup over the baseline (baseline s / variant s): measured against predicted (bar: 15%)")
    for c, meas, pred in errors.speedups:
        print(f"  {c.model:7s} {c.bandwidth:9s} {c.variant:16s} measured {meas:.3f}x  predicted {pred:.3f}x  "
              f"error {pred / meas - 1:+.1%}")


def stack_clause(costs: StackCosts) -> str:
    return (f", with the hosts' stack at {costs.per_byte * 1e9:.3f} ns per byte and {costs.per_message * 1e6:.1f} us "
            f"per message and {costs.fifo_bytes / 1e6:g} MB below the van's order per host"
            if costs != StackCosts() else "")


def read_costs(path: str | None) -> StackCosts:
    if not path:
        return StackCosts()
    data = json.loads(Path(path).read_text())
    return StackCosts(float(data["stack_s_per_byte"]), float(data["stack_s_per_message"]),
                      float(data.get("fifo_bytes", 0.0)))


def fitted_costs(runs: list[ObservedRun]) -> StackCosts:
    """The per-byte and per-message costs with which the model best predicts ``runs`` (no compute, no shaping):
    least squares over the runs' log errors, both costs >= 0."""
    inputs = [(model_input(run), measured_s(run.result)) for run in runs]

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
    runs: list[ObservedRun] = []
    for rep in range(repetitions):
        for model, variant in (configs if rep % 2 == 0 else list(reversed(configs))):
            run_dir = validation_folder(work, model, UNSHAPED, variant, rep)
            result = one_run(env, model, variant, run_dir, NO_COMPUTE)
            runs.append(ObservedRun(Configuration(model, UNSHAPED, variant, result.dilation or 1.0), result,
                                    run_dir / PROFILE_FILE, UNSHAPED))
            print(f"rep {rep + 1} {model} {variant}: {measured_s(result):.3f} s/iteration", flush=True)
    costs = fitted_costs(runs)
    (work / "stack.json").write_text(json.dumps(
        {"stack_s_per_byte": costs.per_byte, "stack_s_per_message": costs.per_message,
         "measured": "runs with no compute (COMPUTE=emulated, v100 profile, DILATION 0.001) on unshaped links, "
                     f"{NAME}: {testbed}",
         "load_average_at_end": os.getloadavg()}, indent=1) + "\n")
    print(f"\nfitted{stack_clause(costs)} (written to {work / 'stack.json'})")
    report(compared(runs, costs))
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
                        "without --costs) into that check of src/reprokit/study/whatif/model_validation.json")
    parser.add_argument("--hosts", type=int, default=3, help="testbed hosts (a worker and a server on each)")
    parser.add_argument("--cpus_per_host", type=int, help=CPUS_PER_HOST_HELP)
    parser.add_argument("--link_sharing", choices=LINK_SHARING, default=DEFAULT_LINK_SHARING, help=LINK_SHARING_HELP)
    parser.add_argument("--tcp", help=TCP_HELP)
    args = parser.parse_args()
    costs = read_costs(args.costs)
    if args.emulated:
        return predict_again(emulated_in(args.emulated),
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
    testbed_up(NAME, args.hosts, args.cpus_per_host, env, args.link_sharing, args.tcp)
    state = Path(env["CK_TOOLS"]) / f"testbed-{NAME}"
    testbed = (f"{args.hosts} hosts" + (f" pinned to {args.cpus_per_host} CPU(s) each" if args.cpus_per_host else
                                        f" sharing {os.cpu_count()} CPUs")
               + f", links shared {args.link_sharing}, TCP {args.tcp or 'the machine default'}, {args.hosts} workers, {args.hosts} co-located servers, "
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
                run_dir = validation_folder(work, model, rate, variant, rep)
                run = ObservedRun(Configuration(model, rate, variant), one_run(env, model, variant, run_dir),
                                  run_dir / MEASURED_FILE, rate)
                pair = (measured_s(run.result), simulate(model_input(run, costs)).iteration_s)
                rows.setdefault(run.config, []).append(pair)
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
