"""How much the bytes a host holds below the van's order (ModelInput.fifo_bytes) move the model's predictions at the
claims' settings, by GPU: predicted, never measured.

    .venv/bin/python benchmarks/fifo_effect.py [--fifo_mb 12]

At each claim stated at a bandwidth (4 workers, co-located servers, batch 32) and each GPU's central throughput,
prints the baseline's and the variant's predicted images/s per worker with no queue below the van and with
``--fifo_mb`` MB, and the change. A first-in-first-out queue below the sender delays what P3 sends first (the
input layers' slices the next forward waits for) behind what it committed before; the baseline sends in that order
anyway. The stack costs are the record's shared-core figures, dilated as the emulated checks were (k per claim).
"""
from __future__ import annotations

import argparse
import sys

from reprokit.study.paper.rates import shaped_bps
from reprokit.study.whatif.compute import gpu_layers
from reprokit.study.whatif.iteration_model import VARIANT_POLICY, ModelInput, simulate

CLAIMS = (("resnet", "4gbit", "p3", 20), ("vgg", "15gbit", "p3", 40), ("vgg", "30gbit", "p3-slicing-only", 80))
SHARED_CORE_COSTS = (3.38e-9, 266.5e-6)  # model_validation.json's checks: 3 hosts sharing 2 cores


def images_per_sec(gpu: str, model: str, bandwidth: str, variant: str, k: float, fifo_bytes: float) -> float:
    layers = gpu_layers(gpu, model, "3,224,224", 32, k)
    spec = ModelInput(layers, 4, 4, shaped_bps(bandwidth) / k, VARIANT_POLICY[variant],
                      stack_s_per_byte=SHARED_CORE_COSTS[0], stack_s_per_message=SHARED_CORE_COSTS[1],
                      fifo_bytes=fifo_bytes)
    return 32 / (simulate(spec).iteration_s / k)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fifo_mb", type=float, default=12.0)
    parser.add_argument("--gpus", default="v100,p4000")
    args = parser.parse_args()
    print(f"PREDICTED (not measured): images/s per worker with no queue below the van -> with {args.fifo_mb:g} MB")
    for model, bandwidth, variant, k in CLAIMS:
        for gpu in args.gpus.split(","):
            cells = []
            for v in ("baseline", variant):
                bare, deep = (images_per_sec(gpu, model, bandwidth, v, k, f) for f in (0.0, args.fifo_mb * 1e6))
                cells.append(f"{v} {bare:.1f} -> {deep:.1f} ({deep / bare - 1:+.1%})")
            print(f"  {model} {bandwidth} k={k} {gpu}: {'; '.join(cells)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
