"""Launch latency over SSH on testbeds of 1, 2, 4 and 8 hosts (needs root and openssh-server).

    .venv/bin/python benchmarks/launch_latency.py [--repetitions N] [--hosts 1,2,4,8]

For each size: `ck run program:p3 --target=...` (one server and one worker per
host, scheduler on the first, a tiny real MXNet job), interleaved across
sizes. Prints the time from `ck run` start until every role was running, and
the time from the end of the run until every role on every host was gone;
target T(8)/T(1) <= 1.3 for the former. Compared with starting the same roles
with plain `ssh` commands one after another (each waits until its remote
command runs). Uses its own CK_REPOS/CK_TOOLS in a temporary folder.
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
ENV: dict[str, str] = {}  # this benchmark's own CK_REPOS/CK_TOOLS, set in main()
TINY = ["--env.PROFILE=smoke", "--env.WORKER_THREADS=1", "--env.NUM_BATCHES=3", "--env.DISP_BATCHES=1",
        "--env.BATCH_SIZE=4"]


def ck(*args: str) -> subprocess.CompletedProcess:
    return ck_cli(*args, env=ENV, check=True)


def via_ck(env: dict, name: str, run_dir: Path) -> tuple[float, float]:
    start = time.time()
    ck("run", "program:p3", "--cmd_key=resnet", f"--target={name}", *TINY, f"--tmp_dir={run_dir}",
       "--out=json_file", f"--out_file={run_dir / 'ck.json'}", "--treat_return_code_as_exit_code=yes")
    launch = json.loads((run_dir / "launch.json").read_text())
    return launch["all_running_at"] - start, launch["torn_down_at"] - launch["finished_at"]


def plain_ssh(state: Path, hosts: list[str]) -> float:
    """The same 2N+1 roles, each started with its own `ssh` after the previous one is running."""
    roles = [hosts[0]] + hosts + hosts  # scheduler, a server per host, a worker per host
    started = []
    begin = time.perf_counter()
    try:
        for host in roles:
            proc = subprocess.Popen(["ssh", "-F", str(state / "ssh_config"), "-o", "BatchMode=yes", host,
                                     "echo running; exec sleep 30"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            started.append(proc)
            if proc.stdout.readline().strip() != "running":
                raise SystemExit(f"benchmark: plain ssh to {host} failed")
        return time.perf_counter() - begin
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--hosts", default="1,2,4,8")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("benchmark: needs root (network namespaces)")
    sizes = [int(x) for x in args.hosts.split(",")]
    work, env = isolated_ck("launch-latency-")
    ENV.update(env)
    states = {}
    try:
        for n in sizes:
            ck("testbed", f"cluster:lb{n}", f"--hosts={n}")
            states[n] = Path(env["CK_TOOLS"]) / f"testbed-lb{n}"
            ck("add", f"machine:lb{n}", "--type=cluster", f"--config_file={states[n] / 'hosts.json'}", "--quiet")
        results: dict[int, dict[str, list[float]]] = {n: {"launch": [], "teardown": [], "ssh": []} for n in sizes}
        for rep in range(args.repetitions):
            for n in (sizes if rep % 2 == 0 else list(reversed(sizes))):
                run_dir = work / f"run-{n}-{rep}"
                launch, teardown = via_ck(env, f"lb{n}", run_dir)
                hosts = json.loads((states[n] / "hosts.json").read_text())["hosts"]
                seq = plain_ssh(states[n], [h["host"] for h in hosts])
                for key, value in (("launch", launch), ("teardown", teardown), ("ssh", seq)):
                    results[n][key].append(value)
                print(f"rep {rep + 1} hosts {n}: ck run -> all running {launch:6.2f} s, teardown {teardown:5.2f} s, "
                      f"plain ssh one after another {seq:5.2f} s", flush=True)
    finally:
        for n in states:
            subprocess.run([CK, "testbed", f"cluster:lb{n}", "--down"], env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=120)

    print("\nhosts  roles  ck run->all running (s)  teardown after run (s)  plain ssh sequential (s)")
    for n in sizes:
        r = {k: statistics.median(v) for k, v in results[n].items()}
        print(f"{n:5d}  {2 * n + 1:5d}  {r['launch']:23.2f}  {r['teardown']:22.2f}  {r['ssh']:24.2f}")
    if 1 in results and max(sizes) > 1:
        big = max(sizes)
        ratio = statistics.median(results[big]["launch"]) / statistics.median(results[1]["launch"])
        print(f"\nT({big})/T(1) for ck run -> all running: {ratio:.2f} (target <= 1.3) -> "
              f"{'OK' if ratio <= 1.3 else 'MISSED'}")
        seq = statistics.median(results[big]["ssh"]) / statistics.median(results[1]["ssh"])
        print(f"T({big})/T(1) for plain ssh one after another: {seq:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
