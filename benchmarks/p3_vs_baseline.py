"""MXNet 1.9.1's own P3 against both baselines on the same engine, from compute-bound to communication-bound links.

    .venv/bin/python benchmarks/p3_vs_baseline.py [--models vgg,resnet,sockeye] [--ratios 0.5,2]
        [--bandwidths MODEL=RATE+RATE,...] [--repetitions 5] [--hosts 3] [--batches 11] [--batch-size 16]
        [--tune-slices 20000,50000,200000] [--tune-water-marks 1,10,100] [--tune-repetitions 3]
        [--overhead-repetitions 3] [--json FILE]

Needs root. On a fresh testbed (one server and one worker per host, every host's egress shaped with tc):
1. per model, one baseline probe on the unshaped links measures compute and communication time per
   iteration (the p3-comm line); the bandwidths are then chosen so that the baseline's predicted
   communication-to-computation ratio spans --ratios (the study's own rule: reprokit.study.sweep.choice). A model
   the study has no parameter count for (sockeye) takes its bandwidths from --bandwidths MODEL=RATE+RATE;
2. tuning, on the first model at its most communication-bound bandwidth: P3_SLICE_SIZE over --tune-slices
   (water mark at its default), then P3_WATER_MARK over --tune-water-marks (at the best slice size), each
   against baseline-worker-update, --tune-repetitions interleaved; the best mean is used from then on;
3. baseline, baseline-worker-update and p3 for every model and bandwidth, --repetitions times, interleaved as the
   study interleaves a sweep (reprokit.study.paper.planning; the order reverses every other repetition so that
   drift hits all three), each variant with the study entry's run settings: throughput means, p3 over each
   baseline with its 95% interval (the study's analysis, log scale), comm_wait_s_per_iter and overlap, and
   beside each ratio the bound perfect overlap would give, (t_compute + t_comm) / max(t_compute, t_comm),
   from that baseline's own measurements at that bandwidth; with the ablations at the most
   communication-bound bandwidth of the first model: slicing only (P3_PRIORITY=0) and priority only
   (P3_SLICE_SIZE=0);
4. the cost of slicing alone on an unshaped local run (resnet, P3_PRIORITY=0 against both baselines).
Uses its own CK_REPOS/CK_TOOLS in a temporary folder. Prints figures; asserts nothing.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from reprokit.bootstrap import ck as ck_cli, isolated_ck
from reprokit.run.settings import P3_DEFAULT_SLICE_SIZE, P3_DEFAULT_WATER_MARK
from reprokit.study.analysis.speedup import ratio_interval  # the study's speedup interval (log scale, never below zero)
from reprokit.study.paper.claims import repository_study
from reprokit.study.paper.planning import in_turn, plan_runs
from reprokit.study.paper.rates import NATIVE  # a target the links cannot reach: run unshaped
from reprokit.study.sweep.choice import choose  # the study's bandwidth choice from a measured probe

STUDY = repository_study("sysml19-p3")  # its parameter counts, and its variants' run settings

CK = str(Path(sys.executable).with_name("ck"))
ENV: dict[str, str] = {}  # this benchmark's own CK_REPOS/CK_TOOLS, set in main()
FIELDS = ("throughput_samples_per_sec", "comm_wait_s_per_iter", "overlap", "comm_s_per_iter", "compute_s_per_iter",
          "mechanism", "run_success", "failure_reason")
BASELINES = ("baseline", "baseline-worker-update")
MAIN = ("baseline", "baseline-worker-update", "p3")
ABLATIONS = ("p3-slicing-only", "p3-priority-only")  # at the most communication-bound bandwidth of the first model


def ck(*args: str) -> subprocess.CompletedProcess:
    return ck_cli(*args, env=ENV, check=True)


def run(run_dir: Path, *args: str) -> dict:
    """The run's unified result (p3-result.json); a failed run counts as no measurement and is said."""
    ck_cli("run", "program:p3", f"--tmp_dir={run_dir}", "--out=json_file", f"--out_file={run_dir / 'ck.json'}",
           *args, env=ENV, check=False)  # a failed run exits non-zero; its result says why
    result = json.loads((run_dir / "p3-result.json").read_text())
    if not result.get("run_success"):
        print(f"  FAILED {run_dir.name}: {result.get('failure_reason')}", flush=True)
    return result


def throughputs(rows: list[dict]) -> list[float]:
    return [r["throughput_samples_per_sec"] for r in rows if r.get("throughput_samples_per_sec")]


def mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.fmean(values) if values else None


def fmt(value: float | None, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def ratio(numerator: list[dict], denominator: list[dict]) -> tuple[str, dict]:
    a, b = throughputs(numerator), throughputs(denominator)
    if len(a) < 2 or len(b) < 2:
        return f"n/a (n={len(a)}/{len(b)})", {"n": [len(a), len(b)]}
    value, low, high = ratio_interval(a, b)
    return f"{value:.2f} [{low:.2f}, {high:.2f}]", {"ratio": value, "low": low, "high": high, "n": [len(a), len(b)]}


def overlap_bound(rows: list[dict]) -> float | None:
    """(t_compute + t_comm) / max(t_compute, t_comm) from a variant's own p3-comm figures."""
    comp, comm = mean(rows, "compute_s_per_iter"), mean(rows, "comm_s_per_iter")
    if not comp or comm is None:
        return None
    return (comp + comm) / max(comp, comm)


def shape(bandwidth: str) -> None:
    ck("testbed", "cluster:cmp", f"--shape={'off' if bandwidth == NATIVE else bandwidth}")


def variant_args(variant: str, tuned: dict[str, str]) -> list[str]:
    """A study variant's run settings (the study entry's), over P3's tuned knobs where the variant runs P3."""
    env = STUDY.variants[variant]
    return [f"--env.{k}={v}" for k, v in {**(tuned if env.get("VARIANT") == "p3" else {}), **env}.items()]


def one_round(work: Path, label: str, configs: list[tuple[str, list[str]]], rep: int,
              common: list[str]) -> dict[str, dict]:
    """Every config once, in the order given (0-based repetition ``rep`` names the run folders); each one's row."""
    rows = {}
    for name, config in configs:
        result = run(work / f"{label}-{name}-{rep}".replace("/", "_"), *config, *common)
        rows[name] = row = {k: result.get(k) for k in FIELDS}
        print(f"rep {rep + 1} {label} {name}: {fmt(row['throughput_samples_per_sec'], '.2f')} samples/s, comm wait "
              f"{fmt(row['comm_wait_s_per_iter'])} s/iter, overlap {fmt(row['overlap'], '.2f')}", flush=True)
    return rows


def interleaved(work: Path, label: str, configs: dict[str, list[str]], repetitions: int, common: list[str],
                rows: dict[str, list[dict]]) -> None:
    """Every config once per repetition (one_round), the order reversed every other repetition (in_turn)."""
    for rep in range(repetitions):
        for name, row in one_round(work, label, in_turn(list(configs.items()), rep + 1), rep, common).items():
            rows.setdefault(name, []).append(row)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="vgg,resnet,sockeye")
    parser.add_argument("--ratios", default="0.5,2", help="target communication/computation ratios")
    parser.add_argument("--bandwidths", default="sockeye=native+300mbit",
                        help="MODEL=RATE+RATE,...: a model's tc rates instead of the probe's choice")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--batches", type=int, default=11)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--tune-slices", default="20000,50000,200000")
    parser.add_argument("--tune-water-marks", default="1,10,100")
    parser.add_argument("--tune-repetitions", type=int, default=3)
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
    given = {m: b.split("+") for m, b in (pair.split("=", 1) for pair in args.bandwidths.split(",") if pair)}
    rows: dict[tuple, list[dict]] = {}
    chosen: dict[str, list[str]] = {}
    probes: dict[str, dict] = {}
    tuning: dict[str, dict] = {}
    slice_size, water_mark = P3_DEFAULT_SLICE_SIZE, P3_DEFAULT_WATER_MARK
    ck("testbed", "cluster:cmp", f"--hosts={args.hosts}")
    try:
        hosts_json = Path(env["CK_TOOLS"]) / "testbed-cmp" / "hosts.json"
        ck("add", "machine:cmp", "--type=cluster", f"--config_file={hosts_json}", "--quiet")
        for model in models:
            if model in given:
                chosen[model] = given[model]
                continue
            shape(NATIVE)
            probe = run(work / f"probe-{model}", f"--cmd_key={model}", "--env.VARIANT=baseline", *common)
            choice = choose(model, probe, str(work / f"probe-{model}"), STUDY.parameters, STUDY.parameters_source,
                            args.hosts,
                            [float(r) for r in args.ratios.split(",")], None)
            probes[model] = choice.to_dict()
            chosen[model] = list(choice.bandwidths)
            print(f"probe {choice.summary()}", flush=True)

        tune_model, tune_bw = models[0], chosen[models[0]][-1]  # the most communication-bound
        shape(tune_bw)
        model_arg = [f"--cmd_key={tune_model}"]
        for knob, values in (("P3_SLICE_SIZE", args.tune_slices), ("P3_WATER_MARK", args.tune_water_marks)):
            if not values:
                continue
            configs = {"baseline-worker-update": [*model_arg, "--env.VARIANT=baseline-worker-update"]}
            for value in values.split(","):
                configs[f"{knob}={value}"] = [*model_arg, "--env.VARIANT=p3", f"--env.P3_SLICE_SIZE={slice_size}",
                                              f"--env.P3_WATER_MARK={water_mark}", f"--env.{knob}={value}"]
            found: dict[str, list[dict]] = {}
            interleaved(work, f"tune-{tune_model}-{tune_bw}", configs, args.tune_repetitions, common, found)
            candidates = {k: statistics.fmean(throughputs(v)) for k, v in found.items()
                          if k != "baseline-worker-update" and throughputs(v)}
            best = max(candidates, key=candidates.get)
            tuning[knob] = {k: v for k, v in found.items()}
            print(f"tuning {knob} on {tune_model} at {tune_bw}:", flush=True)
            for name in found:
                print(f"  {name:26s} {fmt(mean(found[name], 'throughput_samples_per_sec'), '.2f')} samples/s  "
                      f"over baseline-worker-update {ratio(found[name], found['baseline-worker-update'])[0]}",
                      flush=True)
            if knob == "P3_SLICE_SIZE":
                slice_size = int(best.split("=")[1])
            else:
                water_mark = int(best.split("=")[1])
            print(f"  chosen: {best}", flush=True)
        tuned = {"P3_SLICE_SIZE": str(slice_size), "P3_WATER_MARK": str(water_mark)}

        only = [(m, b, v) for m in models for b in chosen[m] for v in MAIN] + [(tune_model, tune_bw, v)
                                                                              for v in ABLATIONS]
        planned = plan_runs(models, (*MAIN, *ABLATIONS), (), args.repetitions, per_model=chosen, only=only)
        for (rep, model, bandwidth), group in itertools.groupby(planned, lambda c: (c.repetition, c.model,
                                                                                   c.bandwidth)):
            shape(bandwidth)
            configs = [(c.variant, [f"--cmd_key={model}", *variant_args(c.variant, tuned)]) for c in group]
            for name, row in one_round(work, f"{model}-{bandwidth}", configs, rep - 1, common).items():
                rows.setdefault((model, bandwidth, name), []).append(row)
    finally:
        subprocess.run([CK, "testbed", "cluster:cmp", "--down"], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)

    print(f"\n{args.hosts} hosts (one server and one worker each), batch {args.batch_size} per worker, 3x32x32 "
          f"(sockeye: its smoke corpus), {args.batches} batches, {args.repetitions} interleaved repetitions; p3 with "
          f"P3_SLICE_SIZE={slice_size}, P3_WATER_MARK={water_mark}; ratios of geometric means, 95% intervals")
    print("model    bandwidth  comm/comp  baseline  b-worker  p3 (samples/s)  p3/baseline [95%]  bound(base)  "
          "p3/b-worker [95%]  bound(b-worker)  share of bound  wait base/bw/p3 (s/iter)")
    summary = []
    for model in models:
        for bandwidth in chosen[model]:
            base, worker, p3 = (rows.get((model, bandwidth, v), []) for v in MAIN)
            comp, comm = mean(base, "compute_s_per_iter"), mean(base, "comm_s_per_iter")
            measured = comm / comp if comp and comm is not None else None
            over_base, over_base_d = ratio(p3, base)
            over_worker, over_worker_d = ratio(p3, worker)
            bound_base, bound_worker = overlap_bound(base), overlap_bound(worker)
            share = (over_worker_d["ratio"] / bound_worker
                     if bound_worker and over_worker_d.get("ratio") is not None else None)
            summary.append({"model": model, "bandwidth": bandwidth, "comm_to_compute": measured,
                            "p3_over_baseline": over_base_d, "p3_over_worker_update": over_worker_d,
                            "bound_baseline": bound_base, "bound_worker_update": bound_worker,
                            "share_of_worker_update_bound": share,
                            **{v: rows.get((model, bandwidth, v), []) for v in (*MAIN, "p3-slicing-only",
                                                                                 "p3-priority-only")}})
            print(f"{model:8s} {bandwidth:9s}  {fmt(measured, '5.2f'):>9s}  "
                  f"{fmt(mean(base, 'throughput_samples_per_sec'), '8.2f')}  "
                  f"{fmt(mean(worker, 'throughput_samples_per_sec'), '8.2f')}  "
                  f"{fmt(mean(p3, 'throughput_samples_per_sec'), '8.2f'):>14s}  {over_base:>17s}  "
                  f"{fmt(bound_base, '.2f'):>11s}  {over_worker:>17s}  {fmt(bound_worker, '.2f'):>15s}  "
                  f"{fmt(share, '.2f'):>14s}  {fmt(mean(base, 'comm_wait_s_per_iter'))}/"
                  f"{fmt(mean(worker, 'comm_wait_s_per_iter'))}/{fmt(mean(p3, 'comm_wait_s_per_iter'))}")
            for ablation in ("p3-slicing-only", "p3-priority-only"):
                rows_of = rows.get((model, bandwidth, ablation))
                if rows_of:
                    print(f"         {ablation}: {fmt(mean(rows_of, 'throughput_samples_per_sec'), '.2f')} samples/s, "
                          f"over baseline {ratio(rows_of, base)[0]}, over baseline-worker-update "
                          f"{ratio(rows_of, worker)[0]}, p3 over it {ratio(p3, rows_of)[0]}")

    overhead = {}
    if args.overhead_repetitions:
        print("\nslicing alone on an unshaped local run (resnet, 2 workers, 1 server, smoke profile):")
        local: dict[str, list[dict]] = {}
        configs = {v: variant_args(v, tuned) for v in (*BASELINES, "p3-slicing-only")}
        interleaved(work, "local", configs, args.overhead_repetitions, ["--cmd_key=resnet", "--env.PROFILE=smoke"],
                    local)
        for versus in BASELINES:
            text, figures = ratio(local["p3-slicing-only"], local[versus])
            overhead[versus] = figures
            print(f"  p3 slicing only over {versus}: {text} (n={args.overhead_repetitions} each)")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "probes": probes, "bandwidths": chosen,
                                               "tuned": {"P3_SLICE_SIZE": slice_size, "P3_WATER_MARK": water_mark},
                                               "tuning": tuning, "summary": summary, "slicing_overhead": overhead},
                                              indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
