"""Totals of the fault and hostile-input suite (tests/faults), for docs/notebook/supervision.md.

    .venv/bin/python benchmarks/fault_totals.py [--json FILE] [--rounds N] [pytest arguments ...]
    .venv/bin/python benchmarks/fault_totals.py --from FILE   # totals of a run made with REPROKIT_FAULT_TOTALS=FILE
    .venv/bin/python benchmarks/fault_totals.py --rounds 3 -k 'stopped or lost_slurm'   # fault-to-exit times, n=3

Runs every case of tests/faults (as root, as CI does: signals to every process of ours, a cut link on a
testbed host, hostile bundles, injection strings in every setting, concurrent runs and imports, hostile
cluster descriptions and store files) and prints, per fault class and in total: cases, cases that ended as
they must (a clear one-line message or a clean tear-down), and the bad outcomes the failed checks found
(tracebacks, hangs, orphans, injections, data lost, unclear messages, other failures). Each case is one pytest
test; a case's checks are tests/support/faults.py.

The frozen-role and lost-controller cases (a stopped worker or launcher, a lost slurmctld) also record the seconds
from the fault to the command's exit; for those, it prints per case n, median and min-max over the rounds
(``--rounds N`` runs the selected cases N times, one after the other; the totals then count each round's cases).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BAD = ("traceback", "hang", "orphan", "injection", "data-lost", "unclear", "other")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="", help="also write the totals here")
    parser.add_argument("--from", dest="source", type=Path, default=None,
                        help="count the cases a test run recorded (REPROKIT_FAULT_TOTALS=FILE, e.g. `make test`) "
                             "instead of running the suite")
    parser.add_argument("--rounds", type=int, default=1, help="run the selected cases this many times (n of the "
                                                                  "fault-to-exit times)")
    args, pytest_args = parser.parse_known_args()
    returncode = 0
    if args.source:
        lines = args.source
    else:
        with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as handle:
            lines = Path(handle.name)
        env = {**os.environ, "REPROKIT_FAULT_TOTALS": str(lines)}
        for _ in range(max(1, args.rounds)):
            returncode = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                         "tests/faults", *pytest_args], cwd=REPO_ROOT, env=env,
                                        stdin=subprocess.DEVNULL).returncode or returncode
    cases = [json.loads(line) for line in lines.read_text().splitlines() if line.strip()]
    if not args.source:
        lines.unlink()
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for case in cases:
        for key in (case["class"], "all"):
            totals[key]["cases"] += case["when"] == "call" or not case["passed"]
            totals[key]["clear"] += bool(case["passed"]) and case["when"] == "call"
            totals[key]["skipped"] += bool(case["skipped"])
            if case["outcome"]:
                totals[key][case["outcome"]] += 1
    header = ["class", "cases", "clear", "skipped", *BAD]
    print("\n" + "  ".join(f"{h:>10s}" for h in header))
    for name in sorted(totals, key=lambda k: (k == "all", k)):
        print("  ".join([f"{name:>10s}", *(f"{totals[name][h]:>10d}" for h in header[1:])]))
    times = fault_to_exit(cases)
    if times:
        print(f"\n{'seconds from the fault to the exit':<100s}  {'n':>3s}  {'median':>7s}  {'min-max':>13s}")
        for case, values in times.items():
            print(f"{case:<100s}  {len(values):>3d}  {statistics.median(values):>7.1f}  "
                  f"{min(values):>6.1f}-{max(values):<6.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({**{k: dict(v) for k, v in totals.items()},
                                               "fault_to_exit_s": times}, indent=2) + "\n")
    return returncode or int(totals["all"]["cases"] != totals["all"]["clear"] + totals["all"]["skipped"])


def fault_to_exit(cases: list[dict]) -> dict[str, list[float]]:
    """{case: [seconds from its fault to the command's exit, one per round that recorded it]}."""
    times: dict[str, list[float]] = collections.defaultdict(list)
    for case in cases:
        if case.get("fault_to_exit_s") is not None:
            times[case["case"].removeprefix("tests/faults/")].append(float(case["fault_to_exit_s"]))
    return dict(times)


if __name__ == "__main__":
    sys.exit(main())
