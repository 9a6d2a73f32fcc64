"""CK soft hooks for the stock MXNet engine: thin calls into reprokit."""
import os
import sys

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from reprokit.ck_boundary import mxnet_soft_dirs, mxnet_soft_limit, mxnet_soft_setup, mxnet_soft_version  # noqa: E402


def dirs(i):
    return mxnet_soft_dirs(i)


def limit(i):
    return mxnet_soft_limit(i)


def version_cmd(i):
    return mxnet_soft_version(i)


def setup(i):
    return mxnet_soft_setup(i)
