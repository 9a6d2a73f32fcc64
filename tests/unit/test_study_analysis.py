"""Statistics, verdicts and badges of a study on constructed result sets (no ck, no MXNet)."""
import json
import math
from dataclasses import replace

import pytest

from reprokit.core.errors import UserError
from reprokit.study.analysis.analyse import analyse
from reprokit.study.analysis.badge import BadgeStatus
from reprokit.study.analysis.speedup import claim_pairs, mean_interval, ratio_interval, t_quantile
from reprokit.study.analysis.verdict import Verdict
from reprokit.study.paper import claims as studies, planning, target
from reprokit.study.paper.claims import from_meta, repository_meta, repository_study
from reprokit.study.paper.rates import NATIVE
from reprokit.study.sweep.options import select
from support.study_data import ALL_MODELS, CLUSTER4, EMBEDDED, STUDY_META, TESTBED4, records, study, verdict_of


def log_interval(values, confidence=0.95):
    """The expected log-scale interval, computed here from its definition."""
    logs = [math.log(v) for v in values]
    n, m = len(logs), sum(logs) / len(logs)
    s = math.sqrt(sum((x - m) ** 2 for x in logs) / (n - 1))
    half = t_quantile(0.5 + confidence / 2, n - 1) * s / math.sqrt(n)
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def test_t_quantiles_match_tables():
    assert t_quantile(0.975, 1) == pytest.approx(12.706, abs=1e-3)
    assert t_quantile(0.975, 2) == pytest.approx(4.303, abs=1e-3)
    assert t_quantile(0.975, 9) == pytest.approx(2.262, abs=1e-3)
    assert t_quantile(0.975, 1e6) == pytest.approx(1.960, abs=1e-3)
    assert t_quantile(0.025, 4) == pytest.approx(-2.776, abs=1e-3)


def test_mean_interval_is_the_log_scale_t_interval_of_the_geometric_mean():
    stats = mean_interval([10.0, 12.0, 14.0], 0.95)
    assert (stats.n, stats.mean, stats.std) == (3, 12.0, 2.0)  # as measured
    gmean, low, high = log_interval([10.0, 12.0, 14.0])
    assert (stats.geometric_mean, stats.low, stats.high) == pytest.approx((gmean, low, high))
    assert stats.low < stats.geometric_mean < stats.mean < stats.high
    assert stats.high / stats.geometric_mean == pytest.approx(stats.geometric_mean / stats.low)  # multiplicative
    single = mean_interval([5.0], 0.95)
    assert single.n == 1 and single.geometric_mean == pytest.approx(5.0) and math.isnan(single.low)
    with pytest.raises(ValueError, match="positive"):
        mean_interval([10.0, 0.0], 0.95)


def test_ratio_interval_is_the_welch_interval_of_log_means():
    ratio, low, high = ratio_interval([12.0, 12.5, 13.0], [10.0, 10.0, 10.0])
    assert ratio == pytest.approx(log_interval([12.0, 12.5, 13.0])[0] / 10.0) and low < ratio < high
    # one side without spread: the Welch interval is the other side's log-scale interval over the constant
    assert (low, high) == pytest.approx((log_interval([12.0, 12.5, 13.0])[1] / 10, log_interval([12.0, 12.5, 13.0])[2] / 10))
    inverse = ratio_interval([10.0, 10.0, 10.0], [12.0, 12.5, 13.0])
    assert inverse == pytest.approx((1 / ratio, 1 / high, 1 / low))  # swapping the variants inverts it exactly
    assert math.isnan(ratio_interval([2.0], [1.0, 1.1])[1])  # too few values
    assert ratio_interval([2.0, 2.0], [1.0, 1.0]) == (2.0, 2.0, 2.0)


def test_small_n_wide_spread_and_ratio_near_zero_never_fall_below_zero():
    two = mean_interval([50.0, 150.0], 0.95)  # n=2: t(0.975, 1) = 12.7
    assert 0 < two.low < 1.0 and two.high > 10_000  # very wide, but above zero
    raw_half = t_quantile(0.975, 2) * 49.5 / math.sqrt(3)  # the raw-scale interval would reach below zero
    spread = mean_interval([1.0, 50.0, 100.0], 0.95)
    assert spread.mean - raw_half < 0 < spread.low < spread.geometric_mean < spread.high
    ratio, low, high = ratio_interval([0.01, 0.5, 0.02], [100.0, 101.0, 99.0])
    assert 0 < low < ratio < 1e-3 and high < 1.0
    ratio, low, high = ratio_interval([1e-9, 3e-9], [1.0, 1.2])  # n=2 a side and a ratio of 1e-9
    assert 0 < low < ratio < high


def test_too_few_runs_say_so_plainly_in_the_summary_and_the_speedups():
    analysis = analyse(study(), records("resnet", "4gbit", [100.0, 101.0], [126.0, 125.0, 127.0], target=CLUSTER4),
                       ALL_MODELS)
    notes = dict(zip(analysis.summary["variant"], analysis.summary["note"]))
    assert notes == {"baseline": "n=2 < 3: no verdict", "p3": ""}
    assert set(analysis.speedups["note"]) == {"n=2 < 3: no verdict"}


def test_verdicts_and_badge_statuses_are_shown_and_stored_as_their_plain_strings():
    assert [v.value for v in Verdict] == ["replicated", "not replicated", "inconclusive", "not testable here"]
    assert [b.value for b in BadgeStatus] == ["recommended", "not recommended", "undecided"]
    analysis = analyse(study(), records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0],
                                        target=CLUSTER4), ALL_MODELS)
    v = verdict_of(analysis, "resnet-4gbit")
    assert f"{v.verdict}" == str(v.verdict) == "replicated" and v.verdict == "replicated"
    assert json.loads(json.dumps(v.to_dict()))["verdict"] == "replicated"
    assert json.loads(json.dumps(analysis.badges[0].to_dict()))["status"] == f"{analysis.badges[0].status}"


def test_t_quantiles_refuse_what_has_no_quantile():
    for p, df in ((0.0, 3), (1.0, 3), (0.975, 0), (0.975, -1)):
        with pytest.raises(ValueError, match="t_quantile needs"):
            t_quantile(p, df)


def test_clear_pass_is_replicated():
    runs = records("resnet", "4gbit", [100.0, 101.0, 99.0, 100.5], [126.0, 125.0, 127.0, 126.5], target=CLUSTER4)
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == Verdict.REPLICATED, v.reason
    assert v.speedup == pytest.approx(1.26, abs=0.01) and v.n == 4 and v.measured
    assert "reaches the claimed 1.26x" in v.reason


def test_clear_fail_is_not_replicated():
    runs = records("resnet", "4gbit", [100.0, 101.0, 99.0], [70.0, 71.0, 70.5], target=CLUSTER4)
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == Verdict.NOT_REPLICATED
    assert "below the claimed 1.26x" in v.reason


def test_wide_interval_is_inconclusive():
    runs = records("resnet", "4gbit", [100.0, 60.0, 140.0], [126.0, 80.0, 170.0], target=CLUSTER4)
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == Verdict.INCONCLUSIVE
    assert "wider than" in v.reason


def test_too_few_runs_is_inconclusive_even_with_a_matching_mean():
    runs = records("resnet", "4gbit", [100.0, 100.2], [126.0, 126.1], target=CLUSTER4)
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == Verdict.INCONCLUSIVE and "n=2 < 3: no verdict" in v.reason


def test_failed_runs_do_not_count_towards_n():
    runs = records("resnet", "4gbit", [100.0, 101.0, None], [126.0, 125.0, 127.0], target=CLUSTER4)
    analysis = analyse(study(), runs, ALL_MODELS)
    assert verdict_of(analysis, "resnet-4gbit").verdict == Verdict.INCONCLUSIVE
    row = analysis.summary[(analysis.summary["variant"] == "baseline")].iloc[0]
    assert (row["n"], row["failed"]) == (2, 1)


def test_missing_configuration_is_inconclusive_and_says_what_to_run():
    runs = records("resnet", "1gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=CLUSTER4)  # not at the claim's 4gbit
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == Verdict.INCONCLUSIVE
    assert v.reason.startswith("not measured") and "--bandwidths=4gbit" in v.reason
    assert not v.measured  # measured_at_all reads this, not the reason


def test_up_to_claim_is_replicated_where_some_configuration_reaches_it():
    runs = (records("vgg", "1gbit", [50.0, 50.5, 49.5], [82.0, 83.0, 83.5], target=CLUSTER4)
            + records("vgg", "30gbit", [90.0, 91.0, 90.5], [92.0, 91.5, 92.5], target=CLUSTER4))
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "vgg-up-to-66")
    assert v.verdict == Verdict.REPLICATED and v.bandwidth == "1gbit" and "at 1gbit reaches" in v.reason
    far_above = records("vgg", "1gbit", [50.0, 50.5, 49.5], [100.0, 101.0, 99.0], target=CLUSTER4)
    v = verdict_of(analyse(study(), far_above, ALL_MODELS), "vgg-up-to-66")  # 2x: "up to" 1.66x exceeded
    assert v.verdict == Verdict.REPLICATED and "exceeds the claimed 1.66x" in v.reason


def wide_at(speedup: float, spread: float):
    """p3 throughputs whose ratio over a steady baseline of 40 is ``speedup`` with a log-scale spread."""
    return [40.0 * speedup * math.exp(d) for d in (-spread, 0.0, spread)]


def test_up_to_claim_is_not_replicated_when_every_interval_stays_below_it_however_wide():
    # vgg-up-to-66 (1.66x, tol 0.10): 1.10x [0.83, 1.46] at 510mbit, too wide for the study (±31%) but wholly
    # below 1.56, and the other bandwidths further below: the claim is excluded everywhere measured
    steady = [40.0, 40.02, 39.98]
    runs = (records("vgg", "510mbit", steady, wide_at(1.10, 0.114), target=CLUSTER4)
            + records("vgg", "1gbit", steady, wide_at(0.95, 0.02), target=CLUSTER4)
            + records("vgg", "4gbit", steady, wide_at(0.80, 0.02), target=CLUSTER4))
    analysis = analyse(study(), runs, ALL_MODELS)
    row = analysis.speedups[(analysis.speedups["bandwidth"] == "510mbit") & (analysis.speedups["variant"] == "p3")
                            & (analysis.speedups["versus"] == "baseline")].iloc[0]
    assert (row["speedup"], row["ci_low"], row["ci_high"]) == pytest.approx((1.10, 0.83, 1.46), abs=0.01)
    v = verdict_of(analysis, "vgg-up-to-66")
    assert v.verdict == Verdict.NOT_REPLICATED, v.reason
    assert v.bandwidth == "510mbit" and v.ci_high == pytest.approx(1.46, abs=0.01)  # the nearest of them
    assert v.reason.startswith("the interval of every configuration with enough runs lies below the claimed 1.66x")
    for bw in ("510mbit", "1gbit", "4gbit"):
        assert f"at {bw}" in v.reason
    # the same wide interval reaching the band settles nothing: inconclusive, and it says why
    reaching = records("vgg", "510mbit", steady, wide_at(1.35, 0.114), target=CLUSTER4) + runs[6:]
    v = verdict_of(analyse(study(), reaching, ALL_MODELS), "vgg-up-to-66")
    assert v.verdict == Verdict.INCONCLUSIVE and v.bandwidth == "510mbit"
    assert "reaches the claimed 1.66x ± 0.10 but is wider than the ±15% the study accepts" in v.reason
    # a narrow interval reaching it elsewhere decides, whatever the wide one does
    decided = reaching + records("vgg", "300mbit", steady, wide_at(1.62, 0.01), target=CLUSTER4)
    v = verdict_of(analyse(study(), decided, ALL_MODELS), "vgg-up-to-66")
    assert v.verdict == Verdict.REPLICATED and v.bandwidth == "300mbit"


def test_smoke_profile_cannot_replicate_a_paper_claim():
    runs = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], profile="smoke", target=CLUSTER4)
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == Verdict.INCONCLUSIVE and "smoke profile" in v.reason


def test_embedded_default_makes_every_claim_not_testable():
    runs = records("resnet", "native", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=EMBEDDED, profile="smoke")
    analysis = analyse(study(), runs, ALL_MODELS)
    assert {v.verdict for v in analysis.verdicts} == {Verdict.NOT_TESTABLE}
    assert "loopback" in verdict_of(analysis, "resnet-4gbit").reason
    assert analysis.badges[2].status == "undecided"


def test_bandwidth_beyond_the_links_is_not_testable():
    slow_cluster = replace(TESTBED4, name="c1", kind="cluster", shaping=False, link_capacity="1gbit", testbed=None)
    runs = records("vgg", "1gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=slow_cluster)
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "vgg-15gbit")
    assert v.verdict == Verdict.NOT_TESTABLE and "15gbit" in v.reason and "native bandwidth (1gbit)" in v.reason
    shaped_but_slow = replace(TESTBED4, link_capacity="10gbit")
    runs = records("vgg", "1gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=shaped_but_slow)
    assert "exceeds" in verdict_of(analyse(study(), runs, ALL_MODELS), "vgg-15gbit").reason


def test_other_cluster_size_and_missing_model_are_not_testable():
    three = replace(TESTBED4, hosts=TESTBED4.hosts[:3])
    runs = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=three)
    analysis = analyse(study(), runs, {"resnet", "vgg"})
    assert "4 machines; this target has 3" in verdict_of(analysis, "resnet-4gbit").reason
    sockeye = verdict_of(analysis, "sockeye-up-to-38")
    assert sockeye.verdict == Verdict.NOT_TESTABLE and "no cmd_key 'sockeye'" in sockeye.reason


def test_imported_runs_are_their_own_setup_and_a_failure_anywhere_wins_overall():
    local = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=CLUSTER4)
    remote = [replace(r, imported_from="bundle-1")
              for r in records("resnet", "4gbit", [100.0, 101.0, 99.0], [70.0, 71.0, 70.5], origin="o-remote",
                               target=CLUSTER4)]
    analysis = analyse(study(), local + remote, ALL_MODELS)
    per_setup = {v.setup: v.verdict for v in analysis.verdicts if v.claim == "resnet-4gbit"}
    assert sorted(per_setup.values()) == [Verdict.NOT_REPLICATED, Verdict.REPLICATED]
    assert analysis.overall["resnet-4gbit"] == Verdict.NOT_REPLICATED
    assert analysis.badges[2].status == "not recommended"


def test_badges_functional_and_reproduced():
    every_claim = []
    for claim in study().claims:
        bw = claim.bandwidth or "4gbit"
        base = [100.0, 100.5, 99.5]
        every_claim += records(claim.model, bw, base, [b * claim.speedup for b in base], variant=claim.variant,
                               target=CLUSTER4)
    analysis = analyse(study(), every_claim, ALL_MODELS)
    assert set(analysis.overall.values()) == {Verdict.REPLICATED}
    names = {b.name: b.status for b in analysis.badges}
    # Functional is the authors' artifact's badge: our stock MXNet runs alone leave it undecided, and say so.
    assert names == {"Artifacts Available": "recommended", "Artifacts Evaluated - Functional": "undecided",
                     "Results Reproduced": "recommended"}
    assert analysis.badges[1].reasons[0].startswith("the authors' artifact never ran here")
    assert analysis.badges[1].rests_on == "runs of stock MXNet 1.9.1 (not the authors' artifact)"
    assert "(not the authors' artifact)" in analysis.badges[2].rests_on
    theirs = analyse(study(), every_claim + records("resnet", "4gbit", [100.0, 99.0, 101.0], [120.0, 121.0, 119.0],
                                                     engine="artifact", target=CLUSTER4), ALL_MODELS).badges[1]
    assert theirs.status == "recommended" and "the authors'" in theirs.rests_on
    broken = records("vgg", "4gbit", [None, None], [None])
    functional = analyse(study(), broken, ALL_MODELS).badges[1]
    assert functional.status == "not recommended" and "all 2 run(s) failed" in functional.reasons[0]


def test_study_entry_is_data_and_malformed_entries_are_refused_in_one_line():
    s = study()
    assert [c.source for c in s.claims].count("abstract") == 3
    assert s.matrix.models == ("resnet", "inception-v3", "vgg", "sockeye")
    bad = json.loads(json.dumps(STUDY_META))
    del bad["tolerance"]["speedup"]
    with pytest.raises(UserError, match="study:x.tolerance has no 'speedup'; fix the study entry's meta"):
        studies.from_meta("x", bad)
    bad = json.loads(json.dumps(STUDY_META))
    bad["claims"][0]["bandwidth"] = "fast"
    with pytest.raises(UserError, match="not a rate"):
        studies.from_meta("x", bad)
    for key, value, message in (("budget_minutes", "half an hour", "quick.budget_minutes must be a finite number, got 'half an hour'"),
                                ("run_seconds", {"vgg": -1}, "quick.run_seconds must be an object mapping each model to a positive number")):
        bad = json.loads(json.dumps(STUDY_META))
        bad["quick"][key] = value
        with pytest.raises(UserError, match=message):
            studies.from_meta("x", bad)
    assert (s.quick.budget_s, dict(s.quick.run_seconds)) == (1800.0, {"resnet": 20.0, "vgg": 30.0})
    assert s.quick.ratios == (1.6,) and s.quick.why.startswith("30 minutes on this 2-core machine")


def test_interleaved_plan_and_bandwidth_choice():
    plan = planning.plan_runs(["resnet"], ["baseline", "p3"], ["1gbit"], 3)
    assert [r.variant for r in plan] == ["baseline", "p3", "p3", "baseline", "baseline", "p3"]
    embedded = target.make_target("", None, None)
    assert target.sweep_bandwidths(embedded, None, study().matrix) == (NATIVE,)
    with pytest.raises(UserError, match="--bandwidths needs a target whose links can be shaped"):
        target.sweep_bandwidths(embedded, ["1gbit"], study().matrix)
    with pytest.raises(UserError, match="unknown model"):
        select("resnet,alexnet", study().matrix.models, "model(s)")


# --- verdicts on a CPU testbed --------------------------------------------------------------------

def test_a_claim_at_a_bandwidth_is_not_testable_on_a_cpu_testbed_without_the_papers_ratio():
    runs = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], ratio=0.5)
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == Verdict.NOT_TESTABLE
    assert "CPU testbed" in v.reason and "no sourced figure for the paper setting's ratio" in v.reason
    assert v.reason.endswith("add claims[].paper_comm_to_compute with its source")


def study_with_paper_ratio(value: float):
    meta = json.loads(json.dumps(STUDY_META))
    [claim] = [c for c in meta["claims"] if c["id"] == "resnet-4gbit"]
    claim["paper_comm_to_compute"] = {"value": value, "source": "a constructed fact for this test"}
    return studies.from_meta("sysml19-p3", meta)


def test_with_a_sourced_paper_ratio_a_bandwidth_claim_is_judged_where_the_testbed_has_that_ratio():
    runs = (records("resnet", "1gbit", [100.0, 101.0, 99.0], [100.0, 99.5, 100.5], ratio=0.6)
            + records("resnet", "300mbit", [50.0, 50.5, 49.5], [63.0, 63.5, 62.5], ratio=2.1))
    v = verdict_of(analyse(study_with_paper_ratio(2.0), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == Verdict.REPLICATED and v.bandwidth == "300mbit" and v.comm_to_compute == pytest.approx(2.1)
    assert "at 300mbit (communication/computation 2.10)" in v.reason
    far = verdict_of(analyse(study_with_paper_ratio(5.0), runs, ALL_MODELS), "resnet-4gbit")
    assert far.verdict == Verdict.INCONCLUSIVE
    assert "has communication/computation 5.00 (a constructed fact for this test)" in far.reason
    assert "the nearest measured here is 2.10 at 300mbit" in far.reason
    bad = json.loads(json.dumps(STUDY_META))
    bad["claims"][3]["paper_comm_to_compute"] = {"value": 2.0}
    with pytest.raises(UserError, match="paper_comm_to_compute has no 'source'"):
        studies.from_meta("x", bad)


def quick_testbed_runs(best: float, ratios=(0.8, 1.5, 3.9), n_best: int = 3):
    """A quick (smoke) sweep on a 3-host testbed: vgg at three chosen bandwidths, p3 best at the lowest."""
    three = replace(TESTBED4, hosts=TESTBED4.hosts[:3])
    base = [40.0, 40.4, 39.6]
    out = []
    for bw, ratio, speedup in zip(("5800mbit", "1900mbit", "720mbit"), ratios, (0.9, 1.2, best)):
        p3 = [b * speedup for b in base][: n_best if bw == "720mbit" else 3]
        out += records("vgg", bw, base, p3, target=three, profile="smoke", ratio=ratio)
    return out


def test_up_to_claims_on_a_cpu_testbed_are_judged_at_the_best_bandwidth_in_any_profile():
    v = verdict_of(analyse(study(), quick_testbed_runs(best=1.62), ALL_MODELS), "vgg-up-to-66")
    assert v.verdict == Verdict.REPLICATED, v.reason
    assert (v.bandwidth, v.n) == ("720mbit", 3) and v.comm_to_compute == pytest.approx(3.9)
    assert v.basis == ("CPU testbed, smoke profile, 3 bandwidth(s) with measured communication/computation "
                       "0.80 to 3.90")
    assert v.reason.startswith(v.basis + ": 1.62x [") and "at 720mbit (communication/computation 3.90) reaches" \
        in v.reason
    low = verdict_of(analyse(study(), quick_testbed_runs(best=1.05), ALL_MODELS), "vgg-up-to-66")
    assert low.verdict == Verdict.NOT_REPLICATED and low.reason.startswith("CPU testbed")
    # every configuration is named: the verdict rests on all three
    assert "the interval of every configuration with enough runs lies below the claimed 1.66x ± 0.10" in low.reason
    assert all(f"at {bw} (communication/computation" in low.reason for bw in ("5800mbit", "1900mbit", "720mbit"))
    # the bandwidth-stated claims stay out of reach: 4 machines, and no sourced ratio; both are said
    at_15 = verdict_of(analyse(study(), quick_testbed_runs(best=1.62), ALL_MODELS), "vgg-15gbit")
    assert at_15.verdict == Verdict.NOT_TESTABLE and at_15.reason.startswith("the claim is for 4 machines; this target has 3")
    assert "; and the claim is at 15gbit on the paper's GPU machines; on this CPU testbed" in at_15.reason


def test_up_to_claims_need_a_communication_bound_setting_and_enough_runs_at_the_best_one():
    compute_bound = quick_testbed_runs(best=1.62, ratios=(0.2, 0.4, 0.7))
    v = verdict_of(analyse(study(), compute_bound, ALL_MODELS), "vgg-up-to-66")
    assert v.verdict == Verdict.INCONCLUSIVE and "kept the baseline compute-bound (communication/computation at most 0.70)" \
        in v.reason
    thin = quick_testbed_runs(best=1.62, n_best=2)  # the best bandwidth has n=2: judged where n suffices
    v = verdict_of(analyse(study(), thin, ALL_MODELS), "vgg-up-to-66")
    assert v.bandwidth == "1900mbit" and v.verdict == Verdict.NOT_REPLICATED
    assert v.reason.endswith("(not counted, n < 3: 720mbit n=2)")  # said, not hidden
    all_thin = [r for r in thin if r.config.repetition < 3]
    v = verdict_of(analyse(study(), all_thin, ALL_MODELS), "vgg-up-to-66")
    assert v.verdict == Verdict.INCONCLUSIVE and "n=2 < 3: no verdict" in v.reason


def test_a_study_may_not_give_verdicts_on_fewer_than_3_runs():
    bad = json.loads(json.dumps(STUDY_META))
    bad["tolerance"]["min_runs"] = 2
    with pytest.raises(UserError, match="tolerance 'min_runs' is 2; a verdict needs at least 3 runs per configuration"):
        studies.from_meta("x", bad)


def test_each_repetition_takes_its_turn_in_the_order_reversed_every_other_time():
    assert [planning.in_turn("abc", rep) for rep in (1, 2, 3)] == [list("abc"), list("cba"), list("abc")]


def test_the_repository_study_entry_reads_without_ck_as_ck_reads_it():
    entry = repository_study("sysml19-p3")
    assert entry == from_meta("sysml19-p3", STUDY_META) and repository_meta("sysml19-p3") == STUDY_META
    assert "source" not in entry.parameters and entry.parameters["resnet"] and entry.parameters_source


def test_plan_runs_takes_each_models_own_bandwidths():
    plan = planning.plan_runs(["resnet", "vgg"], ["baseline", "p3"], ["1gbit"], 2,
                             per_model={"vgg": ["720mbit", "native"]})
    assert [r.label() for r in plan[:6]] == ["resnet baseline @ 1gbit #1", "resnet p3 @ 1gbit #1",
                                             "vgg baseline @ 720mbit #1", "vgg p3 @ 720mbit #1",
                                             "vgg baseline @ native #1", "vgg p3 @ native #1"]
    assert len(plan) == 12 and plan[6].label() == "resnet p3 @ 1gbit #2"


# --- engines: the authors' build and ours, side by side -------------------------------------------

def engine_verdict(analysis, claim_id, engine):
    [v] = [v for v in analysis.verdicts if v.claim == claim_id and v.engine == engine]
    return v


def test_variants_pair_within_one_engine_only_and_each_engine_gets_its_own_verdict():
    ours = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=CLUSTER4)
    theirs = records("resnet", "4gbit", [50.0, 50.5, 49.5], [200.0, 201.0, 199.0], target=CLUSTER4, engine="artifact")
    analysis = analyse(study(), ours + theirs, ALL_MODELS)
    p3 = analysis.speedups[(analysis.speedups["variant"] == "p3") & (analysis.speedups["versus"] == "baseline")]
    by_engine = dict(zip(p3["engine"], p3["speedup"]))
    assert by_engine == {"embedded": pytest.approx(1.26, abs=0.01), "artifact": pytest.approx(4.0, abs=0.01)}
    # neither MXNet 1.9.1's P3 over their baseline (2.52) nor theirs over the stock one (~2.0) is ever formed
    assert len(p3) == 2 and set(analysis.summary["engine"]) == {"embedded", "artifact"}
    assert engine_verdict(analysis, "resnet-4gbit", "embedded").verdict == Verdict.REPLICATED
    their_verdict = engine_verdict(analysis, "resnet-4gbit", "artifact")
    assert their_verdict.verdict == Verdict.NOT_REPLICATED and "above the claimed 1.26x" in their_verdict.reason
    assert analysis.overall_by_engine["artifact"]["resnet-4gbit"] == Verdict.NOT_REPLICATED
    assert analysis.overall_by_engine["embedded"]["resnet-4gbit"] == Verdict.REPLICATED
    # the authors' build was measured for this claim: it decides the overall verdict and the badge
    assert analysis.decided["resnet-4gbit"] == "artifact" and analysis.overall["resnet-4gbit"] == Verdict.NOT_REPLICATED
    reproduced = analysis.badges[2]
    assert reproduced.status == "not recommended"
    assert any(r.startswith("judged on the authors' build") and "resnet-4gbit" in r for r in reproduced.reasons)
    [comparison] = [r for r in reproduced.reasons if r.startswith("MXNet 1.9.1's P3, for comparison: ")]
    assert "resnet-4gbit replicated" in comparison


def test_a_missing_engine_variant_gives_no_speedup_and_the_side_by_side_says_not_measured():
    ours = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=CLUSTER4)
    their_baseline = records("resnet", "4gbit", [50.0, 50.5, 49.5], [], target=CLUSTER4, engine="artifact")
    analysis = analyse(study(), ours + their_baseline, ALL_MODELS)
    assert set(analysis.speedups["engine"]) == {"embedded"}
    [row] = analysis.side_by_side.to_dict("records")
    assert (row["artifact_baseline_n"], row["artifact_p3_n"], row["embedded_p3_n"]) == (3, 0, 3)
    assert math.isnan(row["artifact_p3_geometric_mean"]) and math.isnan(row["artifact_speedup"])
    assert row["embedded_speedup"] == pytest.approx(1.26, abs=0.01) and row["embedded_speedup_n"] == 3
    v = engine_verdict(analysis, "resnet-4gbit", "artifact")
    assert v.verdict == Verdict.INCONCLUSIVE and "on the authors' build" in v.reason and "--engines=artifact" in v.reason
    assert analysis.decided["resnet-4gbit"] == "embedded"  # their P3 never ran: ours decides


def every_claim_runs(speedup_of, engine):
    """Runs of every claim's configuration at the speedup ``speedup_of(claim)`` on one engine (the authors'
    build runs only baseline and p3, so it skips the slicing-only claim)."""
    out = []
    for claim in study().claims:
        if engine == "artifact" and claim.variant != "p3":
            continue
        base = [100.0, 100.5, 99.5]
        out += records(claim.model, claim.bandwidth or "4gbit", base, [b * speedup_of(claim) for b in base],
                       variant=claim.variant, target=CLUSTER4, engine=engine)
    return out


def test_results_reproduced_uses_the_authors_build_where_measured_and_says_so():
    ours_fail = every_claim_runs(lambda c: 1.0 if c.variant == "p3" else c.speedup, "embedded")
    theirs_pass = every_claim_runs(lambda c: c.speedup, "artifact")
    analysis = analyse(study(), ours_fail + theirs_pass, ALL_MODELS)
    badge = analysis.badges[2]
    assert badge.status == "recommended", badge.reasons
    theirs = [c.id for c in study().claims if c.variant == "p3"]
    assert f"judged on the authors' build (their baseline and P3 builds, measured here): {', '.join(theirs)}" \
        in badge.reasons
    assert any(r.startswith("judged on MXNet 1.9.1's own P3") and r.endswith(": vgg-slicing-30gbit")
               for r in badge.reasons)  # their builds have no slicing-only variant
    assert any(r.startswith("MXNet 1.9.1's P3, for comparison") and "not replicated" in r for r in badge.reasons)
    # without the authors' build, ours decide, and the badge says the authors' build was not measured
    alone = analyse(study(), ours_fail, ALL_MODELS).badges[2]
    assert alone.status == "not recommended"
    assert any("since the authors' build was not measured where the claims can be tested" in r
               for r in alone.reasons)


def test_the_authors_build_takes_our_baselines_ratio_and_functional_counts_both_engines():
    three = replace(TESTBED4, hosts=TESTBED4.hosts[:3])
    base = [40.0, 40.4, 39.6]
    ours = records("vgg", "720mbit", base, [b * 1.2 for b in base], target=three, profile="smoke", ratio=3.9)
    theirs = records("vgg", "720mbit", base, [b * 1.62 for b in base], target=three, profile="smoke",
                     engine="artifact")  # their builds print no p3-comm line
    analysis = analyse(study(), ours + theirs, ALL_MODELS)
    theirs_row = analysis.speedups[analysis.speedups["engine"] == "artifact"].iloc[0]
    assert theirs_row["comm_to_compute"] == pytest.approx(3.9) and theirs_row["ratio_engine"] == "embedded"
    v = engine_verdict(analysis, "vgg-up-to-66", "artifact")
    assert v.verdict == Verdict.REPLICATED, v.reason
    assert "(communication/computation 3.90 as stock MXNet 1.9.1's baseline measured it there)" in v.reason
    functional = analysis.badges[1]
    assert functional.status == "recommended"
    assert "vgg p3 (the authors' build): 3 of 3 run(s) succeeded, workers' parameters not checked (no run saved " \
           "them)" in functional.reasons
    broken = analyse(study(), ours + records("vgg", "720mbit", [None], [None], target=three, engine="artifact"),
                     ALL_MODELS).badges[1]
    assert broken.status == "not recommended"
    assert any(r.startswith("vgg baseline (the authors' build): all 1 run(s) failed") for r in broken.reasons)


def test_plan_runs_interleaves_the_engines_and_the_authors_build_runs_only_its_variants():
    plan = planning.plan_runs(["vgg"], ["baseline", "p3", "p3-slicing-only"], ["1gbit"], 2,
                             engines=("embedded", "artifact"))
    assert [r.label() for r in plan[:5]] == ["vgg baseline @ 1gbit #1", "vgg p3 @ 1gbit #1",
                                             "vgg p3-slicing-only @ 1gbit #1", "vgg artifact baseline @ 1gbit #1",
                                             "vgg artifact p3 @ 1gbit #1"]
    assert [(r.engine, r.variant) for r in plan[5:]] == [("artifact", "p3"), ("artifact", "baseline"),
                                                         ("embedded", "p3-slicing-only"), ("embedded", "p3"),
                                                         ("embedded", "baseline")]
    assert plan[0].record_id("s") == "s--vgg--baseline--1gbit--r1"  # as before engines: older sweeps resume
    assert plan[3].record_id("s") == "s--vgg--artifact--baseline--1gbit--r1"


# --- MXNet 1.9.1's P3 against both of its baselines -----------------------------------------------

def worker_update_runs(model, bandwidth, values, **kwargs):
    """Runs of the worker-update baseline only (records() adds a baseline run per value otherwise)."""
    return records(model, bandwidth, [], values, variant="baseline-worker-update", **kwargs)


def test_p3_variants_are_also_set_against_the_worker_update_baseline_and_the_authors_build_keeps_two():
    pairs = claim_pairs(study())
    for variant in ("p3", "p3-slicing-only", "p3-priority-only"):
        assert (variant, "baseline") in pairs and (variant, "baseline-worker-update") in pairs
    assert ("baseline-worker-update", "baseline") in pairs  # where the optimizer runs, on its own
    assert not any(versus == "baseline-worker-update" and variant.startswith("baseline") for variant, versus in pairs)
    assert study().variants["p3-priority-only"] == {"VARIANT": "p3", "P3_SLICE_SIZE": "0"}
    assert study().quick.variants == study().matrix.variants == ("baseline", "baseline-worker-update", "p3")
    three = ["baseline", "baseline-worker-update", "p3", "p3-slicing-only", "p3-priority-only"]
    assert planning.engine_variants("artifact", three) == ["baseline", "p3"]
    assert planning.engine_variants("embedded", three) == three


def test_the_worker_update_speedup_is_shown_beside_the_verdict_and_never_counted():
    # P3 is 1.26x the server-update baseline (the claim) but only 1.05x the worker-update one
    runs = (records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=CLUSTER4)
            + worker_update_runs("resnet", "4gbit", [120.0, 120.5, 119.5], target=CLUSTER4))
    analysis = analyse(study(), runs, ALL_MODELS)
    v = verdict_of(analysis, "resnet-4gbit")
    assert v.verdict == Verdict.REPLICATED and v.speedup == pytest.approx(1.26, abs=0.01)
    beside = v.versus_worker_update
    assert (beside.variant, beside.versus, beside.bandwidth, beside.n) == ("p3", "baseline-worker-update", "4gbit", 3)
    assert beside.speedup == pytest.approx(1.05, abs=0.01) and beside.ci_low < beside.speedup < beside.ci_high
    assert v.to_dict()["versus_worker_update"]["speedup"] == pytest.approx(1.05, abs=0.01)
    badge = analysis.badges[2]
    assert [r for r in badge.reasons if r.startswith("not counted: P3 over the worker-update baseline")]
    # the other way round: P3 matches the claim only over the worker-update baseline; the badge ignores that
    runs = (records("resnet", "4gbit", [100.0, 101.0, 99.0], [70.0, 71.0, 70.5], target=CLUSTER4)
            + worker_update_runs("resnet", "4gbit", [56.0, 56.3, 55.8], target=CLUSTER4))
    analysis = analyse(study(), runs, ALL_MODELS)
    v = verdict_of(analysis, "resnet-4gbit")
    assert v.verdict == Verdict.NOT_REPLICATED and v.versus_worker_update.speedup == pytest.approx(1.26, abs=0.01)
    assert analysis.badges[2].status == "not recommended"
    # without worker-update runs there is nothing beside
    alone = verdict_of(analyse(study(), runs[:6], ALL_MODELS), "resnet-4gbit")
    assert alone.versus_worker_update is None


def test_the_side_by_side_holds_the_authors_builds_and_mxnets_p3_with_both_baselines():
    runs = (records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=CLUSTER4)
            + worker_update_runs("resnet", "4gbit", [120.0, 120.5, 119.5], target=CLUSTER4)
            + records("vgg", "4gbit", [30.0, 31.0, 30.5], [40.0, 41.0, 39.0], target=CLUSTER4))
    table = {r["model"]: r for r in analyse(study(), runs, ALL_MODELS).side_by_side.to_dict("records")}
    resnet, vgg = table["resnet"], table["vgg"]
    assert (resnet["embedded_baseline-worker-update_n"], resnet["embedded_worker_update_speedup_n"]) == (3, 3)
    assert resnet["embedded_worker_update_speedup"] == pytest.approx(1.05, abs=0.01)
    assert resnet["embedded_speedup"] == pytest.approx(1.26, abs=0.01)
    assert vgg["embedded_baseline-worker-update_n"] == 0 and math.isnan(vgg["embedded_worker_update_speedup"])
    assert vgg["embedded_worker_update_speedup_n"] == 0 and vgg["artifact_speedup_n"] == 0  # "not measured"


def test_nothing_tested_is_said_first_with_the_reason_and_the_fix():
    embedded = analyse(study(), records("resnet", "native", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0],
                                        target=EMBEDDED, profile="smoke"), ALL_MODELS)
    assert embedded.untested.startswith("No claim could be tested on these runs: every run is on the embedded default")
    assert "ck testbed cluster:NAME --hosts=3" in embedded.untested
    assert embedded.untested.endswith("ck reproduce study:sysml19-p3 --target=NAME --quick")
    assert analyse(study(), [], ALL_MODELS).untested.startswith("No claim could be tested on these runs: no runs "
                                                               "stored yet.")
    only_emulated = records("vgg", "30gbit", [1.2, 1.16, 1.2], [1.19, 1.2, 1.2], emulated=True)
    assert analyse(study(), only_emulated, ALL_MODELS).untested.startswith(
        "No claim could be tested on these runs: no measured runs stored yet (the 6 emulated run(s) stored give "
        "emulated figures beside the claims, never a measured verdict).")
    tested = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=CLUSTER4)
    assert analyse(study(), tested, ALL_MODELS).untested == ""
