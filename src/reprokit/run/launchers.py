"""How a run's roles are started: one ``Launcher`` class per way, registered by name (local, ssh, srun, oarsh;
each class's docstring says when it is the default).

``--env.LAUNCHER=NAME`` chooses one (``choose_launcher``, which refuses a choice that cannot work here). A
launcher's ``run`` takes the run's specification, its folder, the console, the stop request and the output watcher,
and returns the run's ``Outcome``, tearing down everything it started, whatever happens. A new launcher is one new
class here, with its capabilities (``inside_job``, ``job_hosts``, ...) and its methods.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar, TextIO

from reprokit.cluster.hosts import ClusterConfig, expand_hostlist, parse
from reprokit.core.errors import UserError
from reprokit.core.values import shown
from reprokit.run.jobcheck import JobHostCheck, check_oarsh, check_srun
from reprokit.run.launch import Outcome, StopRequest, run_local
from reprokit.run.oarsh import in_oar_job as inside, run_oarsh
from reprokit.run.plan import Role, RolePlan
from reprokit.run.remote import run_remote
from reprokit.run.spec import RunSpec
from reprokit.run.srun import run_srun

Watch = Callable[[Role, str], None] | None
ALLOCATION_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST")
Which = Callable[[str], str | None]


class Launcher:
    """How a run's roles start on their hosts: one subclass per way, registered by name (``register_launcher``).

    Its capabilities are class attributes; its behaviour, methods. ``inside_job``: the launcher works inside a
    batch scheduler's job, whose nodes (``job_hosts``, a hosts.json description read from the job's environment)
    are the run's hosts unless --target names some, addressed by their node names."""
    name: ClassVar[str]
    inside_job: ClassVar[bool] = False
    job_hosts: ClassVar[dict[str, str] | None] = None
    job_where: ClassVar[str] = ""
    reads_job_environment: ClassVar[bool] = False  # the run's settings read the job's environment (its cores)
    # A machine whose hosts.json describes a Slurm job (for --submit) is run with this launcher inside that job.
    runs_in_described_job: ClassVar[bool] = False

    def refusal(self, has_target: bool, environ: Mapping[str, str], which: Which) -> str | None:
        """Why this launcher, asked for by name, cannot work here; None when it can."""
        return None

    def is_default(self, has_target: bool, environ: Mapping[str, str], which: Which) -> bool:
        """Whether a run takes this launcher when none is asked for (asked in registration order, last first)."""
        return False

    def check_hosts(self, hosts: list[str], environ: Mapping[str, str]) -> None:
        """Refuse hosts this launcher cannot start roles on."""

    def run(self, spec: RunSpec, run_dir: Path, console: TextIO, stop: StopRequest | None, watch: Watch) -> Outcome:
        raise NotImplementedError

    def preflight(self, cluster: ClusterConfig, python: str, folder: Path, port: int, environ: Mapping[str, str]) -> dict[str, JobHostCheck]:
        """`ck check cluster` for a launcher inside a job: every host's checks (jobcheck.JobHostCheck)."""
        raise UserError(f"the {self.name} launcher has no job preflight; ck check cluster:NAME checks hosts over SSH")


_LAUNCHERS: dict[str, Launcher] = {}


def register_launcher(cls: type[Launcher]) -> type[Launcher]:
    if cls.name in _LAUNCHERS:
        raise ValueError(f"launcher {cls.name!r} is registered twice")
    _LAUNCHERS[cls.name] = cls()
    return cls


def launcher_names() -> list[str]:
    return list(_LAUNCHERS)  # in the order registered: local, ssh, srun, oarsh


def get_launcher(name: str) -> Launcher:
    try:
        return _LAUNCHERS[name]
    except KeyError:
        raise UserError(f"launcher {shown(name)} is not one of {', '.join(launcher_names())}") from None


def _plan(spec: RunSpec) -> RolePlan:
    return spec.accepted().plan


def _cluster(spec: RunSpec) -> ClusterConfig:
    if spec.cluster is None:
        raise UserError(f"the {spec.launcher_name} launcher needs the hosts of a cluster, and the run has none")
    return spec.cluster


@register_launcher
class LocalLauncher(Launcher):
    """Every role a process of this machine (launch.run_local): no --target and no job."""
    name = "local"

    def refusal(self, has_target: bool, environ: Mapping[str, str], which: Which) -> str | None:
        return ("--env.LAUNCHER=local runs every role on this machine: drop --target, or drop LAUNCHER"
                if has_target else None)

    def is_default(self, has_target: bool, environ: Mapping[str, str], which: Which) -> bool:
        return not has_target

    def run(self, spec: RunSpec, run_dir: Path, console: TextIO, stop: StopRequest | None, watch: Watch) -> Outcome:
        return run_local(_plan(spec), run_dir, console, stop=stop, watch=watch)


@register_launcher
class SshLauncher(Launcher):
    """Every role in an SSH session to its host (remote.run_remote): the default with --target=MACHINE."""
    name = "ssh"

    def refusal(self, has_target: bool, environ: Mapping[str, str], which: Which) -> str | None:
        return (None if has_target else
                "--env.LAUNCHER=ssh needs --target=MACHINE, whose hosts.json says how to reach the hosts")

    def is_default(self, has_target: bool, environ: Mapping[str, str], which: Which) -> bool:
        return has_target

    def run(self, spec: RunSpec, run_dir: Path, console: TextIO, stop: StopRequest | None, watch: Watch) -> Outcome:
        return run_remote(_plan(spec), _cluster(spec), run_dir, console, stop=stop, watch=watch)


@register_launcher
class SrunLauncher(Launcher):
    """Every role a job step of the Slurm allocation the run is in (srun.run_srun): the default inside one
    (SLURM_JOB_ID and SLURM_JOB_NODELIST set), on the allocation's nodes unless --target names some."""
    name = "srun"
    inside_job = True
    job_hosts = {"hostlist": "$SLURM_JOB_NODELIST"}
    job_where = "the Slurm allocation"
    reads_job_environment = True
    runs_in_described_job = True

    def refusal(self, has_target: bool, environ: Mapping[str, str], which: Which) -> str | None:
        if in_slurm_allocation(environ):
            return None
        return ("--env.LAUNCHER=srun starts each role as a job step of a Slurm allocation, but SLURM_JOB_ID and "
                "SLURM_JOB_NODELIST are not set here; run inside salloc or an sbatch script")

    def is_default(self, has_target: bool, environ: Mapping[str, str], which: Which) -> bool:
        return in_slurm_allocation(environ)

    def check_hosts(self, hosts: list[str], environ: Mapping[str, str]) -> None:
        check_allocated(hosts, environ)

    def run(self, spec: RunSpec, run_dir: Path, console: TextIO, stop: StopRequest | None, watch: Watch) -> Outcome:
        return run_srun(_plan(spec), _cluster(spec), run_dir, console, stop=stop, watch=watch)

    def preflight(self, cluster: ClusterConfig, python: str, folder: Path, port: int, environ: Mapping[str, str]) -> dict[str, JobHostCheck]:
        return check_srun(cluster, python, folder, port, environ)


@register_launcher
class OarshLauncher(Launcher):
    """Every role an ``oarsh HOST COMMAND`` of the OAR job the run is in (oarsh.run_oarsh): the default inside one
    (OAR_JOB_ID and OAR_NODEFILE set) when oarsh is on the PATH, on the job's nodes unless --target names some."""
    name = "oarsh"
    inside_job = True
    job_hosts = {"nodefile": "$OAR_NODEFILE"}
    job_where = "the OAR job"

    def refusal(self, has_target: bool, environ: Mapping[str, str], which: Which) -> str | None:
        if not in_oar_job(environ):
            return ("--env.LAUNCHER=oarsh starts each role through oarsh on the nodes of an OAR job, but OAR_JOB_ID "
                    "and OAR_NODEFILE are not set here; run inside oarsub -I or an OAR batch script")
        if not which("oarsh"):
            return ("--env.LAUNCHER=oarsh needs OAR's oarsh on the PATH (Debian: oar-node), and it is not; start the "
                    "roles over SSH with --env.LAUNCHER=ssh --target=MACHINE")
        return None

    def is_default(self, has_target: bool, environ: Mapping[str, str], which: Which) -> bool:
        return in_oar_job(environ) and bool(which("oarsh"))

    def check_hosts(self, hosts: list[str], environ: Mapping[str, str]) -> None:
        check_in_job(hosts, parse(dict(self.job_hosts or {}), source=self.job_where).names)

    def run(self, spec: RunSpec, run_dir: Path, console: TextIO, stop: StopRequest | None, watch: Watch) -> Outcome:
        return run_oarsh(_plan(spec), _cluster(spec), run_dir, console, stop=stop, watch=watch)

    def preflight(self, cluster: ClusterConfig, python: str, folder: Path, port: int, environ: Mapping[str, str]) -> dict[str, JobHostCheck]:
        return check_oarsh(cluster, python, folder, port)


def in_slurm_allocation(environ: Mapping[str, str]) -> bool:
    return all(environ.get(name, "").strip() for name in ALLOCATION_VARIABLES)


def in_oar_job(environ: Mapping[str, str]) -> bool:
    return inside(environ)


# Asked when no launcher is named: a job's launcher first (srun before oarsh), then ssh with --target, else local.
DEFAULT_ORDER = ("srun", "oarsh", "ssh", "local")


def choose_launcher(setting: str, has_target: bool, environ: Mapping[str, str],
                    which: Which = shutil.which) -> Launcher:
    """The launcher of a run: ``setting`` (--env.LAUNCHER) when given, else srun inside a Slurm allocation, oarsh
    inside an OAR job when oarsh is on the PATH, ssh with --target, local otherwise. A choice that cannot work here
    is refused in one line."""
    chosen = setting.strip()
    if chosen:
        if chosen not in _LAUNCHERS:
            raise UserError(f"LAUNCHER {shown(chosen)} is not a launcher; give {', '.join(launcher_names())}, or "
                            f"leave it empty (srun inside a Slurm allocation, oarsh inside an OAR job, ssh with "
                            f"--target, else local)")
        why = _LAUNCHERS[chosen].refusal(has_target, environ, which)
        if why:
            raise UserError(why)
        return _LAUNCHERS[chosen]
    return next(_LAUNCHERS[n] for n in DEFAULT_ORDER if _LAUNCHERS[n].is_default(has_target, environ, which))


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
    nodelist = environ.get("SLURM_JOB_NODELIST", "")
    allocated = set(expand_hostlist(nodelist, "SLURM_JOB_NODELIST"))
    outside = [h for h in hosts if h not in allocated]
    if outside:
        raise UserError(f"host(s) {', '.join(outside[:3])}{' ...' if len(outside) > 3 else ''} of the run are not "
                        f"nodes of this Slurm allocation ({nodelist}); srun starts job steps on its nodes only: run "
                        f"on them (leave --target out), or start the roles over SSH with --env.LAUNCHER=ssh")
