"""The iteration model checked against stored runs (study/model_check.py): what it is given, and what the record
keeps."""
import json

import pytest

from reprokit.emulation import profile as em
from reprokit.run.result import Result
from reprokit.study.whatif.iteration_model import Layer, ModelInput, Policy, simulate
from reprokit.study.whatif.model_check import (
    Configuration,
    ObservedRun,
    StackCosts,
    compared,
    model_input,
    recorded_errors,
    validation_folder,
    validation_runs,
)
from reprokit.vocabulary import RunStatus


def vgg_profile(tmp_path):
    profile = em.resolve_profile("v100", "vgg", "3,32,32", 32)
    profile_file = tmp_path / "emulated-compute.json"
    profile_file.write_text(json.dumps(profile.to_dict()))
    return profile, profile_file


def run(throughput=1.0):
    # Slicing alone runs as program:p3's VARIANT=p3 with P3_PRIORITY=0.
    return Result(RunStatus.OK, variant="p3", p3_priority=False, p3_slice_size=50_000, num_workers=4, num_servers=4,
                  batch_size=32, throughput_per_worker=[throughput] * 4, throughput_max=throughput,
                  throughput_std_per_worker=[0.0] * 4)


def test_a_slicing_alone_run_is_predicted_with_slicing_alone_not_with_p3(tmp_path):
    """The run's own variant is p3: the study's variant (the configuration's) must choose the policy, or slicing
    alone is predicted with priorities."""
    profile, profile_file = vgg_profile(tmp_path)
    observed = [ObservedRun(Configuration("vgg", "30gbit", variant, 80.0), run(), profile_file, "375mbit")
                for variant in ("p3-slicing-only", "p3")]
    rows = compared(observed)

    layers = tuple(Layer(x.name, x.forward_s * 80, x.backward_s * 80, x.arrays) for x in profile.layers)
    for variant, policy in (("p3-slicing-only", Policy.SLICING_ONLY), ("p3", Policy.P3)):
        expected = simulate(ModelInput(layers, 4, 4, 375e6, policy)).iteration_s
        assert rows[Configuration("vgg", "30gbit", variant, 80.0)][0][1] == expected
    assert rows[observed[0].config][0][1] != rows[observed[1].config][0][1]


def test_the_record_names_each_configuration_and_pairs_each_speedup_with_its_own_baseline(tmp_path):
    """Each row of a check says which model, bandwidth, variant and dilation it is, so the gate judges a claim by
    its own network and variants; a variant without a baseline at its bandwidth has no speedup."""
    _, profile_file = vgg_profile(tmp_path)

    def observed(model, bandwidth, variant, throughput):
        return ObservedRun(Configuration(model, bandwidth, variant, 40.0), run(throughput), profile_file, "375mbit")

    record = recorded_errors([observed("vgg", "15gbit", "p3", 2.0), observed("vgg", "15gbit", "baseline", 1.0),
                              observed("vgg", "30gbit", "p3", 2.0)], StackCosts(1e-9, 1e-5))
    assert [(r["bandwidth"], r["variant"], r["dilation"], r["n"]) for r in record["configurations"]] == [
        ("15gbit", "baseline", 40.0, 1), ("15gbit", "p3", 40.0, 1), ("30gbit", "p3", 40.0, 1)]
    assert [(s["bandwidth"], s["variant"]) for s in record["speedups"]] == [("15gbit", "p3")]
    rows = compared([observed("vgg", "15gbit", "p3", 2.0), observed("vgg", "15gbit", "baseline", 1.0)])
    base, p3 = (rows[Configuration("vgg", "15gbit", v, 40.0)][0] for v in ("baseline", "p3"))
    measured, predicted = base[0] / p3[0], base[1] / p3[1]
    assert measured == 2.0
    assert record["speedups"][0]["without_stack_costs"] == round(predicted / measured - 1, 4)
    assert record["speedups"][0]["error"] != record["speedups"][0]["without_stack_costs"]  # the costs count


def test_a_validation_run_is_found_again_where_the_benchmark_left_it(tmp_path):
    for model, rate, variant, rep, measured in (("vgg", "1gbit", "p3", 0, True), ("resnet", "off", "baseline", 1, True),
                                                 ("vgg", "1gbit", "baseline", 0, False)):  # an older run: no profile
        folder = validation_folder(tmp_path, model, rate, variant, rep)
        folder.mkdir()
        run(2.0).save(folder)
        if measured:
            (folder / em.MEASURED_FILE).write_text("{}")
    found = validation_runs(tmp_path)
    assert [(r.config, r.link_rate, r.profile_file.parent.name) for r in found] == [
        (Configuration("resnet", "off", "baseline"), "off", "resnet-off-baseline-1"),
        (Configuration("vgg", "1gbit", "p3"), "1gbit", "vgg-1gbit-p3-0")]
    assert found[0].result.throughput_per_worker == [2.0] * 4 and found[0].profile_file.name == em.MEASURED_FILE
    assert validation_runs(tmp_path / "elsewhere") == []


def test_a_bytescheduler_run_is_predicted_with_its_own_partition_and_credit(tmp_path):
    """ByteScheduler's knobs come from the run's result (its workers' bytescheduler lines), else their defaults."""
    _, profile_file = vgg_profile(tmp_path)
    knobs = {"partition": 500_000, "credit": 2_000_000, "credit_tuning": False, "commit": "", "pushpulls": [1] * 4,
             "tasks": [1] * 4, "immediate": [True, True, True, False]}
    ran = Result(RunStatus.OK, variant="bytescheduler", num_workers=4, num_servers=4, batch_size=32,
                 throughput_per_worker=[1.0] * 4, throughput_max=1.0, bytescheduler=knobs)
    spec = model_input(ObservedRun(Configuration("vgg", "30gbit", "bytescheduler", 80.0), ran, profile_file, "375mbit"))
    assert (spec.policy, spec.partition_elements, spec.credit_elements) == (Policy.BYTESCHEDULER, 500_000, 2_000_000)
    ran_before = Result(RunStatus.OK, variant="bytescheduler", num_workers=4, num_servers=4, batch_size=32,
                        throughput_per_worker=[1.0] * 4)
    spec = model_input(ObservedRun(Configuration("vgg", "30gbit", "bytescheduler"), ran_before, profile_file, "off"))
    assert (spec.partition_elements, spec.credit_elements) == (1_000_000, 4_000_000)


def test_an_emulated_runs_compute_is_given_as_late_as_its_workers_measured_it_for_every_variant(tmp_path):
    """compute_s_per_iter (the workers' forward and backward, measured) over emulated_wait_s_per_iter (what the
    profile told them to wait): every layer times that, for the baseline as for ByteScheduler; a run without the
    two keeps its profile's times."""
    profile, profile_file = vgg_profile(tmp_path)
    for variant in ("baseline", "bytescheduler"):
        ran = Result(RunStatus.OK, variant=variant, num_workers=4, num_servers=4, batch_size=32,
                     throughput_per_worker=[1.0] * 4, compute_s_per_iter=2.2, emulated_wait_s_per_iter=2.0)
        spec = model_input(ObservedRun(Configuration("vgg", "30gbit", variant, 80.0), ran, profile_file, "375mbit"))
        assert [x.backward_s for x in spec.layers] == pytest.approx([x.backward_s * 80 * 1.1 for x in profile.layers])
        on_time = Result(RunStatus.OK, variant=variant, num_workers=4, num_servers=4, batch_size=32,
                         throughput_per_worker=[1.0] * 4)
        spec = model_input(ObservedRun(Configuration("vgg", "30gbit", variant, 80.0), on_time, profile_file, "375mbit"))
        assert [x.backward_s for x in spec.layers] == [x.backward_s * 80 for x in profile.layers]
