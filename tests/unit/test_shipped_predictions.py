"""The predictions shipped with the release (study/shipped_predictions.json): in step with the model, and all a
report asks for."""
import json

import pytest

from reprokit.study.report.ship_predictions import what_reports_ask
from reprokit.study.whatif import iteration_model, shipped_predictions as sp
from reprokit.study.whatif.iteration_model import Layer, ModelInput, Policy

pytestmark = pytest.mark.parallel


def test_the_shipped_predictions_are_of_this_model_and_cover_everything_a_report_asks(monkeypatch):
    assert json.loads(sp.SHIPPED.read_text())["model_version"] == sp.model_version(), (
        "the model changed: python -m reprokit.study.report.ship_predictions")
    simulated = []
    monkeypatch.setattr(iteration_model, "simulate", lambda spec: simulated.append(spec))
    what_reports_ask()
    assert simulated == [], f"{len(simulated)} predictions a report asks are not shipped: python -m " \
                            f"reprokit.study.report.ship_predictions"


def test_a_shipped_prediction_is_what_the_model_says_and_any_other_input_is_simulated():
    shipped = sp.shipped()
    assert shipped
    spec = ModelInput((Layer("l", 0.01, 0.02, (1000,)),), 2, 2, 1e9, Policy.P3)
    assert sp.key_of(spec) not in shipped
    assert sp.simulate(spec) == iteration_model.simulate(spec)
    # A file of another model version is not used at all.
    sp.shipped.cache_clear()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sp, "model_version", lambda: "another")
            assert sp.shipped() == {}
    finally:
        sp.shipped.cache_clear()
