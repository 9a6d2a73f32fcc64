"""The unified result of a run: one JSON document, whatever engine or launcher produced the logs."""
from __future__ import annotations

import statistics
from pathlib import Path

from reprokit.run import speedometer as speedometer
from reprokit.run.launch import Outcome
from reprokit.run.plan import RolePlan

RESULT_FILE = "p3-result.json"


def build(spec: dict, plan: RolePlan, outcome: Outcome, run_dir: Path) -> dict:
    """Merge the launch outcome with every worker's parsed log."""
    settings = spec["settings"]
    result: dict = {
        "run_success": outcome.success,
        "failure_reason": outcome.reason or None,
        "model": settings["model"],
        "network": settings["network"],
        "profile": settings["profile"],
        "batch_size": settings["batch_size"],
        "image_shape": settings["image_shape"] or None,
        "num_epochs": settings["num_epochs"],
        "num_workers": len(plan.workers),
        "num_servers": len(plan.servers),
        "variant": spec["variant"],
        **({"p3_slice_size": settings["p3_slice_size"], "p3_priority": settings["p3_priority"]}
           if spec["variant"] == "p3" and spec["engine"].get("build", "stock") == "stock" else {}),  # ours only
        "engine": spec["engine"]["name"],
        "data": spec.get("data", {}).get("name", "synthetic"),  # or imagenet, imagenet-min, ...
        "hosts": plan.hosts,
        "run_id": plan.run_id,
        "wall_time_s": round(outcome.wall_s, 3),
        # From the launcher's start (SSH connections included) until every role was running.
        "launch_time_s": round(outcome.all_running_at - outcome.began_at, 3) if outcome.all_running_at else None,
        "warnings": list(outcome.warnings),
    }
    log_dir = run_dir / "logs"
    worker_logs = [log_dir / w.log_name for w in plan.workers]
    per_worker: list[speedometer.WorkerThroughput | None] = []
    checksums: dict[int, str] = {}
    for log in worker_logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        reports = [r for group in speedometer.parse_reports(text).values() for r in group]
        per_worker.append(speedometer.summarize(speedometer.steady_state(reports)))
        checksums.update(speedometer.parse_checksums(text))
    result["logs"] = [str(p.relative_to(run_dir)) for p in sorted(log_dir.glob("*.log"))]

    measured = [w for w in per_worker if w is not None]
    if len(measured) == len(per_worker) and measured:
        speeds = [w.samples_per_sec for w in measured]
        result.update({
            "throughput_samples_per_sec": round(sum(speeds), 3),
            "throughput_per_worker": [round(s, 3) for s in speeds],
            "throughput_std_per_worker": [round(w.std, 3) for w in measured],
            "throughput_min": round(min(w.minimum for w in measured), 3),
            "throughput_max": round(max(w.maximum for w in measured), 3),
            "throughput_worker_spread": round(statistics.pstdev(speeds), 3) if len(speeds) > 1 else 0.0,
            **({"throughput_tokens_per_sec": round(sum(w.tokens_per_sec for w in measured), 3)}
               if all(w.tokens_per_sec is not None for w in measured) else {}),
            "batches_measured": sum(w.batches for w in measured),
            "speedometer_reports_measured": sum(w.reports for w in measured),
        })
    elif outcome.success:
        missing = [str(log.relative_to(run_dir)) for log, w in zip(worker_logs, per_worker) if w is None]
        result["run_success"] = False
        result["failure_reason"] = (
            "no steady-state throughput found (Speedometer 'Speed: ... samples/sec' lines after the "
            f"first report of each epoch) in {', '.join(missing)}; run more batches with --env.NUM_BATCHES=N"
        )
    if checksums:
        result["param_checksums"] = [checksums.get(rank) for rank in range(len(plan.workers))]
        result["params_in_sync"] = len(set(checksums.values())) == 1 and len(checksums) == len(plan.workers)
    return result


def summary_line(result: dict) -> str:
    if not result["run_success"]:
        return f"p3: FAILED: {result['failure_reason']}"
    per_worker = ", ".join(f"{s:.2f}" for s in result["throughput_per_worker"])
    sync = {True: "in sync", False: "NOT in sync", None: "not checked"}[result.get("params_in_sync")]
    return (f"p3: OK: {result['model']} {result['variant']} on {result['engine']}: "
            f"{result['throughput_samples_per_sec']:.2f} samples/s"
            + (f" ({result['throughput_tokens_per_sec']:.0f} tokens/s)" if "throughput_tokens_per_sec" in result else "")
            + f" over {result['num_workers']} workers "
            f"({per_worker}); {result['batches_measured']} batches measured; parameters {sync}")
