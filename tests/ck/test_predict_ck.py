import subprocess

"""`ck predict study:sysml19-p3` through the real ck CLI (stdin closed): the predicted table and its plot."""
STUDY = "study:sysml19-p3"


def test_predict_prints_a_predicted_table_and_writes_the_plot(bare_ck, tmp_path):
    out = tmp_path / "predicted"
    proc = bare_ck("predict", STUDY, "--model=resnet", "--bandwidths=1gbit,100gbit", "--workers=4",
                   f"--out_dir={out}", f"--store={tmp_path / 'store'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("PREDICTED by the iteration model (not measured): resnet (3,224,224)")
    assert lines[1].startswith("compute per iteration on P4000: ")  # the paper's GPU unless --gpu says otherwise
    rows = [line for line in lines if line.startswith("| P4000 | 4 |")]
    assert [row.split("|")[4].strip() for row in rows] == ["1gbit", "100gbit"]
    header = next(line for line in lines if line.startswith("| compute | workers"))
    assert all("predicted" in cell for cell in header.strip("|").split("|")[4:])
    slow, fast = (float(row.split("|")[6]) for row in rows)  # p3's seconds per iteration
    assert slow > fast > 0
    speedups = [float(row.split("|")[7].strip().rstrip("x")) for row in rows]
    assert all(s >= 1.0 for s in speedups)
    png = out / "predicted-speedup-resnet.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Traceback" not in proc.stdout + proc.stderr


def test_predict_refuses_bad_input_in_one_line(bare_ck, tmp_path):
    for args, says in ((["--model=alexnet", "--bandwidths=1gbit", "--workers=4"], "no layer profile"),
                       (["--model=vgg", "--bandwidths=fast", "--workers=4"], "is not a rate"),
                       (["--model=vgg", "--bandwidths=1gbit", "--workers=0"], "--workers must be at least 1"),
                       (["--model=vgg", "--bandwidths=1gbit", "--workers=4", "--compute_scale=2",
                         "--images_per_sec=10"], "not both"),
                       (["--model=vgg", "--bandwidths=1gbit", "--workers=4", "--wrokers=5"], "unknown option"),
                       (["--model=vgg", "--bandwidths=1gbit", "--workers=4", "--gpu=rtx"],
                        "unknown --gpu 'rtx'; valid ones: p4000 (the paper's), titan-x-maxwell, v100, a100, h100, or "
                        "measured:FILE")):
        proc = bare_ck("predict", STUDY, *args, f"--store={tmp_path / 'store'}")
        text = proc.stdout + proc.stderr
        assert proc.returncode != 0 and says in text and "Traceback" not in text, (args, text)
        assert len([line for line in text.splitlines() if line.strip()]) == 1, text


def test_predict_into_a_reader_that_closes_at_once_ends_quietly_with_1(bare_ck, tmp_path):
    proc = subprocess.Popen([bare_ck.exe, "predict", STUDY, "--model=resnet", "--bandwidths=1gbit", "--workers=4",
                             f"--out_dir={tmp_path / 'predicted'}", f"--store={tmp_path / 'store'}"],
                            env=bare_ck.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=bare_ck.root)
    proc.stdout.close()  # as `| head -0` does, long before ck has imported anything
    _, errors = proc.communicate(timeout=300)
    assert proc.returncode == 1 and errors == "", errors


def test_predict_on_several_gpus_gives_a_row_per_gpu_each_named(bare_ck, tmp_path):
    proc = bare_ck("predict", STUDY, "--model=resnet", "--bandwidths=4gbit", "--workers=4",
                   "--gpu=p4000,v100,a100,h100", f"--out_dir={tmp_path / 'predicted'}", f"--store={tmp_path / 'store'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.startswith("| ") and "| 4 |" in line]
    assert [r[1].strip() for r in rows] == ["P4000", "V100", "A100", "H100"]
    compute = [float(r[6]) for r in rows]  # p3's seconds per iteration: faster GPUs never slower
    assert compute == sorted(compute, reverse=True)
