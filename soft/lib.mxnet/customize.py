"""CK soft hooks for the stock MXNet engine: thin calls into reprokit."""
import os
import sys

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from reprokit.ck.boundary import soft_hooks  # noqa: E402

dirs, limit, version_cmd, setup = soft_hooks("lib.mxnet")
