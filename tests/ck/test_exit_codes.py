"""Every failure and refusal of `ck run program:p3` exits non-zero without CK's flag: 1 failed, 2 refused."""
import json

import pytest


@pytest.mark.parallel  # ck commands only, refused before any role starts: no testbed, no training, nothing timed
@pytest.mark.parametrize("flag", [[], ["--treat_return_code_as_exit_code=yes"]])
def test_a_refused_setting_exits_2_and_still_writes_cks_output(ck, tmp_path, flag):
    out_file = tmp_path / "out.json"
    proc = ck("run", "program:p3", "--cmd_key=resnet", "--env.BATCH_SIZE=0", f"--tmp_dir={tmp_path}",
              "--out=json_file", f"--out_file={out_file}", *flag, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "p3: error: BATCH_SIZE must be at least 1, got 0; fix it with --env.BATCH_SIZE=N" in proc.stdout + proc.stderr
    assert json.loads(out_file.read_text())["misc"]["run_success"] == "no"


@pytest.mark.parametrize("flag", [[], ["--treat_return_code_as_exit_code=yes"]])
def test_a_failed_run_exits_1(ck, tmp_path, flag):
    """A run that exceeds its timeout fails: the result says so, and ck exits 1."""
    proc = ck("run", "program:p3", "--cmd_key=resnet", "--env.RUN_TIMEOUT=1", f"--tmp_dir={tmp_path}", *flag,
              timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "p3-result.json").read_text())
    assert result["run_success"] is False and "exceeded its timeout of 1 s" in result["failure_reason"]


def test_a_misspelt_setting_is_refused_with_the_likely_one_before_anything_runs(ck, tmp_path):
    proc = ck("run", "program:p3", "--cmd_key=resnet", "--env.BATCH_SZIE=16", f"--tmp_dir={tmp_path}", timeout=120)
    assert proc.returncode == 2
    assert ("p3: error: unknown setting BATCH_SZIE (did you mean BATCH_SIZE?); the settings are in "
            "docs/reference/settings.md, 'Run settings'") in proc.stderr
    assert not (tmp_path / "logs").exists()  # nothing started
    # Variables for the engine's processes pass through by prefix.
    proc = ck("run", "program:p3", "--cmd_key=resnet", "--env.OMP_WAIT_POLICY=PASSIVE", "--env.NUM_BATCHES=6",
              "--env.DISP_BATCHES=2", "--env.BATCH_SIZE=8", f"--tmp_dir={tmp_path / 'ok'}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_without_a_cmd_key_the_run_is_resnet_with_stdin_closed_and_an_unknown_one_exits_non_zero(ck, tmp_path):
    """Stock CK would prompt for one of the four keys (a traceback with stdin closed); the other three are
    offered only by --cmd_key. An unknown key is refused by our ck before CK's program module: non-zero. The first
    run is also the successful run without CK's flag: it still exits 0."""
    proc = ck("run", "program:p3", "--env.NUM_BATCHES=6", "--env.DISP_BATCHES=2", "--env.BATCH_SIZE=8",
              f"--tmp_dir={tmp_path}", timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-2000:] + proc.stderr
    assert json.loads((tmp_path / "p3-result.json").read_text())["model"] == "resnet"
    proc = ck("run", "program:p3", "--cmd_key=vgg", "--env.BATCH_SIZE=0", f"--tmp_dir={tmp_path}", timeout=120)
    assert proc.returncode == 2 and "BATCH_SIZE must be at least 1" in proc.stderr  # vgg is still reachable
    proc = ck("run", "program:p3", "--cmd_key=resnet50", f"--tmp_dir={tmp_path}", timeout=120)
    assert proc.returncode != 0 and "unknown --cmd_key 'resnet50' for program:p3; valid ones:" in proc.stderr
