"""Run folders in CK's shared program/p3/tmp: one per run, `latest` pointing at the newest, old finished ones pruned."""
import os
import subprocess
import sys

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
        newer = [folders.new_run_folder(tmp_path) for _ in range(3)]
        kept = sorted(p.name for p in (tmp_path / "runs").iterdir())
        assert running.name in kept and finished.name not in kept
        assert newer[-1].name in kept and newer[-2].name in kept
    finally:
        live.kill()
        live.wait()
