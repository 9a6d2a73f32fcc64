"""Parse MXNet Speedometer logs, from our runs and from the original artifact's.

Handles both MXNet generations (``Batch [20]`` and ``Batch [20-40]``), any log
prefix (timestamps, ``INFO:root:``), extra metrics after the speed, and merged
streams where each line starts with a ``[host role#i]`` prefix.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

_SPEED = re.compile(
    r"Epoch\[(?P<epoch>\d+)\]\s+Batch\s*\[(?P<first>\d+)(?:-(?P<last>\d+))?\]\s+"
    r"Speed:\s*(?P<speed>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?\d+)?)\s*samples/sec"
    r"(?:\s+(?P<tokens>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?\d+)?)\s*tokens/sec)?",  # Sockeye adds tokens/sec
    re.IGNORECASE,
)


def is_speed_report(line: str) -> bool:
    """A worker's progress line (MXNet's Speedometer, Sockeye's too)."""
    return _SPEED.search(line) is not None


_SOURCE = re.compile(r"^\[(?P<source>[^\]]+#\d+)\]\s")  # our launcher's "[host role#i] "
_CHECKSUM = re.compile(r"Parameter checksum: rank=(?P<rank>\d+) sha256=(?P<digest>[0-9a-f]{64})")


@dataclass(frozen=True)
class SpeedReport:
    epoch: int
    batch_end: int  # batch index at which the report was made
    batches: int | None  # batches the speed covers; None when the old format does not say
    samples_per_sec: float
    tokens_per_sec: float | None = None  # Sockeye's Speedometer reports it too


def parse_reports(text: str) -> dict[str, list[SpeedReport]]:
    """Speedometer reports grouped by source: the ``[host role#i]`` prefix, or "" when absent."""
    grouped: dict[str, list[SpeedReport]] = {}
    for line in text.splitlines():
        match = _SPEED.search(line)
        if not match:
            continue
        source_match = _SOURCE.match(line)
        source = source_match.group("source") if source_match else ""
        first, last = int(match.group("first")), match.group("last")
        speed = float(match.group("speed"))
        tokens = float(match.group("tokens")) if match.group("tokens") else None
        if last is None:  # MXNet <= 1.3 and Sockeye: "Batch [20]" names the batch index only
            report = SpeedReport(int(match.group("epoch")), first, None, speed, tokens)
        else:
            report = SpeedReport(int(match.group("epoch")), int(last), int(last) - first, speed, tokens)
        grouped.setdefault(source, []).append(report)
    return {source: _fill_batches(reports) for source, reports in grouped.items()}


def _fill_batches(reports: list[SpeedReport]) -> list[SpeedReport]:
    """Old-format reports: the covered batches are the distance to the previous report."""
    filled = []
    previous_end: dict[int, int] = {}
    for report in reports:
        batches = report.batches
        if batches is None:
            batches = report.batch_end - previous_end.get(report.epoch, 0)
        previous_end[report.epoch] = report.batch_end
        filled.append(SpeedReport(report.epoch, report.batch_end, batches, report.samples_per_sec,
                                  report.tokens_per_sec))
    return filled


def steady_state(reports: list[SpeedReport], warmup_reports_per_epoch: int = 1) -> list[SpeedReport]:
    """Drop the first report(s) of every epoch: they include start-up and data-iterator reset."""
    kept: list[SpeedReport] = []
    seen: dict[int, int] = {}
    for report in reports:
        seen[report.epoch] = seen.get(report.epoch, 0) + 1
        if seen[report.epoch] > warmup_reports_per_epoch:
            kept.append(report)
    return kept


@dataclass(frozen=True)
class WorkerThroughput:
    samples_per_sec: float  # batch-weighted mean over the steady-state reports
    std: float
    minimum: float
    maximum: float
    batches: int
    reports: int
    tokens_per_sec: float | None = None  # time-weighted like samples_per_sec; None when not reported


def summarize(reports: list[SpeedReport]) -> WorkerThroughput | None:
    """One worker's steady-state throughput, or None when no report is left after warm-up."""
    if not reports:
        return None
    batches = sum(r.batches or 0 for r in reports)
    if batches > 0:
        # Time-consistent mean: total samples over total time.
        seconds = sum((r.batches or 0) / r.samples_per_sec for r in reports if r.samples_per_sec > 0)
        mean = batches / seconds if seconds > 0 else 0.0
    else:
        mean = statistics.fmean(r.samples_per_sec for r in reports)
    speeds = [r.samples_per_sec for r in reports]
    tokens = None
    if all(r.tokens_per_sec is not None and r.samples_per_sec > 0 for r in reports):
        # Each report's duration is proportional to batches / samples_per_sec (batch size is constant).
        durations = [(r.batches or 1) / r.samples_per_sec for r in reports]
        tokens = sum((r.tokens_per_sec or 0.0) * d for r, d in zip(reports, durations)) / sum(durations)  # all set
    return WorkerThroughput(
        samples_per_sec=mean,
        std=statistics.pstdev(speeds) if len(speeds) > 1 else 0.0,
        minimum=min(speeds),
        maximum=max(speeds),
        batches=batches,
        reports=len(reports),
        tokens_per_sec=tokens,
    )


def parse_checksums(text: str) -> dict[int, str]:
    """Trainable-parameter checksums logged by our training script, by worker rank."""
    return {int(m.group("rank")): m.group("digest") for m in _CHECKSUM.finditer(text)}
