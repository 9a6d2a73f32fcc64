"""Emulated compute against real compute on this machine: does a profile measured inside a real run reproduce it?

    .venv/bin/python benchmarks/emulation_selfcheck.py [--models resnet,vgg] [--repetitions 3] [--variant baseline]
        [--wait busy|sleep]

For each model, n pairs of `ck run program:p3` (smoke profile: 2 workers, 1 server here), every run with TIMELINE=1
so both carry the same probes: a real run, whose workers measure each layer's compute (measured-compute.json,
reprokit.wire.p3_timeline), then an emulated run (COMPUTE=emulated) waiting exactly that profile. The emulated run
must follow its real one, so the order is not interleaved: the question is whether emulating a run's own profile gives that
run's throughput (a profile from another run carries that run's noise: the real runs' compute varied by 10%
between runs here). The waits are busy by default (COMPUTE_WAIT=busy): this machine's compute holds a core and the
engine's CPU thread, and the real run's communication competes with it for both; asleep (--wait sleep, as for a GPU host) the emulated
run's communication has the cores to itself and runs faster than the real one's. Prints the
real over emulated throughput ratio per pair, its mean and a 95% t interval (n = repetitions), the load average, and
where the two differ: the profile's waits, what the emulated workers' own probes measured of them (late waits show
there), compute, communication and forward's wait per iteration from the p3-comm lines. The target is a ratio within
10% of 1. Nothing is tuned to meet it. Uses its own CK_REPOS/CK_TOOLS in a temporary folder (engine installed by the
bootstrap).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from scipy import stats

from reprokit.bootstrap import ck as ck_cli, isolated_ck
from reprokit.emulation.profile import MEASURED_FILE, ComputeProfile
from reprokit.run.settings import MODELS, PROFILES


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


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measured(run_dir: Path) -> ComputeProfile:
    return ComputeProfile.from_dict(json.loads((run_dir / MEASURED_FILE).read_text()), str(run_dir / MEASURED_FILE))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet,vgg")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--variant", default="baseline")
    parser.add_argument("--wait", default="busy", choices=("busy", "sleep"), help="COMPUTE_WAIT of the emulated runs")
    args = parser.parse_args()
    work, env = isolated_ck("emulation-selfcheck-")
    smoke = PROFILES["smoke"]
    summary = [f"load average at start: {load_average()}"]
    for model in args.models.split(","):
        batch = MODELS[model].smoke_batch_size
        common = [f"--cmd_key={model}", f"--env.VARIANT={args.variant}", "--env.TIMELINE=1"]
        ratios, rows = [], []
        for rep in range(args.repetitions):
            pair: dict[str, dict] = {}
            real_dir = work / f"{model}-real-{rep}"
            for mode in ("real", "emulated"):
                run_dir = work / f"{model}-{mode}-{rep}"
                extra = (["--env.COMPUTE=emulated", f"--env.COMPUTE_PROFILE={real_dir / MEASURED_FILE}",
                          f"--env.COMPUTE_WAIT={args.wait}"] if mode == "emulated" else [])
                waited = measured(real_dir).total_s if mode == "emulated" else None
                result, wall = run(env, run_dir, *common, *extra)
                result["profile_s"] = measured(run_dir).total_s
                result["waited_s"] = waited
                pair[mode] = result
                print(f"  rep {rep + 1} {mode:8s}: {result['throughput_samples_per_sec']:.2f} samples/s, compute "
                      f"{result.get('compute_s_per_iter')} s/iter (probes: {result['profile_s']:.4f}"
                      f"{f', waited {waited:.4f}' if waited else ''}), comm {result.get('comm_s_per_iter')} s/iter, "
                      f"forward waited {result.get('comm_wait_s_per_iter')} s/iter, {wall:.0f} s, load {load_average()}",
                      flush=True)
            ratio = pair["real"]["throughput_samples_per_sec"] / pair["emulated"]["throughput_samples_per_sec"]
            ratios.append(ratio)
            rows.append(pair)
        mean, low, high = interval(ratios)
        verdict = "within 10%" if 0.9 <= low and high <= 1.1 else (
            "mean within 10%, interval not" if 0.9 <= mean <= 1.1 else "NOT within 10%")
        line = (f"{model}: real / emulated throughput = {mean:.3f} (95% t interval {low:.3f} to {high:.3f}, "
                f"n={len(ratios)} pairs, each a real run then its emulation: {', '.join(f'{r:.3f}' for r in ratios)}): {verdict}")
        summary.append(line)
        for key in ("throughput_samples_per_sec", "compute_s_per_iter", "comm_s_per_iter", "comm_wait_s_per_iter",
                    "overlap", "profile_s"):
            real = statistics.fmean(p["real"][key] for p in rows if p["real"].get(key) is not None)
            emu = statistics.fmean(p["emulated"][key] for p in rows if p["emulated"].get(key) is not None)
            summary.append(f"  {key:26s} real {real:.4f}  emulated {emu:.4f}")
        waited = statistics.fmean(p["emulated"]["waited_s"] for p in rows)
        summary.append(f"  {'profile waited (s/iter)':26s} {waited:.4f}")
        iteration_real = statistics.fmean(batch * spec_workers(p["real"]) / p["real"]["throughput_samples_per_sec"]
                                          for p in rows)
        iteration_emu = statistics.fmean(batch * spec_workers(p["emulated"]) /
                                         p["emulated"]["throughput_samples_per_sec"] for p in rows)
        summary.append(f"  {'iteration (s)':26s} real {iteration_real:.4f}  emulated {iteration_emu:.4f}")
    summary.append(f"load average at end: {load_average()}")
    print(f"\nsmoke profile ({smoke.num_batches} batches, reports every {smoke.disp_batches}), variant {args.variant}, "
          f"2 workers + 1 server on {os.cpu_count()} cores, TIMELINE=1 in every run, emulated waits {args.wait}")
    print("\n".join(summary))
    return 0


def spec_workers(result: dict) -> int:
    return int(result["num_workers"])


if __name__ == "__main__":
    sys.exit(main())
