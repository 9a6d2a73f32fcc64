"""Preflight check of a cluster: can every host run its roles? Checked on all hosts at once.

Per host: reachable, host key trusted, key authentication, the engine's
interpreter imports MXNet, the dataset folders exist; on the scheduler's host,
a free port. Each check is bounded in time.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from reprokit.errors import UserError
from reprokit.cluster.hosts import ClusterConfig
from reprokit.cluster.group import on_each
from reprokit.cluster.ports import free_port
from reprokit.cluster.ssh import Connection, resolve

PYTHON_CHECK_TIMEOUT_S = 60


@dataclass
class HostCheck:
    host: str
    ssh: str = "-"  # "ok" or the reason
    python: str = "-"
    mxnet: str = "-"
    data: str = "-"
    port: str = "-"
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_host(cluster: ClusterConfig, host: str, python: str, required_paths: list[str],
               scheduler_port: int | None) -> HostCheck:
    """``scheduler_port``: None on hosts without the scheduler, 0 to find any free port."""
    check = HostCheck(host)
    spec = cluster.host(host)
    try:
        conn = Connection(resolve(spec, cluster)).open()
    except UserError as exc:
        check.ssh = "FAILED"
        check.problems.append(str(exc))
        return check
    try:
        check.ssh = "ok"
        python = spec.python or python
        command = " ".join(shlex.quote(a) for a in [
            python, "-c", "import sys; print(sys.version.split()[0]); import mxnet; print(mxnet.__version__)"])
        result = conn.run(command, timeout=PYTHON_CHECK_TIMEOUT_S)
        lines = result.stdout.split()
        check.python = lines[0] if lines else "FAILED"
        if result.exit_code == 0 and len(lines) == 2:
            check.mxnet = lines[1]
        else:
            check.mxnet = "FAILED"
            last = (result.stderr.strip().splitlines() or ["not found"])[-1]
            check.problems.append(f"{host}: {python} cannot import mxnet: {last}")
        missing = []
        for path in required_paths:
            if conn.run(f"test -d {shlex.quote(path)}", timeout=30).exit_code != 0:
                missing.append(path)
        check.data = "ok" if not missing else "MISSING"
        if missing:
            check.problems.append(f"{host}: missing dataset folder(s): {', '.join(missing)}")
        if scheduler_port is not None and check.mxnet != "FAILED":
            try:
                check.port = str(free_port(conn, python, "0.0.0.0", scheduler_port))
            except UserError as exc:
                check.port = "BUSY"
                check.problems.append(str(exc))
    except UserError as exc:
        check.problems.append(str(exc))
    finally:
        conn.close()
    return check


def check_cluster(cluster: ClusterConfig, python: str, required_paths: list[str] | None = None,
                  scheduler_port: int = 0) -> list[HostCheck]:
    first = cluster.names[0]
    results = on_each(cluster.names, lambda h: check_host(
        cluster, h, python, required_paths or [], scheduler_port if h == first else None))
    return [results.succeeded[h] if h in results.succeeded
            else HostCheck(h, ssh="FAILED", problems=[f"{h}: {results.failed[h]}"]) for h in cluster.names]


def table(checks: list[HostCheck]) -> str:
    headers = ["host", "ssh", "python", "mxnet", "data", "scheduler port", "result"]
    rows = [[c.host, c.ssh, c.python, c.mxnet, c.data, c.port, "ok" if c.ok else "FAILED"] for c in checks]
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [headers, *rows]]
    for check in checks:
        lines += [f"  {p}" for p in check.problems]
    return "\n".join(lines)
