"""A run folder's preparation over SFTP against the exec channel, on a 2-host testbed (needs root and openssh-server).

    .venv/bin/python benchmarks/remote_prepare.py [--repetitions N] [--megabytes M]

Host 1's sshd offers SFTP, host 2's does not. For each host, interleaved, on one open connection: the
steps a run takes before its roles start (choosing the transfer, the interpreter's version, creating the
run folder, copying the engine's scripts into it) and removing it; then copying an M MB file there and
back (a worker's timeline is about 15 MB). Prints the median and range of each figure.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from reprokit.cluster import interpreter, rundir, testbed
from reprokit.cluster.hosts import load
from reprokit.cluster.ssh import Connection, resolve
from reprokit.cluster.transfer import choose
from reprokit.engines.stock import engine_files

NAME = "bprep"


def one_round(conn: Connection, big: Path, back: Path) -> dict[str, float]:
    times = {}
    remote_dir = rundir.run_dir(uuid.uuid4().hex)
    start = time.perf_counter()
    transfer = choose(conn)
    interpreter.version(conn, sys.executable)
    rundir.create(conn, remote_dir)
    rundir.upload(transfer, remote_dir, engine_files())
    times["prepare_ms"] = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    transfer.put([big], remote_dir)
    times["put_MB_s"] = big.stat().st_size / 1e6 / (time.perf_counter() - start)
    start = time.perf_counter()
    transfer.get(f"{remote_dir}/{big.name}", back)
    times["get_MB_s"] = big.stat().st_size / 1e6 / (time.perf_counter() - start)
    start = time.perf_counter()
    rundir.remove(conn, remote_dir)
    times["remove_ms"] = (time.perf_counter() - start) * 1000
    transfer.close()
    back.unlink()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--megabytes", type=int, default=16)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("benchmark: needs root (network namespaces)")
    with tempfile.TemporaryDirectory(prefix="remote-prepare-") as work:
        state = Path(work) / "testbed"
        big, back = Path(work) / "big.bin", Path(work) / "back.bin"
        big.write_bytes(os.urandom(args.megabytes << 20))
        try:
            cluster = load(str(testbed.create(NAME, 2, state, no_sftp=frozenset({2}))))
            conns = [Connection(resolve(h, cluster)).open() for h in cluster.hosts]
            figures: dict[str, dict[str, list[float]]] = {}
            for _ in range(args.repetitions):
                for conn in conns:
                    kind = choose(conn).kind
                    for key, value in one_round(conn, big, back).items():
                        figures.setdefault(kind, {}).setdefault(key, []).append(value)
            for conn in conns:
                conn.close()
        finally:
            testbed.destroy(NAME, state)
    print(f"{args.repetitions} repetitions, engine scripts ({len(engine_files())} files), "
          f"{args.megabytes} MB copied there and back")
    print(f"{'transfer':9} {'figure':11} {'median':>9} {'min':>9} {'max':>9}")
    for kind, rows in figures.items():
        for key, values in rows.items():
            print(f"{kind:9} {key:11} {statistics.median(values):9.1f} {min(values):9.1f} {max(values):9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
