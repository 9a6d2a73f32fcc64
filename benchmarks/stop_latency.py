"""How long a run takes to be gone after a signal: SIGINT, SIGTERM, SIGHUP and SIGKILL to `ck run`'s Python and
to its launcher, on this machine.

    .venv/bin/python benchmarks/stop_latency.py [--repetitions N] [-- extra ck run args]

For each case: a long `ck run program:p3` (1000 batches of 8) is started, and once a worker trains, the signal is
sent; the figure is the time until no process of the run (ck, the launcher, every role) is left. Prints one line
per case (median and maximum over the repetitions). The requirement is 5 s.
Needs CK prepared as by `make demo` (repository registered, engine installed).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reprokit.run.lifeline import LAUNCHER_FILE
from reprokit.run.procscan import is_running, process_identity, run_processes

CK = str(Path(sys.executable).with_name("ck"))
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)


def wait_for(predicate, timeout: float, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


def one(sig: signal.Signals, target: str, extra: list[str]) -> float:
    with tempfile.TemporaryDirectory(prefix="stop-latency-") as folder:
        run_dir = Path(folder)
        run = subprocess.Popen([CK, "run", "program:p3", "--cmd_key=resnet", f"--tmp_dir={run_dir}",
                                "--env.NUM_BATCHES=1000", "--env.BATCH_SIZE=8", "--env.WORKER_THREADS=1", *extra],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            log = run_dir / "logs" / "worker-1.log"
            if not wait_for(lambda: log.exists() and "worker rank" in log.read_text(), 300):
                raise SystemExit(f"benchmark: the run never trained (see {run_dir})")
            run_id = json.loads((run_dir / "p3-run.json").read_text())["plan"]["run_id"]
            launcher = (run_dir / LAUNCHER_FILE).read_text().strip()
            ours = [process_identity(run.pid), launcher]
            victim = ours[0] if target == "ck" else launcher
            sent = time.monotonic()
            os.kill(int(victim.split(":")[0]), sig)
            gone = wait_for(lambda: not run_processes(run_id) and not any(i and is_running(i) for i in ours), 60)
            if not gone:
                raise SystemExit(f"benchmark: {sig.name} to {target}: processes still running after 60 s")
            return time.monotonic() - sent
        finally:
            if run.poll() is None:
                run.kill()
            run.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("extra", nargs="*", help="extra ck run arguments (after --)")
    args = parser.parse_args()
    for target in ("ck", "launcher"):
        for sig in SIGNALS:
            times = [one(sig, target, args.extra) for _ in range(args.repetitions)]
            print(f"{sig.name:8} to {target:8}: gone after {statistics.median(times):.2f} s "
                  f"(max {max(times):.2f} s, n={len(times)})", flush=True)


if __name__ == "__main__":
    main()
