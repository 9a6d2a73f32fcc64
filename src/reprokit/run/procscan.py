"""Find the processes of a run on this host by the REPROKIT_RUN_ID in their environment."""
from __future__ import annotations

import os
import signal
from pathlib import Path


def run_processes(run_id: str, proc: Path = Path("/proc")) -> list[int]:
    """PIDs whose initial environment carries REPROKIT_RUN_ID=run_id (readable ones only)."""
    marker = f"REPROKIT_RUN_ID={run_id}".encode()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def kill_run_processes(run_id: str) -> list[int]:
    """SIGKILL every leftover process of the run; returns the PIDs that were found."""
    pids = run_processes(run_id)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids
