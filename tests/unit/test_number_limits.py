"""Numbers are checked where they enter, against the limits where they stop meaning anything or start costing
without bound, before any work: one test per kind of number."""
import copy
import json

import pytest

from reprokit.core.errors import UserError
from reprokit.core.values import MIN_RATE_BPS, tc_rate_bps
from reprokit.emulation import profile
from reprokit.run.settings import resolve_port
from reprokit.study.paper.rates import rate_bps, shaped_bps
from reprokit.study.whatif import predict
from support.study_data import study

pytestmark = pytest.mark.parallel


@pytest.mark.parametrize("rate", ["0gbit", "0bit", "0.0mbit", "999bit", "0.5kbit"])
def test_a_rate_below_a_kilobit_is_no_rate_anywhere(rate):
    assert tc_rate_bps(rate) is None
    with pytest.raises(UserError, match="is not a rate of at least 1kbit"):
        shaped_bps(rate)
    with pytest.raises(UserError, match="is not a rate of at least 1kbit"):
        predict.request_from({"model": "resnet", "bandwidths": rate, "workers": "4"}, study())
    assert rate_bps("1kbit") == MIN_RATE_BPS


def test_a_slice_that_would_cut_the_model_into_too_many_slices_is_refused_before_simulating(monkeypatch):
    simulated = []
    monkeypatch.setattr(predict, "simulate", lambda spec: simulated.append(spec))
    with pytest.raises(UserError, match=r"--slice=1 cuts vgg into 143667240 slices per iteration; the model "
                                        r"simulates at most 50000 .*give --slice of at least 4096"):
        predict.run({"model": "vgg", "bandwidths": "10gbit", "workers": "4", "slice": "1"}, study(), None)
    assert simulated == []
    request = predict.request_from({"model": "vgg", "bandwidths": "10gbit", "workers": "4", "slice": "4096"}, study())
    assert predict.slices_of(request.computes[0].layers, 4096) <= predict.MAX_SLICES


def test_a_compute_profile_from_a_file_is_checked_against_the_network_and_for_plausible_layer_times(tmp_path):
    reference = profile.collection("p4000").find("resnet", "3,224,224").to_dict()
    wrong_arrays = copy.deepcopy(reference)
    wrong_arrays["layers"][3]["arrays"][0] += 1
    an_hour = copy.deepcopy(reference)
    an_hour["layers"][0]["forward_s"] = 3600
    for name, data, message in (("arrays", wrong_arrays, "does not match resnet's network at 3,224,224: 193 arrays "
                                                         "of 25575913 elements in all, where the network has 193 of "
                                                         "25575912"),
                                ("hour", an_hour, r"layers\[0\].forward_s must be from 0 to 60, got 3600")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        with pytest.raises(UserError, match=message):
            profile.resolve_profile(str(path), "resnet", "3,224,224", 32)
    path = tmp_path / "same.json"
    path.write_text(json.dumps(reference))
    assert profile.resolve_profile(str(path), "resnet", "3,224,224", 32).layers[0].arrays == tuple(
        reference["layers"][0]["arrays"])


def test_a_port_refusal_names_the_option_it_came_from():
    with pytest.raises(UserError, match=r"^port must be a whole number, got 'abc'; fix it with --port=N \(1024-65535\)"):
        resolve_port("abc", "--port")
    with pytest.raises(UserError, match=r"^PS_ROOT_PORT must be at least 1024, got 80; fix it with --env.PS_ROOT_PORT=N"):
        resolve_port("80")
