"""CK soft hooks for IWSLT15 en-vi corpus folders: thin calls into reprokit."""
import os
import sys

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from reprokit.ck_boundary import iwslt_soft_limit, iwslt_soft_setup, iwslt_soft_version, mxnet_soft_dirs  # noqa: E402


def dirs(i):
    return mxnet_soft_dirs(i)


def limit(i):
    return iwslt_soft_limit(i)


def version_cmd(i):
    return iwslt_soft_version(i)


def setup(i):
    return iwslt_soft_setup(i)
