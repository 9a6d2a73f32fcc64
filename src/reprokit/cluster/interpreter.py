"""The engine's interpreter on a remote host: is it there, does it run, does it import MXNet.

The run asks for the version before anything else uses the interpreter (the port check, the roles), so a
missing one is named as such; `ck check cluster` asks the same, then imports MXNet with it.
"""
from __future__ import annotations

import shlex

from reprokit.cluster.ssh import Connection
from reprokit.core.errors import UserError

CHECK_TIMEOUT_S = 60
NOT_RUNNABLE = (126, 127)  # the shell's "cannot execute" and "not found"


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or ["no output"])[-1]


def not_there(conn: Connection, python: str, stderr: str) -> UserError:
    return UserError(f"{conn.endpoint.label}: the engine's interpreter {python} cannot be run there "
                     f"({_last_line(stderr)}); install the engine at that path, or set \"python\" for this host "
                     f"in hosts.json")


def _probe(conn: Connection, python: str, code: str, failed: str) -> str:
    """The last line ``python -c code`` prints on the host; a missing interpreter named as such, any other
    failure as ``failed``: the error's last line."""
    result = conn.run(" ".join(shlex.quote(a) for a in [python, "-c", code]), timeout=CHECK_TIMEOUT_S)
    if result.exit_code in NOT_RUNNABLE:
        raise not_there(conn, python, result.stderr)
    if result.exit_code != 0 or not result.stdout.strip():
        raise UserError(f"{conn.endpoint.label}: {failed}: {_last_line(result.stderr)}")
    return result.stdout.strip().splitlines()[-1]


def version(conn: Connection, python: str) -> str:
    """The interpreter's Python version; raises when it is missing or does not run."""
    return _probe(conn, python, "import sys; print(sys.version.split()[0])",
                  f"the engine's interpreter {python} fails")


def mxnet_version(conn: Connection, python: str) -> str:
    """The MXNet version the interpreter imports; raises naming the import's error."""
    return _probe(conn, python, "import mxnet; print(mxnet.__version__)", f"{python} cannot import mxnet")
