"""Time `ck reproduce study:sysml19-p3 --quick` end to end on the embedded default, and report rendering.

    .venv/bin/python benchmarks/study_quick.py [--report-repetitions 3]

Uses its own CK_REPOS/CK_TOOLS in a temporary folder (bootstrap included, not
timed). Prints the sweep's wall time (every run, the analysis and the report),
the per-run times from the records, and the time of `ck report` alone
(ck start-up included) and of the rendering step alone.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from reprokit.bootstrap import ck as ck_cli, isolated_ck


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report-repetitions", type=int, default=3)
    args = parser.parse_args()
    work, env = isolated_ck("study-quick-")
    store = work / "store"
    started = time.monotonic()
    proc = ck_cli("reproduce", "study:sysml19-p3", "--quick", f"--store={store}", env=env, timeout=1800)
    sweep_s = time.monotonic() - started
    print(proc.stdout[-1500:])
    if proc.returncode != 0:
        print(proc.stderr[-2000:])
        return 1
    durations = [json.loads(p.read_text())["provenance"]["duration_s"] for p in (store / "records").glob("*.json")]
    print(f"ck reproduce --quick: {sweep_s:.1f} s end to end, {len(durations)} runs "
          f"(mean {statistics.fmean(durations):.1f} s, min {min(durations):.1f}, max {max(durations):.1f}); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    report_s, render_s = [], []
    for _ in range(args.report_repetitions):
        t0 = time.monotonic()
        out = ck_cli("report", "study:sysml19-p3", f"--store={store}", env=env, check=True)
        report_s.append(time.monotonic() - t0)
        render_s.append(float(out.stdout.rsplit("(", 1)[1].split(" s)")[0]))
    print(f"ck report: {statistics.fmean(report_s):.2f} s (min {min(report_s):.2f}); rendering (plots, Markdown, HTML) alone: "
          f"{statistics.fmean(render_s):.2f} s (min {min(render_s):.2f}); {args.report_repetitions} repetitions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
