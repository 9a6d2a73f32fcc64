"""`ck reproduce / export / import study:NAME` without ck: options, resume refusals, the sweep a command opens."""
import io
import json
from pathlib import Path

import pytest

from reprokit.core.errors import UserError
from reprokit.study.paper.planning import RunConfig
from reprokit.study.paper.target import make_target
from reprokit.study.store.records import Store, Sweep
from reprokit.study.sweep import options
from reprokit.study.sweep.choice import choose, rate_name
from reprokit.study.sweep.driver import check_can_shape, larger_k_advice, open_sweep
from reprokit.study.sweep.options import Resume, bundle_in, bundle_out, report_dir, resume_of, sweep_request
from support.study_data import ALL_MODELS, study

EMBEDDED = make_target("", None, None)
CLUSTER = {"hosts": ["node-a", "node-b"]}


class Machines:
    """machine_config as CK would answer it: registered clusters by name; the names asked for are kept."""

    def __init__(self, **machines):
        self.machines, self.asked = machines, []

    def __call__(self, name):
        self.asked.append(name)
        if name not in self.machines:
            raise UserError(f"there is no machine entry {name!r}")
        return self.machines[name]


class Clock:
    """time.monotonic for the probes: each probe takes ``step`` seconds."""

    def __init__(self, step=30.0):
        self.now, self.step, self.calls = 0.0, step, 0

    def __call__(self):
        self.calls += 1
        if self.calls % 2 == 0:  # the end of a probe
            self.now += self.step
        return self.now


def opened(tmp_path, given, program_models=ALL_MODELS, machines=None, probe=None, artifact_builds=(), clock=None):
    console = io.StringIO()
    store = Store(tmp_path / "store", "sysml19-p3")
    sweep, target = open_sweep(given, study(), store, program_models, machines or Machines(), console, probe=probe,
                               artifact_builds=artifact_builds, clock=clock or Clock())
    return sweep, target, store, console.getvalue()


# --- --resume -------------------------------------------------------------------------------------

def test_resume_is_none_for_a_new_sweep_and_names_the_sweep_or_the_newest():
    for given in ({}, {"resume": ""}, {"resume": "no"}):
        assert resume_of(given) is None
    assert resume_of({"resume": "yes"}) == Resume(None)  # --resume
    assert resume_of({"resume": "20250101-000000-abcdef"}) == Resume("20250101-000000-abcdef")


def test_resume_refuses_every_sweep_option_beside_it():
    with pytest.raises(UserError, match=r"--resume continues a sweep with its own settings; "
                                        r"drop --models, --quick, --env.NUM_BATCHES$"):
        resume_of({"resume": "yes", "models": "resnet", "quick": "yes", "env.NUM_BATCHES": "6", "store": "/s"})
    with pytest.raises(UserError, match="drop --env.BATCH_SIZE"):
        resume_of({"resume": "yes", "env": {"BATCH_SIZE": 8}})  # a ck.access caller's env dict


def test_resume_without_a_stored_sweep_or_of_an_unknown_one_is_refused(tmp_path):
    with pytest.raises(UserError, match="there is no sweep to resume in .*; start one with: ck reproduce study:sysml19-p3"):
        opened(tmp_path, {"resume": "yes"})
    opened(tmp_path, {"models": "resnet"})
    with pytest.raises(UserError, match=r"there is no sweep 'nope' in .* \(sweeps: \d{8}-"):
        opened(tmp_path, {"resume": "nope"})


def test_resume_continues_the_newest_or_the_named_sweep_on_its_machine_as_registered_now(tmp_path, monkeypatch):
    times = iter(["2025-01-01T10:00:00+0000", "2025-01-01T10:00:01+0000"])
    monkeypatch.setattr("reprokit.study.sweep.driver.now_iso", lambda: next(times))  # two sweeps, seconds apart
    machines = Machines(c2=CLUSTER)
    first, _, store, _ = opened(tmp_path, {"target": "c2", "models": "resnet", "link_capacity": "1gbit"},
                                machines=machines)
    second, _, _, _ = opened(tmp_path, {"models": "vgg"})
    assert [s.sweep_id for s in store.sweeps()] == [first.sweep_id, second.sweep_id]
    assert opened(tmp_path, {"resume": "yes"})[0] == second
    machines.machines["c2"] = {"hosts": ["node-a", "node-b", "node-c"]}
    sweep, target, _, _ = opened(tmp_path, {"resume": first.sweep_id}, machines=machines)
    assert sweep == first and sweep.models == ("resnet",)
    assert machines.asked == ["c2", "c2"]
    assert (target.kind, target.hosts, target.link_capacity) == ("cluster", ("node-a", "node-b", "node-c"), "1gbit")


# --- a new sweep ----------------------------------------------------------------------------------

def test_new_sweep_records_its_plan_and_the_options_as_given(tmp_path):
    sweep, target, store, _ = opened(tmp_path, {"models": "resnet", "variants": "baseline", "repetitions": "2",
                                                "env.NUM_BATCHES": "6", "env": {"BATCH_SIZE": 8}, "store": "/x",
                                                "out": "con"})
    assert target == EMBEDDED
    assert (sweep.models, sweep.variants, sweep.bandwidths, sweep.repetitions) == (("resnet",), ("baseline",),
                                                                                   ("native",), 2)
    assert sweep.profile == "smoke"  # a full sweep on the embedded default: smoke, not the matrix's paper
    assert sweep.env == {"NUM_BATCHES": "6", "BATCH_SIZE": "8"}
    assert sweep.options == {"models": "resnet", "variants": "baseline", "repetitions": "2",
                             "env.BATCH_SIZE": "8", "env.NUM_BATCHES": "6"}
    assert sweep.origin == store.origin() and sweep.restore_rate is None
    stored = json.loads(store.sweep_path(sweep.sweep_id).read_text())
    assert stored == sweep.to_dict() and Sweep.from_dict(stored) == sweep
    assert [r.label() for r in sweep.runs()] == ["resnet baseline @ native #1", "resnet baseline @ native #2"]


def test_quick_takes_the_quick_matrix_and_its_settings(tmp_path):
    sweep, _, _, _ = opened(tmp_path, {"quick": "yes", "env.NUM_BATCHES": "4"})
    assert sweep.quick and sweep.models == ("resnet", "vgg") and sweep.repetitions == 3
    assert sweep.timeline_repetition == 1 and sweep.choices == ()  # loopback: no bandwidths to choose
    assert sweep.profile == "smoke"
    assert sweep.env == {"BATCH_SIZE": "16", "DISP_BATCHES": "3", "NUM_BATCHES": "4"}  # --env.* over the matrix's
    assert sweep.why == study().quick.why and "30 minutes" in sweep.why  # the sweep records why it is this size
    # another run size than the study entry's figures are for: no estimate from them, and it says so
    assert sweep.forecast.runs == 18 and sweep.forecast.unknown == 18


def test_a_quick_sweep_forecasts_its_runs_and_records_the_forecast_and_why(tmp_path):
    sweep, _, store, _ = opened(tmp_path, {"quick": "yes"})
    assert len(sweep.runs()) == 2 * 3 * 3  # 2 models, 3 variants (baseline-worker-update too), 3 repetitions
    expected = sweep.forecast  # nothing stored yet: the study entry's seconds per run (resnet 20, vgg 30)
    assert (expected.runs, expected.unknown, expected.seconds, expected.budget_s) == (18, 0, 9 * 20 + 9 * 30, 1800)
    assert not expected.over_budget
    assert expected.line().startswith("18 run(s), about 7m30s (resnet: 9 run(s), 20s each from the study entry's run_seconds; ")
    assert expected.line().endswith("; within the 30m00s this matrix aims at")
    stored = json.loads(store.sweep_path(sweep.sweep_id).read_text())
    assert stored["why"] == sweep.why and stored["forecast"]["seconds"] == 450 and Sweep.from_dict(stored) == sweep


def test_models_the_program_lacks_are_skipped_with_a_note_and_none_left_is_refused(tmp_path):
    sweep, _, _, console = opened(tmp_path, {"models": "resnet,sockeye"}, program_models={"resnet", "vgg"})
    assert sweep.models == ("resnet",)
    assert "study: skipping sockeye: program:p3 has no cmd_key 'sockeye' yet" in console
    with pytest.raises(UserError, match="none of the chosen models can run: program:p3 has resnet, vgg"):
        opened(tmp_path, {"models": "sockeye"}, program_models={"resnet", "vgg"})


@pytest.mark.parametrize("given, message", [
    ({"models": "alexnet"}, "unknown model(s) 'alexnet'"),
    ({"variants": "p4"}, "unknown variant(s) 'p4'"),
    ({"bandwidths": "fast"}, "bandwidth 'fast' is not a rate"),
    ({"bandwidths": "1gbit"}, "--bandwidths needs a target whose links can be shaped"),
    ({"repetitions": "0"}, "--repetitions must be a whole number of at least 1, got '0'"),
    ({"repetitions": "two"}, "--repetitions must be a whole number"),
    ({"profile": "huge"}, "unknown --profile 'huge'; valid ones: paper, smoke"),
    ({"env.VARIANT": "p3"}, "--env.VARIANT is set by the study per run; choose them with --variants"),
    ({"env.PROFILE": "paper"}, "--env.PROFILE is set by the study per run; choose them with --profile"),
    ({"env.ENGINE": "artifact"}, "--env.ENGINE is set by the study per run; choose them with --engines"),
    ({"engines": "gpu"}, "unknown engine(s) 'gpu'; the study has: embedded, artifact"),
    ({"engines": "artifact"}, "--engines=artifact needs the authors' baseline build, which is not registered: "
                              "install it with: ck install package:sysml19-p3-baseline-github --quiet, or choose "
                              "--engines=embedded"),
    ({"env": "x"}, "give run settings as --env.NAME=VALUE"),
    ({"link_capacity": "1gbit"}, "--link_capacity describes a cluster's links"),
    ({"target": "nowhere"}, "there is no machine entry 'nowhere'"),
    ({"env.SEED": "$(touch x)"}, "SEED='$(touch x)' holds a $ (variable or command substitution)"),
    ({"env.VARIANT": "`x`"}, "VARIANT='`x`' holds a backtick"),  # shell syntax first, before the reserved names
    ({"env.BATCH_SIZE": "abc"}, "BATCH_SIZE must be a whole number, got 'abc'"),
    ({"env.NUM_WORKERS": "1000"}, "NUM_WORKERS=1000 with NUM_SERVERS=1 puts 1001 workers and servers on this machine"),
    ({"env.SAVE_PARAMS": "/nonexistent/dir/p.npz"}, "SAVE_PARAMS='/nonexistent/dir/p.npz': the folder "
                                                     "/nonexistent/dir does not exist"),
])
def test_bad_options_are_refused_before_anything_is_stored(tmp_path, given, message):
    with pytest.raises(UserError) as refused:
        opened(tmp_path, given)
    assert message in str(refused.value)
    assert not (tmp_path / "store" / "sweeps").exists()


def test_sweep_request_on_a_cluster_runs_at_its_native_rate_with_the_matrix_profile():
    cluster = make_target("c2", CLUSTER, "4gbit")
    request = sweep_request({"models": "vgg"}, study(), cluster, ALL_MODELS, io.StringIO())
    assert (request.bandwidths, request.profile, request.repetitions) == (["4gbit"], "paper", 3)


def test_a_testbed_sweep_keeps_the_rate_to_restore_and_shaping_needs_root(tmp_path):
    state = tmp_path / "tb-state"
    state.mkdir()
    (state / "testbed.json").write_text(json.dumps({"name": "tb2", "hosts": 2, "rate": "10gbit"}))
    machines = Machines(tb2={"hosts": ["10.77.0.1", "10.77.0.2"], "ssh_config": str(state / "ssh_config")})
    sweep, target, _, _ = opened(tmp_path, {"target": "tb2", "models": "resnet", "bandwidths": "1gbit,4gbit"},
                                 machines=machines)
    assert (target.kind, target.testbed, target.shaping) == ("testbed", "tb2", True)
    assert sweep.bandwidths == ("1gbit", "4gbit") and sweep.restore_rate == "10gbit" and sweep.profile == "paper"
    with pytest.raises(UserError, match="shaping the links of testbed tb2 needs root"):
        check_can_shape(target, euid=1000)
    check_can_shape(target, euid=0)
    check_can_shape(EMBEDDED, euid=1000)


# --- engines ---------------------------------------------------------------------------------------

def test_engines_default_to_embedded_plus_the_artifact_when_both_its_builds_are_registered(tmp_path):
    sweep, _, _, console = opened(tmp_path, {"models": "resnet"}, artifact_builds={"p3"})
    assert sweep.engines == ("embedded",)
    assert ("study: engines: embedded (stock MXNet 1.9.1: its own P3 and its two baselines) (default: the authors' "
            "baseline build(s) not registered; add them with: ck install package:sysml19-p3-baseline-github --quiet; "
            "choose with --engines=embedded,artifact)") in console
    sweep, _, store, console = opened(tmp_path, {"models": "resnet"}, artifact_builds={"p3", "baseline"})
    assert sweep.engines == ("embedded", "artifact") and "default: both of the authors' builds are registered" in console
    assert Sweep.from_dict(json.loads(store.sweep_path(sweep.sweep_id).read_text())) == sweep
    assert [r.label() for r in sweep.runs()[:5]] == ["resnet baseline @ native #1",
                                                     "resnet baseline-worker-update @ native #1",
                                                     "resnet p3 @ native #1", "resnet artifact baseline @ native #1",
                                                     "resnet artifact p3 @ native #1"]  # no worker-update build of theirs
    assert "study: baseline-worker-update run(s) on the embedded engine only" in console


def test_engines_option_runs_only_what_the_authors_builds_can_and_older_sweeps_read_as_embedded(tmp_path):
    both = {"p3", "baseline"}
    sweep, _, _, console = opened(tmp_path, {"models": "vgg", "variants": "p3,p3-slicing-only",
                                             "engines": "artifact,embedded"}, artifact_builds=both)
    assert sweep.engines == ("artifact", "embedded")
    assert "study: p3-slicing-only run(s) on the embedded engine only" in console
    assert {(r.engine, r.variant) for r in sweep.runs()} == {("artifact", "p3"), ("embedded", "p3"),
                                                             ("embedded", "p3-slicing-only")}
    with pytest.raises(UserError, match=r"^the authors' builds run only p3 and baseline, not p3-slicing-only: add"):
        opened(tmp_path, {"variants": "p3-slicing-only", "engines": "artifact"}, artifact_builds=both)
    with pytest.raises(UserError, match=r"^p3-slicing-only cannot run on the authors' builds .*add embedded to --engines"):
        opened(tmp_path, {"variants": "p3,p3-slicing-only", "engines": "artifact"}, artifact_builds=both)
    older = sweep.to_dict()
    del older["engines"]  # a sweep stored before engines: its runs were (and resume as) embedded runs
    assert Sweep.from_dict(older).engines == ("embedded",)
    with pytest.raises(UserError, match="is malformed"):
        Sweep.from_dict({**older, "engines": ["gpu"]})


# --- report, export, import -----------------------------------------------------------------------

def test_report_dir_and_bundle_files():
    assert report_dir({}, Path("/s")) == Path("/s/report")
    assert report_dir({"out_dir": "/r/"}, Path("/s")) == Path("/r")
    assert bundle_out({"out": "/b/a.tar.gz"}, "x") == Path("/b/a.tar.gz")
    assert bundle_out({"out": "con", "out_file": "a.tgz"}, "x") == Path("a.tgz")
    for given in ({"out": "con"}, {"out": "json"}, {}, {"out": "a.zip"}):
        with pytest.raises(UserError, match="name the bundle file: ck export study:x --out=FILE.tar.gz"):
            bundle_out(given, "x")
    assert bundle_in({"in": "b.tar.gz"}, None) == Path("b.tar.gz")
    with pytest.raises(UserError, match=r"name the bundle: ck import study:NAME --in=FILE.tar.gz"):
        bundle_in({}, None)


def test_flags_as_ck_and_ck_access_give_them():
    assert all(options.flag({"quick": v}, "quick") for v in ("yes", "true", "1", "on", True, "YES"))
    assert not any(options.flag({"quick": v}, "quick") for v in ("", "no", False, None))
    assert not options.flag({}, "quick")


# --- a quick sweep on a testbed: bandwidths from a probe ------------------------------------------

def machines_with_testbed(tmp_path, hosts=3):
    state = tmp_path / "tb-state"
    state.mkdir(exist_ok=True)
    (state / "testbed.json").write_text(json.dumps({"name": "tb3", "hosts": hosts, "rate": None}))
    return Machines(tb3={"hosts": [f"10.77.0.{i}" for i in range(1, hosts + 1)], "ssh_config": str(state / "ssh_config")})


class Probe:
    """A baseline probe as the sweep runs it: per model, the unified result of an unshaped run."""

    def __init__(self, **results):
        self.results, self.dirs = results, []

    def __call__(self, model, run_dir):
        self.dirs.append(run_dir)
        return self.results[model]


PROBES = {"resnet": {"compute_s_per_iter": 0.34, "comm_s_per_iter": 0.12, "image_shape": "3,32,32"},
          "vgg": {"compute_s_per_iter": 0.79, "comm_s_per_iter": 0.65, "image_shape": "3,32,32"}}


def test_quick_on_a_testbed_chooses_each_models_bandwidths_from_a_probe_and_stores_the_choice(tmp_path):
    probe = Probe(**PROBES)
    sweep, target, store, console = opened(tmp_path, {"target": "tb3", "quick": "yes"},
                                           machines=machines_with_testbed(tmp_path), probe=probe)
    assert target.kind == "testbed" and sweep.repetitions == 3 and sweep.timeline_repetition == 1
    assert [d.relative_to(store.root).as_posix() for d in probe.dirs] == [
        f"runs/{sweep.sweep_id}--probe--resnet/attempt-1", f"runs/{sweep.sweep_id}--probe--vgg/attempt-1"]
    resnet, vgg = sweep.choices
    # resnet: 25,575,912 parameters, 2 x 4 bytes each, 2/3 of it through a host's egress
    assert resnet.wire_bytes_per_iter == pytest.approx(2 * 4 * 25_575_912 * 2 / 3)
    # B = 8 x wire / (r x t_c - t_0): the quick study's one target, 1.6 -> 2.57 Gbit/s (resnet), 2.99 (vgg)
    assert (resnet.bandwidths, vgg.bandwidths) == (("2600mbit",), ("3000mbit",))
    for choice in (resnet, vgg):
        assert choice.ratios == (1.6,) and choice.probe_run.endswith("attempt-1") and choice.notes == ()
        assert choice.predicted[0] == pytest.approx(1.6, rel=0.05) and choice.probe_seconds == 30.0
    assert f"study: {vgg.summary()}" in console
    assert {r.bandwidth for r in sweep.runs() if r.model == "vgg"} == set(vgg.bandwidths)
    assert len(sweep.runs()) == 3 * 3 * (len(resnet.bandwidths) + len(vgg.bandwidths))  # 3 variants, 3 repetitions
    assert set(sweep.bandwidths) == set(resnet.bandwidths) | set(vgg.bandwidths)
    assert Sweep.from_dict(json.loads(store.sweep_path(sweep.sweep_id).read_text())) == sweep
    # before the probes, what they will take; after them, the runs' forecast from each probe (30 s) plus the
    # wire time its bandwidth adds per batch, unhidden: 10 batches x 8 x wire bytes / B
    assert console.index("study: first 2 baseline probe(s), 2 run(s), about 50s (resnet: 1 run(s), 20s each from "
                         "the study entry") < console.index("study: resnet: a baseline probe")
    vgg_run = 30.0 + 10 * 8 * vgg.wire_bytes_per_iter / 3e9
    resnet_run = 30.0 + 10 * 8 * resnet.wire_bytes_per_iter / 2.6e9
    expected = sweep.forecast
    assert expected.seconds == pytest.approx(9 * (vgg_run + resnet_run)) and expected.spent_s == 60.0
    assert "from its probe plus the shaped link's wire time" in expected.basis[0]
    assert expected.line().endswith("within the 30m00s this matrix aims at") and "after 1m00s of probes" in expected.line()


def test_explicit_bandwidths_or_a_user_timeline_setting_override_the_quick_matrix(tmp_path):
    probe = Probe()
    sweep, _, _, _ = opened(tmp_path, {"target": "tb3", "quick": "yes", "bandwidths": "1gbit",
                                       "env.TIMELINE": "0"}, machines=machines_with_testbed(tmp_path), probe=probe)
    assert probe.dirs == [] and sweep.choices == () and sweep.bandwidths == ("1gbit",)
    assert sweep.timeline_repetition is None and sweep.env["TIMELINE"] == "0"


def test_a_probe_without_figures_or_a_model_without_a_parameter_count_is_refused(tmp_path):
    machines = machines_with_testbed(tmp_path)
    with pytest.raises(UserError, match=r"^the baseline probe of resnet measured no compute_s_per_iter .*"
                                        r"give the bandwidths yourself: --bandwidths=RATE,RATE,...$"):
        opened(tmp_path, {"target": "tb3", "quick": "yes"}, machines=machines,
               probe=Probe(resnet={"comm_s_per_iter": 0.1, "image_shape": "3,32,32"}))
    with pytest.raises(UserError, match=r"no parameter count of resnet at image shape 3,64,64; add it under "
                                        r"parameters.resnet in its meta, or give --bandwidths"):
        opened(tmp_path, {"target": "tb3", "quick": "yes", "models": "resnet"}, machines=machines,
               probe=Probe(resnet={**PROBES["resnet"], "image_shape": "3,64,64"}))


def test_fewer_than_3_repetitions_on_a_testbed_are_announced_as_no_verdict(tmp_path):
    _, _, _, console = opened(tmp_path, {"target": "tb3", "models": "resnet", "bandwidths": "1gbit",
                                         "repetitions": "2"}, machines=machines_with_testbed(tmp_path))
    assert "study: note: n=2 < 3 runs per configuration: the report will give no verdict" in console


def test_timeline_config_option():
    assert options.timeline_config({}) is None
    assert options.timeline_config({"timeline_config": "vgg, 720mbit"}) == ("vgg", "720mbit")
    assert options.timeline_config({"timeline_config": "resnet,native"}) == ("resnet", "native")
    with pytest.raises(UserError, match=r"is not MODEL,BANDWIDTH; give e.g. --timeline_config=vgg,720mbit"):
        options.timeline_config({"timeline_config": "vgg"})
    with pytest.raises(UserError, match="not a rate"):
        options.timeline_config({"timeline_config": "vgg,fast"})


def test_bandwidth_choice_rule_rounding_and_the_links_capacity():
    assert [rate_name(x) for x in (5.83e9, 7.2e8, 1.46e6, 8.1e5, 10)] == ["5800mbit", "720mbit", "1.5mbit", "810kbit",
                                                                         "1kbit"]
    result = {"compute_s_per_iter": 1.0, "comm_s_per_iter": 0.1, "image_shape": "3,32,32"}
    params = {"m": {"3,32,32": 1_000_000}}  # 8 MB per iteration; 2 hosts: half of it on the wire, 32 Mbit
    choice = choose("m", result, "runs/p", params, "counted", 2, (0.5, 1.4, 4), None)
    assert choice.wire_bytes_per_iter == 4e6
    # r = (0.1 + 32e6 / B) / 1: 0.5 -> 80 Mbit/s, 1.4 -> 24.6 Mbit/s, 4 -> 8.2 Mbit/s
    assert choice.bandwidths == ("80mbit", "25mbit", "8.2mbit")
    assert choice.predicted == pytest.approx((0.5, 1.38, 4.0), abs=0.02)
    capped = choose("m", result, "runs/p", params, "counted", 2, (0.5, 1.4, 4), "50mbit")
    assert capped.bandwidths == ("native", "25mbit", "8.2mbit") and capped.predicted[0] == pytest.approx(0.1)
    assert capped.notes == ("target 0.5: it needs 80mbit, above 50mbit; served by native bandwidth",)
    single = choose("m", result, "runs/p", params, "counted", 1, (0.5, 4), None)  # one host: nothing on the wire
    assert single.bandwidths == ("native",) and len(single.notes) == 2


def test_a_resumed_sweep_checks_its_stored_settings_again(tmp_path):
    sweep, _, store, _ = opened(tmp_path, {"models": "resnet", "variants": "baseline"})
    stored = json.loads(store.sweep_path(sweep.sweep_id).read_text())
    stored["env"] = {"SEED": "1;touch x"}  # a sweep file is input too: edited, or from an older version
    store.sweep_path(sweep.sweep_id).write_text(json.dumps(stored))
    with pytest.raises(UserError, match=r"SEED='1;touch x' holds a ; \(a new command\)"):
        opened(tmp_path, {"resume": "yes"})


def test_on_a_cluster_output_paths_must_be_absolute_as_run_folders_go_with_the_run(tmp_path):
    with pytest.raises(UserError, match="SAVE_PARAMS='p.npz' is relative, but on a cluster"):
        opened(tmp_path, {"target": "c2", "env.SAVE_PARAMS": "p.npz"}, machines=Machines(c2=CLUSTER))


# --- --emulate -------------------------------------------------------------------------------------

def machines_with_a_testbed(tmp_path):
    state = tmp_path / "tb-state"
    state.mkdir(exist_ok=True)
    (state / "testbed.json").write_text(json.dumps({"name": "tb2", "hosts": 2, "rate": "10gbit"}))
    return Machines(tb2={"hosts": ["10.77.0.1", "10.77.0.2"], "ssh_config": str(state / "ssh_config")})


def test_emulate_runs_the_claims_at_a_bandwidth_with_emulated_compute_and_links_divided_by_k(tmp_path):
    sweep, _, _, console = opened(tmp_path, {"target": "tb2", "emulate": "v100", "dilation": "10"},
                                  machines=machines_with_a_testbed(tmp_path))
    at_bandwidth = [c for c in study().claims if c.bandwidth]
    assert set(sweep.models) == {c.model for c in at_bandwidth}
    assert set(sweep.bandwidths) == {c.bandwidth for c in at_bandwidth} and not sweep.choices  # no probe
    assert {"baseline", "p3", "p3-slicing-only"} <= set(sweep.variants)
    assert (sweep.env["COMPUTE"], sweep.env["COMPUTE_PROFILE"], sweep.env["DILATION"]) == ("emulated", "v100", "10")
    assert sweep.dilation == 10.0 and sweep.link_rate("4gbit") == "400000000bit"
    assert "emulated compute (v100 profile, k=10)" in console and "never measured ones" in console
    assert sweep.engines == ("embedded",)
    # each claim's variant and baseline at its bandwidth, not every combination; kept when the plan is stored
    claimed = {(c.model, c.bandwidth, v) for c in at_bandwidth for v in (c.variant, c.versus)}
    runs = sweep.runs()
    assert {(r.model, r.bandwidth, r.variant) for r in runs} == claimed
    assert len(runs) == len(claimed) * sweep.repetitions
    assert Sweep.from_dict(sweep.to_dict()).runs() == runs
    widened, _, _, _ = opened(tmp_path, {"target": "tb2", "emulate": "v100", "bandwidths": "4gbit,15gbit"},
                              machines=machines_with_a_testbed(tmp_path))
    assert len(widened.runs()) == len(widened.models) * 2 * len(widened.variants) * widened.repetitions
    both, _, _, _ = opened(tmp_path, {"target": "tb2", "emulate": "v100"}, machines=machines_with_a_testbed(tmp_path),
                           artifact_builds={"p3", "baseline"})
    # the authors' builds registered: they emulate too, each claim whose variant and baseline they both have
    assert both.engines == ("embedded", "artifact")
    on_theirs = {(r.model, r.bandwidth, r.variant) for r in both.runs() if r.engine == "artifact"}
    assert on_theirs == {(c.model, c.bandwidth, v) for c in at_bandwidth if c.variant == "p3" for v in ("p3", "baseline")}
    assert on_theirs and {(r.model, r.bandwidth, r.variant) for r in both.runs() if r.engine == "embedded"} == claimed
    default, _, _, _ = opened(tmp_path, {"target": "tb2", "emulate": "yes", "models": "resnet"},
                              machines=machines_with_a_testbed(tmp_path))
    assert default.dilation == options.EMULATION_DILATION and default.models == ("resnet",)
    assert {(r.model, r.variant) for r in default.runs()} == {("resnet", "p3"), ("resnet", "baseline")}
    plain, _, _, _ = opened(tmp_path, {"target": "tb2", "bandwidths": "4gbit"}, machines=machines_with_a_testbed(tmp_path))
    assert plain.dilation == 1.0 and plain.link_rate("4gbit") == "4gbit"


@pytest.mark.parametrize("given, problem", [
    ({"emulate": "v100"}, "the sweep must shape the links: make a testbed"),
    ({"target": "tb2", "dilation": "4"}, "--dilation applies to emulated runs only"),
    ({"target": "tb2", "emulate": "v100", "dilation": "0"}, r"--dilation must be a number above 0 .*fix it with --dilation=K$"),
    ({"target": "tb2", "emulate": "rtx"}, r"unknown --emulate 'rtx'; valid ones: p4000 \(the paper's\), titan-x-maxwell, "
                                         r"v100, a100, h100, or measured:FILE"),
    ({"target": "tb2", "emulate": "v100", "env": {"DILATION": "4"}}, "--env.DILATION is set by the study per run"),
    ({"target": "tb2", "emulate": "v100", "engines": "embedded,artifact"}, "--engines=artifact needs the authors' .* build, which is not registered"),
])
def test_emulate_refuses_what_it_cannot_run_in_one_line(tmp_path, given, problem):
    with pytest.raises(UserError, match=problem) as refused:
        opened(tmp_path, given, machines=machines_with_a_testbed(tmp_path))
    assert "\n" not in str(refused.value)


def test_runs_that_were_cpu_bound_get_the_command_that_runs_their_claim_again_at_twice_the_k(tmp_path):
    sweep, _, _, _ = opened(tmp_path, {"target": "tb2", "emulate": "v100", "dilation": "20"},
                            machines=machines_with_a_testbed(tmp_path))
    bound = [RunConfig("vgg", "p3-slicing-only", "30gbit", 1), RunConfig("vgg", "baseline", "30gbit", 2)]
    [line] = larger_k_advice("sysml19-p3", sweep, tmp_path / "my store", bound)
    assert line.startswith("study: warning: 2 vgg run(s) at 30gbit were CPU-bound at k=20 (no emulated verdict")
    assert line.endswith(f"ck reproduce study:sysml19-p3 --target=tb2 '--store={tmp_path / 'my store'}' "
                         "--emulate=v100 --dilation=40 --models=vgg --bandwidths=30gbit "
                         "--variants=baseline,p3-slicing-only")
    assert larger_k_advice("sysml19-p3", sweep, tmp_path, []) == []


def test_emulate_runs_sockeyes_up_to_claim_over_the_bandwidths_given_and_refuses_a_gpu_without_its_profile(tmp_path):
    sweep, _, _, console = opened(tmp_path, {"target": "tb2", "emulate": "p4000", "models": "sockeye",
                                             "bandwidths": "1gbit,4gbit"}, machines=machines_with_a_testbed(tmp_path))
    assert sweep.models == ("sockeye",) and set(sweep.bandwidths) == {"1gbit", "4gbit"}
    assert (sweep.env["COMPUTE"], sweep.env["COMPUTE_PROFILE"]) == ("emulated", "p4000")
    assert {(r.model, r.bandwidth) for r in sweep.runs()} == {("sockeye", "1gbit"), ("sockeye", "4gbit")}
    assert "emulated compute (p4000 profile" in console
    with pytest.raises(UserError, match="COMPUTE_PROFILE=v100 has no profile for sockeye") as refused:
        opened(tmp_path, {"target": "tb2", "emulate": "v100", "models": "sockeye", "bandwidths": "1gbit"},
               machines=machines_with_a_testbed(tmp_path))
    assert "\n" not in str(refused.value)
