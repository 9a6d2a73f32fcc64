"""The fault and hostile-input suite's checks (tests/faults).

Each check names the class of bad outcome it guards against, so that a failed check is counted under that
class by benchmarks/fault_totals.py: a message that is not one clear line, a traceback shown to the user, a
hang, an orphaned process, an injected command that ran, data lost (a stored record, log or result gone or
rewritten). A fault test asserts through these checks; any other failure counts as ``other``.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

OUTCOMES = ("unclear", "traceback", "hang", "orphan", "injection", "data-lost", "other")


class FaultFailure(AssertionError):
    def __init__(self, outcome: str, message: str):
        assert outcome in OUTCOMES, outcome
        super().__init__(f"[{outcome}] {message}")
        self.outcome = outcome


def expect(condition, outcome: str, message: str) -> None:
    if not condition:
        raise FaultFailure(outcome, message)


def no_traceback(text: str) -> None:
    expect("Traceback (most recent call last)" not in text, "traceback", f"a traceback reached the user:\n{text[-2000:]}")


def one_clear_line(text: str, *names: str) -> str:
    """The error as the user sees it: no traceback, and one line naming every one of ``names``."""
    no_traceback(text)
    lines = [line for line in text.splitlines() if line.strip()]
    matching = [line for line in lines if all(n.lower() in line.lower() for n in names)]
    expect(matching, "unclear", f"no single line names {names!r}:\n{text[-2000:]}")
    return matching[0]


def finishes(proc: subprocess.Popen, timeout: float) -> int:
    """The process's exit code; a hang if it is still running after ``timeout`` seconds (then killed)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise FaultFailure("hang", f"{proc.args!r} still running after {timeout} s") from None


def no_orphans(alive, timeout: float, what: str) -> None:
    """``alive()`` lists the processes of ours still running; none may be left after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    left = alive()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = alive()
    expect(not left, "orphan", f"{what}: still running after {timeout} s: {left!r}")


def not_injected(marker: Path) -> None:
    expect(not marker.exists(), "injection", f"an injected command ran (it created {marker})")


def kept(path: Path, before: bytes | None) -> None:
    """``path`` still holds exactly ``before`` (None: it must not exist)."""
    now = path.read_bytes() if path.exists() else None
    expect(now == before, "data-lost", f"{path} was {'removed' if now is None else 'changed'}")
