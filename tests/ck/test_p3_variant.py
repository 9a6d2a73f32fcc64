"""P3 against its baseline on the same engine, through `ck run program:p3`."""
import numpy as np

SAME_JOB = ["--cmd_key=resnet", "--env.NUM_WORKERS=2", "--env.NUM_SERVERS=2", "--env.NUM_BATCHES=6",
            "--env.DISP_BATCHES=2", "--env.SEED=7", "--env.WORKER_THREADS=1"]


def run_variant(ck, tmp_path, name, *args):
    run_dir = tmp_path / name
    params = tmp_path / f"{name}.npz"
    proc, out = ck.run_p3(run_dir, *SAME_JOB, f"--env.SAVE_PARAMS={params}", *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return out["characteristics"], np.load(params)


def test_p3_learns_exactly_what_the_baseline_learns(ck, tmp_path):
    """Same seed and data, 2 workers, 2 servers: the same parameters after 6 iterations, with the scheduler
    holding a small credit (400,000 bytes: a few slices in flight) and the timeline on."""
    base, base_params = run_variant(ck, tmp_path, "baseline", "--env.VARIANT=baseline")
    p3, p3_params = run_variant(ck, tmp_path, "p3", "--env.VARIANT=p3", "--env.P3_SLICE_SIZE=50000",
                                "--env.P3_CREDIT=400000", "--env.TIMELINE=1")
    assert (base["variant"], p3["variant"], p3["p3_slice_size"], p3["p3_priority"]) == ("baseline", "p3", 50_000, True)
    assert p3["p3_credit"] == 400_000 and len(p3["timelines"]) == 2 and p3["comm_wait_s_per_iter"] is not None
    assert "p3_slice_size" not in base
    assert base["params_in_sync"] and p3["params_in_sync"]
    assert sorted(base_params.files) == sorted(p3_params.files) and len(base_params.files) > 100
    initial_distance = 0.0
    for name in base_params.files:
        np.testing.assert_allclose(p3_params[name], base_params[name], rtol=1e-5, atol=1e-6, err_msg=name)
        initial_distance += float(np.abs(base_params[name]).sum())
    assert initial_distance > 0  # the comparison is not between empty arrays


def test_p3_without_slicing_or_priority_still_trains_in_sync(ck, tmp_path):
    """The paper's ablation switches: slicing off (P3_SLICE_SIZE=0) and priority off."""
    c, _ = run_variant(ck, tmp_path, "ablation", "--env.VARIANT=p3", "--env.P3_SLICE_SIZE=0", "--env.P3_PRIORITY=0")
    assert (c["p3_slice_size"], c["p3_priority"], c["params_in_sync"]) == (0, False, True)
