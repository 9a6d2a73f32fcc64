"""Roles on remote hosts over SSH, supervised by ``launch.supervise`` like local ones.

Each role runs under a small POSIX-sh wrapper in its own SSH session (sshd
makes the session's shell a process-group leader, so ``$$`` names the whole
group). A watchdog in the group reads the channel's stdin: when the launcher
closes it (teardown) or the connection drops, the watchdog SIGTERMs the group
and SIGKILLs it a few seconds later. Every value is shell-quoted; names are
validated, so neither a host name nor an environment value can run a command.
"""
from __future__ import annotations

import fnmatch
import re
import shlex
import time
from pathlib import Path
from typing import Callable, TextIO

import paramiko

from reprokit.errors import UserError
from reprokit.cluster.hosts import ClusterConfig
from reprokit.run.launch import OutputSink, Outcome, StopRequest, describe_exit, supervise
from reprokit.run.plan import Role, RolePlan
from reprokit.run.settings import TIMELINE_FILE
from reprokit.cluster.group import connect_all, on_each
from reprokit.cluster.ports import free_port
from reprokit.cluster.ssh import Connection, SshError

WATCHDOG_GRACE_S = 3
LOST_CONNECTION = 1000  # not an exit code any process can have
REMOTE_RUNS = "/tmp/reprokit-runs"
OUTPUT_FILES = TIMELINE_FILE.replace("{rank}", "*")  # what workers write that the run folder keeps
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PGID_MARK = "reprokit-pgid "
def role_command(run_dir: str, env: dict[str, str], argv: list[str]) -> str:
    """The shell command line that runs ``argv`` as a role, in ``run_dir``, with ``env``."""
    bad = [k for k in env if not _ENV_NAME.match(k)]
    if bad:
        raise UserError(f"environment variable name(s) {', '.join(map(repr, bad))} are not valid names")
    assignments = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())
    command = " ".join(shlex.quote(a) for a in argv)
    # The channel's stdin is kept on fd 3 for the watchdog only: POSIX sh gives a background job
    # /dev/null as stdin before its own redirections, so `<&0` there would not reach the channel.
    # The watchdog only tells the main shell (USR1); the main shell TERMs the group and KILLs it
    # after a grace period. Nothing in the group ignores TERM: ignoring would pass on through exec.
    inner = (
        f'echo "{_PGID_MARK}$$"; '
        "exec 3<&0 </dev/null; "
        "(cat <&3 >/dev/null 2>&1; kill -USR1 $$ 2>/dev/null) >/dev/null 2>&1 & watchdog=$!; "
        "exec 3<&-; "
        "trap : TERM; stopping=; "
        f"trap 'stopping=1; kill -TERM -$$ 2>/dev/null; (sleep {WATCHDOG_GRACE_S}; kill -KILL -$$ 2>/dev/null) "
        ">/dev/null 2>&1 &' USR1; "
        f"env -u PYTHONPATH -u PYTHONHOME {assignments} {command} & child=$!; "
        "wait $child; rc=$?; "
        "while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done; "
        # The role is over: stop the watchdog, then whatever else is left in the group. When it was
        # being stopped its exit code no longer matters, so the group (timer included) is killed outright.
        "kill -KILL $watchdog 2>/dev/null; "
        '[ -z "$stopping" ] || kill -KILL -$$ 2>/dev/null; '
        "kill -TERM -$$ 2>/dev/null; "
        "exit $rc"
    )
    quoted_dir = shlex.quote(run_dir)
    # The wrapper itself carries the run id too, so a sweep finds every process of the run.
    marker = f"REPROKIT_RUN_ID={shlex.quote(env['REPROKIT_RUN_ID'])} " if "REPROKIT_RUN_ID" in env else ""
    return f"mkdir -p {quoted_dir} && cd {quoted_dir} && exec env {marker}/bin/sh -c {shlex.quote(inner)}"


def sweep_command(run_id: str) -> str:
    """Kill every process of this host whose environment carries the run id; print "pid:name" for each.

    Only processes in the sweeping shell's network namespace count: testbed hosts share one
    PID namespace, and another host's processes are that host's business.
    """
    if not re.fullmatch(r"[0-9a-f]{8,64}", run_id):
        raise UserError(f"run id {run_id!r} is not a hex string")
    return ("own=$(readlink /proc/self/ns/net); "
            f"for f in $(grep -lzx 'REPROKIT_RUN_ID={run_id}' /proc/[0-9]*/environ 2>/dev/null); do "
            'd=${f%/environ}; [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$own" ] || continue; '
            'name=$(cat "$d/comm" 2>/dev/null); kill -KILL "${d#/proc/}" 2>/dev/null && echo "${d#/proc/}:$name"; '
            "done; true")


class RemoteRoleProcess:
    def __init__(self, role: Role, conn: Connection, command: str, sink: OutputSink):
        self.role = role
        self.conn = conn
        self.pgid: int | None = None
        self.channel: paramiko.Channel = conn.start(command)
        self.output = sink.pump(role, self.channel.makefile("rb"), consume=self._consume)

    def _consume(self, line: str) -> bool:
        if self.pgid is None and line.startswith(_PGID_MARK):
            self.pgid = int(line[len(_PGID_MARK):].strip())
            return True
        return False

    def poll(self) -> int | None:
        if self.channel.exit_status_ready():
            status = self.channel.recv_exit_status()
            if status == -1:  # channel closed without an exit status
                return LOST_CONNECTION
            return -(status - 128) if 128 < status < 160 else status  # the shell's 128+N: killed by signal N
        if not self.conn.is_alive():
            return LOST_CONNECTION
        return None

    def describe(self, code: int) -> str:
        return "lost its SSH connection" if code == LOST_CONNECTION else describe_exit(code)

    def terminate(self) -> None:
        try:
            self.channel.shutdown_write()  # the remote watchdog sees EOF and stops the group
        except (OSError, EOFError, paramiko.SSHException):
            pass

    def kill(self) -> None:
        if self.pgid is not None and self.poll() is None and self.conn.is_alive():
            try:
                self.conn.run(f"kill -KILL -- -{self.pgid} 2>/dev/null; true", timeout=10)
            except (SshError, OSError, EOFError, paramiko.SSHException):
                pass
        self.channel.close()

    def wait_output(self, timeout: float) -> None:
        self.output.join(timeout)


def remote_run_dir(run_id: str) -> str:
    return f"{REMOTE_RUNS}/{run_id}"


def run_remote(plan: RolePlan, cluster: ClusterConfig, run_dir: Path, console: TextIO,
               stop: StopRequest | None = None, connections: dict[str, Connection] | None = None,
               watch: Callable[[Role, str], None] | None = None) -> Outcome:
    """Launch the plan's roles over SSH, supervise them, and leave nothing behind on any host.
    ``watch`` sees every role's output line (see OutputSink)."""
    sink = OutputSink(console, run_dir / "logs", plan.finish_pattern, watch)
    remote_dir = remote_run_dir(plan.run_id)
    began_at = time.time()
    try:
        conns = connections or connect_all(cluster, plan.hosts)
    except UserError as exc:
        return Outcome(False, str(exc), began_at=began_at)
    try:
        # One parallel step per host: ship the files and, where needed, ask for a free port and the cores.
        prepared = on_each(plan.hosts, lambda h: _prepare_host(conns[h], h, plan, cluster, remote_dir))
        if not prepared.ok:
            return Outcome(False, str(prepared.first_failure()[1]), began_at=began_at)
        for host, (port, cores) in prepared.succeeded.items():
            if port is not None:
                plan.scheduler_port = port
            if cores is not None:
                workers_here = sum(1 for r in plan.workers if r.host == host)
                plan.host_threads[host] = max(1, cores // max(1, workers_here))

        def start(role: Role) -> RemoteRoleProcess:
            argv = plan.argv(role)
            argv[0] = cluster.host(role.host).python or argv[0]
            return RemoteRoleProcess(role, conns[role.host], role_command(remote_dir, plan.role_env(role), argv), sink)

        outcome = supervise(plan, start, stop, finished=sink.finished if plan.finish_pattern else None)
        outcome.began_at = began_at
        # Only what the run asked for, and only from hosts still reachable (a lost one is reported already).
        wanted = TIMELINE_FILE in plan.command
        fetched = on_each(sorted({r.host for r in plan.workers if wanted and conns[r.host].is_alive()}),
                          lambda h: _fetch_outputs(conns[h], remote_dir, run_dir))
        for host, error in fetched.failed.items():
            outcome.warnings.append(f"{host}: could not fetch the workers' timelines: {error}")
        swept = on_each(plan.hosts, lambda h: conns[h].run(
            sweep_command(plan.run_id) + f"; rm -rf {shlex.quote(remote_dir)}", timeout=30))
        for host, error in swept.failed.items():
            outcome.warnings.append(f"{host}: could not check for leftover processes: {error}")
        for host, result in swept.succeeded.items():
            if result.stdout.split():
                outcome.warnings.append(f"{host}: killed leftover process(es) {' '.join(result.stdout.split())}")
        outcome.torn_down_at = time.time()
        return outcome
    finally:
        if connections is None:
            for conn in conns.values():
                conn.close()


def _fetch_outputs(conn: Connection, remote_dir: str, run_dir: Path) -> list[str]:
    """Bring the workers' output files (their timelines) into the local run folder before the remote one goes."""
    fetched = []
    with conn.client.open_sftp() as sftp:
        for name in sftp.listdir(remote_dir):
            if fnmatch.fnmatch(name, OUTPUT_FILES):
                sftp.get(f"{remote_dir}/{name}", str(run_dir / name))
                fetched.append(name)
    return fetched


def _prepare_host(conn: Connection, host: str, plan: RolePlan, cluster: ClusterConfig,
                  remote_dir: str) -> tuple[int | None, int | None]:
    """Ship the plan's files over SFTP (no shell round trip); on the scheduler's host, find or check
    its port; when threads are automatic, the host's cores (its allocated slots, else nproc). Returns (port, cores)."""
    try:
        with conn.client.open_sftp() as sftp:
            path = ""
            for part in remote_dir.strip("/").split("/"):
                path += "/" + part
                try:
                    sftp.mkdir(path)
                except OSError:
                    sftp.stat(path)  # it exists already (hosts may share a file system): fine
            for local in plan.files:
                # Hosts may share a file system: each writes its own copy, then renames it into place
                # atomically, so no host ever reads a half-written file.
                final = f"{remote_dir}/{Path(local).name}"
                partial = f"{final}.{re.sub(r'[^A-Za-z0-9.-]', '_', host)}.partial"
                sftp.put(str(local), partial)
                sftp.posix_rename(partial, final)
    except (OSError, paramiko.SSHException) as exc:
        raise UserError(f"{host}: cannot prepare {remote_dir}: {exc}") from None
    port = None
    if host == plan.scheduler_host:
        port = free_port(conn, cluster.host(host).python or plan.command[0], "0.0.0.0", plan.scheduler_port)
    cores = None
    if plan.worker_threads == 0 and any(r.host == host for r in plan.workers):
        # An allocation's slots are the cores the job may use there (OAR/PBS reserve per core).
        cores = cluster.host(host).slots or int(conn.run("nproc", timeout=30).stdout.strip() or 1)
    return port, cores
