"""A cluster on this machine: N hosts as network namespaces, each with its own sshd.

Layout of testbed NAME with N hosts:

* namespace ``rk-NAME-sw`` holds bridge ``br0`` (10.77.0.254/24): the switch;
* namespace ``rk-NAME-hI`` (I = 1..N) holds ``eth0`` at 10.77.0.I/24, a veth
  whose peer ``vI`` is a port of the bridge; ``tc`` shapes ``eth0`` when a rate is set, with the
  testbed's link sharing (``LINK_SHARING``);
* an sshd per host, listening on 10.77.0.I:22, key authentication only, with the SFTP subsystem
  except on the hosts listed in ``no_sftp`` (as some sites run it: files then go over the exec channel).

Every interface is created inside the testbed's own namespaces: nothing
outside them is touched. The controller reaches the hosts through a relay
started in the switch namespace (ssh's ProxyCommand), so the testbed's
addresses never appear in the controller's namespace.

The state folder holds the keys, sshd configurations, ``hosts.json`` (for
``ck add machine``), ``ssh_config`` and ``known_hosts``. Needs root.

With ``cpus_per_host=C`` host I's sshd, and so every session and role started through it, is pinned to CPUs of
its own (the (I-1)*C-th to the I*C-1-th of those this process may use): hosts then compete for no core,
as the hosts of a real cluster do.
Without it all hosts share every core (compute and network stacks of N hosts on this machine's cores).

With ``scheduler="slurm"`` the testbed also runs a real Slurm (munged, slurmctld in the switch namespace,
a slurmd per host): see cluster/slurm_testbed.py; testbed.json then says so under ``scheduler``.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reprokit.cluster import slurm_testbed
from reprokit.cluster.slurm_testbed import SlurmState
from reprokit.core.errors import UserError
from reprokit.core.paths import SRC_DIR
from reprokit.core.values import shown, tc_rate_bps

SUBNET = "10.77.0"
SWITCH_ADDRESS = f"{SUBNET}.254"
MAX_HOSTS = 32
_NAME = re.compile(r"^[a-z0-9]{1,8}$")
COMMAND_TIMEOUT_S = 30
SSHD_START_TIMEOUT_S = 10
SCHEDULERS = ("slurm",)  # besides none
# How a host's shaped egress is shared among its flows. "fifo": one tbf queue, so TCP's flows share it as their
# congestion control makes them (unevenly when many flows fill one queue). "fair": htb with a class per other host,
# equal shares, each lending what it leaves unused: the destinations share the link evenly, as a host's default
# fair queueing (fq_codel) shares it among flows. This kernel has no fq, fq_codel or sfq to shape with.
LINK_SHARING = ("fifo", "fair")
DEFAULT_LINK_SHARING = "fifo"  # existing stores, tests and figures were made on one queue
SHAPING_BURST = "256kb"
# Each namespace starts with the machine's default TCP congestion control. Some machines default to bbr, which
# paces each flow at its own estimate of the bottleneck and can leave a shaped link idle while data waits; loss-based
# cubic (Linux's default) fills it. --tcp sets one for every host.
AVAILABLE_TCP = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
ALLOWED_TCP = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")

STATE_FILE = "testbed.json"


def switch_ns(name: str) -> str:
    return f"rk-{name}-sw"


def host_ns(name: str, index: int) -> str:
    return f"rk-{name}-h{index}"


def host_address(index: int) -> str:
    return f"{SUBNET}.{index}"


def check_name(name: str) -> None:
    if not _NAME.match(name):
        raise UserError(f"testbed name {shown(name)} must be 1 to 8 lower-case letters or digits")


def check_rate(rate: str) -> None:
    if tc_rate_bps(rate) is None:
        raise UserError(f"rate {shown(rate)} is not a tc rate of at least 1kbit like 100mbit, 1gbit or 500kbit")


def _require_root_and_tools() -> str:
    if os.geteuid() != 0:
        raise UserError("the testbed needs root (network namespaces, tc and sshd); run it as root")
    for tool in ("ip", "tc", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise UserError(f"{tool} not found; install Debian's iproute2 and openssh-client")
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd):
        raise UserError("sshd not found; install Debian's openssh-server (apt-get install openssh-server)")
    return sshd


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise UserError(f"testbed: '{' '.join(argv)}' failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def namespaces() -> set[str]:
    out = _run("ip", "netns", "list", check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _own_namespaces(name: str) -> list[str]:
    prefix = f"rk-{name}-"
    return sorted(ns for ns in namespaces() if ns.startswith(prefix))


def _write_sshd_config(host_dir: Path, address: str, state: Path, sftp: bool = True) -> Path:
    config = host_dir / "sshd_config"
    config.write_text("\n".join([
        f"ListenAddress {address}",
        "Port 22",
        f"HostKey {host_dir / 'ssh_host_ed25519_key'}",
        f"PidFile {host_dir / 'sshd.pid'}",
        f"AuthorizedKeysFile {state / 'authorized_keys'}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes no",  # the state folder may live under /tmp
        "MaxSessions 64",
        "MaxStartups 64",
        # A client that stops answering (its link cut) is dropped after ~9 s, which closes its sessions' stdin:
        # the role watchdogs stop their roles (they also stop on their own after REMOTE_SILENCE_S of silence).
        "ClientAliveInterval 3",
        "ClientAliveCountMax 3",
        "LogLevel ERROR",
        *(["Subsystem sftp internal-sftp"] if sftp else []),
        "",
    ]))
    return config


def _keygen(path: Path, comment: str) -> None:
    if not path.exists():
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))


def host_cpus(num_hosts: int, cpus_per_host: int) -> list[list[int]]:
    """The CPUs each host is pinned to: C of this process's CPUs each, none shared. UserError if too few."""
    available = sorted(os.sched_getaffinity(0))
    if num_hosts * cpus_per_host > len(available):
        raise UserError(f"--cpus_per_host={cpus_per_host} for {num_hosts} hosts needs {num_hosts * cpus_per_host} "
                        f"CPUs, but this machine gives {len(available)}; give fewer --hosts or a smaller "
                        f"--cpus_per_host")
    return [available[i * cpus_per_host:(i + 1) * cpus_per_host] for i in range(num_hosts)]


def _start_sshd(sshd: str, ns: str, host_dir: Path, cpus: list[int] | None = None) -> None:
    pid_file = host_dir / "sshd.pid"
    pid_file.unlink(missing_ok=True)
    # taskset's affinity is inherited by sshd's sessions and everything they start.
    pinned = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []
    _run(*pinned, "ip", "netns", "exec", ns, sshd, "-f", str(host_dir / "sshd_config"), "-E",
         str(host_dir / "sshd.log"))
    deadline = time.monotonic() + SSHD_START_TIMEOUT_S
    while not pid_file.exists():
        if time.monotonic() > deadline:
            raise UserError(f"sshd in {ns} did not start; see {host_dir / 'sshd.log'}")
        time.sleep(0.05)


def shape(name: str, num_hosts: int, rate: str | None, sharing: str = DEFAULT_LINK_SHARING) -> None:
    """Limit every host's egress to ``rate``, shared as ``sharing`` says (LINK_SHARING), or remove the limit when
    rate is None."""
    check_link_sharing(sharing)
    for index in range(1, num_hosts + 1):
        ns = host_ns(name, index)
        if rate is None:
            _run("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
            continue
        check_rate(rate)
        if sharing == "fair":
            _shape_fairly(ns, index, num_hosts, rate)
        else:
            _run("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0", "root",
                 "tbf", "rate", rate, "burst", SHAPING_BURST, "latency", "50ms")


def _shape_fairly(ns: str, index: int, num_hosts: int, rate: str) -> None:
    """htb on host ``index``'s eth0: class 1:1 at ``rate``; under it a class 1:(10+J) per other host J, filtered
    by destination address, guaranteed an equal share of 99% and allowed the whole rate (a pfifo each); the rest
    (the switch's relay, ARP) in 1:99 with 1%. ``rate`` was checked by shape()."""
    bps = int(tc_rate_bps(rate) or 0)
    others = [j for j in range(1, num_hosts + 1) if j != index]
    tc = ("ip", "netns", "exec", ns, "tc")
    whole = ("ceil", f"{bps}bit", "burst", SHAPING_BURST, "cburst", SHAPING_BURST)
    # Ten full frames per turn: fine enough to interleave the destinations, coarse enough for htb's own cost.
    quantum = ("quantum", "15140")
    _run(*tc, "qdisc", "del", "dev", "eth0", "root", check=False)
    _run(*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "99")
    _run(*tc, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", f"{bps}bit", *whole)
    for j in others:
        _run(*tc, "class", "add", "dev", "eth0", "parent", "1:1", "classid", f"1:{10 + j}", "htb",
             "rate", f"{bps * 99 // (100 * len(others))}bit", *whole, *quantum)
        _run(*tc, "qdisc", "add", "dev", "eth0", "parent", f"1:{10 + j}", "pfifo", "limit", "1500")
        _run(*tc, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match",
             "ip", "dst", f"{host_address(j)}/32", "flowid", f"1:{10 + j}")
    _run(*tc, "class", "add", "dev", "eth0", "parent", "1:1", "classid", "1:99", "htb", "rate",
         f"{max(bps // 100, 8000)}bit", *whole, *quantum)


def check_link_sharing(sharing: str) -> None:
    if sharing not in LINK_SHARING:
        raise UserError(f"link sharing {shown(sharing)} is not one the testbed shapes; give --link_sharing=fifo "
                        f"(one queue per host, the default) or --link_sharing=fair (an equal share per destination)")


def check_tcp(tcp: str) -> None:
    """``tcp`` must be a congestion control this kernel has, and one a namespace may choose (the allowed list is the
    machine's, outside the testbed: it is not widened here)."""
    available = AVAILABLE_TCP.read_text().split() if AVAILABLE_TCP.exists() else []
    if tcp not in available:
        raise UserError(f"TCP congestion control {shown(tcp)} is not one this kernel has ({' '.join(available)}); "
                        f"give --tcp=NAME with one of them, or leave --tcp out for the machine's default")
    allowed = ALLOWED_TCP.read_text().split() if ALLOWED_TCP.exists() else []
    if tcp not in allowed:
        raise UserError(f"TCP congestion control {tcp} is not allowed in network namespaces on this machine "
                        f"(net.ipv4.tcp_allowed_congestion_control: {' '.join(allowed)}); allow it as root with "
                        f"sysctl -w net.ipv4.tcp_allowed_congestion_control={shlex.quote(' '.join([*allowed, tcp]))}, "
                        f"or leave --tcp out")


def check_scheduler(scheduler: str | None) -> None:
    if scheduler is not None and scheduler not in SCHEDULERS:
        raise UserError(f"scheduler {shown(scheduler)} is not one the testbed runs; give --scheduler=slurm or "
                        f"leave it out")


def create(name: str, num_hosts: int, state_dir: Path, rate: str | None = None,
           no_sftp: frozenset[int] = frozenset(), scheduler: str | None = None,
           cpus_per_host: int | None = None, link_sharing: str = DEFAULT_LINK_SHARING, tcp: str | None = None) -> Path:
    """Create (or re-create) testbed ``name``; returns the path of its hosts.json.
    ``link_sharing``: how each host's shaped egress is shared (LINK_SHARING), now and whenever it is shaped again.
    ``tcp``: the TCP congestion control of every host; None: the machine's default.
    ``no_sftp``: numbers (1..N) of the hosts whose sshd has no SFTP subsystem.
    ``cpus_per_host``: pin each host to that many CPUs of its own; None: every host shares every CPU.
    ``scheduler``: "slurm" to run a Slurm cluster over the hosts too (cluster/slurm_testbed.py)."""
    check_name(name)
    check_scheduler(scheduler)
    check_link_sharing(link_sharing)
    if tcp is not None:
        check_tcp(tcp)
    if not 1 <= num_hosts <= MAX_HOSTS:
        raise UserError(f"a testbed has 1 to {MAX_HOSTS} hosts, not {num_hosts}")
    beyond = sorted(i for i in no_sftp if not 1 <= i <= num_hosts)
    if beyond:
        raise UserError(f"--no_sftp names host(s) {', '.join(map(str, beyond))}, but the testbed's hosts are "
                        f"1 to {num_hosts}; fix it with --no_sftp=I[,J...]")
    if rate is not None:
        check_rate(rate)
    cpus = None
    if cpus_per_host is not None:
        if scheduler is not None:
            raise UserError("--cpus_per_host pins the hosts' sshd, not Slurm's job steps; leave out either "
                            "--cpus_per_host or --scheduler")
        cpus = host_cpus(num_hosts, cpus_per_host)
    sshd = _require_root_and_tools()
    if cpus is not None and not shutil.which("taskset"):
        raise UserError("--cpus_per_host needs taskset; install Debian's util-linux")
    if scheduler == "slurm":
        slurm_testbed.require_tools()
    destroy(name, state_dir)
    state = state_dir.resolve()
    state.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation folder
    try:
        sw = switch_ns(name)
        _run("ip", "netns", "add", sw)
        _run("ip", "-n", sw, "link", "set", "lo", "up")
        _run("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", sw, "addr", "add", f"{SWITCH_ADDRESS}/24", "dev", "br0")
        _run("ip", "-n", sw, "link", "set", "br0", "up")
        _keygen(state / "client_key", f"reprokit-testbed-{name}")
        (state / "authorized_keys").write_text((state / "client_key.pub").read_text())
        known_hosts = []
        for index in range(1, num_hosts + 1):
            ns, address = host_ns(name, index), host_address(index)
            _run("ip", "netns", "add", ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            if tcp is not None:  # before sshd starts: every connection to or from this host uses it
                _run("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv4.tcp_congestion_control={tcp}")
            # Both ends are created inside our namespaces: the root namespace never sees them.
            _run("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"v{index}", "netns", sw)
            _run("ip", "-n", sw, "link", "set", f"v{index}", "master", "br0", "up")
            _run("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            host_dir = state / f"h{index}"
            host_dir.mkdir(exist_ok=True)
            _keygen(host_dir / "ssh_host_ed25519_key", f"{ns}")
            _write_sshd_config(host_dir, address, state, sftp=index not in no_sftp)
            _start_sshd(sshd, ns, host_dir, cpus[index - 1] if cpus else None)
            key_type, key = (host_dir / "ssh_host_ed25519_key.pub").read_text().split()[:2]
            known_hosts.append(f"{address} {key_type} {key}\n")
        (state / "known_hosts").write_text("".join(known_hosts))
        src = str(SRC_DIR)
        relay = " ".join(shlex.quote(a) for a in ["ip", "netns", "exec", sw, "env", f"PYTHONPATH={src}",
                                                   sys.executable, "-m", "reprokit.cluster.relay"])
        (state / "ssh_config").write_text("\n".join([
            f"Host {SUBNET}.*",
            "  User root",
            "  Port 22",
            f"  IdentityFile {state / 'client_key'}",
            f"  UserKnownHostsFile {state / 'known_hosts'}",
            "  StrictHostKeyChecking yes",
            f"  ProxyCommand {relay} %h %p",
            "",
        ]))
        hosts = {
            "hosts": [{"host": host_address(i), "interface": "eth0"} for i in range(1, num_hosts + 1)],
            "ssh_config": str(state / "ssh_config"),
            "known_hosts": str(state / "known_hosts"),
        }
        slurm = None
        if scheduler == "slurm":
            slurm = slurm_testbed.start(name, num_hosts, state, sw, [host_ns(name, i) for i in range(1, num_hosts + 1)],
                                        SWITCH_ADDRESS, SUBNET)
        (state / "hosts.json").write_text(json.dumps(hosts, indent=2) + "\n")
        TestbedState(name, num_hosts, rate, sorted(no_sftp), slurm, cpus or [], link_sharing, tcp or "").save(state)
        if rate is not None:
            shape(name, num_hosts, rate, link_sharing)
    except BaseException:
        destroy(name, state_dir)
        raise
    return state / "hosts.json"


@dataclass(frozen=True)
class TestbedState:
    """testbed.json, beside the testbed's hosts.json, ssh_config and keys."""
    name: str
    hosts: int
    rate: str | None = None  # the links' tc rate; None: unlimited
    no_sftp: list[int] = field(default_factory=list)  # hosts whose sshd offers no SFTP
    scheduler: SlurmState | None = None  # a Slurm testbed's daemons and client prefix
    cpus: list[list[int]] = field(default_factory=list)  # per host the CPUs it is pinned to; empty: all shared
    link_sharing: str = DEFAULT_LINK_SHARING  # how each host's shaped egress is shared (LINK_SHARING)
    tcp: str = ""  # the hosts' TCP congestion control as set by --tcp; "": the machine's default

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.scheduler is None:
            data.pop("scheduler")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestbedState:
        scheduler = data.get("scheduler")
        return cls(name=str(data["name"]), hosts=int(data["hosts"]), rate=data.get("rate"),
                   no_sftp=list(data.get("no_sftp", [])),
                   scheduler=SlurmState.from_dict(scheduler) if scheduler else None,
                   cpus=[[int(c) for c in host] for host in data.get("cpus", [])],
                   link_sharing=str(data.get("link_sharing", DEFAULT_LINK_SHARING)), tcp=str(data.get("tcp", "")))

    def save(self, state_dir: Path) -> None:
        (state_dir / STATE_FILE).write_text(json.dumps(self.to_dict()) + "\n")

    @classmethod
    def read(cls, state_dir: Path) -> TestbedState | None:
        """The state in ``state_dir``, or None when there is none (or it is not one)."""
        try:
            return cls.from_dict(json.loads((state_dir / STATE_FILE).read_text()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None


def testbed_of(cluster_config: object) -> TestbedState | None:
    """The testbed state (testbed.json) behind a machine's hosts.json, or None for a real cluster.

    ``ck testbed cluster:NAME`` writes hosts.json, ssh_config and testbed.json
    into one state folder; hosts.json names that ssh_config, so a machine made
    from it leads back to testbed.json. The hosts must be the testbed's own
    addresses, so a hand-made hosts.json that merely reuses the ssh_config is
    not taken for a testbed.
    """
    if not isinstance(cluster_config, dict) or not cluster_config.get("ssh_config"):
        return None
    state = TestbedState.read(Path(str(cluster_config["ssh_config"])).expanduser().parent)
    try:
        hosts = [h["host"] if isinstance(h, dict) else h for h in cluster_config.get("hosts", [])]
    except (KeyError, TypeError):
        return None
    if state is None or hosts != [host_address(i) for i in range(1, state.hosts + 1)]:
        return None
    return state


def slurm_testbed_of(environ: Mapping[str, str]) -> TestbedState | None:
    """The testbed state (testbed.json) of the Slurm testbed whose commands ``environ`` is set up for (SLURM_CONF is
    the slurm.conf its testbed.json names), or None: a run inside an allocation on the testbed is on the testbed."""
    conf = environ.get("SLURM_CONF", "").strip()
    if not conf:
        return None
    state = TestbedState.read(Path(conf).parent.parent)
    return state if state is not None and state.scheduler is not None and state.scheduler.slurm_conf == conf else None


def destroy(name: str, state_dir: Path) -> list[str]:
    """Stop everything running in the testbed's namespaces and delete them. Safe to repeat."""
    check_name(name)
    removed = _own_namespaces(name)
    own_pids = {int(pid) for ns in removed for pid in _run("ip", "netns", "pids", ns, check=False).stdout.split()
                if pid.isdigit()}
    if state_dir.exists():
        slurm_testbed.stop(state_dir, own_pids)  # the daemons by their pid files, if the testbed runs Slurm
    for _ in range(5):  # again while something is left: a process may fork (a job step starting) between rounds
        pids = [pid for ns in removed for pid in _run("ip", "netns", "pids", ns, check=False).stdout.split()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        time.sleep(0.05)
    for ns in removed:
        _run("ip", "netns", "del", ns, check=False)
    slurm_testbed.remove_hosts_files(sorted(p.name for p in Path("/etc/netns").glob(f"rk-{name}-*")))
    if state_dir.exists():
        shutil.rmtree(state_dir, ignore_errors=True)
    return removed
