"""RecordIO conversion rate (images/s) of the synthetic ImageNet-format set with 1 and 2 worker processes.

    .venv/bin/python benchmarks/recordio_conversion.py [--images-per-class 100] [--repetitions 3] [--python PY]

Generates the synthetic set (10 classes; the package's default is 30 images
per class, here more so that start-up does not dominate), then converts it
with the same command the dataset-imagenet-2012-train-p3 package runs
(resize 480, quality 95, train ratio 0.95), interleaving thread counts so that
machine drift hits both. Prints images/s per repetition, their median and the
2-vs-1 speed-up. Needs the engine (ck install package:lib-mxnet --quiet), or --python.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reprokit.bootstrap import ck
from reprokit.data.imagenet import make_synthetic

SRC = str(Path(__file__).resolve().parents[1] / "src")


def engine_python() -> str:
    out = ck("search", "env", "--tags=lib,mxnet", "--add_meta", "--out=json", check=True)
    for entry in json.loads(out.stdout)["lst"]:
        python = entry["meta"]["env"].get("CK_ENV_LIB_MXNET_PYTHON", "")
        if python and os.path.exists(python):
            return python
    raise SystemExit("benchmark: no MXNet engine registered; install it with: ck install package:lib-mxnet --quiet")


def convert(python: str, source: Path, dest: Path, threads: int) -> tuple[dict, float]:
    start = time.perf_counter()
    proc = subprocess.run([python, "-m", "reprokit.data.recordio", f"--source={source}", f"--dest={dest}",
                           f"--threads={threads}", "--kind=imagenet-synthetic"], env={**os.environ, "PYTHONPATH": SRC},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"benchmark: conversion failed: {proc.stderr.strip()[-500:]}")
    return json.loads((dest / "recordio" / "recordio.json").read_text()), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images-per-class", type=int, default=100)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--python", default="", help="the engine's interpreter (default: the registered engine)")
    args = parser.parse_args()
    python = args.python or engine_python()
    with tempfile.TemporaryDirectory(prefix="recordio-bench-") as tmp:
        source = make_synthetic(Path(tmp) / "set", classes=10, images_per_class=args.images_per_class).root
        images = sum(1 for _ in source.glob("*/*.JPEG"))
        size = sum(p.stat().st_size for p in source.rglob("*")) / 1e6
        print(f"synthetic set: {images} images, {size:.1f} MB, {os.cpu_count()} cores; engine {python}")
        rates: dict[int, list[float]] = {1: [], 2: []}
        for repetition in range(args.repetitions):
            for threads in (1, 2):
                manifest, wall = convert(python, source, Path(tmp) / f"out-{threads}", threads)
                rates[threads].append(manifest["images_per_sec"])
                print(f"  repetition {repetition + 1}, {threads} thread(s): {manifest['images_per_sec']:.1f} images/s "
                      f"(conversion {manifest['seconds']:.2f} s, process wall {wall:.2f} s)", flush=True)
        rec_mb = sum(p.stat().st_size for p in (Path(tmp) / "out-1" / "recordio").glob("*.rec")) / 1e6
    for threads, values in rates.items():
        print(f"{threads} thread(s): median {statistics.median(values):.1f} images/s "
              f"(min {min(values):.1f}, max {max(values):.1f})")
    print(f"speed-up 2 vs 1 thread(s): {statistics.median(rates[2]) / statistics.median(rates[1]):.2f}x; "
          f".rec files {rec_mb:.1f} MB (shorter edge 480, JPEG quality 95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
