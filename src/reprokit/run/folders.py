"""Run folders: each run on this machine gets its own, so runs started together never share a file.

CK runs every ``ck run program:p3`` in the same ``program/p3/tmp`` unless ``--tmp_dir`` names another folder. Under
that shared folder each run gets ``runs/<time>-<id>/``, ``latest`` points at the newest, and only the newest
``KEEP_RUNS`` finished runs are kept (a folder whose launcher still runs is never removed).

Only runs that ran count: a run refused before launch (bad settings) keeps its folder, which says why, but never
takes a finished run's place. Refused folders are pruned among themselves, to the newest ``KEEP_RUNS`` too.
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from reprokit.core.paths import MB, check_room, disk_errors
from reprokit.run.lifeline import LAUNCHER_FILE, STOP_FILE, UNRECORDED_FILE
from reprokit.run.procscan import is_running

RUNS = "runs"
LATEST = "latest"
KEEP_RUNS = 20
RUN_FOLDER_NEED_MB = 20  # the specification, the roles' logs, the result (more when the run writes outputs here)


def new_run_folder(shared: Path) -> Path:
    """A new folder under ``shared/runs``; ``shared/latest`` points at it; old finished runs are removed."""
    runs = shared / RUNS
    check_room(runs, RUN_FOLDER_NEED_MB * MB, "the run folder")
    with disk_errors("the run folder", runs):
        runs.mkdir(parents=True, exist_ok=True)
        while True:
            now = time.time()  # microseconds in the name: runs sort by start, as pruning needs
            folder = runs / f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}.{int(now * 1e6) % 1000000:06d}-{uuid.uuid4().hex[:6]}"
            try:
                folder.mkdir()
                break
            except FileExistsError:
                continue
        _point_latest(shared, folder)
    _prune(runs)
    return folder


def _point_latest(shared: Path, folder: Path) -> None:
    """Replace the ``latest`` link in one step: a reader sees the old run or the new one, never none."""
    partial = shared / f".{LATEST}.{uuid.uuid4().hex}"
    os.symlink(Path(RUNS) / folder.name, partial)
    os.replace(partial, shared / LATEST)


def ran(folder: Path) -> bool:
    """The run in ``folder`` got past its refusals: its launcher started, or it was stopped while starting."""
    return any((folder / name).exists() for name in (LAUNCHER_FILE, STOP_FILE, UNRECORDED_FILE))


def _prune(runs: Path) -> None:
    """The newest ``KEEP_RUNS`` runs that ran stay, and the newest ``KEEP_RUNS`` refused (or not started yet)."""
    folders = sorted(p for p in runs.iterdir() if p.is_dir())
    finished = [p for p in folders if ran(p)]
    refused = [p for p in folders if not ran(p)]
    for old in finished[:-KEEP_RUNS] + refused[:-KEEP_RUNS]:
        try:
            launcher = (old / LAUNCHER_FILE).read_text().strip()
        except OSError:
            launcher = ""
        if launcher and is_running(launcher):
            continue
        shutil.rmtree(old, ignore_errors=True)
