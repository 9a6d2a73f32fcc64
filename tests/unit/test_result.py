from dataclasses import replace

import pytest

from reprokit.run import result as unified
from reprokit.run.launch import Outcome
from reprokit.run.settings import resolve
from reprokit.vocabulary import RunStatus
from support.runs import fake_plan, fake_spec


def spec(plan=None, variant="baseline"):
    base = fake_spec(plan or fake_plan(), variant=variant, batch_size="16")
    return replace(base, engine=replace(base.engine, name="mxnet-1.9.1-cpu"))


def write_role_log(run_dir, name, van):
    """The line program/p3/role_van.py logs first in every role."""
    (run_dir / "logs").mkdir(exist_ok=True)
    (run_dir / "logs" / name).write_text(f"ps-van: role={name.split('-')[0].split('.')[0]} van={van}\n")


def write_worker_log(run_dir, index, speeds, checksum=None, rank=None, van="zmq"):
    if index == 0:
        for name in ("scheduler.log", "server-0.log"):
            write_role_log(run_dir, name, van)
    lines = [f"ps-van: role=worker van={van}"]
    lines += [f"Epoch[0] Batch [{10 * i}-{10 * i + 10}]\tSpeed: {s} samples/sec\taccuracy=0.1"
              for i, s in enumerate(speeds)]
    if checksum:
        lines.append(f"Parameter checksum: rank={index if rank is None else rank} sha256={checksum} params=2")
    (run_dir / "logs").mkdir(exist_ok=True)
    (run_dir / "logs" / f"worker-{index}.log").write_text("\n".join(lines) + "\n")


def test_aggregate_is_the_sum_of_each_workers_steady_state(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0, 30.0], "a" * 64)
    write_worker_log(tmp_path, 1, [1.0, 20.0, 20.0], "a" * 64)
    res = unified.build(spec(), Outcome(RunStatus.OK, ""), tmp_path).to_dict()
    assert res["run_success"] is True and res["failure_reason"] is None
    assert res["throughput_per_worker"] == [30.0, 20.0]
    assert res["throughput_samples_per_sec"] == 50.0
    assert (res["throughput_min"], res["throughput_max"], res["batches_measured"]) == (20.0, 30.0, 40)
    assert (res["batch_size"], res["image_shape"], res["num_workers"], res["num_servers"]) == (16, "3,32,32", 2, 1)
    assert (res["variant"], res["engine"], res["params_in_sync"]) == ("baseline", "mxnet-1.9.1-cpu", True)


def test_no_throughput_is_a_failure_naming_the_logs_searched(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0])
    write_worker_log(tmp_path, 1, [1.0])  # warm-up report only
    res = unified.build(spec(), Outcome(RunStatus.OK, ""), tmp_path).to_dict()
    assert res["run_success"] is False
    assert "no steady-state throughput found" in res["failure_reason"]
    assert "logs/worker-1.log" in res["failure_reason"] and "worker-0" not in res["failure_reason"]
    assert "throughput_samples_per_sec" not in res


def test_diverged_parameters_are_reported(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0], "a" * 64)
    write_worker_log(tmp_path, 1, [1.0, 30.0], "b" * 64)
    result = unified.build(spec(), Outcome(RunStatus.OK, ""), tmp_path)
    res = result.to_dict()
    assert res["params_in_sync"] is False
    assert res["param_checksums"] == ["a" * 64, "b" * 64]
    assert "parameters NOT in sync" in result.summary_line()


def test_launch_failure_is_kept_even_when_logs_have_numbers(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0])
    write_worker_log(tmp_path, 1, [1.0, 30.0])
    outcome = Outcome(RunStatus.FAILED, "worker#1 on 127.0.0.1 was killed by SIGKILL", "worker#1", "127.0.0.1")
    result = unified.build(spec(), outcome, tmp_path)
    assert result.run_success is False
    assert result.summary_line() == "p3: FAILED: worker#1 on 127.0.0.1 was killed by SIGKILL"


def test_each_workers_communication_summary_reaches_the_result(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0])
    write_worker_log(tmp_path, 1, [1.0, 20.0])
    for index, (wait, overlap) in enumerate([(0.2, 0.5), (0.4, 0.7)]):
        with open(tmp_path / "logs" / f"worker-{index}.log", "a") as log:
            log.write(f"p3-comm: comm_wait_s_per_iter={wait} overlap={overlap} comm_s_per_iter=0.8 "
                      f"compute_s_per_iter=0.5 iterations=10 rank={index} timeline=- variant=p3\n")
    (tmp_path / "timeline-worker-0.json").write_text("{}")
    res = unified.build(spec(), Outcome(RunStatus.OK, ""), tmp_path).to_dict()
    assert res["comm_wait_s_per_iter"] == pytest.approx(0.3) and res["overlap"] == pytest.approx(0.6)
    assert (res["comm_s_per_iter"], res["compute_s_per_iter"]) == (0.8, 0.5)
    assert [c["rank"] for c in res["comm_per_worker"]] == ["0", "1"]
    assert res["timelines"] == ["timeline-worker-0.json"]


def test_without_a_communication_summary_the_fields_are_absent(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0])
    write_worker_log(tmp_path, 1, [1.0, 20.0])
    res = unified.build(spec(), Outcome(RunStatus.OK, ""), tmp_path).to_dict()
    assert "comm_wait_s_per_iter" not in res and "overlap" not in res and "timelines" not in res


def comm_line(rank, van="p3", update_on="workers", slice_threshold="50000", water_mark="10"):
    return (f"p3-comm: comm_wait_s_per_iter=0.1 overlap=0.5 comm_s_per_iter=0.8 compute_s_per_iter=0.5 iterations=10 "
            f"priority=1 rank={rank} slice_threshold={slice_threshold} timeline=- update_on={update_on} van={van} "
            f"variant=p3 water_mark={water_mark}\n")


def test_the_result_records_the_mechanism_every_role_ran(tmp_path):
    for index in (0, 1):
        write_worker_log(tmp_path, index, [1.0, 30.0], van="p3")
        with open(tmp_path / "logs" / f"worker-{index}.log", "a") as log:
            log.write(comm_line(index))
    res = unified.build(spec(variant="p3"), Outcome(RunStatus.OK, ""), tmp_path).to_dict()
    assert res["run_success"] is True and res["ps_van"] == "p3"
    assert res["mechanism"] == {"van": "p3", "update_on": "workers", "slice_threshold": 50000, "water_mark": 10,
                                "priority": True}
    assert (res["p3_slice_size"], res["p3_priority"], res["p3_water_mark"]) == (50000, True, 10)


def test_a_role_without_the_runs_van_fails_the_run_loudly(tmp_path):
    for index in (0, 1):
        write_worker_log(tmp_path, index, [1.0, 30.0], van="p3")
    write_role_log(tmp_path, "server-0.log", "zmq")  # a mixed job: one role lost DMLC_PS_VAN_TYPE
    result = unified.build(spec(variant="p3"), Outcome(RunStatus.OK, ""), tmp_path)
    assert result.run_success is False and result.ps_van is None
    assert result.failure_reason.startswith("the run needs the 'p3' ps-lite van in every role, but not every role "
                                            "ran it (server#0: zmq)")
    (tmp_path / "logs" / "scheduler.log").write_text("no van line at all\n")
    result = unified.build(spec(variant="p3"), Outcome(RunStatus.OK, ""), tmp_path)
    assert "(scheduler: none logged, server#0: zmq)" in result.failure_reason


def test_a_role_that_refused_its_van_is_the_reason_of_the_failure(tmp_path):
    for index in (0, 1):
        write_worker_log(tmp_path, index, [1.0, 30.0], van="p3")
    refusal = ("ps-van: server runs the 'zmq' van (DMLC_PS_VAN_TYPE) but this run needs 'p3' in every role; a job "
               "must not mix vans: pass DMLC_PS_VAN_TYPE=p3 to every role")
    (tmp_path / "logs" / "server-0.log").write_text(refusal + "\n")
    result = unified.build(spec(variant="p3"), Outcome(RunStatus.FAILED, "server#0 on 127.0.0.1 exited with code 3"), tmp_path)
    assert result.failure_reason == "server#0 on 127.0.0.1: " + refusal[len("ps-van: "):]


def emulated_spec(wait):
    base = spec()
    settings = resolve("resnet", {"BATCH_SIZE": "16", "VARIANT": "baseline", "COMPUTE": "emulated",
                                  "COMPUTE_WAIT": wait, "DILATION": "20"}, default_profile="smoke")
    return replace(base, settings=settings)


@pytest.mark.parametrize("wait, busy, warned", [("sleep", 0.93, True), ("sleep", 0.6, False), ("busy", 0.93, False)])
def test_the_busiest_hosts_cpu_is_recorded_and_an_asleep_emulation_without_cpu_to_spare_is_warned(
        tmp_path, wait, busy, warned):
    for index, share in enumerate((busy - 0.1, busy)):
        write_worker_log(tmp_path, index, [1.0, 30.0], "a" * 64)
        with open(tmp_path / "logs" / f"worker-{index}.log", "a") as log:
            log.write(f"host-cpu: rank={index} busy={share:.3f} cores=2\n")
    res = unified.build(emulated_spec(wait), Outcome(RunStatus.OK, ""), tmp_path)
    assert res.host_cpu_busy == pytest.approx(busy)  # the busiest host
    assert res.cpu_bound == (warned if wait == "sleep" else None)  # decided once, here; the study reads it
    said = [w for w in res.warnings if "busy during training" in w]
    assert bool(said) == warned
    if warned:
        assert f"CPU was {busy:.0%} busy during training (limit 80%)" in said[0] and "raise the dilation" in said[0]


def test_without_a_host_cpu_line_the_field_is_absent(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0])
    write_worker_log(tmp_path, 1, [1.0, 20.0])
    assert "host_cpu_busy" not in unified.build(spec(), Outcome(RunStatus.OK, ""), tmp_path).to_dict()
