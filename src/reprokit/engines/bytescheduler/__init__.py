"""The ``bytescheduler`` variant: ByteScheduler (Peng et al., SOSP'19) over stock MXNet 1.9.1's parameter server.

What the framework does for it is ``ByteSchedulerVariant`` (its settings, the environment and arguments of its
roles, the engine's check, its result); what its workers do is program/p3/bytescheduler_kv.py; the scheduler
itself is package:bytescheduler-github (``install``: ``python -m reprokit.engines.bytescheduler install``).

The variant runs the stock engine's train.py with the worker's kvstore inside ByteScheduler's ScheduledKVStore,
as its README runs MXNet's parameter server (``ScheduledKVStore(mx.kvstore.create("dist_sync"))``), so the
optimizer stays on the servers, as in ``baseline``: that is its reference, and it learns the same parameters.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reprokit.core.errors import UserError
from reprokit.core.paths import PROGRAM_DIR, SRC_DIR
from reprokit.core.values import whole_number
from reprokit.vocabulary import Variant
from reprokit.wire import bytescheduler_line  # the worker's bytescheduler: line, the patches' names (one copy)

CHECK_TIMEOUT_S = 120
SCHEDULER_OPTION = "--scheduler"  # train.py's: the kvstore's scheduler (bytescheduler, or none)


@dataclass(frozen=True)
class Knob:
    name: str  # BYTESCHEDULER_PARTITION, as --env.NAME and as ByteScheduler's core reads it
    default: int
    meaning: str


class ByteSchedulerVariant:
    """Everything the framework knows of the bytescheduler variant, in one place."""

    variant = Variant.BYTESCHEDULER
    # Its two knobs, as ByteScheduler's core reads them from the worker's environment (docs/scheduling.md).
    KNOBS = (Knob("BYTESCHEDULER_PARTITION", bytescheduler_line.DEFAULT_PARTITION, "parameters per partition"),
             Knob("BYTESCHEDULER_CREDIT", bytescheduler_line.DEFAULT_CREDIT, "parameters in flight"))
    # What else of ByteScheduler's environment changes what runs: a role never inherits them (run/plan.py).
    SWITCHES = ("BYTESCHEDULER_PARTITION", "BYTESCHEDULER_CREDIT", "BYTESCHEDULER_CREDIT_TUNING",
                "BYTESCHEDULER_PARTITION_TUNING", "BYTESCHEDULER_TIMELINE", "BYTESCHEDULER_DEBUG",
                "BYTESCHEDULER_ROOT_IP", "BYTESCHEDULER_ROOT_PORT")
    HIGH = 2**31 - 1
    PACKAGE_HINT = bytescheduler_line.PACKAGE_HINT

    # ------------------------------------------------------------------ settings

    @classmethod
    def knobs(cls, env: Mapping[str, str], variant: Variant, is_image: bool) -> tuple[int | None, int | None]:
        """(partition, credit) for a bytescheduler run, (None, None) for another; a knob given to another variant,
        or the variant given to a model it does not run, is refused in one line."""
        given = {k.name: str(env.get(k.name, "")).strip() for k in cls.KNOBS}
        if variant is not cls.variant:
            named = [name for name, value in given.items() if value]
            if named:
                raise UserError(f"{named[0]} applies only to VARIANT=bytescheduler (this run's is {variant.value}); "
                                f"add --env.VARIANT=bytescheduler, or drop --env.{named[0]}")
            return None, None
        if not is_image:
            raise UserError("VARIANT=bytescheduler runs the image models (train.py's Gluon trainer) only, not "
                            "sockeye; pick resnet, inception-v3, vgg or vgg16, or another --env.VARIANT")
        partition, credit = (whole_number(given[k.name], k.name, f"--env.{k.name}=N ({k.meaning})", low=1,
                                          high=cls.HIGH) if given[k.name] else k.default for k in cls.KNOBS)
        return partition, credit

    @classmethod
    def role_env(cls, partition: int, credit: int) -> dict[str, str]:
        """Every role's environment for the variant (the workers' ByteScheduler reads it; credit tuning stays off)."""
        return {"BYTESCHEDULER_PARTITION": str(partition), "BYTESCHEDULER_CREDIT": str(credit),
                "BYTESCHEDULER_CREDIT_TUNING": "0"}

    @classmethod
    def train_args(cls) -> list[str]:
        return [SCHEDULER_OPTION, "bytescheduler"]

    # ------------------------------------------------------------------ the engine

    @classmethod
    def in_engine(cls, python: str) -> dict[str, Any]:
        """The engine's ByteScheduler, checked as every worker checks it (bytescheduler_kv.check_install):
        installed and patched; a UserError naming what is missing and the install command otherwise."""
        # argv: program/p3 and src (for reprokit.wire, which bytescheduler_kv imports), first on the path
        code = ("import json, sys; sys.path[:0] = sys.argv[1:3]; import bytescheduler_kv\n"
                "try:\n    print(json.dumps(bytescheduler_kv.check_install()))\n"
                "except bytescheduler_kv.SchedulerError as exc:\n    print(json.dumps({'refused': str(exc)}))\n")

        with tempfile.TemporaryDirectory(prefix="reprokit-bytescheduler-") as folder:  # it writes ByteScheduler.log
            try:
                out = subprocess.run([python, "-c", code, str(PROGRAM_DIR), str(SRC_DIR)], capture_output=True,
                                     text=True, timeout=CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL, cwd=folder)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise UserError(f"cannot run {python} to look for ByteScheduler: {exc}") from None
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            last = (out.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"the MXNet engine {python} cannot check its ByteScheduler ({last}); install it with: "
                            f"{cls.PACKAGE_HINT} --quiet")
        found: dict[str, Any] = json.loads(lines[-1])
        if "refused" in found:
            raise UserError(f"VARIANT=bytescheduler: {found['refused']}")
        return found

    @classmethod
    def engine_name(cls, name: str, found: Mapping[str, Any]) -> str:
        """The engine as a run records it: mxnet-1.9.1-cpu+bytescheduler@2749848."""
        commit = str(found.get("commit", "") or "")
        return f"{name}+bytescheduler" + (f"@{commit[:7]}" if commit else "")

    # ------------------------------------------------------------------ the result

    @classmethod
    def result_field(cls, worker_texts: list[str]) -> tuple[dict[str, Any] | None, str]:
        """The result's ``bytescheduler`` (the knobs, commit, and per worker what went through the scheduler) from
        every worker's line, and why the run fails ("" when it does not): a worker that logged none, or whose
        pushpulls did not all reach the scheduler."""
        parse = bytescheduler_line.parse_line
        lines = [[parsed for line in text.splitlines() for parsed in [parse(line)] if parsed] for text in worker_texts]
        missing = [rank for rank, found in enumerate(lines) if not found]
        if missing:
            return None, (f"worker#{missing[0]} logged no '{bytescheduler_line.LINE_PREFIX}' line: ByteScheduler did "
                          f"not run there (or the worker ended before training did)")
        last = [found[-1] for found in lines]
        bypassed = [(rank, w) for rank, w in enumerate(last) if not 0 < w["pushpulls"] <= w["tasks"]]
        if bypassed:
            rank, w = bypassed[0]
            return None, (f"worker#{rank}: ByteScheduler's core received {w['tasks']} of {w['pushpulls']} pushpulls: "
                          f"the scheduler was bypassed (patch {bytescheduler_line.PATCHES['pushpull']})")
        first = last[0]
        return {"partition": first["partition"], "credit": first["credit"], "credit_tuning": bool(first["credit_tuning"]),
                "commit": first["commit"], "pushpulls": [w["pushpulls"] for w in last],
                "tasks": [w["tasks"] for w in last], "immediate": [bool(w["immediate"]) for w in last]}, ""
