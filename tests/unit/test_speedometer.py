import pytest

from reprokit.run import speedometer as speedometer

NEW_FORMAT = """\
2026-11-22 11:36:01,635 Epoch[0] Batch [0-10]\tSpeed: 36.63 samples/sec\taccuracy=0.002841
2026-11-22 11:36:08,967 Epoch[0] Batch [10-20]\tSpeed: 40.00 samples/sec\taccuracy=0.021875
2026-11-22 11:36:16,147 Epoch[0] Batch [20-30]\tSpeed: 60.00 samples/sec\taccuracy=0.331250\ttop_k_accuracy_5=0.5
2026-11-22 11:36:16,753 Epoch[0] Time cost=26.204
"""

# MXNet 1.1-era (the P3 artifact): index only, logged through logging's default format.
OLD_FORMAT = """\
INFO:root:Epoch[0] Batch [20]\tSpeed: 123.45 samples/sec\taccuracy=0.001563
INFO:root:Epoch[0] Batch [40]\tSpeed: 130.00 samples/sec\taccuracy=0.003125
INFO:root:Epoch[0] Batch [60]\tSpeed: 120.00 samples/sec\taccuracy=0.003125
INFO:root:Epoch[0] Train-accuracy=0.003125
INFO:root:Epoch[0] Time cost=1234.5
INFO:root:Epoch[1] Batch [20]\tSpeed: 99.00 samples/sec\taccuracy=0.01
INFO:root:Epoch[1] Batch [40]\tSpeed: 101.00 samples/sec\taccuracy=0.01
"""


def test_new_format_reports_carry_their_batch_ranges():
    reports = speedometer.parse_reports(NEW_FORMAT)[""]
    assert [(r.epoch, r.batch_end, r.batches, r.samples_per_sec) for r in reports] == [
        (0, 10, 10, 36.63), (0, 20, 10, 40.0), (0, 30, 10, 60.0)]


def test_old_format_batches_come_from_distance_between_reports():
    reports = speedometer.parse_reports(OLD_FORMAT)[""]
    assert [(r.epoch, r.batch_end, r.batches) for r in reports] == [
        (0, 20, 20), (0, 40, 20), (0, 60, 20), (1, 20, 20), (1, 40, 20)]


def test_warmup_drops_first_report_of_every_epoch():
    kept = speedometer.steady_state(speedometer.parse_reports(OLD_FORMAT)[""])
    assert [(r.epoch, r.samples_per_sec) for r in kept] == [(0, 130.0), (0, 120.0), (1, 101.0)]


def test_summary_is_total_samples_over_total_time_not_mean_of_speeds():
    kept = speedometer.steady_state(speedometer.parse_reports(NEW_FORMAT)[""])
    summary = speedometer.summarize(kept)
    # 10 batches at 40/s and 10 at 60/s: 2 intervals of 10*B/40 and 10*B/60 seconds -> 48/s, not 50/s.
    assert summary.samples_per_sec == pytest.approx(48.0)
    assert (summary.minimum, summary.maximum, summary.batches, summary.reports) == (40.0, 60.0, 20, 2)
    assert summary.std == pytest.approx(10.0)


def test_interleaved_roles_are_separated_by_prefix():
    merged = "\n".join([
        "[10.0.0.2 worker#0] Epoch[0] Batch [0-10]\tSpeed: 10.00 samples/sec\taccuracy=0.1",
        "[10.0.0.3 worker#1] Epoch[0] Batch [0-10]\tSpeed: 20.00 samples/sec\taccuracy=0.1",
        "[10.0.0.2 server#0] some server line with Speed: in it",
        "[10.0.0.3 worker#1] Epoch[0] Batch [10-20]\tSpeed: 22.00 samples/sec\taccuracy=0.1",
        "[10.0.0.2 worker#0] Epoch[0] Batch [10-20]\tSpeed: 11.00 samples/sec\taccuracy=0.1",
    ])
    grouped = speedometer.parse_reports(merged)
    assert sorted(grouped) == ["10.0.0.2 worker#0", "10.0.0.3 worker#1"]
    assert [r.samples_per_sec for r in grouped["10.0.0.2 worker#0"]] == [10.0, 11.0]
    assert [r.samples_per_sec for r in grouped["10.0.0.3 worker#1"]] == [20.0, 22.0]


def test_case_of_speed_does_not_matter_and_other_lines_are_ignored():
    text = "Epoch[2] Batch [5-10]\tspeed: 7.5 samples/sec\nEpoch[2] Time cost=3\nValidation-accuracy=0.5\n"
    reports = speedometer.parse_reports(text)[""]
    assert [(r.epoch, r.batches, r.samples_per_sec) for r in reports] == [(2, 5, 7.5)]


def test_nothing_measured_when_only_warmup_reports_exist():
    reports = speedometer.parse_reports("Epoch[0] Batch [0-10]\tSpeed: 5.0 samples/sec\n")[""]
    assert speedometer.summarize(speedometer.steady_state(reports)) is None
    assert speedometer.parse_reports("no speedometer here\n") == {}


def test_checksums_by_rank():
    text = ("2026 Parameter checksum: rank=1 sha256=" + "a" * 64 + " params=193\n"
            "2026 Parameter checksum: rank=0 sha256=" + "b" * 64 + " params=193\n")
    assert speedometer.parse_checksums(text) == {1: "a" * 64, 0: "b" * 64}


def test_sockeye_reports_give_tokens_per_second_too():
    log = "".join(
        f"[INFO:sockeye.training] Epoch[0] Batch [{b}]\tSpeed: {s:.2f} samples/sec {t:.2f} tokens/sec "
        f"0.51 updates/sec\tperplexity=1079.38\n"
        for b, s, t in ((10, 16.0, 400.0), (20, 10.0, 200.0), (30, 20.0, 500.0)))
    reports = speedometer.parse_reports(log)[""]
    assert [(r.batch_end, r.batches, r.tokens_per_sec) for r in reports] == [(10, 10, 400.0), (20, 10, 200.0),
                                                                             (30, 10, 500.0)]
    worker = speedometer.summarize(speedometer.steady_state(reports))
    # Two reports of 10 batches: 1.0 and 0.5 time units; tokens weighted by duration.
    assert worker.samples_per_sec == pytest.approx(20 / (10 / 10.0 + 10 / 20.0))
    assert worker.tokens_per_sec == pytest.approx((200.0 * 1.0 + 500.0 * 0.5) / 1.5)


def test_image_reports_have_no_tokens():
    worker = speedometer.summarize(speedometer.parse_reports("Epoch[0] Batch [10-20]\tSpeed: 5.00 samples/sec\n")[""])
    assert worker.tokens_per_sec is None
