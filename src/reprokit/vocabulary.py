"""Words every layer shares, as the stored strings they are (run specs, results, study files keep these strings)."""
from __future__ import annotations

from enum import StrEnum


class Variant(StrEnum):
    """What a run measures.

    baseline: the optimizer on the servers (stock MXNet, or the authors' baseline build);
    baseline-worker-update: stock MXNet, the optimizer on the workers (MXNet's P3 can only update there, so p3 over
      this one isolates slicing and priority from where the optimizer runs);
    p3: MXNet 1.9.1's own P3 (apache/mxnet PR #15124, dmlc/ps-lite PR #147) switched on in every role, or the
      authors' fork, where it is compiled in.
    """
    BASELINE = "baseline"
    BASELINE_WORKER_UPDATE = "baseline-worker-update"
    P3 = "p3"


VARIANTS: tuple[str, ...] = tuple(v.value for v in Variant)  # the VARIANT knob's values, in this order
DEFAULT_VARIANT = Variant.P3  # what a run without --env.VARIANT measures


class PsVan(StrEnum):
    """ps-lite's van, as DMLC_PS_VAN_TYPE names it: zmq (unset: the TCP van) or p3 (MXNet's P3)."""
    ZMQ = "zmq"
    P3 = "p3"
