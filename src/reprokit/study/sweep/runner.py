"""One run of a sweep: `ck run program:P` in its own run folder, guarded (its provenance: sweep/provenance.py).

Each run is the ck CLI in a child process, so that its exact command line is
recorded (and can be typed again), its output goes to the run folder instead
of over the progress bar, and it has a timeout. The child runs under a small
guard (``python -m reprokit.study.sweep.runner --guard -- ck run ...``) in a session
of its own. The guard reads a pipe from the sweep; when the pipe closes (the
sweep stopped, timed out, or died, even by SIGKILL), or the guard itself gets
SIGINT/SIGTERM/SIGHUP, it sends ck SIGTERM (ck passes it to its launcher, which
tears every role down), then SIGKILLs what is left of its session after a grace
period; if the guard is SIGKILLed, ck gets SIGTERM from the kernel. So no run
outlives its sweep, and a run stopped from outside is ``interrupted``, not failed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprokit.core.schema import CONTROL
from reprokit.run.lifeline import STOP_SIGNALS, parent_death_signal
from reprokit.run.result import RESULT_FILE, Result
from reprokit.vocabulary import RunStatus

GUARD_GRACE_S = 15.0  # the launcher needs a few seconds to tear its roles down
CK_OUTPUT = "ck-output.json"
CK_LOG = "ck-run.log"


def ck_executable() -> str:
    return str(Path(sys.executable).with_name("ck"))


def run_command(program: str, model: str, target: str, run_dir: Path, env: dict[str, str]) -> list[str]:
    return [ck_executable(), "run", f"program:{program}", f"--cmd_key={model}",
            *([f"--target={target}"] if target else []),
            f"--tmp_dir={run_dir}", "--out=json_file", f"--out_file={run_dir / CK_OUTPUT}",
            *(f"--env.{k}={v}" for k, v in sorted(env.items()))]


@dataclass
class RunOutcome:
    status: RunStatus  # ok, failed, or interrupted (the sweep was asked to stop during it: not a result)
    reason: str | None
    result: dict[str, Any] | None  # p3-result.json as the run left it (a record stores it so); None if it wrote none
    started_at: float
    ended_at: float
    exit_code: int | None

    @property
    def ok(self) -> bool:
        return self.status.ok

    @property
    def stopped(self) -> bool:
        return self.status.interrupted

    @property
    def run_result(self) -> Result | None:
        return _typed(self.result)


def _typed(result: dict[str, Any] | None) -> Result | None:
    """A run's result typed (store.typed_result); None if it wrote none."""
    from reprokit.study.store.records import typed_result  # noqa: PLC0415  the guard (-m ...runner) needs no store

    return None if result is None else typed_result(result)


class GuardedRun:
    """Starts the guarded child; ``stop()`` (from a signal handler too) tears it down."""

    def __init__(self, command: list[str], run_dir: Path):
        self.log = open(run_dir / CK_LOG, "wb")
        self.proc = subprocess.Popen(
            # -P: a run folder may hold the reprokit/wire copy a run shipped there, which must not hide the framework
            [sys.executable, "-P", "-m", "reprokit.study.sweep.runner", "--guard", "--", *command],
            stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT, cwd=run_dir,
            start_new_session=True,
        )
        self.stop_reason: str | None = None

    def stop(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason
        try:
            if self.proc.stdin is not None:  # always: it is a pipe
                self.proc.stdin.close()  # the guard's watchdog sees EOF and tears the session down
        except (OSError, ValueError):
            pass

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop(f"timed out after {timeout_s:.0f} s")
        try:
            return self.proc.wait(timeout=GUARD_GRACE_S + 5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return self.proc.wait()
        finally:
            self.log.close()


def run_once(command: list[str], run_dir: Path, timeout_s: float,
             on_start: Callable[[GuardedRun], None] | None = None) -> RunOutcome:
    """Run the command guarded in run_dir; read the unified result it left there."""
    started = time.time()
    run = GuardedRun(command, run_dir)
    if on_start:
        on_start(run)
    code = run.wait(timeout_s)
    if not run.log.closed:
        run.log.close()
    ended = time.time()
    result_path = run_dir / RESULT_FILE
    result = None
    if result_path.exists():
        try:
            result = json.loads(result_path.read_text())
        except ValueError:
            result = None
    if run.stop_reason:
        stopped = not run.stop_reason.startswith("timed out")  # a timeout is the run's own failure
        return RunOutcome(RunStatus.INTERRUPTED if stopped else RunStatus.FAILED, run.stop_reason, result, started,
                          ended, code)
    typed = _typed(result)
    if (typed is not None and typed.interrupted) or (code is not None and code < 0):
        reason = ((typed and typed.failure_reason)
                  or (f"its guard was killed by signal {-code}" if code is not None else "no reason recorded"))
        return RunOutcome(RunStatus.INTERRUPTED, f"interrupted: {reason}", result, started, ended, code)
    if typed is not None and typed.run_success:
        return RunOutcome(RunStatus.OK, None, result, started, ended, code)
    if typed is not None:
        reason = typed.failure_reason or "the run failed without a reason"
    else:
        tail = _tail(run_dir / CK_LOG)
        reason = f"ck exited with code {code} and wrote no {RESULT_FILE}" + (f": {tail}" if tail else "")
    return RunOutcome(RunStatus.FAILED, reason, result, started, ended, code)


def _tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    wanted = [line for line in text if line.startswith(("p3: error:", "p3: FAILED:", "CK error:"))]
    return CONTROL.sub("", " | ".join((wanted or text)[-lines:])[:500])  # the record schema refuses terminal escapes


# --- the guard -----------------------------------------------------------------------------------

def _others_in_group() -> list[int]:
    """The live processes of the guard's process group (its session: ck, CK's shell, the launcher), but itself."""
    me, group, found = os.getpid(), os.getpgrp(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == group and fields[0] not in ("Z", "X"):
                found.append(int(entry))
    return found


def guard(command: list[str]) -> int:
    """Run command in this session; stop it when stdin (the sweep's pipe) closes or the guard gets
    SIGINT/SIGTERM/SIGHUP, and when the guard dies (SIGKILL), the command gets SIGTERM from the kernel.

    Stopping sends ck SIGTERM, which ck passes on to its launcher (``run.lifeline``): the launcher tears the
    run down and ck reports it as interrupted. Whatever of the session is left GUARD_GRACE_S later is killed.
    """
    stop: list[str] = []  # why the run must stop; a plain list, safe to append to from a signal handler
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, _frame: stop.append(signal.Signals(signum).name))
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=lambda: parent_death_signal(signal.SIGTERM))

    def watch_stdin() -> None:
        sys.stdin.buffer.read()  # returns at EOF: the sweep closed the pipe or died
        stop.append("end of the sweep's pipe")

    threading.Thread(target=watch_stdin, daemon=True).start()
    while child.poll() is None and not stop:
        time.sleep(0.1)
    if stop and child.poll() is None:
        child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GUARD_GRACE_S
    while (child.poll() is None or _others_in_group()) and time.monotonic() < deadline:
        time.sleep(0.1)  # the launcher tears its roles down; ck reports the run
    for pid in _others_in_group():  # whatever is left
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    code = child.poll()
    return code if code is not None else child.wait()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--guard" and sys.argv[2] == "--":
        code = guard(sys.argv[3:])
        sys.stdout.flush()
        os._exit(128 - code if code < 0 else code)  # ck killed by signal N: 128+N, as a shell says it  # not sys.exit: the watchdog thread still blocks in a read of stdin
    sys.exit("usage: python -m reprokit.study.sweep.runner --guard -- COMMAND...")
