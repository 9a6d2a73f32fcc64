"""`ck run program:p3` end to end on this machine: real MXNet roles, really synchronising."""
import json
import os
import signal
import socket
import time

import pytest

from reprokit.run.procscan import run_processes
from support.runs import long_run, no_process_left, wait_for


def run_id_of(run_dir):
    return json.loads((run_dir / "p3-run.json").read_text())["plan"]["run_id"]


def test_local_run_trains_synchronously_and_reports_the_unified_result(ck, tmp_path):
    # The smoke profile's defaults (31 batches, Speedometer every 10) are unit-tested (test_settings); 7 batches
    # with a report every 3 show the same: batch size, shape and layout by default, two reports, the first warm-up.
    proc, out = ck.run_p3(tmp_path, "--cmd_key=resnet", "--env.NUM_BATCHES=7", "--env.DISP_BATCHES=3")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert out["misc"]["run_success"] == "yes"
    c = out["characteristics"]
    assert (c["model"], c["batch_size"], c["image_shape"], c["profile"]) == ("resnet", 32, "3,32,32", "smoke")
    assert (c["num_workers"], c["num_servers"], c["variant"], c["engine"]) == (2, 1, "p3", "mxnet-1.9.1-cpu")
    assert (c["p3_slice_size"], c["p3_priority"]) == (50_000, True)
    assert len(c["throughput_per_worker"]) == 2 and all(s > 0 for s in c["throughput_per_worker"])
    assert c["throughput_samples_per_sec"] == pytest.approx(sum(c["throughput_per_worker"]), abs=0.01)
    assert c["throughput_min"] <= min(c["throughput_per_worker"]) <= c["throughput_max"]
    assert c["batches_measured"] == 2 * 3  # 7 batches: reports at 3 and 6; the first is warm-up
    # Synchronous training: both workers end with the same trainable parameters.
    assert c["params_in_sync"] is True
    assert len(set(c["param_checksums"])) == 1 and len(c["param_checksums"]) == 2
    # The run folder holds the plan, the hosts file, every role's log and the result.
    assert (tmp_path / "hosts").read_text() == "127.0.0.1\n"
    assert json.loads((tmp_path / "p3-result.json").read_text())["run_success"] is True
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "scheduler.log", "server-0.log", "worker-0.log", "worker-1.log"]
    assert "[127.0.0.1 worker#0]" in proc.stdout
    assert no_process_left(run_id_of(tmp_path))


def test_inception_v3_trains_at_299_with_the_smoke_profile(ck, tmp_path):
    # The smoke profile's own batch counts and size for it (7 of 8) are unit-tested (test_settings); 3 batches of 2
    # train at 299 as well.
    proc, out = ck.run_p3(tmp_path, "--cmd_key=inception-v3", "--env.NUM_BATCHES=3", "--env.DISP_BATCHES=1",
                          "--env.BATCH_SIZE=2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    c = out["characteristics"]
    assert (c["model"], c["network"], c["image_shape"], c["batch_size"]) == ("inception-v3", "inceptionv3",
                                                                             "3,299,299", 2)
    assert c["batches_measured"] == 2 * 1  # 3 batches: Speedometer reports after the second and third; the first is warm-up
    assert c["params_in_sync"] is True and c["data"] == "synthetic"


def test_vgg19_trains_with_the_smoke_profile(ck, tmp_path):
    proc, out = ck.run_p3(tmp_path, "--cmd_key=vgg", "--env.NUM_BATCHES=3", "--env.DISP_BATCHES=1", "--env.BATCH_SIZE=8")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    c = out["characteristics"]
    assert (c["model"], c["network"], c["image_shape"], c["profile"]) == ("vgg", "vgg19", "3,32,32", "smoke")
    assert c["batches_measured"] == 2 * 1 and c["params_in_sync"] is True  # as inception-v3's above


@pytest.mark.parallel  # ck commands only, refused before any role starts: no testbed, no training, nothing timed
def test_inception_v3_refuses_a_smaller_image_before_starting_anything(ck, tmp_path):
    proc, out = ck.run_p3(tmp_path, "--cmd_key=inception-v3", "--env.IMAGE_SHAPE=3,224,224")
    assert proc.returncode != 0
    assert "p3: error: IMAGE_SHAPE 3,224,224 is too small for inception-v3, which needs at least 299x299" in proc.stderr
    assert not (tmp_path / "logs").exists()


def test_killing_a_worker_fails_the_run_within_seconds_and_leaves_nothing(ck, tmp_path):
    with long_run(ck, tmp_path) as (run, run_id):
        pid = wait_for(lambda: next((p for p in run_processes(run_id)
                                     if b"DMLC_WORKER_ID=1\0" in open(f"/proc/{p}/environ", "rb").read()), None), 10)
        assert pid
        killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        output, _ = run.communicate(timeout=60)
        assert time.monotonic() - killed_at < 15
    assert run.returncode != 0
    assert "p3: FAILED: worker#1 on 127.0.0.1 was killed by SIGKILL" in output
    assert "Traceback" not in output
    assert no_process_left(run_id)


def test_ctrl_c_tears_every_role_down(ck, tmp_path):
    """SIGINT to ck's whole process group, as Ctrl-C in a terminal sends it."""
    with long_run(ck, tmp_path, watch_log="worker-0.log", new_session=True) as (run, run_id):
        os.killpg(run.pid, signal.SIGINT)
        output, _ = run.communicate(timeout=60)
    assert run.returncode != 0
    assert "p3: FAILED: run stopped by SIGINT; every role was torn down" in output
    assert "Traceback" not in output  # ck's own KeyboardInterrupt included
    assert json.loads((tmp_path / "p3-result.json").read_text())["interrupted"] is True
    assert no_process_left(run_id)


@pytest.mark.parallel  # ck commands only, refused before any role starts: no testbed, no training, nothing timed
@pytest.mark.parametrize("args,message", [
    (["--env.BATCH_SIZE=abc"], "p3: error: BATCH_SIZE must be a whole number, got 'abc'; fix it with --env.BATCH_SIZE=N"),
    (["--env.BATCH_SIZE=-8"], "p3: error: BATCH_SIZE must be at least 1, got -8"),
    (["--env.NUM_WORKERS=0"], "p3: error: NUM_WORKERS must be at least 1, got 0"),
    (["--env.NUM_WORKERS=two"], "p3: error: NUM_WORKERS must be a whole number, got 'two'"),
    (["--env.PROFILE=fastest"], "p3: error: unknown PROFILE 'fastest'; valid ones: paper, smoke"),
])
def test_bad_input_is_one_clear_line(ck, tmp_path, args, message):
    proc, out = ck.run_p3(tmp_path, "--cmd_key=resnet", *args, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert output.count(message) == 1, output
    assert "Traceback" not in output
    assert "potential PROBLEM" not in output  # CK's failure box, switched off by our set-up
    assert out["misc"]["run_success"] == "no"
    assert message.removeprefix("p3: error: ") in out["characteristics"]["failure_reason"]


@pytest.mark.parallel  # ck commands only, refused before any role starts: no testbed, no training, nothing timed
def test_a_refused_run_ends_with_our_line_not_cks(bare_ck, tmp_path):
    """A value refused in the preprocess (recorded, printed by the run command): CK's own trailing line (`CK error:
    [program] return code 2 !=0 !`) used to follow ours; our ck prints ours last, once, with CK's exit code."""
    run = bare_ck.popen("run", "program:p3", "--cmd_key=resnet", "--env.PROFILE=fastest", f"--tmp_dir={tmp_path}")
    output, _ = run.communicate(timeout=120)  # stdout and stderr as one stream, in the order they were written
    ours = "p3: error: unknown PROFILE 'fastest'; valid ones: paper, smoke"
    assert run.returncode == 2, output
    assert [line for line in output.splitlines() if line.strip()][-1] == ours, output[-2000:]
    assert output.count(ours) == 1 and "CK error" not in output


@pytest.mark.parallel  # ck commands only, refused before any role starts: no testbed, no training, nothing timed
def test_port_in_use_is_one_clear_line(ck, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc, _ = ck.run_p3(tmp_path, "--cmd_key=resnet", f"--env.PS_ROOT_PORT={port}", timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert output.count(f"p3: error: port {port} on 127.0.0.1 is already in use") == 1
    assert "Traceback" not in output


@pytest.mark.parallel  # ck commands only, refused before any role starts: no testbed, no training, nothing timed
@pytest.mark.parametrize("program", ["p3", "sysml19-p3"])
def test_an_unknown_cmd_key_is_refused_in_one_line_listing_the_valid_keys(bare_ck, tmp_path, program):
    run_dir = tmp_path / "run"
    proc = bare_ck("run", f"program:{program}", "--cmd_key=alexnet", f"--tmp_dir={run_dir}", timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert output.strip() == (f"p3: error: unknown --cmd_key 'alexnet' for program:{program}; valid ones: "
                              "inception-v3, resnet, sockeye, vgg, vgg16 (e.g. --cmd_key=resnet)")
    assert not run_dir.exists()  # refused before CK prepared anything


@pytest.mark.parallel  # ck commands only, refused before any role starts: no testbed, no training, nothing timed
def test_missing_engine_names_the_install_command(bare_ck, tmp_path):
    proc, out = bare_ck.run_p3(tmp_path, "--cmd_key=resnet", timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert output.count("p3: error: the MXNet engine is not installed") == 1
    assert "install it with: ck install package:lib-mxnet --quiet" in output
    assert "Traceback" not in output


def test_the_original_workflows_names_reach_the_same_entries(ck, tmp_path):
    """program:sysml19-p3 and soft:sysml19-p3 (the original workflow's names) are ours under a second name."""
    proc = ck("run", "program:sysml19-p3", "--cmd_key=resnet", f"--tmp_dir={tmp_path}", "--env.NUM_BATCHES=3",
              "--env.DISP_BATCHES=1", "--env.BATCH_SIZE=8", "--env.VARIANT=baseline",
              "--treat_return_code_as_exit_code=yes", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "p3-result.json").read_text())
    assert (result["model"], result["variant"], result["run_success"]) == ("resnet", "baseline", True)
    original = json.loads(ck("load", "program:sysml19-p3", "--out=json", check=True).stdout)
    ours = json.loads(ck("load", "program:p3", "--out=json", check=True).stdout)
    assert original["data_uid"] == ours["data_uid"] and original["dict"]["run_cmds"] == ours["dict"]["run_cmds"]
    soft = json.loads(ck("search", "soft", "--tags=tool,sysml19,p3", "--out=json", check=True).stdout)["lst"]
    assert {e["data_uid"] for e in soft} == {json.loads(ck("load", "soft:sysml19-p3", "--out=json",
                                                          check=True).stdout)["data_uid"]}
