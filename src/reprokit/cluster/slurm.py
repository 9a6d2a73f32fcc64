"""A Slurm batch job, from hosts.json's ``slurm`` section to its end, by Slurm's own commands.

hosts.json names the job a run or a study is submitted as (``--submit``)::

    {"slurm": {"nodes": 3, "time": "00:30:00", "partition": "gpu", "account": "p3",
               "extra": ["--exclusive"], "pending_timeout": 21600, "unanswered_timeout": 60}, "user": "me"}

Without a ``hosts`` list (or a ``nodefile``/``hostlist``) the hosts are the job's own allocation
(``$SLURM_JOB_NODELIST``, read inside the job). Every option reaches ``sbatch`` as one argument of its argv,
never through a shell. ``submit`` writes the batch script (the same ``ck`` command, quoted, without
``--submit``) and submits it; ``follow`` reads the job's state with ``scontrol show job`` until it ends, says
each new pending reason once, streams the job's output file, and cancels the job (``scancel``) when asked to
stop, when its pending time runs out, when Slurm says it can never start, or when scontrol stays silent for
``unanswered_timeout`` seconds (default UNANSWERED_S).
"""
from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from reprokit.core import schema as s
from reprokit.core.errors import UserError

COMMAND_TIMEOUT_S = 30  # each sbatch, scancel, and scontrol outside the following loop
POLL_TIMEOUT_S = 2  # each scontrol and scancel of the following loop: a stop must not wait behind a silent slurmctld
POLL_S = 1.0
CANCEL_WAIT_S = 60  # after scancel, for the job to leave the running states
STOPPED_WAIT_S = 4  # after a stop of ours (a signal, Ctrl-C): one scancel and one look, then the command ends
DEFAULT_PENDING_TIMEOUT_S = 6 * 3600
UNANSWERED_S = 60  # scontrol failing this long (hosts.json's slurm.unanswered_timeout): the job is cancelled (if Slurm can) and the run fails
UNKNOWN = "UNKNOWN"  # scontrol did not answer: not an end
FIRST_SEEN_S = 30  # a job scontrol does not know yet is not taken for one that ended, this long after sbatch
# Pending reasons after which Slurm will never start the job as submitted (slurm/src/common/slurm_protocol_defs.c).
NEVER_STARTS = ("PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints", "InvalidAccount", "InvalidQOS",
                "AccountNotAllowed", "QOSNotAllowed", "PartitionConfig", "DependencyNeverSatisfied", "NodeDown")
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
_NO_LINE_BREAK = s.Where(s.Text(256), lambda v: bool(v.strip()) and not re.search(r"[\r\n]", v),
                         "a non-empty string on one line")
_TIME = s.Where(s.Text(32), lambda v: bool(re.fullmatch(r"(\d+-)?\d+(:\d{1,2}){0,2}", v)),
                "a Slurm time limit (MINUTES, HH:MM:SS or DAYS-HH:MM:SS)")
SECTION_SCHEMA = s.Obj(required={"nodes": s.Int(1, 4096)}, optional={
    "time": _TIME, "partition": _NO_LINE_BREAK, "account": _NO_LINE_BREAK, "qos": _NO_LINE_BREAK,
    "job_name": s.Name(64), "extra": s.ListOf(_NO_LINE_BREAK, max_items=64),
    "pending_timeout": s.Int(1, 30 * 86400), "unanswered_timeout": s.Int(1, 30 * 86400)})


@dataclass(frozen=True)
class SlurmJob:
    """hosts.json's ``slurm`` section: what to ask sbatch for."""
    nodes: int
    time: str = "00:30:00"
    partition: str = ""
    account: str = ""
    qos: str = ""
    job_name: str = "p3"
    extra: tuple[str, ...] = ()
    pending_timeout: int = DEFAULT_PENDING_TIMEOUT_S
    unanswered_timeout: int = UNANSWERED_S

    @classmethod
    def from_section(cls, data: Any, source: str) -> SlurmJob:
        try:
            SECTION_SCHEMA.check(data, f"{source}: slurm")
        except s.Invalid as exc:
            raise UserError(str(exc)) from None
        return cls(**{**data, "extra": tuple(data.get("extra", ()))})

    def sbatch_options(self) -> list[str]:
        options = [f"--job-name={self.job_name}", f"--nodes={self.nodes}", f"--time={self.time}"]
        options += [f"--{key}={value}" for key, value in (("partition", self.partition), ("account", self.account),
                                                         ("qos", self.qos)) if value]
        return options + list(self.extra)


def job_of(description: Any, source: str) -> SlurmJob | None:
    """The Slurm job a machine's hosts.json describes, or None when it names none."""
    if isinstance(description, dict) and "slurm" in description:
        return SlurmJob.from_section(description["slurm"], source)
    return None


def job_to_submit(description: Any, source: str, in_allocation: bool, what: str) -> SlurmJob:
    """The job ``--submit`` submits ``what`` (a run, the sweep) as; refused in one line when the machine names
    none, or when this already is a job."""
    job = job_of(description, source) if isinstance(description, dict) else None
    if job is None:
        raise UserError("--submit needs --target=MACHINE, a machine whose hosts.json has a 'slurm' section (e.g. "
                        "{\"slurm\": {\"nodes\": 3, \"time\": \"00:30:00\"}}; see docs/reference/hosts-json.md)")
    if in_allocation:
        raise UserError(f"--submit inside a Slurm allocation would queue a job from a job: drop --submit, and "
                        f"{what} uses this allocation's nodes")
    return job


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise UserError(f"--submit needs Slurm's {name} on PATH (Debian: slurm-client); run it on the cluster's "
                        f"login node")
    return found


def _slurm(argv: Sequence[str], timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([_tool(argv[0]), *argv[1:]], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UserError(f"Slurm's {argv[0]} did not answer within {timeout:g} s; is slurmctld up? "
                        f"(check with sinfo)") from None


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # sbatch says "sbatch: error: Batch job submission failed: <reason>": the last error line names the reason.
    errors = [line for line in lines if "error" in line.lower()]
    return (errors[-1] if errors else lines[-1] if lines else "no message").removeprefix("sbatch: error: ")


def batch_script(command: Sequence[str], environment: Mapping[str, str]) -> str:
    """The script sbatch runs: ``command`` with each word quoted, after the variables it needs."""
    lines = ["#!/bin/bash", "# Written by reprokit for --submit: the same ck command, run inside the job."]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in sorted(environment.items())]
    lines.append(f"exec {shlex.join(command)}")
    return "\n".join(lines) + "\n"


# sbatch's words when it cannot reach slurmctld at all: the job's options are not the problem then.
NO_CONTROLLER = ("unable to contact slurm controller", "connect failure", "could not establish a configuration source")


def _refusal(what: str, said: str, job: SlurmJob) -> UserError:
    """One line: Slurm's reason and the fix (the controller, or the job's options in hosts.json's slurm section)."""
    reason = _first_line(said)
    if any(words in reason.lower() for words in NO_CONTROLLER):
        return UserError(f"{what}: {reason}; Slurm's controller does not answer: check that slurmctld runs and that "
                         f"this host's slurm.conf (SLURM_CONF) names it (sinfo should list the partitions)")
    return UserError(f"{what}: {reason}; check hosts.json's slurm section ({' '.join(job.sbatch_options())})")


def submit(job: SlurmJob, script: Path, output: Path, workdir: Path) -> str:
    """Submit ``script``; its job id. A refusal is one line with Slurm's reason."""
    proc = _slurm(["sbatch", "--parsable", *job.sbatch_options(), f"--output={output}", f"--chdir={workdir}",
                   "--export=ALL", str(script)])
    job_id = proc.stdout.strip().split(";")[0]
    if proc.returncode != 0 or not job_id.isdigit():
        raise _refusal("Slurm refused the job", proc.stderr or proc.stdout, job)
    return job_id


def test_only(job: SlurmJob) -> str:
    """``sbatch --test-only``: would Slurm take ``job``? Its estimate line; a refusal is one line with the reason."""
    proc = _slurm(["sbatch", "--test-only", *job.sbatch_options(), "--wrap=true"])
    said = (proc.stderr + proc.stdout).strip()
    if proc.returncode != 0:
        raise _refusal("Slurm would refuse the job", said, job)
    return _first_line(said).removeprefix("sbatch: ")


def submit_command(job: SlurmJob, command: Sequence[str], folder: Path) -> tuple[str, Path, Path]:
    """Submit ``command`` as ``job`` from ``folder`` (its script ``job.sbatch`` and output ``job.out`` there):
    the job id, the script and the output file."""
    script, output = folder / "job.sbatch", folder / "job.out"
    script.write_text(batch_script(command, {}))
    script.chmod(0o755)
    return submit(job, script, output, folder), script, output


@dataclass
class JobState:
    state: str  # Slurm's JobState (PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, ...); "" when Slurm forgot it
    reason: str = ""
    exit_code: int | None = None
    nodes: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.state == ""


def job_state(job_id: str, timeout: float = POLL_TIMEOUT_S) -> JobState:
    try:
        proc = _slurm(["scontrol", "-o", "show", "job", job_id], timeout)
    except UserError:  # slurmctld did not answer in time: ask again
        return JobState(UNKNOWN)
    if proc.returncode != 0:
        # purged (MinJobAge) or never known; any other failure (slurmctld busy, restarting): ask again
        return JobState("" if "invalid job id" in proc.stderr.lower() else UNKNOWN)
    fields = dict(item.split("=", 1) for item in proc.stdout.split() if "=" in item)
    code = re.fullmatch(r"(\d+):(\d+)", fields.get("ExitCode", ""))
    return JobState(fields.get("JobState", ""), fields.get("Reason", "None"),
                    int(code.group(1)) if code else None, fields.get("NodeList", ""))


def cancel(job_id: str, timeout: float = COMMAND_TIMEOUT_S) -> None:
    _slurm(["scancel", job_id], timeout)


@dataclass
class JobEnd:
    job_id: str
    state: str
    reason: str
    exit_code: int | None
    pending_s: float
    running_s: float
    why_cancelled: str = ""  # ours: a stop, the pending time, a reason it can never start

    @property
    def completed(self) -> bool:
        return self.state == "COMPLETED" and not self.why_cancelled

    def describe(self) -> str:
        if self.why_cancelled:
            return f"Slurm job {self.job_id} was cancelled: {self.why_cancelled}"
        reason = "" if self.reason in ("", "None") else f", reason {self.reason}"
        code = "" if self.exit_code in (None, 0) else f", exit code {self.exit_code}"
        state = self.state or "gone from Slurm's memory before its end was seen"
        return f"Slurm job {self.job_id} ended {state}{reason}{code}"


class _Tail:
    """Copies what a growing file gains to ``console`` (the job's output on a shared file system)."""

    def __init__(self, path: Path, console: TextIO):
        self.path, self.console, self.offset = path, console, 0

    def pump(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        if data:
            self.offset += len(data)
            self.console.write(data.decode(errors="replace"))
            self.console.flush()


def follow(job_id: str, job: SlurmJob, output: Path, console: TextIO, stopped: Callable[[], str | None],
           clock: Callable[[], float] = time.monotonic, label: str = "p3",
           state_of: Callable[[str], JobState] = job_state,
           cancel_job: Callable[[str], None] | None = None,
           poll_s: float = POLL_S) -> JobEnd:
    """Follow job ``job_id`` to its end, its output streamed to ``console``; cancel it when asked to stop, when it
    pends longer than ``job.pending_timeout``, when Slurm says it can never start, or when scontrol stays silent
    for ``job.unanswered_timeout`` (said at once when it falls silent). After a stop of ours, one scancel and one look within
    STOPPED_WAIT_S: the command ends whatever slurmctld does."""
    cancel_job = cancel_job or functools.partial(cancel, timeout=POLL_TIMEOUT_S)
    start = clock()
    tail = _Tail(output, console)
    said: set[str] = set()
    started: float | None = None
    why = ""
    state = JobState("PENDING")
    answered = start
    seen = silent = False
    while True:
        state = state_of(job_id)
        tail.pump()
        if state.state == "" and not seen and clock() - start < FIRST_SEEN_S:
            state = JobState(UNKNOWN)  # not known yet (a busy slurmctld): not an end
        seen = seen or state.state not in ("", UNKNOWN)
        if state.state != UNKNOWN:
            if silent:
                print(f"{label}: Slurm answers again about job {job_id}", file=console, flush=True)
            answered, silent = clock(), False
        elif seen and not silent:
            silent = True
            print(f"{label}: Slurm's scontrol does not answer about job {job_id} (slurmctld down?); the job is "
                  f"cancelled if it stays silent for {job.unanswered_timeout} s", file=console, flush=True)
        if state.state == UNKNOWN and clock() - answered > job.unanswered_timeout:
            why = (f"Slurm's scontrol did not answer for {job.unanswered_timeout} s, hosts.json's "
                   f"slurm.unanswered_timeout; check slurmctld (sinfo)")
        if state.state == "PENDING":
            if state.reason not in said and state.reason not in ("None", ""):
                said.add(state.reason)
                print(f"{label}: Slurm job {job_id} is pending ({state.reason})", file=console, flush=True)
            if state.reason in NEVER_STARTS:
                why = f"Slurm will never start it as submitted (reason {state.reason}); change hosts.json's slurm section"
            elif clock() - start > job.pending_timeout:
                why = (f"still pending ({state.reason}) after {job.pending_timeout} s, hosts.json's "
                       f"slurm.pending_timeout")
        elif started is None and not state.ended and state.state != UNKNOWN:
            started = clock()
            print(f"{label}: Slurm job {job_id} is {state.state.lower()} on {state.nodes or 'its nodes'}", file=console,
                  flush=True)
        reason = stopped()
        if reason and not why:
            why = f"the command following it was {reason}"
        if why:
            ours = bool(reason)  # a stop here: end within STOPPED_WAIT_S, whatever slurmctld does
            deadline = clock() + (STOPPED_WAIT_S if ours else CANCEL_WAIT_S)
            try:
                cancel_job(job_id)
            except UserError as exc:  # slurmctld silent: the job may live on; say so in the end's reason
                why = f"{why}; scancel failed ({exc}): check squeue for job {job_id}"
                deadline = clock()  # no state will come from a controller that took no cancel: end now
            state = JobState(UNKNOWN)
            while clock() < deadline:
                state = state_of(job_id)
                if state.ended:
                    break
                time.sleep(poll_s)
            break
        if state.ended:
            break
        time.sleep(poll_s)
    time.sleep(poll_s)  # the output's last lines, written by the job's node
    tail.pump()
    now = clock()
    return JobEnd(job_id, state.state, state.reason, state.exit_code,
                  pending_s=(started if started is not None else now) - start,
                  running_s=now - started if started is not None else 0.0, why_cancelled=why)


def argv_without(argv: Sequence[str], *flags: str) -> list[str]:
    """``argv`` without the given ``--flag`` / ``--flag=VALUE`` words."""
    return [word for word in argv if word.split("=", 1)[0] not in flags]
