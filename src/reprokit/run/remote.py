"""Roles on remote hosts over SSH, supervised by ``launch.supervise`` like local ones.

Each role runs under a small POSIX-sh wrapper in its own SSH session (sshd
makes the session's shell a process-group leader, so ``$$`` names the whole
group). A watchdog in the group reads the channel's stdin, where the launcher
writes a heartbeat byte every HEARTBEAT_S: when the launcher closes it
(teardown), the connection drops, or nothing arrives for REMOTE_SILENCE_S (a
cut link whose sshd never notices), the watchdog SIGTERMs the group and SIGKILLs
it a few seconds later. The launcher's side of a lost host is
``Connection.start_heartbeat``. Each host's run folder is removed by the launcher after the run, or by
that host's ``rundir.Janitor`` when the launcher is gone. Every value is shell-quoted; names are
validated, so neither a host name nor an environment value can run a command.
"""
from __future__ import annotations

import fnmatch
import re
import shlex
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import paramiko

from reprokit.cluster import rundir
from reprokit.cluster.group import connect_all, on_each
from reprokit.cluster.hosts import ClusterConfig
from reprokit.cluster.prepare import HostNeeds, PreparedHost, Steps, prepare_host
from reprokit.cluster.ssh import Connection, SshError
from reprokit.cluster.transfer import Transfer
from reprokit.core.errors import UserError
from reprokit.engines.base import engine_switches
from reprokit.run.launch import Outcome, OutputSink, StopRequest, describe_exit, supervise
from reprokit.run.plan import Role, RolePlan
from reprokit.run.settings import TIMELINE_FILE, check_roles_fit
from reprokit.vocabulary import RoleKind, RunStatus

WATCHDOG_GRACE_S = 3
HEARTBEAT_S = 3.0  # the launcher writes a byte to every role's stdin this often
REMOTE_SILENCE_S = 15  # a role that hears nothing for this long stops: its launcher is unreachable
LOST_CONNECTION = 1000  # not an exit code any process can have
OUTPUT_FILES = TIMELINE_FILE.replace("{rank}", "*")  # what workers write that the run folder keeps
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PGID_MARK = "reprokit-pgid "
STOPPED_MARK = "reprokit-role-stopped"  # the watchdog's word, at a heartbeat, that the role's process is stopped
BEAT_ANSWER_OCTAL = "006"  # ASCII ACK: what an answering watchdog writes to stderr for each heartbeat byte
BEAT_ANSWER = bytes([int(BEAT_ANSWER_OCTAL, 8)])  # on a line of its own: slurmstepd hands on whole lines only


def role_command(run_dir: str, env: dict[str, str], argv: list[str], silence_s: int = REMOTE_SILENCE_S,
                 answer: bool = False) -> str:
    """The shell command line that runs ``argv`` as a role, in ``run_dir``, with ``env``; it stops when its
    stdin ends or stays silent for ``silence_s``.

    ``answer``: the watchdog answers each heartbeat byte with a line of one ``BEAT_ANSWER`` byte on the session's
    stderr, and everything else (the role's stderr included) goes to its stdout: for a launcher that cannot see the
    session's liveness itself (the oarsh launcher's ssh subprocess, the srun launcher's srun)."""
    bad = [k for k in env if not _ENV_NAME.match(k)]
    if bad:
        raise UserError(f"environment variable name(s) {', '.join(map(repr, bad))} are not valid names")
    assignments = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())
    command = " ".join(shlex.quote(a) for a in argv)
    unset = " ".join(f"-u {name}" for name in engine_switches())  # the plan's only: never the login shell's
    # The channel's stdin is kept on fd 3 for the watchdog only: POSIX sh gives a background job
    # /dev/null as stdin before its own redirections, so `<&0` there would not reach the channel.
    # The watchdog only tells the main shell (USR1); the main shell TERMs the group and KILLs it
    # after a grace period. Nothing in the group ignores TERM: ignoring would pass on through exec.
    # The role starts first (without the watchdog's descriptors), so the watchdog knows its pid: at each heartbeat
    # it looks at the role's state and, while it is stopped (SIGSTOP, a tracer), says so on the channel's stdout
    # (fd 5), where the launcher reads it (STOPPED_MARK): the stopped role writes nothing meanwhile.
    keep = "3<&- 4>&- 5>&-" if answer else "3<&- 5>&-"
    inner = (
        f'echo "{PGID_MARK}$$"; '
        + ("exec 3<&0 4>&2 </dev/null 2>&1 5>&1; " if answer else "exec 3<&0 </dev/null 5>&1; ") +
        "trap : TERM; stopping=; "
        f"trap 'stopping=1; kill -TERM -$$ 2>/dev/null; (sleep {WATCHDOG_GRACE_S}; kill -KILL -$$ 2>/dev/null) "
        ">/dev/null 2>&1 &' USR1; "
        f"env -u PYTHONPATH -u PYTHONHOME {unset} {assignments} {command} {keep} & child=$!; "
        # One byte at a time, each within REMOTE_SILENCE_S; EOF and silence both end the loop. --foreground keeps
        # timeout (and dd) in the role's process group, so tearing the group down reaches them too.
        f'(while [ -n "$(timeout --foreground {int(silence_s)} dd bs=1 count=1 <&3 2>/dev/null)" ]; do '
        + (f"printf '\\{BEAT_ANSWER_OCTAL}\\n' >&4; " if answer else "") +
        f"case \"$(sed -n 's/^.*) \\(.\\).*$/\\1/p' /proc/$child/stat 2>/dev/null)\" in "
        f"T|t) echo '{STOPPED_MARK}' >&5;; esac; done; "
        "kill -USR1 $$ 2>/dev/null) >/dev/null 2>&1 & watchdog=$!; "
        + ("exec 3<&- 4>&- 5>&-; " if answer else "exec 3<&- 5>&-; ") +
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


class StoppedReports:
    """What a role's watchdog said of its state: stopped while its STOPPED_MARK keeps coming, one per heartbeat.
    A resumed role writes again and the watchdog falls silent about it, so a report older than two heartbeats
    no longer counts."""

    def __init__(self) -> None:
        self._last: float | None = None

    def note(self, line: str) -> bool:
        """Whether ``line`` is the watchdog's report (the launcher's, not the role's output)."""
        if line.strip() != STOPPED_MARK:
            return False
        self._last = time.monotonic()
        return True

    def stopped(self) -> bool:
        return self._last is not None and time.monotonic() - self._last <= 2 * HEARTBEAT_S + 1


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
        self.reports = StoppedReports()
        self.channel: paramiko.Channel = conn.start(command)
        self.output = sink.pump(role, self.channel.makefile("rb"), consume=self._consume)

    def _consume(self, line: str) -> bool:
        if self.pgid is None and line.startswith(PGID_MARK):
            self.pgid = int(line[len(PGID_MARK):].strip())
            return True
        return self.reports.note(line)

    def stopped(self) -> bool:
        return self.reports.stopped()

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
        if code == LOST_CONNECTION:
            return f"lost its SSH connection ({self.conn.lost})" if self.conn.lost else "lost its SSH connection"
        return describe_exit(code)

    def beat(self) -> None:
        """The heartbeat the remote watchdog waits for (see REMOTE_SILENCE_S)."""
        try:
            if not self.channel.closed and self.channel.send_ready():
                self.channel.send(b".")
        except (OSError, EOFError, paramiko.SSHException):
            pass

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


def run_remote(plan: RolePlan, cluster: ClusterConfig, run_dir: Path, console: TextIO,
               stop: StopRequest | None = None, connections: dict[str, Connection] | None = None,
               watch: Callable[[Role, str], None] | None = None) -> Outcome:
    """Launch the plan's roles over SSH, supervise them, and leave nothing behind on any host, whatever happened.
    ``watch`` sees every role's output line (see OutputSink)."""
    sink = OutputSink(console, run_dir / "logs", plan.finish_pattern, watch)
    remote_dir = rundir.run_dir(plan.run_id)
    began_at = time.time()
    try:
        conns = connections or connect_all(cluster, plan.hosts)
    except UserError as exc:
        return Outcome(RunStatus.FAILED, str(exc), began_at=began_at)
    outcome = Outcome(RunStatus.FAILED, "the run was interrupted before it started", began_at=began_at)
    transfers: dict[str, Transfer] = {}
    janitors: dict[str, rundir.Janitor] = {}
    tended = threading.Event()

    def beat_janitors() -> None:  # from the first folder made until every folder is removed
        while not tended.wait(HEARTBEAT_S):
            for janitor in list(janitors.values()):
                janitor.beat()

    threading.Thread(target=beat_janitors, name="janitor heartbeat", daemon=True).start()
    try:
        outcome = _prepare_and_supervise(plan, cluster, conns, run_dir, remote_dir, sink, stop, transfers, janitors)
        outcome.began_at = began_at
        return outcome
    finally:
        # Every host's run folder goes, and anything still carrying the run's id, after a failed
        # preparation as after a run; a lost host cannot be reached (its roles stop on their own).
        lost = [h for h in plan.hosts if not conns[h].is_alive()]
        for host in lost:
            outcome.warnings.append(f"{host}: unreachable after the run ({conns[host].lost or 'connection closed'}); "
                                    f"its roles stop on their own within {REMOTE_SILENCE_S + WATCHDOG_GRACE_S} s")
        swept = on_each([h for h in plan.hosts if h not in lost], lambda h: conns[h].run(
            sweep_command(plan.run_id) + "; " + rundir.remove_command(remote_dir), timeout=30))
        for host, error in swept.failed.items():
            outcome.warnings.append(f"{host}: could not check for leftover processes: {error}")
        for host, result in swept.succeeded.items():
            if result.stdout.split():
                outcome.warnings.append(f"{host}: killed leftover process(es) {' '.join(result.stdout.split())}")
            if result.exit_code != 0:
                outcome.warnings.append(f"{host}: could not remove {remote_dir}: "
                                        f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
        tended.set()
        for host, janitor in janitors.items():
            if host in swept.succeeded and swept.succeeded[host].exit_code == 0:
                janitor.release()  # the folder is gone: nothing left for it to do
        outcome.torn_down_at = time.time()
        for transfer in transfers.values():
            transfer.close()
        if connections is None:
            for conn in conns.values():
                conn.close()


def _prepare_and_supervise(plan: RolePlan, cluster: ClusterConfig, conns: dict[str, Connection], run_dir: Path,
                           remote_dir: str, sink: OutputSink, stop: StopRequest | None,
                           transfers: dict[str, Transfer], janitors: dict[str, rundir.Janitor]) -> Outcome:
    # One parallel step per host: the run folder with the plan's files, and where needed a free port and the cores.
    prepared = on_each(plan.hosts, lambda h: _prepare_host(conns[h], h, plan, cluster, remote_dir, transfers,
                                                           janitors))
    # The scheduler's port stays held on its host until the run ends (see ports.hold_remote_port).
    holders = [ready.holder for ready in prepared.succeeded.values() if ready.holder is not None]
    try:
        failure = prepared.first_failure()
        if failure is not None:
            return Outcome(RunStatus.FAILED, str(failure[1]))
        try:
            check_roles_fit(Counter(r.host for r in plan.roles if r.kind is not RoleKind.SCHEDULER),
                            {host: ready.cores for host, ready in prepared.succeeded.items()})
        except UserError as exc:
            return Outcome(RunStatus.FAILED, str(exc))
        for host, ready in prepared.succeeded.items():
            if ready.port is not None:
                plan.scheduler_port = ready.port
            if ready.cores is not None and plan.worker_threads == 0:
                workers_here = sum(1 for r in plan.workers if r.host == host)
                plan.host_threads[host] = max(1, ready.cores // max(1, workers_here))

        started: list[RemoteRoleProcess] = []
        ended = threading.Event()

        def start(role: Role) -> RemoteRoleProcess:
            argv = plan.argv(role)
            argv[0] = cluster.host(role.host).python or argv[0]
            started.append(RemoteRoleProcess(role, conns[role.host], role_command(remote_dir, plan.role_env(role), argv),
                                             sink))
            return started[-1]

        def beat() -> None:
            while not ended.wait(HEARTBEAT_S):
                for proc in list(started):
                    proc.beat()

        for conn in conns.values():
            conn.start_heartbeat()
        threading.Thread(target=beat, name="role heartbeat", daemon=True).start()
        try:
            outcome = supervise(plan, start, stop, output=sink)
        finally:
            ended.set()
        outcome.scheduler_port = plan.scheduler_port
        # Only what the run asked for, and only from hosts still reachable (a lost one is reported already).
        wanted = TIMELINE_FILE in plan.command
        fetched = on_each(sorted({r.host for r in plan.workers if wanted and conns[r.host].is_alive()}),
                          lambda h: _fetch_outputs(transfers[h], remote_dir, run_dir))
        for host, error in fetched.failed.items():
            outcome.warnings.append(f"{host}: could not fetch the workers' timelines: {error}")
        return outcome
    finally:
        for holder in holders:
            holder.close()


def _fetch_outputs(transfer: Transfer, remote_dir: str, run_dir: Path) -> list[str]:
    """Bring the workers' output files (their timelines) into the local run folder before the remote one goes."""
    fetched = []
    for name in transfer.listdir(remote_dir):
        if fnmatch.fnmatch(name, OUTPUT_FILES):
            transfer.get(f"{remote_dir}/{name}", run_dir / name)
            fetched.append(name)
    return fetched


def _prepare_host(conn: Connection, host: str, plan: RolePlan, cluster: ClusterConfig, remote_dir: str,
                  transfers: dict[str, Transfer], janitors: dict[str, rundir.Janitor]) -> PreparedHost:
    """The steps `ck check cluster` takes too (``prepare.prepare_host``), stopping at the first failure."""
    spec = cluster.host(host)
    needs = HostNeeds(
        python=spec.python or plan.command[0], files=[Path(f) for f in plan.files],
        scheduler_port=plan.scheduler_port if host == plan.scheduler_host else None,
        count_cores=any(r.host == host and r.kind is not RoleKind.SCHEDULER for r in plan.roles), slots=spec.slots,
        outputs=plan.outputs if any(r.host == host for r in plan.workers) else {},
        output_need_bytes=plan.output_need_bytes)

    def folder_made() -> None:  # before anything is copied in: from here on the folder goes even if we are killed
        janitors[host] = rundir.Janitor(conn, remote_dir, REMOTE_SILENCE_S, WATCHDOG_GRACE_S + 1)

    prepared = prepare_host(conn, host, needs, remote_dir, Steps(strict=True), folder_made)
    if prepared.transfer is not None:
        transfers[host] = prepared.transfer
    return prepared
