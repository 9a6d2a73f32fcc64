"""Does the iteration model's rule for links explain its misses? The same runs predicted by the model and by a
second rule for links (runs nothing; the runs are what benchmarks/model_validation.py reads).

    .venv/bin/python benchmarks/link_rule_check.py --emulated STORE [STORE ...]
    .venv/bin/python benchmarks/link_rule_check.py --again WORK

The model (study/iteration_model.py) simulates one representative worker and, in the co-located layout, one host
whose links carry every message's average share, each link serving one message at a time in the policy's order.
Its docstring says that is exact for traffic spread evenly over the servers and optimistic for whole arrays on one
server. The second rule leaves nothing to symmetry or averages:

- every host, every worker and every server is simulated, and each array or slice sits on the server MXNet's
  KVStoreDist (or P3's round robin) puts it (iteration_model.messages);
- each worker-server pair has two streams (pushes, answers), like ps-lite's sockets. A stream sends its queue one
  message at a time, in the policy's order; the streams that are sending share each host's egress and ingress
  max-min fairly, like TCP flows.

Both rules see the same layer times, bandwidth, slices and policies, and no stack costs (the second rule has none).
Printed: per configuration the measured iteration time, each rule's prediction and error, and P3's speedup.
Runs in seconds to a minute (every worker is simulated), so it is a check, not a replacement for the model.
"""
from __future__ import annotations

import argparse
import heapq
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reprokit.study.whatif.iteration_model import BYTES_PER_ELEMENT, ModelInput, messages
from reprokit.study.whatif.model_check import (
    ObservedRun,
    Rows,
    compared,
    measured_s,
    model_input,
    stored_emulated,
    validation_runs,
)

STUDY = "sysml19-p3"  # the study whose stores it reads

Stream = tuple[int, int, str]  # (from host, to host, "push" or "answer")
Done = Callable[[float], None]


@dataclass
class _Network:
    """Streams of queued messages; the sending ones share each host's egress and ingress max-min fairly."""
    bytes_per_s: float
    queued: dict[Stream, list[tuple[tuple[float, ...], int, float, Done]]] = field(default_factory=dict)
    sending: dict[Stream, list] = field(default_factory=dict)  # stream -> [bytes left, done]
    rates: dict[Stream, float] = field(default_factory=dict)
    seq: int = 0
    stale: bool = True

    def submit(self, stream: Stream, order: tuple[float, ...], size: float, done: Done) -> None:
        self.seq += 1
        heapq.heappush(self.queued.setdefault(stream, []), (order, self.seq, size, done))
        if stream not in self.sending:
            self._next(stream)

    def _next(self, stream: Stream) -> None:
        queue = self.queued.get(stream)
        if queue:
            _, _, size, done = heapq.heappop(queue)
            self.sending[stream] = [size, done]
        self.stale = True

    def share(self) -> None:
        """Max-min fair rates (progressive filling) over every host's egress and ingress."""
        links: dict[tuple[str, int], list[Stream]] = {}
        for s in self.sending:
            links.setdefault(("out", s[0]), []).append(s)
            links.setdefault(("in", s[1]), []).append(s)
        left = dict.fromkeys(links, self.bytes_per_s)
        self.rates = {}
        while len(self.rates) < len(self.sending):
            link, fair = min(((link, left[link] / n) for link, users in links.items()
                              if (n := sum(s not in self.rates for s in users))), key=lambda x: x[1])
            for s in links[link]:
                if s not in self.rates:
                    self.rates[s] = fair
                    left[("out", s[0])] -= fair
                    left[("in", s[1])] -= fair
        self.stale = False

    def next_finish(self, now: float) -> tuple[float, Stream | None]:
        if self.stale:
            self.share()
        return min(((now + left / self.rates[s], s) for s, (left, _) in self.sending.items()),
                   default=(math.inf, None), key=lambda x: x[0])

    def advance(self, dt: float) -> None:
        for s, sending in self.sending.items():
            sending[0] -= self.rates[s] * dt

    def finish(self, stream: Stream, now: float) -> None:
        done = self.sending.pop(stream)[1]
        self._next(stream)
        done(now)


def iteration_s(spec: ModelInput) -> float:
    """The slowest worker's last iteration (end of backward to end of backward) under the second rule; co-located
    layout only (server s on host s)."""
    layers, workers, servers = spec.layers, spec.workers, spec.servers
    assert servers == workers, "the second rule models the co-located layout"
    by_layer: list[list] = [[] for _ in layers]
    for m in messages(layers, spec.policy, servers, spec.slice_elements):
        by_layer[m.layer].append(m)
    net = _Network(spec.bandwidth_bps * spec.wire_efficiency / 8 if math.isfinite(spec.bandwidth_bps) else 1e15)
    events: list[tuple[float, int, Callable[[float], None]]] = []

    def at(t: float, action: Callable[[float], None]) -> None:
        net.seq += 1
        heapq.heappush(events, (t, net.seq, action))

    n_layers, n_iter = len(layers), spec.iterations
    pending = [[[len(by_layer[i]) for i in range(n_layers)] for _ in range(n_iter)] for _ in range(workers)]
    pulled = [[[0.0 if k == 0 else math.nan for _ in layers] for k in range(n_iter + 1)] for _ in range(workers)]
    arrived: dict[tuple, int] = {}
    parts_left: dict[tuple, int] = {}
    backward_end: list[list[float]] = [[] for _ in range(workers)]
    state = [[0, 0, 0.0] for _ in range(workers)]  # iteration, op, when the worker is free

    def order(m, now: float) -> tuple[float, ...]:
        return (float(m.key), float(m.part)) if spec.policy.prioritised else (now,)

    def part_arrived(k: int, m, server: int, elements: int, t: float) -> None:
        key = (k, m.key, m.part, server)
        arrived[key] = arrived.get(key, 0) + 1
        if arrived[key] == workers:  # aggregated: answer every worker (its own host's at once)
            for w in range(workers):
                if w == server:
                    part_done(w, k, m, t)
                else:
                    net.submit((server, w, "answer"), order(m, t), elements * BYTES_PER_ELEMENT,
                               lambda t2, w=w: part_done(w, k, m, t2))

    def part_done(w: int, k: int, m, t: float) -> None:
        parts_left[(w, k, m.key, m.part)] -= 1
        if parts_left[(w, k, m.key, m.part)] == 0:
            pending[w][k][m.layer] -= 1
            if pending[w][k][m.layer] == 0:
                pulled[w][k + 1][m.layer] = t
                advance(w, t)

    def send(w: int, k: int, m, now: float) -> None:
        parts_left[(w, k, m.key, m.part)] = len(m.parts)
        for server, elements in m.parts:
            if server == w:
                part_arrived(k, m, server, elements, now)
            else:
                net.submit((w, server, "push"), order(m, now), elements * BYTES_PER_ELEMENT,
                           lambda t, s=server, n=elements: part_arrived(k, m, s, n, t))

    def advance(w: int, now: float) -> None:
        st = state[w]
        while st[0] < n_iter:
            k, op = int(st[0]), int(st[1])
            if op < n_layers:
                if math.isnan(pulled[w][k][op]):
                    return
                st[2] = max(st[2], pulled[w][k][op]) + layers[op].forward_s
            else:
                i = 2 * n_layers - 1 - op
                st[2] += layers[i].backward_s
                if by_layer[i]:
                    at(st[2], lambda t, batch=by_layer[i], k=k: [send(w, k, m, t) for m in batch])
                else:
                    pulled[w][k + 1][i] = st[2]
                if i == 0:
                    backward_end[w].append(st[2])
            st[1] += 1
            if st[1] == 2 * n_layers:
                st[0], st[1] = st[0] + 1, 0

    for w in range(workers):
        at(0.0, lambda t, w=w: advance(w, t))
    now = 0.0
    while events or net.sending:
        finish, stream = net.next_finish(now)
        event = events[0][0] if events else math.inf
        net.advance(min(event, finish) - now)
        now = min(event, finish)
        if event <= finish:
            heapq.heappop(events)[2](now)
        else:
            assert stream is not None
            net.finish(stream, now)
    return max(ends[-1] - ends[-2] for ends in backward_end)


def second_rule(observed: list[ObservedRun]) -> Rows:
    rows: Rows = {}
    for run in observed:
        rows.setdefault(run.config, []).append((measured_s(run.result), iteration_s(model_input(run))))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--emulated", metavar="STORE", nargs="+", help="the emulated runs of these study stores")
    source.add_argument("--again", metavar="WORK", help="the runs benchmarks/model_validation.py left in WORK")
    args = parser.parse_args()
    observed = (stored_emulated([Path(store) for store in args.emulated], STUDY) if args.emulated
                else validation_runs(Path(args.again)))
    if not observed:
        raise SystemExit(f"benchmark: no runs to predict in {', '.join(args.emulated or [args.again])}")
    model, second = compared(observed), second_rule(observed)
    mean = statistics.mean
    print("no stack costs; error = predicted/measured - 1; n runs per configuration")
    print("model   bandwidth  variant          n  measured   model  error   second rule  error")
    for c, pairs in sorted(model.items()):
        meas, pred, alt = mean(p[0] for p in pairs), mean(p[1] for p in pairs), mean(p[1] for p in second[c])
        print(f"{c.model:7s} {c.bandwidth:9s}  {c.variant:15s} {len(pairs):2d} {meas:9.3f} {pred:7.3f} "
              f"{pred / meas - 1:+6.1%} {alt:12.3f} {alt / meas - 1:+6.1%}")
    print("\nspeedup over the baseline: measured, model, second rule")
    for c, pairs in sorted(model.items()):
        if c.variant == "baseline" or c.baseline not in model:
            continue
        measured = mean(p[0] for p in model[c.baseline]) / mean(p[0] for p in pairs)
        by_model = mean(p[1] for p in model[c.baseline]) / mean(p[1] for p in pairs)
        by_second = mean(p[1] for p in second[c.baseline]) / mean(p[1] for p in second[c])
        print(f"  {c.model:7s} {c.bandwidth:9s} {c.variant:15s} {measured:.3f}x  {by_model:.3f}x "
              f"({by_model / measured - 1:+.1%})  {by_second:.3f}x ({by_second / measured - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
