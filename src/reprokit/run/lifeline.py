"""How a stop reaches every process of a run, whichever of them is signalled or killed.

A run is a chain: ck's Python -> CK's shell script -> the launcher (``reprokit.run.command``) -> the roles
(under a study: ck reproduce -> guard -> ck run -> ...). Whatever stops one link stops the ones below it:

* SIGINT/SIGTERM/SIGHUP to ck's Python: ``forward_stops`` (installed by the preprocess) records the signal in the
  run folder (``STOP_FILE``) and passes it on to the launcher named in ``LAUNCHER_FILE``; the launcher tears the run
  down and writes its result, which ck then reports (no KeyboardInterrupt traceback).
* SIGKILL of ck's Python: the launcher watches it (``CK_PROCESS_ENV``, see ``watch``) and stops when it is gone.
* A launcher that is stopped (SIGSTOP, a tracer) would keep ck waiting forever: ck's Python watches its state
  (``watch_launcher``) and after STOPPED_LIMIT_S kills it, writing why in ``FROZEN_FILE``.
* The launcher handles the three signals itself, stops when its parent (CK's shell) dies (``parent_death_signal``),
  and if it is SIGKILLed its local roles get SIGKILL from the kernel and its SSH connections close, which the
  remote watchdogs see (and each host's janitor, which removes the run folder there: ``rundir.Janitor``).

Either side may come first (ck may be signalled before the launcher has started): ck writes the stop file before
it reads the launcher's file, and the launcher writes its file before it reads the stop file, so one of them
always sees the other.
"""
from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from reprokit.run.procscan import is_running, is_stopped, process_identity
from reprokit.run.progress import STOPPED_LIMIT_S

STOP_FILE = "stop-requested"  # the signal ck's Python got, one line
LAUNCHER_FILE = "launcher.pid"  # the launcher's process identity (PID:START)
FROZEN_FILE = "launcher-frozen"  # why ck's Python killed a stopped launcher, one line
# The launcher ended by itself and said why, but could not write its result (a full disk): LAUNCHER_FILE renamed,
# which needs no free space, so that ck's postprocess adds no line of its own.
UNRECORDED_FILE = "launcher-ended-unrecorded"
CK_PROCESS_ENV = "REPROKIT_CK_PROCESS"  # ck's Python's process identity, for the launcher to watch
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WATCH_INTERVAL_S = 0.2
_PR_SET_PDEATHSIG = 1
# Loaded once here: in a child between fork and exec (preexec_fn) only the call itself is safe, not a dlopen
# that another thread of the parent might have been holding the loader's lock for.
_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)


def parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent (the thread that started it) dies.

    Used before exec in children (roles, the guard's ck) and by the launcher for itself.
    """
    _LIBC.prctl(_PR_SET_PDEATHSIG, int(sig))


def forward_stops(run_dir: Path) -> None:
    """In ck's Python: pass SIGINT/SIGTERM/SIGHUP on to this run's launcher instead of dying with a traceback.

    Only the main thread may set handlers; anywhere else (ck driven from a thread) the defaults stay.
    """
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        try:
            (run_dir / STOP_FILE).write_text(name + "\n")
        except OSError:  # the run folder is gone: nothing left to stop
            return
        launcher = read_line(run_dir / LAUNCHER_FILE)
        if launcher and is_running(launcher):
            try:
                os.kill(int(launcher.split(":")[0]), signum)
            except ProcessLookupError:
                pass

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def launcher_started(run_dir: Path, request_stop: Callable[[str], None]) -> None:
    """In the launcher, before any role starts: say who we are, then honour a stop ck received before that."""
    parent = os.getppid()
    identity = process_identity(os.getpid())
    if identity:
        (run_dir / LAUNCHER_FILE).write_text(identity + "\n")
    name = read_line(run_dir / STOP_FILE)
    if name:
        request_stop(f"stopped by {name}")
    parent_death_signal(signal.SIGTERM)  # the shell that started us died (a closed terminal, a kill): stop too
    if os.getppid() != parent or not process_identity(parent):  # it died before we asked
        request_stop(f"stopped: the process that started it (pid {parent}) is gone")


def watch(identity: str | None, request_stop: Callable[[str], None], what: str) -> None:
    """Request a stop as soon as the process ``identity`` names is gone (a daemon thread polls it)."""
    if not identity:
        return

    def poll() -> None:
        while is_running(identity):
            time.sleep(WATCH_INTERVAL_S)
        request_stop(f"stopped: {what} (pid {identity.split(':')[0]}) is gone")

    threading.Thread(target=poll, name=f"watch {what}", daemon=True).start()


def watch_launcher(run_dir: Path, limit_s: float = STOPPED_LIMIT_S) -> threading.Thread:
    """In ck's Python: kill this run's launcher once it has been stopped for ``limit_s`` in a row (its roles die
    with it), so ck reports the run instead of waiting forever. A daemon thread, done when the launcher is gone."""

    def poll() -> None:
        identity, stopped_since = "", None
        while True:
            time.sleep(WATCH_INTERVAL_S)
            identity = identity or read_line(run_dir / LAUNCHER_FILE)
            if not identity:
                continue  # not started yet
            if not is_running(identity):
                return
            pid = int(identity.split(":")[0])
            if not is_stopped(pid):
                stopped_since = None
                continue
            stopped_since = stopped_since or time.monotonic()
            if time.monotonic() - stopped_since >= limit_s:
                try:
                    (run_dir / FROZEN_FILE).write_text(f"the launcher (pid {pid}) was stopped (SIGSTOP or a tracer) "
                                                       f"for {limit_s:g} s; it was killed with every role\n")
                except OSError:
                    pass
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return

    thread = threading.Thread(target=poll, name="watch the launcher", daemon=True)
    thread.start()
    return thread


def ended_unrecorded(run_dir: Path) -> None:
    """In the launcher, at its end, when its result could not be written after it said why (see UNRECORDED_FILE)."""
    try:
        os.replace(run_dir / LAUNCHER_FILE, run_dir / UNRECORDED_FILE)
    except OSError:  # no launcher file (it could not be written either): the postprocess then says the run wrote none
        pass


def clear(run_dir: Path) -> None:
    """Before a run reuses a folder: no stop or launcher of an earlier run may count for this one."""
    for name in (STOP_FILE, LAUNCHER_FILE, FROZEN_FILE, UNRECORDED_FILE):
        (run_dir / name).unlink(missing_ok=True)


def read_line(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
