"""Role plans: which parameter-server role runs on which host, with which DMLC_* environment.

A plan is data (written as JSON into the run folder) so that the launcher, the
postprocess and a person reading the run folder all see the same layout.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reprokit.cluster.hosts import HostSpec
from reprokit.core.errors import UserError
from reprokit.core.jsonfile import write_json
from reprokit.vocabulary import RoleKind


@dataclass(frozen=True)
class Role:
    kind: RoleKind
    index: int  # rank among roles of the same kind
    host: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", RoleKind(self.kind))  # also given as its stored string

    @property
    def name(self) -> str:
        """scheduler, server#0, worker#1: the name used in prefixes and messages."""
        return self.kind.value if self.kind is RoleKind.SCHEDULER else f"{self.kind.value}#{self.index}"

    @property
    def log_name(self) -> str:
        return "scheduler.log" if self.kind is RoleKind.SCHEDULER else f"{self.kind.value}-{self.index}.log"


@dataclass
class RolePlan:
    run_id: str
    hosts: list[str]
    roles: list[Role]
    scheduler_host: str
    scheduler_port: int
    command: list[str]  # the same program for every role, as MXNet's launcher does
    worker_threads: int
    timeout_s: int
    extra_env: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # copied into each role's working folder first (core.shipping)
    addresses: dict[str, str] = field(default_factory=dict)  # host -> address the roles use; default: the name
    interfaces: dict[str, str] = field(default_factory=dict)  # host -> DMLC_INTERFACE
    host_threads: dict[str, int] = field(default_factory=dict)  # host -> OMP threads per worker there
    role_args: dict[str, list[str]] = field(default_factory=dict)  # role name -> arguments for that role only
    # A line every worker prints when its training is over, for engines whose roles may not exit by themselves (the
    # authors' builds, MXNet's P3 van); "" when roles exit by themselves.
    finish_pattern: str = ""
    finish_grace_s: float = 10.0  # after every worker printed finish_pattern: time left for a clean exit
    finish_note: str = ""  # why roles may linger after training, for the warning that says they were ended
    outputs: dict[str, str] = field(default_factory=dict)  # setting -> path workers write outside their folder
    output_need_bytes: int = 0  # free space each output path needs on its host

    def address(self, host: str) -> str:
        return self.addresses.get(host, host)

    @property
    def workers(self) -> list[Role]:
        return [r for r in self.roles if r.kind is RoleKind.WORKER]

    @property
    def servers(self) -> list[Role]:
        return [r for r in self.roles if r.kind is RoleKind.SERVER]

    def argv(self, role: Role) -> list[str]:
        """The command ``role`` runs: the run's command, plus that role's own arguments (the artifact's per-worker output
        folder and GPU)."""
        return [*self.command, *self.role_args.get(role.name, [])]

    def role_env(self, role: Role) -> dict[str, str]:
        """The DMLC_* environment that makes a process play ``role`` in this job."""
        env = {
            "DMLC_ROLE": role.kind.value,
            "DMLC_PS_ROOT_URI": self.address(self.scheduler_host),
            "DMLC_PS_ROOT_PORT": str(self.scheduler_port),
            "DMLC_NUM_SERVER": str(len(self.servers)),
            "DMLC_NUM_WORKER": str(len(self.workers)),
            "DMLC_NODE_HOST": self.address(role.host),
            # Lets anyone find every process of a run, on any host.
            "REPROKIT_RUN_ID": self.run_id,
            "OMP_NUM_THREADS": str(self.host_threads.get(role.host, self.worker_threads)
                                   if role.kind is RoleKind.WORKER else 1),
        }
        if role.kind is RoleKind.WORKER:
            env["DMLC_WORKER_ID"] = str(role.index)
        if role.host in self.interfaces:
            env["DMLC_INTERFACE"] = self.interfaces[role.host]
        env.update(self.extra_env)
        return env

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "roles": [{**asdict(r), "kind": r.kind.value} for r in self.roles]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolePlan:
        data = dict(data)
        data["roles"] = [Role(**r) for r in data["roles"]]
        return cls(**data)

    def save(self, path: Path) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: Path) -> RolePlan:
        return cls.from_dict(json.loads(Path(path).read_text()))


def layout_roles(hosts: list[str], num_workers: int, num_servers: int) -> list[Role]:
    """Scheduler on the first host; servers and workers round-robin over the hosts."""
    if not hosts:
        raise UserError("the machine has no hosts; add some to its hosts.json")
    roles = [Role(RoleKind.SCHEDULER, 0, hosts[0])]
    roles += [Role(RoleKind.SERVER, i, hosts[i % len(hosts)]) for i in range(num_servers)]
    roles += [Role(RoleKind.WORKER, i, hosts[i % len(hosts)]) for i in range(num_workers)]
    return roles


def layout_cluster(hosts: list[HostSpec], num_workers: int | None, num_servers: int | None) -> list[Role]:
    """The paper's setup unless told otherwise: one server and one worker per host.

    Per-host ``workers``/``servers`` in hosts.json place roles explicitly;
    NUM_WORKERS/NUM_SERVERS spread that many round-robin over the hosts.
    """
    names = [h.host for h in hosts]
    explicit = any(h.workers is not None or h.servers is not None for h in hosts)
    if explicit and (num_workers is not None or num_servers is not None):
        raise UserError("the machine's hosts.json places workers/servers per host; "
                        "leave NUM_WORKERS and NUM_SERVERS empty, or remove those keys from hosts.json")
    if not explicit:
        return layout_roles(names, num_workers if num_workers is not None else len(names),
                            num_servers if num_servers is not None else len(names))
    roles = [Role(RoleKind.SCHEDULER, 0, names[0])]
    counts = {RoleKind.SERVER: [(h.host, 1 if h.servers is None else h.servers) for h in hosts],
              RoleKind.WORKER: [(h.host, 1 if h.workers is None else h.workers) for h in hosts]}
    for kind in (RoleKind.SERVER, RoleKind.WORKER):
        index = 0
        for host, count in counts[kind]:
            for _ in range(count):
                roles.append(Role(kind, index, host))
                index += 1
        if index == 0:
            raise UserError(f"the machine's hosts.json places no {kind.value}; give at least one host "
                            f"{kind.value}s >= 1")
    return roles


def worker_threads_per_host(num_workers_on_host: int, cores: int | None = None) -> int:
    """Split a host's cores between its workers, so they do not oversubscribe it."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, num_workers_on_host))
