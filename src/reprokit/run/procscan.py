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


def process_identity(pid: int) -> str | None:
    """``PID:START`` (start time in clock ticks since boot): names one process, even after its PID is reused."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):  # exited, not yet reaped: gone for our purposes
        return None
    return f"{pid}:{fields[19]}"


def is_stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP, SIGTSTP, or a tracer): state T or t in /proc."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def is_running(identity: str) -> bool:
    """Whether the process ``process_identity`` named is still running."""
    pid = identity.split(":", 1)[0]
    return pid.isdigit() and process_identity(int(pid)) == identity


def flock_holder(path: Path, locks: Path = Path("/proc/locks")) -> int | None:
    """The pid holding a flock on ``path`` (from /proc/locks: device as MAJ:MIN in hex, then the inode)."""
    try:
        st = os.stat(path)
        lines = locks.read_text().splitlines()
    except OSError:
        return None
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == where and fields[4].isdigit():
            return int(fields[4])
    return None
