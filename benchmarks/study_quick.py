"""Time `ck reproduce study:sysml19-p3 --quick` end to end, on the embedded default or a testbed, and report rendering.

    .venv/bin/python benchmarks/study_quick.py [--hosts 3] [--report-repetitions 3]

Uses its own CK_REPOS/CK_TOOLS in a temporary folder (bootstrap included, not
timed). With ``--hosts N`` (root) the sweep runs on a fresh N-host testbed, so
it includes the baseline probes that choose each model's bandwidths and the
timelines of repetition 1. Prints the sweep's wall time (probes, every run, the
analysis and the report), the per-run and probe times, the bandwidths chosen,
and the time of `ck report` alone (ck start-up included) and of the rendering
step alone.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=0, help="run on a fresh testbed of this many hosts (root)")
    parser.add_argument("--report-repetitions", type=int, default=3)
    args = parser.parse_args()
    if args.hosts and os.geteuid() != 0:
        raise SystemExit("benchmark: --hosts needs root (network namespaces, tc); run it as root")
    work, env = isolated_ck("study-quick-")
    store = work / "store"
    target = []
    if args.hosts:
        ck_cli("testbed", "cluster:sq", f"--hosts={args.hosts}", env=env, check=True)
        hosts_json = Path(env["CK_TOOLS"]) / "testbed-sq" / "hosts.json"
        ck_cli("add", "machine:sq", "--type=cluster", f"--config_file={hosts_json}", "--quiet", env=env, check=True)
        target = ["--target=sq"]
    try:
        started = time.monotonic()
        proc = ck_cli("reproduce", "study:sysml19-p3", "--quick", f"--store={store}", *target, env=env, timeout=3600)
        sweep_s = time.monotonic() - started
    finally:
        if args.hosts:
            ck_cli("testbed", "cluster:sq", "--down", env=env)
    print(proc.stdout[-1500:])
    if proc.returncode != 0:
        print(proc.stderr[-2000:])
        return 1
    durations = [json.loads(p.read_text())["provenance"]["duration_s"] for p in (store / "records").glob("*.json")]
    print(f"ck reproduce --quick{' on a ' + str(args.hosts) + '-host testbed' if args.hosts else ''}: {sweep_s:.1f} s "
          f"end to end, {len(durations)} runs (mean {statistics.fmean(durations):.1f} s, min {min(durations):.1f}, "
          f"max {max(durations):.1f}); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for sweep in (store / "sweeps").glob("*.json"):
        for choice in json.loads(sweep.read_text()).get("choices", []):
            probe = json.loads((store / choice["probe_run"] / "p3-result.json").read_text())
            print(f"probe {choice['model']}: {probe.get('wall_time_s')} s; bandwidths "
                  + ", ".join(f"{b} (predicted {r:.2f})" for b, r in zip(choice["bandwidths"], choice["predicted"])))
    report_s, render_s = [], []
    for _ in range(args.report_repetitions):
        t0 = time.monotonic()
        out = ck_cli("report", "study:sysml19-p3", f"--store={store}", env=env, check=True)
        report_s.append(time.monotonic() - t0)
        render_s.append(float(out.stdout.rsplit("(", 1)[1].split(" s)")[0]))
    print(f"ck report: {statistics.fmean(report_s):.2f} s (min {min(report_s):.2f}); rendering (plots, timelines, "
          f"Markdown, HTML, JSON) alone: {statistics.fmean(render_s):.2f} s (min {min(render_s):.2f}); "
          f"{args.report_repetitions} repetitions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
