"""The iteration model's ByteScheduler policy (reprokit.study.whatif.iteration_model, Policy.BYTESCHEDULER): its
messages (partitions, barriers, placement), its credit and priority, a prediction showing the mechanism, and the
gate of its predicted verdicts."""
from dataclasses import replace

import pytest

from reprokit.core.errors import UserError
from reprokit.engines.bytescheduler import ByteSchedulerVariant
from reprokit.run.result import Result
from reprokit.study.analysis.labelled import predicted_judged
from reprokit.study.paper.claims import repository_study
from reprokit.study.whatif.iteration_model import (
    BYTESCHEDULER_CREDIT,
    BYTESCHEDULER_PARTITION,
    KEY_HASH,
    VARIANT_POLICY,
    Layer,
    Layout,
    ModelInput,
    Policy,
    _FairShare,
    _Link,
    _Sim,
    messages,
    simulate,
    simulate_hosts,
)
from reprokit.study.whatif.model_check import ModelValidation, late_compute
from reprokit.study.whatif.predict import MAX_HOSTS_SIMULATED, predict, request_from, table
from reprokit.study.whatif.sensitivity import MAP_HOSTS_SIMULATED, TODAY, HardwareGrid, hardware_map
from reprokit.vocabulary import RunStatus

GBIT = 1e9


def run(layers, policy, bandwidth=GBIT, workers=4, layout=Layout.COLOCATED, **kw):
    return simulate(ModelInput(tuple(layers), workers, workers, bandwidth, policy, layout, **kw))


def test_the_variant_is_the_policy_and_its_defaults_are_the_variants_knobs():
    assert VARIANT_POLICY["bytescheduler"] is Policy.BYTESCHEDULER
    assert Policy.BYTESCHEDULER.scheduled and not Policy.BYTESCHEDULER.prioritised  # the van below it: FIFO
    assert not Policy.BYTESCHEDULER.p3_store and not Policy.BYTESCHEDULER.sliced
    assert not any(p.scheduled for p in Policy if p is not Policy.BYTESCHEDULER)
    knobs = {k.name: k.default for k in ByteSchedulerVariant.KNOBS}
    assert (BYTESCHEDULER_PARTITION, BYTESCHEDULER_CREDIT) == (knobs["BYTESCHEDULER_PARTITION"],
                                                               knobs["BYTESCHEDULER_CREDIT"])


def test_an_array_above_the_partition_is_cut_into_ceil_n_over_partition_even_partitions_each_with_a_barrier():
    layers = [Layer("a", 0, 0, (2_048_000, 1_000_000)), Layer("b", 0, 0, (1_000_001, 64))]
    msgs = messages(layers, Policy.BYTESCHEDULER, 1, 50_000, partition_elements=1_000_000)
    sizes = [(m.layer, m.key, m.part, m.elements) for m in msgs]
    assert sizes == [(0, 0, 0, 682_666), (0, 0, 1, 682_667), (0, 0, 2, 682_667),  # the last (n mod count) one longer
                     (0, 1, 0, 1_000_000),  # not above the partition: whole (bytecore.py: tensor_size() > partition)
                     (1, 2, 0, 500_000), (1, 2, 1, 500_001), (1, 3, 0, 64)]
    assert all(m.barrier == 0 for m in msgs)  # every partition has its barrier (one server here)
    assert sum(m.elements for m in msgs) == 2_048_000 + 1_000_000 + 1_000_001 + 64
    # a smaller partition cuts more; the other policies send no barrier
    assert len(messages(layers, Policy.BYTESCHEDULER, 1, 50_000, partition_elements=100_000)) == 21 + 10 + 11 + 1
    assert all(m.barrier == -1 for p in Policy if p is not Policy.BYTESCHEDULER
               for m in messages(layers, p, 4, 50_000))


def test_each_partition_is_a_key_of_its_own_placed_as_kvstoredist_places_keys_in_their_init_order():
    layers = [Layer("a", 0, 0, (2_999_997,)), Layer("b", 0, 0, (10,)), Layer("c", 0, 0, (12,))]
    msgs = messages(layers, Policy.BYTESCHEDULER, 7, 50_000, partition_elements=1_000_000)
    # integer keys in init order: a's barrier 0, its partitions' barriers 1-3, their data 4-6; b's barrier 7, data 8
    assert [m.parts for m in msgs] == [(((4 * KEY_HASH) % 7, 999_999),), (((5 * KEY_HASH) % 7, 999_999),),
                                       (((6 * KEY_HASH) % 7, 999_999),), (((8 * KEY_HASH) % 7, 10),),
                                       (((10 * KEY_HASH) % 7, 12),)]
    assert [m.barrier for m in msgs] == [(k * KEY_HASH) % 7 for k in (1, 2, 3, 7, 9)]
    # an unpartitioned array's data key is every other integer key: on an even number of servers, one parity
    small = [Layer(f"l{i}", 0, 0, (1_000,)) for i in range(8)]
    assert {s for m in messages(small, Policy.BYTESCHEDULER, 4, 50_000) for s, _ in m.parts} == {1, 3}
    # a partition of the bound or more is split over every server, as KVStoreDist splits any such array
    [whole] = messages([Layer("d", 0, 0, (1_000_000,))], Policy.BYTESCHEDULER, 4, 50_000)
    assert whole.parts == ((0, 250_000), (1, 250_000), (2, 250_000), (3, 250_000))


def test_the_credit_bounds_the_elements_in_flight():
    """Zero compute, 20 partitions of 1M, servers on hosts of their own: one partition in flight at a time (a credit
    of one element) pays each partition's push and answer in turn, one server at a time; a credit of all of them
    keeps every link busy. (Colocated, a host's one egress carries pushes and answers alike, busy either way.)"""
    layers = [Layer(f"l{i}", 0.0, 0.0, (1_000_000,)) for i in range(20)]
    dedicated = {"layout": Layout.DEDICATED}
    one = run(layers, Policy.BYTESCHEDULER, credit_elements=1, **dedicated)
    four = run(layers, Policy.BYTESCHEDULER, credit_elements=4_000_000, **dedicated)
    every = run(layers, Policy.BYTESCHEDULER, credit_elements=1e12, **dedicated)
    base = run(layers, Policy.BASELINE)
    assert one.iteration_s > 1.5 * every.iteration_s  # push, then answer, never side by side
    assert every.iteration_s <= four.iteration_s < one.iteration_s
    # the same bytes and one barrier message per partition each way
    assert one.bytes_per_worker == base.bytes_per_worker and one.messages == 2 * base.messages


def test_the_credit_returns_only_when_a_pull_is_done_and_each_round_trip_is_kvstoredists():
    """Two hosts, no bandwidth limit, a latency per message: barrier keys are even integer keys (server 0, worker 0's
    own host), data keys odd (server 1). Worker 1's tasks are immediate: its barriers wait at server 0 from the
    start, so worker 0's barrier is acknowledged as soon as it is released (loopback). Then its data push (one
    latency), the push's acknowledgement once worker 1 pushed too (one), the pull's request (one) and its answer
    (one): with a credit of one partition, each of the 10 costs these 4 latencies one after the other (2 without the
    acknowledgement and request); with credit for all of them, they go side by side."""
    layers = [Layer(f"l{i}", 0.0, 0.0, (1_000,)) for i in range(10)]
    latency = 0.01
    one = run(layers, Policy.BYTESCHEDULER, bandwidth=float("inf"), workers=2, credit_elements=1, latency_s=latency)
    every = run(layers, Policy.BYTESCHEDULER, bandwidth=float("inf"), workers=2, credit_elements=1e12,
                latency_s=latency)
    assert one.iteration_s == pytest.approx(10 * 4 * latency)
    assert every.iteration_s == pytest.approx(4 * latency)


def test_host_by_host_a_baseline_key_is_one_pushpull_answered_without_acknowledgement_or_request():
    """MXNet 1.9.1's trainers send dense gradients with pushpull: KVStoreDist sends one ZPushPull per server's part,
    and the server answers each worker's push with the updated part once every worker pushed it. So a key on the
    other host costs two latencies (push, answer), where push then pull (ByteScheduler's tasks) costs four. A key on
    worker 0's own server waits for worker 1's push, so it costs two as well; an array split over both servers too
    (each part answered on its own, the local part over loopback)."""
    latency = 0.01
    for arrays in ((1_000,), (1_000, 1_000), (3_000_000,)):
        spec = ModelInput(tuple(Layer(f"l{i}", 0.0, 0.0, (n,)) for i, n in enumerate(arrays)), 2, 2,
                          float("inf"), Policy.BASELINE, latency_s=latency)
        assert simulate_hosts(spec).iteration_s == pytest.approx(2 * latency)


def test_colocated_bytescheduler_is_simulated_host_by_host_with_each_key_on_its_server():
    """Eight arrays of 100,000 elements (B bytes in all), each unpartitioned, so their data keys are odd integer keys,
    on servers 1 and 3 of 4. Host by host, host 1's ingress carries 3 workers' pushes of half the bytes and its own
    worker's pulls of the other half from host 3: 2 B per iteration (pushes from its own worker stay on the host;
    were they counted it would be 2.5 B). The averaged layout gives every link 1.5 B (3/4 of the bytes out and in)."""
    layers = [Layer(f"l{i}", 0.0, 0.0, (100_000,)) for i in range(8)]
    spec = ModelInput(tuple(layers), 4, 4, GBIT, Policy.BYTESCHEDULER, credit_elements=1e12, wire_efficiency=1.0)
    assert {s for m in messages(layers, Policy.BYTESCHEDULER, 4, 50_000) for s, _ in m.parts} == {1, 3}
    hosts = simulate(spec)
    assert hosts == simulate_hosts(spec)  # what simulate gives ByteScheduler in the colocated layout
    per_worker = 8 * 100_000 * 4
    barriers = 8 * 4 * 3 / 4  # one element per partition, from the 3 other workers, on half of the hosts' ingress
    assert hosts.comm_s == pytest.approx((2 * per_worker + barriers) * 8 / GBIT, rel=1e-3)
    averaged = simulate(replace(spec, policy=Policy.BASELINE))
    assert averaged.comm_s == pytest.approx(1.5 * per_worker * 8 / GBIT, rel=1e-6)
    # the baseline's keys (consecutive integer keys) spread evenly: host by host its busiest link carries what the
    # averaged layout gives every link
    assert simulate_hosts(replace(spec, policy=Policy.BASELINE)).comm_s == pytest.approx(averaged.comm_s)
    with pytest.raises(ValueError, match="KVStoreDist places"):
        simulate_hosts(replace(spec, policy=Policy.P3))


def test_an_unshaped_ingress_receives_from_several_peers_at_once_and_the_averaged_layout_does_not_notice():
    """Three hosts, one array of 3.6 MB (under the split bound) on server 0, no compute. In the first iteration
    workers 1 and 2 push it at once, each at its own egress's full rate (1 unit of time): an ingress shaped like a
    switch's port takes both in 2 units, the testbed's unshaped one in 1, and worker 0 (its server on its own host)
    has its answer then. (Later, server 0's answers leave one after the other, so the pushes no longer meet.) The
    averaged layout mirrors each host's egress on its ingress, so an unshaped ingress changes nothing there."""
    size = 900_000
    unit = size * 4 * 8 / GBIT
    spec = ModelInput((Layer("only", 0.0, 0.0, (size,)),), 3, 3, GBIT, Policy.BASELINE, wire_efficiency=1.0)
    assert simulate_hosts(spec).iteration_times[0] == pytest.approx(2 * unit)
    assert simulate_hosts(replace(spec, ingress_shaped=False)).iteration_times[0] == pytest.approx(unit)
    for policy in (Policy.BASELINE, Policy.P3):
        for big_last in (True, False):
            layered = replace(spec, layers=tuple(input_first_layer_with_long_forward(big_last)), policy=policy)
            assert simulate(replace(layered, ingress_shaped=False)).iteration_s == simulate(layered).iteration_s


def test_a_fairly_shared_link_serves_a_message_to_an_idle_peer_before_the_rest_of_a_busy_peers_queue():
    """Self-clocked fair queueing: two 1 MB messages queued to peer A, then a 0-byte acknowledgement to peer B, while
    A's first is on the wire: B's goes next, not after A's second (first in, first out would put it last)."""
    sim, fair = _Sim(), _FairShare()
    link = _Link(sim, 8e6)  # 1 MB/s
    ended: list[tuple[str, float]] = []
    for name, peer, size in (("a1", 0, 1e6), ("a2", 0, 1e6), ("b", 1, 0.0)):
        tag = fair.tag(link, peer, size)
        link.submit(0.0, tag, size, 0.0, started=fair.serving(link, tag, lambda *_: None),
                    done=lambda t, name=name: ended.append((name, t)))
    sim.run()
    assert ended == [("a1", 1.0), ("b", 1.0), ("a2", 2.0)]


def test_the_compute_is_given_as_late_as_the_run_measured_it_for_every_variant():
    """An emulated run's workers measured their forward and backward (compute_s_per_iter) against what the profile
    told them to wait (emulated_wait_s_per_iter): the model's layers are scaled by that ratio, whatever the variant;
    a run that measured either not keeps its layers."""
    late = Result(RunStatus.OK, compute_s_per_iter=3.3, emulated_wait_s_per_iter=3.0)
    assert late_compute(late) == pytest.approx(1.1)
    assert late_compute(Result(RunStatus.OK, compute_s_per_iter=3.3)) == 1.0
    assert late_compute(Result(RunStatus.OK)) == 1.0


def input_first_layer_with_long_forward(big_last: bool) -> list[Layer]:
    """Two layers: the input layer computes long; one of the two holds the bytes (the last, or the input one)."""
    small, big = (1_000_000,), (16_000_000,)
    return [Layer("input", 0.4, 0.4, small if big_last else big), Layer("last", 0.01, 0.02, big if big_last else small)]


def test_scheduling_helps_where_a_later_layers_traffic_would_delay_an_earlier_layers():
    """The last layer's gradient is ready first and large: first in, first out, the input layer's pull waits for all
    of it, and the next forward pass with it; ByteScheduler releases the input layer's partition ahead of the last
    layer's remaining partitions, so the next forward overlaps them. Where the input layer holds the bytes, no later
    traffic delays it, and scheduling gains nothing."""
    helped = input_first_layer_with_long_forward(big_last=True)
    base, bs = run(helped, Policy.BASELINE), run(helped, Policy.BYTESCHEDULER)
    assert bs.iteration_s < 0.9 * base.iteration_s
    assert bs.iteration_s >= bs.bound_s * (1 - 1e-9)
    # the more in flight, the longer the input layer waits behind the last layer's partitions
    everything = run(helped, Policy.BYTESCHEDULER, credit_elements=1e12).iteration_s
    assert everything > 1.15 * bs.iteration_s and everything == pytest.approx(base.iteration_s, rel=0.05)
    nothing = input_first_layer_with_long_forward(big_last=False)
    base, bs = run(nothing, Policy.BASELINE), run(nothing, Policy.BYTESCHEDULER)
    assert bs.iteration_s >= 0.99 * base.iteration_s


def test_priority_orders_the_ready_partitions_input_layer_first():
    """Three layers ready at once (no backward compute): with a credit of one partition, the input layer's array goes
    first, so its next forward (0.3 s) overlaps the other layers' traffic and adds nothing to the iteration; first in,
    first out (the baseline's order, since backward hands over the last layer first) it waits for everything, and the
    forward adds its whole length."""
    def layers(input_forward_s):
        return [Layer("input", input_forward_s, 0.0, (1_000_000,)), Layer("mid", 0.0, 0.0, (4_000_000,)),
                Layer("last", 0.0, 0.0, (4_000_000,))]
    bs, bs_no_forward = (run(layers(f), Policy.BYTESCHEDULER, credit_elements=1) for f in (0.3, 0.0))
    fifo, fifo_no_forward = (run(layers(f), Policy.BASELINE) for f in (0.3, 0.0))
    assert bs.iteration_s == pytest.approx(bs_no_forward.iteration_s, rel=1e-9)
    assert fifo.iteration_s == pytest.approx(fifo_no_forward.iteration_s + 0.3, rel=1e-9)


@pytest.mark.parametrize("layout", list(Layout))
def test_infinite_bandwidth_leaves_only_compute_and_p3_is_untouched(layout):
    layers = input_first_layer_with_long_forward(big_last=True)
    p = run(layers, Policy.BYTESCHEDULER, bandwidth=float("inf"), layout=layout)
    assert p.iteration_s == pytest.approx(p.compute_s, rel=1e-12)
    spec = ModelInput(tuple(layers), 4, 4, GBIT, Policy.P3, layout)
    # ByteScheduler's knobs change nothing of another policy
    assert simulate(spec) == simulate(replace(spec, partition_elements=1, credit_elements=1))


def test_knobs_out_of_range_are_refused():
    layers = (Layer("a", 0, 0, (10,)),)
    for bad in ({"partition_elements": 0}, {"credit_elements": 0}):
        with pytest.raises(ValueError, match="ByteScheduler"):
            ModelInput(layers, 2, 2, GBIT, Policy.BYTESCHEDULER, **bad)


# --- the gate of its predicted verdicts -------------------------------------------------------------------------

def claim_at_a_bandwidth():
    entry = repository_study("sosp19-bytescheduler")
    return entry, replace(entry.claims[0], id="resnet-at-10gbit", bandwidth="10gbit", cluster_size=4)


def check(errors, gpu="v100", model="resnet"):
    """A check inside the model's assumptions of baseline and bytescheduler with these iteration-time errors."""
    rows = [{"model": model, "bandwidth": "10gbit", "variant": v, "dilation": 40.0, "n": 3,
             "iteration_time_error": e} for v, e in zip(("baseline", "bytescheduler"), errors)]
    speedup = (1 + errors[0]) / (1 + errors[1]) - 1
    return {"against": f"a check at {gpu}", "hosts": 4, "links": "fair", "compute": "emulated", "gpu": gpu,
            "cores": "shared", "tcp": "cubic", "configurations": rows,
            "speedups": [{"model": model, "bandwidth": "10gbit", "variant": "bytescheduler", "dilation": 40.0,
                          "error": round(speedup, 4)}]}


def test_a_missed_check_withholds_bytescheduler_at_the_v100_naming_it_and_the_stored_record_lets_it_predict():
    entry, at = claim_at_a_bandwidth()
    stored = ModelValidation.stored()
    missing = replace(stored, checks=(check((-0.043, 0.104)),))  # as the V100 check on bbr before the round trip
    said, brief, *_ = predicted_judged(at, entry.tolerance, missing, entry.gpu)
    assert said.startswith("not given: the iteration model is not validated (a check at v100")
    assert "iteration time within 10% in 1 of 2, speedup within 15% in 1 of 1" in said
    assert brief == "not given: model not validated at the V100"
    # the stored record: every check of ByteScheduler at the V100 holds since the round trip and the ingress
    said, brief, *_ = predicted_judged(at, entry.tolerance, stored, entry.gpu)
    assert "(predicted)" in said and brief.endswith(("replicated", "inconclusive")), said


def test_a_check_that_holds_at_the_papers_gpu_lets_the_machinery_predict_bytescheduler():
    entry, at = claim_at_a_bandwidth()
    stored = ModelValidation.stored()
    holding = replace(stored, checks=(check((-0.04, 0.05)),))
    said, brief, *_ = predicted_judged(at, entry.tolerance, holding, entry.gpu)
    assert not said.startswith(("not given", "not possible")) and "(predicted)" in said
    assert brief.endswith(("replicated", "inconclusive"))
    missing = replace(stored, checks=(check((-0.04, -0.26)),))  # as the first stored check: bytescheduler 26% off
    assert predicted_judged(at, entry.tolerance, missing, entry.gpu).full.startswith("not given")
    elsewhere = replace(stored, checks=(check((-0.04, 0.05), gpu="p4000"),))  # a check at another GPU vouches not
    assert "no check inside the model's assumptions ran at the v100" in predicted_judged(
        at, entry.tolerance, elsewhere, entry.gpu).full
    other_network = replace(stored, checks=(check((-0.04, 0.05), model="vgg"),))
    assert predicted_judged(at, entry.tolerance, other_network, entry.gpu).full.startswith("not given")


def test_ck_predict_predicts_the_studys_own_variant_or_those_asked_and_says_where_it_is_not_validated(
        monkeypatch):
    options = {"model": "resnet", "bandwidths": "10gbit", "workers": "4"}
    entry = repository_study("sosp19-bytescheduler")
    request = request_from(options, entry)
    assert request.variants == ("bytescheduler",) and [c.label for c in request.computes] == ["V100"]
    [row] = predict(request)
    assert row.variant == "bytescheduler" and row.speedup == row.baseline.iteration_s / row.predicted.iteration_s
    text = table(request, [row])
    assert text.startswith("PREDICTED by the iteration model (not measured)")
    assert "predicted bytescheduler/baseline speedup" in text
    assert ("NOT VALIDATED for bytescheduler" in text) == bool(ModelValidation.stored().missed(
        variants=("bytescheduler", "baseline")))
    missing = replace(ModelValidation.stored(), checks=(check((-0.043, 0.104)),))
    monkeypatch.setattr(ModelValidation, "stored", classmethod(lambda cls: missing))
    assert "NOT VALIDATED for bytescheduler: a check at v100" in table(request, [row])
    both = request_from({**options, "variants": "p3,bytescheduler"}, entry)
    assert [r.variant for r in predict(both)] == ["p3", "bytescheduler"]
    p3_study = request_from(options, repository_study("sysml19-p3"))
    assert p3_study.variants == ("p3",) and "NOT VALIDATED" not in table(p3_study, predict(p3_study))
    with pytest.raises(UserError, match="no policy for 'baseline-worker-update'; it predicts p3, "):
        request_from({**options, "variants": "baseline-worker-update"}, entry)


def test_a_policy_simulated_host_by_host_is_predicted_up_to_its_host_limit_and_its_map_stops_earlier():
    """ByteScheduler's simulation grows with the hosts: ck predict refuses more than MAX_HOSTS_SIMULATED in one line
    naming the limit, the dedicated layout (averaged) and P3 are not limited, and the today's-hardware map of a
    ByteScheduler study keeps only the cluster sizes up to MAP_HOSTS_SIMULATED and says so."""
    entry = repository_study("sosp19-bytescheduler")
    too_many = {"model": "resnet", "bandwidths": "10gbit", "workers": f"4,{MAX_HOSTS_SIMULATED + 1}"}
    with pytest.raises(UserError, match=f"bytescheduler is simulated host by host, at most {MAX_HOSTS_SIMULATED} "
                                        f"hosts; give --workers up to {MAX_HOSTS_SIMULATED}"):
        request_from(too_many, entry)
    assert request_from({**too_many, "variants": "p3"}, entry).workers == (4, MAX_HOSTS_SIMULATED + 1)
    assert request_from({**too_many, "layout": "dedicated"}, entry).layout is Layout.DEDICATED
    small = HardwareGrid(("resnet",), ("v100",), ("10gbit",), (4, MAP_HOSTS_SIMULATED + 1))
    drawn = hardware_map(entry, small)
    assert drawn.grid.workers == (4,) and [c.workers for c in drawn.cells] == [4]
    assert f"the map stops at {MAP_HOSTS_SIMULATED} hosts" in drawn.captions[0][1]
    assert max(TODAY.workers) > MAP_HOSTS_SIMULATED  # the P3 study's map is not cut
    assert hardware_map(repository_study("sysml19-p3"), small).grid.workers == small.workers
