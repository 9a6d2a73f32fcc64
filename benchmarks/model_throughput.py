"""Smoke-profile throughput of every workload on the embedded default (stock MXNet, this machine).

    .venv/bin/python benchmarks/model_throughput.py [--models resnet,inception-v3,vgg,sockeye]
        [--variants baseline,p3] [--repetitions 1]

Runs `ck run program:p3 --cmd_key=MODEL` with the smoke profile (2 workers and
1 server on this host) for every model and variant, repetitions interleaved,
and prints aggregate samples/s (tokens/s for Sockeye), the wall time of each
run and the smoke settings it used. Uses its own CK_REPOS/CK_TOOLS in a
temporary folder (engine and Sockeye installed by the bootstrap).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from reprokit.bootstrap import ck as ck_cli, isolated_ck


def run(env: dict, run_dir: Path, *args: str) -> tuple[dict, float]:
    start = time.perf_counter()
    ck_cli("run", "program:p3", f"--tmp_dir={run_dir}", "--out=json_file", f"--out_file={run_dir / 'ck.json'}",
           "--treat_return_code_as_exit_code=yes", *args, env=env, check=True)
    return json.loads((run_dir / "p3-result.json").read_text()), time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet,inception-v3,vgg,sockeye")
    parser.add_argument("--variants", default="baseline,p3")
    parser.add_argument("--repetitions", type=int, default=1)
    args = parser.parse_args()
    work, env = isolated_ck("model-throughput-")
    models, variants = args.models.split(","), args.variants.split(",")
    rows: dict[tuple[str, str], list[tuple[dict, float]]] = {}
    for rep in range(args.repetitions):
        for model in models:
            for variant in (variants if rep % 2 == 0 else variants[::-1]):
                result, wall = run(env, work / f"{model}-{variant}-{rep}", f"--cmd_key={model}",
                                   f"--env.VARIANT={variant}")
                rows.setdefault((model, variant), []).append((result, wall))
                print(f"rep {rep + 1} {model} {variant}: {result['throughput_samples_per_sec']:.2f} samples/s, "
                      f"{wall:.0f} s", flush=True)

    print(f"\nembedded default, smoke profile, 2 workers + 1 server on {os.cpu_count()} cores, "
          f"{args.repetitions} repetition(s)")
    print("model         variant   batch  shape       samples/s (mean±sd)  tokens/s  wall s")
    for (model, variant), runs in rows.items():
        speeds = [r["throughput_samples_per_sec"] for r, _ in runs]
        spread = statistics.stdev(speeds) if len(speeds) > 1 else 0.0
        tokens = [r["throughput_tokens_per_sec"] for r, _ in runs if "throughput_tokens_per_sec" in r]
        first = runs[0][0]
        print(f"{model:13s} {variant:8s}  {first['batch_size']:5d}  {first['image_shape'] or '-':10s}  "
              f"{statistics.fmean(speeds):9.2f}±{spread:<6.2f}     "
              f"{statistics.fmean(tokens) if tokens else float('nan'):8.1f}  "
              f"{statistics.fmean(w for _, w in runs):6.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
