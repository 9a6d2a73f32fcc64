"""benchmarks/model_validation.py gives the model what a stored run was, not only what program:p3 ran."""
import json
import sys

from reprokit.emulation import profile as em
from reprokit.paths import REPO_ROOT
from reprokit.run.result import Result
from reprokit.study.iteration_model import Layer, ModelInput, Policy, simulate
from reprokit.vocabulary import RunStatus


def test_a_slicing_alone_run_is_predicted_with_slicing_alone_not_with_p3(tmp_path, monkeypatch):
    """Slicing alone runs as program:p3's VARIANT=p3 with P3_PRIORITY=0, so the run's own variant is p3: the
    study's variant (the configuration's) must choose the policy, or slicing alone is predicted with priorities."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    sys.modules.pop("model_validation", None)
    import model_validation as mv

    profile = em.resolve_profile("v100", "vgg", "3,32,32", 32)
    profile_file = tmp_path / "emulated-compute.json"
    profile_file.write_text(json.dumps(profile.to_dict()))
    run = Result(RunStatus.OK, variant="p3", p3_priority=False, p3_slice_size=50_000, num_workers=4, num_servers=4, batch_size=32,
                 throughput_per_worker=[1.0] * 4)
    observed = [(("vgg", "30gbit", variant), run, profile_file, "375mbit", 80.0)
                for variant in ("p3-slicing-only", "p3")]
    rows = mv.compared(observed, mv.StackCosts())

    layers = tuple(Layer(x.name, x.forward_s * 80, x.backward_s * 80, x.arrays) for x in profile.layers)
    for variant, policy in (("p3-slicing-only", Policy.SLICING_ONLY), ("p3", Policy.P3)):
        expected = simulate(ModelInput(layers, 4, 4, 375e6, policy)).iteration_s
        assert rows[("vgg", "30gbit", variant)][0][1] == expected
    assert rows[("vgg", "30gbit", "p3-slicing-only")][0][1] != rows[("vgg", "30gbit", "p3")][0][1]
