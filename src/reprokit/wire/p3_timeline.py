"""How long the forward pass waited for weights, how much communication it hid, and a Chrome trace of it.

Pure Python (standard library only), so the framework's tests run it without MXNet.

Iteration ``k`` is forward ``k``, backward ``k`` and the communication of its
gradients, whose weights forward ``k + 1`` reads. Parameters (``i``, in forward
order, 0 = input layer) are grouped into layers (``layer_groups``: consecutive
parameters of one block, such as a convolution's weight and bias, which one
operator reads). The trainer records, in seconds of ``time.time()``:

- ``grad_ready(k, i)``: backward ``k`` has written the gradient (every
  parameter with a timeline; otherwise the first and last parameter);
- ``weight_ready(k, i)``: the weights updated by iteration ``k`` are in place;
- ``forward_end(k, g)``: forward ``k`` has finished reading layer ``g``;
- ``forward_pushed(k)``: the trainer handed forward ``k`` to the engine.

From these, for iteration ``k``:

- backward end ``B_k`` = the latest ``grad_ready(k, ·)``; forward ``k + 1`` can
  start at ``R = max(B_k, forward_pushed(k + 1))``;
- forward ``k + 1`` reached layer ``g`` at ``E_g`` = the latest of ``R`` and the
  ends of earlier layers that ended before ``g`` did;
- ``comm_wait`` = the length of the union of ``[E_g, weights of g in place]``:
  the time forward ``k + 1`` waited for weights;
- ``comm`` = the length of the union of ``[grad_ready(k, i), weight_ready(k, i)]``
  (the earliest ready gradient stands in for parameters without a record);
- ``compute`` = ``B_{k+1} - R - comm_wait``: forward and backward ``k + 1``;
- ``overlap`` = 1 - sum(comm_wait) / sum(comm): the share of communication
  time hidden behind computation.

When every parameter's ``grad_ready`` is recorded (``ready_params`` None, as
workers do for a timeline), each layer's compute is measured too, inside the
run (``layer_profile``): forward of layer ``g`` from the later of the previous
layers' end (``R`` for the first) and its weights in place, to its own end;
backward of ``g`` from the later of the forward's end and the next layer's
gradients (in backward order) to its own. Layers without
parameters (activations, pooling, the loss) fall into the layer after them, so
the layers add up to ``compute``; an emulated run can wait these times
(reprokit.emulation reads them from the trace's ``otherData``).
"""
from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any

LOG_PREFIX = "p3-comm:"
# The one log line the framework parses (see format_comm_line).
COMM_LINE = re.compile(r"p3-comm:((?:\s+\w+=\S+)+)\s*$")


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by (start, end) intervals; empty or reversed ones count 0."""
    spans = sorted((a, b) for a, b in intervals if b > a)
    total, cur_a, cur_b = 0.0, 0.0, None  # cur_a is read only once cur_b is set
    for a, b in spans:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def layer_groups(names: Iterable[str]) -> list[int]:
    """A layer number per parameter: consecutive parameters whose names differ only after the last '_'."""
    groups: list[int] = []
    last = None
    for name in names:
        key = name.rsplit("_", 1)[0] if "_" in name else name
        groups.append(groups[-1] + (key != last) if groups else 0)
        last = key
    return groups


def forward_reach_times(start: float, forward_end: Sequence[float]) -> list[float]:
    """``E_g`` for every layer (in forward order): when the forward pass could turn to it."""
    reach = []
    for g, end in enumerate(forward_end):
        e = start
        for h in range(g):
            if forward_end[h] < end and forward_end[h] > e:
                e = forward_end[h]
        reach.append(e)
    return reach


class _Iteration:
    __slots__ = ("grad_ready", "weight_ready", "forward_end", "forward_pushed")

    def __init__(self, n: int, layers: int) -> None:
        self.grad_ready: dict[int, float] = {}
        # Seconds, None until recorded: read only once the iteration is complete (CommMeter._complete).
        self.weight_ready: list[Any] = [None] * n
        self.forward_end: list[Any] = [None] * layers
        self.forward_pushed: float | None = None


class CommMeter:
    """Collects the records of a worker's iterations and turns them into figures and a trace.

    ``ready_params``: the parameters whose ``grad_ready`` is recorded every
    iteration (None: all). Records may arrive from any thread. Iterations are
    reduced to three numbers as soon as their records are complete
    (``collect``), so a long run keeps little; with ``keep_trace`` the trace
    events are kept as well.
    """

    def __init__(self, num_params: int, names: Iterable[str] | None = None, ready_params: Iterable[int] | None = None,
                 keep_trace: bool = False, pid: int = 0, label: str = "worker") -> None:
        self.n = num_params
        self.names = list(names) if names else [f"param{i}" for i in range(num_params)]
        self.groups = layer_groups(self.names)  # layer of each parameter
        # parameters of each layer
        self.layers: list[list[int]] = [[] for _ in range(self.groups[-1] + 1 if self.groups else 0)]
        for i, g in enumerate(self.groups):
            self.layers[g].append(i)
        self.ready_params = set(range(num_params) if ready_params is None else ready_params)
        self.keep_trace = keep_trace
        self.pid = pid
        self.label = label
        self._lock = threading.Lock()
        self._its: dict[int, _Iteration] = {}
        self.waits: list[float] = []  # per finished iteration
        self.comms: list[float] = []
        self.computes: list[float] = []
        self.profile_layers = ready_params is None  # every gradient recorded: each layer's compute can be measured
        self.layer_sums = [[0.0, 0.0] for _ in self.layers]  # forward, backward seconds summed over iterations
        self.profiled = 0
        self.events: list[dict[str, Any]] = []
        self.skipped = 0

    def _it(self, k: int) -> _Iteration:
        it = self._its.get(k)
        if it is None:
            it = self._its[k] = _Iteration(self.n, len(self.layers))
        return it

    # -- records (any thread) --
    def forward_pushed(self, k: int, t: float) -> None:
        with self._lock:
            self._it(k).forward_pushed = t

    def forward_end(self, k: int, g: int, t: float) -> None:
        """Forward ``k`` finished reading layer ``g`` (see ``layers``)."""
        with self._lock:
            self._it(k).forward_end[g] = t

    def grad_ready(self, k: int, i: int, t: float) -> None:
        with self._lock:
            self._it(k).grad_ready[i] = t

    def weight_ready(self, k: int, i: int, t: float) -> None:
        with self._lock:
            self._it(k).weight_ready[i] = t

    # -- reduction --
    def _complete(self, k: int) -> bool:
        it, nxt = self._its.get(k), self._its.get(k + 1)
        return (it is not None and nxt is not None
                and None not in it.weight_ready and None not in nxt.forward_end
                and self.ready_params <= set(it.grad_ready) and self.ready_params <= set(nxt.grad_ready))

    def collect(self, final: bool = False) -> None:
        """Reduce every iteration whose records are complete; with ``final``, drop the rest."""
        with self._lock:
            for k in sorted(self._its):
                if self._complete(k):
                    self._reduce(k)
            if final:
                last = max(self._its, default=None)
                for k in list(self._its):
                    if self._its[k].grad_ready and k != last:
                        self.skipped += 1  # incomplete records (e.g. the run stopped mid-iteration)
                self._its.clear()

    def _reduce(self, k: int) -> None:
        it, nxt = self._its[k], self._its[k + 1]
        b_end = max(it.grad_ready.values())
        start = b_end if nxt.forward_pushed is None else max(b_end, nxt.forward_pushed)
        reach = forward_reach_times(start, nxt.forward_end)
        arrived = [max(it.weight_ready[i] for i in params) for params in self.layers]
        wait = union_length(zip(reach, arrived))
        first_ready = min(it.grad_ready.values())
        comm = union_length([(it.grad_ready.get(i, first_ready), w) for i, w in enumerate(it.weight_ready)])
        compute = max(0.0, max(nxt.grad_ready.values()) - start - wait)
        self.waits.append(wait)
        self.comms.append(comm)
        self.computes.append(compute)
        if self.profile_layers:
            self._add_layer_times(nxt, start, arrived)
        if self.keep_trace:
            self._trace_iteration(k, it, start, reach, arrived, max(nxt.grad_ready.values()), first_ready)
        del self._its[k]

    def _add_layer_times(self, it: _Iteration, start: float, arrived: list[float]) -> None:
        """Forward and backward seconds of each layer in iteration ``it`` (see the module's docstring). Layers that
        end together (MXNet runs operators in bulks) give their time to the first of them."""
        previous = start
        for g, w in enumerate(arrived):
            self.layer_sums[g][0] += max(0.0, it.forward_end[g] - max(previous, w))
            previous = max(previous, it.forward_end[g])
        for g in reversed(range(len(self.layers))):
            ready = max(it.grad_ready[i] for i in self.layers[g])
            self.layer_sums[g][1] += max(0.0, ready - previous)
            previous = max(previous, ready)
        self.profiled += 1

    def layer_profile(self, sizes: Sequence[int]) -> dict[str, Any] | None:
        """Mean forward and backward seconds per layer over the measured iterations, with the layer's array sizes
        (``sizes``: elements per parameter); None without per-layer records or measured iterations."""
        self.collect()
        if not self.profile_layers or self.profiled == 0:
            return None
        return {"iterations": self.profiled, "layers": [
            {"name": self.names[params[0]].rsplit("_", 1)[0], "arrays": [int(sizes[i]) for i in params],
             "forward_s": sums[0] / self.profiled, "backward_s": sums[1] / self.profiled}
            for params, sums in zip(self.layers, self.layer_sums)]}

    def summary(self) -> dict[str, Any]:
        """Per-iteration means over the reduced iterations (None when there are none)."""
        self.collect()
        n = len(self.waits)
        if n == 0:
            return {"comm_wait_s_per_iter": None, "overlap": None, "comm_s_per_iter": None,
                    "compute_s_per_iter": None, "iterations": 0}
        wait, comm = sum(self.waits), sum(self.comms)
        overlap = min(1.0, max(0.0, 1.0 - wait / comm)) if comm > 0 else 1.0
        return {"comm_wait_s_per_iter": wait / n, "overlap": overlap, "comm_s_per_iter": comm / n,
                "compute_s_per_iter": sum(self.computes) / n, "iterations": n}

    # -- trace --
    def _us(self, t: float) -> int:
        return int(round(t * 1e6))

    def _event(self, name: str, cat: str, ts: float, dur: float | None = None, tid: int = 0,
               args: dict[str, Any] | None = None, ph: str | None = None) -> None:
        event: dict[str, Any] = {"name": name, "cat": cat, "ph": ph or ("X" if dur is not None else "i"), "ts": self._us(ts),
                 "pid": self.pid, "tid": tid}
        if dur is not None:
            event["dur"] = max(0, self._us(ts + dur) - self._us(ts))
        else:
            event["s"] = "t"
        if args:
            event["args"] = args
        self.events.append(event)

    def _trace_iteration(self, k: int, it: _Iteration, start: float, reach: list[float], arrived: list[float],
                         next_b_end: float, first_ready: float) -> None:
        self._event(f"forward+backward {k + 1}", "compute", start, next_b_end - start, tid=1,
                    args={"iteration": k + 1})
        for g, (e, w) in enumerate(zip(reach, arrived)):
            first = self.layers[g][0]
            if w > e:
                self._event(f"wait {self.names[first]}", "wait", e, w - e, tid=2,
                            args={"iteration": k + 1, "layer": g})
            for i in self.layers[g]:
                lane = 100 + i
                ready, in_place = it.grad_ready.get(i), it.weight_ready[i]
                args = {"iteration": k, "param": self.names[i], "gradient_ready_us": ready and self._us(ready),
                        "weights_in_place_us": self._us(in_place), "forward_reached_us": self._us(e)}
                begin = first_ready if ready is None else ready
                self._event(f"comm {self.names[i]}", "comm", begin, in_place - begin, tid=lane, args=args)
                self._event("forward reached", "forward", e, tid=lane, args={"iteration": k + 1})
                if ready is not None:
                    self._event("gradient ready", "backward", ready, tid=lane, args={"iteration": k})

    def chrome_trace(self, other: dict[str, Any] | None = None) -> dict[str, Any]:
        """The trace format MXNet's profiler writes (chrome://tracing and Perfetto open it); ``other`` goes in its
        ``otherData`` (the format's place for metadata)."""
        self.collect(final=True)
        meta = [{"name": "process_name", "ph": "M", "pid": self.pid, "tid": 0, "args": {"name": self.label}},
                {"name": "thread_name", "ph": "M", "pid": self.pid, "tid": 1, "args": {"name": "compute"}},
                {"name": "thread_name", "ph": "M", "pid": self.pid, "tid": 2, "args": {"name": "forward waits"}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": self.pid, "tid": 100 + i,
                  "args": {"name": f"{i:03d} {name}"}} for i, name in enumerate(self.names)]
        meta += [{"name": "thread_sort_index", "ph": "M", "pid": self.pid, "tid": 100 + i,
                  "args": {"sort_index": 100 + i}} for i in range(self.n)]
        trace: dict[str, Any] = {"traceEvents": meta + sorted(self.events, key=lambda e: e["ts"]), "displayTimeUnit": "ms"}
        if other:
            trace["otherData"] = other
        return trace

    def write_trace(self, path: str, other: dict[str, Any] | None = None) -> None:
        with open(path, "w") as out:
            json.dump(self.chrome_trace(other), out)


def format_comm_line(summary: dict[str, Any], **extra: object) -> str:
    """``p3-comm: comm_wait_s_per_iter=F overlap=F comm_s_per_iter=F compute_s_per_iter=F iterations=N [k=v ...]``

    Figures are floats (``nan`` when no iteration could be measured); ``extra``
    keys (e.g. rank, variant, timeline) follow, values without spaces.
    """
    def fmt(value: object) -> str:
        if value is None:
            return "nan"
        return f"{value:.6f}" if isinstance(value, float) else str(value)

    fields: list[tuple[str, object]] = [
        ("comm_wait_s_per_iter", summary["comm_wait_s_per_iter"]), ("overlap", summary["overlap"]),
        ("comm_s_per_iter", summary["comm_s_per_iter"]), ("compute_s_per_iter", summary["compute_s_per_iter"]),
        ("iterations", summary["iterations"])] + sorted(extra.items())
    return LOG_PREFIX + "".join(f" {key}={fmt(value).replace(' ', '_')}" for key, value in fields)


def parse_comm_line(line: str) -> dict[str, Any] | None:
    """The fields of a ``p3-comm:`` line: floats for the figures (None for nan), int iterations, strings otherwise."""
    match = COMM_LINE.search(line)
    if not match:
        return None
    out: dict[str, Any] = {}
    for pair in match.group(1).split():
        key, value = pair.split("=", 1)
        if key == "iterations":
            out[key] = int(value)
        elif key in ("comm_wait_s_per_iter", "overlap", "comm_s_per_iter", "compute_s_per_iter"):
            number = float(value)
            out[key] = None if math.isnan(number) else number
        else:
            out[key] = value
    return out
