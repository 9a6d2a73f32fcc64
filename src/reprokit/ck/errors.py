"""CK's dicts (``CkDict``), and the one conversion of our errors into CK's return dicts."""
from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from ck import kernel
from reprokit.core.errors import UserError
from reprokit.core.paths import disk_error

CkDict = dict[str, Any]  # what CK hands a hook or action and takes back, and its entries' metadata: JSON as CK has it


def ck_command(fn: Callable[..., CkDict]) -> Callable[..., CkDict]:
    """A CK hook or action: a UserError becomes {"return": 1, "error": one line}, which ck prints and exits 1 on;
    so does Ctrl-C (the action's own cleanup has run by then), instead of a KeyboardInterrupt traceback, a closed
    stdout, instead of a BrokenPipeError one, and an overlong name or a full disk (core.paths.disk_error)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> CkDict:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            return {"return": 1, "error": str(exc)}
        except KeyboardInterrupt:
            return {"return": 1, "error": "interrupted (SIGINT); stopped before it finished"}
        except BrokenPipeError:
            # stdout's reader has gone (`ck predict ... | head -1`): end quietly with 1, as Python's own advice for
            # filters does. stdout now points at /dev/null, so neither ck's last line nor the exit flush raise again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return {"return": 1, "error": "stdout was closed by its reader before the output was written"}
        except OSError as exc:
            # A user's path too long for the file system (pathlib's is_file() and exists() raise that, on Python
            # 3.11), or a full disk, wherever it is first met: one line naming it, never a traceback.
            request = args[0] if args and isinstance(args[0], dict) else {}
            error = disk_error(exc, " ".join(str(w) for w in ("ck", request.get("action"), request.get("module_uoa"))
                                             if w))
            if error is None:
                raise
            return {"return": 1, "error": str(error)}
    return wrapper


def access(request: CkDict) -> CkDict:
    """ck.access of the running kernel (the same module object CK's CLI runs), as a plain call."""
    answer: CkDict = kernel.access(request)
    return answer
