"""Emulated compute against real compute on this machine: does a measured profile reproduce the real throughput?

    .venv/bin/python benchmarks/emulation_selfcheck.py [--models resnet,vgg] [--repetitions 3]
        [--variant baseline] [--out DIR]

For each model: measures its per-layer profile on this machine (program/p3/compute_profile.py, two processes at
once with one OMP thread each, as the run's two workers share the two cores), then runs `ck run program:p3`
(smoke profile: 2 workers, 1 server here) with real compute and with COMPUTE=emulated on that profile, the two
interleaved (real first in even repetitions, emulated first in odd ones), and prints the real over emulated
throughput ratio per pair, its mean and a 95% t interval (n = repetitions). The target is a ratio within 10% of 1.
It does not tune anything to meet it: the figures printed say where the two differ (per-iteration wait of the
profile, the workers' compute and communication per iteration from the p3-comm lines).
Uses its own CK_REPOS/CK_TOOLS in a temporary folder (engine installed by the bootstrap).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scipy import stats

from reprokit.bootstrap import ck as ck_cli, isolated_ck
from reprokit.emulation.profile import ComputeProfile, average
from reprokit.paths import PROGRAM_DIR
from reprokit.run.settings import MODELS, PROFILES

MEASURE_PROCESSES = 2  # the run's workers on this host, each with cores / workers threads


def engine_python(tools: Path) -> str:
    found = sorted(tools.glob("lib-mxnet-*/prefix/bin/python"))
    if not found:
        raise SystemExit(f"no MXNet engine under {tools}")
    return str(found[-1])


def measure(python: str, model: str, batch: int, shape: str, out: Path) -> ComputeProfile:
    """The profile of ``model`` here: MEASURE_PROCESSES measurements at once, averaged layer by layer."""
    threads = max(1, (os.cpu_count() or 1) // MEASURE_PROCESSES)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    procs, files = [], []
    for i in range(MEASURE_PROCESSES):
        path = out / f"measured-{model}-{i}.json"
        files.append(path)
        procs.append(subprocess.Popen(
            [python, str(PROGRAM_DIR / "compute_profile.py"), "--model", model, "--network", MODELS[model].network,
             "--image-shape", shape, "--batch-size", str(batch), "--seed", str(42 + i), "--out", str(path),
             "--note", f"; {MEASURE_PROCESSES} processes at once (as the run's workers), averaged"],
            env=env, cwd=PROGRAM_DIR))
    for proc in procs:
        if proc.wait() != 0:
            raise SystemExit(f"compute_profile.py failed for {model}")
    profiles = [ComputeProfile.from_dict(json.loads(p.read_text()), str(p)) for p in files]
    merged = average(profiles, "measured", profiles[0].source)
    path = out / f"measured-{model}.json"
    path.write_text(json.dumps(merged.to_dict(), indent=1))
    return merged


def run(env: dict, run_dir: Path, *args: str) -> tuple[dict, float]:
    start = time.perf_counter()
    ck_cli("run", "program:p3", f"--tmp_dir={run_dir}", "--out=json_file", f"--out_file={run_dir / 'ck.json'}",
           "--treat_return_code_as_exit_code=yes", *args, env=env, check=True)
    return json.loads((run_dir / "p3-result.json").read_text()), time.perf_counter() - start


def interval(values: list[float]) -> tuple[float, float, float]:
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet,vgg")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--variant", default="baseline")
    parser.add_argument("--out", default="", help="where the measured profiles go (default: the temporary folder)")
    args = parser.parse_args()
    work, env = isolated_ck("emulation-selfcheck-")
    python = engine_python(Path(env["CK_TOOLS"]))
    out = Path(args.out) if args.out else work
    out.mkdir(parents=True, exist_ok=True)
    smoke = PROFILES["smoke"]
    summary = []
    for model in args.models.split(","):
        spec = MODELS[model]
        batch, shape = spec.smoke_batch_size, spec.smoke_image_shape
        profile = measure(python, model, batch, shape, out)
        print(f"{model}: measured profile {profile.total_s:.4f} s per iteration (forward {profile.forward_s:.4f}, "
              f"backward {profile.backward_s:.4f}), {len(profile.layers)} layers, batch {batch}, shape {shape}",
              flush=True)
        common = [f"--cmd_key={model}", f"--env.VARIANT={args.variant}", "--env.TIMELINE=0"]
        emulated_args = ["--env.COMPUTE=emulated", f"--env.COMPUTE_PROFILE={out / f'measured-{model}.json'}"]
        ratios, rows = [], []
        for rep in range(args.repetitions):
            order = [("real", []), ("emulated", emulated_args)]
            pair = {}
            for mode, extra in (order if rep % 2 == 0 else order[::-1]):
                result, wall = run(env, work / f"{model}-{mode}-{rep}", *common, *extra)
                pair[mode] = result
                print(f"  rep {rep + 1} {mode:8s}: {result['throughput_samples_per_sec']:.2f} samples/s, compute "
                      f"{result.get('compute_s_per_iter')} s/iter, comm {result.get('comm_s_per_iter')} s/iter, "
                      f"forward waited {result.get('comm_wait_s_per_iter')} s/iter, {wall:.0f} s", flush=True)
            ratio = pair["real"]["throughput_samples_per_sec"] / pair["emulated"]["throughput_samples_per_sec"]
            ratios.append(ratio)
            rows.append(pair)
        mean, low, high = interval(ratios)
        verdict = "within 10%" if 0.9 <= low and high <= 1.1 else (
            "mean within 10%, interval not" if 0.9 <= mean <= 1.1 else "NOT within 10%")
        line = (f"{model}: real / emulated throughput = {mean:.3f} (95% t interval {low:.3f} to {high:.3f}, "
                f"n={len(ratios)} interleaved pairs; each: {', '.join(f'{r:.3f}' for r in ratios)}): {verdict}")
        summary.append(line)
        for key in ("compute_s_per_iter", "comm_s_per_iter", "comm_wait_s_per_iter", "overlap"):
            real = statistics.fmean(p["real"][key] for p in rows if p["real"].get(key) is not None)
            emu = statistics.fmean(p["emulated"][key] for p in rows if p["emulated"].get(key) is not None)
            summary.append(f"  {key:22s} real {real:.4f}  emulated {emu:.4f}")
        iteration_real = statistics.fmean(batch * spec_workers(p["real"]) / p["real"]["throughput_samples_per_sec"]
                                          for p in rows)
        iteration_emu = statistics.fmean(batch * spec_workers(p["emulated"]) /
                                         p["emulated"]["throughput_samples_per_sec"] for p in rows)
        summary.append(f"  iteration s            real {iteration_real:.4f}  emulated {iteration_emu:.4f}  "
                       f"(profile's waits {profile.total_s:.4f})")
    print(f"\nsmoke profile ({smoke.num_batches} batches, reports every {smoke.disp_batches}), variant {args.variant}, "
          f"2 workers + 1 server on {os.cpu_count()} cores")
    print("\n".join(summary))
    return 0


def spec_workers(result: dict) -> int:
    return int(result["num_workers"])


if __name__ == "__main__":
    sys.exit(main())
