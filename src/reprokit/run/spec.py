"""The run specification: the one contract between CK's preprocess, the run command and the postprocess.

The preprocess asks CK for what it needs (engine, data, machine) and hands plain
values to ``build_spec``; the spec is written to ``p3-run.json`` in the run folder
and read back by ``python -m reprokit.run.command`` and the postprocess.
"""
from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from reprokit.cluster.hosts import ClusterConfig, parse as parse_cluster
from reprokit.cluster.ports import LOCALHOST, check_port_free
from reprokit.cluster.ssh import resolve as ssh_resolve
from reprokit.core.errors import UserError
from reprokit.core.jsonfile import write_json
from reprokit.emulation.profile import BUSY, EMULATED, PROFILE_FILE
from reprokit.engines.base import InstalledEngine, JobData, RunJob
from reprokit.run.plan import RolePlan, layout_cluster, layout_roles, worker_threads_per_host
from reprokit.run.settings import (
    RunSettings,
    absolute_outputs,
    compute_profile_of,
    local_layout,
    output_need_bytes,
    output_paths,
    with_local_outputs,
)
from reprokit.vocabulary import RoleKind

SPEC_FILE = "p3-run.json"
SPEC_FORMAT = "reprokit-run-spec/1"  # the run specification's format, in the file as "format"
FOLLOWING_FILE = "following"  # --submit: written when the run command starts following the job


class Accepted(NamedTuple):
    """What a spec the preprocess accepted holds to run."""
    settings: RunSettings
    engine: InstalledEngine
    plan: RolePlan


@dataclass(frozen=True)
class RunData:
    """What a run reads: a registered data set (its training-script arguments) or generated data."""
    name: str = "synthetic"  # the result's data field: imagenet, imagenet-min, iwslt15, ..., synthetic
    train_args: list[str] = field(default_factory=list)
    rec: str = ""  # the RecordIO train file, for the artifact's own scripts
    env_uid: str = ""
    samples: int = 0  # training images or sentence pairs of registered data; 0: generated data
    unit: str = "samples"  # what ``samples`` counts, for messages
    split: bool = False  # each worker reads its own part (ImageRecordIter), not the whole set (Sockeye)

    def describe(self) -> str:
        if not self.samples:
            return f"data {self.name} (generated; --env.DATA names registered data)"
        return f"data {self.name} ({self.samples} {self.unit}, env {self.env_uid})"

    def check_feeds_every_worker(self, batch_size: int, workers: int) -> None:
        """MXNet's readers abort at launch when a worker's share is smaller than one batch
        (ImageRecordIter: "number of input images must be bigger than the batch size"): refuse such a set now."""
        if not self.samples:
            return
        share = self.samples // max(1, workers) if self.split else self.samples
        if share >= batch_size:
            return
        each = f", {share} per worker," if self.split else ""
        fix = f"--env.BATCH_SIZE={share} or less" if share else f"at most {self.samples} workers"
        raise UserError(f"the data set {self.name} (env {self.env_uid}) holds {self.samples} {self.unit}{each} "
                        f"fewer than one batch of {batch_size} per worker; use {fix}, a larger set, or "
                        f"--env.DATA=synthetic")


@dataclass
class Submission:
    """A run submitted as a batch job (``--submit``): the preprocess submitted it, the run command follows it."""
    scheduler: str  # "slurm"
    job_id: str
    job: dict[str, Any]  # hosts.json's section (cluster.slurm.SlurmJob)
    script: str  # the batch script: the same ck command inside the job
    output: str  # the job's output file
    job_folder: str  # the run folder of the run inside the job (its p3-result.json)
    submitted_at: float  # time.time() at sbatch


@dataclass
class RunSpec:
    settings: RunSettings | None = None
    engine: InstalledEngine | None = None
    data: RunData = field(default_factory=RunData)
    plan: RolePlan | None = None
    cluster: ClusterConfig | None = None  # the machine's hosts, an allocation expanded; None on this machine
    error: str = ""  # the preprocess refused the input: the run command prints it once and fails
    launcher: str = ""  # how the roles start (run/launchers.py); "" (older specs): ssh with a cluster, else local
    submission: Submission | None = None  # --submit: the run is a batch job, followed by the run command

    @property
    def launcher_name(self) -> str:
        return self.launcher or ("local" if self.cluster is None else "ssh")

    @classmethod
    def refused(cls, reason: str) -> RunSpec:
        return cls(error=reason)

    def accepted(self) -> Accepted:
        """The settings, engine and plan of a spec the preprocess accepted; a refused one has none."""
        if self.settings is None or self.engine is None or self.plan is None:
            raise UserError(f"the run specification holds no run: {self.error or 'it is incomplete'}")
        return Accepted(self.settings, self.engine, self.plan)

    def to_dict(self) -> dict[str, Any]:
        if self.error:
            return {"format": SPEC_FORMAT, "error": self.error}
        if self.submission is not None:
            return {"format": SPEC_FORMAT, "submission": asdict(self.submission)}
        settings, engine, plan = self.accepted()
        return {"format": SPEC_FORMAT, "settings": settings.to_dict(), "engine": engine.to_dict(),
                "data": asdict(self.data),
                "plan": plan.to_dict(), "cluster": self.cluster.to_data() if self.cluster is not None else None,
                "launcher": self.launcher_name}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        if data.get("format", SPEC_FORMAT) != SPEC_FORMAT:  # one written before specs had a format is this one
            raise ValueError(f"format {str(data['format'])[:40]!r}, not {SPEC_FORMAT}: written by another version "
                             f"of this framework")
        if data.get("error"):
            return cls.refused(str(data["error"]))
        if data.get("submission"):
            return cls(submission=Submission(**data["submission"]))
        return cls(settings=RunSettings(**data["settings"]), engine=InstalledEngine.from_dict(data["engine"]),
                   data=RunData(**data.get("data", {})), plan=RolePlan.from_dict(data["plan"]),
                   cluster=parse_cluster(data["cluster"], SPEC_FILE) if data.get("cluster") is not None else None,
                   launcher=str(data.get("launcher", "")))

    def save(self, run_dir: Path) -> Path:
        path = Path(run_dir) / SPEC_FILE
        write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, path: Path) -> RunSpec:
        try:
            data = json.loads(Path(path).read_text())
            return cls.from_dict(data)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise UserError(f"cannot read the run specification {path}: {exc}") from None

    def describe(self) -> str:
        """One line: the layout and what runs."""
        s, engine, plan = self.accepted()
        counts = {k: sum(r.kind is k for r in plan.roles) for k in RoleKind}
        return (f"{counts[RoleKind.SCHEDULER]} scheduler, {counts[RoleKind.SERVER]} server(s), "
                f"{counts[RoleKind.WORKER]} worker(s) on "
                f"{', '.join(plan.hosts)}; {s.model} batch {s.batch_size} shape {s.image_shape or 'n/a'}; "
                f"profile {s.profile}; engine {engine.name}; {self.data.describe()}; "
                f"launcher {self.launcher_name}")


def build_spec(settings: RunSettings, engine: InstalledEngine, data: RunData, cluster: ClusterConfig | None = None,
               run_dir: str | None = None, launcher: str = "", inside_job: bool = False) -> RunSpec:
    """The run's role plan and command from plain values: settings, engine, data and the cluster (None: here).

    ``run_dir``: the run folder, where relative output paths of a run on this machine go (default: here).
    ``launcher``: how the roles start (run/launchers.py); "" for ssh with a cluster, local without.
    ``inside_job``: that launcher's ``inside_job`` (the hosts are a job's nodes, addressed by their node names);
    given by the caller, which holds the launcher, since the launchers import run specs."""
    if cluster is None:
        settings = with_local_outputs(settings, run_dir or os.getcwd())
        num_workers, num_servers = local_layout(settings)
        port = 0  # the launcher holds a free one from before the scheduler starts until the run ends
        if settings.ps_root_port is not None:
            check_port_free(LOCALHOST, settings.ps_root_port)
            port = settings.ps_root_port
        plan = RolePlan(run_id=uuid.uuid4().hex, hosts=[LOCALHOST],
                        roles=layout_roles([LOCALHOST], num_workers, num_servers),
                        scheduler_host=LOCALHOST, scheduler_port=port, command=[],
                        worker_threads=settings.worker_threads or worker_threads_per_host(num_workers),
                        timeout_s=settings.timeout_s)
    else:
        absolute_outputs(settings)
        plan = RolePlan(
            run_id=uuid.uuid4().hex,
            hosts=cluster.names,
            roles=layout_cluster(cluster.hosts, settings.num_workers, settings.num_servers),
            scheduler_host=cluster.names[0],
            scheduler_port=settings.ps_root_port or 0,  # 0: the launcher finds a free one on that host
            command=[],
            worker_threads=settings.worker_threads,  # 0: the launcher asks each host for its cores
            timeout_s=settings.timeout_s,
            addresses={h.host: _node_address(h.host) if inside_job else ssh_resolve(h, cluster).hostname
                       for h in cluster.hosts},
            interfaces={h.host: h.interface for h in cluster.hosts if h.interface},
        )
    plan.outputs = output_paths(settings)  # a cluster run checks them writable on each worker host first
    plan.output_need_bytes = output_need_bytes(settings)
    data.check_feeds_every_worker(settings.batch_size, len(plan.workers))
    if settings.compute == EMULATED:
        check_emulation_on(engine, settings)
    job = RunJob(variant=settings.variant, model=settings.model, batch_size=settings.batch_size,
                 image_shape=settings.image_shape, num_epochs=settings.num_epochs, num_batches=settings.num_batches,
                 disp_batches=settings.disp_batches, output_file=settings.output_file,
                 worker_hosts=[w.host for w in sorted(plan.workers, key=lambda w: w.index)],
                 data=JobData(data.name, list(data.train_args), data.rec), script=settings.script,
                 script_args=settings.train_args(engine.engine), p3=settings.p3_knobs,
                 scheduler=settings.scheduler_knobs,
                 emulated=settings.compute == EMULATED)
    run = engine.engine.role_command(engine, job)
    plan.command, plan.files, plan.extra_env, plan.role_args = run.command, run.files, run.extra_env, run.role_args
    if settings.compute == EMULATED:
        plan.files.append(str(write_compute_profile(settings, Path(run_dir or os.getcwd()))))
    plan.finish_pattern, plan.finish_note = run.finish_pattern, run.finish_note
    if run.finish_grace_s is not None:
        plan.finish_grace_s = run.finish_grace_s
    if run.data and run.data != data.name:  # the artifact's Sockeye reads its bundled IWSLT15: say so
        data = RunData(run.data)
    return RunSpec(settings=settings, engine=engine, data=data, plan=plan, cluster=cluster, launcher=launcher)


def check_emulation_on(engine: InstalledEngine, settings: RunSettings) -> None:
    """Every engine runs program/p3's train.py for emulated compute; busy waits need stock MXNet's engine call."""
    if not engine.engine.busy_waits and settings.compute_wait == BUSY:
        raise UserError(f"COMPUTE_WAIT=busy spins on MXNet's engine thread through MXEnginePushSync, which "
                        f"{engine.name} (MXNet 1.1) lacks; drop --env.COMPUTE_WAIT (waits asleep, as on a GPU host) "
                        f"or use --env.ENGINE=embedded")


def write_compute_profile(settings: RunSettings, folder: Path) -> Path:
    """An emulated run's profile at its batch size, written where every role's folder gets a copy from."""
    path = folder / PROFILE_FILE
    write_json(path, compute_profile_of(settings).to_dict())
    return path


def _node_address(node: str) -> str:
    """A Slurm node's (an OAR job's node's) address as this machine resolves its name (the roles connect to it); the name itself when it
    does not resolve here (the nodes may still resolve it)."""
    try:
        return socket.gethostbyname(node)
    except OSError:
        return node
