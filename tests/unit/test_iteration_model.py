"""The discrete-event iteration model (reprokit.study.whatif.iteration_model) and the layer profiles it is fed."""
import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from reprokit.study.paper.claims import from_meta, repository_study
from reprokit.study.profiles import layer_profiles
from reprokit.study.whatif.compute import profiled_layers
from reprokit.study.whatif.iteration_model import (
    HOST_ITERATIONS,
    TCP_OVER_ETHERNET,
    Layer,
    Layout,
    ModelInput,
    Policy,
    messages,
    simulate,
)

GBIT = 1e9


def vgg_like(fc_elements: int = 60_000_000) -> tuple[Layer, ...]:
    """Ten small convolutions with most of the compute, then one big dense layer with most of the bytes."""
    convs = tuple(Layer(f"conv{i}", 0.01, 0.02, (500_000, 500)) for i in range(10))
    return convs + (Layer("fc", 0.0005, 0.001, (fc_elements, 4096)),)


def run(layers, policy, bandwidth=GBIT, workers=4, servers=None, layout=Layout.COLOCATED, **kw):
    return simulate(ModelInput(layers, workers, servers or workers, bandwidth, policy, layout, **kw))


@pytest.mark.parametrize("layout", list(Layout))
@pytest.mark.parametrize("policy", list(Policy))
def test_infinite_bandwidth_leaves_only_compute(policy, layout):
    p = run(vgg_like(), policy, bandwidth=math.inf, layout=layout)
    assert p.iteration_s == pytest.approx(p.compute_s, rel=1e-12)
    assert p.compute_s == pytest.approx(10 * 0.03 + 0.0015)
    assert p.exposed_comm_s == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("layout", list(Layout))
def test_zero_compute_takes_the_bytes_over_the_bottleneck_link(layout):
    layers = tuple(Layer(f"l{i}", 0.0, 0.0, (2_000_000,)) for i in range(20))
    p = run(layers, Policy.P3, layout=layout, servers=4 if layout is Layout.COLOCATED else 2)
    total = 20 * 2_000_000 * 4
    if layout is Layout.COLOCATED:  # every byte leaves the host twice (push, answer), (N-1)/N of it remote
        bottleneck = 2 * 3 / 4 * total
    else:  # 2 servers take the pushes of 4 workers: half the bytes each, 4 times
        bottleneck = 4 * total / 2
    assert p.comm_s == pytest.approx(bottleneck * 8 / (GBIT * TCP_OVER_ETHERNET))  # the payload's share of the rate
    # slices pipeline: one slice's time of tail; event times are rounded to 1 ns, which 800 messages add up
    assert p.comm_s * (1 - 1e-6) <= p.iteration_s <= p.comm_s * 1.01


@pytest.mark.parametrize("layout", list(Layout))
@pytest.mark.parametrize("bandwidth", [0.5 * GBIT, 2 * GBIT, 5 * GBIT, 10 * GBIT])
def test_p3_beats_baseline_and_not_the_perfect_overlap_bound(bandwidth, layout):
    base = run(vgg_like(), Policy.BASELINE, bandwidth, layout=layout)
    p3 = run(vgg_like(), Policy.P3, bandwidth, layout=layout)
    assert p3.bound_s * (1 - 1e-9) <= p3.iteration_s <= base.iteration_s
    assert base.iteration_s >= base.bound_s * (1 - 1e-9)


@pytest.mark.parametrize("layout", list(Layout))
def test_p3_hides_communication_where_the_baseline_cannot(layout):
    """Communication about equal to compute: the baseline's forward waits for the input layers, sent last;
    P3 sends them first and comes close to the perfect-overlap bound."""
    base = run(vgg_like(), Policy.BASELINE, 10 * GBIT, layout=layout)
    p3 = run(vgg_like(), Policy.P3, 10 * GBIT, layout=layout)
    assert base.iteration_s > 1.25 * p3.iteration_s
    assert p3.iteration_s < 1.05 * p3.bound_s


def test_priority_alone_cannot_help_one_big_input_layer():
    """The input layer's gradient is ready last, so priority has nothing to reorder; slicing pipelines its push
    and its answer (on servers of their own: colocated, both leave through the same NIC, and all four are equal).
    Priority alone (P3 without slicing) even leaves the big array whole on one server, where the baseline splits it."""
    layers = (Layer("big-input", 0.05, 0.1, (40_000_000,)),) + tuple(
        Layer(f"l{i}", 0.05, 0.1, (100_000,)) for i in range(5))
    dedicated = {p: run(layers, p, 2 * GBIT, layout=Layout.DEDICATED).iteration_s for p in Policy}
    assert dedicated[Policy.PRIORITY_ONLY] > 1.5 * dedicated[Policy.BASELINE]
    assert dedicated[Policy.P3] < 0.8 * dedicated[Policy.BASELINE]
    assert dedicated[Policy.SLICING_ONLY] < 0.8 * dedicated[Policy.BASELINE]
    # (ByteScheduler, colocated, is simulated host by host, each key on its own server: not averaged)
    colocated = [run(layers, p, 2 * GBIT).iteration_s for p in Policy if not p.scheduled]
    assert max(colocated) == pytest.approx(min(colocated), rel=1e-6)  # as equal as float sums of slices allow


@pytest.mark.parametrize("layout", list(Layout))
def test_priority_alone_helps_when_small_input_layers_queue_behind_big_late_ones(layout):
    layers = tuple(Layer(f"l{i}", 0.01, 0.02, (200_000,)) for i in range(6)) + tuple(
        Layer(f"big{i}", 0.001, 0.002, (800_000,)) for i in range(6))
    base, prio = (run(layers, p, GBIT, layout=layout) for p in (Policy.BASELINE, Policy.PRIORITY_ONLY))
    assert prio.iteration_s < 0.95 * base.iteration_s


@pytest.mark.parametrize("policy", list(Policy))
@pytest.mark.parametrize("layout", list(Layout))
def test_more_bandwidth_is_never_slower(policy, layout):
    times = [run(vgg_like(), policy, b * GBIT, layout=layout).iteration_s for b in (0.5, 1, 2, 4, 8, 16, 64)]
    assert all(a >= b - 1e-12 for a, b in zip(times, times[1:])), times


@pytest.mark.parametrize("layout", list(Layout))
@pytest.mark.parametrize("policy", list(Policy))
def test_every_iteration_after_the_first_is_the_same(policy, layout):
    p = run(vgg_like(), policy, 10 * GBIT, layout=layout, iterations=6)
    if policy.scheduled and layout is Layout.COLOCATED:
        # host by host, what one iteration leaves shapes the next: at least HOST_ITERATIONS are run, and the
        # iteration time is the mean interval after the first
        assert len(p.iteration_times) >= HOST_ITERATIONS - 1
        assert p.iteration_s == pytest.approx(statistics.mean(p.iteration_times[1:]), rel=1e-12)
        return
    assert max(p.iteration_times[1:]) == pytest.approx(min(p.iteration_times[1:]), rel=1e-9)


def test_messages_follow_mxnet_placement():
    layers = (Layer("a", 0, 0, (10, 3_000_001)),)
    whole = messages(layers, Policy.BASELINE, 4, 50_000)
    assert whole[0].parts == ((0, 10),)  # key 0: (0 * 9973) % 4
    assert [n for _, n in whole[1].parts] == [750_001, 750_000, 750_000, 750_000]  # over 1,000,000: split
    sliced = messages(layers, Policy.P3, 4, 50_000)
    assert len(sliced) == 1 + 61 and sum(m.elements for m in sliced) == 3_000_011
    assert [m.parts[0][0] for m in sliced[:6]] == [0, 1, 2, 3, 0, 1]  # round robin over the servers


def test_one_host_sends_nothing_over_its_nic():
    p = run(vgg_like(), Policy.BASELINE, GBIT, workers=1)
    assert p.iteration_s == pytest.approx(p.compute_s) and p.comm_s == 0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="servers"):
        run(vgg_like(), Policy.P3, workers=4, servers=2, layout=Layout.COLOCATED)
    with pytest.raises(ValueError):
        run(vgg_like(), Policy.P3, bandwidth=0)
    for wrong in (0.0, 1.5):
        with pytest.raises(ValueError, match="wire_efficiency"):
            run(vgg_like(), Policy.P3, wire_efficiency=wrong)


def test_the_links_carry_payload_at_the_wire_efficiency_of_their_rate():
    layers = tuple(Layer(f"l{i}", 0.0, 0.0, (2_000_000,)) for i in range(4))
    full, half = (run(layers, Policy.BASELINE, wire_efficiency=e) for e in (1.0, 0.5))
    assert half.iteration_s == pytest.approx(2 * full.iteration_s, rel=1e-6)
    assert run(layers, Policy.BASELINE).iteration_s == pytest.approx(full.iteration_s / TCP_OVER_ETHERNET, rel=1e-6)


@pytest.mark.parametrize("layout", list(Layout))
def test_the_hosts_stack_streams_with_the_wire_and_costs_per_message_on_top(layout):
    layers = tuple(Layer(f"l{i}", 0.0, 0.0, (2_000_000,)) for i in range(4))
    wire = run(layers, Policy.BASELINE, layout=layout)
    wire_per_byte = 8 / (GBIT * TCP_OVER_ETHERNET)
    # The CPU and the NIC work on a stream side by side: the slower sets its pace, they do not add.
    slower = run(layers, Policy.BASELINE, layout=layout, stack_s_per_byte=wire_per_byte / 2)
    assert slower.iteration_s == pytest.approx(wire.iteration_s, rel=1e-9)
    stack_bound = run(layers, Policy.BASELINE, layout=layout, stack_s_per_byte=2 * wire_per_byte)
    assert stack_bound.iteration_s == pytest.approx(2 * wire.iteration_s, rel=1e-3)
    assert stack_bound.comm_s == pytest.approx(wire.comm_s)  # comm_s (the perfect-overlap bound) stays the wire's
    # A cost per message weighs on P3's slices (160 here) and hardly on the baseline's 4 arrays.
    base, p3 = (run(layers, policy, layout=layout, stack_s_per_message=1e-3)
                for policy in (Policy.BASELINE, Policy.P3))
    base0, p30 = (run(layers, policy, layout=layout) for policy in (Policy.BASELINE, Policy.P3))
    assert p3.iteration_s - p30.iteration_s > 20 * (base.iteration_s - base0.iteration_s) > 0


def test_negative_stack_costs_are_refused():
    for costs in ({"stack_s_per_byte": -1e-9}, {"stack_s_per_message": -1e-6}):
        with pytest.raises(ValueError, match="stack"):
            run(vgg_like(), Policy.P3, **costs)


# The layer profiles: per-layer sums against the study entry's totals, compute split by FLOPs.

def study():
    meta = json.loads((Path(__file__).resolve().parents[2] / "study/sysml19-p3/.cm/meta.json").read_text())
    return from_meta("sysml19-p3", meta)


def test_per_layer_parameters_add_up_to_the_study_entry_totals():
    entries = (study(), repository_study("sosp19-bytescheduler"))  # P3's models; ByteScheduler's VGG-16 too
    checked = 0
    # Sockeye's arrays depend on the corpus's vocabularies (the study entry counts none); its profile is at IWSLT15's
    # published ones and must add up to itself.
    sockeye = layer_profiles.profile("sockeye")
    assert all("sockeye" not in e.parameters for e in entries)
    assert sum(sum(x.arrays) for x in sockeye.layers) == sockeye.parameters
    for entry in entries:
        for model, totals in entry.parameters.items():
            for shape, expected in totals.items():
                profile = layer_profiles.profile(model, shape)
                assert sum(sum(layer.arrays) for layer in profile.layers) == profile.parameters == expected
                checked += 1
    # P3's: resnet and vgg at 224 and 32, inception-v3 at 299; ByteScheduler's: resnet, vgg and vgg16 at 224 and 32
    assert checked == 5 + 6
    assert set(layer_profiles.models()) - {"sockeye"} == {m for e in entries for m in e.parameters}


def test_vgg16_has_vgg16s_parameters_and_layers():
    """VGG-16 (Simonyan and Zisserman's configuration D, Gluon's vgg16): 13 convolutions and 3 dense layers,
    138,357,544 trainable parameters at 224x224 with 1000 classes; VGG-19 (vgg) has 3 more convolutions."""
    vgg16, vgg19 = layer_profiles.profile("vgg16"), layer_profiles.profile("vgg")
    assert (vgg16.zoo_name, vgg16.image_shape, vgg16.parameters) == ("vgg16", "3,224,224", 138_357_544)
    assert (vgg19.zoo_name, vgg19.parameters) == ("vgg19", 143_667_240)
    assert [x.kind for x in vgg16.layers] == ["Conv2D"] * 13 + ["Dense"] * 3
    assert [x.kind for x in vgg19.layers] == ["Conv2D"] * 16 + ["Dense"] * 3
    # the same dense layers; the first one's input is 512 x 7 x 7 at 224x224, 512 x 1 x 1 at 32x32
    assert [x.arrays for x in vgg16.layers[-3:]] == [x.arrays for x in vgg19.layers[-3:]] == [
        (4096 * 25088, 4096), (4096 * 4096, 4096), (1000 * 4096, 1000)]
    assert layer_profiles.profile("vgg16", "3,32,32").parameters == 138_357_544 - 4096 * (25088 - 512)
    assert vgg16.forward_flops / vgg19.forward_flops == pytest.approx(0.788, abs=0.001)
    assert layer_profiles.default_compute_s("vgg16") == pytest.approx(30 / 59.80)  # knjcode's VGG16 at batch 30


def test_profiles_split_compute_by_flops_and_keep_the_key_order():
    profile = layer_profiles.profile("vgg")
    layers = profiled_layers(profile, 3.0)
    assert sum(x.forward_s + x.backward_s for x in layers) == pytest.approx(3.0)
    assert all(x.backward_s == pytest.approx(2 * x.forward_s) for x in layers)
    assert [x.name for x in layers][:2] == ["vgg0_conv0", "vgg0_conv1"] and layers[-1].name == "vgg0_dense2"
    dense = [x for x in layers if "dense" in x.name]
    assert sum(x.bytes for x in dense) / sum(x.bytes for x in layers) > 0.85
    assert sum(x.forward_s for x in dense) / sum(x.forward_s for x in layers) < 0.01


def test_priority_alone_places_whole_arrays_round_robin_as_p3storedist_does():
    """MXNet's P3 without slicing (the study's p3-priority-only): every array one part, the next server each time,
    big ones too; the baseline's KVStoreDist splits an array of more than 1,000,000 elements over every server."""
    layers = (Layer("a", 0, 0, (3_000_000, 10)), Layer("b", 0, 0, (20, 30, 40)))
    prio = messages(layers, Policy.PRIORITY_ONLY, servers=4, slice_elements=50_000)
    assert [m.parts for m in prio] == [((0, 3_000_000),), ((1, 10),), ((2, 20),), ((3, 30),), ((0, 40),)]
    base = messages(layers, Policy.BASELINE, servers=4, slice_elements=50_000)
    assert base[0].parts == tuple((s, 750_000) for s in range(4))


def test_bytes_held_below_the_vans_order_delay_what_p3_sends_first_and_leave_the_baseline_as_it_was():
    """Compute long enough for P3 to hide the dense layer's bytes behind the next forward: with nothing below the
    van the input layers' slices overtake them; a first-in-first-out queue below the sender as deep as those bytes
    puts the slices the next forward waits for behind them. The baseline sends in that order anyway."""
    layers = tuple(Layer(f"conv{i}", 0.05, 0.10, (200_000,)) for i in range(6)) + (
        Layer("fc", 0.001, 0.002, (60_000_000,)),)  # its bytes take longer than the backward, less than both passes
    fc_bytes = 60_000_000 * 4
    bare, deep = (run(layers, Policy.P3, bandwidth=4 * GBIT, fifo_bytes=f) for f in (0.0, fc_bytes))
    assert bare.iteration_s == pytest.approx(bare.compute_s, rel=0.02)  # P3 hides it all
    assert deep.iteration_s > bare.iteration_s * 1.1
    a_little = run(layers, Policy.P3, bandwidth=4 * GBIT, fifo_bytes=4e6).iteration_s
    assert bare.iteration_s < a_little < deep.iteration_s
    # Deeper than everything an iteration sends, the order no longer matters: P3 is sliced first in, first out.
    everything = run(layers, Policy.P3, bandwidth=4 * GBIT, fifo_bytes=10 * fc_bytes)
    assert everything.iteration_s == pytest.approx(run(layers, Policy.SLICING_ONLY, bandwidth=4 * GBIT).iteration_s,
                                                   rel=1e-9)
    base = [run(layers, Policy.BASELINE, bandwidth=4 * GBIT, fifo_bytes=f).iteration_s for f in (0.0, fc_bytes)]
    assert base[0] == pytest.approx(base[1], rel=1e-12)
    with pytest.raises(ValueError, match="fifo_bytes"):
        ModelInput(layers, 4, 4, GBIT, Policy.P3, fifo_bytes=-1)


def test_the_baselines_big_array_bound_places_arrays_whole_or_split():
    layers = (Layer("fc", 0.001, 0.002, (4_000_000,)),)
    split = messages(layers, Policy.BASELINE, 4, 50_000)
    whole = messages(layers, Policy.BASELINE, 4, 50_000, bigarray_bound=10_000_000)
    assert [len(m.parts) for m in split] == [4] and [len(m.parts) for m in whole] == [1]
    slow = run(layers, Policy.BASELINE, layout=Layout.DEDICATED, bigarray_bound=10_000_000).iteration_s
    assert slow > 2 * run(layers, Policy.BASELINE, layout=Layout.DEDICATED).iteration_s  # one server's link


@pytest.mark.parametrize("policy", list(Policy))
@pytest.mark.parametrize("fifo_bytes", [0.0, 12e6])
def test_three_iterations_give_the_steady_state_that_more_would(policy, fifo_bytes):
    """Each iteration's communication ends before the next backward starts, so from the second on every iteration
    is the same: the default of 3 predicts what 6 do."""
    for bandwidth in (0.5 * GBIT, 4 * GBIT, 40 * GBIT):
        spec = ModelInput(vgg_like(), 4, 4, bandwidth, policy, fifo_bytes=fifo_bytes)
        assert spec.iterations == 3
        assert simulate(spec).iteration_s == pytest.approx(simulate(replace(spec, iterations=6)).iteration_s,
                                                           rel=1e-9)
