"""`ck run program:p3 --env.VARIANT=bytescheduler`: ByteScheduler over stock MXNet 1.9.1's parameter server, with
the same supervision, unified result and timeline as every variant, learning exactly what `baseline` learns."""
import numpy as np

from support.bytescheduler import ensure_installed

SAME_JOB = ["--cmd_key=resnet", "--env.NUM_WORKERS=2", "--env.NUM_SERVERS=2", "--env.NUM_BATCHES=6", "--env.BATCH_SIZE=8",
            "--env.DISP_BATCHES=2", "--env.SEED=7", "--env.WORKER_THREADS=1"]


def run_variant(ck, tmp_path, name, *args):
    params = tmp_path / f"{name}.npz"
    proc, out = ck.run_p3(tmp_path / name, *SAME_JOB, f"--env.SAVE_PARAMS={params}", *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return out["characteristics"], np.load(params), proc


def test_bytescheduler_learns_exactly_what_the_baseline_learns(ck, tmp_path):
    """Same seed and data, 2 workers, 2 servers, 6 iterations: both update on the servers, and ByteScheduler only
    changes when each partition of each gradient is sent, so the parameters are equal to the bit (each element's sum
    over 2 workers and its update are the same operations; partitions split arrays by rows)."""
    commit = ensure_installed(ck)["CK_ENV_LIB_BYTESCHEDULER_COMMIT"]
    base, base_params, _ = run_variant(ck, tmp_path, "baseline", "--env.VARIANT=baseline")
    bs, bs_params, proc = run_variant(ck, tmp_path, "bytescheduler", "--env.VARIANT=bytescheduler", "--env.TIMELINE=1")
    assert (bs["variant"], bs["engine"]) == ("bytescheduler", f"mxnet-1.9.1-cpu+bytescheduler@{commit[:7]}")
    assert bs["mechanism"] == {"van": "zmq", "update_on": "servers", "slice_threshold": None, "water_mark": None,
                               "priority": True, "scheduler": "bytescheduler"}
    assert "scheduler" not in base["mechanism"] and base["mechanism"]["update_on"] == "servers"
    iterations = 6 * 193  # every trainable parameter's pushpull, each iteration (ResNet-50: 193 arrays)
    ran = dict(bs["bytescheduler"])
    assert sorted(ran.pop("immediate")) == [False, True]  # only MXNet's rank 0 schedules (the authors' kvstore.py)
    assert ran == {"partition": 1_000_000, "credit": 4_000_000, "credit_tuning": False, "commit": commit,
                   "pushpulls": [iterations] * 2, "tasks": [iterations] * 2}
    assert "bytescheduler" not in base and "p3_slice_size" not in bs
    assert len(bs["timelines"]) == 2 and bs["comm_wait_s_per_iter"] is not None and bs["ps_van"] == "zmq"
    assert bs["params_in_sync"] and base["params_in_sync"] and bs["warnings"] == []
    assert "Traceback" not in proc.stdout + proc.stderr
    assert sorted(base_params.files) == sorted(bs_params.files) and len(bs_params.files) == 193
    for name in base_params.files:
        np.testing.assert_array_equal(base_params[name], bs_params[name], err_msg=name)
    assert sum(float(np.abs(bs_params[name]).sum()) for name in bs_params.files) > 0


def test_its_knobs_reach_the_scheduler(ck, tmp_path):
    """BYTESCHEDULER_PARTITION and BYTESCHEDULER_CREDIT as the workers' cores ran them; smaller partitions make more
    pieces of the same pushpulls, and the parameters stay in step."""
    ensure_installed(ck)
    bs, _, _ = run_variant(ck, tmp_path, "knobs", "--env.VARIANT=bytescheduler", "--env.BYTESCHEDULER_PARTITION=200000",
                           "--env.BYTESCHEDULER_CREDIT=800000")
    assert (bs["bytescheduler"]["partition"], bs["bytescheduler"]["credit"]) == (200_000, 800_000)
    assert bs["params_in_sync"]


def refused(ck, tmp_path, *args):
    proc, _ = ck.run_p3(tmp_path / "refused", *args, timeout=300)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("p3: error:")]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    return lines[0]


def test_its_settings_are_refused_in_one_line_where_they_do_not_apply(ck, tmp_path):
    line = refused(ck, tmp_path, "--cmd_key=resnet", "--env.VARIANT=p3", "--env.BYTESCHEDULER_PARTITION=5")
    assert "BYTESCHEDULER_PARTITION applies only to VARIANT=bytescheduler" in line
    line = refused(ck, tmp_path, "--cmd_key=resnet", "--env.VARIANT=baseline", "--env.BYTESCHEDULER_CREDIT=5")
    assert "BYTESCHEDULER_CREDIT applies only to VARIANT=bytescheduler" in line
    line = refused(ck, tmp_path, "--cmd_key=resnet", "--env.VARIANT=bytescheduler", "--env.ENGINE=artifact")
    assert "runs on the embedded engine only" in line and "--env.ENGINE=embedded" in line
    line = refused(ck, tmp_path, "--cmd_key=sockeye", "--env.VARIANT=bytescheduler")
    assert "image models" in line
    line = refused(ck, tmp_path, "--cmd_key=resnet", "--env.VARIANT=bytescheduler", "--env.BYTESCHEDULER_CREDIT=0")
    assert "BYTESCHEDULER_CREDIT must be at least 1" in line
