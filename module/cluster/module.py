"""CK module `cluster`: what stock CK lacks for real clusters. Its actions live in reprokit.ck.cluster.

    ck check cluster:NAME [--accept_new_host_keys] [--port=N]
    ck testbed cluster:NAME --hosts=N [--rate=100mbit] [--dir=DIR]
    ck testbed cluster:NAME --shape=100mbit|off
    ck testbed cluster:NAME --down
"""
from reprokit.ck.cluster import check, init, testbed  # noqa: F401

cfg, work, ck = {}, {}, None  # set by CK when it loads a module
