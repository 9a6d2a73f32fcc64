"""Constructed study entries and result records for the study tests (no ck, no MXNet)."""
import json

from reprokit.study.paper import claims as studies
from reprokit.study.paper.target import Target
from reprokit.study.store.records import Origin, Provenance, Record, RecordConfig
from reprokit.wire.p3_timeline import CommMeter

STUDY_META = studies.repository_meta("sysml19-p3")
ALL_MODELS = {"resnet", "vgg", "vgg16", "inception-v3", "sockeye"}

TESTBED4 = Target(name="tb", kind="testbed", hosts=tuple(f"10.77.0.{i}" for i in range(1, 5)), shaping=True,
                          link_capacity=None, testbed="tb")
EMBEDDED = Target(name="", kind="embedded", hosts=("127.0.0.1",), shaping=False, link_capacity=None)
# A cluster of 4 whose links were shaped, as the paper's were (another evaluator's, imported): claims at a bandwidth
# are judged at that bandwidth there, unlike on a CPU testbed.
CLUSTER4 = Target(name="c4", kind="cluster", hosts=tuple(f"gpu{i}" for i in range(1, 5)), shaping=True,
                          link_capacity=None)


def study(**tolerance):
    meta = json.loads(json.dumps(STUDY_META))
    meta["tolerance"].update(tolerance)
    return studies.from_meta("sysml19-p3", meta)


def records(model, bandwidth, baseline, p3, target=TESTBED4, profile="paper", variant="p3", origin="o-local",
            ratio=None, engine="embedded", emulated=False, host_cpu_busy=None, cpu_bound=None, dilation=20,
            in_sync=None, gpu="p4000"):
    """One record per throughput value; a value of None is a failed run. ``ratio``: every successful run measured
    that communication-to-computation ratio (comm_s_per_iter = ratio, compute_s_per_iter = 1). ``engine``:
    embedded (stock MXNet, our scripts) or artifact (the authors' builds, which check no parameter sync).
    ``emulated``: runs of an --emulate sweep (COMPUTE=emulated) at k = ``dilation``, waiting ``gpu``'s compute
    (COMPUTE_PROFILE); ``host_cpu_busy``: what every run's busiest host's
    CPU was; ``cpu_bound``: what every run's result decided of it (asleep waits only, else None); ``in_sync``:
    variant -> what its runs' params_in_sync says (else True on the embedded engine, None on the authors')."""
    comm = {} if ratio is None else {"comm_s_per_iter": ratio, "compute_s_per_iter": 1.0,
                                     "comm_wait_s_per_iter": 0.1, "overlap": 0.5}
    if host_cpu_busy is not None:
        comm["host_cpu_busy"] = host_cpu_busy
    if cpu_bound is not None:
        comm["cpu_bound"] = cpu_bound
    out = []
    for name, values in (("baseline", baseline), (variant, p3)):
        engine_name = "mxnet-1.9.1-cpu" if engine == "embedded" else \
            ("sysml19-p3@c647954" if name == "p3" else "sysml19-p3-baseline@1e2f3a4")
        for rep, value in enumerate(values, 1):
            result = {"throughput_samples_per_sec": value, "engine": engine_name,
                      "params_in_sync": (in_sync or {}).get(name, True if engine == "embedded" else None), **comm}
            out.append(Record(
                record_id=f"s{f'e{dilation}' if emulated else ''}--{model}{'' if engine == 'embedded' else '--' + engine}--{name}--"
                          f"{bandwidth}--r{rep}--{origin}",
                study="sysml19-p3", sweep_id="s", origin=Origin(id=origin, host="h", study="sysml19-p3"),
                config=RecordConfig(model=model, variant=name, bandwidth=bandwidth, repetition=rep, profile=profile,
                                    target=target, engine=engine),
                status="ok" if value is not None else "failed",
                failure_reason=None if value is not None else "worker#1 on 10.77.0.2 was killed by SIGKILL",
                result=result if value is not None else None,
                provenance=Provenance(engine=engine_name, env_overrides={"COMPUTE": "emulated", "DILATION": str(dilation),
                                                                         "COMPUTE_PROFILE": gpu} if emulated else None),
            ))
    return out


def verdict_of(analysis, claim_id):
    [v] = [v for v in analysis.verdicts if v.claim == claim_id]
    return v


def write_trace(path, variant, iterations=4, start=1000.0, slow=1.0):
    """A worker's Chrome trace as reprokit.wire.p3_timeline writes it (its own CommMeter), for a small net
    of 3 layers: the baseline sends the output layer's gradients first (FIFO), p3 the input layer's first.
    ``slow`` stretches the communication. Returns the meter (its per-iteration figures)."""
    names = ["net_conv0_weight", "net_conv0_bias", "net_conv1_weight", "net_conv1_bias", "net_dense0_weight",
             "net_dense0_bias"]
    n = len(names)
    meter = CommMeter(
        n, names, ready_params={0, n - 1}, keep_trace=True, pid=0,
        label=f"worker 0 ({variant})")
    for k in range(iterations):
        t = start + 0.8 * k  # forward k + 1 is pushed as backward k ends: it may wait for weights
        meter.forward_pushed(k, t)
        for g in range(3):
            meter.forward_end(k, g, t + 0.1 * (g + 1))
        ready = {i: t + 0.4 + 0.05 * (n - 1 - i) for i in range(n)}  # backward: the output layer first
        for i in meter.ready_params:
            meter.grad_ready(k, i, ready[i])
        order = range(n) if variant == "p3" else range(n - 1, -1, -1)
        done = t + 0.7
        for rank, i in enumerate(order):
            released = max(ready[i], t + 0.65 + 0.01 * rank)
            done = max(done, released) + 0.1 * slow
            meter.weight_ready(k, i, done)
    path.parent.mkdir(parents=True, exist_ok=True)
    meter.write_trace(str(path))
    return meter
