"""Two `ck run program:p3` started together on one machine, in CK's shared program/p3/tmp (no --tmp_dir): each gets
its own run folder, run id and scheduler port, and both succeed."""
import json
import re
import subprocess
import warnings
from pathlib import Path

import pytest

from support.faults import FaultFailure, expect, no_traceback

pytestmark = pytest.mark.fault("concurrent")

SMALL = ["--cmd_key=resnet", "--env.NUM_BATCHES=6", "--env.DISP_BATCHES=2", "--env.BATCH_SIZE=8", "--env.WORKER_THREADS=1",
         "--treat_return_code_as_exit_code=yes", "--out=json_file"]


# MXNet's own crash, not ours: a role killed by a fatal signal, with the engine's "Segmentation fault" line.
ENGINE_CRASH = re.compile(r"Segmentation fault: \d+|was killed by SIG(SEGV|ABRT|BUS)")


def start_together(ck, tmp_path):
    runs = [ck.popen("run", "program:p3", *SMALL, f"--out_file={tmp_path / f'ck-{n}.json'}") for n in (0, 1)]
    outputs = []
    for run in runs:
        try:
            outputs.append(run.communicate(timeout=600)[0])
        except subprocess.TimeoutExpired:
            for other in runs:
                other.kill()
            raise FaultFailure("hang", "two runs started together did not finish within 600 s") from None
    return runs, outputs


def test_two_runs_started_together_keep_their_own_folders_ports_and_results(ck, tmp_path):
    runs, outputs = start_together(ck, tmp_path)
    crashed = [out for run, out in zip(runs, outputs) if run.returncode != 0 and ENGINE_CRASH.search(out)]
    if crashed:
        # A worker of such a pair has died of a segmentation fault inside MXNet before its first batch, three times
        # in CI and never in 29 pairs run on purpose (docs/status.md). The pair runs once more: a second crash, or
        # any other failure, fails the test. The warning keeps the crash's Python stacks (role_exit.name_crashes).
        warnings.warn(f"MXNet crashed in one of two runs started together; running the pair again:\n"
                      f"{crashed[0][-3000:]}", stacklevel=1)
        runs, outputs = start_together(ck, tmp_path)
    folders = []
    for n, (run, output) in enumerate(zip(runs, outputs)):
        no_traceback(output)
        expect(run.returncode == 0, "data-lost", f"run {n} failed:\n{output[-3000:]}")
        characteristics = json.loads((tmp_path / f"ck-{n}.json").read_text())["characteristics"]
        folders.append(Path(characteristics["run_folder"]))
    expect(folders[0] != folders[1], "data-lost", f"both runs wrote into {folders[0]}")
    specs = [json.loads((f / "p3-run.json").read_text()) for f in folders]
    results = [json.loads((f / "p3-result.json").read_text()) for f in folders]
    launches = [json.loads((f / "launch.json").read_text()) for f in folders]
    assert all(r["run_success"] for r in results)
    assert results[0]["run_id"] != results[1]["run_id"]
    assert [r["run_id"] for r in results] == [s["plan"]["run_id"] for s in specs]
    for folder, launch in zip(folders, launches):
        assert launch["status"] == "ok", launch["reason"]
        assert sorted(p.name for p in (folder / "logs").iterdir()) == [
            "scheduler.log", "server-0.log", "worker-0.log", "worker-1.log"]
    ports = [_scheduler_port(f) for f in folders]
    assert ports[0] != ports[1]
    # CK's shared folder keeps the runs apart and points at the newest.
    shared = folders[0].parent.parent
    assert folders[1].parent.parent == shared and shared.name == "tmp"
    assert (shared / "latest").resolve() in {f.resolve() for f in folders}
    assert not (shared / "p3-run.json").exists()


def _scheduler_port(folder: Path) -> int:
    """The port the launcher held for the scheduler and gave every role."""
    launch = json.loads((folder / "launch.json").read_text())
    return launch["scheduler_port"]
