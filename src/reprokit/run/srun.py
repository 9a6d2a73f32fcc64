"""Roles as Slurm job steps, supervised by ``launch.supervise`` like local ones.

Inside a Slurm allocation (salloc, an sbatch script) each role is started here as

    srun --nodes=1 --ntasks=1 --nodelist=HOST --overlap --export=ALL --kill-on-bad-exit=1 --chdir=RUN_DIR \\
        /bin/sh -c WRAPPER

a local process whose environment carries the role's DMLC_* variables (``--export=ALL`` hands srun's whole
environment to the step). ``--overlap`` lets the steps of one host share the CPUs the allocation has there: the
scheduler, a server and a worker run at once. WRAPPER is the SSH launcher's role wrapper (``remote.role_command``)
and each srun a ``jobprep.JobRoleProcess``, as the oarsh launcher's roles are: srun hands its stdin to the step's
task (the heartbeat; EOF on teardown) and the task's stdout and stderr back, so the wrapper's watchdog names a
stopped role within a heartbeat and stops its role when the launcher is gone or silent; when srun itself is
killed, Slurm kills the step. The wrapper exits with the shell's 128+N for a role killed by signal N, and srun with
its task's code. Afterwards one step per host kills whatever still carries the run's id (``remote.sweep_command``),
as the SSH launcher does.

Before the roles, one probe step on every host (``PROBE``) says how many cores the host has (for the OMP threads
of its workers and the per-core limit), finds the scheduler a free port on its host, and checks that the run
folder is there: the roles run in it, so this launcher needs the run folder and the engine at the same paths on
every node. On the testbed all namespaces share this machine's file system; a real site needs the run folder on
a shared file system (or its files staged with an sbcast step, not done here).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from reprokit.cluster.hosts import ClusterConfig
from reprokit.core.errors import UserError
from reprokit.run.jobprep import FREE_PORT_CODE, launch_in_job
from reprokit.run.launch import Outcome, StopRequest, local_environment
from reprokit.run.lifeline import parent_death_signal
from reprokit.run.plan import Role, RolePlan
from reprokit.run.remote import sweep_command

STEP_TIMEOUT_S = 60  # the probe and the sweep steps
SPEC_NAME = "p3-run.json"
# Run by the engine's interpreter on every host: one JSON line.
PROBE = FREE_PORT_CODE + """
import json, os, sys
node = os.environ.get("SLURMD_NODENAME", socket.gethostname())
port = free_port() if node == sys.argv[1] and sys.argv[2] == "0" else 0
print(json.dumps({"node": node, "cores": len(os.sched_getaffinity(0)), "port": port,
                  "run_dir": os.path.isfile(sys.argv[3])}), flush=True)
"""


def srun_path() -> str:
    found = shutil.which("srun")
    if not found:
        raise UserError("srun not found here; the srun launcher runs inside a Slurm allocation, with Slurm's "
                        "client commands on the PATH")
    return found


def role_argv(srun: str, host: str, run_dir: Path, argv: list[str]) -> list[str]:
    """The srun command line that runs ``argv`` as one job step on ``host``, in ``run_dir``."""
    return [srun, "--nodes=1", "--ntasks=1", f"--nodelist={host}", "--overlap", "--export=ALL",
            "--kill-on-bad-exit=1", f"--chdir={run_dir}", *argv]


def all_hosts_argv(srun: str, hosts: list[str], argv: list[str]) -> list[str]:
    """One task on each of ``hosts``, as one step."""
    return [srun, f"--nodes={len(hosts)}", f"--ntasks={len(hosts)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(hosts)}", "--overlap", "--export=ALL", "--chdir=/", *argv]


def step_environment() -> dict[str, str]:
    """This process's environment without what would point an interpreter at the framework's packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _step(argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, env=step_environment(),
                              stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=parent_death_signal)
    except subprocess.TimeoutExpired:
        raise UserError(f"srun: {what} did not finish within {STEP_TIMEOUT_S} s; is the allocation still running? "
                        f"(squeue -j $SLURM_JOB_ID)") from None
    return proc


def probe(srun: str, plan: RolePlan, cluster: ClusterConfig, run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each host's probe line: {"h1": {"cores": 2, "port": 40123, "run_dir": True}, ...}."""
    pythons = {cluster.host(h).python or plan.command[0] for h in plan.hosts}
    if len(pythons) > 1:
        raise UserError("the srun launcher runs one probe step on every host, with one interpreter: give every host "
                        "the same 'python' in hosts.json (or none)")
    python = pythons.pop()
    argv = all_hosts_argv(srun, plan.hosts, [python, "-I", "-c", PROBE, plan.scheduler_host, str(plan.scheduler_port),
                                             str(run_dir / SPEC_NAME)])
    proc = _step(argv, "the probe step on every host")
    found = {}
    for line in proc.stdout.splitlines():
        try:
            data = json.loads(line)
            found[str(data["node"])] = data
        except (ValueError, KeyError, TypeError):
            continue
    missing = [h for h in plan.hosts if h not in found]
    if proc.returncode != 0 or missing:
        detail = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
        raise UserError(f"srun: the probe step on {', '.join(missing) or 'every host'} failed ({detail}); is the "
                        f"engine's interpreter {python} at the same path on every node, and the allocation running?")
    unseen = [h for h in plan.hosts if not found[h]["run_dir"]]
    if unseen:
        raise UserError(f"srun: the run folder {run_dir} is not visible on {', '.join(unseen)}; the srun launcher "
                        f"runs every role in it, so it must be on a file system every node shares")
    return found


def run_srun(plan: RolePlan, cluster: ClusterConfig, run_dir: Path, console: TextIO,
             stop: StopRequest | None = None, watch: Callable[[Role, str], None] | None = None) -> Outcome:
    """Launch the plan's roles as job steps of this Slurm allocation, supervise them, and leave nothing behind."""
    return launch_in_job(plan, cluster, run_dir, console, stop, watch, through="srun", session="job step",
                         find_tool=srun_path, probe=lambda srun: probe(srun, plan, cluster, run_dir),
                         command_line=lambda srun, role, wrapper: role_argv(srun, role.host, run_dir,
                                                                            ["/bin/sh", "-c", wrapper]),
                         environment=lambda role: local_environment(plan, role),
                         sweep_hosts=lambda srun: _sweep(srun, plan))


def _sweep(srun: str, plan: RolePlan) -> list[str]:
    """One step on every host kills what still carries the run's id there."""
    warnings = []
    label = 'echo "$SLURMD_NODENAME:" $(' + sweep_command(plan.run_id) + ")"  # one line per host
    try:
        proc = _step(all_hosts_argv(srun, plan.hosts, ["/bin/sh", "-c", label]), "the sweep step")
    except UserError as exc:
        warnings.append(f"could not check the hosts for leftover processes: {exc}")
    else:
        if proc.returncode != 0:
            detail = (proc.stderr.strip() or f"exit {proc.returncode}").splitlines()[-1]
            warnings.append(f"could not check every host for leftover processes: {detail}")
        for line in proc.stdout.splitlines():
            host, _, killed = line.partition(":")
            if killed.split():
                warnings.append(f"{host}: killed leftover process(es) {' '.join(killed.split())}")
    return warnings
