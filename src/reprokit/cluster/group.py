"""One action on many hosts at once, with explicit results: what succeeded on which host, what failed and why."""
from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from reprokit.cluster.hosts import ClusterConfig
from reprokit.cluster.ssh import Connection, resolve
from reprokit.core.errors import UserError

T = TypeVar("T")
MAX_PARALLEL = 32


@dataclass
class GroupResult(Generic[T]):
    hosts: list[str]  # in the order given: "first failure" means the first host in this order
    succeeded: dict[str, T] = field(default_factory=dict)
    failed: dict[str, Exception] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    def first_failure(self) -> tuple[str, Exception] | None:
        return next(((h, self.failed[h]) for h in self.hosts if h in self.failed), None)

    def raise_first(self) -> None:
        """A UserError with the first failure's message (ours already name the host and the cause)."""
        found = self.first_failure()
        if found is not None:
            raise found[1] if isinstance(found[1], UserError) else UserError(f"{found[0]}: {found[1]}")


@dataclass(frozen=True)
class _Failed:
    error: Exception


def on_each(hosts: list[str], action: Callable[[str], T]) -> GroupResult[T]:
    """Run ``action(host)`` for every host at once; every exception is kept as that host's failure."""
    def guarded(host: str) -> T | _Failed:
        try:
            return action(host)
        except Exception as exc:  # reported per host by the caller
            return _Failed(exc)

    result: GroupResult[T] = GroupResult(list(hosts))
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(hosts)))) as pool:
        for host, value in zip(hosts, pool.map(guarded, hosts)):
            if isinstance(value, _Failed):
                result.failed[host] = value.error
            else:
                result.succeeded[host] = value
    return result


def connect_all(cluster: ClusterConfig, hosts: list[str]) -> dict[str, Connection]:
    """One open connection per host, opened in parallel; on any failure all are closed and the first is raised."""
    opened = on_each(hosts, lambda h: Connection(resolve(cluster.host(h), cluster)).open())
    if not opened.ok:
        for conn in opened.succeeded.values():
            conn.close()
        opened.raise_first()
    return opened.succeeded
