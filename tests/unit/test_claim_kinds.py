"""Claim kinds (reprokit.study.analysis.kinds): one class each in one registry; a kind registered by a test is read,
judged and shown by the same machinery as the speedup claims; and the third study entry, study:scheduling-critique-2024,
whose claims are of the kinds bounded, concave and little-beyond-overlap, each giving each verdict."""
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from reprokit.core import schema as s
from reprokit.core.errors import UserError
from reprokit.engines.base import EMBEDDED
from reprokit.study.analysis.analyse import analyse
from reprokit.study.analysis.answer import answer
from reprokit.study.analysis.judged import JudgedKind, judged_kind, labelled_verdicts
from reprokit.study.analysis.kinds import MIN_RATIOS, OverConfigurations, configuration
from reprokit.study.analysis.speedup import WORKER_UPDATE, claim_pairs, study_series
from reprokit.study.analysis.verdict import Verdict
from reprokit.study.paper.claims import (
    CLAIM_KINDS,
    POSITIVE,
    STUDY_SCHEMA,
    Claim,
    Tolerance,
    from_meta,
    kind_of,
    register_kind,
    repository_meta,
    repository_study,
)
from reprokit.study.report.render import render, write_report
from reprokit.study.store.records import Store
from reprokit.study.sweep.driver import open_sweep
from support.study_data import EMBEDDED as EMBEDDED_TARGET, records, study

REPO = Path(__file__).resolve().parents[2]
NAME = "scheduling-critique-2024"
MODELS = {"resnet", "vgg", "inception-v3", "sockeye"}


def critique():
    return repository_study(NAME)


def runs(model, bandwidth, base, subject, ratio, versus="baseline", **kw):
    """Records of the critique's study: ``base`` throughputs of ``versus`` and ``subject`` ones of ByteScheduler;
    ``subject`` None: the baseline's runs only."""
    out = []
    for r in records(model, bandwidth, base, subject or [], variant="bytescheduler", ratio=ratio, **kw):
        if r.config.variant == "baseline" and versus != "baseline":
            r = replace(r, record_id=r.record_id.replace("--baseline--", f"--{versus}--"),
                        config=replace(r.config, variant=versus))
        out.append(replace(r, study=NAME))
    return out


def around(value):
    return [value, value * 1.01, value * 0.99]


def curve(model, speedups, versus="baseline", **kw):
    """A configuration per (ratio, speedup), three runs a side, tight: 100 samples/s for the baseline."""
    out = []
    for i, (ratio, speedup) in enumerate(speedups):
        out += runs(model, f"{100 * (i + 1)}mbit", around(100.0), around(100.0 * speedup), ratio, versus, **kw)
    return out


HUMP = [(4.0, 1.10), (2.0, 1.40), (1.0, 1.60), (0.5, 1.30)]  # x = 0.25, 0.5, 1, 2: rises, then falls
CONVEX = [(4.0, 1.05), (2.0, 1.10), (1.0, 1.50), (0.5, 3.50)]  # bends upward; 3.5x beyond the bound


def verdict_of(analysis, claim_id):
    [v] = [v for v in analysis.verdicts if v.claim == claim_id]
    return v


# --- the registry -------------------------------------------------------------------------------------------------

def test_every_kind_is_one_registered_class_and_speedup_is_the_default():
    assert set(CLAIM_KINDS) == {"speedup", "bounded", "concave", "little-beyond-overlap"}
    p3 = repository_study("sysml19-p3")
    assert {c.kind for c in p3.claims} == {"speedup"} and "kind" not in json.dumps(repository_meta("sysml19-p3"))
    assert all(kind_of(c) is CLAIM_KINDS["speedup"] for c in p3.claims)
    assert all(isinstance(k, JudgedKind) for k in CLAIM_KINDS.values())  # each with its judging side
    assert all(judged_kind(c) is CLAIM_KINDS["speedup"] for c in p3.claims)
    with pytest.raises(ValueError, match="a kind needs a name no other kind has"):
        @register_kind
        class Again(OverConfigurations):
            name = "bounded"


def test_a_claim_of_an_unknown_kind_or_without_its_kinds_fields_is_refused_in_one_line():
    meta = repository_meta(NAME)
    meta["claims"][0] = {**meta["claims"][0], "kind": "faster"}
    with pytest.raises(UserError, match=r"claims\[0\].kind is 'faster', not a kind of claim \(known: speedup, bounded"):
        from_meta(NAME, meta)
    meta = repository_meta(NAME)
    del meta["claims"][0]["at_most"]
    with pytest.raises(UserError, match=r"claims\[0\] has no 'at_most'"):
        from_meta(NAME, meta)
    meta = repository_meta(NAME)
    meta["claims"][0]["speedup"] = 2.0  # a speedup claim's field on a bounded claim
    with pytest.raises(UserError, match=r"claims\[0\] has unknown key\(s\) 'speedup'"):
        from_meta(NAME, meta)


@pytest.fixture
def at_least():
    """A kind of claim only this test has: the speedup is at least ``at_least`` in every configuration."""

    @register_kind
    class AtLeast(OverConfigurations):
        name = "at-least"
        required = {"at_least": POSITIVE}
        stated_rule = "An at-least claim is replicated when every configuration's interval lies at or above X."

        def build(self, raw, **common):
            return Claim(speedup=raw["at_least"], bandwidth=None, cluster_size=None, kind=self.name,
                         figures=(("at_least", float(raw["at_least"])),), **common)

        def brief(self, claim):
            return f"at least {claim.figure('at_least'):.2f}x everywhere"

        def rule(self, claim, enough, thin, tol):
            low = enough.loc[enough["ci_low"].idxmin()]
            kind = Verdict.REPLICATED if low["ci_low"] >= claim.figure("at_least") else Verdict.NOT_REPLICATED
            return kind, f"lowest {configuration(low)}", low

    yield AtLeast
    del CLAIM_KINDS["at-least"]


def test_a_kind_registered_in_one_class_is_read_judged_and_shown(at_least, tmp_path):
    meta = repository_meta(NAME)
    meta["claims"] = [{"id": "resnet-at-least", "kind": "at-least", "model": "resnet", "at_least": 1.2,
                       "source": "a test", "text": "ResNet-50: at least 1.2x"}]
    entry = from_meta(NAME, meta)
    assert entry.claims[0].kind == "at-least" and entry.claims[0].versus == "baseline"
    analysis = analyse(entry, curve("resnet", HUMP), MODELS)
    v = verdict_of(analysis, "resnet-at-least")
    assert v.verdict == Verdict.NOT_REPLICATED and "paper profile, 4 bandwidth(s) with measured communication/computation 0.50 to 4.00: lowest 1.10x" in v.reason and v.bandwidth == "100mbit"
    paths = render(entry, analysis, [], tmp_path, tmp_path / "store", MODELS)
    md, html = paths["markdown"].read_text(), paths["html"].read_text()
    for text in (md, html):
        assert "at least 1.20x everywhere (bytescheduler over baseline)" in text  # the table of claims
        assert "An at-least claim is replicated when every configuration" in text  # its rule
        assert "every configuration measured" in text
    assert "| resnet-at-least | at least 1.20x everywhere |" in md  # the answer's paper figure
    data = json.loads(paths["json"].read_text())
    assert data["overall"] == {"resnet-at-least": "not replicated"}


# --- the third study entry ----------------------------------------------------------------------------------------

def test_the_critique_entry_passes_the_schema_with_its_claims_sources_and_settings():
    meta = repository_meta(NAME)
    STUDY_SCHEMA.check(meta, f"study:{NAME}")
    entry = critique()
    assert entry.subject.variant == "bytescheduler" and entry.subject.name == "ByteScheduler"
    kinds = {c.id: (c.kind, c.model, c.variant, c.versus, c.figures) for c in entry.claims}
    assert kinds == {
        "resnet-bounded-3x": ("bounded", "resnet", "bytescheduler", "baseline", (("at_most", 3.0),)),
        "vgg-bounded-3x": ("bounded", "vgg", "bytescheduler", "baseline", (("at_most", 3.0),)),
        "resnet-concave": ("concave", "resnet", "bytescheduler", "baseline", ()),
        "vgg-concave": ("concave", "vgg", "bytescheduler", "baseline", ()),
        "resnet-little-beyond-overlap": ("little-beyond-overlap", "resnet", "bytescheduler", "baseline",
                                         (("margin", 0.1), ("overlap_baseline", "baseline"))),
        "vgg-little-beyond-overlap": ("little-beyond-overlap", "vgg", "bytescheduler", "baseline",
                                      (("margin", 0.1), ("overlap_baseline", "baseline")))}
    assert all("not checked against the PDF" in c.source and "bytescheduler.md" in c.source for c in entry.claims)
    assert "PDF was not read" in meta["artifact"]["paper_setup_source"] and "PDF was not read" in meta["claims_note"]
    assert entry.matrix.variants == entry.quick.variants == ("baseline", "bytescheduler")
    assert set(entry.matrix.models) == {"resnet", "vgg"} and entry.quick.models == ("resnet",)
    assert len(entry.quick.ratios) >= MIN_RATIOS  # the concave claims need 3 ratios
    # ByteScheduler updates on the servers, so it is never set against the worker-update baseline; P3 is
    assert claim_pairs(entry) == [("baseline-worker-update", "baseline"), ("bytescheduler", "baseline"),
                                  ("p3", "baseline"), ("p3", "baseline-worker-update")]
    # P3 and the worker-update baseline can run beside it (the head-to-head), but the matrix runs only the subject
    assert entry.variants == {"baseline": {"VARIANT": "baseline"}, "bytescheduler": {"VARIANT": "bytescheduler"},
                              "p3": {"VARIANT": "p3"}, "baseline-worker-update": {"VARIANT": "baseline-worker-update"}}
    assert all(c.bandwidth is None and c.cluster_size is None for c in entry.claims)


def test_ck_finds_the_critique_entry_as_it_finds_the_others():
    info = json.loads((REPO / "study" / NAME / ".cm" / "info.json").read_text())
    uid = info["backup_data_uid"]
    assert info["data_name"] == NAME and len(uid) == 16 and int(uid, 16) >= 0
    others = {json.loads((REPO / "study" / n / ".cm" / "info.json").read_text())["backup_data_uid"]
              for n in ("sysml19-p3", "sosp19-bytescheduler")}
    assert uid not in others
    assert (REPO / "study" / ".cm" / f"alias-a-{NAME}").read_text() == f"{uid}\n"
    assert (REPO / "study" / ".cm" / f"alias-u-{uid}").read_text() == f"{NAME}\n"
    assert (REPO / "study" / NAME / ".cm" / "desc.json").read_text() == "{}\n"


class NoMachines:
    def __call__(self, name):
        raise UserError(f"there is no machine entry {name!r}")


def test_the_quick_plan_runs_bytescheduler_against_the_baseline(tmp_path):
    console = io.StringIO()
    sweep, _ = open_sweep({"quick": "yes"}, critique(), Store(tmp_path / "store", NAME), MODELS, NoMachines(),
                          console, artifact_builds=())
    planned = sweep.runs()
    assert len(planned) == 6 and {r.variant for r in planned} == {"baseline", "bytescheduler"}
    assert {r.model for r in planned} == {"resnet"} and {r.engine for r in planned} == {EMBEDDED}
    full, _ = open_sweep({}, critique(), Store(tmp_path / "full", NAME), MODELS, NoMachines(), io.StringIO(),
                         artifact_builds=())
    assert {(r.model, r.variant) for r in full.runs()} == {(m, v) for m in ("resnet", "vgg")
                                                           for v in ("baseline", "bytescheduler")}


# --- each kind, each verdict --------------------------------------------------------------------------------------

def test_bounded_is_replicated_below_the_bound_refuted_above_it_and_inconclusive_across_it_or_with_few_runs():
    analysis = analyse(critique(), curve("resnet", HUMP) + curve("vgg", CONVEX), MODELS)
    ok, above = verdict_of(analysis, "resnet-bounded-3x"), verdict_of(analysis, "vgg-bounded-3x")
    assert ok.verdict == Verdict.REPLICATED and ok.reason.startswith("CPU testbed, paper profile, 4 bandwidth(s)")
    assert "the interval of every configuration with enough runs lies at or below the claimed bound 3.00x" in ok.reason
    assert ok.speedup == pytest.approx(1.6, abs=0.01) and ok.ci_high < 3.0  # the highest interval
    assert above.verdict == Verdict.NOT_REPLICATED and above.ci_low > 3.0 and above.bandwidth == "400mbit"
    assert "lies wholly above the claimed bound 3.00x" in above.reason
    noisy = runs("resnet", "1gbit", [100.0, 130.0, 80.0], [300.0, 250.0, 330.0], 2.0)
    across = verdict_of(analyse(critique(), noisy, MODELS), "resnet-bounded-3x")
    assert across.verdict == Verdict.INCONCLUSIVE and "reaches across the claimed bound 3.00x" in across.reason
    assert across.ci_low < 3.0 < across.ci_high
    few = runs("resnet", "1gbit", [100.0, 101.0], [150.0, 151.0], 2.0)
    thin = verdict_of(analyse(critique(), few, MODELS), "resnet-bounded-3x")
    assert thin.verdict == Verdict.INCONCLUSIVE and "n < 3 in every configuration: no verdict" in thin.reason


def test_concave_needs_three_ratios_and_reads_the_slopes_with_their_intervals():
    analysis = analyse(critique(), curve("resnet", HUMP) + curve("vgg", CONVEX), MODELS)
    hump, convex = verdict_of(analysis, "resnet-concave"), verdict_of(analysis, "vgg-concave")
    assert hump.verdict == Verdict.REPLICATED and "the speedup rises, then flattens or falls" in hump.reason
    assert "slope intervals x 0.25 to 0.50: [" in hump.reason and hump.speedup == pytest.approx(1.6, abs=0.01)
    assert convex.verdict == Verdict.NOT_REPLICATED and "bends upward there beyond its intervals" in convex.reason
    two = analyse(critique(), curve("resnet", HUMP[:2]), MODELS)
    short = verdict_of(two, "resnet-concave")
    assert short.verdict == Verdict.INCONCLUSIVE
    assert "2 distinct measured ratio(s) with n >= 3 and an interval; the test of concavity needs at least 3" \
        in short.reason
    line = [(4.0, 1.10), (2.0, 1.20), (1.0, 1.40)]  # straight in x: 0.4 per unit of x, within the intervals
    straight = verdict_of(analyse(critique(), curve("resnet", line), MODELS), "resnet-concave")
    assert straight.verdict == Verdict.INCONCLUSIVE and "a straight line fits within the intervals" in straight.reason


def with_overlap_baseline():
    """The critique's entry as if a variant overlapped communication with computation without scheduling (the
    worker-update baseline stands in for one here: only the judging is tested)."""
    meta = repository_meta(NAME)
    meta["variants"][WORKER_UPDATE] = {"VARIANT": WORKER_UPDATE}
    for c in meta["claims"]:
        if c["kind"] == "little-beyond-overlap":
            c["overlap_baseline"] = WORKER_UPDATE
    return from_meta(NAME, meta)


def without_overlap_baseline():
    """The critique's entry as if no variant overlapped communication with computation without scheduling."""
    meta = repository_meta(NAME)
    for c in meta["claims"]:
        c.pop("overlap_baseline", None)
    return from_meta(NAME, meta)


def test_little_beyond_overlap_is_not_testable_without_an_overlap_baseline_and_says_why():
    entry = without_overlap_baseline()
    analysis = analyse(entry, curve("resnet", HUMP), MODELS)
    untested = verdict_of(analysis, "resnet-little-beyond-overlap")
    assert untested.verdict == Verdict.NOT_TESTABLE and untested.speedup is None
    assert untested.reason.startswith("the study names no baseline that overlaps communication with computation")
    assert "the speedup rows hold no perfect-overlap figure that separates the two" in untested.reason
    [row] = [r for r in labelled_verdicts(entry.claims, analysis.overall, NAME, tolerance=entry.tolerance,
                                          verdicts=analysis.verdicts) if r.claim == "resnet-little-beyond-overlap"]
    assert row.emulated.startswith("not testable: the study names no baseline") and row.measured == "not testable here"
    assert kind_of(entry.claims[2]).claimed(entry.claims[2]).endswith(
        "(bytescheduler over a baseline that overlaps: none named)")


def test_little_beyond_overlap_with_its_baseline_is_judged_against_one_plus_the_margin():
    entry = with_overlap_baseline()
    assert ("bytescheduler", WORKER_UPDATE) in claim_pairs(entry)  # the claim's own pair
    none_run = verdict_of(analyse(entry, curve("resnet", HUMP), MODELS), "resnet-little-beyond-overlap")
    assert none_run.verdict == Verdict.NOT_TESTABLE
    assert none_run.reason.startswith("no successful runs of both bytescheduler and baseline-worker-update (the baseline "
                                      "that overlaps communication with computation without scheduling) for resnet")
    near = curve("resnet", [(2.0, 1.03), (1.0, 1.05), (0.5, 1.02)], versus=WORKER_UPDATE)
    far = curve("vgg", [(2.0, 1.03), (1.0, 1.50)], versus=WORKER_UPDATE)
    analysis = analyse(entry, near + far, MODELS)
    ok, beyond = verdict_of(analysis, "resnet-little-beyond-overlap"), verdict_of(analysis, "vgg-little-beyond-overlap")
    assert ok.verdict == Verdict.REPLICATED and "lies at or below the claimed bound 1.10x" in ok.reason
    assert beyond.verdict == Verdict.NOT_REPLICATED and beyond.ci_low > 1.1
    few = runs("resnet", "1gbit", [100.0, 101.0], [150.0, 151.0], 2.0, versus=WORKER_UPDATE)
    thin = verdict_of(analyse(entry, few, MODELS), "resnet-little-beyond-overlap")
    assert thin.verdict == Verdict.INCONCLUSIVE and "n < 3" in thin.reason


def test_the_new_kinds_are_not_testable_on_the_embedded_default():
    loopback = [replace(r, study=NAME) for r in records("resnet", "native", around(100.0), around(150.0),
                                                        target=EMBEDDED_TARGET, variant="bytescheduler", ratio=2.0)]
    analysis = analyse(critique(), loopback, MODELS)
    assert {verdict_of(analysis, c).verdict for c in ("resnet-bounded-3x", "resnet-concave")} == {Verdict.NOT_TESTABLE}


def test_emulated_runs_are_judged_by_the_same_rule_labelled_and_nothing_is_predicted():
    entry = critique()
    emulated = curve("resnet", HUMP, emulated=True, gpu=entry.gpu or "p4000")
    analysis = analyse(entry, emulated, MODELS)
    assert analysis.verdicts and all(not v.measured for v in analysis.verdicts)  # emulated runs judge nothing
    check = {"tolerance": 0.1, "models": []}
    rows = labelled_verdicts(entry.claims, analysis.overall, NAME, tolerance=entry.tolerance,
                             verdicts=analysis.verdicts, check=check, emulated=analysis.emulated_speedups,
                             emulated_runs=analysis.emulated_runs, gpu_name=entry.gpu)
    by = {r.claim: r for r in rows}
    assert by["resnet-bounded-3x"].emulated.startswith("replicated (emulated) over 4 configuration(s)")
    assert by["resnet-concave"].emulated.startswith("replicated (emulated)")
    # The brief cell speaks of every configuration, not of one alone
    assert re.match(r"over 4 configuration\(s\), \d\.\d\dx to \d\.\d\dx; deciding: .+: replicated$",
                    by["resnet-bounded-3x"].emulated_brief), by["resnet-bounded-3x"].emulated_brief
    assert by["resnet-bounded-3x"].measured == "not measured"
    assert all(r.predicted.startswith("not given: a ") and "predicts one setting at a time" in r.predicted
               for r in rows)
    table = answer(entry, analysis.verdicts, analysis.overall, analysis.decided, rows)
    assert {r.verdict for r in table.rows} == {"not measured"} and {r.measured for r in table.rows} == {"not measured"}
    assert all(not r.predicted[0].isdigit() for r in table.rows)  # never a predicted figure in a measured column
    verdicts = {r.claim: (r.emulated_verdict, r.predicted_verdict) for r in table.rows}
    assert verdicts["resnet-bounded-3x"] == verdicts["resnet-concave"] == ("replicated", "")


def test_ck_report_renders_the_critique_from_a_store_of_records(tmp_path):
    store = Store(tmp_path / "store", NAME)
    origin = store.origin()
    for r in curve("resnet", HUMP) + curve("vgg", CONVEX):
        store.put_record(replace(r, record_id=r.record_id.replace("--o-local", ""), origin=origin))
    console = io.StringIO()
    paths = write_report(critique(), store, MODELS, tmp_path / "report", console)
    assert "claims: 4 not replicated, 2 replicated" in console.getvalue()
    md, html = paths["markdown"].read_text(), paths["html"].read_text()
    data = json.loads(paths["json"].read_text())
    assert data["overall"] == {"resnet-bounded-3x": "replicated", "vgg-bounded-3x": "not replicated",
                               "resnet-concave": "replicated", "vgg-concave": "not replicated",
                               "resnet-little-beyond-overlap": "not replicated",  # 1.60x over the baseline, which overlaps
                               "vgg-little-beyond-overlap": "not replicated"}
    for text in (md, html):
        assert "How Useful is Communication Scheduling for Distributed Training?" in text
        assert "at most 3.00x in every configuration (bytescheduler over baseline)" in text
        assert "concave in computation/communication (bytescheduler over baseline)" in text
        assert "at most +10% beyond overlap in every configuration (bytescheduler over baseline, which overlaps)" in text
        assert "A bounded claim (the speedup is at most X in every configuration measured)" in text
        assert "A concave claim" in text and "A little-beyond-overlap claim" in text
        assert "up to" not in text.split("The claims")[-1].split("Results")[0]  # no kind reads as an "up to" claim
    assert "| resnet-bounded-3x | at most 3.00x in every configuration |" in md


def test_the_speedup_claims_reports_say_nothing_of_the_other_kinds(tmp_path):
    p3 = study()
    analysis = analyse(p3, records("resnet", "1gbit", around(100.0), around(120.0), ratio=2.0), MODELS)
    md = render(p3, analysis, [], tmp_path, tmp_path / "store", MODELS)["markdown"].read_text()
    assert "bounded claim" not in md and "concave" not in md
    assert "| resnet-up-to-25 | resnet | 1.25x (p3 over baseline) | not stated (up to) | not stated |" in md


def test_a_kind_judges_only_the_rows_it_is_given():
    kind = CLAIM_KINDS["bounded"]
    claim = critique().claims[0]
    tol = Tolerance(speedup=0.1, min_runs=3, max_relative_half_width=0.15, confidence=0.95, profile="paper")
    rows = pd.DataFrame([{"bandwidth": "1gbit", "speedup": 2.0, "ci_low": 1.9, "ci_high": 2.1, "n_variant": 3,
                          "n_versus": 3, "comm_to_compute": 2.0}])
    verdict, reason, row = kind.rule(claim, rows, rows.iloc[0:0], tol)
    assert verdict == Verdict.REPLICATED and row["bandwidth"] == "1gbit"
    assert isinstance(kind.required["at_most"], s.Spec)


def test_p3_and_the_worker_update_baseline_run_beside_bytescheduler_each_against_its_own_reference(tmp_path):
    entry = critique()
    throughputs, ratios = study_series(entry)
    assert [v for _, v, _ in throughputs] == ["baseline", WORKER_UPDATE, "bytescheduler", "p3"]
    assert [(v, ref) for _, v, ref, _, _ in ratios] == [("bytescheduler", "baseline"), ("p3", "baseline"),
                                                        ("p3", WORKER_UPDATE)]  # ByteScheduler updates on the servers
    four = (runs("resnet", "10gbit", around(100.0), around(90.0), 1.5)
            + [replace(r, study=NAME) for r in records("resnet", "10gbit", around(100.0), around(120.0), ratio=1.5)
               if r.config.variant == "p3"]
            + runs("resnet", "10gbit", around(110.0), None, 1.5, versus=WORKER_UPDATE))
    analysis = analyse(entry, four, MODELS)
    row = analysis.side_by_side.iloc[0]
    assert row["embedded_speedup"] == pytest.approx(0.9, rel=0.01)  # ByteScheduler over the baseline
    assert row["embedded_p3_speedup"] == pytest.approx(1.2, rel=0.01)
    assert row["embedded_p3_worker_update_speedup"] == pytest.approx(120 / 110, rel=0.01)
    assert "embedded_worker_update_speedup" not in analysis.side_by_side.columns
    md = render(entry, analysis, [], tmp_path, tmp_path / "store", MODELS)["markdown"].read_text()
    assert ("| MXNet 1.9.1 ByteScheduler/baseline | MXNet 1.9.1 P3/baseline | MXNet 1.9.1 P3/worker-update baseline |"
            in md)
    assert "ByteScheduler over the worker-update baseline" not in md and "ByteScheduler updates on the workers" not in md
    assert "and beside them MXNet 1.9.1 P3 (run in the same sweeps; no claim is about it)" in md
