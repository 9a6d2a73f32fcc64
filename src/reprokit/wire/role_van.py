"""Which ps-lite van a role runs, checked before MXNet starts it: one van per job, never a mix.

Standard library only: it runs before ``import mxnet``, which starts the server
and scheduler roles. The run passes the van it wants as ``--ps-van NAME`` (an
argument, so it reaches every role whatever a launcher does to the
environment); the role's ``DMLC_PS_VAN_TYPE`` must say the same, or the role
stops at once with one line. Every role logs the van it runs::

    ps-van: role=server van=p3

so the run's result can show that every role of the job really ran it.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

VAN_OPTION = "--ps-van"
DEFAULT_VAN = "zmq"  # ps-lite's TCP van when DMLC_PS_VAN_TYPE is unset
LINE_PREFIX = "ps-van:"


def expected_van(argv: Sequence[str]) -> str:
    """The van after ``--ps-van`` in ``argv`` (``--ps-van=NAME`` too); ps-lite's default when absent."""
    for i, arg in enumerate(argv):
        if arg == VAN_OPTION and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(VAN_OPTION + "="):
            return arg.split("=", 1)[1]
    return DEFAULT_VAN


def check(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Log this role's van, or stop the role (exit 3) when it is not the run's."""
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    expected = expected_van(argv)
    actual = environ.get("DMLC_PS_VAN_TYPE", "") or DEFAULT_VAN
    role = environ.get("DMLC_ROLE", "worker")
    if actual != expected:
        sys.stderr.write(f"ps-van: {role} runs the {actual!r} van (DMLC_PS_VAN_TYPE) but this run needs {expected!r} "
                         f"in every role; a job must not mix vans: pass DMLC_PS_VAN_TYPE={expected} to every role\n")
        sys.stderr.flush()
        sys.exit(3)
    print(f"{LINE_PREFIX} role={role} van={actual}", flush=True)
    return actual
