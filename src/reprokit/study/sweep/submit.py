"""`ck reproduce study:NAME --target=MACHINE --submit`: the whole sweep as one Slurm batch job.

One allocation for the whole study, not one job per run: the sweep interleaves its configurations and
repetitions so that p3 and its baselines are compared on the same nodes, under the same conditions; one job per
run would put each run on whatever nodes the queue gives, and wait in the queue before each. Inside the job the
same ``ck reproduce`` command runs (without ``--submit``), and each of its runs starts its roles as job steps
(the srun launcher). The options are checked here first, on stand-in hosts, so a typo fails before the queue.
The job's script and output are kept in the results store under ``jobs/``.
"""
from __future__ import annotations

import io
import os
import signal
import sys
import time
from collections.abc import Collection, Mapping
from typing import Any, TextIO

from reprokit.cluster.slurm import argv_without, follow, job_to_submit, submit_command
from reprokit.core.errors import UserError
from reprokit.run.launch import StopRequest
from reprokit.run.launchers import in_slurm_allocation
from reprokit.study.paper.claims import Study
from reprokit.study.paper.target import make_target
from reprokit.study.store.records import Store
from reprokit.study.sweep import runner as study_runner
from reprokit.study.sweep.driver import MachineConfig
from reprokit.study.sweep.options import EngineCheck, sweep_request


def submit_sweep(options: Mapping[str, Any], study: Study, store: Store, program_models: set[str],
                 machine_config: MachineConfig, console: TextIO = sys.stdout,
                 artifact_builds: Collection[str] = (), engine_check: EngineCheck | None = None) -> str:
    """Submit the sweep as one batch job and follow it; its job id. A job that did not complete is a UserError."""
    name = str(options.get("target", "") or "")
    description = machine_config(name) if name else None
    job = job_to_submit(description, f"machine:{name}", in_slurm_allocation(os.environ), "the sweep")
    assert isinstance(description, dict)
    # The job's nodes are not known before it runs: stand-ins, with the keys the machine gives every node.
    stand_in = {**{k: v for k, v in description.items() if k not in ("slurm", "hosts", "nodefile", "hostlist")},
                "hostlist": f"node[1-{job.nodes}]" if job.nodes > 1 else "node1"}
    target = make_target(name, stand_in, options.get("link_capacity") or None)
    sweep_request(options, study, target, program_models, console=io.StringIO(), artifact_builds=artifact_builds,
                  engine_check=engine_check)
    folder = store.root / "jobs" / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    command = [study_runner.ck_executable(), *argv_without(sys.argv[1:], "--submit")]
    job_id, script, output = submit_command(job, command, folder)
    print(f"study: submitted Slurm job {job_id} ({' '.join(job.sbatch_options())}): {script}", file=console,
          flush=True)
    stop = StopRequest()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    stop.install()
    try:
        end = follow(job_id, job, output, console, lambda: stop.reason, label="study")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not end.completed:
        raise UserError(f"{end.describe()}; the runs it stored are kept: its output ({output}) names the sweep to "
                        f"continue with --resume=SWEEP")
    return job_id
