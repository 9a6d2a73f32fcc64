"""A discrete-event model of one steady-state iteration of data-parallel training under a parameter server.

Predicted, never measured: `ck predict study` prints what this model says, labelled so. Standard library only.

What is simulated (one representative worker; every worker is assumed identical, see below):

- Compute on the worker is serial: forward of layers 0..L-1, then backward of layers L-1..0. Forward of layer i
  in iteration k waits until every array of layer i is back from iteration k-1 (pull done); iteration 1 waits
  for nothing (the parameters start in place).
- When backward of layer i ends, its arrays are handed to the worker's sender as messages:
  `baseline` sends whole arrays placed as MXNet's KVStoreDist places them (an array of more than 1,000,000
  elements split evenly over all servers, a smaller one whole on server (key * 9973) % S); `p3`, `slicing-only`
  and `priority-only` are MXNet's P3 (P3StoreDist), which cuts every array into slices of `slice_elements` (for
  `priority-only` it cuts nothing: each array is one part) placed round-robin over the servers.
  `baseline` and `slicing-only` serve each queue first in, first out; `p3` and `priority-only` serve it by key
  (keys are numbered input layer first, so layers nearer the input go first). MXNet's slicing alone sends through
  P3's van at one priority, whose queue (a std::priority_queue comparing with <=) keeps no first-in-first-out order
  among equal priorities; first in, first out predicts it within 5% on fair links, and following that queue's heap
  did worse (docs/explanation/iteration-model.md). A message is never interrupted: priority preempts at message (slice) boundaries.
- `bytescheduler` is ByteScheduler (SOSP'19) as package:bytescheduler-github runs it over stock MXNet's KVStoreDist
  (its sources: bytecore.py, bytetask.py, mxnet/kvstore.py, mxnet/kvstore_task.py, with reprokit's patches): an array
  of more than `partition_elements` (BYTESCHEDULER_PARTITION) is cut into ceil(n / partition) partitions, each a
  key of its own placed as KVStoreDist places any array; partitions whose gradient is ready wait in one queue by
  priority (key, then partition: the input layer first) and are released while the credit (`credit_elements`,
  BYTESCHEDULER_CREDIT: elements released whose pull is not done) is above zero; each released partition first
  pushes one element to a barrier key of its own and waits for its acknowledgement (the servers give it once every
  worker pushed it), then pushes its data and pulls it; below the scheduler the stock van sends first in, first out.
  Only worker 0's core schedules (the authors' kvstore.py makes the other workers' tasks immediate), but each
  partition's barrier holds every worker's push until worker 0 has released it, so every worker follows worker 0's
  order: the representative worker is worker 0. In the colocated layout ByteScheduler is simulated host by host
  (`simulate_hosts`): every worker, every key on its own server, loopback to a worker's own server, each link
  shared fairly among its peers, and KVStoreDist's round trip of each partition (push, acknowledgement, pull
  request, answer: ByteScheduler pushes, then pulls), since its keys sit unevenly (its barrier keys take every other integer key) and the barrier has every worker
  push the same partitions at once, which the averaged layout below would hide. Left out: the five engine
  operations and Python callbacks each partition adds on the worker (CPU time, the global interpreter lock; a
  check gives the model the run's compute as late as the run measured it, for every policy alike), and rows (the
  code cuts an array by rows of its first dimension, the model by elements: within a row of each other).
- Every link is one queue served at the link's bandwidth times `wire_efficiency` (the payload's share of what
  the link's rate counts: by default TCP over Ethernet at MTU 1500, 1448 of 1514 bytes), full duplex (each
  direction its own queue; the ingress at no rate at all where `ingress_shaped` is False, as on the testbed, which
  shapes only egress). A message crosses two links per direction (sender's egress, receiver's ingress), cut through: the downstream
  link may start it as soon as the upstream starts (or so that it ends when the upstream ends, when the
  downstream part is smaller), and never finishes it before the upstream has plus the per-message latency.
- A server answers a message (its pull) once it has the message from all W workers; aggregation and the
  optimizer's update take no time. The answer crosses the server's egress, then the worker's ingress.
- The iteration time is the distance between the ends of the last two iterations' backward passes. Each
  iteration's communication is over before the next backward starts (forward of the last layer waits for it),
  so from the second iteration on every iteration is the same; `iterations` (default 3: two intervals, the second the steady state) are simulated.

Symmetry: all W workers run the same schedule, so one worker is simulated (but ByteScheduler's colocated
layout, simulated host by host: see `simulate_hosts`). Layouts:

- `dedicated`: S servers on hosts of their own. The worker's NIC carries its own pushes (out) and pulls (in);
  server s's NIC carries W copies of every message placed on it, in and out (one aggregate per message: W
  identical flows that arrive together and share the link).
- `colocated` (our testbed's layout: one server per worker host, S = W = N hosts): a host's NIC carries its
  worker's and its server's traffic; traffic to the host's own server stays on the host (loopback). Modelled as
  one representative host whose egress and ingress carry, per message, the average over hosts: (N-1)/N of the
  message out as the push and (N-1)/N in for the server, then (N-1)/N out as the server's answer and (N-1)/N in
  as the worker's pull. This averages away which server a message sits on (a whole array on one server is spread
  over all hosts), so it is exact for traffic spread evenly over the servers and optimistic for a baseline with
  large whole arrays on one server.

The hosts' own costs (`stack_s_per_byte`, `stack_s_per_message`, zero by default): CPU time of copies and of the
network stack. A host's CPU and its NIC work on a stream side by side, so a transfer goes at the slower of the wire
and the stack per byte, and pays the cost per message on top (system calls, the van's bookkeeping). So a host whose
CPU keeps up with its NIC loses only the cost per message. (The rule first tried, costs in series with the wire, put
real runs on testbed hosts with a core each well above their measured iteration time: docs/explanation/iteration-model.md.)

Assumed: each host's egress is shared evenly among the hosts it sends to, as fair queueing shares it (the testbed's
`ck testbed --link_sharing=fair`). On one first-in-first-out queue per host (tbf) with 3 or more hosts, TCP's flows
share it unevenly: whole-array variants then ran up to 18% slower than predicted, with P3 unharmed (docs/explanation/iteration-model.md).
And a host's link sends whenever the host has data queued for it, as loss-based TCP (cubic, Linux's default) keeps
it busy; bbr paces each flow at its own estimate of the rate, and on 4 hosts left the authors' ResNet-50 baseline
up to 27% slower than predicted in some runs, where on cubic it ran within 1.1% (`ck testbed --tcp`).

Left out: the CPU the stack takes from compute (a measured profile already carries it), TCP dynamics (no loss, no
congestion window), the water mark (ZeroMQ's
queue ahead of the sender), the push/pull request messages (only payloads are sent), compute slowed by
communication, stragglers and any variance.
"""
from __future__ import annotations

import functools
import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

BYTES_PER_ELEMENT = 4
BIGARRAY_BOUND = 1_000_000  # MXNET_KVSTORE_BIGARRAY_BOUND's default: bigger arrays are split over all servers
KEY_HASH = 9973  # ps-lite's KVStoreDist: a small array goes whole to server (key * 9973) % S
# Payload per wire byte of TCP over Ethernet at MTU 1500: a full segment carries 1448 bytes (1500 less 20 IP, 20 TCP
# and 12 of timestamps) in a 1514-byte frame as a qdisc counts it (tc's rate: 14 bytes of Ethernet header). ACKs,
# coalesced by the receiver, add little: the testbed's links averaged 1463 bytes per packet under a sweep.
TCP_OVER_ETHERNET = 1448 / 1514


class Policy(StrEnum):
    BASELINE = "baseline"
    P3 = "p3"
    SLICING_ONLY = "slicing-only"
    PRIORITY_ONLY = "priority-only"
    # ByteScheduler (SOSP'19) over stock MXNet's KVStoreDist, as package:bytescheduler-github runs it: see
    # `messages` (its partitions, each a key of its own with a barrier key) and `simulate` (its credit, priority and
    # per-partition barrier); its knobs are ModelInput.partition_elements and credit_elements.
    BYTESCHEDULER = "bytescheduler"

    @property
    def sliced(self) -> bool:
        return self in (Policy.P3, Policy.SLICING_ONLY)

    @property
    def prioritised(self) -> bool:
        return self in (Policy.P3, Policy.PRIORITY_ONLY)

    @property
    def p3_store(self) -> bool:
        """Sent by MXNet's P3 (P3StoreDist), which places parts round-robin; the baseline and ByteScheduler by
        KVStoreDist."""
        return self not in (Policy.BASELINE, Policy.BYTESCHEDULER)

    @property
    def scheduled(self) -> bool:
        """Released by ByteScheduler's core on the worker (priority among ready partitions, a credit of elements in
        flight, a barrier among workers before each partition's push); below it the stock van, first in, first
        out."""
        return self is Policy.BYTESCHEDULER


# program:p3's VARIANT names, each as the policy it sends by (the worker-update baseline differs from `baseline` in
# where the optimizer runs, which the model does not time, so it has none here).
VARIANT_POLICY = {"baseline": Policy.BASELINE, "p3": Policy.P3, "p3-slicing-only": Policy.SLICING_ONLY,
                  "p3-priority-only": Policy.PRIORITY_ONLY, "bytescheduler": Policy.BYTESCHEDULER}
# ByteScheduler's defaults (its docs/scheduling.md and bytecore.py, and the variant's knobs in
# reprokit.engines.bytescheduler: a unit test keeps them equal): parameters per partition, parameters in flight.
BYTESCHEDULER_PARTITION = 1_000_000
BYTESCHEDULER_CREDIT = 4_000_000


class Layout(StrEnum):
    DEDICATED = "dedicated"
    COLOCATED = "colocated"


@dataclass(frozen=True)
class Layer:
    """One layer: its compute times (seconds per iteration on one worker) and its trainable arrays (elements of
    each, one kvstore key each, in the order the trainer numbers them)."""
    name: str
    forward_s: float
    backward_s: float
    arrays: tuple[int, ...]

    @property
    def bytes(self) -> int:
        return BYTES_PER_ELEMENT * sum(self.arrays)


@dataclass(frozen=True)
class ModelInput:
    layers: tuple[Layer, ...]  # input layer first
    workers: int
    servers: int
    bandwidth_bps: float  # per host NIC and direction; math.inf for no limit
    policy: Policy
    layout: Layout = Layout.COLOCATED
    latency_s: float = 0.0  # per message and direction, on top of transmission
    slice_elements: int = 50_000
    iterations: int = 3  # the third is the second again (the docstring's steady state; unit test)
    wire_efficiency: float = TCP_OVER_ETHERNET  # payload bytes per byte the link's rate counts
    # The hosts' own cost of moving a message, streaming beside the wire (the slower of the two per byte sets the
    # pace) plus a cost per message: CPU seconds of the network stack (copies, the van, the kernel), on every link
    # a message crosses. Zero by default (a host whose CPU keeps up with its NIC); a testbed's figures are measured with
    # no compute and no shaping (benchmarks/model_validation.py --stack).
    stack_s_per_byte: float = 0.0
    stack_s_per_message: float = 0.0
    # Bytes a host's egress holds below the policy's order, first in, first out: what the van has handed on to
    # ZeroMQ's queues, TCP's send buffers and the qdisc. P3's priorities order only what waits above them. Zero by
    # default: the order decides at every message.
    fifo_bytes: float = 0.0
    # Whether a host receives at most at the link's rate, as from a switch's port (the paper's network, and what a
    # prediction assumes). The testbed shapes only each host's egress (reprokit.cluster.testbed), so a host there can
    # receive from several peers at once faster than that: a check of its runs says False (its ingress then costs
    # only the stack's time). Host by host it mattered: VGG-16's baseline 11% slow with it, 0.7% without.
    ingress_shaped: bool = True
    # The baseline's MXNET_KVSTORE_BIGARRAY_BOUND: an array above it is split evenly over the servers, a smaller one
    # goes whole to one (placement shows only in the dedicated layout: the colocated one averages it away).
    bigarray_bound: int = BIGARRAY_BOUND
    # ByteScheduler's BYTESCHEDULER_PARTITION and BYTESCHEDULER_CREDIT (elements, as its core counts them); only the
    # bytescheduler policy reads them.
    partition_elements: int = BYTESCHEDULER_PARTITION
    credit_elements: float = BYTESCHEDULER_CREDIT

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("a model needs at least one layer")
        if self.workers < 1 or self.servers < 1:
            raise ValueError("workers and servers must be at least 1")
        if self.layout is Layout.COLOCATED and self.servers != self.workers:
            raise ValueError(f"the colocated layout has one server per worker host: servers ({self.servers}) "
                             f"must equal workers ({self.workers})")
        if not self.bandwidth_bps > 0 or self.latency_s < 0 or self.slice_elements < 1 or self.iterations < 2:
            raise ValueError("bandwidth must be > 0, latency >= 0, slice >= 1 element, iterations >= 2")
        if not 0 < self.wire_efficiency <= 1:
            raise ValueError("wire_efficiency must be in (0, 1]")
        if not (self.stack_s_per_byte >= 0 and self.stack_s_per_message >= 0):
            raise ValueError("the stack's costs per byte and per message must be >= 0")
        if not self.fifo_bytes >= 0:
            raise ValueError("fifo_bytes must be >= 0")
        if self.partition_elements < 1 or not self.credit_elements > 0:
            raise ValueError("ByteScheduler's partition must be >= 1 element and its credit > 0")
        for layer in self.layers:
            if layer.forward_s < 0 or layer.backward_s < 0 or any(n < 0 for n in layer.arrays):
                raise ValueError(f"layer {layer.name}: negative time or size")


@dataclass(frozen=True)
class Prediction:
    iteration_s: float  # the last simulated iteration
    compute_s: float  # forward + backward of all layers
    exposed_comm_s: float  # iteration_s - compute_s
    bytes_per_worker: int  # pushed per iteration (as many pulled)
    comm_s: float  # the busiest link's bytes per iteration at the bandwidth
    bound_s: float  # perfect overlap: max(compute_s, comm_s)
    messages: int  # per worker and iteration, each way
    iteration_times: tuple[float, ...] = field(default=())


@dataclass
class _Message:
    """One push of one worker: a slice, or a whole array; an array split over servers is one push whose parts
    go to their servers side by side (as the worker's sockets to each server carry them at once)."""
    layer: int
    key: int
    part: int
    parts: tuple[tuple[int, int], ...]  # (server, elements)
    barrier: int = -1  # ByteScheduler: the server of the partition's barrier key (-1: no barrier)

    @property
    def elements(self) -> int:
        return sum(n for _, n in self.parts)


def messages(layers: Sequence[Layer], policy: Policy, servers: int, slice_elements: int,
             bigarray_bound: int = BIGARRAY_BOUND, partition_elements: int = BYTESCHEDULER_PARTITION) -> list[_Message]:
    """Every message one worker sends per iteration (and receives back), by layer, key and slice (or partition)."""
    out: list[_Message] = []
    key = 0
    round_robin = 0
    store_key = 0  # ByteScheduler: MXNet's integer key of the next string key its tasks initialise

    def placed(store: int, elements: int) -> tuple[tuple[int, int], ...]:
        """KVStoreDist's placement of ``elements`` under its integer key ``store`` (EncodeDefaultKey: one server
        when below the bound, else split evenly; the baseline's branch below splits only above it, which differs
        for an array of exactly the bound)."""
        if elements >= bigarray_bound and servers > 1:
            share, extra = divmod(elements, servers)
            return tuple((s, share + (1 if s < extra else 0)) for s in range(servers))
        return (((store * KEY_HASH) % servers, elements),)

    for index, layer in enumerate(layers):
        for elements in layer.arrays:
            if policy.scheduled:
                # ByteScheduler's core (bytecore.py: post) partitions a tensor of more than BYTESCHEDULER_PARTITION
                # parameters into ceil(n / partition) children (kvstore_task.py: _partition_single_tensor), each a
                # kvstore key of its own ("name_i") that KVStoreDist places as it places any array. The code splits
                # by rows of the first dimension, the last (rows mod count) one row longer; the model splits the
                # elements so (the profiles hold sizes, not shapes), which differs by less than a row. Keys, in the
                # order their `init` gives them MXNet's integer keys: the task's barrier key, then each partition's
                # barrier key, then each partition's data (unpartitioned: the barrier, then the data).
                count = max(1, math.ceil(elements / partition_elements))
                share, extra = divmod(elements, count)
                barriers = [store_key] if count == 1 else [store_key + 1 + part for part in range(count)]
                store_key += 1 if count == 1 else 1 + count
                for part in range(count):
                    size = share + (1 if part >= count - extra else 0)
                    out.append(_Message(index, key, part, placed(store_key, size),
                                        barrier=(barriers[part] * KEY_HASH) % servers))
                    store_key += 1
            elif policy.p3_store:
                # Parts of at most `bound` elements, each on the next server (one counter for all keys).
                bound = slice_elements if policy.sliced else max(1, elements)
                count = max(1, math.ceil(elements / bound))
                for part in range(count):
                    size = min(bound, elements - part * bound)
                    out.append(_Message(index, key, part, ((round_robin % servers, size),)))
                    round_robin += 1
            elif elements > bigarray_bound and servers > 1:
                share, extra = divmod(elements, servers)
                out.append(_Message(index, key, 0, tuple((s, share + (1 if s < extra else 0))
                                                         for s in range(servers))))
            else:
                out.append(_Message(index, key, 0, (((key * KEY_HASH) % servers, elements),)))
            key += 1
    return out


class _Sim:
    """The event queue: (time, sequence, action). Times are kept to the nanosecond, so that float noise in sums
    of equal durations cannot reorder events from one iteration to the next."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int, Callable[[float], None]]] = []
        self.seq = 0

    def at(self, time: float, action: Callable[[float], None]) -> None:
        """Run `action(time)` at `time`; times equal to the nanosecond run in the order they were scheduled."""
        self.seq += 1
        heapq.heappush(self.events, (round(time, 9), self.seq, action))

    def run(self) -> None:
        while self.events:
            time, _, action = heapq.heappop(self.events)
            action(time)


Started = Callable[[float, float], None]  # (start, finish) of a transfer, told when it starts
Done = Callable[[float], None]  # finish, told when it ends


def _nothing(*_: float) -> None:
    return None


class _Link:
    """One direction of one NIC: a queue of transfers served one at a time, in the policy's order. An egress may
    hold ``fifo_bytes`` below that order: transfers leave the ordered queue for a first-in-first-out one while it
    holds fewer bytes than that, and the wire serves that one (0: the order decides at every message)."""

    def __init__(self, sim: _Sim, bandwidth_bps: float, stack_s_per_byte: float = 0.0,
                 stack_s_per_message: float = 0.0, fifo_bytes: float = 0.0) -> None:
        self.sim = sim
        self.seconds_per_byte = 8.0 / bandwidth_bps if math.isfinite(bandwidth_bps) else 0.0
        self.stack_s_per_byte, self.stack_s_per_message = stack_s_per_byte, stack_s_per_message
        self.ready: list[tuple[tuple[float, ...], int, float, float, Started, Done]] = []
        self.fifo: deque[tuple[float, float, Started, Done]] = deque()
        self.fifo_bytes = fifo_bytes
        self.committed = 0.0  # bytes taken out of the ordered queue and not yet sent (the one on the wire included)
        self.busy = False
        self.seq = 0
        self.carried = 0.0  # bytes over the whole simulation

    def duration(self, size: float) -> float:
        # The wire and the host's stack stream side by side: the slower sets the pace (module docstring).
        return size * max(self.seconds_per_byte, self.stack_s_per_byte) + self.stack_s_per_message

    def submit(self, available: float, order: tuple[float, ...], size: float, min_finish: float,
               started: Started = _nothing, done: Done = _nothing) -> None:
        """A transfer of `size` bytes that may start at `available` (never before now) and not end before
        `min_finish`; `started(start, finish)` when it starts, `done(finish)` when it ends."""
        def arrive(now: float) -> None:
            self.seq += 1
            heapq.heappush(self.ready, (order, self.seq, size, min_finish, started, done))
            self._start(now)
        self.sim.at(available, arrive)

    def _start(self, now: float) -> None:
        while self.ready and (self.committed == 0 or self.committed < self.fifo_bytes):
            _, _, size, min_finish, started, done = heapq.heappop(self.ready)
            self.fifo.append((size, min_finish, started, done))
            self.committed += size
        if self.busy or not self.fifo:
            return
        size, min_finish, started, done = self.fifo.popleft()
        self.busy = True
        self.carried += size
        finish = max(now + self.duration(size), min_finish)
        started(now, finish)

        def end(t: float) -> None:
            self.busy = False
            self.committed -= size
            done(t)
            self._start(t)
        self.sim.at(finish, end)




def _egress_link(sim: _Sim, spec: ModelInput) -> _Link:
    """One host's egress: the payload's rate, and the bytes it may hold below the policy's order."""
    bw = spec.bandwidth_bps * spec.wire_efficiency
    return _Link(sim, bw, spec.stack_s_per_byte, spec.stack_s_per_message, spec.fifo_bytes)


def _ingress_link(sim: _Sim, spec: ModelInput) -> _Link:
    """One host's ingress: a switch's port at the link's rate, or no rate at all where only egress is shaped."""
    bw = spec.bandwidth_bps * spec.wire_efficiency if spec.ingress_shaped else math.inf
    return _Link(sim, bw, spec.stack_s_per_byte, spec.stack_s_per_message)

def _cut_through(link: _Link, size: float, start: float, finish: float, latency: float) -> tuple[float, float]:
    """When the next link may start a message the previous one carries over [start, finish] (no earlier than
    the previous start, or so that it could end when the previous ends), and when it may end at the earliest."""
    return max(start, finish - link.duration(size)) + latency, finish + latency


@dataclass
class _Compute:
    """The worker's compute: the next op (0..L-1 forward of layer op, L..2L-1 backward of layer 2L-1-op) of
    which iteration, and when the worker is free."""
    iteration: int = 0
    op: int = 0
    free: float = 0.0


def simulate(spec: ModelInput) -> Prediction:
    if spec.policy.scheduled and spec.layout is Layout.COLOCATED and spec.workers > 1:
        return simulate_hosts(spec)  # its barrier makes every worker push a partition at once: placement shows
    layers = spec.layers
    colocated = spec.layout is Layout.COLOCATED
    msgs = messages(layers, spec.policy, 1 if colocated else spec.servers, spec.slice_elements, spec.bigarray_bound,
                    spec.partition_elements)
    by_layer: list[list[_Message]] = [[] for _ in layers]
    for m in msgs:
        by_layer[m.layer].append(m)
    sim = _Sim()
    if colocated:
        remote = (spec.workers - 1) / spec.workers
        host_out, host_in = _egress_link(sim, spec), _ingress_link(sim, spec)
        worker_out, worker_in = host_out, host_in
        server_in = [host_in]
        server_out = [host_out]
        push_sizes = (remote, remote)  # (on the sender's egress, on the receiver's ingress) per byte of message
        pull_sizes = (remote, remote)
    else:
        worker_out, worker_in = _egress_link(sim, spec), _ingress_link(sim, spec)
        server_in = [_ingress_link(sim, spec) for _ in range(spec.servers)]
        server_out = [_egress_link(sim, spec) for _ in range(spec.servers)]
        push_sizes = (1.0, float(spec.workers))
        pull_sizes = (float(spec.workers), 1.0)

    n_iter = spec.iterations
    pending = [[len(by_layer[i]) for i in range(len(layers))] for _ in range(n_iter)]
    pulled = [[0.0 if k == 0 else math.nan for _ in layers] for k in range(n_iter + 1)]
    backward_end: list[float] = []
    state = _Compute()
    n_layers = len(layers)

    def order(m: _Message, now: float) -> tuple[float, ...]:
        return (float(m.key), float(m.part)) if spec.policy.prioritised else (now,)  # FIFO: by time, then arrival

    def pulled_part(k: int, m: _Message, t: float) -> None:
        if spec.policy.scheduled:
            returned(m, t)
        pulled_one(k, m.layer, t)

    def send(k: int, m: _Message, now: float) -> None:
        """One push (its parts to their servers side by side); each server answers its part once it has it from
        every worker; the worker takes the answers of all parts in as one transfer."""
        key = order(m, now)
        pull_size = m.elements * BYTES_PER_ELEMENT * pull_sizes[1]
        answers: list[tuple[float, float]] = []

        def answer_started(start: float, finish: float) -> None:
            answers.append((start, finish))
            if len(answers) == len(m.parts):
                begin = max(a for a, _ in answers)
                end = max(f for _, f in answers)
                available, earliest = _cut_through(worker_in, pull_size, begin, end, spec.latency_s)
                worker_in.submit(available, key, pull_size, earliest, done=lambda t: pulled_part(k, m, t))

        def at_server(s: int, size: float) -> Done:
            def aggregated(t: float) -> None:
                server_out[s].submit(t, order(m, t), size * pull_sizes[0], t, started=answer_started)
            return aggregated

        def push_started(start: float, finish: float) -> None:
            for s, n in m.parts:
                size = n * BYTES_PER_ELEMENT * push_sizes[1]
                available, earliest = _cut_through(server_in[s], size, start, finish, spec.latency_s)
                server_in[s].submit(available, key, size, earliest, done=at_server(s, float(n * BYTES_PER_ELEMENT)))

        worker_out.submit(now, key, m.elements * BYTES_PER_ELEMENT * push_sizes[0], now, started=push_started)

    # ByteScheduler's core on the worker (bytecore.py: _loop): partitions whose gradient is ready wait in one queue by
    # priority (key * 1000 + partition: the input layer's first); the first is released while the credit (elements)
    # is above zero, and takes its elements from it; they come back when its pull is done (its end op). A released
    # partition first pushes one element to its barrier key, which the servers answer once every worker pushed it
    # (kvstore_task.py: _post_push_pull_barrier; dist_sync acknowledges a push when all workers have pushed), and
    # only then pushes its data and pulls. Only worker 0 schedules (the authors' kvstore.py makes every other
    # worker's tasks immediate), but every worker's data push waits for its barrier, which waits for worker 0's
    # release, so all of them follow worker 0's order: one representative worker, as for the other policies.
    credit = [spec.credit_elements]
    queued: list[tuple[int, int, int, int, _Message]] = []  # (key, partition, iteration, sequence, message)

    def release(now: float) -> None:
        while queued and credit[0] > 0:
            _, _, k, _, m = heapq.heappop(queued)
            credit[0] -= m.elements
            barrier(k, m, now)

    def barrier(k: int, m: _Message, now: float) -> None:
        """The partition's barrier: one element pushed, its acknowledgement (no payload) back; then its push."""
        key, s = order(m, now), m.barrier

        def acknowledged(start: float, finish: float) -> None:
            available, earliest = _cut_through(worker_in, 0.0, start, finish, spec.latency_s)
            worker_in.submit(available, key, 0.0, earliest, done=lambda t: send(k, m, t))

        def arrived(t: float) -> None:
            server_out[s].submit(t, order(m, t), 0.0, t, started=acknowledged)

        def pushed(start: float, finish: float) -> None:
            size = BYTES_PER_ELEMENT * push_sizes[1]
            available, earliest = _cut_through(server_in[s], size, start, finish, spec.latency_s)
            server_in[s].submit(available, key, size, earliest, done=arrived)

        worker_out.submit(now, key, BYTES_PER_ELEMENT * push_sizes[0], now, started=pushed)

    def sender(k: int, batch: list[_Message]) -> Callable[[float], None]:
        def send_all(t: float) -> None:
            if spec.policy.scheduled:
                for m in batch:
                    heapq.heappush(queued, (m.key, m.part, k, len(queued), m))
                release(t)
                return
            for m in batch:
                send(k, m, t)
        return send_all

    def returned(m: _Message, t: float) -> None:
        """ByteScheduler: a partition's pull is done; its elements return to the credit (never above the limit)."""
        credit[0] = min(spec.credit_elements, credit[0] + m.elements)
        release(t)

    def pulled_one(k: int, layer: int, t: float) -> None:
        pending[k][layer] -= 1
        if pending[k][layer] == 0:
            pulled[k + 1][layer] = t
            advance(t)

    def advance(now: float) -> None:
        """Run the worker's compute as far as the pulls allow (every time is a max over known times)."""
        while state.iteration < n_iter:
            k, op = state.iteration, state.op
            if op < n_layers:
                ready = pulled[k][op]
                if math.isnan(ready):
                    return  # waits for this layer's pull; pulled_one calls again
                state.free = max(state.free, ready) + layers[op].forward_s
            else:
                i = 2 * n_layers - 1 - op
                state.free += layers[i].backward_s
                end = state.free
                if by_layer[i]:
                    sim.at(end, sender(k, by_layer[i]))
                if not by_layer[i]:
                    pulled[k + 1][i] = end
                if i == 0:
                    backward_end.append(end)
            state.op += 1
            if state.op == 2 * n_layers:
                state.iteration += 1
                state.op = 0

    sim.at(0.0, advance)
    sim.run()
    if len(backward_end) != n_iter:
        raise RuntimeError(f"the simulation stopped after {len(backward_end)} of {n_iter} iterations")
    times = tuple(b - a for a, b in zip(backward_end, backward_end[1:]))
    compute = sum(layer.forward_s + layer.backward_s for layer in layers)
    iteration = times[-1]
    links = [worker_out, *server_out, *([worker_in, *server_in] if spec.ingress_shaped else [])]  # the shaped ones
    busiest = max(link.carried for link in links) / n_iter
    comm = busiest * worker_out.seconds_per_byte
    return Prediction(iteration_s=iteration, compute_s=compute, exposed_comm_s=max(0.0, iteration - compute),
                      bytes_per_worker=sum(layer.bytes for layer in layers), comm_s=comm,
                      bound_s=max(compute, comm), messages=len(msgs) + sum(m.barrier >= 0 for m in msgs),
                      iteration_times=times)


# Host by host the iterations need not repeat: what one iteration leaves (the workers' offsets, the fair queues'
# tags) shapes the next, and successive intervals differed by up to 8% on ResNet-50 (docs/notebook/bytescheduler.md).
# So `simulate_hosts` runs at least this many and gives the mean interval after the first, as a run's throughput is a
# mean over many.
HOST_ITERATIONS = 10


class _FairShare:
    """Links shared fairly among the hosts at their other end: self-clocked fair queueing. A message's tag is the
    larger of the tag its link is serving and the last tag its peer was given, plus its bytes; a link serves the
    smallest tag first (as `_Link`'s order). A message waits for what is queued to its own peer, and for its share
    of what is queued to the others, not behind all of it."""

    def __init__(self) -> None:
        self.in_service: dict[int, float] = {}
        self.last: dict[tuple[int, int], float] = {}

    def tag(self, link: _Link, peer: int, size: float) -> tuple[float, ...]:
        tag = max(self.in_service.get(id(link), 0.0), self.last.get((id(link), peer), 0.0)) + size
        self.last[id(link), peer] = tag
        return (tag,)

    def serving(self, link: _Link, tag: tuple[float, ...], then: Started) -> Started:
        """``then``, first noting that ``link`` serves ``tag``."""
        def started(start: float, finish: float) -> None:
            self.in_service[id(link)] = tag[0]
            then(start, finish)
        return started


def simulate_hosts(spec: ModelInput) -> Prediction:
    """The colocated layout host by host (what `simulate` gives ByteScheduler there; any policy that KVStoreDist
    places can be asked, the baseline for one): N hosts, each with a worker and a server (ps-lite numbers both roles
    by the same sort of their hosts, so worker r and server r share host r), every key on the server KVStoreDist puts
    it on (`messages` with S servers, not averaged), every worker's compute simulated. A message between a worker
    and the server on its own host stays on the host (loopback: no link, no cost); any other crosses its host's
    egress and the receiver's ingress, cut through, each its own message (ps-lite sends one per worker).

    Each link is shared fairly among the hosts at its other end, as the testbed's fair links share a host's egress (an
    htb class per destination, each lending what it leaves unused; reprokit.cluster.testbed): self-clocked fair
    queueing, a message's tag is the larger of the tag in service and the last tag of its peer, plus its bytes; the
    smallest tag goes next. So a message waits for what is queued to its own peer, not behind every other's.

    Each key's round trip is KVStoreDist's in dist_sync (src/kvstore/kvstore_dist.h, kvstore_dist_server.h). A
    policy that is not scheduled sends as MXNet 1.9.1's trainers do, a pushpull: one ZPushPull per server's part,
    which the server answers with the updated part once every worker pushed it. ByteScheduler pushes, then pulls:
    the push; its acknowledgement (no payload), which the server gives every worker once all of them pushed the
    part; once every part of the key is acknowledged, the pull's requests (no payload: MXNet's engine runs the pull
    after the push, which reads the buffer the pull writes); their answers. A partition's barrier key is such a push,
    acknowledged once every worker pushed it; only worker 0's core schedules (credit and priority, the credit back
    when worker 0's pull is done), the other workers' tasks are immediate (kvstore.py: rank != 0): they push each
    partition's barrier as soon as its gradient is ready and its data once the barrier is acknowledged, which waits
    for worker 0's release. The iteration time is worker 0's. The testbed's ingress is unshaped (`ingress_shaped`):
    a host receiving from several peers at once, as when they answer it together, is not held to one link's rate."""
    layers = spec.layers
    hosts = spec.workers
    if spec.layout is not Layout.COLOCATED or spec.policy.p3_store:
        raise ValueError("simulate_hosts: the colocated layout of a policy that KVStoreDist places")
    msgs = messages(layers, spec.policy, hosts, spec.slice_elements, spec.bigarray_bound, spec.partition_elements)
    by_layer: list[list[_Message]] = [[] for _ in layers]
    for m in msgs:
        by_layer[m.layer].append(m)
    sim = _Sim()
    out = [_egress_link(sim, spec) for _ in range(hosts)]
    into = [_ingress_link(sim, spec) for _ in range(hosts)]
    n_iter, n_layers = max(spec.iterations, HOST_ITERATIONS), len(layers)
    latency = spec.latency_s
    everyone = range(hosts)
    fair = _FairShare()

    def hop(src: int, size: float, now: float, arrived: Callable[[int, float], None],
            receivers: Sequence[int]) -> None:
        """``size`` bytes from host ``src`` to each of ``receivers``, a message each; ``arrived(receiver, t)``."""
        for r in receivers:
            if r == src:
                arrived(r, now)
                continue

            def started(start: float, finish: float, r: int = r) -> None:
                available, earliest = _cut_through(into[r], size, start, finish, latency)

                def arrive(t: float) -> None:
                    tag = fair.tag(into[r], src, size)
                    into[r].submit(t, tag, size, earliest, started=fair.serving(into[r], tag, _nothing),
                                   done=lambda t2: arrived(r, t2))
                sim.at(available, arrive)
            tag = fair.tag(out[src], r, size)
            out[src].submit(now, tag, size, now, started=fair.serving(out[src], tag, started))

    arrivals: dict[tuple[int, int, int], int] = {}  # (iteration, message, part or -1 for its barrier): pushes in
    answered: dict[tuple[int, int, int], int] = {}  # (iteration, message, worker): parts back
    acknowledged: dict[tuple[int, int, int], int] = {}  # (iteration, message, worker): parts' pushes acknowledged
    index_of = {id(m): i for i, m in enumerate(msgs)}
    pending = [[[len(by_layer[i]) for i in range(n_layers)] for _ in range(n_iter)] for _ in everyone]
    pulled = [[[0.0 if k == 0 else math.nan for _ in layers] for k in range(n_iter + 1)] for _ in everyone]
    backward_end: list[float] = []
    states = [_Compute() for _ in everyone]
    credit = [spec.credit_elements]
    queued: list[tuple[int, int, int, int, _Message]] = []

    def all_pushed(k: int, m: _Message, part: int) -> bool:
        """One more worker's push of the message's part (-1: its barrier) is at its server: was it the last?"""
        at = (k, index_of[id(m)], part)
        arrivals[at] = arrivals.get(at, 0) + 1
        return arrivals[at] == hosts

    def barrier(w: int, k: int, m: _Message, now: float) -> None:
        def at_server(_: int, t: float) -> None:
            if all_pushed(k, m, -1):  # acknowledged to every worker, each then pushes the data
                hop(m.barrier, 0.0, t, lambda r, t2: push(r, k, m, t2), everyone)
        hop(w, BYTES_PER_ELEMENT, now, at_server, (m.barrier,))

    def push(w: int, k: int, m: _Message, now: float) -> None:
        def back(r: int, t: float) -> None:
            at = (k, index_of[id(m)], r)
            answered[at] = answered.get(at, 0) + 1
            if answered[at] == len(m.parts):
                if r == 0 and spec.policy.scheduled:
                    returned(m, t)
                pulled_one(r, k, m.layer, t)

        def pull(r: int, t: float) -> None:
            """Push then pull: one more part's push acknowledged to worker r; once all are, it requests every part."""
            at = (k, index_of[id(m)], r)
            acknowledged[at] = acknowledged.get(at, 0) + 1
            if acknowledged[at] == len(m.parts):
                for s, n in m.parts:
                    hop(r, 0.0, t, functools.partial(answer, s, float(n * BYTES_PER_ELEMENT), r), (s,))

        def answer(s: int, size: float, r: int, _: int, t: float) -> None:
            """The pull's request of a part is at its server s: its answer to worker r."""
            hop(s, size, t, back, (r,))

        for part, (s, n) in enumerate(m.parts):
            size = float(n * BYTES_PER_ELEMENT)

            def at_server(_: int, t: float, part: int = part, s: int = s, size: float = size) -> None:
                if not all_pushed(k, m, part):
                    return
                if spec.policy.scheduled:  # aggregated: the push acknowledged to every worker, which then pulls
                    hop(s, 0.0, t, pull, everyone)
                else:  # a pushpull: aggregated, the server answers every worker's push of its part at once
                    hop(s, size, t, back, everyone)
            hop(w, size, now, at_server, (s,))


    def release(now: float) -> None:
        while queued and credit[0] > 0:
            _, _, k, _, m = heapq.heappop(queued)
            credit[0] -= m.elements
            barrier(0, k, m, now)

    def returned(m: _Message, t: float) -> None:
        credit[0] = min(spec.credit_elements, credit[0] + m.elements)
        release(t)

    def sender(w: int, k: int, batch: list[_Message]) -> Callable[[float], None]:
        def send_all(t: float) -> None:
            for m in batch:
                if not spec.policy.scheduled:
                    push(w, k, m, t)
                elif w == 0:
                    heapq.heappush(queued, (m.key, m.part, k, len(queued), m))
                else:
                    barrier(w, k, m, t)
            if w == 0 and spec.policy.scheduled:
                release(t)
        return send_all
    def pulled_one(w: int, k: int, layer: int, t: float) -> None:
        pending[w][k][layer] -= 1
        if pending[w][k][layer] == 0:
            pulled[w][k + 1][layer] = t
            advance(w, t)

    def advance(w: int, now: float) -> None:
        state = states[w]
        while state.iteration < n_iter:
            k, op = state.iteration, state.op
            if op < n_layers:
                ready = pulled[w][k][op]
                if math.isnan(ready):
                    return
                state.free = max(state.free, ready) + layers[op].forward_s
            else:
                i = 2 * n_layers - 1 - op
                state.free += layers[i].backward_s
                if by_layer[i]:
                    sim.at(state.free, sender(w, k, by_layer[i]))
                else:
                    pulled[w][k + 1][i] = state.free
                if i == 0 and w == 0:
                    backward_end.append(state.free)
            state.op += 1
            if state.op == 2 * n_layers:
                state.iteration += 1
                state.op = 0

    for w in everyone:
        sim.at(0.0, functools.partial(advance, w))
    sim.run()
    if len(backward_end) != n_iter:
        raise RuntimeError(f"the simulation stopped after {len(backward_end)} of {n_iter} iterations")
    times = tuple(b - a for a, b in zip(backward_end, backward_end[1:]))
    compute = sum(layer.forward_s + layer.backward_s for layer in layers)
    busiest = max(link.carried for link in (*out, *(into if spec.ingress_shaped else ()))) / n_iter
    comm = busiest * out[0].seconds_per_byte
    iteration = sum(times[1:]) / len(times[1:])
    return Prediction(iteration_s=iteration, compute_s=compute, exposed_comm_s=max(0.0, iteration - compute),
                      bytes_per_worker=sum(layer.bytes for layer in layers), comm_s=comm,
                      bound_s=max(compute, comm), messages=len(msgs) + sum(m.barrier >= 0 for m in msgs),
                      iteration_times=times)
