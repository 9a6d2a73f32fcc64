"""The unified result of a run: one typed document, whatever engine or launcher produced the logs."""
from __future__ import annotations

import json
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprokit.core.errors import say_failure
from reprokit.core.jsonfile import write_json
from reprokit.core.schema import fields_of
from reprokit.emulation.profile import (
    EMULATED,
    EMULATION_CPU_LIMIT,
    MEASURED_FILE,
    PROFILE_FILE,
    SLEEP,
    cpu_bound_warning,
    dedilated,
    measured_in_run,
)
from reprokit.engines.bytescheduler import ByteSchedulerVariant
from reprokit.run import speedometer
from reprokit.run.launch import Outcome
from reprokit.run.plan import RolePlan
from reprokit.vocabulary import PS_VAN_VARIABLE, PsVan, RunStatus, Variant
from reprokit.wire.p3_timeline import parse_comm_line

if TYPE_CHECKING:
    from reprokit.run.settings import RunSettings
    from reprokit.run.spec import RunSpec

RESULT_FILE = "p3-result.json"
RESULT_FORMAT = "reprokit-run-result/1"  # the unified result's format, in the file as "format"
VAN_LINE = re.compile(r"ps-van: role=\S+ van=(\S+)")  # role_van.py's line


@dataclass
class Result:
    status: RunStatus
    failure_reason: str | None = None
    model: str | None = None
    network: str | None = None
    profile: str | None = None
    batch_size: int | None = None
    image_shape: str | None = None
    num_epochs: int | None = None
    num_workers: int | None = None
    num_servers: int | None = None
    variant: str | None = None
    engine: str | None = None
    data: str | None = None  # synthetic, imagenet, imagenet-min, iwslt15, ...
    hosts: list[str] = field(default_factory=list)
    run_id: str | None = None
    wall_time_s: float | None = None
    launch_time_s: float | None = None  # from the launcher's start (SSH included) until every role ran
    warnings: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    # Present only where they apply (dropped from the JSON when None):
    p3_slice_size: int | None = None  # MXNet's P3 only (MXNET_KVSTORE_SLICE_THRESHOLD); the artifact's is compiled in
    p3_priority: bool | None = None
    p3_water_mark: int | None = None  # DMLC_PS_WATER_MARK
    # The mechanism that ran, as the roles saw it (our scripts only): the ps-lite van every role logged, and from the
    # workers' p3-comm lines where the optimizer ran, P3's slice bound and water mark, and whether priorities were on.
    ps_van: str | None = None
    mechanism: dict[str, Any] | None = None
    # VARIANT=bytescheduler: ByteScheduler's knobs as its core ran them, the byteps commit, and per worker the
    # trainer's pushpulls, the tasks the scheduler received and whether it posted them at once (every rank but 0).
    bytescheduler: dict[str, Any] | None = None
    # From each worker's p3-comm line (means over workers): how long forward waited for weights per
    # iteration, the share of communication hidden behind computation, and the two times themselves.
    comm_wait_s_per_iter: float | None = None
    overlap: float | None = None
    comm_s_per_iter: float | None = None
    compute_s_per_iter: float | None = None
    comm_per_worker: list[dict[str, Any]] | None = None
    timelines: list[str] | None = None  # each worker's Chrome trace (TIMELINE=1), relative to the run folder
    measured_compute_profile: str | None = None  # the workers' per-layer compute from their timelines, a profile file
    # The busiest worker host's CPU over the training loop: the share of all its cores busy, whoever used them
    # (train.py's host-cpu line, from /proc/stat). An emulated run whose host ran out of CPU measured the CPU.
    host_cpu_busy: float | None = None
    # An emulated run that waited asleep (a GPU host) and whose busiest host was above EMULATION_CPU_LIMIT: its pace
    # may have been the CPU's rather than the links'. Decided here once; the study reads it. None: not asleep.
    cpu_bound: bool | None = None
    throughput_samples_per_sec: float | None = None  # the sum over workers
    throughput_per_worker: list[float] | None = None
    throughput_std_per_worker: list[float] | None = None
    throughput_min: float | None = None
    throughput_max: float | None = None
    throughput_worker_spread: float | None = None
    throughput_tokens_per_sec: float | None = None
    batches_measured: int | None = None
    speedometer_reports_measured: int | None = None
    # Emulated compute (COMPUTE=emulated): the profile waited (its name and source), the dilation k, each worker's
    # total wait per iteration (dilated) and the throughput times k: as the emulated device would have it.
    compute: str | None = None  # "real" or "emulated" (our scripts only)
    compute_profile: str | None = None
    compute_profile_source: str | None = None
    dilation: float | None = None
    compute_wait: str | None = None  # sleep or busy (emulation/profile.py says why each)
    emulated_wait_s_per_iter: float | None = None
    throughput_dedilated_samples_per_sec: float | None = None  # throughput_samples_per_sec (measured) times k
    param_checksums: list[str | None] | None = None
    params_in_sync: bool | None = None
    run_folder: str | None = None
    batch_job: dict[str, Any] | None = None  # --submit: the scheduler's job (id, state, reason, pending and running s)

    ALWAYS = ("status", "run_success", "failure_reason", "model", "network", "profile", "batch_size", "image_shape",
              "num_epochs", "num_workers", "num_servers", "variant", "engine", "data", "hosts", "run_id",
              "wall_time_s", "launch_time_s", "warnings", "logs")

    @property
    def run_success(self) -> bool:
        return self.status.ok

    @property
    def interrupted(self) -> bool:
        """Stopped from outside (a signal, a lost parent): not a result of the run."""
        return self.status.interrupted

    def to_dict(self) -> dict[str, Any]:
        # run_success (CK's characteristics, scripts) and interrupted (only when true) are the status, spelled as
        # the result has always had them.
        data = {**asdict(self), "status": self.status.value, "run_success": self.run_success,
                **({"interrupted": True} if self.interrupted else {})}
        return {"format": RESULT_FORMAT, **{k: v for k, v in data.items() if k in self.ALWAYS or v is not None}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """Also a result written before ``status`` existed (run_success and interrupted only), or before results
        carried their format; one of another format is refused (ValueError)."""
        if data.get("format", RESULT_FORMAT) != RESULT_FORMAT:
            raise ValueError(f"a result of format {str(data['format'])[:40]!r}, not {RESULT_FORMAT}: written by "
                             f"another version of this framework")
        values = fields_of(cls, data)
        if "status" in data:
            values["status"] = RunStatus(data["status"])
        else:
            values["status"] = (RunStatus.OK if data["run_success"] else
                                RunStatus.INTERRUPTED if data.get("interrupted") else RunStatus.FAILED)
        return cls(**values)

    @classmethod
    def failed(cls, reason: str, status: RunStatus = RunStatus.FAILED) -> Result:
        return cls(status=status, failure_reason=reason)

    def save(self, run_dir: Path) -> Path:
        path = Path(run_dir) / RESULT_FILE
        write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, run_dir: Path) -> Result:
        return cls.from_dict(json.loads((Path(run_dir) / RESULT_FILE).read_text()))

    def summary_line(self) -> str:
        if not self.run_success:
            return f"p3: FAILED: {self.failure_reason}"
        per_worker = ", ".join(f"{s:.2f}" for s in self.throughput_per_worker or [])
        sync = {True: "in sync", False: "NOT in sync", None: "not checked"}[self.params_in_sync]
        tokens = f" ({self.throughput_tokens_per_sec:.0f} tokens/s)" if self.throughput_tokens_per_sec is not None else ""
        if self.compute == "emulated":
            tokens += (f" measured, emulated compute ({self.compute_profile}, k={self.dilation:g}): "
                       f"{self.throughput_dedilated_samples_per_sec} samples/s de-dilated (x k)")
        return (f"p3: OK: {self.model} {self.variant} on {self.engine}: {self.throughput_samples_per_sec:.2f} samples/s"
                f"{tokens} over {self.num_workers} workers ({per_worker}); {self.batches_measured} batches measured; "
                f"parameters {sync}")

    def say_summary(self) -> None:
        """Print the summary line: ``p3: OK`` here, ``p3: FAILED`` as every failure line of ours (say_failure)."""
        if self.run_success:
            print(self.summary_line(), flush=True)
        else:
            say_failure(self.summary_line(), stdout=True)


def build(spec: RunSpec, outcome: Outcome, run_dir: Path) -> Result:
    """Merge the launch outcome with every worker's parsed log (``spec``: the run's RunSpec). The result's warnings
    are the launch's, in order, then those found here (the launcher printed its own as they happened)."""
    settings, engine, plan = spec.accepted()
    reports = engine.engine.reports
    ours = settings.variant is Variant.P3 and reports.p3_knobs
    result = Result(
        status=outcome.status,
        failure_reason=outcome.reason or None,
        model=settings.model, network=settings.network, profile=settings.profile, batch_size=settings.batch_size,
        image_shape=settings.image_shape or None, num_epochs=settings.num_epochs,
        num_workers=len(plan.workers), num_servers=len(plan.servers), variant=settings.variant.value,
        p3_slice_size=settings.p3_slice_size if ours else None, p3_priority=settings.p3_priority if ours else None,
        p3_water_mark=settings.p3_water_mark if ours else None,
        engine=engine.name, data=spec.data.name, hosts=plan.hosts, run_id=plan.run_id,
        wall_time_s=round(outcome.wall_s, 3),
        launch_time_s=round(outcome.all_running_at - outcome.began_at, 3) if outcome.all_running_at else None,
        warnings=list(outcome.warnings),
    )
    logs = read_logs(plan, run_dir)
    parse_worker_logs(result, plan, run_dir, logs, comm_probes=reports.comm_probes)
    if reports.comm_probes or settings.compute == EMULATED:  # our train.py ran (an emulated run does on every engine)
        emulation_fields(result, settings, plan, run_dir, logs)
    if reports.ps_van:
        check_vans(result, plan, logs, engine.engine.script_knobs(settings.variant, settings.p3_knobs).ps_van)
    if settings.variant is Variant.BYTESCHEDULER:
        bytescheduler_fields(result, plan, logs)
    return result


def bytescheduler_fields(result: Result, plan: RolePlan, logs: dict[str, str]) -> None:
    """The bytescheduler field from every worker's line; a run some worker's gradients bypassed the scheduler on (or
    that logged no line) is a failed run, and says so."""
    field, failure = ByteSchedulerVariant.result_field([logs.get(w.name, "") for w in plan.workers])
    result.bytescheduler = field
    if failure and result.run_success:
        result.status = RunStatus.FAILED
        result.failure_reason = failure


HOST_CPU_LINE = re.compile(r"host-cpu: rank=\d+ busy=([0-9.]+)")  # train.py's line
EMULATED_LINE = re.compile(r"emulated-compute: rank=\d+ profile=\S+ dilation=\S+ wait_s_per_iter=([0-9.]+)")


def emulation_fields(result: Result, settings: RunSettings, plan: RolePlan, run_dir: Path,
                     logs: dict[str, str]) -> None:
    """The compute mode; for an emulated run its profile (from the role folder's copy), k, the waits the workers
    logged and the de-dilated throughput."""
    result.compute = settings.compute
    if result.timelines:  # a profile an emulated run can wait (COMPUTE_PROFILE=this file)
        measured = measured_in_run([run_dir / t for t in result.timelines], settings.model, settings.image_shape,
                                   settings.batch_size, f"run {plan.run_id} ({settings.compute} compute, variant "
                                   f"{settings.variant}, {len(plan.workers)} workers)")
        if measured is not None:
            write_json(run_dir / MEASURED_FILE, measured.to_dict())
            result.measured_compute_profile = MEASURED_FILE
    if settings.compute != EMULATED:
        return
    result.dilation = settings.dilation
    result.compute_wait = settings.compute_wait
    result.compute_profile = settings.compute_profile
    try:
        result.compute_profile_source = str(json.loads((run_dir / PROFILE_FILE).read_text()).get("source", ""))
    except (OSError, ValueError, AttributeError):
        result.compute_profile_source = None
    waits = [float(m.group(1)) for w in plan.workers for m in EMULATED_LINE.finditer(logs.get(w.name, ""))]
    if waits:
        result.emulated_wait_s_per_iter = round(statistics.fmean(waits), 6)
    # Busy waits (a CPU device) use the CPU on purpose; asleep, the CPU is the communication's.
    if settings.compute_wait == SLEEP and result.host_cpu_busy is not None:
        result.cpu_bound = result.host_cpu_busy > EMULATION_CPU_LIMIT
        if result.cpu_bound:
            result.warnings.append(cpu_bound_warning(result.host_cpu_busy))
    if result.throughput_samples_per_sec is not None:
        result.throughput_dedilated_samples_per_sec = round(dedilated(result.throughput_samples_per_sec,
                                                                      settings.dilation), 3)


def read_logs(plan: RolePlan, run_dir: Path) -> dict[str, str]:
    """Every role's log, read once ("" for a role that left none)."""
    logs = {}
    for role in plan.roles:
        path = run_dir / "logs" / role.log_name
        logs[role.name] = path.read_text(errors="replace") if path.exists() else ""
    return logs


def check_vans(result: Result, plan: RolePlan, logs: dict[str, str], expected: PsVan) -> None:
    """Every role must have logged the run's van (role_van.py): a job that mixed vans, or a role that never said,
    is a failed run, and the line of the role that refused is the reason."""
    logged: dict[str, str | None] = {}
    refusal = None
    for role in plan.roles:
        van = None
        for line in logs.get(role.name, "").splitlines():
            match = VAN_LINE.search(line)
            if match:
                van = match.group(1)
            elif line.startswith("ps-van:") and refusal is None:
                refusal = f"{role.name} on {role.host}: {line[len('ps-van:'):].strip()}"
        logged[role.name] = van
    if refusal and not result.run_success:
        result.failure_reason = refusal
        return
    wrong = {name: van for name, van in logged.items() if van != expected.value}
    if not wrong:
        result.ps_van = expected.value
    elif result.run_success:
        said = ", ".join(f"{name}: {van or 'none logged'}" for name, van in wrong.items())
        result.status = RunStatus.FAILED
        result.failure_reason = (f"the run needs the {expected.value!r} ps-lite van in every role, but not every role "
                                 f"ran it ({said}); the roles' environment lost {PS_VAN_VARIABLE} on the way")


def _mechanism(comm: dict[str, Any]) -> dict[str, Any]:
    """comm_probes.mechanism() as the p3-comm line carried it: numbers as numbers, "-" (not P3) as None."""
    def number(key: str) -> int | None:
        value = str(comm.get(key, "-"))
        return int(value) if value.isdigit() else None

    return {"van": comm.get("van"), "update_on": comm.get("update_on"), "slice_threshold": number("slice_threshold"),
            "water_mark": number("water_mark"), "priority": comm.get("priority") in ("1", 1),
            **({"scheduler": comm["scheduler"]} if comm.get("scheduler") else {})}


def _last_comm_line(text: str) -> dict[str, Any] | None:
    """The worker's p3-comm line (its communication summary), or None (an older engine, or a failed run)."""
    found = [parsed for line in text.splitlines() if "p3-comm:" in line
             for parsed in [parse_comm_line(line)] if parsed is not None]
    return found[-1] if found else None


def parse_worker_logs(result: Result, plan: RolePlan, run_dir: Path, logs: dict[str, str],
                      comm_probes: bool = True) -> None:
    """Throughput and parameter checksums from every worker's log (``logs``: read_logs); with ``comm_probes`` (an
    engine running our scripts), each worker's p3-comm line and trace too."""
    log_dir = run_dir / "logs"
    worker_logs = [log_dir / w.log_name for w in plan.workers]
    worker_texts = [logs.get(w.name, "") for w in plan.workers]
    per_worker: list[speedometer.WorkerThroughput | None] = []
    checksums: dict[int, str] = {}
    for text in worker_texts:
        reports = [r for group in speedometer.parse_reports(text).values() for r in group]
        per_worker.append(speedometer.summarize(speedometer.steady_state(reports)))
        checksums.update(speedometer.parse_checksums(text))
    result.logs = [str(p.relative_to(run_dir)) for p in sorted(log_dir.glob("*.log"))]

    measured = [w for w in per_worker if w is not None]
    if len(measured) == len(per_worker) and measured:
        speeds = [w.samples_per_sec for w in measured]
        result.throughput_samples_per_sec = round(sum(speeds), 3)
        result.throughput_per_worker = [round(s, 3) for s in speeds]
        result.throughput_std_per_worker = [round(w.std, 3) for w in measured]
        result.throughput_min = round(min(w.minimum for w in measured), 3)
        result.throughput_max = round(max(w.maximum for w in measured), 3)
        result.throughput_worker_spread = round(statistics.pstdev(speeds), 3) if len(speeds) > 1 else 0.0
        if all(w.tokens_per_sec is not None for w in measured):
            result.throughput_tokens_per_sec = round(sum(w.tokens_per_sec or 0.0 for w in measured), 3)  # all set
        result.batches_measured = sum(w.batches for w in measured)
        result.speedometer_reports_measured = sum(w.reports for w in measured)
    elif result.run_success:
        missing = [str(log.relative_to(run_dir)) for log, w in zip(worker_logs, per_worker) if w is None]
        result.status = RunStatus.FAILED
        result.failure_reason = (
            "no steady-state throughput found (Speedometer 'Speed: ... samples/sec' lines after the "
            f"first report of each epoch) in {', '.join(missing)}; run more batches with --env.NUM_BATCHES=N"
        )
    busy = [float(m.group(1)) for text in worker_texts for m in HOST_CPU_LINE.finditer(text)]
    if busy:
        result.host_cpu_busy = round(max(busy), 3)
    comm = [c for c in (_last_comm_line(text) for text in worker_texts) if c is not None] if comm_probes else []
    if comm:
        result.comm_per_worker = comm
        for key in ("comm_wait_s_per_iter", "overlap", "comm_s_per_iter", "compute_s_per_iter"):
            values = [c[key] for c in comm if c.get(key) is not None]
            setattr(result, key, round(statistics.fmean(values), 6) if values else None)
        ran = [_mechanism(c) for c in comm]
        if len(comm) == len(worker_logs) and all(r["van"] is not None for r in ran):
            if any(r != ran[0] for r in ran):
                result.warnings.append(f"the workers report different mechanisms: {ran}")
            result.mechanism = ran[0]
    traces = sorted(p for p in run_dir.glob("timeline-worker-*.json")) if comm_probes else []
    if traces:
        result.timelines = [str(p.relative_to(run_dir)) for p in traces]
    if checksums:
        result.param_checksums = [checksums.get(rank) for rank in range(len(plan.workers))]
        result.params_in_sync = len(set(checksums.values())) == 1 and len(checksums) == len(plan.workers)
