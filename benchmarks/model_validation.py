"""The iteration model (study/iteration_model.py) against real runs on a 3-host testbed (needs root and sshd).

    .venv/bin/python benchmarks/model_validation.py [--repetitions 3] [--models resnet,vgg]
                                                    [--bandwidths 300mbit,1gbit]

For each model, bandwidth (tc on every host's link) and variant (baseline, p3), interleaved over repetitions:
one `ck run program:p3 --target=mv3` with the smoke profile (3 workers, 3 servers co-located, batch 32,
3x32x32), with TIMELINE=1. The model is given what the run measured of itself, nothing fitted: each layer's
forward and backward time as the workers' probes measured it inside the run (measured-compute.json, the mean of the
workers), the shaped bandwidth, 3 workers and 3 co-located servers, the run's slice size and the policy. Prints, per configuration, the measured iteration
time (batch / mean per-worker throughput; mean over runs, n stated) beside the predicted one and their error,
then P3's speedup measured and predicted. The issue's bar: 10% for throughput, 15% for the speedup.

    .venv/bin/python benchmarks/model_validation.py --again WORK

predicts again, with the model as it is now, the runs an earlier run left in its folder WORK (it prints it).

    .venv/bin/python benchmarks/model_validation.py --emulated STORE

runs nothing: it predicts every emulated run stored in a study's store (`ck reproduce ... --emulate`, e.g.
benchmarks/emulated_sweep.py) from what that run was given: its profile (emulated-compute.json in its run folder)
with every layer times k, the link rate it ran at (the bandwidth divided by k), its workers and servers, its slice
size and its variant's policy; and compares with its measured iteration time (batch / mean per-worker throughput).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from reprokit.bootstrap import ck as ck_cli, isolated_ck
from reprokit.emulation.profile import MEASURED_FILE, PROFILE_FILE, ComputeProfile
from reprokit.run.result import RESULT_FILE, Result
from reprokit.study.store import Store
from reprokit.study.iteration_model import Layer, ModelInput, Policy, simulate
from reprokit.study.rates import shaped_bps

CK = str(Path(sys.executable).with_name("ck"))
NAME = "mv3"
RUN = ["--env.NUM_BATCHES=11", "--env.DISP_BATCHES=2", "--env.TIMELINE=1"]
POLICY = {"baseline": Policy.BASELINE, "p3": Policy.P3, "p3-slicing-only": Policy.SLICING_ONLY,
          "p3-priority-only": Policy.PRIORITY_ONLY}
VALIDATED = ("baseline", "p3")  # the variants the testbed runs
STUDY = "sysml19-p3"


Key = tuple[str, str, str]  # model, bandwidth, variant
Rows = dict[Key, list[tuple[float, float]]]  # per configuration: (measured, predicted) s per iteration, per run


def one_run(env: dict, model: str, variant: str, run_dir: Path) -> Result:
    proc = subprocess.run([CK, "run", "program:p3", f"--cmd_key={model}", f"--target={NAME}",
                           f"--env.VARIANT={variant}", *RUN, f"--tmp_dir={run_dir}",
                           "--treat_return_code_as_exit_code=yes"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark: {model} {variant} failed:\n{proc.stdout[-2000:]}")
    return Result.load(run_dir)


def predicted_s(result: Result, profile_file: Path, link_rate: str, dilation: float = 1.0) -> float:
    """The model's iteration time for a run: each layer's time from ``profile_file`` times ``dilation``, the
    links at ``link_rate`` (the rate they were shaped to)."""
    profile = ComputeProfile.from_dict(json.loads(profile_file.read_text()), profile_file.name)
    layers = tuple(Layer(x.name, x.forward_s * dilation, x.backward_s * dilation, x.arrays) for x in profile.layers)
    assert result.num_workers is not None and result.num_servers is not None and result.variant is not None
    spec = ModelInput(layers, result.num_workers, result.num_servers, shaped_bps(link_rate),
                      POLICY[result.variant], slice_elements=result.p3_slice_size or 50_000)
    return simulate(spec).iteration_s


def measured_s(result: Result) -> float:
    assert result.batch_size is not None and result.throughput_per_worker
    return result.batch_size / statistics.mean(result.throughput_per_worker)


def compared(observed: Iterable[tuple[Key, Result, Path, str, float]]) -> Rows:
    """Each run's measured and predicted iteration time, by configuration. ``observed``: per run its configuration,
    result, the profile it computed or waited, the rate its links were shaped to, and its dilation k."""
    rows: Rows = {}
    for key, result, profile_file, link_rate, dilation in observed:
        rows.setdefault(key, []).append((measured_s(result), predicted_s(result, profile_file, link_rate, dilation)))
    return rows


def again(work: Path) -> int:
    """Predict again the runs an earlier run of this benchmark left in ``work`` (folders MODEL-RATE-VARIANT-REP),
    with the model as it is now (runs nothing)."""
    folders = [(d, d.name.split("-", 3)) for d in sorted(work.glob("*-*-*-*"))
               if (d / RESULT_FILE).is_file() and (d / MEASURED_FILE).is_file()]  # older runs measured no profile
    rows = compared(((model, rate, variant), Result.load(d), d / MEASURED_FILE, rate, 1.0)
                    for d, (model, rate, variant, _) in folders)
    if not rows:
        raise SystemExit(f"benchmark: no runs of this benchmark are in {work}")
    print(f"the runs of {work}, predicted again")
    report(rows)
    return 0


def against_emulated(root: Path) -> int:
    """Predict every emulated run stored in the study store ``root`` and print the errors (runs nothing)."""
    runs = [(r, r.run_result) for r in Store(root, STUDY).all_records() if r.ok and r.emulated and r.run_folder]
    rows = compared(((r.config.model, r.config.bandwidth, r.config.variant), result,
                     root / str(r.run_folder) / PROFILE_FILE, r.provenance["links_shaped_to"], result.dilation or 1.0)
                    for r, result in runs if result is not None)
    if not rows:
        raise SystemExit(f"benchmark: no emulated runs are stored in {root}")
    print(f"emulated runs of {root}; bandwidth: the paper's (links shaped to it divided by k)")
    report(rows)
    return 0


def report(rows: Rows) -> None:
    """Per configuration the mean measured and predicted iteration time, then each variant's speedup over the
    baseline measured and predicted."""
    print("\nper configuration: mean over n runs (s/iteration), error = predicted/measured - 1")
    print("model   bandwidth  variant           n  measured  predicted   error")
    for (model, rate, variant), pairs in rows.items():
        meas, pred = (statistics.mean(p[i] for p in pairs) for i in (0, 1))
        print(f"{model:7s} {rate:9s}  {variant:16s} {len(pairs):2d} {meas:9.3f} {pred:10.3f} {pred / meas - 1:+7.1%}")
    print("\nspeedup over the baseline (baseline s / variant s): measured against predicted (bar: 15%)")
    for (model, rate, variant), pairs in rows.items():
        base = rows.get((model, rate, "baseline"))
        if variant == "baseline" or base is None:
            continue
        meas = statistics.mean(p[0] for p in base) / statistics.mean(p[0] for p in pairs)
        pred = statistics.mean(p[1] for p in base) / statistics.mean(p[1] for p in pairs)
        print(f"  {model:7s} {rate:9s} {variant:16s} measured {meas:.3f}x  predicted {pred:.3f}x  "
              f"error {pred / meas - 1:+.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--models", default="resnet,vgg")
    parser.add_argument("--bandwidths", default="300mbit,1gbit")
    parser.add_argument("--emulated", metavar="STORE", help="predict the emulated runs of this study store instead")
    parser.add_argument("--again", metavar="WORK", help="predict again the runs an earlier run left in WORK")
    args = parser.parse_args()
    if args.emulated:
        return against_emulated(Path(args.emulated))
    if args.again:
        return again(Path(args.again))
    if os.geteuid() != 0:
        raise SystemExit("benchmark: needs root (network namespaces)")
    models, rates = args.models.split(","), args.bandwidths.split(",")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    work, env = isolated_ck("model-validation-")
    ck_cli("testbed", f"cluster:{NAME}", "--hosts=3", env=env, check=True)
    state = Path(env["CK_TOOLS"]) / f"testbed-{NAME}"
    rows: Rows = {}
    try:
        ck_cli("add", f"machine:{NAME}", "--type=cluster", f"--config_file={state / 'hosts.json'}", "--quiet",
               env=env, check=True)
        configs = [(m, r, v) for m in models for r in rates for v in VALIDATED]
        for rep in range(args.repetitions):
            for model, rate, variant in (configs if rep % 2 == 0 else list(reversed(configs))):
                ck_cli("testbed", f"cluster:{NAME}", f"--shape={rate}", env=env, check=True)
                run_dir = work / f"{model}-{rate}-{variant}-{rep}"
                result = one_run(env, model, variant, run_dir)
                pair = (measured_s(result), predicted_s(result, run_dir / MEASURED_FILE, rate))
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
