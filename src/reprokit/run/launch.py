"""Start every role of a parameter-server job, stream its output, and supervise it.

Stock MXNet roles hang forever when a peer dies, so the supervisor owns the
job: the first role that exits non-zero, the global timeout, or a stop request
(SIGINT/SIGTERM/SIGHUP, or the end of a process the run depends on: see
``lifeline``) tears every role down, and the outcome names the role. Role
processes run in their own process groups, are killed as whole groups, and
receive SIGKILL from the kernel if the launcher itself dies (PR_SET_PDEATHSIG),
so no process of a run survives it.

Role processes are reached through ``RoleProcess``; this module provides the
local one. Remote launchers implement the same interface.
"""
from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol, TextIO, TypeVar

from reprokit.cluster.ports import hold_port
from reprokit.core.errors import UserError
from reprokit.core.paths import disk_error
from reprokit.core.shipping import stage
from reprokit.engines.base import engine_switches
from reprokit.run.console import ConsoleFilter
from reprokit.run.lifeline import STOP_SIGNALS, parent_death_signal
from reprokit.run.plan import Role, RolePlan
from reprokit.run.procscan import is_stopped, kill_run_processes
from reprokit.run.progress import STOPPED_LIMIT_S, ProgressWatch
from reprokit.run.speedometer import is_speed_report
from reprokit.vocabulary import RoleKind, RunStatus

T = TypeVar("T")

POLL_INTERVAL_S = 0.05
TERMINATE_GRACE_S = 3.0
# A role that printed a Python traceback but still runs after this long (MXNet work pending, a kvstore that never
# lets go) has failed: our scripts end themselves at once (role_exit.py), others may not.
RAISED_GRACE_S = 5.0
ERROR_QUOTE_CHARS = 300  # a role's error line, as the failure line quotes it
_TRACEBACK = "Traceback (most recent call last):"
# The last line of a Python traceback ("mxnet.base.MXNetError: ..."), or a C++ check MXNet reports inside one.
_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception)): (.+)$")
_CHECK_FAILED = re.compile(r"(Check failed: .+)$")
# Once every worker has finished, servers and the scheduler normally exit
# within milliseconds; past this they are torn down.
FINISH_GRACE_S = 30.0
# Inherited variables that would point the engine's interpreter at the framework's packages.
_ENV_DROPPED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")


class ByteLines(Protocol):
    """A role's output as the launchers read it: a pipe's, or an SSH channel's file."""
    def readline(self) -> bytes: ...

    def close(self) -> None: ...


class RoleProcess(Protocol):
    role: Role

    def poll(self) -> int | None: ...

    def terminate(self) -> None:
        """Ask the role's whole process group to stop."""

    def kill(self) -> None:
        """Kill the role's whole process group."""

    def wait_output(self, timeout: float) -> None:
        """Wait until the role's output has been fully copied."""

    def describe(self, code: int) -> str:
        """How the role ended, for messages: 'exited with code 3', 'was killed by SIGKILL', ..."""

    def stopped(self) -> bool:
        """Whether the role's process is stopped (SIGSTOP, a tracer); False where that cannot be seen."""


class OutputSink:
    """Copies each role's output live to its log file, and to the console, prefixed ``[host role#i]``, but for the
    libraries' chatter (console.py): the log keeps every line."""

    def __init__(self, console: TextIO, log_dir: Path, finish_pattern: str = "",
                 watch: Callable[[Role, str], None] | None = None):
        self.console: TextIO | None = console
        self.log_dir = log_dir
        self.watch = watch  # sees every role's line after it is shown; may write to the console itself
        self.lock = threading.Lock()
        log_dir.mkdir(parents=True, exist_ok=True)
        self.finish = re.compile(finish_pattern) if finish_pattern else None
        self.done: set[str] = set()  # roles whose output matched finish_pattern
        self.raised_at: dict[str, float] = {}  # role -> when it printed a traceback (time.monotonic)
        self.errors: dict[str, str] = {}  # role -> the last error line it printed
        self.failure = ""  # why the logs can no longer be kept (a full disk): the run stops with it
        self.progress = ProgressWatch()  # the workers' speed reports, for a stalled run

    def last_error(self, role: str) -> str:
        with self.lock:
            return self.errors.get(role, "")

    def raised(self) -> dict[str, float]:
        with self.lock:
            return dict(self.raised_at)

    def _note_error(self, role: str, line: str) -> None:
        text = line.strip()
        if text.startswith(_TRACEBACK):
            self.raised_at.setdefault(role, time.monotonic())
            return
        match = _ERROR_LINE.match(text)
        if match and not match.group(2).startswith(_TRACEBACK):
            self.errors[role] = f"{match.group(1)}: {match.group(2)}"[:ERROR_QUOTE_CHARS]
            return
        check = _CHECK_FAILED.search(text)
        if check and role in self.raised_at:  # MXNetError's message comes after its own C++ traceback
            self.errors[role] = f"MXNetError: {check.group(1)}"[:ERROR_QUOTE_CHARS]

    def _show(self, text: str) -> None:
        """To the console while there is one: a closed terminal or pipe (the reader was killed) must not stop
        the copy into the log, nor leave the role blocked on a full pipe."""
        if self.console is None:
            return
        try:
            self.console.write(text)
            self.console.flush()
        except (OSError, ValueError):
            self.console = None

    def show(self, role: Role, line: str) -> None:
        """A line about ``role`` that is not its output (its launcher's transport said it): the console only."""
        with self.lock:
            self._show(f"[{role.host} {role.name}] {line.rstrip()}\n")

    def finished(self) -> set[str]:
        with self.lock:
            return set(self.done)

    def _open_log(self, path: Path) -> TextIO | None:
        try:
            return open(path, "w", encoding="utf-8", errors="replace")
        except OSError as exc:
            self._lost_log(exc, path)
            return None

    def _write_log(self, log: TextIO, line: str) -> TextIO | None:
        try:
            log.write(line)
            log.flush()
            return log
        except OSError as exc:
            self._lost_log(exc, Path(log.name))
            self._close_log(log)
            return None

    def _close_log(self, log: TextIO) -> None:
        try:
            log.close()
        except OSError as exc:  # its last bytes could not be written
            self._lost_log(exc, Path(log.name))

    def _lost_log(self, exc: OSError, path: Path) -> None:
        """A log that cannot be written fails the run (with one line) rather than the copy: the role keeps
        being read, and ``supervise`` ends the run."""
        error = disk_error(exc, "the run's logs", path)
        with self.lock:
            self.failure = self.failure or str(error or f"cannot write the log {path}: {exc.strerror or exc}")

    def pump(self, role: Role, stream: ByteLines, consume: Callable[[str], bool] | None = None) -> threading.Thread:
        """Copy ``stream`` line by line; lines that ``consume`` claims are the launcher's, not the role's."""
        log_path = self.log_dir / role.log_name
        prefix = f"[{role.host} {role.name}] "

        def copy() -> None:
            log = self._open_log(log_path)
            console_filter = ConsoleFilter()  # one per role: a warning and its source line come from the same role
            for raw in iter(stream.readline, b""):  # read to the end even without a log: the role must not block
                line = raw.decode("utf-8", errors="replace")
                if consume is not None and consume(line):
                    continue
                if log is not None:
                    log = self._write_log(log, line)
                with self.lock:
                    if self.finish is not None and self.finish.search(line):
                        self.done.add(role.name)
                    self._note_error(role.name, line)
                    if role.kind is RoleKind.WORKER and is_speed_report(line):
                        self.progress.report(role.name, time.monotonic())
                    if console_filter.shows(line):
                        self._show(prefix + line if line.endswith("\n") else prefix + line + "\n")
                    if self.watch is not None:
                        self.watch(role, line)
            if log is not None:
                self._close_log(log)
            stream.close()

        thread = threading.Thread(target=copy, name=f"output {role.name}", daemon=True)
        thread.start()
        return thread


class LocalRoleProcess:
    def __init__(self, role: Role, command: list[str], env: dict[str, str], cwd: Path, sink: OutputSink):
        self.role = role
        self.popen = subprocess.Popen(
            command, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=parent_death_signal,  # SIGKILL if the launcher dies, whatever kills it
        )
        self.pid = self.popen.pid
        assert self.popen.stdout is not None  # stdout=PIPE
        self.output = sink.pump(role, self.popen.stdout)

    def poll(self) -> int | None:
        return self.popen.poll()

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)  # the role's own session: its pgid is its pid
        except ProcessLookupError:
            pass

    def terminate(self) -> None:
        self._signal_group(signal.SIGTERM)

    def kill(self) -> None:
        self._signal_group(signal.SIGKILL)
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def wait_output(self, timeout: float) -> None:
        self.output.join(timeout)

    def describe(self, code: int) -> str:
        return describe_exit(code)

    def stopped(self) -> bool:
        return is_stopped(self.pid)


def local_environment(plan: RolePlan, role: Role) -> dict[str, str]:
    dropped = {*_ENV_DROPPED, *engine_switches()}  # engine switches come from the plan only, never from this shell
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("DMLC_")}
    env.update(plan.role_env(role))
    return env


@dataclass
class Outcome:
    status: RunStatus
    reason: str  # one line; empty on success
    failed_role: str | None = None
    failed_host: str | None = None
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    wall_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    scheduler_port: int = 0  # the port the roles were given
    # Wall-clock stamps (time.time()) for launch-latency measurements.
    began_at: float = 0.0  # the launcher began (before any connection)
    all_running_at: float = 0.0  # every role's process had been started
    finished_at: float = 0.0  # the supervisor decided the outcome
    torn_down_at: float = 0.0  # every role (and, remotely, every leftover) was gone

    @property
    def success(self) -> bool:
        return self.status.ok

    @property
    def interrupted(self) -> bool:
        """A stop request (a signal, a lost parent) ended it, not the run itself."""
        return self.status.interrupted

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value}


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class StopRequest:
    """Set from a signal handler; the supervisor polls it."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        self.reason = self.reason or reason

    def install(self) -> None:
        def handler(signum: int, _frame: FrameType | None) -> None:
            self.request(f"stopped by {signal.Signals(signum).name}")

        for sig in STOP_SIGNALS:
            signal.signal(sig, handler)


def supervise(
    plan: RolePlan,
    start_role: Callable[[Role], RoleProcess],
    stop: StopRequest | None = None,
    clock: Callable[[], float] = time.monotonic,
    output: OutputSink | None = None,
) -> Outcome:
    """Start all roles, watch them, and always tear down what is left.

    ``output``: the roles' output: the error line a failed role printed last; a role that printed a traceback but
    still runs RAISED_GRACE_S later (it has failed); the workers' progress; and the roles that printed the plan's
    finish_pattern (the end of training). When every worker has, the run counts as done: roles still running the
    plan's finish_grace_s later are torn down with a warning (the authors' builds can wait forever in their
    KVStoreDist destructor after training; under MXNet 1.9.1's P3 van, workers and servers may never exit).
    """
    stop = stop or StopRequest()
    begin = clock()
    began_at = time.time()
    procs: list[RoleProcess] = []
    outcome: Outcome | None = None
    try:
        # Scheduler first, then servers, then workers, as the roles expect to find each other.
        for role in plan.roles:
            if stop.reason:
                break
            procs.append(start_role(role))
        all_running_at = time.time()
        workers_done_at: float | None = None
        trained_at: float | None = None
        stopped_since: dict[str, float] = {}  # role -> when it was first seen stopped

        def torn_down_after(grace_s: float, event: str, why: str = "") -> Outcome:
            """Success: the roles still running ``grace_s`` after ``event`` are torn down, with a warning."""
            lingering = [p.role.name for p in procs if codes[p.role.name] is None]
            return Outcome(RunStatus.OK, "", warnings=[f"{', '.join(lingering)} still running {grace_s:g} s after "
                                               f"{event}; torn down{f' ({why})' if why else ''}"])

        while outcome is None:
            now = clock()
            # The output threads stamp lines on time.monotonic (not on ``clock``, which times the run itself).
            stamped_now = time.monotonic()
            codes = {p.role.name: p.poll() for p in procs}
            failed = next((p for p in procs if codes[p.role.name] not in (None, 0)), None)
            raised = output.raised() if output is not None else {}
            stuck = next((p for p in procs if codes[p.role.name] is None and p.role.name in raised
                          and stamped_now - raised[p.role.name] > RAISED_GRACE_S), None)
            if failed is not None:
                code = codes[failed.role.name]
                assert code is not None  # failed: its code is neither None nor 0
                error = output.last_error(failed.role.name) if output is not None else ""
                outcome = Outcome(RunStatus.FAILED, f"{failed.role.name} on {failed.role.host} {failed.describe(code)}"
                                         + (f": {error}" if error else ""), failed.role.name, failed.role.host)
            elif stuck is not None:
                error = (output.last_error(stuck.role.name) if output is not None else "") or "a Python traceback"
                outcome = Outcome(RunStatus.FAILED, f"{stuck.role.name} on {stuck.role.host}: {error} (it printed a traceback and "
                                         f"was still running {RAISED_GRACE_S:g} s later)", stuck.role.name,
                                  stuck.role.host)
            elif output is not None and output.failure:
                outcome = Outcome(RunStatus.FAILED, f"{output.failure}; every role was torn down")
            elif stop.reason:
                outcome = Outcome(RunStatus.INTERRUPTED, f"run {stop.reason}; every role was torn down")
            elif all(code == 0 for code in codes.values()) and len(procs) == len(plan.roles):
                outcome = Outcome(RunStatus.OK, "")
            elif (frozen := _stopped_too_long(procs, codes, stopped_since, now)) is not None:
                outcome = Outcome(RunStatus.FAILED, f"{frozen.role.name} on {frozen.role.host} has been stopped (SIGSTOP or a "
                                         f"tracer) for {STOPPED_LIMIT_S:g} s; every role was torn down",
                                  frozen.role.name, frozen.role.host)
            elif output is not None and (stall := output.progress.stall(_live_workers(procs, codes), stamped_now)):
                outcome = Outcome(RunStatus.FAILED, f"{stall.describe()}; every role was torn down")
            elif now - begin > plan.timeout_s:
                outcome = Outcome(RunStatus.FAILED, _timeout_reason(plan, procs, codes, output, stamped_now))
            else:
                workers = [p for p in procs if p.role.kind is RoleKind.WORKER]
                if workers and all(codes[p.role.name] == 0 for p in workers):
                    workers_done_at = workers_done_at or now
                    if now - workers_done_at > FINISH_GRACE_S:
                        outcome = torn_down_after(FINISH_GRACE_S, "every worker finished")
                names = {p.role.name for p in workers}
                if outcome is None and output is not None and output.finish is not None and names \
                        and names <= output.finished():
                    trained_at = trained_at or now
                    if now - trained_at > plan.finish_grace_s:
                        outcome = torn_down_after(plan.finish_grace_s, f"every worker printed the end of its training "
                                                                       f"({plan.finish_pattern})", plan.finish_note)
                if outcome is None:
                    time.sleep(POLL_INTERVAL_S)
        outcome.all_running_at = all_running_at
    except Exception as exc:  # a role that cannot even start (missing interpreter, ...)
        outcome = Outcome(RunStatus.FAILED, f"could not start the run: {exc}")
    finally:
        finished_at = time.time()
        teardown(procs)
    outcome.began_at = began_at
    outcome.finished_at = finished_at
    outcome.exit_codes = {p.role.name: _quietly(p.poll) for p in procs}
    outcome.wall_s = clock() - begin
    outcome.torn_down_at = time.time()
    return outcome


def _live_workers(procs: list[RoleProcess], codes: dict[str, int | None]) -> list[str]:
    return [p.role.name for p in procs if p.role.kind is RoleKind.WORKER and codes[p.role.name] is None]


def _stopped_too_long(procs: list[RoleProcess], codes: dict[str, int | None], since: dict[str, float],
                      now: float) -> RoleProcess | None:
    """A running role seen stopped for STOPPED_LIMIT_S in a row (a resumed one starts over)."""
    for p in procs:
        if codes[p.role.name] is None and _quietly(p.stopped):
            if now - since.setdefault(p.role.name, now) >= STOPPED_LIMIT_S:
                return p
        else:
            since.pop(p.role.name, None)
    return None


def _timeout_reason(plan: RolePlan, procs: list[RoleProcess], codes: dict[str, int | None],
                    output: OutputSink | None, now: float) -> str:
    """Raising RUN_TIMEOUT helps only a run whose workers were all alive and progressing: say so only then."""
    running = [p.role.name for p in procs if codes[p.role.name] is None]
    reason = f"run exceeded its timeout of {plan.timeout_s} s (still running: {', '.join(running)})"
    behind = output.progress.not_progressing(_live_workers(procs, codes), now) if output is not None else running
    if not behind:
        return f"{reason}; every worker was progressing: raise it with --env.RUN_TIMEOUT=SECONDS"
    return (f"{reason}; not progressing (fewer than two speed reports, or silent since): {', '.join(behind)}; "
            f"see their logs before raising --env.RUN_TIMEOUT")


def _quietly(action: Callable[[], T]) -> T | None:
    """Teardown must reach every role: one role's failure to answer must not stop the others."""
    try:
        return action()
    except Exception:  # a dead connection, a process already gone, ...
        return None


def teardown(procs: list[RoleProcess]) -> None:
    """SIGTERM every role's group, give them a moment, then SIGKILL what is left."""
    live = [p for p in procs if _quietly(p.poll) is None]
    for p in live:
        _quietly(p.terminate)
    deadline = time.monotonic() + TERMINATE_GRACE_S
    while any(_quietly(p.poll) is None for p in live) and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_S)
    for p in procs:
        _quietly(p.kill)  # also reaps groups whose leader already exited but left children
    for p in procs:
        _quietly(functools.partial(p.wait_output, timeout=5))


def run_local(plan: RolePlan, run_dir: Path, console: TextIO = sys.stdout,
              stop: StopRequest | None = None, watch: Callable[[Role, str], None] | None = None) -> Outcome:
    sink = OutputSink(console, run_dir / "logs", plan.finish_pattern, watch)
    stage(plan.files, run_dir)

    def start(role: Role) -> RoleProcess:
        return LocalRoleProcess(role, plan.argv(role), local_environment(plan, role), run_dir, sink)

    # The scheduler's port stays held until the run ends, so a run started beside this one cannot take it.
    try:
        held = hold_port(plan.scheduler_port, "0.0.0.0")
    except UserError as exc:
        return Outcome(RunStatus.FAILED, str(exc))
    with held:
        plan.scheduler_port = held.getsockname()[1]
        outcome = supervise(plan, start, stop, output=sink)
    outcome.scheduler_port = plan.scheduler_port
    # Anything that escaped its role's process group (a daemonised child) still carries the run id.
    leftovers = kill_run_processes(plan.run_id)
    if leftovers:
        outcome.warnings.append(f"killed {len(leftovers)} leftover process(es) of the run: {leftovers}")
    outcome.torn_down_at = time.time()
    return outcome
