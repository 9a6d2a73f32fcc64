"""Statistics, verdicts and badges of a study on constructed result sets (no ck, no MXNet)."""
import json
import math
from dataclasses import replace

import pytest

from reprokit.study import claims as studies
from support.study_data import ALL_MODELS, EMBEDDED, STUDY_META, TESTBED4, records, study, verdict_of
from reprokit.errors import UserError
from reprokit.study.analysis import (INCONCLUSIVE, NOT_REPLICATED, NOT_TESTABLE, REPLICATED, analyse, mean_interval,
                                     ratio_interval, t_quantile)

def test_t_quantiles_match_tables():
    assert t_quantile(0.975, 1) == pytest.approx(12.706, abs=1e-3)
    assert t_quantile(0.975, 2) == pytest.approx(4.303, abs=1e-3)
    assert t_quantile(0.975, 9) == pytest.approx(2.262, abs=1e-3)
    assert t_quantile(0.975, 1e6) == pytest.approx(1.960, abs=1e-3)
    assert t_quantile(0.025, 4) == pytest.approx(-2.776, abs=1e-3)


def test_mean_interval_and_ratio_interval():
    stats = mean_interval([10.0, 12.0, 14.0], 0.95)
    assert (stats.n, stats.mean, stats.std) == (3, 12.0, 2.0)
    assert stats.high - stats.mean == pytest.approx(4.303 * 2 / math.sqrt(3), abs=1e-3)
    single = mean_interval([5.0], 0.95)
    assert single.n == 1 and math.isnan(single.low)
    ratio, low, high = ratio_interval([12.0, 12.5, 13.0], [10.0, 10.0, 10.0])
    assert ratio == pytest.approx(1.25) and low < 1.25 < high
    assert ratio_interval([2.0], [1.0, 1.1])[1] != ratio_interval([2.0], [1.0, 1.1])[1]  # NaN: too few values


def test_clear_pass_is_replicated():
    runs = records("resnet", "4gbit", [100.0, 101.0, 99.0, 100.5], [126.0, 125.0, 127.0, 126.5])
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == REPLICATED, v.reason
    assert v.speedup == pytest.approx(1.26, abs=0.01) and v.n == 4
    assert "reaches the claimed 1.26x" in v.reason


def test_clear_fail_is_not_replicated():
    runs = records("resnet", "4gbit", [100.0, 101.0, 99.0], [70.0, 71.0, 70.5])
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == NOT_REPLICATED
    assert "below the claimed 1.26x" in v.reason


def test_wide_interval_is_inconclusive():
    runs = records("resnet", "4gbit", [100.0, 60.0, 140.0], [126.0, 80.0, 170.0])
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == INCONCLUSIVE
    assert "wider than" in v.reason


def test_too_few_runs_is_inconclusive_even_with_a_matching_mean():
    runs = records("resnet", "4gbit", [100.0, 100.2], [126.0, 126.1])
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == INCONCLUSIVE and "the study needs 3" in v.reason


def test_failed_runs_do_not_count_towards_n():
    runs = records("resnet", "4gbit", [100.0, 101.0, None], [126.0, 125.0, 127.0])
    analysis = analyse(study(), runs, ALL_MODELS)
    assert verdict_of(analysis, "resnet-4gbit").verdict == INCONCLUSIVE
    row = analysis.summary[(analysis.summary["variant"] == "baseline")].iloc[0]
    assert (row["n"], row["failed"]) == (2, 1)


def test_missing_configuration_is_inconclusive_and_says_what_to_run():
    runs = records("resnet", "1gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0])  # not at the claim's 4gbit
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == INCONCLUSIVE
    assert v.reason.startswith("not measured") and "--bandwidths=4gbit" in v.reason


def test_up_to_claim_uses_the_best_tested_bandwidth():
    runs = (records("vgg", "1gbit", [50.0, 50.5, 49.5], [82.0, 83.0, 83.5])
            + records("vgg", "30gbit", [90.0, 91.0, 90.5], [92.0, 91.5, 92.5]))
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "vgg-up-to-66")
    assert v.verdict == REPLICATED and v.bandwidth == "1gbit"


def test_smoke_profile_cannot_replicate_a_paper_claim():
    runs = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], profile="smoke")
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "resnet-4gbit")
    assert v.verdict == INCONCLUSIVE and "smoke profile" in v.reason


def test_embedded_default_makes_every_claim_not_testable():
    runs = records("resnet", "native", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=EMBEDDED, profile="smoke")
    analysis = analyse(study(), runs, ALL_MODELS)
    assert {v.verdict for v in analysis.verdicts} == {NOT_TESTABLE}
    assert "loopback" in verdict_of(analysis, "resnet-4gbit").reason
    assert analysis.badges[2].status == "undecided"


def test_bandwidth_beyond_the_links_is_not_testable():
    slow_cluster = replace(TESTBED4, name="c1", kind="cluster", shaping=False, link_capacity="1gbit", testbed=None)
    runs = records("vgg", "1gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=slow_cluster)
    v = verdict_of(analyse(study(), runs, ALL_MODELS), "vgg-15gbit")
    assert v.verdict == NOT_TESTABLE and "15gbit" in v.reason and "native bandwidth (1gbit)" in v.reason
    shaped_but_slow = replace(TESTBED4, link_capacity="10gbit")
    runs = records("vgg", "1gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=shaped_but_slow)
    assert "exceeds" in verdict_of(analyse(study(), runs, ALL_MODELS), "vgg-15gbit").reason


def test_other_cluster_size_and_missing_model_are_not_testable():
    three = replace(TESTBED4, hosts=TESTBED4.hosts[:3])
    runs = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0], target=three)
    analysis = analyse(study(), runs, {"resnet", "vgg"})
    assert "4 machines; this target has 3" in verdict_of(analysis, "resnet-4gbit").reason
    sockeye = verdict_of(analysis, "sockeye-up-to-38")
    assert sockeye.verdict == NOT_TESTABLE and "no cmd_key 'sockeye'" in sockeye.reason


def test_imported_runs_are_their_own_setup_and_a_failure_anywhere_wins_overall():
    local = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0])
    remote = [replace(r, imported_from="bundle-1")
              for r in records("resnet", "4gbit", [100.0, 101.0, 99.0], [70.0, 71.0, 70.5], origin="o-remote")]
    analysis = analyse(study(), local + remote, ALL_MODELS)
    per_setup = {v.setup: v.verdict for v in analysis.verdicts if v.claim == "resnet-4gbit"}
    assert sorted(per_setup.values()) == [NOT_REPLICATED, REPLICATED]
    assert analysis.overall["resnet-4gbit"] == NOT_REPLICATED
    assert analysis.badges[2].status == "not recommended"


def test_badges_functional_and_reproduced():
    every_claim = []
    for claim in study().claims:
        bw = claim.bandwidth or "4gbit"
        base = [100.0, 100.5, 99.5]
        every_claim += records(claim.model, bw, base, [b * claim.speedup for b in base], variant=claim.variant)
    analysis = analyse(study(), every_claim, ALL_MODELS)
    assert set(analysis.overall.values()) == {REPLICATED}
    names = {b.name: b.status for b in analysis.badges}
    assert names == {"Artifacts Available": "recommended", "Artifacts Evaluated - Functional": "recommended",
                     "Results Reproduced": "recommended"}
    broken = records("vgg", "4gbit", [None, None], [None])
    functional = analyse(study(), broken, ALL_MODELS).badges[1]
    assert functional.status == "not recommended" and "all 2 run(s) failed" in functional.reasons[0]


def test_study_entry_is_data_and_malformed_entries_are_refused_in_one_line():
    s = study()
    assert [c.source for c in s.claims].count("abstract") == 3
    assert s.matrix.models == ("resnet", "inception-v3", "vgg", "sockeye")
    bad = json.loads(json.dumps(STUDY_META))
    del bad["tolerance"]["speedup"]
    with pytest.raises(UserError, match="'speedup' is missing"):
        studies.from_meta("x", bad)
    bad = json.loads(json.dumps(STUDY_META))
    bad["claims"][0]["bandwidth"] = "fast"
    with pytest.raises(UserError, match="not a rate"):
        studies.from_meta("x", bad)


def test_interleaved_plan_and_bandwidth_choice():
    plan = studies.plan_runs(["resnet"], ["baseline", "p3"], ["1gbit"], 3)
    assert [r.variant for r in plan] == ["baseline", "p3", "p3", "baseline", "baseline", "p3"]
    embedded = studies.make_target("", None, None)
    assert studies.sweep_bandwidths(embedded, None, study().matrix) == (studies.NATIVE,)
    with pytest.raises(UserError, match="--bandwidths needs a target whose links can be shaped"):
        studies.sweep_bandwidths(embedded, ["1gbit"], study().matrix)
    with pytest.raises(UserError, match="unknown model"):
        studies.select("resnet,alexnet", study().matrix.models, "model(s)")
