"""How long the iteration model takes to answer for 4, 64 and 1,000 workers (VGG-19 at 224x224, 10gbit).

    PYTHONPATH=src .venv/bin/python benchmarks/model_scale.py [--repetitions 3]

One representative worker is simulated whatever the number of workers, so the time depends on the number of
messages (slices, and arrays split over servers) and, in the dedicated layout, on the number of server links.
"""
import argparse
import statistics
import time

from reprokit.study.profiles import layer_profiles
from reprokit.study.whatif.compute import profiled_layers
from reprokit.study.whatif.iteration_model import Layout, ModelInput, Policy, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--model", default="vgg")
    args = parser.parse_args()
    layers = profiled_layers(layer_profiles.profile(args.model), layer_profiles.default_compute_s(args.model))
    print(f"{args.model}: {len(layers)} layers; seconds per simulate() call (min / median of {args.repetitions})")
    print("| workers | layout | policy | messages | min s | median s | predicted s/iter |")
    print("|---|---|---|---|---|---|---|")
    for workers in (4, 64, 1000):
        for layout in Layout:
            for policy in (Policy.BASELINE, Policy.P3):
                spec = ModelInput(layers, workers, workers, 10e9, policy, layout)
                times = []
                for _ in range(args.repetitions):
                    start = time.perf_counter()
                    result = simulate(spec)
                    times.append(time.perf_counter() - start)
                print(f"| {workers} | {layout} | {policy} | {result.messages} | {min(times):.3f} | "
                      f"{statistics.median(times):.3f} | {result.iteration_s:.4f} |", flush=True)


if __name__ == "__main__":
    main()
