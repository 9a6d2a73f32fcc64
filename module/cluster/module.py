"""CK module `cluster`: what stock CK lacks for real clusters (code: reprokit.ck.cluster).

Each action is one call into reprokit.ck.cluster; its docstring is what `ck ACTION cluster --help` prints.
"""
from reprokit.ck import cluster

cfg, work, ck = {}, {}, None  # set by CK when it loads a module


##############################################################################
# Called by CK when it loads the module.

def init(i):
    return {"return": 0}


##############################################################################
# Preflight check of every host of machine:NAME, in parallel; fails naming each host that fails.

def check(i):
    """
    ck check cluster:NAME [--accept_new_host_keys] [--port=N] [--data=auto|recordio|synthetic] [--dataset_env=UID]
    """
    return cluster.check(i)


##############################################################################
# Create, reshape or tear down a cluster of network namespaces with an sshd each, on this machine (root);
# --scheduler=slurm also runs a real Slurm (munged, slurmctld, a slurmd per host) over them.

def testbed(i):
    """
    ck testbed cluster:NAME --hosts=N [--rate=100mbit] [--no_sftp=I[,J...]] [--scheduler=slurm] [--dir=DIR]
    ck testbed cluster:NAME --shape=100mbit|off
    ck testbed cluster:NAME --down
    """
    return cluster.testbed(i)


##############################################################################
# A cluster description in YAML (or JSON) written as the JSON that `ck add machine --config_file` reads.

def convert(i):
    """
    ck convert cluster --config_file=cluster.yaml [--to=hosts.json]
    """
    return cluster.convert(i)
