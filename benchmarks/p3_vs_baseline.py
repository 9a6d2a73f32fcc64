"""P3 against its baseline on the same engine, from compute-bound to communication-bound links (needs root).

    .venv/bin/python benchmarks/p3_vs_baseline.py [--models vgg,resnet] [--ratios 0.5,1,2,4 | --bandwidths 4gbit,1gbit]
        [--repetitions 3] [--hosts 3] [--batches 11] [--batch-size 16] [--credits 1048576,16777216]
        [--overhead-repetitions 3] [--json FILE]

On a fresh testbed (one server and one worker per host, every host's egress shaped with tc):
1. per model, one baseline probe on the unshaped links measures compute and communication time per
   iteration (the p3-comm line); the bandwidths are then chosen so that the baseline's predicted
   communication-to-computation ratio spans --ratios (the study's own rule: reprokit.study.choice);
2. baseline and p3 for every model and bandwidth, --repetitions times, interleaved (the order alternates
   per repetition so that drift hits both): throughput means, p3/baseline with its 95% interval (the
   study's analysis), comm_wait_s_per_iter and overlap per variant, the measured ratio, and beside each
   speedup the bound perfect overlap would give, (t_compute + t_comm) / max(t_compute, t_comm), from the
   baseline's own measurements at that bandwidth;
3. P3_CREDIT values against the default at the first model's middle bandwidth (--credits);
4. the cost of slicing alone on an unshaped local run (P3_PRIORITY=0 against baseline).
Uses its own CK_REPOS/CK_TOOLS in a temporary folder. Prints figures; asserts nothing.
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
from reprokit.run.settings import P3_DEFAULT_CREDIT
from reprokit.paths import REPO_ROOT
from reprokit.study.analysis import ratio_interval  # the study's speedup interval (log scale, never below zero)
from reprokit.study.choice import choose  # the study's bandwidth choice from a measured probe
from reprokit.study.claims import NATIVE  # a target the links cannot reach: run unshaped

STUDY = json.loads((REPO_ROOT / "study" / "sysml19-p3" / ".cm" / "meta.json").read_text())

CK = str(Path(sys.executable).with_name("ck"))
ENV: dict[str, str] = {}  # this benchmark's own CK_REPOS/CK_TOOLS, set in main()
FIELDS = ("throughput_samples_per_sec", "comm_wait_s_per_iter", "overlap", "comm_s_per_iter", "compute_s_per_iter")


def ck(*args: str) -> subprocess.CompletedProcess:
    return ck_cli(*args, env=ENV, check=True)


def run(run_dir: Path, *args: str) -> dict:
    """The run's unified result (p3-result.json)."""
    ck("run", "program:p3", f"--tmp_dir={run_dir}", "--out=json_file", f"--out_file={run_dir / 'ck.json'}",
       "--treat_return_code_as_exit_code=yes", *args)
    return json.loads((run_dir / "p3-result.json").read_text())


def mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.fmean(values) if values else None


def fmt(value: float | None, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="vgg,resnet")
    parser.add_argument("--ratios", default="0.5,1.4,4", help="target communication/computation ratios")
    parser.add_argument("--bandwidths", default="", help="explicit tc rates instead of --ratios")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--batches", type=int, default=11)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--credits", default=f"{1 << 20},{16 << 20}")
    parser.add_argument("--overhead-repetitions", type=int, default=3)
    parser.add_argument("--json", default="", help="also write every measurement here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("benchmark: needs root (network namespaces, tc)")
    work, env = isolated_ck("p3-vs-baseline-")
    ENV.update(env)
    common = ["--env.PROFILE=smoke", "--env.WORKER_THREADS=1", f"--env.NUM_BATCHES={args.batches}",
              "--env.DISP_BATCHES=5", f"--env.BATCH_SIZE={args.batch_size}", "--target=cmp"]
    models = args.models.split(",")
    rows: dict[tuple, list[dict]] = {}
    chosen: dict[str, list[str]] = {}
    probes: dict[str, dict] = {}
    ck("testbed", "cluster:cmp", f"--hosts={args.hosts}")
    try:
        hosts_json = Path(env["CK_TOOLS"]) / "testbed-cmp" / "hosts.json"
        ck("add", "machine:cmp", "--type=cluster", f"--config_file={hosts_json}", "--quiet")
        for model in models:
            if args.bandwidths:
                chosen[model] = args.bandwidths.split(",")
                continue
            ck("testbed", "cluster:cmp", "--shape=off")
            probe = run(work / f"probe-{model}", f"--cmd_key={model}", "--env.VARIANT=baseline", *common)
            choice = choose(model, probe, str(work / f"probe-{model}"), STUDY["parameters"],
                            STUDY["parameters"].get("source", ""), args.hosts,
                            [float(r) for r in args.ratios.split(",")], None)
            probes[model] = choice.to_dict()
            chosen[model] = list(choice.bandwidths)
            print(f"probe {choice.summary()}", flush=True)
        for rep in range(args.repetitions):
            for model in models:
                for bandwidth in chosen[model]:
                    ck("testbed", "cluster:cmp", f"--shape={'off' if bandwidth == NATIVE else bandwidth}")
                    for variant in (("baseline", "p3") if rep % 2 == 0 else ("p3", "baseline")):
                        result = run(work / f"{model}-{bandwidth}-{variant}-{rep}", f"--cmd_key={model}",
                                     f"--env.VARIANT={variant}", *common)
                        row = {k: result.get(k) for k in FIELDS}
                        rows.setdefault((model, bandwidth, variant), []).append(row)
                        print(f"rep {rep + 1} {model} {bandwidth} {variant}: {fmt(row['throughput_samples_per_sec'], '.2f')} "
                              f"samples/s, comm wait {fmt(row['comm_wait_s_per_iter'])} s/iter, overlap "
                              f"{fmt(row['overlap'], '.2f')}", flush=True)
        credits = [int(c) for c in args.credits.split(",") if c]
        if credits and models:
            model, bandwidth = models[0], chosen[models[0]][len(chosen[models[0]]) // 2]
            ck("testbed", "cluster:cmp", f"--shape={'off' if bandwidth == NATIVE else bandwidth}")
            for rep in range(args.repetitions):
                order = credits if rep % 2 == 0 else credits[::-1]
                for credit in order:
                    result = run(work / f"credit-{credit}-{rep}", f"--cmd_key={model}", "--env.VARIANT=p3",
                                 f"--env.P3_CREDIT={credit}", *common)
                    row = {k: result.get(k) for k in FIELDS}
                    rows.setdefault((model, bandwidth, f"p3-credit-{credit}"), []).append(row)
                    print(f"rep {rep + 1} {model} {bandwidth} P3_CREDIT={credit}: "
                          f"{fmt(row['throughput_samples_per_sec'], '.2f')} samples/s", flush=True)
    finally:
        subprocess.run([CK, "testbed", "cluster:cmp", "--down"], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)

    print(f"\n{args.hosts} hosts (one server and one worker each), batch {args.batch_size} per worker, 3x32x32, "
          f"{args.batches} batches, {args.repetitions} interleaved repetitions, P3_CREDIT={P3_DEFAULT_CREDIT} unless said")
    print("model  bandwidth  comm/comp  baseline s/s  p3 s/s   p3/baseline [95% interval]   bound  "
          "wait base/p3 (s/iter)  overlap base/p3")
    summary = []
    for model in models:
        for bandwidth in chosen[model]:
            base, p3 = rows[(model, bandwidth, "baseline")], rows[(model, bandwidth, "p3")]
            ratio, low, high = ratio_interval([r["throughput_samples_per_sec"] for r in p3],
                                              [r["throughput_samples_per_sec"] for r in base])
            comp, comm = mean(base, "compute_s_per_iter"), mean(base, "comm_s_per_iter")
            measured_ratio = comm / comp if comp and comm is not None else None
            bound = (comp + comm) / max(comp, comm) if comp and comm is not None else None
            summary.append({"model": model, "bandwidth": bandwidth, "comm_to_compute": measured_ratio,
                            "speedup": ratio, "low": low, "high": high, "perfect_overlap_bound": bound,
                            "baseline": base, "p3": p3})
            print(f"{model:6s} {bandwidth:9s}  {fmt(measured_ratio, '5.2f'):>9s}  "
                  f"{fmt(mean(base, 'throughput_samples_per_sec'), '8.2f'):>12s}  {fmt(mean(p3, 'throughput_samples_per_sec'), '7.2f'):>6s}   "
                  f"{ratio:.3f} [{low:.3f}, {high:.3f}]        {fmt(bound, '.2f')}   "
                  f"{fmt(mean(base, 'comm_wait_s_per_iter'))}/{fmt(mean(p3, 'comm_wait_s_per_iter'))}          "
                  f"{fmt(mean(base, 'overlap'), '.2f')}/{fmt(mean(p3, 'overlap'), '.2f')}")
    credit_rows = {k: v for k, v in rows.items() if k[2].startswith("p3-credit-")}
    if credit_rows:
        (model, bandwidth, _), = {(k[0], k[1], "") for k in credit_rows}
        print(f"\nP3_CREDIT at {model} {bandwidth} (p3/baseline of the main sweep's baseline there):")
        base = [r["throughput_samples_per_sec"] for r in rows[(model, bandwidth, "baseline")]]
        for key, values in sorted(credit_rows.items(), key=lambda kv: int(kv[0][2].rsplit("-", 1)[1])):
            ratio, low, high = ratio_interval([r["throughput_samples_per_sec"] for r in values], base)
            print(f"  {key[2][len('p3-credit-'):]:>10s} bytes: {ratio:.3f} [{low:.3f}, {high:.3f}]")
        ratio, low, high = ratio_interval([r["throughput_samples_per_sec"] for r in rows[(model, bandwidth, "p3")]], base)
        print(f"  {P3_DEFAULT_CREDIT:>10d} bytes (default): {ratio:.3f} [{low:.3f}, {high:.3f}]")

    overhead = {}
    if args.overhead_repetitions:
        print("\nslicing alone on an unshaped local run (resnet, 2 workers, 1 server, smoke profile):")
        local: dict[str, list[float]] = {"baseline": [], "p3-slicing-only": []}
        for rep in range(args.overhead_repetitions):
            for name in (("baseline", "p3-slicing-only") if rep % 2 == 0 else ("p3-slicing-only", "baseline")):
                extra = ["--env.VARIANT=baseline"] if name == "baseline" else ["--env.VARIANT=p3", "--env.P3_PRIORITY=0"]
                local[name].append(run(work / f"local-{name}-{rep}", "--cmd_key=resnet", "--env.PROFILE=smoke",
                                       *extra)["throughput_samples_per_sec"])
        ratio, low, high = ratio_interval(local["p3-slicing-only"], local["baseline"])
        overhead = {"local": local, "ratio": ratio, "low": low, "high": high}
        print(f"baseline {statistics.fmean(local['baseline']):.2f}, p3 slicing only "
              f"{statistics.fmean(local['p3-slicing-only']):.2f} samples/s: ratio {ratio:.3f} [{low:.3f}, {high:.3f}] "
              f"(n={args.overhead_repetitions} each)")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "probes": probes, "bandwidths": chosen,
                                               "summary": summary, "credits": {k[2]: v for k, v in credit_rows.items()},
                                               "slicing_overhead": overhead}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
