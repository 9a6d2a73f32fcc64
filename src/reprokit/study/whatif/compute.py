"""What one worker computes per iteration, as the iteration model is given it: a profile's layers (a GPU of
gpus.json, a profile a run measured of itself, or a stored run's own), optionally scaled; or a layer profile's
(profiles/layer_profiles.py) with a total compute split by FLOPs."""
from __future__ import annotations

from reprokit.emulation.profile import ComputeProfile, resolve_profile
from reprokit.study.profiles.layer_profiles import FORWARD_SHARE, Profile
from reprokit.study.whatif.iteration_model import Layer


def layers_of(profile: ComputeProfile, scale: float = 1.0) -> tuple[Layer, ...]:
    """The model's layers of ``profile``, every time times ``scale`` (a dilation, or a slower or faster device)."""
    return tuple(Layer(x.name, x.forward_s * scale, x.backward_s * scale, x.arrays) for x in profile.layers)


def gpu_layers(gpu: str, model: str, image_shape: str, batch: int, scale: float = 1.0) -> tuple[Layer, ...]:
    """The model's layers of ``model`` on ``gpu`` (a name of gpus.json, or measured:FILE) at ``batch``."""
    return layers_of(resolve_profile(gpu, model, image_shape, batch), scale)


def profiled_layers(profile: Profile, compute_s: float) -> tuple[Layer, ...]:
    """The iteration model's layers of a layer profile, ``compute_s`` (forward + backward, one worker, one
    iteration) split by FLOPs, forward FORWARD_SHARE of each layer's share."""
    total = profile.forward_flops
    out = []
    for layer in profile.layers:
        share = compute_s * layer.forward_flops / total
        out.append(Layer(layer.name, share * FORWARD_SHARE, share * (1 - FORWARD_SHARE), layer.arrays))
    return tuple(out)
