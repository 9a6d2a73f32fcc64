"""Preflight of the launchers that start roles through a batch scheduler's job: what srun and oarsh need.

    srun   srun and scontrol on the PATH, inside a Slurm allocation, the hosts nodes of it, and one probe step on
           every node: the engine's interpreter runs there, its cores, the run folder visible there
    oarsh  oarsh on the PATH, inside an OAR job (OAR_JOB_ID, OAR_NODEFILE), the hosts nodes of it, ``oarsh HOST
           true`` on every node, then the same probe through oarsh

Each check a run would fail is one line naming the host (or the job), the problem and the fix. The probe is the
run's own (``srun.probe``, ``oarsh.probe``) against a folder made under the runs' folder and removed afterwards.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reprokit.cluster.group import on_each
from reprokit.cluster.hosts import ClusterConfig
from reprokit.cluster.preflight import checks_table
from reprokit.core.errors import UserError
from reprokit.core.paths import PROGRAM_DIR
from reprokit.run.oarsh import check_reachable, oarsh_path, probe_host
from reprokit.run.plan import RolePlan
from reprokit.run.srun import probe, srun_path


@dataclass
class JobHostCheck:
    host: str
    reach: str = "-"  # "ok" or FAILED: the launcher reaches the host
    python: str = "-"
    cores: str = "-"
    run_folder: str = "-"
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# A launcher's ``preflight`` (cluster, python, probe folder, port, environment) -> each host's checks. Taken as a
# callable, not the Launcher, because the launchers call this module's checks: the arrows run launchers -> jobcheck.
Preflight = Callable[[ClusterConfig, str, Path, int, Mapping[str, str]], dict[str, JobHostCheck]]


def _probe_plan(cluster: ClusterConfig, python: str, port: int) -> RolePlan:
    return RolePlan(run_id=uuid.uuid4().hex, hosts=cluster.names, roles=[], scheduler_host=cluster.names[0],
                    scheduler_port=port, command=[python], worker_threads=0, timeout_s=60)


def check_job(preflight: Preflight, cluster: ClusterConfig, python: str, runs: Path, environ: Mapping[str, str],
              port: int = 0) -> list[JobHostCheck]:
    """Every host of ``cluster`` checked by a launcher's ``preflight`` inside a job (srun, oarsh); ``runs``: where
    run folders go."""
    try:
        runs.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="preflight-", dir=runs))
    except OSError as exc:
        raise UserError(f"cannot make a folder in {runs} ({exc.strerror}); the run folder must be writable "
                        f"there: give another with --tmp_dir=DIR") from None
    try:
        (folder / "p3-run.json").write_text("{}\n")
        checks = preflight(cluster, python, folder, port, environ)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return [checks[h] for h in cluster.names]


def check_oarsh(cluster: ClusterConfig, python: str, folder: Path, port: int) -> dict[str, JobHostCheck]:
    """The oarsh launcher's preflight: ``oarsh HOST true`` on every node, then the run's probe through oarsh."""
    oarsh = oarsh_path()
    checks = {h: JobHostCheck(h) for h in cluster.names}
    first = cluster.names[0]

    def one(host: str) -> None:
        check = checks[host]
        try:
            check_reachable(oarsh, host)
        except UserError as exc:
            check.reach = "FAILED"
            check.problems.append(str(exc))
            return
        check.reach = "ok"
        try:
            found = probe_host(oarsh, host, cluster.host(host).python or python, host == first, port,
                               folder / "p3-run.json")
        except UserError as exc:
            visible = "not visible" in str(exc)
            check.python, check.run_folder = ("ok", "FAILED") if visible else ("FAILED", "-")
            check.problems.append(str(exc))
            return
        check.python, check.cores, check.run_folder = "ok", str(found["cores"]), "ok"

    on_each(cluster.names, one)
    return checks


def check_srun(cluster: ClusterConfig, python: str, folder: Path, port: int,
               environ: Mapping[str, str]) -> dict[str, JobHostCheck]:
    """The srun launcher's preflight: Slurm's commands here, then one probe step on every node (the hosts were
    checked to be nodes of the allocation before: Launcher.check_hosts)."""
    srun = srun_path()
    if not shutil.which("scontrol"):
        raise UserError("scontrol not found on the PATH; the srun launcher needs Slurm's client commands "
                        "(Debian: slurm-client) where ck runs")
    checks = {h: JobHostCheck(h) for h in cluster.names}
    try:
        found = probe(srun, _probe_plan(cluster, python, port), cluster, folder)
    except UserError as exc:
        for check in checks.values():
            check.reach = "FAILED"
        next(iter(checks.values())).problems.append(str(exc))
        return checks
    for host, check in checks.items():
        check.reach, check.python, check.cores, check.run_folder = "ok", "ok", str(found[host]["cores"]), "ok"
    return checks


def table(launcher: str, checks: list[JobHostCheck]) -> str:  # the launcher's name heads its column
    return checks_table(["host", launcher, "python", "cores", "run folder"],
                        [[c.host, c.reach, c.python, c.cores, c.run_folder] for c in checks], [c.problems for c in checks])


def runs_folder(given: str) -> Path:
    """Where the run folders go: --tmp_dir, else program:p3's tmp (CK's default for `ck run`)."""
    return Path(os.path.expanduser(given)) if given else PROGRAM_DIR / "tmp"
