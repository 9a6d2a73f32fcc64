"""The forecast a sweep says before its first run: from earlier runs, a probe or the study entry, against a budget."""
import io
import json
from dataclasses import replace

import pytest

from reprokit.study.paper.planning import RunConfig
from reprokit.study.paper.rates import NATIVE
from reprokit.study.store.records import Provenance, Store
from reprokit.study.store.sweep_plan import Forecast
from reprokit.study.sweep import provenance as study_provenance, runner as study_runner
from reprokit.study.sweep.driver import reproduce
from reprokit.study.sweep.forecast import forecast, hindcast
from reprokit.vocabulary import RunStatus
from support.study_data import ALL_MODELS, EMBEDDED, records, study

QUICK_ENV = {"BATCH_SIZE": "16", "DISP_BATCHES": "3", "NUM_BATCHES": "10"}


def runs_of(model, n, bandwidth=NATIVE):
    return [RunConfig(model, "p3", bandwidth, rep) for rep in range(1, n + 1)]


def timed(model, seconds, env=QUICK_ENV, profile="smoke", target=EMBEDDED, ok=True):
    """Stored runs of ``model`` that took ``seconds`` each (ck included), with the run settings ``env``."""
    out = []
    for r, took in zip(records(model, NATIVE, [], [100.0 if ok else None] * len(seconds), target=target,
                               profile=profile), seconds):
        out.append(replace(r, provenance=replace(r.provenance, duration_s=took, env_overrides=dict(env))))
    return out


def test_earlier_runs_of_the_same_size_give_the_median_and_others_do_not_count():
    quick = study().quick
    earlier = (timed("vgg", [40.0, 50.0, 100.0]) + timed("vgg", [500.0], env={**QUICK_ENV, "NUM_BATCHES": "50"})
               + timed("vgg", [900.0], profile="paper") + timed("vgg", [700.0], ok=False)
               + [replace(r, imported_from="b") for r in timed("vgg", [800.0])])
    expected = forecast(runs_of("vgg", 4), earlier, EMBEDDED, "smoke", QUICK_ENV, quick)
    assert (expected.runs, expected.seconds, expected.unknown) == (4, 4 * 50.0, 0)
    assert expected.basis == ("vgg: 4 run(s), 50s each from median of 3 earlier run(s)",)


def test_emulated_runs_at_another_gpus_compute_or_dilation_do_not_forecast_each_other():
    """An emulated run waits its GPU's compute times k: a P4000 run takes several times a V100 run's."""
    quick = study().quick
    at = {**QUICK_ENV, "COMPUTE": "emulated", "COMPUTE_PROFILE": "v100", "DILATION": "20"}
    earlier = timed("vgg", [40.0, 50.0, 60.0], env=at)
    assert forecast(runs_of("vgg", 2), earlier, EMBEDDED, "smoke", at, quick).seconds == 2 * 50.0
    for other in ({"COMPUTE_PROFILE": "p4000"}, {"DILATION": "40"}):
        elsewhere = forecast(runs_of("vgg", 2), earlier, EMBEDDED, "smoke", {**at, **other}, quick)
        assert (elsewhere.seconds, elsewhere.unknown) == (0, 2), other


def test_the_study_entrys_figures_hold_only_for_its_own_run_size_and_profile():
    quick = study().quick
    own = forecast(runs_of("vgg", 3) + runs_of("resnet", 2), [], EMBEDDED, "smoke", QUICK_ENV, quick)
    assert (own.seconds, own.unknown) == (3 * 30 + 2 * 20, 0)
    assert own.basis[0] == "vgg: 3 run(s), 30s each from the study entry's run_seconds"
    bigger = forecast(runs_of("vgg", 3), [], EMBEDDED, "smoke", {**QUICK_ENV, "NUM_BATCHES": "40"}, quick)
    assert (bigger.seconds, bigger.unknown) == (0, 3)
    assert bigger.line() == ("3 run(s), no estimate (nothing to estimate from); 3 run(s) without an estimate (no "
                             "earlier run, probe or study figure for them); within the 30m00s this matrix aims at")
    paper = forecast(runs_of("vgg", 3), [], EMBEDDED, "paper", QUICK_ENV, quick)
    assert paper.unknown == 3


def stamped(runs, start=1000.0):
    """``runs`` one after the other from ``start``, each lasting its duration_s (started_at/ended_at as stored)."""
    out, t = [], start
    for r in runs:
        took = r.provenance.duration_s
        out.append(replace(r, provenance=replace(r.provenance, started_at=f"ISO ({t:.3f})",
                                                 ended_at=f"ISO ({t + took:.3f})")))
        t += took + 5
    return out


def test_the_hindcast_is_the_forecast_from_what_was_recorded_before_each_run_in_its_own_store():
    quick = study().quick
    sweep = stamped(timed("vgg", [40.0, 50.0, 90.0, 60.0]))
    elsewhere = [replace(r, record_id=f"{r.record_id}-other", origin=replace(r.origin, id="o-other"))
                 for r in stamped(timed("vgg", [10.0] * 3), 0.0)]
    late_import = [replace(r, imported_from="bundle") for r in sweep]  # its own store's runs, imported here
    said = hindcast(late_import + elsewhere, [study().matrix, quick])
    ids = [r.record_id for r in sweep]
    # the first run: nothing recorded before it in its store, and its run size is the quick matrix's: run_seconds
    assert said[ids[0]] == (30.0, "the study entry's run_seconds")
    assert said[ids[1]] == (40.0, "median of 1 earlier run(s)")  # not the other store's 10 s runs
    assert said[ids[2]] == (45.0, "median of 2 earlier run(s)")
    assert said[ids[3]] == (50.0, "median of 3 earlier run(s)")
    # and it is what forecast() says for that run from those records, as a resumed sweep would
    assert forecast([sweep[3].config.run], sweep[:3], EMBEDDED, "smoke", QUICK_ENV, quick).seconds == 50.0
    bigger = stamped(timed("vgg", [40.0, 50.0], env={**QUICK_ENV, "NUM_BATCHES": "50"}))
    assert hindcast(bigger, [study().matrix, quick]) == {bigger[1].record_id: (40.0, "median of 1 earlier run(s)")}


def test_a_forecast_above_the_budget_is_said_plainly_and_survives_the_sweep_file():
    quick = study().quick
    slow = forecast(runs_of("vgg", 18), timed("vgg", [120.0]), EMBEDDED, "smoke", QUICK_ENV, quick, spent_s=60.0)
    assert slow.over_budget and slow.seconds == 18 * 120.0
    assert slow.line() == ("18 run(s), about 36m00s after 1m00s of probes (vgg: 18 run(s), 2m00s each from median of "
                           "1 earlier run(s)); MORE than the 30m00s this matrix aims at: it runs anyway (fewer runs: "
                           "--models=, --variants=)")
    assert Forecast.from_dict(json.loads(json.dumps(slow.to_dict()))) == slow
    assert replace(slow, seconds=1750.0).over_budget  # the probes' minute tips 29m10s of runs over the budget
    assert not replace(slow, seconds=1730.0).over_budget


@pytest.fixture
def fake_runs(monkeypatch):
    """Every guarded run a sweep starts ends at once as a success that 'took' the seconds set per model."""
    took = {"resnet": 20.0, "vgg": 30.0}

    def run_once(command, run_dir, timeout_s, on_start=None):
        model = next(a.split("=", 1)[1] for a in command if a.startswith("--cmd_key="))
        return study_runner.RunOutcome(RunStatus.OK, None, {"throughput_samples_per_sec": 50.0, "params_in_sync": True},
                                       1000.0, 1000.0 + took[model], 0)

    monkeypatch.setattr(study_runner, "run_once", run_once)
    monkeypatch.setattr(study_provenance, "environment", lambda: Provenance(repo_revision="test"))
    return took


def test_reproduce_says_the_forecast_before_the_first_run_and_learns_from_the_runs_stored(tmp_path, fake_runs):
    store = Store(tmp_path / "store", "sysml19-p3")
    console = io.StringIO()
    summary = reproduce({"quick": "yes"}, study(), store, ALL_MODELS, lambda name: None, console)
    lines = console.getvalue().splitlines()
    first_run = next(i for i, line in enumerate(lines) if line.startswith("[") and "now:" in line)
    [at] = [i for i, line in enumerate(lines) if line.startswith("study: forecast: 18 run(s), about 7m30s (resnet: 9")]
    assert at < first_run and lines[at].endswith("within the 30m00s this matrix aims at")
    assert summary.ok == 18
    assert {r.provenance.duration_s for r in store.local_records()} == {20.0, 30.0}
    # the next quick sweep estimates from these (its vgg runs then take 400 s each)
    fake_runs["vgg"] = 400.0
    console = io.StringIO()
    reproduce({"quick": "yes"}, study(), store, ALL_MODELS, lambda name: None, console)
    [line] = [line for line in console.getvalue().splitlines() if "forecast:" in line]
    assert line.startswith("study: forecast: 18 run(s), about 7m30s (resnet: 9 run(s), 20s each from median of 9 "
                           "earlier run(s); vgg: 9 run(s), 30s each from median of 9 earlier run(s))")
    # and the one after from all 18: vgg's median is now (30 + 400) / 2, above the budget in all, said as a warning
    console = io.StringIO()
    reproduce({"quick": "yes"}, study(), store, ALL_MODELS, lambda name: None, console)
    [line] = [line for line in console.getvalue().splitlines() if "forecast:" in line]
    assert line.startswith("study: warning: forecast: 18 run(s), about 35m15s (resnet: 9 run(s), 20s each from "
                           "median of 18 earlier run(s); vgg: 9 run(s), 3m35s each from median of 18 earlier run(s))")
    assert line.endswith("MORE than the 30m00s this matrix aims at: it runs anyway (fewer runs: --models=, --variants=)")
