"""Roles started through OAR's ``oarsh`` inside an OAR job, supervised by ``launch.supervise`` like local ones.

Inside an OAR job (``oarsub -I``, a batch script: OAR_JOB_ID and OAR_NODEFILE set) the nodes accept only OAR's own
connections: ``oarsh HOST COMMAND`` is OAR's setuid wrapper that runs ``ssh -p 6667`` as the user ``oar`` with the
job's key (OAR_JOB_KEY_FILE, or the key OAR pushed for the job), and on the node ``oarsh_shell`` puts the session
into the job's cpuset and becomes the job's user. Our key, an sshd on port 22 and a ProxyCommand are not used: the
site's oarsh and its configuration (/etc/oar/oar.conf) are. So each role is a local ``oarsh HOST COMMAND``
subprocess, as the srun launcher's roles are ``srun`` subprocesses, and COMMAND is the SSH launcher's role wrapper
(``remote.role_command``), which keeps its guarantees (``jobprep.JobRoleProcess``, shared with srun): teardown by
EOF on its stdin, a lost host seen by the heartbeat's answers (ssh alone would wait for TCP, and oarsh filters out
the -o options that would set ServerAliveInterval), a stopped role named by its watchdog, and the roles' end when
the launcher is killed (a setuid oarsh does not keep the parent-death signal, so the EOF is what ends the roles
there). Afterwards a run id sweep on every host (``oarsh HOST sh -c ...``), and one here.

Files: as under srun, the roles run in the run folder itself, which must be on a file system the job's nodes share
(an OAR site's home directories usually are); a probe on every host (``oarsh HOST PYTHON -c PROBE``) counts its
cores, finds the scheduler a free port and checks that the run folder is visible there. The workers' timelines are
written into the run folder, so there is nothing to fetch.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from reprokit.cluster.group import on_each
from reprokit.cluster.hosts import ClusterConfig
from reprokit.core.errors import UserError
from reprokit.run.jobprep import FREE_PORT_CODE, launch_in_job
from reprokit.run.launch import Outcome, StopRequest
from reprokit.run.lifeline import parent_death_signal
from reprokit.run.plan import Role, RolePlan
from reprokit.run.remote import sweep_command

JOB_VARIABLES = ("OAR_JOB_ID", "OAR_NODEFILE")
COMMAND_TIMEOUT_S = 60  # the probe, the sweep and the preflight's commands
SPEC_NAME = "p3-run.json"
# Run by the engine's interpreter on every host: one JSON line.
PROBE = FREE_PORT_CODE + """
import json, os, sys
port = free_port() if sys.argv[1] == "scheduler" and sys.argv[2] == "0" else 0
print(json.dumps({"cores": len(os.sched_getaffinity(0)), "port": port, "run_dir": os.path.isfile(sys.argv[3])}),
      flush=True)
"""


def in_oar_job(environ: Mapping[str, str]) -> bool:
    return all(environ.get(name, "").strip() for name in JOB_VARIABLES)


def oarsh_path() -> str:
    found = shutil.which("oarsh")
    if not found:
        raise UserError("oarsh not found on the PATH; the oarsh launcher runs inside an OAR job on a node with OAR's "
                        "oarsh (Debian: oar-node), or start the roles over SSH with --env.LAUNCHER=ssh")
    return found


def command_environment() -> dict[str, str]:
    """This process's environment (oarsh reads OAR_JOB_ID, OAR_JOB_KEY_FILE from it) without what would point an
    interpreter at the framework's packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def oarsh_command(oarsh: str, host: str, argv: list[str], timeout: float = COMMAND_TIMEOUT_S) -> \
        subprocess.CompletedProcess[str]:
    """``argv`` on ``host`` through oarsh (which joins its arguments into one remote command: each is quoted here)."""
    try:
        return subprocess.run([oarsh, host, " ".join(shlex.quote(a) for a in argv)], capture_output=True, text=True,
                              timeout=timeout, env=command_environment(), stdin=subprocess.DEVNULL,
                              start_new_session=True, preexec_fn=parent_death_signal)
    except subprocess.TimeoutExpired:
        raise UserError(f"oarsh {host}: no answer within {timeout:g} s; is the OAR job still running (oarstat -j "
                        f"$OAR_JOB_ID)?") from None


def last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return ((proc.stderr or "").strip() or (proc.stdout or "").strip() or f"exit {proc.returncode}").splitlines()[-1]


def check_reachable(oarsh: str, host: str) -> None:
    """``oarsh HOST true`` succeeds, else one line naming the host, the cause and the fix."""
    proc = oarsh_command(oarsh, host, ["true"])
    if proc.returncode != 0:
        raise UserError(f"oarsh {host} true failed ({last_line(proc)}); is {host} a node of this OAR job "
                        f"(OAR_NODEFILE), and the job's key set (OAR_JOB_KEY_FILE, for a job submitted with -k)?")


def probe_host(oarsh: str, host: str, python: str, scheduler: bool, port: int, marker: Path) -> dict[str, Any]:
    """One host's probe: {"cores": 2, "port": 40123, "run_dir": True}; one line naming the host when it fails."""
    proc = oarsh_command(oarsh, host, [python, "-I", "-c", PROBE, "scheduler" if scheduler else "-", str(port),
                                       str(marker)])
    for line in reversed(proc.stdout.splitlines()):
        try:
            data = json.loads(line)
            if isinstance(data, dict) and "cores" in data:
                break
        except ValueError:
            continue
    else:
        raise UserError(f"oarsh {host}: the probe failed ({last_line(proc)}); is the engine's interpreter {python} "
                        f"at that path on {host}, and {host} a node of this OAR job?")
    if not data["run_dir"]:
        raise UserError(f"oarsh {host}: the run folder {marker.parent} is not visible on {host}; the oarsh launcher "
                        f"runs every role in it, so it must be on a file system every node of the job shares")
    return data


def probe(oarsh: str, plan: RolePlan, cluster: ClusterConfig, run_dir: Path) -> dict[str, dict[str, Any]]:
    found = on_each(plan.hosts, lambda h: probe_host(oarsh, h, cluster.host(h).python or plan.command[0],
                                                     h == plan.scheduler_host, plan.scheduler_port,
                                                     run_dir / SPEC_NAME))
    failure = found.first_failure()
    if failure is not None:
        raise UserError(str(failure[1]))
    return dict(found.succeeded)


def run_oarsh(plan: RolePlan, cluster: ClusterConfig, run_dir: Path, console: TextIO,
              stop: StopRequest | None = None, watch: Callable[[Role, str], None] | None = None) -> Outcome:
    """Launch the plan's roles through oarsh on the OAR job's nodes, supervise them, and leave nothing behind."""
    return launch_in_job(plan, cluster, run_dir, console, stop, watch, through="oarsh", session="oarsh session",
                         find_tool=oarsh_path, probe=lambda oarsh: probe(oarsh, plan, cluster, run_dir),
                         command_line=lambda oarsh, role, wrapper: [oarsh, role.host, wrapper],
                         environment=lambda role: command_environment(), sweep_hosts=lambda oarsh: _sweep(oarsh, plan))


def _sweep(oarsh: str, plan: RolePlan) -> list[str]:
    """On every host, kill what still carries the run's id (``remote.sweep_command``)."""
    warnings = []
    swept = on_each(plan.hosts, lambda h: oarsh_command(oarsh, h, ["/bin/sh", "-c", sweep_command(plan.run_id)]))
    for host, error in swept.failed.items():
        warnings.append(f"{host}: could not check for leftover processes: {error}")
    for host, proc in swept.succeeded.items():
        if proc.returncode != 0:
            warnings.append(f"{host}: could not check for leftover processes: {last_line(proc)}")
        elif proc.stdout.split():
            warnings.append(f"{host}: killed leftover process(es) {' '.join(proc.stdout.split())}")
    return warnings
