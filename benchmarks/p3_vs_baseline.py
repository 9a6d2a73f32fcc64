"""P3 against its baseline on the same engine: throughput under limited bandwidth (needs root).

    .venv/bin/python benchmarks/p3_vs_baseline.py [--models resnet,vgg] [--bandwidths 1gbit,250mbit]
        [--repetitions 3] [--hosts 3] [--batches 11] [--overhead-repetitions 3]

On a fresh testbed (one server and one worker per host, every host's egress
shaped with tc), runs baseline and p3 for every model and bandwidth,
interleaved so that drift hits both, and prints throughput means, spread and
the p3/baseline speedup with its 95% interval (the study's analysis code). A speedup whose interval
contains 1.0 is reported as within noise. Then measures the cost of many small
keys on an unshaped local run: p3 with slicing on and priority off, over baseline.
Uses its own CK_REPOS/CK_TOOLS in a temporary folder.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from reprokit.bootstrap import ck as ck_cli, isolated_ck
from reprokit.study.analysis import ratio_interval  # the study's speedup interval (delta method, Welch df)

CK = str(Path(sys.executable).with_name("ck"))
ENV: dict[str, str] = {}  # this benchmark's own CK_REPOS/CK_TOOLS, set in main()


def ck(*args: str) -> subprocess.CompletedProcess:
    return ck_cli(*args, env=ENV, check=True)


def throughput(env: dict, run_dir: Path, *args: str) -> float:
    ck("run", "program:p3", f"--tmp_dir={run_dir}", "--out=json_file", f"--out_file={run_dir / 'ck.json'}",
       "--treat_return_code_as_exit_code=yes", *args)
    return json.loads((run_dir / "p3-result.json").read_text())["throughput_samples_per_sec"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet,vgg")
    parser.add_argument("--bandwidths", default="1gbit,250mbit")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--batches", type=int, default=11)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--overhead-repetitions", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("benchmark: needs root (network namespaces, tc)")
    work, env = isolated_ck("p3-vs-baseline-")
    ENV.update(env)
    common = ["--env.PROFILE=smoke", "--env.WORKER_THREADS=1", f"--env.NUM_BATCHES={args.batches}",
              "--env.DISP_BATCHES=5", f"--env.BATCH_SIZE={args.batch_size}"]
    models, bandwidths = args.models.split(","), args.bandwidths.split(",")
    results: dict[tuple[str, str, str], list[float]] = {}
    ck("testbed", "cluster:cmp", f"--hosts={args.hosts}")
    try:
        hosts_json = Path(env["CK_TOOLS"]) / "testbed-cmp" / "hosts.json"
        ck("add", "machine:cmp", "--type=cluster", f"--config_file={hosts_json}", "--quiet")
        for rep in range(args.repetitions):
            for model in models:
                for bandwidth in bandwidths:
                    ck("testbed", "cluster:cmp", f"--shape={bandwidth}")
                    for variant in (("baseline", "p3") if rep % 2 == 0 else ("p3", "baseline")):
                        run_dir = work / f"{model}-{bandwidth}-{variant}-{rep}"
                        value = throughput(env, run_dir, f"--cmd_key={model}", "--target=cmp",
                                           f"--env.VARIANT={variant}", *common)
                        results.setdefault((model, bandwidth, variant), []).append(value)
                        print(f"rep {rep + 1} {model} {bandwidth} {variant}: {value:.2f} samples/s", flush=True)
    finally:
        subprocess.run([CK, "testbed", "cluster:cmp", "--down"], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)

    print(f"\n{args.hosts} hosts (one server and one worker each), batch {args.batch_size} per worker, "
          f"3x32x32, {args.batches} batches, {args.repetitions} interleaved repetitions")
    print("model   bandwidth  baseline mean±sd   p3 mean±sd         p3/baseline [95% interval]")
    for model in models:
        for bandwidth in bandwidths:
            base, p3 = results[(model, bandwidth, "baseline")], results[(model, bandwidth, "p3")]
            ratio, low, high = ratio_interval(p3, base)
            verdict = "within noise" if low <= 1.0 <= high else ("faster" if low > 1.0 else "slower")
            print(f"{model:7s} {bandwidth:9s}  {statistics.fmean(base):7.2f}±{statistics.stdev(base):5.2f}    "
                  f"{statistics.fmean(p3):7.2f}±{statistics.stdev(p3):5.2f}    {ratio:.3f} [{low:.3f}, {high:.3f}] {verdict}")

    if args.overhead_repetitions:
        print("\nslicing overhead on an unshaped local run (resnet, 2 workers, 1 server, smoke profile):")
        local = {"baseline": [], "p3-slicing-only": []}
        for rep in range(args.overhead_repetitions):
            for name in (("baseline", "p3-slicing-only") if rep % 2 == 0 else ("p3-slicing-only", "baseline")):
                extra = ["--env.VARIANT=baseline"] if name == "baseline" else ["--env.VARIANT=p3", "--env.P3_PRIORITY=0"]
                local[name].append(throughput(env, work / f"local-{name}-{rep}", "--cmd_key=resnet", *extra))
        ratio, low, high = ratio_interval(local["p3-slicing-only"], local["baseline"])
        print(f"baseline {statistics.fmean(local['baseline']):.2f}, p3 slicing only "
              f"{statistics.fmean(local['p3-slicing-only']):.2f} samples/s: ratio {ratio:.3f} [{low:.3f}, {high:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
