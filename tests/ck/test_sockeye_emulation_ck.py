"""Emulated Sockeye through `ck run program:p3`: the workers build no Sockeye, wait the P4000's Sockeye profile over
its arrays (Sockeye 1.18's, in its key order) through the same kvstore and Trainer as the image models, and report
sentence pairs per second; `ck predict` gives Sockeye a predicted figure."""
from reprokit.emulation.profile import MEASURED_FILE, arrays_of, resolve_profile

JOB = ["--cmd_key=sockeye", "--env.COMPUTE=emulated", "--env.COMPUTE_PROFILE=p4000", "--env.PROFILE=smoke",
       "--env.VARIANT=p3", "--env.NUM_WORKERS=2", "--env.NUM_SERVERS=1", "--env.NUM_BATCHES=6",
       "--env.DISP_BATCHES=2", "--env.DILATION=4"]


def test_an_emulated_sockeye_run_trains_the_profiles_arrays_and_reports_sentences_per_second(ck, tmp_path):
    proc, out = ck.run_p3(tmp_path / "run", *JOB, "--env.TIMELINE=1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = out["characteristics"]
    assert (result["model"], result["compute"], result["dilation"]) == ("sockeye", "emulated", 4.0)
    assert "P4000" in result["compute_profile_source"] and result["params_in_sync"]
    profile = resolve_profile("p4000", "sockeye", "", result["batch_size"])
    assert abs(result["emulated_wait_s_per_iter"] - 4 * profile.total_s) < 1e-3
    assert result["throughput_samples_per_sec"] > 0
    assert result["throughput_dedilated_samples_per_sec"] == round(4 * result["throughput_samples_per_sec"], 3)
    log = (tmp_path / "run").rglob("*.log")
    text = "\n".join(p.read_text(errors="replace") for p in log)
    assert "samples/sec" in text and "sockeye_run" not in text  # train.py's Speedometer, not Sockeye's trainer
    assert f"params={len(arrays_of(profile))}" in text  # every worker trained exactly the profile's 37 arrays
    # The workers measured each of its layers' waits: a profile of Sockeye a later run or ck predict can take.
    measured = resolve_profile(str(tmp_path / "run" / MEASURED_FILE), "sockeye", "", result["batch_size"])
    assert [x.arrays for x in measured.layers] == [x.arrays for x in profile.layers]


def test_ck_predict_gives_sockeye_a_predicted_figure(ck, tmp_path):
    proc = ck("predict", "study:sysml19-p3", "--model=sockeye", "--gpu=p4000", "--bandwidths=1gbit,10gbit",
              "--workers=4", f"--out_dir={tmp_path / 'predicted'}", f"--store={tmp_path / 'store'}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "PREDICTED by the iteration model (not measured): sockeye," in out
    assert "P4000: 383.5 sentences/s (103.3 to 654.2, estimated from another GPU" in out
    assert out.count("| P4000 | 4 | 4 |") == 2 and "predicted p3/baseline speedup" in out


def test_an_emulated_sockeye_run_refuses_a_corpus_it_would_not_read(ck, tmp_path):
    proc, _ = ck.run_p3(tmp_path / "run", *JOB, "--env.DATA=iwslt15")
    assert proc.returncode != 0
    assert "an emulated Sockeye run reads no corpus (its workers build only Sockeye's arrays); drop --env.DATA" in (
        proc.stdout + proc.stderr)
