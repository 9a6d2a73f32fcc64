"""Launching through the testbed's real Slurm against launching over SSH (needs root, Slurm and openssh-server).

    .venv/bin/python benchmarks/slurm_launch.py [--repetitions N]

On one 3-host testbed with a real Slurm (`ck testbed cluster:bs3 --hosts=3 --scheduler=slurm`), interleaved per
repetition (the order alternates):

* ``submit``: `ck run program:p3 --target=bs3-slurm --submit` from the login side (the switch namespace): the time
  from the command's start until every role of the run inside the job was running, and until the result;
* ``ssh``: `ck run program:p3 --target=bs3`, the same run with every role over SSH: the same two times;
* roles started per second, for 3 and for 12 roles, by the srun launcher (`salloc -N3 ck run ...`) and by the SSH
  launcher: roles / the result's launch_time_s (from the launcher's start, its probes or connections included,
  until every role's process had been started).

A tiny real MXNet job (resnet, batch 4, 3 batches) each time. Prints every repetition, then medians with their
range, n stated. Uses its own CK_REPOS/CK_TOOLS in a temporary folder.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from reprokit.bootstrap import ck as ck_cli, isolated_ck

CK = str(Path(sys.executable).with_name("ck"))
NAME = "bs3"
TINY = ["--cmd_key=resnet", "--env.PROFILE=smoke", "--env.WORKER_THREADS=1", "--env.NUM_BATCHES=3",
        "--env.DISP_BATCHES=1", "--env.BATCH_SIZE=4"]
ROLES = {3: ["--env.NUM_WORKERS=1", "--env.NUM_SERVERS=1"], 12: ["--env.NUM_WORKERS=6", "--env.NUM_SERVERS=5"]}


def run(env: dict, argv: list[str], run_dir: Path) -> tuple[float, float, float]:
    """(seconds to every role running, seconds to the result, the result's launch_time_s) of one ck run."""
    run_dir.mkdir(parents=True)
    start = time.time()
    proc = subprocess.run([*argv, f"--tmp_dir={run_dir}", "--treat_return_code_as_exit_code=yes"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    ended = time.time()
    if proc.returncode != 0:
        raise SystemExit(f"benchmark: {' '.join(argv[-8:])} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    inner = run_dir / "job" if (run_dir / "job" / "launch.json").exists() else run_dir
    launch = json.loads((inner / "launch.json").read_text())
    result = json.loads((inner / "p3-result.json").read_text())
    return launch["all_running_at"] - start, ended - start, float(result["launch_time_s"])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} [{min(values):.2f}, {max(values):.2f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("benchmark: needs root (network namespaces)")
    work, env = isolated_ck("slurm-launch-")
    ck_cli("testbed", f"cluster:{NAME}", "--hosts=3", "--scheduler=slurm", env=env, check=True)
    state = Path(env["CK_TOOLS"]) / f"testbed-{NAME}"
    figures: dict[str, list[float]] = {}
    try:
        ck_cli("add", f"machine:{NAME}", "--type=cluster", f"--config_file={state / 'hosts.json'}", "--quiet",
               env=env, check=True)
        ck_cli("add", f"machine:{NAME}-slurm", "--type=cluster", f"--config_file={state / 'slurm-job.json'}",
               "--quiet", env=env, check=True)
        client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
        ck_run = [CK, "run", "program:p3", *TINY]
        cases = {
            "submit": [*client, *ck_run, f"--target={NAME}-slurm", "--submit"],
            "ssh": [*ck_run, f"--target={NAME}"],
            **{f"srun-{n}": [*client, "salloc", "-N3", "--time=10", *ck_run, *extra] for n, extra in ROLES.items()},
            **{f"ssh-{n}": [*ck_run, f"--target={NAME}", *extra] for n, extra in ROLES.items()},
        }
        for rep in range(args.repetitions):
            order = list(cases) if rep % 2 == 0 else list(reversed(cases))
            for case in order:
                running, done, launch = run(env, cases[case], work / f"{case}-{rep}")
                figures.setdefault(f"{case} running", []).append(running)
                figures.setdefault(f"{case} result", []).append(done)
                figures.setdefault(f"{case} launch", []).append(launch)
                print(f"rep {rep + 1} {case:8s}: all roles running after {running:6.2f} s, result after {done:6.2f} s, "
                      f"launcher start to all running {launch:5.2f} s", flush=True)
    finally:
        subprocess.run([CK, "testbed", f"cluster:{NAME}", "--down"], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)
    n = args.repetitions
    print(f"\nmedian [min, max] over n={n} interleaved repetitions (seconds)")
    print("                       command start -> all roles running   command start -> result")
    for case in ("submit", "ssh"):
        print(f"  {case:20s} {spread(figures[f'{case} running']):>34s}   {spread(figures[f'{case} result']):>24s}")
    print("\nroles started per second (roles / launcher start -> all running)")
    for roles in ROLES:
        for launcher in ("srun", "ssh"):
            rates = [roles / t for t in figures[f"{launcher}-{roles} launch"]]
            print(f"  {launcher:4s} {roles:2d} roles: {spread(rates)} roles/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
