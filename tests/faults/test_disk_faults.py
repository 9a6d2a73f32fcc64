"""A full disk and an overlong name: refused before the work that needs them, or, when they strike mid-way, one line
naming the path and the fix ("free space on ...", "shorten the name"), never a traceback or a blamed bundle.
Real full file systems: a 1 MB tmpfs (needs root)."""
import os
import subprocess
from pathlib import Path

import pytest

from reprokit.core.errors import UserError
from support.faults import one_clear_line

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
    from reprokit.run.folders import new_run_folder

    with pytest.raises(UserError) as refused:
        new_run_folder(tiny_disk / "tmp")
    one_clear_line(str(refused.value), "the run folder", "MB free on", "free space on")
    assert not (tiny_disk / "tmp" / "runs").exists()


def test_the_study_store_on_a_full_disk_names_the_store_not_the_bundle(tiny_disk):
    from reprokit.study.store.records import write_once

    fill(tiny_disk)
    with pytest.raises(UserError) as refused:
        write_once(tiny_disk / "records" / "r1.json", {"value": "x" * 10000})
    one_clear_line(str(refused.value), "the study store", "free space on")
    assert not list(tiny_disk.rglob(".*.tmp"))  # no partial record left behind


def test_an_overlong_record_name_is_refused_naming_it(tmp_path):
    from reprokit.study.store.records import write_once

    with pytest.raises(UserError) as refused:
        write_once(tmp_path / "records" / ("r" * 300 + ".json"), {"value": 1})
    one_clear_line(str(refused.value), "the study store", "shorten the name")


def test_a_log_the_launcher_cannot_write_ends_the_run_with_one_line(tiny_disk):
    """Mid-run: the role keeps being read (it never blocks on a full pipe) and the run fails naming the log."""
    import sys

    from reprokit.run.launch import OutputSink
    from reprokit.run.plan import Role

    role = Role("worker", 0, "127.0.0.1")
    sink = OutputSink(None, tiny_disk / "logs")
    fill(tiny_disk)
    talker = subprocess.Popen([sys.executable, "-c", "print('x' * 200000)\nprint('done')"], stdout=subprocess.PIPE)
    sink.pump(role, talker.stdout).join(30)
    assert talker.wait(30) == 0
    one_clear_line(sink.failure, "the run's logs", "free space on")
