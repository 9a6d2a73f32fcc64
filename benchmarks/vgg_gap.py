"""What the paper's VGG-19 baseline would have had to do to give P3 its claimed speedups (+66% at 15 Gbps, slicing
alone +49% at 30 Gbps), at the paper's GPU (the P4000's plausible range): the iteration model's figures, predicted,
never measured.

    .venv/bin/python benchmarks/vgg_gap.py [--fifo_mb 12]

Prints, per claim: the model's baseline and P3 (or slicing alone) at the P4000's low, central and high throughput;
the baseline iteration the claim implies (claimed speedup times the variant's), and how far the baseline's link
would have to be from busy for it; then the candidates: the baseline with every array whole on one server (no
big-array split: the placement's worst case, dedicated layout, 4 servers), and with a deep first-in-first-out
queue below its sender (which a baseline without priorities does not mind).
"""
from __future__ import annotations

import argparse
import sys

from reprokit.emulation.gpus import gpu
from reprokit.study.paper.rates import shaped_bps
from reprokit.study.whatif.compute import gpu_layers
from reprokit.study.whatif.iteration_model import VARIANT_POLICY, Layout, ModelInput, simulate

CLAIMS = (("15gbit", "p3", 1.66), ("30gbit", "p3-slicing-only", 1.49))
WORKERS = 4


def iteration_s(layers, bandwidth: str, variant: str, layout: Layout = Layout.COLOCATED, **extra) -> float:
    return simulate(ModelInput(layers, WORKERS, WORKERS, shaped_bps(bandwidth), VARIANT_POLICY[variant], layout,
                               **extra)).iteration_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fifo_mb", type=float, default=12.0, help="bytes below the van per host (MB)")
    args = parser.parse_args()
    rate = gpu("p4000").throughput("vgg")
    print("PREDICTED by the iteration model (not measured): VGG-19 (3,224,224), batch 32, 4 workers, P4000 compute")
    for bandwidth, variant, claimed in CLAIMS:
        print(f"\n{variant} at {bandwidth} (claimed {claimed:.2f}x)")
        for label, images_per_sec in (("low", rate.low), ("central", rate.per_sec), ("high", rate.high)):
            layers = gpu_layers("p4000", "vgg", "3,224,224", 32, rate.per_sec / images_per_sec)
            compute = sum(x.forward_s + x.backward_s for x in layers)
            base, var = iteration_s(layers, bandwidth, "baseline"), iteration_s(layers, bandwidth, variant)
            implied = claimed * var
            prediction = simulate(ModelInput(layers, WORKERS, WORKERS, shaped_bps(bandwidth),
                                             VARIANT_POLICY["baseline"]))
            # The link busy for comm_s per iteration; a baseline at `implied` would keep it busy that share.
            busy = prediction.comm_s / implied
            whole = iteration_s(layers, bandwidth, "baseline", Layout.DEDICATED, bigarray_bound=2**62)
            split = iteration_s(layers, bandwidth, "baseline", Layout.DEDICATED)
            deep = iteration_s(layers, bandwidth, "baseline", fifo_bytes=args.fifo_mb * 1e6)
            print(f"  {label:7s} {images_per_sec:5.1f} img/s: compute {compute:.3f} s; baseline {base:.3f} s, "
                  f"{variant} {var:.3f} s ({base / var:.2f}x); the claim needs a baseline of {implied:.3f} s "
                  f"({implied / base:.2f}x the model's: its link busy {busy:.0%} of the iteration); "
                  f"dedicated servers, big arrays split {split:.3f} s, every array whole {whole:.3f} s "
                  f"({split / var:.2f}x -> {whole / var:.2f}x); {args.fifo_mb:g} MB below the sender {deep:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
