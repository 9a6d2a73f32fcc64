"""How a run's roles are started: one launcher per way, by name.

    local  every role a process of this machine (launch.run_local): no --target and no Slurm allocation
    ssh    every role in an SSH session to its host (remote.run_remote): the default with --target=MACHINE
    srun   every role a job step of the Slurm allocation the run is in (srun.run_srun): the default inside
           one (SLURM_JOB_ID and SLURM_JOB_NODELIST set), on the allocation's nodes unless --target names some
    oarsh  every role an ``oarsh HOST COMMAND`` of the OAR job the run is in (oarsh.run_oarsh): the default inside
           one (OAR_JOB_ID and OAR_NODEFILE set) when oarsh is on the PATH, on the job's nodes unless --target
           names some

``--env.LAUNCHER=local|ssh|srun|oarsh`` chooses another (``choose_launcher``). A launcher takes the run's specification,
its folder, the console, the stop request and the output watcher, and returns the run's ``Outcome``; each tears
down everything it started, whatever happens.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TextIO
from collections.abc import Callable, Mapping

from reprokit.cluster.hosts import ClusterConfig
from reprokit.errors import UserError
from reprokit.run.launch import Outcome, StopRequest
from reprokit.run.plan import Role
from reprokit.run.spec import RunSpec
from reprokit.values import shown

Watch = Callable[[Role, str], None] | None
Launcher = Callable[[RunSpec, Path, TextIO, "StopRequest | None", Watch], Outcome]
_LAUNCHERS: dict[str, Launcher] = {}
ALLOCATION_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST")


def register_launcher(name: str) -> Callable[[Launcher], Launcher]:
    def register(launcher: Launcher) -> Launcher:
        if name in _LAUNCHERS:
            raise ValueError(f"launcher {name!r} is registered twice")
        _LAUNCHERS[name] = launcher
        return launcher
    return register


def launcher_names() -> list[str]:
    return list(_LAUNCHERS)  # in the order registered: local, ssh, srun, oarsh


def get_launcher(name: str) -> Launcher:
    try:
        return _LAUNCHERS[name]
    except KeyError:
        raise UserError(f"launcher {shown(name)} is not one of {', '.join(launcher_names())}") from None


@register_launcher("local")
def _local(spec: RunSpec, run_dir: Path, console: TextIO, stop: StopRequest | None, watch: Watch) -> Outcome:
    from reprokit.run.launch import run_local

    return run_local(spec.accepted()[2], run_dir, console, stop=stop, watch=watch)


@register_launcher("ssh")
def _ssh(spec: RunSpec, run_dir: Path, console: TextIO, stop: StopRequest | None, watch: Watch) -> Outcome:
    from reprokit.run.remote import run_remote

    return run_remote(spec.accepted()[2], _cluster(spec), run_dir, console, stop=stop, watch=watch)


@register_launcher("srun")
def _srun(spec: RunSpec, run_dir: Path, console: TextIO, stop: StopRequest | None, watch: Watch) -> Outcome:
    from reprokit.run.srun import run_srun

    return run_srun(spec.accepted()[2], _cluster(spec), run_dir, console, stop=stop, watch=watch)


@register_launcher("oarsh")
def _oarsh(spec: RunSpec, run_dir: Path, console: TextIO, stop: StopRequest | None, watch: Watch) -> Outcome:
    from reprokit.run.oarsh import run_oarsh

    return run_oarsh(spec.accepted()[2], _cluster(spec), run_dir, console, stop=stop, watch=watch)


def _cluster(spec: RunSpec) -> ClusterConfig:
    if spec.cluster is None:
        raise UserError(f"the {spec.launcher_name} launcher needs the hosts of a cluster, and the run has none")
    return spec.cluster


def in_slurm_allocation(environ: Mapping[str, str]) -> bool:
    return all(environ.get(name, "").strip() for name in ALLOCATION_VARIABLES)


def in_oar_job(environ: Mapping[str, str]) -> bool:
    from reprokit.run.oarsh import in_oar_job as inside

    return inside(environ)


def choose_launcher(setting: str, has_target: bool, environ: Mapping[str, str],
                    which: Callable[[str], str | None] = shutil.which) -> str:
    """The launcher of a run: ``setting`` (--env.LAUNCHER) when given, else srun inside a Slurm allocation, oarsh
    inside an OAR job when oarsh is on the PATH, ssh with --target, local otherwise. A choice that cannot work here
    is refused in one line."""
    chosen = setting.strip()
    allocation = in_slurm_allocation(environ)
    oar_job = in_oar_job(environ)
    if chosen and chosen not in _LAUNCHERS:
        raise UserError(f"LAUNCHER {shown(chosen)} is not a launcher; give {', '.join(launcher_names())}, or leave "
                        f"it empty (srun inside a Slurm allocation, oarsh inside an OAR job, ssh with --target, "
                        f"else local)")
    if chosen == "srun" and not allocation:
        raise UserError("--env.LAUNCHER=srun starts each role as a job step of a Slurm allocation, but "
                        "SLURM_JOB_ID and SLURM_JOB_NODELIST are not set here; run inside salloc or an sbatch script")
    if chosen == "oarsh" and not oar_job:
        raise UserError("--env.LAUNCHER=oarsh starts each role through oarsh on the nodes of an OAR job, but "
                        "OAR_JOB_ID and OAR_NODEFILE are not set here; run inside oarsub -I or an OAR batch script")
    if chosen == "oarsh" and not which("oarsh"):
        raise UserError("--env.LAUNCHER=oarsh needs OAR's oarsh on the PATH (Debian: oar-node), and it is not; "
                        "start the roles over SSH with --env.LAUNCHER=ssh --target=MACHINE")
    if chosen == "ssh" and not has_target:
        raise UserError("--env.LAUNCHER=ssh needs --target=MACHINE, whose hosts.json says how to reach the hosts")
    if chosen == "local" and has_target:
        raise UserError("--env.LAUNCHER=local runs every role on this machine: drop --target, or drop LAUNCHER")
    if chosen:
        return chosen
    if allocation:
        return "srun"
    if oar_job and which("oarsh"):
        return "oarsh"
    return "ssh" if has_target else "local"


def check_in_job(hosts: list[str], nodefile_hosts: list[str]) -> None:
    """Under oarsh every host must be a node of the OAR job (OAR_NODEFILE): oarsh reaches the job's nodes only."""
    outside = [h for h in hosts if h not in set(nodefile_hosts)]
    if outside:
        raise UserError(f"host(s) {', '.join(outside[:3])}{' ...' if len(outside) > 3 else ''} of the run are not "
                        f"nodes of this OAR job (OAR_NODEFILE lists {', '.join(nodefile_hosts[:6])}"
                        f"{' ...' if len(nodefile_hosts) > 6 else ''}); oarsh reaches the job's nodes only: run on "
                        f"them (leave --target out), or start the roles over SSH with --env.LAUNCHER=ssh")


def check_allocated(hosts: list[str], environ: Mapping[str, str]) -> None:
    """Under srun every host must be a node of the allocation (SLURM_JOB_NODELIST): srun starts steps there only."""
    from reprokit.cluster.hosts import expand_hostlist

    nodelist = environ.get("SLURM_JOB_NODELIST", "")
    allocated = set(expand_hostlist(nodelist, "SLURM_JOB_NODELIST"))
    outside = [h for h in hosts if h not in allocated]
    if outside:
        raise UserError(f"host(s) {', '.join(outside[:3])}{' ...' if len(outside) > 3 else ''} of the run are not "
                        f"nodes of this Slurm allocation ({nodelist}); srun starts job steps on its nodes only: run "
                        f"on them (leave --target out), or start the roles over SSH with --env.LAUNCHER=ssh")
