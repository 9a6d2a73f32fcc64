"""Run folders: each run on this machine gets its own, so runs started together never share a file.

CK runs every ``ck run program:p3`` in the same ``program/p3/tmp`` unless ``--tmp_dir`` names another folder. Under
that shared folder each run gets ``runs/<time>-<id>/``, ``latest`` points at the newest, and only the newest
``KEEP_RUNS`` finished runs are kept (a folder whose launcher still runs is never removed).
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from reprokit.run.lifeline import LAUNCHER_FILE
from reprokit.run.procscan import is_running

RUNS = "runs"
LATEST = "latest"
KEEP_RUNS = 20


def new_run_folder(shared: Path) -> Path:
    """A new folder under ``shared/runs``; ``shared/latest`` points at it; old finished runs are removed."""
    runs = shared / RUNS
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


def _prune(runs: Path) -> None:
    for old in sorted(p for p in runs.iterdir() if p.is_dir())[:-KEEP_RUNS]:
        try:
            launcher = (old / LAUNCHER_FILE).read_text().strip()
        except OSError:
            launcher = ""
        if launcher and is_running(launcher):
            continue
        shutil.rmtree(old, ignore_errors=True)
