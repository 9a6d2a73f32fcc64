from dataclasses import replace

import pytest

from reprokit.run import result as unified
from reprokit.run.launch import Outcome
from support.runs import fake_plan, fake_spec


def spec(plan=None):
    base = fake_spec(plan or fake_plan(), batch_size="16")
    return replace(base, engine=replace(base.engine, name="mxnet-1.9.1-cpu"))


def write_worker_log(run_dir, index, speeds, checksum=None, rank=None):
    lines = [f"Epoch[0] Batch [{10 * i}-{10 * i + 10}]\tSpeed: {s} samples/sec\taccuracy=0.1"
             for i, s in enumerate(speeds)]
    if checksum:
        lines.append(f"Parameter checksum: rank={index if rank is None else rank} sha256={checksum} params=2")
    (run_dir / "logs").mkdir(exist_ok=True)
    (run_dir / "logs" / f"worker-{index}.log").write_text("\n".join(lines) + "\n")


def test_aggregate_is_the_sum_of_each_workers_steady_state(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0, 30.0], "a" * 64)
    write_worker_log(tmp_path, 1, [1.0, 20.0, 20.0], "a" * 64)
    res = unified.build(spec(), Outcome(True, ""), tmp_path).to_dict()
    assert res["run_success"] is True and res["failure_reason"] is None
    assert res["throughput_per_worker"] == [30.0, 20.0]
    assert res["throughput_samples_per_sec"] == 50.0
    assert (res["throughput_min"], res["throughput_max"], res["batches_measured"]) == (20.0, 30.0, 40)
    assert (res["batch_size"], res["image_shape"], res["num_workers"], res["num_servers"]) == (16, "3,32,32", 2, 1)
    assert (res["variant"], res["engine"], res["params_in_sync"]) == ("baseline", "mxnet-1.9.1-cpu", True)


def test_no_throughput_is_a_failure_naming_the_logs_searched(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0])
    write_worker_log(tmp_path, 1, [1.0])  # warm-up report only
    res = unified.build(spec(), Outcome(True, ""), tmp_path).to_dict()
    assert res["run_success"] is False
    assert "no steady-state throughput found" in res["failure_reason"]
    assert "logs/worker-1.log" in res["failure_reason"] and "worker-0" not in res["failure_reason"]
    assert "throughput_samples_per_sec" not in res


def test_diverged_parameters_are_reported(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0], "a" * 64)
    write_worker_log(tmp_path, 1, [1.0, 30.0], "b" * 64)
    result = unified.build(spec(), Outcome(True, ""), tmp_path)
    res = result.to_dict()
    assert res["params_in_sync"] is False
    assert res["param_checksums"] == ["a" * 64, "b" * 64]
    assert "parameters NOT in sync" in result.summary_line()


def test_launch_failure_is_kept_even_when_logs_have_numbers(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0])
    write_worker_log(tmp_path, 1, [1.0, 30.0])
    outcome = Outcome(False, "worker#1 on 127.0.0.1 was killed by SIGKILL", "worker#1", "127.0.0.1")
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
    res = unified.build(spec(), Outcome(True, ""), tmp_path).to_dict()
    assert res["comm_wait_s_per_iter"] == pytest.approx(0.3) and res["overlap"] == pytest.approx(0.6)
    assert (res["comm_s_per_iter"], res["compute_s_per_iter"]) == (0.8, 0.5)
    assert [c["rank"] for c in res["comm_per_worker"]] == ["0", "1"]
    assert res["timelines"] == ["timeline-worker-0.json"]


def test_without_a_communication_summary_the_fields_are_absent(tmp_path):
    write_worker_log(tmp_path, 0, [1.0, 30.0])
    write_worker_log(tmp_path, 1, [1.0, 20.0])
    res = unified.build(spec(), Outcome(True, ""), tmp_path).to_dict()
    assert "comm_wait_s_per_iter" not in res and "overlap" not in res and "timelines" not in res
