"""Where a sweep runs (the embedded default, a testbed or a cluster), and the bandwidths it can run at there."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from reprokit.cluster import hosts as cluster_hosts
from reprokit.cluster.testbed import DEFAULT_LINK_SHARING, testbed_of
from reprokit.core.errors import UserError
from reprokit.study.paper.rates import NATIVE, rate_bps, same_rate, shaped_bps

if TYPE_CHECKING:  # claims.py imports the store, which imports this module
    from reprokit.study.paper.claims import Matrix


@dataclass(frozen=True)
class Target:
    """Where the sweep runs, and what it can do with the links."""
    name: str  # the machine entry; "" for the embedded default
    kind: str  # "embedded", "testbed" or "cluster"
    hosts: tuple[str, ...]
    shaping: bool  # the links can be limited per configuration
    link_capacity: str | None  # the links' native rate when known (--link_capacity)
    testbed: str | None = None  # the testbed's name (its namespaces are rk-NAME-*)
    link_sharing: str = DEFAULT_LINK_SHARING  # a testbed's: how each host's shaped egress is shared (cluster/testbed.py)
    tcp: str = ""  # a testbed's TCP congestion control as ck testbed --tcp set it; "": the machine's default

    @property
    def label(self) -> str:
        """Names the links' sharing and the hosts' TCP when they are not the default, so runs on fair links or another
        congestion control are never pooled with others."""
        how = []
        if self.link_sharing == "fair":
            how.append("links shared fairly")
        if self.tcp:
            how.append(f"TCP {self.tcp}")
        return f"{self.name or 'embedded default'}" + (f" ({', '.join(how)})" if how else "")

    def to_dict(self) -> dict[str, Any]:
        data = {**asdict(self), "hosts": list(self.hosts), "label": self.label}
        # The defaults, which records written before the choices existed had.
        if self.link_sharing == DEFAULT_LINK_SHARING:
            data.pop("link_sharing")
        if not self.tcp:
            data.pop("tcp")
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Target:
        """The target as to_dict wrote it (its label is derived from the name again)."""
        return cls(name=str(data["name"]), kind=str(data["kind"]), hosts=tuple(data["hosts"]),
                   shaping=bool(data["shaping"]), link_capacity=data.get("link_capacity"),
                   testbed=data.get("testbed"), link_sharing=str(data.get("link_sharing", DEFAULT_LINK_SHARING)),
                   tcp=str(data.get("tcp", "")))

    def bandwidth_note(self) -> str:
        if self.kind == "embedded":
            return "every role on this host over loopback, at native bandwidth (it cannot be shaped)"
        if self.kind == "testbed":
            how = ("htb, an equal share per other host" if self.link_sharing == "fair"
                   else "tbf, one queue")
            tcp = f", TCP {self.tcp}" if self.tcp else ""
            return f"testbed {self.testbed}: each host's egress is limited with tc ({how}) per configuration{tcp}"
        return (f"cluster {self.name}: runs at native bandwidth ({self.link_capacity or 'capacity not given'}); "
                f"shaping a real cluster's links needs root on its hosts and is not done here")


def make_target(name: str, cluster_config: object, link_capacity: str | None) -> Target:
    if link_capacity is not None:
        rate_bps(link_capacity)
    if not name:
        if link_capacity:
            raise UserError("--link_capacity describes a cluster's links; the embedded default runs over loopback")
        return Target(name="", kind="embedded", hosts=("127.0.0.1",), shaping=False, link_capacity=None)

    cluster = cluster_hosts.parse(cluster_config, source=f"machine:{name}")
    state = testbed_of(cluster_config)
    if state is not None:
        return Target(name=name, kind="testbed", hosts=tuple(cluster.names), shaping=True,
                      link_capacity=link_capacity, testbed=state.name, link_sharing=state.link_sharing,
                      tcp=state.tcp)
    return Target(name=name, kind="cluster", hosts=tuple(cluster.names), shaping=False, link_capacity=link_capacity)


def sweep_bandwidths(target: Target, requested: Iterable[str] | None, matrix: Matrix) -> tuple[str, ...]:
    """The bandwidths a sweep runs at on this target; explicit requests it cannot honour are refused."""
    explicit = requested is not None
    rates = tuple(requested) if requested is not None else matrix.bandwidths
    for rate in rates:
        rate_bps(rate)
    if not target.shaping:
        if explicit and any(not same_rate(r, target.link_capacity or NATIVE) for r in rates):
            why = ("the embedded default runs over loopback" if target.kind == "embedded"
                   else f"the links of {target.name} cannot be shaped from here")
            raise UserError(f"--bandwidths needs a target whose links can be shaped ({why}); drop --bandwidths, "
                            f"or use a testbed: ck testbed cluster:NAME --hosts=4")
        return (target.link_capacity or NATIVE,)
    if target.link_capacity:
        cap = shaped_bps(target.link_capacity)
        too_fast = [r for r in rates if r != NATIVE and shaped_bps(r) > cap]
        if explicit and too_fast:
            raise UserError(f"{', '.join(too_fast)} exceed(s) the links of {target.name} ({target.link_capacity}); "
                            f"choose --bandwidths at or below it")
        rates = tuple(r for r in rates if r not in too_fast)
    return rates or (NATIVE,)
