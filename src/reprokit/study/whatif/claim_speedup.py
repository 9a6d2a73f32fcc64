"""The iteration model's speedup of a claim: its variant over its baseline at the claim's bandwidth and cluster size.

The one prediction of a claim that the predicted verdicts (analysis/labelled.py) judge and the sensitivity figure
(sensitivity.py) draws; it lives with the model, below the analysis that reads it.
"""
from __future__ import annotations

from functools import cache

from reprokit.emulation.gpus import gpu, paper_gpu
from reprokit.run.settings import PAPER_BATCH_SIZE
from reprokit.study.paper.claims import Claim
from reprokit.study.paper.rates import shaped_bps
from reprokit.study.profiles.layer_profiles import DEFAULT_SHAPE
from reprokit.study.whatif.compute import gpu_layers
from reprokit.study.whatif.iteration_model import VARIANT_POLICY, ModelInput, Policy
from reprokit.study.whatif.shipped_predictions import simulate


@cache  # a report asks for every claim at a bandwidth over a GPU's range; each prediction simulates two policies
def predicted_speedup(claim: Claim, gpu_name: str = "", images_per_sec: float = 0.0, stack_s_per_byte: float = 0.0,
                      stack_s_per_message: float = 0.0, fifo_bytes: float = 0.0) -> float:
    """The model's speedup of the claim's variant over its baseline at the claim's bandwidth and cluster size (a
    worker and a server on each machine), each worker's compute the GPU's profile (the paper's by default) at batch
    32, run at ``images_per_sec`` (its central figure when 0)."""
    assert claim.bandwidth and claim.cluster_size
    machines = claim.cluster_size
    name = gpu_name or paper_gpu().name
    central = gpu(name).throughput(claim.model).per_sec
    layers = gpu_layers(name, claim.model, DEFAULT_SHAPE[claim.model], PAPER_BATCH_SIZE,
                        central / (images_per_sec or central))

    def iteration_s(policy: Policy) -> float:
        return simulate(ModelInput(layers, machines, machines, shaped_bps(str(claim.bandwidth)),
                                   policy, stack_s_per_byte=stack_s_per_byte,
                                   stack_s_per_message=stack_s_per_message, fifo_bytes=fifo_bytes)).iteration_s
    return iteration_s(VARIANT_POLICY[claim.versus]) / iteration_s(VARIANT_POLICY[claim.variant])
