"""The emulated sweep at the paper's settings: `ck reproduce study:sysml19-p3 --emulate=p4000` (or --study NAME) on a
fresh testbed (needs root and sshd).

    .venv/bin/python benchmarks/emulated_sweep.py [--hosts 4 [--cpus_per_host C]] [--link_sharing fifo|fair] [--tcp cubic]
                                                  [--dilation 20] [--repetitions 3] [--models vgg]
                                                  [--batches 8] [--bandwidths 30gbit --variants baseline,...]
                                                  [--engines embedded,artifact --work DIR] [--env KEY=VALUE ...]

Uses its own CK_REPOS/CK_TOOLS in a temporary folder (bootstrap included), or in --work DIR (e.g. the one
benchmarks/artifact_real.py installed the authors' builds into, for --engines=artifact). The study runs the claims stated at a
bandwidth (their models, variants and baselines) with the study's `paper` profile (224x224 images, batch 32 per
worker), 20 batches, every layer a wait of the GPU's profile (--emulate) times k, each link shaped to the claim's bandwidth
divided by k. Prints every run's mean per-worker throughput, then the report's "emulated" cell of each claim (the
speedup with its interval and n, and the verdict or why it is withheld), and the wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from reprokit.bootstrap import CPUS_PER_HOST_HELP, LINK_SHARING_HELP, TCP_HELP, ck as ck_cli, isolated_ck, testbed_up
from reprokit.cluster.testbed import DEFAULT_LINK_SHARING, LINK_SHARING
from reprokit.study.store.records import Store

NAME = "es"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="sysml19-p3", help="the study entry to reproduce (e.g. sosp19-bytescheduler)")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--cpus_per_host", type=int, help=CPUS_PER_HOST_HELP)
    parser.add_argument("--link_sharing", choices=LINK_SHARING, default=DEFAULT_LINK_SHARING, help=LINK_SHARING_HELP)
    parser.add_argument("--tcp", help=TCP_HELP)
    parser.add_argument("--emulate", default="p4000", help="the compute profile: a GPU's name (the paper's P4000 by "
                        "default) or measured:FILE")
    parser.add_argument("--dilation", default="20")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--models", default="", help="narrow the claims' models (e.g. vgg)")
    parser.add_argument("--bandwidths", default="", help="the paper's bandwidths to run (crossed with the variants)")
    parser.add_argument("--variants", default="", help="the variants to run, e.g. baseline,p3-slicing-only")
    parser.add_argument("--batches", type=int, default=0,
                        help="batches per run, reported every quarter (default: the study's 20, every 5)")
    parser.add_argument("--engines", default="", help="the study's --engines (default: the study's own)")
    parser.add_argument("--work", type=Path, default=None, help="CK_REPOS/CK_TOOLS live here (reused when given)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="a run setting passed on as --env.KEY=VALUE (e.g. WORKER_THREADS=1); repeatable")
    args = parser.parse_args()
    for setting in args.env:
        key, sep, _ = setting.partition("=")
        if not (key and sep):
            raise SystemExit(f"benchmark: --env takes KEY=VALUE, not {setting!r}")
    if os.geteuid() != 0:
        raise SystemExit("benchmark: needs root (network namespaces, tc)")
    work, env = isolated_ck("emulated-sweep-", args.work)
    store = Path(tempfile.mkdtemp(prefix="store-", dir=work))  # a new store each time, also in a reused --work
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; store {store}", flush=True)
    narrow = [f"--{key}={value}" for key, value in (("models", args.models), ("bandwidths", args.bandwidths),
                                                     ("variants", args.variants), ("engines", args.engines)) if value]
    narrow += [f"--env.{setting}" for setting in args.env]
    if args.batches:
        narrow += [f"--env.NUM_BATCHES={args.batches}", f"--env.DISP_BATCHES={max(1, args.batches // 4)}"]
    testbed_up(NAME, args.hosts, args.cpus_per_host, env, args.link_sharing, args.tcp)
    try:
        hosts_json = Path(env["CK_TOOLS"]) / f"testbed-{NAME}" / "hosts.json"
        ck_cli("rm", f"machine:{NAME}", "--force", env=env)  # a reused --work keeps the last run's entry
        ck_cli("add", f"machine:{NAME}", "--type=cluster", f"--config_file={hosts_json}", "--quiet", env=env,
               check=True)
        started = time.monotonic()
        proc = ck_cli("reproduce", f"study:{args.study}", f"--target={NAME}", f"--emulate={args.emulate}",
                      f"--dilation={args.dilation}", f"--repetitions={args.repetitions}", f"--store={store}",
                      *narrow, env=env, timeout=3 * 3600)
        wall_s = time.monotonic() - started
    finally:
        ck_cli("testbed", f"cluster:{NAME}", "--down", env=env)
    print(proc.stdout[-3000:])
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        return 1
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\nruns (mean per-worker samples/s: images, or Sockeye's sentence pairs; wall s):")
    for record in Store(store, args.study).all_records():
        config, result = record.config, record.run_result
        per_worker = (result.throughput_per_worker if result else None) or []
        print(f"  {config.model} {config.bandwidth} {config.engine} {config.variant} rep {config.repetition}: "
              f"{statistics.fmean(per_worker) if per_worker else float('nan'):.2f} samples/s, links "
              f"{record.provenance.links_shaped_to}, host CPU busy {result.host_cpu_busy if result else None}"
              f"{' (CPU-bound)' if result and result.cpu_bound else ''}, {record.provenance.duration_s} s")
    report = json.loads((store / "report" / "report.json").read_text())
    print("\nclaims stated at a bandwidth (report.json 'labelled'):")
    for row in report["labelled"]:
        print(f"  {row['claim']} at {row['bandwidth']}:\n    measured: {row['measured']}\n"
              f"    emulated: {row['emulated']}\n    predicted: {row['predicted']}")
    print(f"\nwall time {wall_s / 60:.1f} min, {args.hosts} hosts, k={args.dilation}, n={args.repetitions}, "
          f"compute {args.emulate}, links shared {args.link_sharing}, TCP {args.tcp or 'the machine default'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
