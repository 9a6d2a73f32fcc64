"""CK package hooks for the authors' artifact: thin calls into reprokit."""
import os
import sys

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from reprokit.ck.boundary import artifact_package_setup  # noqa: E402


def setup(i):
    return artifact_package_setup(i)
