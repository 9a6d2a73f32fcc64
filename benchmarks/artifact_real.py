"""The authors' artifact for real: install both builds from local source trees through CK, then run their scripts.

    .venv/bin/python benchmarks/artifact_real.py --source DIR [--work DIR] [--models resnet,vgg,inception-v3,sockeye]
        [--variants p3,baseline,baseline-worker-update] [--engines artifact[,embedded]] [--repetitions 1] [--reinstall]
        [--hosts 0 [--bandwidths native,670mbit]] [--json FILE] [-- --env.NAME=VALUE ...]

--source DIR holds local git repositories of the authors' sources (GitHub is not reachable from here):
``DIR/p3.git`` (github anandj91/p3, branches master and baseline) and ``DIR/anand-mxnet.git``
(github anandj91/anand-mxnet with a local branch ``baseline``). Steps, each timed:
1. ``ck install package:sysml19-p3-github --env.PACKAGE_URL=DIR/p3.git`` and
   ``ck install package:sysml19-p3-baseline-github --env.PACKAGE_URL=DIR/anand-mxnet.git
   --env.SOCKEYE_URL=DIR/p3.git`` (CPU builds; skipped when registered already, unless --reinstall),
   through ccache when present (CCACHE_DIR/CCACHE_BASEDIR from the environment are honoured);
2. each build's interpreter imports mxnet;
3. when a Sockeye run is asked for and the bundled IWSLT15 training files are missing from the
   source copy, the synthetic IWSLT15-layout corpus is installed (the artifact's Sockeye then reads it);
4. ``ck run program:p3 --cmd_key=M --env.ENGINE=artifact --env.VARIANT=V`` for every model and variant
   (the embedded default: here, the smoke profile), --repetitions times, interleaved; with --hosts N
   on a fresh testbed (``ck testbed cluster:art --hosts=N``, needs root) instead, once per --bandwidths
   entry (``native``: unshaped; else every host's egress shaped with tc, as the P3 benchmark does).
   ``--engines artifact,embedded`` adds stock MXNet 1.9.1's P3 and its two baselines (``--env.ENGINE=embedded``,
   bootstrapped into the same CK_TOOLS; the authors' builds have no ``baseline-worker-update``) to every
   repetition, so the authors' two builds and MXNet's three variants are interleaved (the order reverses
   every repetition so that drift hits all of them).
Prints the figures (install times, make times, throughput per run, per engine and bandwidth each variant's
mean and p3/baseline with its 95% interval when there are 2+ repetitions, unpaired (the study's rule) and
paired by repetition (the mean of each repetition's own ratio, with its log-scale interval)); --json writes them. Uses its own CK_REPOS/CK_TOOLS (--work, default a new
temporary folder); asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reprokit.bootstrap import REPO_ALIAS, ck as ck_cli
from reprokit.core.paths import SRC_DIR
from reprokit.study.analysis.speedup import (  # the study's speedup interval (log scale, never below zero)
    mean_interval,
    ratio_interval,
)
from reprokit.study.paper.rates import NATIVE

REPO_ROOT = SRC_DIR.parent
CK = str(Path(sys.executable).with_name("ck"))
PACKAGES = {"p3": "sysml19-p3-github", "baseline": "sysml19-p3-baseline-github"}
FIELDS = ("run_success", "failure_reason", "throughput_samples_per_sec", "throughput_per_worker",
          "throughput_tokens_per_sec", "batches_measured", "wall_time_s", "data", "engine", "batch_size",
          "image_shape", "num_workers", "warnings")
INSTALL_TIMEOUT_S = 4 * 3600
RUN_TIMEOUT_S = 3600


def ck(env: dict, *args: str, timeout: float = 1800, check: bool = True) -> subprocess.CompletedProcess:
    return ck_cli(*args, env=env, check=check, timeout=timeout)


def registered(env: dict) -> dict[str, dict]:
    out = ck(env, "search", "env", "--tags=tool,p3", "--add_meta", "--out=json")
    found = json.loads(out.stdout)["lst"]
    return {e["meta"]["env"].get("CK_ENV_TOOL_SYSML19_P3_BUILD", ""): e["meta"]["env"] for e in found}


def install(env: dict, build: str, source: Path, log_dir: Path) -> dict:
    """One build through `ck install`; its wall time, make time and manifest."""
    args = ["install", f"package:{PACKAGES[build]}", "--quiet", "--env.USE_CUDA=0"]
    if build == "p3":
        args.append(f"--env.PACKAGE_URL={source / 'p3.git'}")
    else:
        args += [f"--env.PACKAGE_URL={source / 'anand-mxnet.git'}", f"--env.SOCKEYE_URL={source / 'p3.git'}"]
    began = time.monotonic()
    proc = ck(env, *args, timeout=INSTALL_TIMEOUT_S, check=False)
    wall = time.monotonic() - began
    (log_dir / f"install-{build}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("artifact: error:")]
        raise SystemExit(f"benchmark: ck install of the {build} build failed: "
                         f"{errors[-1] if errors else 'see ' + str(log_dir / f'install-{build}.log')}")
    variables = registered(env)[build]
    manifest = json.loads(Path(variables["CK_ENV_TOOL_SYSML19_P3_MANIFEST"]).read_text())
    return {"install_wall_s": round(wall, 1), "make_s": manifest.get("build_s"), "commit": manifest["commit"],
            "patches": manifest.get("patches"), "missing": manifest.get("missing"), "sockeye": manifest.get("sockeye")}


def import_check(python: str) -> str:
    proc = subprocess.run([python, "-c", "import mxnet; print(mxnet.__version__)"], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, cwd="/")
    if proc.returncode != 0:
        raise SystemExit(f"benchmark: {python} cannot import mxnet: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout.strip()


def run(env: dict, run_dir: Path, *args: str) -> dict:
    run_dir.mkdir(parents=True)
    ck(env, "run", "program:p3", f"--tmp_dir={run_dir}", "--out=json_file", f"--out_file={run_dir / 'ck.json'}",
       "--treat_return_code_as_exit_code=yes", *args, timeout=RUN_TIMEOUT_S, check=False)
    path = run_dir / "p3-result.json"
    if not path.exists():
        return {"run_success": False, "failure_reason": f"no result in {run_dir}"}
    result = json.loads(path.read_text())
    return {k: result.get(k) for k in FIELDS}


def paired_ratios(runs: list[dict], model: str, bandwidth: str, engine: str) -> list[float]:
    """p3/baseline within each repetition: the two ran next to each other, so load that drifts between
    repetitions (other work on the same cores) cancels in the ratio."""
    ratios = []
    for rep in sorted({r["repetition"] for r in runs}):
        speed = {r["variant"]: r.get("throughput_samples_per_sec") for r in runs if r["repetition"] == rep
                 and (r["model"], r["bandwidth"], r["engine_kind"]) == (model, bandwidth, engine)}
        if speed.get("p3") and speed.get("baseline"):
            ratios.append(speed["p3"] / speed["baseline"])
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, type=Path, help="folder with p3.git and anand-mxnet.git")
    parser.add_argument("--work", type=Path, default=None, help="CK_REPOS/CK_TOOLS live here (reused when given)")
    parser.add_argument("--models", default="resnet,vgg,inception-v3,sockeye")
    parser.add_argument("--variants", default="p3,baseline,baseline-worker-update")
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--reinstall", action="store_true")
    parser.add_argument("--engines", default="artifact", help="artifact, embedded (MXNet 1.9.1's own P3 and baselines), or both")
    parser.add_argument("--hosts", type=int, default=0, help="run on a fresh N-host testbed (root) instead of here")
    parser.add_argument("--bandwidths", default=NATIVE, help="with --hosts: tc rates, native = unshaped")
    parser.add_argument("--json", default="", help="also write every figure here")
    parser.add_argument("extra", nargs="*", help="more ck run arguments, after --")
    args = parser.parse_args()
    for name in ("p3.git", "anand-mxnet.git"):
        if not (args.source / name).exists():
            raise SystemExit(f"benchmark: {args.source / name} not found; --source DIR must hold p3.git and "
                             f"anand-mxnet.git (local copies of github anandj91/p3 and anandj91/anand-mxnet)")
    work = args.work or Path(tempfile.mkdtemp(prefix="artifact-real-"))
    work.mkdir(parents=True, exist_ok=True)

    env = {**os.environ, "CK_REPOS": str(work / "repos"), "CK_TOOLS": str(work / "tools")}
    if ck(env, "where", f"repo:{REPO_ALIAS}", check=False).returncode != 0:
        ck(env, "import", "repo", f"--path={REPO_ROOT}", "--quiet")
    figures: dict = {"work": str(work), "builds": {}, "runs": []}
    have = registered(env)
    for build in ("p3", "baseline"):
        if build in have and not args.reinstall:
            print(f"{build} build: registered already in {work} (--reinstall to build again)", flush=True)
            manifest = json.loads(Path(have[build]["CK_ENV_TOOL_SYSML19_P3_MANIFEST"]).read_text())
            figures["builds"][build] = {"install_wall_s": None, "make_s": manifest.get("build_s"),
                                        "commit": manifest["commit"], "patches": manifest.get("patches")}
        else:
            figures["builds"][build] = install(env, build, args.source, work)
            print(f"{build} build: ck install {figures['builds'][build]['install_wall_s']} s, make "
                  f"{figures['builds'][build]['make_s']} s", flush=True)
    for build, variables in registered(env).items():
        figures["builds"][build]["mxnet"] = import_check(variables["CK_ENV_TOOL_SYSML19_P3_PYTHON"])
        print(f"{build} build: imports mxnet {figures['builds'][build]['mxnet']}", flush=True)
    models = [m for m in args.models.split(",") if m]
    if "sockeye" in models:
        tree = Path(registered(env)["p3"]["CK_ENV_TOOL_SYSML19_P3"])
        if not (tree / "example/sockeye/dataset/iwslt15_en-vi/train-preproc.en").exists():
            corpora = ck(env, "search", "env", "--tags=dataset,iwslt15,en-vi", "--out=json")
            if not json.loads(corpora.stdout)["lst"]:
                print("the bundled IWSLT15 training files are missing from the source: installing the synthetic "
                      "IWSLT15-layout corpus for the artifact's Sockeye", flush=True)
                ck(env, "install", "package:dataset-iwslt15-en-vi-synthetic", "--quiet")
    engines = [e for e in args.engines.split(",") if e]
    if not set(engines) <= {"artifact", "embedded"}:
        raise SystemExit(f"benchmark: --engines takes artifact and/or embedded, not {args.engines}")
    if "embedded" in engines:  # stock MXNet in the same CK_TOOLS (idempotent)
        subprocess.run([sys.executable, "-m", "reprokit.bootstrap"], env=env, check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, timeout=INSTALL_TIMEOUT_S)
    bandwidths = [b for b in args.bandwidths.split(",") if b] if args.hosts else [NATIVE]
    target: list[str] = []
    if args.hosts:
        ck(env, "testbed", "cluster:art", f"--hosts={args.hosts}")
        hosts_json = work / "tools" / "testbed-art" / "hosts.json"
        ck(env, "rm", "machine:art", "--force", check=False)  # a previous call's entry: stock CK would ask "Renew?"
        ck(env, "add", "machine:art", "--type=cluster", f"--config_file={hosts_json}", "--quiet")
        target = ["--target=art"]
    variants = [v for v in args.variants.split(",") if v]
    pairs = [(e, v) for e in engines for v in variants if e == "embedded" or v in ("p3", "baseline")]
    try:
        for rep in range(args.repetitions):
            for model in models:
                for bandwidth in bandwidths:
                    if args.hosts:
                        ck(env, "testbed", "cluster:art", f"--shape={'off' if bandwidth == NATIVE else bandwidth}")
                    for engine, variant in (pairs if rep % 2 == 0 else pairs[::-1]):
                        row = run(env, work / "runs" / f"{model}-{bandwidth}-{engine}-{variant}-{rep}-{int(time.time())}",
                                  f"--cmd_key={model}", f"--env.ENGINE={engine}", f"--env.VARIANT={variant}",
                                  *target, *args.extra)
                        row.update(model=model, bandwidth=bandwidth, engine_kind=engine, variant=variant,
                                   repetition=rep)
                        figures["runs"].append(row)
                        speed = row.get("throughput_samples_per_sec")
                        print(f"rep {rep + 1} {model} {bandwidth} {engine} {variant}: "
                              + (f"{speed:.2f} samples/s ({row.get('batches_measured')} batches measured, "
                                 f"{row.get('wall_time_s')} s wall, data {row.get('data')})" if speed
                                 else f"FAILED: {row.get('failure_reason')}"), flush=True)
    finally:
        if args.hosts:
            subprocess.run([CK, "testbed", "cluster:art", "--down"], env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=120)
    print(f"\n{args.hosts or 'embedded default:'} {'hosts' if args.hosts else ''} {' '.join(args.extra)}, "
          f"{args.repetitions} interleaved repetitions")
    print("model         bandwidth  engine    variant   samples/s (geo. mean) [95%] (n)   p3/baseline [95% interval]")
    figures["ratios"] = []
    for model in models:
        for bandwidth in bandwidths:
            for engine in engines:
                speeds = {v: [r["throughput_samples_per_sec"] for r in figures["runs"]
                              if (r["model"], r["bandwidth"], r["engine_kind"], r["variant"]) == (model, bandwidth, engine, v)
                              and r.get("throughput_samples_per_sec")] for v in variants}
                ratio = None
                if len(speeds.get("p3", [])) >= 2 and len(speeds.get("baseline", [])) >= 2:
                    ratio = ratio_interval(speeds["p3"], speeds["baseline"])
                    paired = mean_interval(paired_ratios(figures["runs"], model, bandwidth, engine), 0.95)
                    figures["ratios"].append({"model": model, "bandwidth": bandwidth, "engine": engine,
                                              "ratio": ratio[0], "low": ratio[1], "high": ratio[2],
                                              "paired": [paired.geometric_mean, paired.low, paired.high, paired.n],
                                              "n": {v: len(speeds[v]) for v in variants}})
                for i, v in enumerate(variants):
                    if len(speeds[v]) >= 2:
                        interval = mean_interval(speeds[v], 0.95)
                        shown = f"{interval.geometric_mean:8.2f} [{interval.low:.2f}, {interval.high:.2f}]"
                    else:
                        shown = f"{speeds[v][0]:8.2f}" if speeds[v] else "     n/a"
                    tail = ""
                    if ratio and i == 0:
                        pair = figures["ratios"][-1]["paired"]
                        tail = (f"   {ratio[0]:.3f} [{ratio[1]:.3f}, {ratio[2]:.3f}]; paired by repetition "
                                f"{pair[0]:.3f} [{pair[1]:.3f}, {pair[2]:.3f}] (n={pair[3]})")
                    print(f"{model:13s} {bandwidth:9s}  {engine:9s} {v:9s} {shown:24s} ({len(speeds[v])}){tail}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
