"""One host's preparation for a run, in one sequence that `ck check cluster` and the run both take.

In order: the file transfer this sshd offers (SFTP, else the exec channel); the engine's interpreter (and, for the
preflight, that it imports MXNet); the run folder under /tmp/reprokit-runs (write access, free space, the commands
the remote side runs) with the run's files; the dataset folders; on the scheduler's host, its port, held; the
host's cores; on worker hosts, the folders of output paths (write access, name length, free space). A host that
passes the preflight therefore cannot fail the run's preparation.

``Steps`` decides what a failure does: a run stops at the first one (``strict``); the preflight records each in
its table and skips only the steps that need a failed one.
"""
from __future__ import annotations

import functools
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from reprokit.cluster import interpreter, rundir
from reprokit.cluster.ports import hold_remote_port
from reprokit.cluster.ssh import Connection
from reprokit.cluster.transfer import Transfer, choose as choose_transfer
from reprokit.core.errors import UserError

if TYPE_CHECKING:
    import paramiko

T = TypeVar("T")


@dataclass(frozen=True)
class HostNeeds:
    """What a run needs of one host."""
    python: str  # the engine's interpreter there
    files: list[Path] = field(default_factory=list)  # copied into the run folder
    check_mxnet: bool = False  # the preflight also imports MXNet (the run's roles would fail on it)
    data_folders: list[str] = field(default_factory=list)
    scheduler_port: int | None = None  # None: not the scheduler's host; 0: any free port
    count_cores: bool = False  # hosts with workers or servers: for threads and the roles-per-core limit
    slots: int | None = None  # cores an allocation reserved there: counted instead of nproc
    outputs: dict[str, str] = field(default_factory=dict)  # on worker hosts: setting -> path written there
    output_need_bytes: int = 0


@dataclass
class PreparedHost:
    transfer: Transfer | None = None
    port: int | None = None
    holder: paramiko.Channel | None = None  # keeps the scheduler's port held until it closes
    cores: int | None = None


class Steps:
    """Runs named steps in order. ``strict``: the first failure raises. Otherwise each failure is recorded under its
    step's name (``failed`` as its value) and steps that need a failed step are skipped."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.values: dict[str, str] = {}
        self.failed: set[str] = set()
        self.problems: list[str] = []

    def do(self, name: str, action: Callable[[], T], needs: tuple[str, ...] = (), failed: str = "FAILED",
           shown: Callable[[T], str] = str) -> T | None:
        if any(n in self.failed or n not in self.values for n in needs):
            return None
        try:
            value = action()
        except UserError as exc:
            if self.strict:
                raise
            self.values[name], self.problems = failed, [*self.problems, str(exc)]
            self.failed.add(name)
            return None
        self.values[name] = shown(value)
        return value


def prepare_host(conn: Connection, host: str, needs: HostNeeds, remote_dir: str, steps: Steps,
                 folder_made: Callable[[], None] = lambda: None) -> PreparedHost:
    """Take ``needs``' steps on ``host``; ``folder_made`` is called once the run folder exists, before anything is
    copied in (the run starts the host's janitor there). The caller removes the folder and closes the transfer and
    the port's holder."""
    prepared = PreparedHost()
    prepared.transfer = steps.do("transfer", lambda: choose_transfer(conn), shown=lambda t: t.kind)
    if prepared.transfer is None:
        return prepared
    transfer = prepared.transfer
    steps.do("python", lambda: interpreter.version(conn, needs.python))
    if needs.check_mxnet:
        steps.do("mxnet", lambda: interpreter.mxnet_version(conn, needs.python), needs=("python",))

    def run_folder() -> str:
        rundir.create(conn, remote_dir)
        folder_made()
        transfer.put(list(needs.files), remote_dir)
        return "ok"

    steps.do("run_folder", run_folder)
    steps.do("data", lambda: _data_folders(conn, host, needs.data_folders), failed="MISSING")
    if needs.scheduler_port is not None:
        held = steps.do("port", lambda: hold_remote_port(conn, needs.python, "0.0.0.0", needs.scheduler_port or 0),
                        needs=("python",), failed="BUSY", shown=lambda pair: str(pair[0]))
        if held is not None:
            prepared.port, prepared.holder = held
    if needs.count_cores:
        prepared.cores = steps.do("cores", lambda: needs.slots or int(conn.run("nproc", timeout=30).stdout.strip()
                                                                      or 1))
    for name, path in needs.outputs.items():  # MXNet's rank 0 may be any worker: every worker host checks
        steps.do(f"output {name}", functools.partial(rundir.check_output, conn, name, path, needs.output_need_bytes))
    return prepared


def _data_folders(conn: Connection, host: str, paths: list[str]) -> str:
    missing = [path for path in paths if conn.run(f"test -d {shlex.quote(path)}", timeout=30).exit_code != 0]
    if missing:
        raise UserError(f"{host}: missing dataset folder(s): {', '.join(missing)}")
    return "ok"
