"""The ``bytescheduler:`` line a worker logs, the install's manifest and the patches' names (standard library only).

Shared by the worker (bytescheduler_kv.py), the installer (reprokit.engines.bytescheduler) and the run's result,
which import it as reprokit.wire.bytescheduler_line. Each worker of a ByteScheduler run logs, at the end::

    bytescheduler: rank=0 partition=1000000 credit=4000000 credit_tuning=0 pushpulls=N tasks=N immediate=0|1 commit=HEX

- ``partition``, ``credit``: ByteScheduler's core's (parameters per partition; parameters in flight);
- ``pushpulls``: the trainer's pushpull calls; ``tasks``: the push-pull tasks ByteScheduler's core received;
- ``immediate=1``: this worker posts its tasks without waiting for credit or priority. That is the authors'
  ScheduledKVStore: every worker but rank 0 does (kvstore.py, ``if self._rank != 0: self._immediate = True``);
- ``commit``: the byteps commit installed (``-`` when unknown).
"""
from __future__ import annotations

from typing import Any

LINE_PREFIX = "bytescheduler:"
MANIFEST = "bytescheduler.reprokit.json"  # written by the installer beside the bytescheduler package
PACKAGE_HINT = "ck install package:bytescheduler-github"
PATCHES = {  # what each of our patches makes true, as check_install() finds it
    "hook": "0001-engine-hook-through-the-c-api.patch",
    "pushpull": "0002-schedule-pushpull-and-broadcast.patch",
    "tuning": "0003-credit-tuning-off-by-default.patch",
}
KNOBS = ("BYTESCHEDULER_PARTITION", "BYTESCHEDULER_CREDIT")  # the run's settings, read by ByteScheduler's core
DEFAULT_PARTITION = 1000000  # docs/scheduling.md, bytecore.py: parameters per partition
DEFAULT_CREDIT = 4000000  # parameters in flight
FIELDS = ("rank", "partition", "credit", "credit_tuning", "pushpulls", "tasks", "immediate", "commit")


def format_line(**values: object) -> str:
    """The line, fields in FIELDS' order (an empty commit as ``-``)."""
    return " ".join([LINE_PREFIX] + [f"{k}={values[k] if values[k] != '' else '-'}" for k in FIELDS])


def parse_line(line: str) -> dict[str, Any] | None:
    """The fields of a ``bytescheduler:`` line, typed; None for another line."""
    if not line.startswith(LINE_PREFIX):
        return None
    fields = dict(part.split("=", 1) for part in line[len(LINE_PREFIX):].split() if "=" in part)
    typed: dict[str, Any] = {}
    for key, value in fields.items():
        typed[key] = value if key == "commit" else int(value) if value.lstrip("-").isdigit() else value
    if typed.get("commit") == "-":
        typed["commit"] = ""
    return typed
