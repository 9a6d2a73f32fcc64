"""A sweep's progress on the console: runs done, the current one, and the time left."""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from reprokit.study.store.sweep_plan import duration_text


class Progress:
    """Runs done, the current one, and the time left estimated from the runs this sweep finished.

    On a terminal the bar redraws one line; elsewhere (logs, tests) it prints a line per event.
    """

    def __init__(self, total: int, done: int, stream: TextIO = sys.stdout, clock: Callable[[], float] = time.monotonic):
        self.total, self.done = total, done
        self.stream, self.clock = stream, clock
        self.durations: list[float] = []
        self.tty = stream.isatty()
        self._started: float | None = None

    def line(self, current: str) -> str:
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        left = "?"
        if self.durations:
            left = "~" + duration_text(sum(self.durations) / len(self.durations) * (self.total - self.done))
        return f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} runs | {current} | {left} left"

    def start(self, current: str) -> None:
        self._started = self.clock()
        self._show(self.line(f"now: {current}"))

    def finish(self, current: str, outcome: str) -> None:
        if self._started is not None:
            self.durations.append(self.clock() - self._started)
        self.done += 1
        self._show(self.line(f"{current}: {outcome}"), final=True)

    def _show(self, text: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
