"""The preparation the srun and oarsh launchers share: their roles run in the run folder itself, on a file system
every node of the job shares, so the run's files are put there once, and one probe per node (each launcher's own)
says its cores and the scheduler's free port."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from collections.abc import Callable

from reprokit.run.plan import RolePlan
from reprokit.run.settings import check_roles_fit


def prepare_in_job(plan: RolePlan, run_dir: Path, probe: Callable[[], dict[str, dict]]) -> None:
    """Stage the plan's files into ``run_dir``, probe every node, check the roles fit its cores, and fill in the
    scheduler's port and each host's threads from what the probe found. UserError when any step fails."""
    for local in plan.files:
        if Path(local).resolve() != (run_dir / Path(local).name).resolve():
            shutil.copy2(local, run_dir / Path(local).name)
    found = probe()
    check_roles_fit(Counter(r.host for r in plan.roles if r.kind != "scheduler"),
                    {h: int(found[h]["cores"]) for h in plan.hosts})
    if plan.scheduler_port == 0:
        plan.scheduler_port = int(found[plan.scheduler_host]["port"])
    if plan.worker_threads == 0:
        for host in plan.hosts:
            workers_here = sum(1 for r in plan.workers if r.host == host)
            plan.host_threads[host] = max(1, int(found[host]["cores"]) // max(1, workers_here))
