"""CK module `cluster`: what stock CK lacks for real clusters. Thin calls into reprokit.

    ck check cluster:NAME [--accept_new_host_keys] [--port=N]
    ck testbed cluster:NAME --hosts=N [--rate=100mbit] [--dir=DIR]
    ck testbed cluster:NAME --shape=100mbit|off
    ck testbed cluster:NAME --down
"""
import os
import sys

cfg = {}  # set by CK: this module's meta
work = {}  # set by CK
ck = None  # set by CK: the kernel

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from reprokit.ck import boundary as ck_boundary  # noqa: E402


def init(i):
    return {"return": 0}


def check(i):
    """Preflight check of every host of machine:NAME, in parallel; fails if any host fails."""
    return ck_boundary.cluster_check(i, ck)


def testbed(i):
    """Create, reshape or tear down a cluster of network namespaces on this machine (needs root)."""
    return ck_boundary.cluster_testbed(i)
