"""CK pre- and postprocess hooks of program:p3: thin calls into reprokit."""
import os
import sys

_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src")
if _SRC not in sys.path:
    sys.path.insert(0, os.path.normpath(_SRC))

from reprokit.ck.boundary import p3_postprocess, p3_preprocess  # noqa: E402


def ck_preprocess(i):
    return p3_preprocess(i)


def ck_postprocess(i):
    return p3_postprocess(i)
