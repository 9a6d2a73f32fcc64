"""CK soft hooks for the authors' artifact (P3 or baseline build): thin calls into reprokit."""
import os
import sys

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from reprokit.ck_boundary import artifact_soft_dirs, artifact_soft_limit, artifact_soft_setup, artifact_soft_version  # noqa: E402


def dirs(i):
    return artifact_soft_dirs(i)


def limit(i):
    return artifact_soft_limit(i)


def version_cmd(i):
    return artifact_soft_version(i)


def setup(i):
    return artifact_soft_setup(i)
