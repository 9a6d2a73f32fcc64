"""CK soft hooks for Sockeye (MXNet-based 1.x) installed for the MXNet engine: thin calls into reprokit."""
import os
import sys

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from reprokit.ck_boundary import mxnet_soft_dirs, sockeye_soft_limit, sockeye_soft_setup, sockeye_soft_version  # noqa: E402


def dirs(i):
    return mxnet_soft_dirs(i)


def limit(i):
    return sockeye_soft_limit(i)


def version_cmd(i):
    return sockeye_soft_version(i)


def setup(i):
    return sockeye_soft_setup(i)
