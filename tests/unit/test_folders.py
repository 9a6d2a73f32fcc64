"""Run folders in CK's shared program/p3/tmp: one per run, `latest` pointing at the newest, old finished ones pruned."""
import os
import shutil as real_shutil
import subprocess
import sys
from collections import namedtuple

import pytest

from reprokit.core.errors import UserError
from reprokit.run import folders
from reprokit.run.lifeline import LAUNCHER_FILE
from reprokit.run.procscan import process_identity


def test_each_run_gets_its_own_folder_and_latest_points_at_the_newest(tmp_path):
    first, second = folders.new_run_folder(tmp_path), folders.new_run_folder(tmp_path)
    assert first != second and first.parent == second.parent == tmp_path / "runs"
    assert (tmp_path / "latest").resolve() == second.resolve()
    assert os.readlink(tmp_path / "latest") == f"runs/{second.name}"  # relative: the tree can move
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "runs"]


def test_old_runs_are_pruned_but_never_one_whose_launcher_still_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(folders, "KEEP_RUNS", 2)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = folders.new_run_folder(tmp_path)
        (running / LAUNCHER_FILE).write_text(process_identity(live.pid) + "\n")
        finished = folders.new_run_folder(tmp_path)
        (finished / LAUNCHER_FILE).write_text(f"{os.getpid()}:0\n")  # a launcher long gone (its start differs)
        newer = []
        for _ in range(3):  # runs that ran (only those count against KEEP_RUNS)
            newer.append(folders.new_run_folder(tmp_path))
            (newer[-1] / LAUNCHER_FILE).write_text(f"{os.getpid()}:0\n")
        folders.new_run_folder(tmp_path)  # the next run prunes
        kept = sorted(p.name for p in (tmp_path / "runs").iterdir())
        assert running.name in kept and finished.name not in kept
        assert newer[-1].name in kept and newer[-2].name in kept
    finally:
        live.kill()
        live.wait()


def test_refused_runs_never_evict_a_run_that_ran(tmp_path):
    """25 refusals (folders without a launcher) after one finished run: that run's folder, log and result stay."""
    success = folders.new_run_folder(tmp_path)
    (success / LAUNCHER_FILE).write_text(f"{os.getpid()}:0\n")  # its launcher ran and is gone
    (success / "p3-result.json").write_text("{}")
    refused = [folders.new_run_folder(tmp_path) for _ in range(25)]
    kept = {p.name for p in (tmp_path / "runs").iterdir()}
    assert success.name in kept and (success / "p3-result.json").exists()
    # Refusals are pruned among themselves: the newest KEEP_RUNS stay.
    assert {p.name for p in refused[-folders.KEEP_RUNS:]} <= kept
    assert not {p.name for p in refused[:-folders.KEEP_RUNS]} & kept


def test_a_run_folder_on_a_full_filesystem_or_with_an_overlong_name_is_refused_before_it_is_made(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(real_shutil, "disk_usage", lambda _path: usage(10 ** 9, 10 ** 9, 1024))
    with pytest.raises(UserError, match=r"the run folder: only 0\.0 MB free on .*; free space on"):
        folders.new_run_folder(tmp_path)
    assert not (tmp_path / "runs").exists()
    monkeypatch.undo()
    with pytest.raises(UserError, match="shorten the name"):
        folders.new_run_folder(tmp_path / ("x" * 300))
