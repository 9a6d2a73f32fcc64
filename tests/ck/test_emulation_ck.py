"""Emulated compute through `ck run program:p3`: the run completes on the real communication stack, records its
compute mode, profile and dilation, and its iteration lasts at least the profile's waits (k=2 doubles them).
With a timeline its workers measure each layer's compute, a profile a later run can wait."""
from dataclasses import replace

from reprokit.core.jsonfile import write_json
from reprokit.emulation.profile import MEASURED_FILE, Factor, resolve_profile

BATCH = 8
WAIT_S = 0.6  # forward + backward per iteration at k=1: well above this machine's communication of ResNet-50
JOB = ["--cmd_key=resnet", "--env.VARIANT=baseline", "--env.NUM_WORKERS=2", "--env.NUM_SERVERS=1",
       f"--env.BATCH_SIZE={BATCH}", "--env.NUM_BATCHES=5", "--env.DISP_BATCHES=2", "--env.COMPUTE=emulated"]


def profile_file(tmp_path):
    v100 = resolve_profile("v100", "resnet", "3,32,32", BATCH)
    profile = replace(v100.scaled(Factor("test", WAIT_S / v100.total_s, "the test's chosen total")), name="test")
    path = tmp_path / "test-profile.json"
    write_json(path, profile.to_dict())
    return path


def iteration_s(result):
    return BATCH / (result["throughput_samples_per_sec"] / result["num_workers"])


def test_emulated_run_records_its_profile_and_dilation_and_its_time_follows_the_waits(ck, tmp_path):
    path = profile_file(tmp_path)
    results = {}
    for k in ("1", "2"):
        timeline = ["--env.TIMELINE=1"] if k == "1" else []
        proc, out = ck.run_p3(tmp_path / f"k{k}", *JOB, f"--env.COMPUTE_PROFILE={path}", f"--env.DILATION={k}",
                              *timeline)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        results[k] = out["characteristics"]
    one, two = results["1"], results["2"]
    assert (one["compute"], one["dilation"], two["dilation"]) == ("emulated", 1.0, 2.0)
    assert one["compute_profile"] == str(path) and "V100" in one["compute_profile_source"]
    assert abs(one["emulated_wait_s_per_iter"] - WAIT_S) < 1e-3 and abs(two["emulated_wait_s_per_iter"] - 2 * WAIT_S) < 1e-3
    assert two["throughput_dedilated_samples_per_sec"] == round(2 * two["throughput_samples_per_sec"], 3)
    assert one["params_in_sync"] and two["params_in_sync"]
    assert all(0 < r["host_cpu_busy"] <= 1 for r in (one, two))  # each worker measured its host's CPU
    assert all(r["cpu_bound"] == (r["host_cpu_busy"] > 0.8) for r in (one, two))  # asleep: the run decided
    # Judged without a wall-clock ceiling (a loaded machine stretches every iteration): an iteration lasts at least
    # the waits the run recorded, and k=2 doubles them.
    t1, t2 = iteration_s(one), iteration_s(two)
    assert WAIT_S * 0.95 < t1 and 2 * WAIT_S * 0.95 < t2, (t1, t2)
    # The workers' probes measured the waits layer by layer: a profile of this network, about as long as waited
    # (the waits do not run late by the dispatch lag of their 214 operations per iteration).
    assert one["measured_compute_profile"] == MEASURED_FILE and "measured_compute_profile" not in two
    measured = resolve_profile(str(tmp_path / "k1" / MEASURED_FILE), "resnet", "3,32,32", BATCH)
    assert len(measured.layers) == 107 and "2 workers" in measured.source
    # No wall-clock ceiling (a loaded machine stretches every wait): the measured compute lies within the run's own
    # iteration, which a loaded machine stretches alike.
    assert WAIT_S * 0.95 < measured.total_s <= t1 * 1.02, (measured.total_s, t1)
    # measured:FILE gives the model what the run measured of itself: with nothing to wait for on the links, the
    # predicted iteration is the measured compute and little more (within the model's validated error, 10%); set
    # against the run's own figure, not its wall-clock iteration, which load stretches.
    proc = ck("predict", "study:sysml19-p3", "--model=resnet", "--image_shape=3,32,32", f"--batch={BATCH}",
              "--workers=2", "--servers=1", "--layout=dedicated", "--bandwidths=400gbit",
              f"--gpu=measured:{tmp_path / 'k1' / MEASURED_FILE}", f"--out_dir={tmp_path / 'predicted'}",
              f"--store={tmp_path / 'store'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [row] = [line.split("|") for line in proc.stdout.splitlines() if line.startswith("| measured (")]
    predicted_baseline_s = float(row[5])
    assert measured.total_s * 0.99 <= predicted_baseline_s <= measured.total_s * 1.10, (predicted_baseline_s,
                                                                                      measured.total_s)
