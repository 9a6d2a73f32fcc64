"""A run's folder on a remote host (/tmp/reprokit-runs/RUN_ID): created and checked, filled, removed.

The run and `ck check cluster` take these same steps, so a host that passes the check can hold a run's
folder: the commands the run's remote side uses are on the PATH (``REMOTE_COMMANDS``), it is created (with its
parents), written to, and must have ``MIN_FREE_MB`` free (the engine's files, the workers' timelines and
Sockeye's model folder live there while the run lasts).

The launcher removes the folder after the run, whatever ended it. When the launcher itself is gone (SIGKILL, or
stopped with SIGSTOP and never resumed, or its link cut) a ``Janitor`` on the host removes it: it waits on its
channel's stdin as the roles' watchdogs do, and cleans up when that ends or stays silent.
"""
from __future__ import annotations

import re
import shlex

import paramiko

from reprokit.cluster.ssh import Connection
from reprokit.core.errors import UserError
from reprokit.core.paths import MB
from reprokit.core.values import SHOWN_PATH_CHARACTERS, shown

RUNS_ROOT = "/tmp/reprokit-runs"
MIN_FREE_MB = 100
CHECK_TIMEOUT_S = 30
_RUN_ID = re.compile(r"^[0-9a-f]{8,64}$")
_FREE_KB = "df -Pk -- \"$d\" | awk 'NR == 2 { print $4 }'"  # kilobytes free where folder $d is


def run_dir(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise UserError(f"run id {run_id!r} is not a hex string")
    return f"{RUNS_ROOT}/{run_id}"


# What the remote side runs (the run folder's steps, the roles' wrapper and watchdog, the sweep, the janitor).
REMOTE_COMMANDS = ("mkdir", "rm", "df", "awk", "mktemp", "env", "timeout", "dd", "sleep", "grep", "readlink", "cat",
                   "nproc")


def create(conn: Connection, remote_dir: str, min_free_mb: int = MIN_FREE_MB) -> None:
    """Check that the remote side's commands are there, create ``remote_dir`` and check that it takes a file and has
    ``min_free_mb`` free; raises naming the cause."""
    label, quoted = conn.endpoint.label, shlex.quote(remote_dir)
    result = conn.run(
        f"for c in {' '.join(REMOTE_COMMANDS)}; do [ -x \"$(command -v \"$c\")\" ] || {{ echo \"$c\" >&2; exit 12; }}; "
        f"done; d={quoted}; mkdir -p -- \"$d\" || exit 10; "
        f": > \"$d/.reprokit-write-test\" || exit 11; rm -f -- \"$d/.reprokit-write-test\"; {_FREE_KB}",
        timeout=CHECK_TIMEOUT_S)
    reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
    if result.exit_code == 12:
        raise UserError(f"{label}: the command {reason!r} is not on the PATH of {conn.endpoint.user}'s login shell "
                        f"there, and the run's remote side needs it (and {', '.join(REMOTE_COMMANDS)}); install it "
                        f"(coreutils, grep, gawk) or put its folder on that PATH")
    if result.exit_code == 10:
        raise UserError(f"{label}: cannot create the run folder {remote_dir} ({reason}); the run needs "
                        f"write access to {RUNS_ROOT} for {conn.endpoint.user}")
    if result.exit_code == 11:
        raise UserError(f"{label}: the run folder {remote_dir} is not writable ({reason}); the run needs "
                        f"write access to {RUNS_ROOT} for {conn.endpoint.user}")
    free_kb = result.stdout.strip()
    if result.exit_code != 0 or not free_kb.isdigit():
        raise UserError(f"{label}: cannot check the free space of {remote_dir}: {reason}")
    if int(free_kb) < min_free_mb * 1024:
        raise UserError(f"{label}: only {int(free_kb) / 1024:.1f} MB free in {RUNS_ROOT}, the run folder needs "
                        f"at least {min_free_mb} MB; free some space there")


def free_kb(conn: Connection, folder: str) -> int | None:
    """Kilobytes free in ``folder`` on the host; None when that cannot be told."""
    result = conn.run(f"d={shlex.quote(folder)}; {_FREE_KB}", timeout=CHECK_TIMEOUT_S)
    text = result.stdout.strip()
    return int(text) if result.exit_code == 0 and text.isdigit() else None


def remove_command(remote_dir: str) -> str:
    if not remote_dir.startswith(RUNS_ROOT + "/"):
        raise UserError(f"{remote_dir} is not a run folder")
    return f"rm -rf -- {shlex.quote(remote_dir)}"


def remove(conn: Connection, remote_dir: str) -> None:
    result = conn.run(remove_command(remote_dir), timeout=CHECK_TIMEOUT_S)
    if result.exit_code != 0:
        raise UserError(f"{conn.endpoint.label}: cannot remove {remote_dir}: "
                        f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")


class Janitor:
    """Removes a host's run folder once the launcher is gone: started when the folder is made, it reads a heartbeat
    byte (``beat``) from its channel; when the channel ends or stays silent for ``silence_s``, it waits for the
    roles' watchdogs to stop the roles (``grace_s``) and removes the folder. ``release`` ends it without that, once
    the launcher has removed the folder itself."""

    def __init__(self, conn: Connection, remote_dir: str, silence_s: int, grace_s: int):
        command = remove_command(remote_dir)
        self.channel = conn.start(
            f'while b=$(timeout {int(silence_s)} dd bs=1 count=1 2>/dev/null) && [ "$b" = . ]; do :; done; '
            f'[ "$b" = q ] && exit 0; exec >/dev/null 2>&1 </dev/null; sleep {int(grace_s)}; {command}')

    def beat(self) -> None:
        self._send(b".")

    def release(self) -> None:
        self._send(b"q")
        self.channel.close()

    def _send(self, byte: bytes) -> None:
        try:
            if not self.channel.closed and self.channel.send_ready():
                self.channel.send(byte)
        except (OSError, EOFError, paramiko.SSHException):
            pass  # a lost host: its janitor cleans up on its own


def check_output(conn: Connection, name: str, path: str, need_bytes: int = 0) -> None:
    """The run setting ``name`` writes ``path`` outside the run folder: a file can be created in its folder there
    (tried for real, as root passes any mode check), its name fits that filesystem and ``need_bytes`` are free."""
    folder = path.rsplit("/", 1)[0] or "/"
    base = path.rsplit("/", 1)[-1]
    given, there = shown(path, SHOWN_PATH_CHARACTERS), shown(folder, SHOWN_PATH_CHARACTERS, quoted=False)
    result = conn.run(f"d={shlex.quote(folder)}; p=$(mktemp -- \"$d/.reprokit-write-check-XXXXXX\") && "
                      f"rm -f -- \"$p\" || exit 10; getconf NAME_MAX \"$d\"; {_FREE_KB}", timeout=CHECK_TIMEOUT_S)
    if result.exit_code != 0:
        raise UserError(f"{conn.endpoint.label}: {name}={given}: cannot write into {there} there (missing or "
                        f"read-only); create it on every worker host, or give another path with --env.{name}=PATH")
    name_max, free_kb = (result.stdout.split() + ["", ""])[:2]
    if name_max.isdigit() and len(base.encode()) > int(name_max):
        raise UserError(f"{conn.endpoint.label}: {name}={given}: the name is {len(base.encode())} bytes long, more "
                        f"than the {name_max} its filesystem there allows; shorten the name")
    if free_kb.isdigit() and int(free_kb) * 1024 < need_bytes:
        raise UserError(f"{conn.endpoint.label}: {name}={given}: only {int(free_kb) / 1024:.1f} MB free in {there} "
                        f"there, {need_bytes / MB:.1f} MB needed; free space there, or write elsewhere")
