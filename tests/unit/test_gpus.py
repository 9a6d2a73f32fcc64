"""GPUs as data (reprokit/emulation/gpus.json): the schema, the names users give, and what the model is given."""
import copy
import json

import pytest

from reprokit.core.errors import UserError
from reprokit.emulation import gpus as g, profile as em
from reprokit.study.paper.claims import repository_study
from reprokit.study.whatif.compute import layers_of
from reprokit.study.whatif.predict import predict, request_from
from support.study_data import study

pytestmark = pytest.mark.parallel
STORED = json.loads(g.GPUS_FILE.read_text())


def test_every_gpu_states_each_image_models_throughput_with_a_source_and_a_range_around_it():
    paper, table = g.parse(STORED, "gpus.json")
    assert paper == "p4000" and set(table) == {"p4000", "titan-x-maxwell", "v100", "a100", "h100"}
    for gpu in table.values():
        assert gpu.spec_source and gpu.fp32_tflops > 0 and gpu.memory_gb_per_s > 0
        assert set(gpu.models) - {"sockeye"} == {"resnet", "inception-v3", "vgg", "vgg16"}, gpu.name
        for model, rate in gpu.models.items():
            assert rate.low <= rate.per_sec <= rate.high and len(rate.source) > 40
            assert rate.unit == ("sentences" if model == "sockeye" else "images")
    # Sockeye at the paper's GPU and at the GPU its figures were derived on, in sentence pairs per second at the
    # paper's batch; every step of the derivation widens the range.
    assert {n for n, gpu in table.items() if "sockeye" in gpu.models} == {"p4000", "titan-x-maxwell"}
    sockeye = table["p4000"].models["sockeye"]
    assert sockeye.batch == 32 and sockeye.estimated and sockeye.high / sockeye.low > 3
    # The paper's GPU has no benchmark of its own: every figure is estimated, and says so.
    assert all(rate.estimated for rate in table["p4000"].models.values())


@pytest.mark.parametrize("change, says", [
    (lambda d: d["gpus"]["p4000"]["models"]["resnet"].pop("source"), "gpus.p4000.models.resnet has no 'source'"),
    (lambda d: d["gpus"]["v100"]["models"]["vgg"].pop("low"), "gpus.v100.models.vgg has no 'low'"),
    (lambda d: d["gpus"]["a100"]["models"]["resnet"].update(low=2000.0),
     "gpus.a100.models.resnet must be a range holding its figure (low <= images_per_sec <= high)"),
    (lambda d: d["gpus"]["h100"].pop("spec_source"), "gpus.h100 has no 'spec_source'"),
    (lambda d: d["gpus"]["p4000"]["models"]["sockeye"].pop("source"), "gpus.p4000.models.sockeye has no 'source'"),
    (lambda d: d["gpus"]["p4000"]["models"]["sockeye"].pop("high"), "gpus.p4000.models.sockeye has no 'high'"),
    (lambda d: d["gpus"]["p4000"]["models"]["sockeye"].update(low=500.0),
     "gpus.p4000.models.sockeye must be a range holding its figure (low <= sentences_per_sec <= high)"),
    (lambda d: d["gpus"]["p4000"]["models"]["sockeye"].update(
        images_per_sec=d["gpus"]["p4000"]["models"]["sockeye"].pop("sentences_per_sec")),
     "gpus.p4000.models.sockeye has no 'sentences_per_sec'"),
    (lambda d: d.update(paper_gpu="k80"), "paper_gpu 'k80' is not one of its GPUs"),
])
def test_a_gpu_table_without_sources_or_ranges_is_refused_in_one_line(change, says):
    data = copy.deepcopy(STORED)
    change(data)
    with pytest.raises(UserError) as info:
        g.parse(data, "gpus.json")
    assert says in str(info.value) and "\n" not in str(info.value)


def test_an_unknown_gpu_is_refused_listing_the_valid_names():
    with pytest.raises(UserError) as info:
        g.gpu("rtx-4090")
    assert str(info.value) == ("unknown --gpu 'rtx-4090'; valid ones: p4000 (the paper's), titan-x-maxwell, v100, "
                               "a100, h100, or measured:FILE (a profile a run measured of itself with "
                               "--env.TIMELINE=1)")


def test_each_gpus_profile_waits_its_throughput():
    for gpu in g.gpus().values():
        for model, rate in gpu.models.items():
            shape = {"inception-v3": "3,299,299", "sockeye": ""}.get(model, "3,224,224")
            p = em.resolve_profile(gpu.name, model, shape, rate.batch)
            assert rate.batch / p.total_s == pytest.approx(rate.per_sec), (gpu.name, model)


def predict_options(**extra):
    return {"model": "resnet", "bandwidths": "4gbit", "workers": "4", **extra}


def test_ck_predict_takes_every_gpu_and_refuses_an_unknown_one_listing_the_valid_names():
    request = request_from(predict_options(gpu="p4000,v100"), study())
    assert [c.label for c in request.computes] == ["P4000", "V100"]
    p4000, v100 = (r.predicted.compute_s for r in predict(request))
    assert p4000 == pytest.approx(32 / 78.5) and v100 == pytest.approx(32 / 403.2)
    # Without --gpu the paper's GPU.
    assert [c.label for c in request_from(predict_options(), study()).computes] == ["P4000"]
    for bad, says in (("rtx", "unknown --gpu 'rtx'; valid ones: p4000 (the paper's)"),
                      ("measured:/no/such.json", "--gpu='measured:/no/such.json': '/no/such.json' is not a file")):
        with pytest.raises(UserError, match=says.replace("(", r"\(").replace(")", r"\)")):
            request_from(predict_options(gpu=bad), study())
    with pytest.raises(UserError, match="give --gpu or --images_per_sec, not both"):
        request_from(predict_options(gpu="v100", images_per_sec="100"), study())
    # A GPU without a figure of the model: its own models named, not the run's COMPUTE_PROFILE setting.
    with pytest.raises(UserError, match=r"^the GPU profile v100 states no throughput of sockeye \(it has resnet, "):
        request_from(predict_options(gpu="v100", model="sockeye"), study())


def test_a_measured_profile_gives_the_model_the_compute_its_run_measured(tmp_path):
    """measured:FILE is what a run with --env.TIMELINE=1 measured of itself (measured-compute.json): the model is
    given exactly its layers at the run's batch, so with nothing to send the predicted iteration is the run's
    measured compute, and it is what the validation's checks of real runs predict from (model_check)."""
    ran = em.resolve_profile("v100", "resnet", "3,32,32", 32).scaled(em.Factor("cpu", 180.0, "a CPU's compute"))
    measured = tmp_path / "measured-compute.json"
    measured.write_text(json.dumps({**ran.to_dict(), "name": em.MEASURED_NAME}))
    request = request_from(predict_options(gpu=f"measured:{measured}", image_shape="3,32,32", workers="1",
                                           bandwidths="400gbit"), study())
    [compute] = request.computes
    assert compute.layers == layers_of(ran) and compute.label == "measured (measured-compute.json)"
    [row] = predict(request)
    assert row.baseline.iteration_s == pytest.approx(ran.total_s)  # one worker: nothing crosses a link
    # A measured profile of another network is refused in one line.
    with pytest.raises(UserError, match="is for resnet at 3,32,32, but the run trains vgg"):
        request_from(predict_options(gpu=f"measured:{measured}", model="vgg", image_shape="3,32,32"), study())


def test_ck_predict_takes_vgg16_on_the_bytescheduler_study_and_checks_its_parameters():
    """ByteScheduler's paper measured VGG-16: `ck predict study:sosp19-bytescheduler --model=vgg16` predicts from
    VGG-16's own layers and each GPU's VGG-16 figure, and the entry's parameter count agrees with the profile."""
    entry = repository_study("sosp19-bytescheduler")
    request = request_from(predict_options(model="vgg16", gpu="v100,p4000", variants="bytescheduler"), entry)
    v100, p4000 = request.computes
    assert sum(sum(x.arrays) for x in v100.layers) == entry.parameters["vgg16"]["3,224,224"] == 138_357_544
    rows = predict(request)
    assert [r.predicted.compute_s for r in rows] == pytest.approx([32 / 219.2, 32 / 59.0])
    assert all(r.baseline.iteration_s >= r.predicted.compute_s for r in rows)
    small = request_from(predict_options(model="vgg16", image_shape="3,32,32", gpu="v100"), entry)
    assert sum(sum(x.arrays) for x in small.computes[0].layers) == entry.parameters["vgg16"]["3,32,32"]
