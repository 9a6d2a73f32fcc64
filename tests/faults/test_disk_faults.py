"""A full disk and an overlong name: refused before the work that needs them, or, when they strike mid-way, one line
naming the path and the fix ("free space on ...", "shorten the name"), never a traceback or a blamed bundle.
Real full file systems: a 1 MB tmpfs (needs root)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reprokit.ck import program
from reprokit.core.errors import UserError
from reprokit.core.paths import SRC_DIR
from reprokit.run.folders import new_run_folder
from reprokit.run.launch import OutputSink
from reprokit.run.plan import Role
from reprokit.study.store.records import write_once
from support.faults import expect, finishes, one_clear_line
from support.runs import fake_plan, no_process_left, wait_for, write_spec

pytestmark = [pytest.mark.root, pytest.mark.fault("disk")]


@pytest.fixture
def tiny_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / "tiny"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def fill(folder: Path) -> None:
    with open(folder / "filler", "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError:
            pass


def test_a_run_folder_on_a_full_disk_is_refused_before_it_is_made(tiny_disk):
    with pytest.raises(UserError) as refused:
        new_run_folder(tiny_disk / "tmp")
    one_clear_line(str(refused.value), "the run folder", "MB free on", "free space on")
    assert not (tiny_disk / "tmp" / "runs").exists()


def test_the_study_store_on_a_full_disk_names_the_store_not_the_bundle(tiny_disk):
    fill(tiny_disk)
    with pytest.raises(UserError) as refused:
        write_once(tiny_disk / "records" / "r1.json", {"value": "x" * 10000})
    one_clear_line(str(refused.value), "the study store", "free space on")
    assert not list(tiny_disk.rglob(".*.tmp"))  # no partial record left behind


def test_an_overlong_record_name_is_refused_naming_it(tmp_path):
    with pytest.raises(UserError) as refused:
        write_once(tmp_path / "records" / ("r" * 300 + ".json"), {"value": 1})
    one_clear_line(str(refused.value), "the study store", "shorten the name")


def test_a_log_the_launcher_cannot_write_ends_the_run_with_one_line(tiny_disk):
    """Mid-run: the role keeps being read (it never blocks on a full pipe) and the run fails naming the log."""
    role = Role("worker", 0, "127.0.0.1")
    sink = OutputSink(None, tiny_disk / "logs")
    fill(tiny_disk)
    talker = subprocess.Popen([sys.executable, "-c", "print('x' * 200000)\nprint('done')"], stdout=subprocess.PIPE)
    sink.pump(role, talker.stdout).join(30)
    assert talker.wait(30) == 0
    one_clear_line(sink.failure, "the run's logs", "free space on")


def test_a_disk_filling_mid_run_ends_it_with_the_disk_line_alone(tiny_disk, capsys, monkeypatch):
    """The launcher, then ck's postprocess, as `ck run` calls them: the disk fills while workers log, so neither the
    logs nor the result can be written. The launcher's line names the disk; the postprocess, which finds no result,
    must not add a second line blaming the launcher (as if it had been stopped)."""
    run_dir = tiny_disk / "run"
    run_dir.mkdir()
    plan = fake_plan("--report-forever", "0.05", timeout_s=120)
    spec = write_spec(run_dir, plan)
    launcher = subprocess.Popen([sys.executable, "-m", "reprokit.run.command", str(spec)], cwd=run_dir,
                                env={**os.environ, "PYTHONPATH": str(SRC_DIR)}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert wait_for(lambda: list(run_dir.glob("logs/worker-*.log")), timeout=30), "no worker logged"
    fill(tiny_disk)
    code = finishes(launcher, 60)
    said = launcher.stdout.read()
    monkeypatch.setattr(program, "exit_with_the_programs_code", lambda code: None)  # CK's frame is not here
    result = program.postprocess({"misc": {program.RUN_FOLDER_KEY: str(run_dir)}})["characteristics"]
    said += capsys.readouterr().out
    assert code != 0 and result["run_success"] is False
    one_clear_line(said, "p3:", "no space left", "free space on")
    blamed = [line for line in said.splitlines() if "launcher" in line]
    expect(not blamed, "unclear", f"a line after the disk's blames the launcher:\n{said[-2000:]}")
    assert no_process_left(plan.run_id)
