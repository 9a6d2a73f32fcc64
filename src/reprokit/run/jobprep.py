"""What the srun and oarsh launchers share: their roles run in the run folder itself, on a file system every node of
the job shares, so the run's files are put there once, and one probe per node (each launcher's own) says its cores
and the scheduler's free port; then the roles are supervised, and every host is swept of what the run left.

Each role is a local subprocess of the job's launcher program (``oarsh HOST COMMAND``, ``srun ... /bin/sh -c
COMMAND``) whose COMMAND is the SSH launcher's role wrapper (``remote.role_command``, answering its heartbeats):
``JobRoleProcess``. The wrapper's watchdog keeps the SSH launcher's guarantees through either program:

* teardown: the launcher closes the subprocess's stdin, which the program hands on to the wrapper; the watchdog
  reads EOF and ends the role's process group (SIGTERM, SIGKILL 3 s later). Killing the local program ends its
  session or step: the same EOF, or Slurm's own end of the step.
* a lost host: the launcher writes a heartbeat byte to every role's stdin every HEARTBEAT_S; the watchdog stops
  the role after REMOTE_SILENCE_S without one, and answers each with one line on the program's stderr, so the
  launcher sees a host that has gone silent for REMOTE_SILENCE_S as lost.
* a stopped role (SIGSTOP, a tracer): at each heartbeat the watchdog looks at the role's state and, while it is
  stopped, writes STOPPED_MARK on the role's output; the supervisor names the role after STOPPED_LIMIT_S.
* if the launcher is killed with SIGKILL, its end of every role's stdin closes: the same EOF.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from reprokit.cluster.hosts import ClusterConfig
from reprokit.cluster.ports import PORT_CHOICE_CODE
from reprokit.core.errors import UserError
from reprokit.core.shipping import stage
from reprokit.run.launch import Outcome, OutputSink, StopRequest, describe_exit, supervise
from reprokit.run.lifeline import parent_death_signal
from reprokit.run.plan import Role, RolePlan
from reprokit.run.procscan import kill_run_processes
from reprokit.run.remote import (
    BEAT_ANSWER,
    HEARTBEAT_S,
    LOST_CONNECTION,
    PGID_MARK,
    REMOTE_SILENCE_S,
    WATCHDOG_GRACE_S,
    StoppedReports,
    role_command,
)
from reprokit.run.settings import check_roles_fit
from reprokit.vocabulary import RoleKind, RunStatus

START_TIMEOUT_S = 60  # a role whose wrapper has not started by then has lost its host

# Part of each launcher's probe (run by the engine's interpreter on the scheduler's host): a free port for the
# scheduler, below the ephemeral range (see cluster/portchoice). The probe cannot keep it bound until the scheduler
# binds it.
FREE_PORT_CODE = PORT_CHOICE_CODE + """
def free_port():
    with bind_free_port("") as s:
        return s.getsockname()[1]
"""

def prepare_in_job(plan: RolePlan, run_dir: Path, probe: Callable[[], dict[str, dict[str, Any]]]) -> None:
    """Stage the plan's files into ``run_dir``, probe every node, check the roles fit its cores, and fill in the
    scheduler's port and each host's threads from what the probe found. UserError when any step fails."""
    stage(plan.files, run_dir)
    found = probe()
    check_roles_fit(Counter(r.host for r in plan.roles if r.kind is not RoleKind.SCHEDULER),
                    {h: int(found[h]["cores"]) for h in plan.hosts})
    if plan.scheduler_port == 0:
        plan.scheduler_port = int(found[plan.scheduler_host]["port"])
    if plan.worker_threads == 0:
        for host in plan.hosts:
            workers_here = sum(1 for r in plan.workers if r.host == host)
            plan.host_threads[host] = max(1, int(found[host]["cores"]) // max(1, workers_here))


def role_argv(plan: RolePlan, cluster: ClusterConfig, role: Role) -> list[str]:
    """The role's command, with its host's own interpreter when hosts.json names one."""
    argv = plan.argv(role)
    argv[0] = cluster.host(role.host).python or argv[0]
    return argv


class JobRoleProcess:
    """A role as a local subprocess of a job's launcher program (``through``: oarsh, srun) running the role wrapper
    (see the module's docstring): stdin carries the heartbeat, stdout the role's output (its stderr included) and
    the watchdog's reports, stderr the watchdog's answers and the program's own messages."""

    def __init__(self, role: Role, through: str, session: str, argv: list[str], env: dict[str, str],
                 sink: OutputSink):
        self.role = role
        self.through = through  # the program, in messages
        self.session = session  # what it gives the role ("oarsh session", "job step"), in messages
        self.sink = sink
        self.pgid: int | None = None
        self.started_at = time.monotonic()
        self.heard_at: float | None = None  # the wrapper started (its first line), then each answer
        self.messages: list[str] = []  # what the program said on stderr
        self.reports = StoppedReports()
        self.lock = threading.Lock()
        self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=env, start_new_session=True, preexec_fn=parent_death_signal)
        assert self.popen.stdout is not None  # stdout=PIPE
        self.output = sink.pump(role, self.popen.stdout, consume=self._consume)
        self.answers = threading.Thread(target=self._read_answers, name=f"answers {role.name}", daemon=True)
        self.answers.start()

    def _consume(self, line: str) -> bool:
        if self.pgid is None and line.startswith(PGID_MARK):
            self.pgid = int(line[len(PGID_MARK):].strip())
            with self.lock:
                self.heard_at = time.monotonic()
            return True
        return self.reports.note(line)

    def _read_answers(self) -> None:
        stream = self.popen.stderr
        assert stream is not None
        pending = b""
        for chunk in iter(lambda: os.read(stream.fileno(), 4096), b""):
            if BEAT_ANSWER in chunk:
                with self.lock:
                    self.heard_at = time.monotonic()
            pending += chunk.replace(BEAT_ANSWER, b"")
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                self._message(raw)
        if pending:
            self._message(pending)
        stream.close()

    def _message(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").strip()
        if text:
            with self.lock:
                self.messages = [*self.messages[-4:], text]
            self.sink.show(self.role, text)

    def silent_for(self) -> float:
        with self.lock:
            return time.monotonic() - (self.heard_at if self.heard_at is not None else self.started_at)

    def poll(self) -> int | None:
        code = self.popen.poll()
        if code is not None:
            if self.pgid is None or code == 255:  # the program failed: the role never ran, or its session broke
                return LOST_CONNECTION
            return -(code - 128) if 128 < code < 160 else code  # the wrapper's 128+N: killed by signal N
        limit = REMOTE_SILENCE_S if self.heard_at is not None else START_TIMEOUT_S
        if self.silent_for() > limit:
            return LOST_CONNECTION
        return None

    def describe(self, code: int) -> str:
        if code != LOST_CONNECTION:
            return describe_exit(code)
        self.answers.join(2)  # the program's last words
        with self.lock:
            said = f": {self.messages[-1]}" if self.messages else ""
        exited = self.popen.poll()
        if self.pgid is None:
            how = f"exited with code {exited}" if exited is not None else f"had not started within {START_TIMEOUT_S} s"
            return f"could not be started through {self.through} ({self.through} {self.role.host} {how}{said})"
        if exited is not None:
            return f"lost its {self.session} (exit {exited}{said})"
        return (f"lost its {self.session}: no answer to the heartbeat for {REMOTE_SILENCE_S} s (the role stops on "
                f"its own within {REMOTE_SILENCE_S + WATCHDOG_GRACE_S} s)")

    def stopped(self) -> bool:
        return self.reports.stopped()

    def beat(self) -> None:
        try:
            assert self.popen.stdin is not None
            self.popen.stdin.write(b".")
            self.popen.stdin.flush()
        except (OSError, ValueError):
            pass

    def terminate(self) -> None:
        try:
            assert self.popen.stdin is not None
            self.popen.stdin.close()  # the wrapper's watchdog sees EOF and stops the group
        except (OSError, ValueError):
            pass

    def kill(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)  # ends the session (EOF) or the step (Slurm kills it)
            except ProcessLookupError:
                pass
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def wait_output(self, timeout: float) -> None:
        self.output.join(timeout)
        self.answers.join(timeout)


def launch_in_job(plan: RolePlan, cluster: ClusterConfig, run_dir: Path, console: TextIO, stop: StopRequest | None,
                  watch: Callable[[Role, str], None] | None, *, through: str, session: str,
                  find_tool: Callable[[], str], probe: Callable[[str], dict[str, dict[str, Any]]],
                  command_line: Callable[[str, Role, str], list[str]], environment: Callable[[Role], dict[str, str]],
                  sweep_hosts: Callable[[str], list[str]]) -> Outcome:
    """Prepare (``find_tool`` gives the launcher's program, ``probe`` runs it on every node), start each role as a
    ``JobRoleProcess`` (``command_line(tool, role, wrapper)``: the program's command line that runs the wrapper on the
    role's host, in ``environment(role)``), beat every role's heartbeat, supervise them, then ``sweep_hosts``
    (warnings) and this machine's leftovers of the run."""
    began_at = time.time()
    sink = OutputSink(console, run_dir / "logs", plan.finish_pattern, watch)
    try:
        tool = find_tool()
        prepare_in_job(plan, run_dir, lambda: probe(tool))
    except UserError as exc:
        return Outcome(RunStatus.FAILED, str(exc), began_at=began_at)
    started: list[JobRoleProcess] = []
    ended = threading.Event()

    def beat() -> None:
        while not ended.wait(HEARTBEAT_S):
            for proc in list(started):
                proc.beat()

    def start(role: Role) -> JobRoleProcess:
        if not started:  # the first role: from here on every started role hears a heartbeat
            threading.Thread(target=beat, name="role heartbeat", daemon=True).start()
        wrapper = role_command(str(run_dir), plan.role_env(role), role_argv(plan, cluster, role), answer=True)
        started.append(JobRoleProcess(role, through, session, command_line(tool, role, wrapper), environment(role),
                                      sink))
        return started[-1]

    try:
        outcome = supervise(plan, start, stop, output=sink)
    finally:
        ended.set()
        warnings = sweep_hosts(tool)
        leftovers = kill_run_processes(plan.run_id)  # e.g. a role's launcher that outlived its teardown
        if leftovers:
            warnings.append(f"killed {len(leftovers)} leftover process(es) of the run here: {leftovers}")
    outcome.began_at = began_at
    outcome.scheduler_port = plan.scheduler_port
    outcome.warnings.extend(warnings)
    outcome.torn_down_at = time.time()
    return outcome
