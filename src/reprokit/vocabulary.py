"""Words every layer shares, as the stored strings they are (run specs, results, study files keep these strings)."""
from __future__ import annotations

from enum import StrEnum


class Variant(StrEnum):
    """What a run measures.

    baseline: the optimizer on the servers (stock MXNet, or the authors' baseline build);
    baseline-worker-update: stock MXNet, the optimizer on the workers (MXNet's P3 can only update there, so p3 over
      this one isolates slicing and priority from where the optimizer runs);
    p3: MXNet 1.9.1's own P3 (apache/mxnet PR #15124, dmlc/ps-lite PR #147) switched on in every role, or the
      authors' fork, where it is compiled in;
    bytescheduler: ByteScheduler (SOSP'19, package bytescheduler-github) scheduling the workers' pushes and pulls
      over stock MXNet, the optimizer on the servers as in baseline (reprokit.engines.bytescheduler).
    """
    BASELINE = "baseline"
    BASELINE_WORKER_UPDATE = "baseline-worker-update"
    P3 = "p3"
    BYTESCHEDULER = "bytescheduler"

    @property
    def shown(self) -> str:
        """The variant's name in prose and tables."""
        return {"baseline": "baseline", "baseline-worker-update": "worker-update baseline", "p3": "P3",
                "bytescheduler": "ByteScheduler"}[self.value]

    @property
    def updates_on_workers(self) -> bool:
        """Whether the optimizer runs on the workers (P3's store cannot update on the servers)."""
        return self in (Variant.BASELINE_WORKER_UPDATE, Variant.P3)


VARIANTS: tuple[str, ...] = tuple(v.value for v in Variant)  # the VARIANT knob's values, in this order
DEFAULT_VARIANT = Variant.P3  # what a run without --env.VARIANT measures


class PsVan(StrEnum):
    """ps-lite's van, as PS_VAN_VARIABLE names it: zmq (unset: the TCP van) or p3 (MXNet's P3)."""
    ZMQ = "zmq"
    P3 = "p3"


PS_VAN_VARIABLE = "DMLC_PS_VAN_TYPE"  # the environment variable from which ps-lite takes a role's van


class RoleKind(StrEnum):
    """What a process of a parameter-server job plays, as ps-lite's DMLC_ROLE names it."""
    SCHEDULER = "scheduler"
    SERVER = "server"
    WORKER = "worker"


class RunStatus(StrEnum):
    """How a run ended, in one word: what its result, a study's record and ck's exit code say."""
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # stopped from outside (a signal, a lost parent): not a result of the run
    REFUSED = "refused"  # its input was refused before anything started

    @property
    def ok(self) -> bool:
        return self is RunStatus.OK

    @property
    def interrupted(self) -> bool:
        """Stopped from outside (a signal, a lost parent): not a result of the run."""
        return self is RunStatus.INTERRUPTED

    @property
    def exit_code(self) -> int:
        """The run command's exit code, which stock CK passes on: 130 as a shell reports a command ended by SIGINT."""
        return {RunStatus.OK: 0, RunStatus.FAILED: 1, RunStatus.REFUSED: 2, RunStatus.INTERRUPTED: 130}[self]
