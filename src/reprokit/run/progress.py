"""Whether a run's workers still make progress, judged from their own measured pace.

Every worker prints a speed report every DISP_BATCHES iterations, so the interval between two of its reports is
DISP_BATCHES times its measured iteration time. A worker that has reported twice and then stays silent for
STALL_FACTOR times its slowest interval so far (at least STALL_FLOOR_S) has stalled: a role of the run is stopped,
hung, or lost, since synchronous training stops every worker when one role stops. The bound is the worker's own
pace, not RUN_TIMEOUT (48 h on the paper profile).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

STALL_FACTOR = 10.0  # a loaded host slows a worker 2-3x (measured here at load 6-11); 10x is not load
STALL_FLOOR_S = 60.0  # the silent end of training (saving parameters, a checkpoint) takes seconds, not minutes
STOPPED_LIMIT_S = 10.0  # a role process seen stopped (SIGSTOP, a tracer) this long has failed the run


@dataclass(frozen=True)
class Stall:
    workers: list[str]
    silent_s: float
    bound_s: float
    slowest_interval_s: float

    def describe(self) -> str:
        return (f"no progress from {', '.join(self.workers)} for {self.silent_s:.0f} s, past the bound of "
                f"{self.bound_s:.0f} s ({STALL_FACTOR:g} x the slowest interval between their speed reports, "
                f"{self.slowest_interval_s:.1f} s; at least {STALL_FLOOR_S:g} s): a role is stopped or hung")


class ProgressWatch:
    """Speed reports per worker (monotonic times), fed from the output copy threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reports: dict[str, list[float]] = {}
        self.slowest: dict[str, float] = {}  # worker -> its slowest interval between two reports so far

    def report(self, worker: str, at: float) -> None:
        with self.lock:
            times = self.reports.setdefault(worker, [])
            if times:
                self.slowest[worker] = max(self.slowest.get(worker, 0.0), at - times[-1])
            times.append(at)

    def bound_s(self, worker: str) -> float | None:
        """How long this worker may stay silent; None until it has reported twice (no pace measured yet)."""
        with self.lock:
            slowest = self.slowest.get(worker)
        return None if slowest is None else max(STALL_FLOOR_S, STALL_FACTOR * slowest)

    def stall(self, workers: list[str], now: float) -> Stall | None:
        """The workers silent past their bound, if any."""
        silent, worst = [], (0.0, 0.0, 0.0)
        for name in workers:
            bound = self.bound_s(name)
            if bound is None:
                continue
            with self.lock:
                quiet, slowest = now - self.reports[name][-1], self.slowest[name]
            if quiet > bound:
                silent.append(name)
                worst = max(worst, (quiet, bound, slowest))
        return Stall(silent, *worst) if silent else None

    def not_progressing(self, workers: list[str], now: float) -> list[str]:
        """The workers NOT known to be progressing: never reported twice, or silent past their bound."""
        behind = []
        for name in workers:
            bound = self.bound_s(name)
            with self.lock:
                reports = self.reports.get(name)
                last = reports[-1] if reports else None
            if bound is None or last is None or now - last > bound:
                behind.append(name)
        return behind
