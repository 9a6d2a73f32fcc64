"""Preflight check of a cluster: can every host run its roles? Checked on all hosts at once.

Per host, with the same code the run uses, in the run's order: reachable, host key trusted, key
authentication; the file transfer its sshd offers (SFTP, else the exec channel); the engine's interpreter,
and that it imports MXNet; a run folder created under /tmp/reprokit-runs (write access, free space) and the
run's files copied into it, then removed; the dataset folders; on the scheduler's host, a free port. A host
that passes cannot fail the run's preparation. Each check is bounded in time.
"""
from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from reprokit.errors import UserError
from reprokit.cluster import interpreter, rundir
from reprokit.cluster.hosts import ClusterConfig
from reprokit.cluster.group import on_each
from reprokit.cluster.ports import free_port
from reprokit.cluster.ssh import Connection, resolve
from reprokit.cluster.transfer import Transfer, choose as choose_transfer


@dataclass
class HostCheck:
    host: str
    ssh: str = "-"  # "ok" or the reason
    python: str = "-"
    mxnet: str = "-"
    transfer: str = "-"  # sftp | exec
    run_folder: str = "-"
    data: str = "-"
    port: str = "-"
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_host(cluster: ClusterConfig, host: str, python: str, required_paths: list[str],
               scheduler_port: int | None, files: list[Path] | None = None) -> HostCheck:
    """``scheduler_port``: None on hosts without the scheduler, 0 to find any free port.
    ``files``: what the run copies into its run folder (copied here the same way, then removed)."""
    check = HostCheck(host)
    spec = cluster.host(host)
    try:
        conn = Connection(resolve(spec, cluster)).open()
    except UserError as exc:
        check.ssh = "FAILED"
        check.problems.append(str(exc))
        return check
    check.ssh = "ok"
    python = spec.python or python
    transfer = None

    def step(column: str, action, failed: str = "FAILED") -> bool:
        try:
            setattr(check, column, action())
            return True
        except UserError as exc:
            setattr(check, column, failed)
            check.problems.append(str(exc))
            return False

    try:
        try:
            transfer = choose_transfer(conn)
        except UserError as exc:
            check.transfer = "FAILED"
            check.problems.append(str(exc))
            return check
        check.transfer = transfer.kind
        if step("python", lambda: interpreter.version(conn, python)):
            step("mxnet", lambda: interpreter.mxnet_version(conn, python))
        step("run_folder", lambda: _try_run_folder(conn, transfer, files or []))
        step("data", lambda: _required_paths(conn, host, required_paths), failed="MISSING")
        if scheduler_port is not None and check.python != "FAILED":
            step("port", lambda: str(free_port(conn, python, "0.0.0.0", scheduler_port)), failed="BUSY")
    finally:
        if transfer is not None:
            transfer.close()
        conn.close()
    return check


def _try_run_folder(conn: Connection, transfer: Transfer, files: list[Path]) -> str:
    remote_dir = rundir.run_dir(uuid.uuid4().hex)
    try:
        rundir.create(conn, remote_dir)
        rundir.upload(transfer, remote_dir, files)
    except UserError:
        try:
            rundir.remove(conn, remote_dir)
        except UserError:
            pass  # the first failure is the one to report
        raise
    rundir.remove(conn, remote_dir)  # the run removes its folder the same way
    return "ok"


def _required_paths(conn: Connection, host: str, paths: list[str]) -> str:
    missing = [path for path in paths if conn.run(f"test -d {shlex.quote(path)}", timeout=30).exit_code != 0]
    if missing:
        raise UserError(f"{host}: missing dataset folder(s): {', '.join(missing)}")
    return "ok"


def check_cluster(cluster: ClusterConfig, python: str, required_paths: list[str] | None = None,
                  scheduler_port: int = 0, files: list[Path] | None = None) -> list[HostCheck]:
    first = cluster.names[0]
    results = on_each(cluster.names, lambda h: check_host(
        cluster, h, python, required_paths or [], scheduler_port if h == first else None, files))
    return [results.succeeded[h] if h in results.succeeded
            else HostCheck(h, ssh="FAILED", problems=[f"{h}: {results.failed[h]}"]) for h in cluster.names]


def table(checks: list[HostCheck]) -> str:
    headers = ["host", "ssh", "python", "mxnet", "transfer", "run folder", "data", "scheduler port", "result"]
    rows = [[c.host, c.ssh, c.python, c.mxnet, c.transfer, c.run_folder, c.data, c.port, "ok" if c.ok else "FAILED"]
            for c in checks]
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [headers, *rows]]
    for check in checks:
        lines += [f"  {p}" for p in check.problems]
    return "\n".join(lines)
