"""What one worker computes per iteration, as the iteration model is given it: a profile's layers (a GPU of
gpus.json, a profile a run measured of itself, or a stored run's own), optionally scaled."""
from __future__ import annotations

from reprokit.emulation.profile import ComputeProfile, resolve_profile
from reprokit.study.whatif.iteration_model import Layer


def layers_of(profile: ComputeProfile, scale: float = 1.0) -> tuple[Layer, ...]:
    """The model's layers of ``profile``, every time times ``scale`` (a dilation, or a slower or faster device)."""
    return tuple(Layer(x.name, x.forward_s * scale, x.backward_s * scale, x.arrays) for x in profile.layers)


def gpu_layers(gpu: str, model: str, image_shape: str, batch: int, scale: float = 1.0) -> tuple[Layer, ...]:
    """The model's layers of ``model`` on ``gpu`` (a name of gpus.json, or measured:FILE) at ``batch``."""
    return layers_of(resolve_profile(gpu, model, image_shape, batch), scale)
