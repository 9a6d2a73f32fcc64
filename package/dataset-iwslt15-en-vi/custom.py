"""CK package hooks of an IWSLT15 en-vi corpus: thin calls into reprokit."""
import os
import sys

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from reprokit.ck.boundary import imagenet_package_setup  # noqa: E402  (framework interpreter + reprokit's path)


def setup(i):
    return imagenet_package_setup(i)
