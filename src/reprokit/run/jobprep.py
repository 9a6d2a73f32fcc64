"""What the srun and oarsh launchers share: their roles run in the run folder itself, on a file system every node of
the job shares, so the run's files are put there once, and one probe per node (each launcher's own) says its cores
and the scheduler's free port; then the roles are supervised, and every host is swept of what the run left."""
from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from reprokit.cluster.hosts import ClusterConfig
from reprokit.cluster.ports import PORT_CHOICE_CODE
from reprokit.core.errors import UserError
from reprokit.run.launch import Outcome, OutputSink, RoleProcess, StopRequest, supervise
from reprokit.run.plan import Role, RolePlan
from reprokit.run.procscan import kill_run_processes
from reprokit.run.settings import check_roles_fit
from reprokit.vocabulary import RoleKind, RunStatus

# Part of each launcher's probe (run by the engine's interpreter on the scheduler's host): a free port for the
# scheduler, below the ephemeral range (see cluster/portchoice). The probe cannot keep it bound until the scheduler
# binds it.
FREE_PORT_CODE = PORT_CHOICE_CODE + """
def free_port():
    with bind_free_port("") as s:
        return s.getsockname()[1]
"""

def prepare_in_job(plan: RolePlan, run_dir: Path, probe: Callable[[], dict[str, dict[str, Any]]]) -> None:
    """Stage the plan's files into ``run_dir``, probe every node, check the roles fit its cores, and fill in the
    scheduler's port and each host's threads from what the probe found. UserError when any step fails."""
    for local in plan.files:
        if Path(local).resolve() != (run_dir / Path(local).name).resolve():
            shutil.copy2(local, run_dir / Path(local).name)
    found = probe()
    check_roles_fit(Counter(r.host for r in plan.roles if r.kind is not RoleKind.SCHEDULER),
                    {h: int(found[h]["cores"]) for h in plan.hosts})
    if plan.scheduler_port == 0:
        plan.scheduler_port = int(found[plan.scheduler_host]["port"])
    if plan.worker_threads == 0:
        for host in plan.hosts:
            workers_here = sum(1 for r in plan.workers if r.host == host)
            plan.host_threads[host] = max(1, int(found[host]["cores"]) // max(1, workers_here))


def role_argv(plan: RolePlan, cluster: ClusterConfig, role: Role) -> list[str]:
    """The role's command, with its host's own interpreter when hosts.json names one."""
    argv = plan.argv(role)
    argv[0] = cluster.host(role.host).python or argv[0]
    return argv


def launch_in_job(plan: RolePlan, run_dir: Path, console: TextIO, stop: StopRequest | None,
                  watch: Callable[[Role, str], None] | None, *, find_tool: Callable[[], str],
                  probe: Callable[[str], dict[str, dict[str, Any]]],
                  start_role: Callable[[str, Role, OutputSink], RoleProcess],
                  sweep_hosts: Callable[[str], list[str]]) -> Outcome:
    """Prepare (``find_tool`` gives the launcher's program, ``probe`` runs it on every node), start each role with
    ``start_role``, supervise them, then ``sweep_hosts`` (warnings) and this machine's leftovers of the run."""
    began_at = time.time()
    sink = OutputSink(console, run_dir / "logs", plan.finish_pattern, watch)
    try:
        tool = find_tool()
        prepare_in_job(plan, run_dir, lambda: probe(tool))
    except UserError as exc:
        return Outcome(RunStatus.FAILED, str(exc), began_at=began_at)
    try:
        outcome = supervise(plan, lambda role: start_role(tool, role, sink), stop, output=sink)
    finally:
        warnings = sweep_hosts(tool)
        leftovers = kill_run_processes(plan.run_id)  # e.g. a role's launcher that outlived its teardown
        if leftovers:
            warnings.append(f"killed {len(leftovers)} leftover process(es) of the run here: {leftovers}")
    outcome.began_at = began_at
    outcome.scheduler_port = plan.scheduler_port
    outcome.warnings.extend(warnings)
    outcome.torn_down_at = time.time()
    return outcome
