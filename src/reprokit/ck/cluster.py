"""The actions of our CK module `cluster`: preflight checks of a machine's hosts, and the namespace testbed.

    ck check cluster:NAME [--accept_new_host_keys] [--port=N] [--data=...] [--dataset_env=UID] [--launcher=L]
    ck check cluster [--launcher=srun|oarsh] [--tmp_dir=DIR]   inside a Slurm allocation or an OAR job: its nodes
    ck convert cluster --config_file=cluster.yaml [--to=hosts.json]
    ck testbed cluster:NAME --hosts=N [--rate=100mbit] [--no_sftp=I[,J...]] [--scheduler=slurm]
                            [--cpus_per_host=C] [--link_sharing=fifo|fair] [--tcp=cubic] [--dir=DIR]
    ck testbed cluster:NAME --shape=100mbit|off
    ck testbed cluster:NAME --down
"""
from __future__ import annotations

import os
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from reprokit.ck.errors import CkDict, ck_command
from reprokit.ck.registry import env_entries, find_engine, machine_cluster_data
from reprokit.cluster import testbed as namespaces
from reprokit.cluster.hosts import check_description, parse, read_description
from reprokit.cluster.slurm import SlurmJob, job_of, test_only
from reprokit.core.errors import UserError
from reprokit.core.jsonfile import write_json
from reprokit.core.values import whole_number
from reprokit.data.imagenet import RECORDIO_TAGS, choose_recordio
from reprokit.emulation.profile import check_dilation, dilated_rate
from reprokit.engines.stock import engine_files
from reprokit.run.settings import resolve_port

if TYPE_CHECKING:
    from reprokit.run.launchers import Launcher


@ck_command
def check(i: CkDict) -> CkDict:
    """Preflight check of every host of machine:NAME, in parallel; fails if any host fails."""
    from reprokit.cluster.preflight import check_cluster, table  # noqa: PLC0415  paramiko (~140 ms): ck check only
    from reprokit.run.launchers import choose_launcher  # noqa: PLC0415  paramiko (~140 ms): ck check only

    name = i.get("data_uoa", "")
    launcher = choose_launcher(str(i.get("launcher", "")), bool(name), os.environ)
    if launcher.inside_job:
        return _check_job(launcher, name, i)
    if not name:  # the local launcher: no hosts to check
        raise UserError("name the machine: ck check cluster:NAME (or run it inside a Slurm allocation or an OAR job "
                        "to check the nodes the run would use)")
    described = machine_cluster_data(name)  # hosts.json, read once
    job = job_of(described, f"machine:{name}")
    if job is not None:
        return _check_submission(job)
    cluster = parse(described, source=f"machine:{name}")  # an allocation is expanded now
    if cluster.allocation:
        print(f"cluster: hosts from {cluster.allocation}: {', '.join(cluster.names)}", flush=True)
    if i.get("accept_new_host_keys") in ("yes", True):
        cluster = replace(cluster, accept_new_host_keys=True)
    try:
        python = find_engine("p3", "embedded").python
    except UserError:
        if not all(h.python for h in cluster.hosts):
            raise
        python = ""
    port = resolve_port(str(i.get("port", "")), "--port") or 0
    data = choose_recordio(env_entries(RECORDIO_TAGS), str(i.get("data", "")), str(i.get("dataset_env", "")).strip())
    # The converted train set must be at the same path on every host.
    checks = check_cluster(cluster, python, [os.path.dirname(data.rec)] if data else [], scheduler_port=port,
                           files=engine_files())
    print(table(checks), flush=True)
    failed = [c for c in checks if not c.ok]
    if failed:
        raise UserError(f"{len(failed)} of {len(checks)} host(s) failed: " + "; ".join(c.problems[0] for c in failed))
    print(f"cluster: all {len(checks)} host(s) ready", flush=True)
    return {"return": 0, "hosts": [asdict(c) for c in checks]}


def _check_submission(job: SlurmJob) -> CkDict:
    """`ck check cluster:NAME` of a machine naming a Slurm job, outside it: would Slurm take the job (--test-only)?
    Its nodes are checked from inside it: salloc ... ck check cluster."""
    estimate = test_only(job)
    print(f"cluster: Slurm would take the job ({' '.join(job.sbatch_options())}): {estimate}", flush=True)
    print(f"cluster: its nodes are checked inside an allocation: salloc --nodes={job.nodes} ck check cluster",
          flush=True)
    return {"return": 0, "slurm_test_only": estimate}


def _check_job(launcher: Launcher, name: str, i: CkDict) -> CkDict:
    """`ck check cluster` for a launcher inside a job (srun, oarsh): the machine's hosts, else the job's nodes."""
    from reprokit.run.jobcheck import check_job, runs_folder, table  # noqa: PLC0415  paramiko (~140 ms): ck check only

    job, where = dict(launcher.job_hosts or {}), launcher.job_where
    cluster = parse(machine_cluster_data(name) if name else job, source=f"machine:{name}" if name else where)
    launcher.check_hosts(cluster.names, os.environ)
    if cluster.allocation:
        print(f"cluster: hosts from {cluster.allocation}: {', '.join(cluster.names)}", flush=True)
    python = "" if all(h.python for h in cluster.hosts) else find_engine("p3", "embedded").python
    port = resolve_port(str(i.get("port", "")), "--port") or 0
    checks = check_job(launcher.preflight, cluster, python, runs_folder(str(i.get("tmp_dir", ""))), os.environ, port)
    print(table(launcher.name, checks), flush=True)
    failed = [c for c in checks if not c.ok]
    if failed:
        raise UserError(f"{len(failed)} of {len(checks)} host(s) failed ({launcher.name}): "
                        + "; ".join(c.problems[0] for c in failed if c.problems))
    print(f"cluster: all {len(checks)} host(s) ready for the {launcher.name} launcher", flush=True)
    return {"return": 0, "launcher": launcher, "hosts": [asdict(c) for c in checks]}


@ck_command
def convert(i: CkDict) -> CkDict:
    """A cluster description in YAML (or JSON) written as the JSON that `ck add machine --config_file` reads.

    Checked as `ck run` would read it, except that an allocation (nodefile, hostlist) is kept as written: it is
    expanded by each run, so it may name an allocation that does not exist yet.
    """
    source = str(i.get("config_file", "")).strip()
    if not source:
        raise UserError("name the description: ck convert cluster --config_file=cluster.yaml [--to=hosts.json]")
    out = Path(str(i.get("to", "")).strip() or Path(source).with_suffix(".json")).expanduser()
    if out.resolve() == Path(source).expanduser().resolve():
        raise UserError(f"--to={out} would overwrite the description itself; name another file")
    data = read_description(source)
    check_description(data, source)
    try:
        write_json(out, data)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror}; name a writable file with --to=FILE") from None
    print(f"cluster: wrote {out}; register it with:\n"
          f"  ck add machine:NAME --type=cluster --config_file={out} --quiet", flush=True)
    return {"return": 0, "config_file": str(out)}


def _testbed_dir(name: str, given: str) -> Path:
    if given:
        return Path(given).expanduser()
    tools = os.environ.get("CK_TOOLS") or os.path.expanduser("~/CK-TOOLS")
    return Path(tools) / f"testbed-{name}"


@ck_command
def testbed(i: CkDict) -> CkDict:
    """Create, reshape or tear down a cluster of network namespaces on this machine (needs root)."""
    name = i.get("data_uoa", "")
    if not name:
        raise UserError("name the testbed: ck testbed cluster:NAME --hosts=N")
    state_dir = _testbed_dir(name, i.get("dir", ""))
    if i.get("down") in ("yes", True):
        removed = namespaces.destroy(name, state_dir)
        print(f"testbed {name}: removed {len(removed)} namespace(s)" if removed
              else f"testbed {name}: nothing to remove", flush=True)
        return {"return": 0, "removed": removed}
    if i.get("shape"):
        described = namespaces.TestbedState.read(state_dir)
        if described is None:
            raise UserError(f"there is no testbed {name} (no {state_dir / namespaces.STATE_FILE}); create it with "
                            f"--hosts=N")
        rate = None if i["shape"] == "off" else i["shape"]
        dilation = str(i.get("dilation", "")).strip()
        if rate is not None and dilation:  # an emulated run at DILATION=k: every link k times slower
            namespaces.check_rate(rate)
            rate = dilated_rate(rate, check_dilation(dilation, "--dilation"))
        namespaces.shape(name, described.hosts, rate, described.link_sharing)
        given = f" ({i['shape']} / DILATION {dilation})" if rate is not None and dilation else ""
        print(f"testbed {name}: links {'unlimited' if rate is None else 'limited to ' + rate}{given}", flush=True)
        return {"return": 0}
    hosts = whole_number(i.get("hosts", "3"), "--hosts", "--hosts=N", low=1)
    no_sftp = frozenset(whole_number(n, "--no_sftp", "--no_sftp=I[,J...] (host numbers from 1)", low=1)
                        for n in str(i.get("no_sftp", "")).split(",") if n.strip())
    scheduler = str(i.get("scheduler", "")).strip() or None
    namespaces.check_scheduler(scheduler)
    given_cpus = str(i.get("cpus_per_host", "")).strip()
    cpus_per_host = whole_number(given_cpus, "--cpus_per_host", "--cpus_per_host=C", low=1) if given_cpus else None
    link_sharing = str(i.get("link_sharing", "")).strip() or namespaces.DEFAULT_LINK_SHARING
    namespaces.check_link_sharing(link_sharing)
    tcp = str(i.get("tcp", "")).strip() or None
    hosts_json = namespaces.create(name, hosts, state_dir, rate=i.get("rate") or None, no_sftp=no_sftp,
                                   scheduler=scheduler, cpus_per_host=cpus_per_host, link_sharing=link_sharing,
                                   tcp=tcp)
    state = namespaces.TestbedState.read(hosts_json.parent)
    cpus = state.cpus if state is not None else []
    pinned = f", pinned to CPUs {' | '.join(','.join(map(str, c)) for c in cpus)}" if cpus else ""
    fair = ", each host's egress shared evenly among the other hosts when shaped" if link_sharing == "fair" else ""
    congestion = f", TCP {tcp}" if tcp else ""
    print(f"testbed {name}: {hosts} host(s) ready{pinned}{fair}{congestion}; register it with:\n"
          f"  ck add machine:{name} --type=cluster --config_file={hosts_json} --quiet", flush=True)
    slurm = state.scheduler if state is not None else None
    if slurm is not None:
        client = " ".join(slurm.client)
        print(f"testbed {name}: Slurm nodes {', '.join(slurm.nodes)} idle after {slurm.started_in_s} s; "
              f"its commands (sinfo, srun, sbatch, squeue, scancel, salloc) run as:\n  {client} sinfo", flush=True)
        job_json = hosts_json.parent / "slurm-job.json"  # a machine whose runs are jobs of this Slurm (--submit)
        write_json(job_json, {"slurm": {"nodes": hosts, "time": "00:30:00"}})
        print(f"testbed {name}: a machine whose runs are Slurm jobs here:\n"
              f"  ck add machine:{name}-slurm --type=cluster --config_file={job_json} --quiet\n"
              f"  {client} ck run program:p3 --target={name}-slurm --submit --cmd_key=resnet", flush=True)
    return {"return": 0, "hosts_json": str(hosts_json), "scheduler": slurm}
