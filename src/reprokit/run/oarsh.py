"""Roles started through OAR's ``oarsh`` inside an OAR job, supervised by ``launch.supervise`` like local ones.

Inside an OAR job (``oarsub -I``, a batch script: OAR_JOB_ID and OAR_NODEFILE set) the nodes accept only OAR's own
connections: ``oarsh HOST COMMAND`` is OAR's setuid wrapper that runs ``ssh -p 6667`` as the user ``oar`` with the
job's key (OAR_JOB_KEY_FILE, or the key OAR pushed for the job), and on the node ``oarsh_shell`` puts the session
into the job's cpuset and becomes the job's user. Our key, an sshd on port 22 and a ProxyCommand are not used: the
site's oarsh and its configuration (/etc/oar/oar.conf) are. So each role is a local ``oarsh HOST COMMAND``
subprocess, as the srun launcher's roles are ``srun`` subprocesses, and COMMAND is the SSH launcher's role wrapper
(``remote.role_command``), which keeps its guarantees:

* teardown: the launcher closes the subprocess's stdin; the wrapper's watchdog reads EOF and ends the role's
  process group (SIGTERM, SIGKILL 3 s later). Killing the local oarsh closes the session: the same EOF.
* a lost host: the launcher writes a heartbeat byte to every role's stdin every HEARTBEAT_S; the watchdog stops
  the role after REMOTE_SILENCE_S without one, and answers each with one byte on the session's stderr
  (``answer=True``), so the launcher sees a host that has gone silent for REMOTE_SILENCE_S as lost (ssh alone
  would wait for TCP, and oarsh filters out the -o options that would set ServerAliveInterval).
* if the launcher is killed with SIGKILL, its end of every role's stdin closes: the same EOF. (A setuid oarsh does
  not keep the parent-death signal, so the EOF is what ends the roles there.)
* a run id sweep on every host afterwards (``oarsh HOST sh -c ...``), and one here.

Files: as under srun, the roles run in the run folder itself, which must be on a file system the job's nodes share
(an OAR site's home directories usually are); a probe on every host (``oarsh HOST PYTHON -c PROBE``) counts its
cores, finds the scheduler a free port and checks that the run folder is visible there. The workers' timelines are
written into the run folder, so there is nothing to fetch.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from reprokit.cluster.group import on_each
from reprokit.cluster.hosts import ClusterConfig
from reprokit.core.errors import UserError
from reprokit.run.jobprep import FREE_PORT_CODE, launch_in_job, role_argv
from reprokit.run.launch import Outcome, OutputSink, StopRequest, describe_exit
from reprokit.run.lifeline import parent_death_signal
from reprokit.run.plan import Role, RolePlan
from reprokit.run.remote import (
    BEAT_ANSWER,
    HEARTBEAT_S,
    LOST_CONNECTION,
    REMOTE_SILENCE_S,
    WATCHDOG_GRACE_S,
    StoppedReports,
    role_command,
    sweep_command,
)

JOB_VARIABLES = ("OAR_JOB_ID", "OAR_NODEFILE")
COMMAND_TIMEOUT_S = 60  # the probe, the sweep and the preflight's commands
START_TIMEOUT_S = 60  # a role whose session has not started by then has lost its host
SPEC_NAME = "p3-run.json"
_PGID_MARK = "reprokit-pgid "
# Run by the engine's interpreter on every host: one JSON line.
PROBE = FREE_PORT_CODE + """
import json, os, sys
port = free_port() if sys.argv[1] == "scheduler" and sys.argv[2] == "0" else 0
print(json.dumps({"cores": len(os.sched_getaffinity(0)), "port": port, "run_dir": os.path.isfile(sys.argv[3])}),
      flush=True)
"""


def in_oar_job(environ: Mapping[str, str]) -> bool:
    return all(environ.get(name, "").strip() for name in JOB_VARIABLES)


def oarsh_path() -> str:
    found = shutil.which("oarsh")
    if not found:
        raise UserError("oarsh not found on the PATH; the oarsh launcher runs inside an OAR job on a node with OAR's "
                        "oarsh (Debian: oar-node), or start the roles over SSH with --env.LAUNCHER=ssh")
    return found


def command_environment() -> dict[str, str]:
    """This process's environment (oarsh reads OAR_JOB_ID, OAR_JOB_KEY_FILE from it) without what would point an
    interpreter at the framework's packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def oarsh_command(oarsh: str, host: str, argv: list[str], timeout: float = COMMAND_TIMEOUT_S) -> \
        subprocess.CompletedProcess[str]:
    """``argv`` on ``host`` through oarsh (which joins its arguments into one remote command: each is quoted here)."""
    try:
        return subprocess.run([oarsh, host, " ".join(shlex.quote(a) for a in argv)], capture_output=True, text=True,
                              timeout=timeout, env=command_environment(), stdin=subprocess.DEVNULL,
                              start_new_session=True, preexec_fn=parent_death_signal)
    except subprocess.TimeoutExpired:
        raise UserError(f"oarsh {host}: no answer within {timeout:g} s; is the OAR job still running (oarstat -j "
                        f"$OAR_JOB_ID)?") from None


def last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return ((proc.stderr or "").strip() or (proc.stdout or "").strip() or f"exit {proc.returncode}").splitlines()[-1]


def check_reachable(oarsh: str, host: str) -> None:
    """``oarsh HOST true`` succeeds, else one line naming the host, the cause and the fix."""
    proc = oarsh_command(oarsh, host, ["true"])
    if proc.returncode != 0:
        raise UserError(f"oarsh {host} true failed ({last_line(proc)}); is {host} a node of this OAR job "
                        f"(OAR_NODEFILE), and the job's key set (OAR_JOB_KEY_FILE, for a job submitted with -k)?")


def probe_host(oarsh: str, host: str, python: str, scheduler: bool, port: int, marker: Path) -> dict[str, Any]:
    """One host's probe: {"cores": 2, "port": 40123, "run_dir": True}; one line naming the host when it fails."""
    proc = oarsh_command(oarsh, host, [python, "-I", "-c", PROBE, "scheduler" if scheduler else "-", str(port),
                                       str(marker)])
    for line in reversed(proc.stdout.splitlines()):
        try:
            data = json.loads(line)
            if isinstance(data, dict) and "cores" in data:
                break
        except ValueError:
            continue
    else:
        raise UserError(f"oarsh {host}: the probe failed ({last_line(proc)}); is the engine's interpreter {python} "
                        f"at that path on {host}, and {host} a node of this OAR job?")
    if not data["run_dir"]:
        raise UserError(f"oarsh {host}: the run folder {marker.parent} is not visible on {host}; the oarsh launcher "
                        f"runs every role in it, so it must be on a file system every node of the job shares")
    return data


def probe(oarsh: str, plan: RolePlan, cluster: ClusterConfig, run_dir: Path) -> dict[str, dict[str, Any]]:
    found = on_each(plan.hosts, lambda h: probe_host(oarsh, h, cluster.host(h).python or plan.command[0],
                                                     h == plan.scheduler_host, plan.scheduler_port,
                                                     run_dir / SPEC_NAME))
    failure = found.first_failure()
    if failure is not None:
        raise UserError(str(failure[1]))
    return dict(found.succeeded)


class OarshRoleProcess:
    """A role as a local ``oarsh HOST COMMAND``: stdin carries the heartbeat, stdout the role's output, stderr the
    watchdog's answers and oarsh's (ssh's) own messages."""

    def __init__(self, role: Role, oarsh: str, command: str, sink: OutputSink):
        self.role = role
        self.sink = sink
        self.pgid: int | None = None
        self.started_at = time.monotonic()
        self.heard_at: float | None = None  # the session started (its wrapper's first line), then each answer
        self.messages: list[str] = []  # what oarsh and ssh said on stderr
        self.reports = StoppedReports()
        self.lock = threading.Lock()
        self.popen = subprocess.Popen([oarsh, role.host, command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, env=command_environment(), start_new_session=True,
                                      preexec_fn=parent_death_signal)
        assert self.popen.stdout is not None  # stdout=PIPE
        self.output = sink.pump(role, self.popen.stdout, consume=self._consume)
        self.answers = threading.Thread(target=self._read_answers, name=f"answers {role.name}", daemon=True)
        self.answers.start()

    def _consume(self, line: str) -> bool:
        if self.pgid is None and line.startswith(_PGID_MARK):
            self.pgid = int(line[len(_PGID_MARK):].strip())
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
            if self.pgid is None or code == 255:  # oarsh or ssh failed: the role never ran, or its session broke
                return LOST_CONNECTION
            return -(code - 128) if 128 < code < 160 else code  # the wrapper's 128+N: killed by signal N
        limit = REMOTE_SILENCE_S if self.heard_at is not None else START_TIMEOUT_S
        if self.silent_for() > limit:
            return LOST_CONNECTION
        return None

    def describe(self, code: int) -> str:
        if code != LOST_CONNECTION:
            return describe_exit(code)
        self.answers.join(2)  # oarsh's last words
        with self.lock:
            said = f": {self.messages[-1]}" if self.messages else ""
        exited = self.popen.poll()
        if self.pgid is None:
            how = f"exited with code {exited}" if exited is not None else f"had not started within {START_TIMEOUT_S} s"
            return f"could not be started through oarsh (oarsh {self.role.host} {how}{said})"
        if exited is not None:
            return f"lost its oarsh session (exit {exited}{said})"
        return (f"lost its oarsh session: no answer to the heartbeat for {REMOTE_SILENCE_S} s (the role stops on its "
                f"own within {REMOTE_SILENCE_S + WATCHDOG_GRACE_S} s)")

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
            self.popen.stdin.close()  # the remote watchdog sees EOF and stops the group
        except (OSError, ValueError):
            pass

    def kill(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)  # closes the session: the remote watchdog sees EOF
            except ProcessLookupError:
                pass
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def wait_output(self, timeout: float) -> None:
        self.output.join(timeout)
        self.answers.join(timeout)


@dataclass
class _Started:
    procs: list[OarshRoleProcess] = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)

    def beat(self) -> None:
        while not self.ended.wait(HEARTBEAT_S):
            for proc in list(self.procs):
                proc.beat()


def run_oarsh(plan: RolePlan, cluster: ClusterConfig, run_dir: Path, console: TextIO,
              stop: StopRequest | None = None, watch: Callable[[Role, str], None] | None = None) -> Outcome:
    """Launch the plan's roles through oarsh on the OAR job's nodes, supervise them, and leave nothing behind."""
    started = _Started()

    def start(oarsh: str, role: Role, sink: OutputSink) -> OarshRoleProcess:
        if not started.procs:  # the first role: from here on every started role hears a heartbeat
            threading.Thread(target=started.beat, name="role heartbeat", daemon=True).start()
        started.procs.append(OarshRoleProcess(role, oarsh, role_command(
            str(run_dir), plan.role_env(role), role_argv(plan, cluster, role), answer=True), sink))
        return started.procs[-1]

    def sweep(oarsh: str) -> list[str]:
        started.ended.set()
        return _sweep(oarsh, plan)

    return launch_in_job(plan, run_dir, console, stop, watch, find_tool=oarsh_path,
                         probe=lambda oarsh: probe(oarsh, plan, cluster, run_dir), start_role=start,
                         sweep_hosts=sweep)


def _sweep(oarsh: str, plan: RolePlan) -> list[str]:
    """On every host, kill what still carries the run's id (``remote.sweep_command``)."""
    warnings = []
    swept = on_each(plan.hosts, lambda h: oarsh_command(oarsh, h, ["/bin/sh", "-c", sweep_command(plan.run_id)]))
    for host, error in swept.failed.items():
        warnings.append(f"{host}: could not check for leftover processes: {error}")
    for host, proc in swept.succeeded.items():
        if proc.returncode != 0:
            warnings.append(f"{host}: could not check for leftover processes: {last_line(proc)}")
        elif proc.stdout.split():
            warnings.append(f"{host}: killed leftover process(es) {' '.join(proc.stdout.split())}")
    return warnings
