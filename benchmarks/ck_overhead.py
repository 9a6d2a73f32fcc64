"""Overhead of the CK path: `ck run program:p3` against the same launcher + training started directly.

    .venv/bin/python benchmarks/ck_overhead.py [--repetitions N] [-- extra ck run args]

Both sides run the same run specification (the one CK's preprocess writes), on
the smoke profile unless extra arguments say otherwise, interleaved so that
machine drift hits both. Prints wall times, throughputs and their ratios.
Targets: wall-time ratio <= 1.10, throughput ratio >= 0.97.
Needs CK prepared as by `make demo` (repository registered, engine installed).
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
import uuid
from pathlib import Path

from reprokit.cluster.ports import pick_free_port

CK = str(Path(sys.executable).with_name("ck"))
SRC = str(Path(__file__).resolve().parents[1] / "src")


def timed(cmd: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=env, timeout=1800)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"benchmark: command failed ({proc.returncode}): {' '.join(cmd)}")
    return elapsed


def via_ck(run_dir: Path, extra: list[str]) -> tuple[float, float]:
    wall = timed([CK, "run", "program:p3", "--cmd_key=resnet", f"--tmp_dir={run_dir}", "--out=json_file",
                  f"--out_file={run_dir / 'ck.json'}", "--treat_return_code_as_exit_code=yes", *extra])
    return wall, json.loads((run_dir / "p3-result.json").read_text())["throughput_samples_per_sec"]


def direct(spec: dict, run_dir: Path) -> tuple[float, float]:
    spec = json.loads(json.dumps(spec))
    spec["plan"]["run_id"] = uuid.uuid4().hex
    spec["plan"]["scheduler_port"] = pick_free_port()
    (run_dir / "p3-run.json").write_text(json.dumps(spec))
    wall = timed([sys.executable, "-m", "reprokit.run.command", str(run_dir / "p3-run.json")],
                 env={**os.environ, "PYTHONPATH": SRC})
    return wall, json.loads((run_dir / "p3-result.json").read_text())["throughput_samples_per_sec"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("extra", nargs="*", help="extra arguments for ck run (after --)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ck-overhead-"))

    print("warm-up run through ck (not measured) ...", flush=True)
    (work / "warmup").mkdir()
    via_ck(work / "warmup", args.extra)
    spec = json.loads((work / "warmup" / "p3-run.json").read_text())

    rows = []
    for rep in range(args.repetitions):
        order = ("ck", "direct") if rep % 2 == 0 else ("direct", "ck")
        row = {}
        for side in order:
            run_dir = work / f"{side}-{rep}"
            run_dir.mkdir()
            row[side] = via_ck(run_dir, args.extra) if side == "ck" else direct(spec, run_dir)
        rows.append(row)
        print(f"rep {rep + 1}: ck {row['ck'][0]:6.2f} s {row['ck'][1]:7.2f} samples/s | "
              f"direct {row['direct'][0]:6.2f} s {row['direct'][1]:7.2f} samples/s", flush=True)

    def mean(side: str, i: int) -> float:
        return statistics.fmean(r[side][i] for r in rows)

    time_ratio = mean("ck", 0) / mean("direct", 0)
    tput_ratio = mean("ck", 1) / mean("direct", 1)
    print(f"\nsettings: {spec['settings']['model']} batch {spec['settings']['batch_size']} shape "
          f"{spec['settings']['image_shape']} batches {spec['settings']['num_batches']} "
          f"workers {spec['settings']['num_workers']}, {args.repetitions} interleaved repetitions")
    print(f"wall time:  ck {mean('ck', 0):.2f} s, direct {mean('direct', 0):.2f} s, "
          f"ratio {time_ratio:.3f} (target <= 1.10) -> {'OK' if time_ratio <= 1.10 else 'MISSED'}")
    print(f"throughput: ck {mean('ck', 1):.2f}, direct {mean('direct', 1):.2f} samples/s, "
          f"ratio {tput_ratio:.3f} (target >= 0.97) -> {'OK' if tput_ratio >= 0.97 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
