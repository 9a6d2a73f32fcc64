"""A second paper through the same study code: study:sosp19-bytescheduler (ByteScheduler, SOSP'19), its entry, its
plan and its report, with no code specific to it; and P3's study (an entry without 'subject') as before."""
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from reprokit.core.errors import UserError
from reprokit.engines.base import ARTIFACT, EMBEDDED as EMBEDDED_ENGINE
from reprokit.study.analysis.analyse import analyse
from reprokit.study.analysis.judged import labelled_verdicts
from reprokit.study.analysis.labelled import predicted_judged
from reprokit.study.analysis.speedup import SIDE_BY_SIDE, SIDE_BY_SIDE_RATIOS, claim_pairs, study_series
from reprokit.study.paper.claims import DEFAULT_SUBJECT, STUDY_SCHEMA, from_meta, repository_meta, repository_study
from reprokit.study.report.render import render, write_report
from reprokit.study.store.records import Store
from reprokit.study.sweep.driver import open_sweep
from reprokit.study.whatif.model_check import ModelValidation
from support.study_data import records, study, write_trace
from unit.test_study_options import Clock, machines_with_a_testbed

REPO = Path(__file__).resolve().parents[2]
NAME = "sosp19-bytescheduler"
MODELS = {"resnet", "vgg", "vgg16", "inception-v3", "sockeye"}


def bytescheduler():
    return repository_study(NAME)


def test_the_entry_passes_the_schema_with_its_claims_sources_and_subject():
    meta = repository_meta(NAME)
    STUDY_SCHEMA.check(meta, f"study:{NAME}")
    entry = bytescheduler()
    assert entry.subject.variant == "bytescheduler" and entry.subject.name == "ByteScheduler"
    assert entry.subject.authors_build == ""  # no build of the authors' own runs here as an engine
    assert entry.variants == {"baseline": {"VARIANT": "baseline"}, "bytescheduler": {"VARIANT": "bytescheduler"}}
    figures = {c.id: (c.model, c.speedup, c.variant, c.versus, c.bandwidth) for c in entry.claims}
    assert figures == {
        "resnet-up-to-196": ("resnet", 2.96, "bytescheduler", "baseline", None),
        "vgg16-up-to-196": ("vgg16", 2.96, "bytescheduler", "baseline", None),
        "resnet-mxnet-ps-up-to-171": ("resnet", 2.71, "bytescheduler", "baseline", None),
        "vgg16-mxnet-ps-up-to-171": ("vgg16", 2.71, "bytescheduler", "baseline", None)}
    sources = {c.id: c.source for c in entry.claims}
    assert sources["resnet-up-to-196"] == "abstract" and sources["vgg16-mxnet-ps-up-to-171"].startswith("README")
    # The paper's and the README's VGG is VGG-16, and so is the model the claims are judged on (no other setting).
    assert all(c.text.startswith("VGG-16: ") and "VGG-19" not in c.text for c in entry.claims if c.model == "vgg16")
    assert {c.model for c in entry.claims} == {"resnet", "vgg16"} and "VGG-19" not in meta["claims_note"]
    assert "per model" in meta["claims_note"] and entry.paper["venue"] == "SOSP 2019"
    assert set(entry.matrix.models) == set(entry.quick.models) == {"resnet", "vgg16"}
    assert entry.matrix.variants == entry.quick.variants == ("baseline", "bytescheduler")


def test_ck_finds_the_entry_as_it_finds_p3s():
    info = json.loads((REPO / "study" / NAME / ".cm" / "info.json").read_text())
    uid = info["backup_data_uid"]
    assert info["data_name"] == NAME and len(uid) == 16 and int(uid, 16) >= 0
    assert uid != json.loads((REPO / "study" / "sysml19-p3" / ".cm" / "info.json").read_text())["backup_data_uid"]
    assert (REPO / "study" / ".cm" / f"alias-a-{NAME}").read_text() == f"{uid}\n"
    assert (REPO / "study" / ".cm" / f"alias-u-{uid}").read_text() == f"{NAME}\n"
    assert (REPO / "study" / NAME / ".cm" / "desc.json").read_text() == "{}\n"


def test_a_subject_the_entry_does_not_describe_is_refused_in_one_line():
    meta = repository_meta(NAME)
    meta["subject"] = {**meta["subject"], "variant": "p3"}
    with pytest.raises(UserError, match=f"study:{NAME} subject: variant 'p3' is not described under 'variants'"):
        from_meta(NAME, meta)


def test_the_pairs_and_side_by_side_series_come_from_the_entry():
    entry = bytescheduler()
    assert claim_pairs(entry) == [("bytescheduler", "baseline")]  # no worker-update baseline in this study
    assert study_series(entry) == (
        ((EMBEDDED_ENGINE, "baseline", "MXNet 1.9.1 baseline"),
         (EMBEDDED_ENGINE, "bytescheduler", "MXNet 1.9.1 ByteScheduler")),
        ((EMBEDDED_ENGINE, "bytescheduler", "baseline", "embedded_speedup", "MXNet 1.9.1 ByteScheduler/baseline"),))


def test_p3s_study_without_a_subject_reads_as_before():
    p3 = study()
    assert "subject" not in repository_meta("sysml19-p3") and p3.subject == DEFAULT_SUBJECT
    assert study_series(p3) == (SIDE_BY_SIDE, SIDE_BY_SIDE_RATIOS) == (
        ((ARTIFACT, "baseline", "authors' 2018 baseline"), (ARTIFACT, "p3", "authors' 2018 P3"),
         (EMBEDDED_ENGINE, "baseline", "MXNet 1.9.1 baseline"),
         (EMBEDDED_ENGINE, "baseline-worker-update", "MXNet 1.9.1 worker-update baseline"),
         (EMBEDDED_ENGINE, "p3", "MXNet 1.9.1 P3")),
        ((ARTIFACT, "p3", "baseline", "artifact_speedup", "authors' P3/baseline"),
         (EMBEDDED_ENGINE, "p3", "baseline", "embedded_speedup", "MXNet 1.9.1 P3/baseline"),
         (EMBEDDED_ENGINE, "p3", "baseline-worker-update", "embedded_worker_update_speedup",
          "MXNet 1.9.1 P3/worker-update baseline")))
    assert ("p3", "baseline-worker-update") in claim_pairs(p3)
    assert ("p3-slicing-only", "baseline-worker-update") in claim_pairs(p3)


class NoMachines:
    def __call__(self, name):
        raise UserError(f"there is no machine entry {name!r}")


def test_the_quick_and_full_plans_run_bytescheduler_against_the_baseline(tmp_path):
    store, console = Store(tmp_path / "store", NAME), io.StringIO()
    # P3's authors' builds registered: they are another paper's, so this study still runs embedded only
    sweep, _ = open_sweep({"quick": "yes"}, bytescheduler(), store, MODELS, NoMachines(), console,
                          artifact_builds=("p3", "baseline"))
    assert "study: engines: embedded (stock MXNet 1.9.1, ByteScheduler as variant bytescheduler; no authors' build " \
           "of ByteScheduler)" in console.getvalue()
    runs = sweep.runs()
    assert len(runs) == 12 and {r.variant for r in runs} == {"baseline", "bytescheduler"}
    assert {r.model for r in runs} == {"resnet", "vgg16"} and {r.engine for r in runs} == {EMBEDDED_ENGINE}
    assert [r.variant for r in runs[:4]] == ["baseline", "bytescheduler", "baseline", "bytescheduler"]
    assert [r.variant for r in runs if r.repetition == 2][:2] == ["bytescheduler", "baseline"]  # interleaved
    full, _ = open_sweep({"repetitions": "3"}, bytescheduler(), Store(tmp_path / "full", NAME), MODELS, NoMachines(),
                         io.StringIO(), artifact_builds=())
    assert {(r.model, r.variant) for r in full.runs()} == {(m, v) for m in ("resnet", "vgg16")
                                                           for v in ("baseline", "bytescheduler")}
    with pytest.raises(UserError, match="this study has no authors' build of ByteScheduler"):
        open_sweep({"engines": "artifact,embedded"}, bytescheduler(), Store(tmp_path / "a", NAME), MODELS,
                   NoMachines(), io.StringIO(), artifact_builds=("p3", "baseline"))


def bytescheduler_records():
    """Fake runs on a 4-host testbed: ResNet-50 at two bandwidths, VGG-16 at one, all communication-bound."""
    runs = (records("resnet", "1gbit", [50.0, 51.0, 49.0], [140.0, 142.0, 141.0], variant="bytescheduler", ratio=2.0)
            + records("resnet", "10gbit", [100.0, 101.0, 99.0], [150.0, 149.0, 151.0], variant="bytescheduler",
                      ratio=1.2)
            + records("vgg16", "1gbit", [20.0, 21.0, 19.0], [30.0, 31.0, 29.0], variant="bytescheduler", ratio=3.0))
    return [replace(r, study=NAME) for r in runs]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    entry, runs = bytescheduler(), bytescheduler_records()
    analysis = analyse(entry, runs, MODELS)
    return analysis, render(entry, analysis, runs, out, out / "store", MODELS)


def test_the_report_judges_the_new_claims_and_names_bytescheduler_not_p3(report):
    analysis, paths = report
    assert analysis.overall == {"resnet-up-to-196": "replicated", "resnet-mxnet-ps-up-to-171": "replicated",
                                "vgg16-up-to-196": "not replicated", "vgg16-mxnet-ps-up-to-171": "not replicated"}
    md, html = paths["markdown"].read_text(), paths["html"].read_text()
    data = json.loads(paths["json"].read_text())
    assert data["study"] == NAME and {v["claim"] for v in data["verdicts"]} >= set(analysis.overall)
    for text in (md, html):
        assert "A Generic Communication Scheduler for Distributed DNN Training Acceleration" in text
        assert re.search("ByteScheduler beside MXNet 1.9.1(&#39;|')s baseline", text)
        assert "MXNet 1.9.1 ByteScheduler/baseline" in text
        # its policy is validated: the today's-hardware map is drawn, up to the hosts it simulates one by one
        assert "is simulated host by host, so the map stops at 16 hosts" in text
        assert "P3" not in re.sub(r"base64,[A-Za-z0-9+/=]+", "", text)  # the embedded plots are no prose
    assert "| MXNet 1.9.1 baseline | MXNet 1.9.1 ByteScheduler | MXNet 1.9.1 ByteScheduler/baseline |" in md
    assert "authors' 2018" not in md and "worker-update" not in md
    reproduced = [b for b in analysis.badges if b.name == "Results Reproduced"][0]
    assert any("ByteScheduler from its own sources" in r for r in reproduced.reasons)
    functional = [b for b in analysis.badges if b.name == "Artifacts Evaluated - Functional"][0]
    assert "no build of the authors' own ByteScheduler" in functional.reasons[0]
    assert "sysml19-p3" not in functional.reasons[0]


def test_a_claim_at_a_bandwidth_is_predicted_only_where_the_models_checks_allow_and_says_why():
    entry = bytescheduler()
    at = replace(entry.claims[0], id="resnet-at-10gbit", bandwidth="10gbit", cluster_size=4)
    said, brief, *_ = predicted_judged(at, entry.tolerance, ModelValidation.stored(), entry.gpu)
    assert "(predicted)" in said and brief.endswith(("replicated", "inconclusive")), said  # the stored checks hold
    [row] = labelled_verdicts([at], {}, NAME, tolerance=entry.tolerance, verdicts=[], gpu_name=entry.gpu)
    assert row.predicted == said and row.measured == "not measured"
    rows = [{"model": "resnet", "bandwidth": "10gbit", "variant": v, "dilation": 40.0, "n": 3,
             "iteration_time_error": e} for v, e in (("baseline", -0.04), ("bytescheduler", 0.104))]
    missed = {"against": "a check that misses", "hosts": 4, "links": "fair", "compute": "emulated", "gpu": "v100",
              "cores": "shared", "tcp": "cubic", "configurations": rows,
              "speedups": [{"model": "resnet", "bandwidth": "10gbit", "variant": "bytescheduler", "dilation": 40.0,
                            "error": -0.13}]}
    missing = replace(ModelValidation.stored(), checks=(missed,))
    said, brief, *_ = predicted_judged(at, entry.tolerance, missing, entry.gpu)
    assert said.startswith("not given: the iteration model is not validated (a check that misses")
    assert brief == "not given: model not validated at the V100"
    unknown = replace(at, variant="baseline-worker-update")  # a variant the model has no policy for
    said, brief, *_ = predicted_judged(unknown, entry.tolerance, ModelValidation.stored(), entry.gpu)
    assert said.startswith("not possible: the iteration model has no policy for baseline-worker-update")
    assert brief == "not possible: no baseline-worker-update policy"


def test_the_timelines_are_of_the_studys_own_variant_against_its_baseline(tmp_path):
    store = Store(tmp_path / "store", NAME)
    origin = store.origin()
    for r in records("resnet", "1gbit", [50.0, 51.0, 49.0], [140.0, 142.0, 141.0], variant="bytescheduler", ratio=2.0):
        record_id = r.record_id.replace("--o-local", "")
        run = store.new_attempt_dir(record_id)
        if r.config.repetition == 1:
            write_trace(run / "timeline-worker-0.json", "p3" if r.config.variant == "bytescheduler" else "baseline")
        store.put_record(replace(r, study=NAME, record_id=record_id, origin=origin,
                                 run_folder=str(run.relative_to(store.root))))
    console = io.StringIO()
    paths = write_report(bytescheduler(), store, MODELS, tmp_path / "report", console)
    data = json.loads(paths["json"].read_text())
    assert data["timeline"]["p3_record"].endswith("--resnet--bytescheduler--1gbit--r1")  # the field keeps its name
    md = paths["markdown"].read_text()
    assert "bytescheduler/baseline 2.82x" in md and "ByteScheduler's priority queue holds it before" in md
    assert "timelines of baseline and bytescheduler" in paths["html"].read_text()


def test_a_sweep_whose_engine_lacks_what_a_variant_needs_is_refused_before_it_stores_anything(tmp_path):
    """Each run's engine is checked as its preprocess will check it (the ck layer's engine_check) before the sweep
    is stored: a missing ByteScheduler ends `ck reproduce` in one line, not in six failed records."""
    asked = []

    def engine_check(settings, engine):
        asked.append((settings.model, settings.variant.value, engine))
        if settings.variant.value == "bytescheduler":
            raise UserError("VARIANT=bytescheduler: ByteScheduler is not installed for this MXNet engine; install it "
                            "with: ck install package:bytescheduler-github --quiet")

    store = Store(tmp_path / "store", NAME)
    with pytest.raises(UserError, match="ByteScheduler is not installed"):
        open_sweep({"quick": "yes"}, bytescheduler(), store, MODELS, NoMachines(), io.StringIO(),
                   engine_check=engine_check)
    assert ("resnet", "baseline", EMBEDDED_ENGINE) in asked and ("resnet", "bytescheduler", EMBEDDED_ENGINE) in asked
    assert not store.sweeps() and not store.local_records()


def test_a_study_of_up_to_claims_emulates_its_models_and_variants_at_the_bandwidths_given(tmp_path):
    def emulated(options):
        return open_sweep({"target": "tb2", "emulate": "v100", "dilation": "40", **options}, bytescheduler(),
                          Store(tmp_path / "s", NAME), MODELS, machines_with_a_testbed(tmp_path), io.StringIO(),
                          clock=Clock())[0]

    with pytest.raises(UserError, match="states no claim at a bandwidth; .* --bandwidths=B1,B2"):
        emulated({})
    sweep = emulated({"models": "resnet", "bandwidths": "10gbit"})
    assert {(r.model, r.bandwidth, r.variant) for r in sweep.runs()} == {("resnet", "10gbit", "baseline"),
                                                                          ("resnet", "10gbit", "bytescheduler")}
    assert (sweep.env["COMPUTE"], sweep.env["COMPUTE_PROFILE"], sweep.env["DILATION"]) == ("emulated", "v100", "40")
    assert sweep.profile == "paper"


def test_each_paper_is_judged_at_its_own_gpu_the_v100_here_and_the_p4000_for_p3(tmp_path):
    """ByteScheduler's runs emulated at the V100 (its paper's GPU) give its "up to" claims their emulated verdict; the
    same runs at the P4000 do not, and P3's study still judges at the P4000."""
    entry = bytescheduler()
    assert entry.gpu == "v100" and study().gpu == "p4000"

    def emulated_column(runs, judged=entry):
        runs = [replace(r, study=judged.name) for r in runs]
        analysis = analyse(judged, runs, MODELS)
        labelled = labelled_verdicts(judged.claims, analysis.overall, judged.name, tolerance=judged.tolerance,
                                     verdicts=analysis.verdicts, emulated=analysis.emulated_speedups,
                                     emulated_runs=analysis.emulated_runs, gpu_name=judged.gpu)
        return {v.claim: v.emulated for v in labelled}

    at_v100 = records("resnet", "10gbit", [100.0, 101.0, 99.0], [90.0, 89.0, 91.0], variant="bytescheduler",
                      emulated=True, gpu="v100", dilation=40)
    said = emulated_column(at_v100)["resnet-up-to-196"]
    assert "0.90x [" in said and "V100 compute emulated" in said and "not replicated (emulated)" in said
    at_p4000 = [replace(r, study=NAME) for r in records("resnet", "10gbit", [100.0, 101.0, 99.0], [90.0, 89.0, 91.0],
                                                        variant="bytescheduler", emulated=True, gpu="p4000")]
    assert emulated_column(at_p4000)["resnet-up-to-196"].startswith("not run: no emulated runs of resnet")
    paths = render(entry, analyse(entry, [replace(r, study=NAME) for r in at_v100], MODELS),
                   [replace(r, study=NAME) for r in at_v100], tmp_path, tmp_path / "store", MODELS)
    assert "at the paper's GPU (V100 compute)" in paths["markdown"].read_text()
    assert "p4000" not in emulated_column(at_v100)["resnet-up-to-196"].lower()


def test_a_paper_gpu_without_a_profile_is_refused_naming_the_valid_ones():
    meta = repository_meta(NAME)
    meta["paper"]["gpu"] = "k80"
    with pytest.raises(UserError, match=r"paper.gpu 'k80'; valid ones: p4000 \(the paper's\), .*v100"):
        from_meta(NAME, meta)


def test_a_bare_emulate_waits_the_compute_of_the_studys_own_paper_gpu(tmp_path):
    def profile(entry):
        sweep = open_sweep({"target": "tb2", "emulate": "yes", "models": "resnet", "bandwidths": "10gbit"}, entry,
                           Store(tmp_path / entry.name, entry.name), MODELS, machines_with_a_testbed(tmp_path),
                           io.StringIO(), clock=Clock())[0]
        return sweep.env["COMPUTE_PROFILE"]

    assert profile(bytescheduler()) == "v100"
    assert profile(study()) == "p4000"
