"""Preflight check of a cluster: can every host run its roles? Checked on all hosts at once.

Per host: reachable, host key trusted, key authentication; then the run's own preparation
(``prepare.prepare_host``, the same steps in the same order, each bounded in time), recording every
failure instead of stopping at the first, and removing the run folder and releasing the port afterwards.
A host that passes cannot fail the run's preparation.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from reprokit.cluster import rundir
from reprokit.cluster.group import on_each
from reprokit.cluster.hosts import ClusterConfig
from reprokit.cluster.prepare import HostNeeds, PreparedHost, Steps, prepare_host
from reprokit.cluster.ssh import Connection, resolve
from reprokit.core.errors import UserError


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
    needs = HostNeeds(python=spec.python or python, files=list(files or []), check_mxnet=True,
                      data_folders=required_paths, scheduler_port=scheduler_port)
    steps = Steps(strict=False)
    remote_dir = rundir.run_dir(uuid.uuid4().hex)
    prepared = PreparedHost()
    try:
        prepared = prepare_host(conn, host, needs, remote_dir, steps)
    finally:
        if prepared.holder is not None:
            prepared.holder.close()
        if "transfer" in steps.values and "transfer" not in steps.failed:
            try:
                rundir.remove(conn, remote_dir)  # the run removes its folder the same way
            except UserError as exc:
                if "run_folder" not in steps.failed:
                    steps.values["run_folder"] = "FAILED"
                    steps.problems.append(str(exc))
        if prepared.transfer is not None:
            prepared.transfer.close()
        conn.close()
    for column in ("transfer", "python", "mxnet", "run_folder", "data", "port"):
        setattr(check, column, steps.values.get(column, getattr(check, column)))
    check.problems += steps.problems
    return check


def check_cluster(cluster: ClusterConfig, python: str, required_paths: list[str] | None = None,
                  scheduler_port: int = 0, files: list[Path] | None = None) -> list[HostCheck]:
    first = cluster.names[0]
    results = on_each(cluster.names, lambda h: check_host(
        cluster, h, python, required_paths or [], scheduler_port if h == first else None, files))
    return [results.succeeded[h] if h in results.succeeded
            else HostCheck(h, ssh="FAILED", problems=[f"{h}: {results.failed[h]}"]) for h in cluster.names]


def table(checks: list[HostCheck]) -> str:
    headers = ["host", "ssh", "python", "mxnet", "transfer", "run folder", "data", "scheduler port"]
    return checks_table(headers, [[c.host, c.ssh, c.python, c.mxnet, c.transfer, c.run_folder, c.data, c.port]
                                  for c in checks], [c.problems for c in checks])


def checks_table(headers: list[str], rows: list[list[str]], problems: list[list[str]]) -> str:
    """One line per host (its column values, then ok or FAILED), then every problem, indented, one per line."""
    headers = [*headers, "result"]
    rows = [[*row, "FAILED" if found else "ok"] for row, found in zip(rows, problems)]
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [headers, *rows]]
    lines += [f"  {p}" for found in problems for p in found]
    return "\n".join(lines)
