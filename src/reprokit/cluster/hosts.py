"""Cluster descriptions (the hosts.json of `ck add machine:NAME --type=cluster --config_file=hosts.json`).

Two forms are accepted:

* the original workflow's: a JSON list of host names or addresses, ``host:port`` allowed::

      ["chifflet-2", "chifflet-4:2222"]

* a richer one: a list of objects, or an object holding that list and options::

      {"hosts": [{"host": "10.0.0.1", "port": 22, "user": "me", "identity_file": "~/.ssh/id_ed25519",
                  "interface": "eth0", "workers": 1, "servers": 1, "python": "/opt/mx/bin/python",
                  "proxy_command": "..."}],
       "ssh_config": "~/.ssh/config", "known_hosts": "~/.ssh/known_hosts",
       "accept_new_host_keys": false}

* a batch scheduler's allocation instead of the list, with the same options and any host key
  (but ``host``) applying to every host of the allocation::

      {"nodefile": "$OAR_NODEFILE", "user": "me", "interface": "ib0"}     # OAR or PBS ($PBS_NODEFILE)
      {"hostlist": "$SLURM_JOB_NODELIST"}                                 # or a literal "node[01-04,07]"

  A node file has one host per line, repeated once per reserved core (slot): each host
  appears once, its slot count recorded as ``slots``. A hostlist is a Slurm expression,
  expanded by python-hostlist. ``$NAME``/``${NAME}`` references are taken from the
  environment of the process that parses (the preprocess of ``ck run``, ``ck check
  cluster``), never through a shell, so one machine entry follows each new allocation.

Anything else is refused with one line saying what is wrong and where. JSON or YAML
files are read by ``load`` (``ck add machine`` itself reads only JSON: ``ck convert
cluster`` writes a YAML description as the JSON it registers).
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from reprokit.errors import UserError
from reprokit.run.settings import MAX_ROLES

HOST_KEYS = {"host", "port", "user", "identity_file", "interface", "workers", "servers", "python", "proxy_command",
             "slots"}
ALLOCATION_KEYS = ("nodefile", "hostlist")  # a batch scheduler's allocation in place of the 'hosts' list
OPTION_KEYS = {"ssh_config", "known_hosts", "accept_new_host_keys"}
TOP_KEYS = {"hosts", *OPTION_KEYS}
SHARED_HOST_KEYS = HOST_KEYS - {"host", "slots"}  # top-level keys an allocation gives to each of its hosts
# $NAME or ${NAME}: an environment reference in a nodefile or hostlist value.
_ENV_REFERENCE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
MAX_ALLOCATION_HOSTS = 100_000  # more is a mistake (a range typo), not a cluster
MAX_NODEFILE_CHARS = 16 << 20  # a node file of 100,000 cores is about 4 MB
# Host names, IPv4 addresses and ssh_config aliases; nothing a shell would interpret.
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_INTERFACE = re.compile(r"^[A-Za-z0-9._-]{1,15}$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")


@dataclass(frozen=True)
class HostSpec:
    host: str
    port: int | None = None  # None: from ssh_config, else 22
    user: str | None = None
    identity_file: str | None = None
    interface: str | None = None  # DMLC_INTERFACE
    workers: int | None = None  # None: the default layout decides
    servers: int | None = None
    python: str | None = None  # the engine's interpreter on that host
    proxy_command: str | None = None
    slots: int | None = None  # cores the allocation reserved there (node file lines); None: all of the host's

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class ClusterConfig:
    hosts: list[HostSpec]
    ssh_config: str | None = None
    known_hosts: str | None = None
    accept_new_host_keys: bool = False
    allocation: str = ""  # where an allocation's hosts came from ("nodefile PATH", "hostlist EXPR"); "" for a list

    @property
    def names(self) -> list[str]:
        return [h.host for h in self.hosts]

    def host(self, name: str) -> HostSpec:
        return next(h for h in self.hosts if h.host == name)

    def to_data(self) -> dict:
        """The description with every host spelled out (an allocation expanded): ``parse`` reads it back as is."""
        data: dict = {"hosts": [h.to_dict() for h in self.hosts]}
        data.update({k: v for k, v in (("ssh_config", self.ssh_config), ("known_hosts", self.known_hosts))
                     if v is not None})
        data["accept_new_host_keys"] = self.accept_new_host_keys
        return data


def _port(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit() \
            or not 1 <= int(value) <= 65535:
        raise UserError(f"{where}: port {value!r} is not a number from 1 to 65535")
    return int(value)


def _count(value: Any, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ROLES:
        raise UserError(f"{where}: {key} must be a whole number from 0 to {MAX_ROLES}, got {value!r}")
    return value


def _text(value: Any, where: str, key: str, pattern: re.Pattern | None = None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: {key} must be a non-empty string, got {value!r}")
    if pattern is not None and not pattern.match(value):
        raise UserError(f"{where}: {key} {value!r} has characters that are not allowed there")
    return value


def _host_name(value: Any, where: str) -> str:
    name = _text(value, where, "host")
    if not _HOST_NAME.match(name):
        raise UserError(f"{where}: host {name!r} is not a host name, address or ssh_config alias")
    return name


def _from_string(entry: str, where: str) -> HostSpec:
    if entry.count(":") == 1:
        name, port = entry.split(":")
        return HostSpec(host=_host_name(name, where), port=_port(port, where))
    return HostSpec(host=_host_name(entry, where))


def _reject_unknown(keys: set, allowed: set, where: str) -> None:
    unknown = sorted(keys - allowed)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                        f"allowed: {', '.join(sorted(allowed))}")


def _from_object(entry: dict, where: str) -> HostSpec:
    _reject_unknown(set(entry), HOST_KEYS, where)
    if "host" not in entry:
        raise UserError(f"{where}: missing the 'host' key")
    return HostSpec(
        host=_host_name(entry["host"], where),
        port=_port(entry["port"], where) if "port" in entry else None,
        user=_text(entry["user"], where, "user", _USER) if "user" in entry else None,
        identity_file=_text(entry["identity_file"], where, "identity_file") if "identity_file" in entry else None,
        interface=_text(entry["interface"], where, "interface", _INTERFACE) if "interface" in entry else None,
        workers=_count(entry["workers"], where, "workers") if "workers" in entry else None,
        servers=_count(entry["servers"], where, "servers") if "servers" in entry else None,
        python=_text(entry["python"], where, "python") if "python" in entry else None,
        proxy_command=_text(entry["proxy_command"], where, "proxy_command") if "proxy_command" in entry else None,
        slots=_slots(entry["slots"], where) if "slots" in entry else None,
    )


def _slots(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{where}: slots must be a whole number >= 1, got {value!r}")
    return value


def expand_references(value: str, key: str, source: str, environ: Mapping[str, str]) -> str:
    """``$NAME``/``${NAME}`` replaced from ``environ`` (no shell); an unset or empty one is refused."""
    what = "path" if key == "nodefile" else "expression"

    def lookup(match: re.Match) -> str:
        name = match.group("braced") or match.group("plain")
        found = environ.get(name, "")
        if not found.strip():
            raise UserError(f"{source}: {key} refers to ${name}, which is not set here; run inside the "
                            f"allocation (e.g. oarsub -I, salloc, qsub -I) or give the {what} in place of ${name}")
        return found
    return _ENV_REFERENCE.sub(lookup, value)


def read_nodefile(path: str, source: str) -> list[tuple[str, int]]:
    """An OAR or PBS node file: one host per line, repeated once per reserved core. Each host once, with its
    count of lines (slots), in the order of first appearance (the first host gets the scheduler)."""
    where = f"{source}: nodefile {path}"
    try:
        # Only a regular file: a FIFO would block the open, a device would never end.
        if not stat.S_ISREG(os.stat(os.path.expanduser(path)).st_mode):
            raise UserError(f"{where} is not a regular file; name the node file of the allocation")
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            text = handle.read(MAX_NODEFILE_CHARS + 1)
        if len(text) > MAX_NODEFILE_CHARS:
            raise UserError(f"{where} is larger than {MAX_NODEFILE_CHARS} characters; is it a node file?")
        lines = text.splitlines()
    except FileNotFoundError:
        raise UserError(f"{where} does not exist; is the allocation still running? (OAR: $OAR_NODEFILE, "
                        f"PBS: $PBS_NODEFILE)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{where} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    slots: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        name = line.strip()
        if not name:
            continue
        if not _HOST_NAME.match(name):
            raise UserError(f"{where}: line {number} {name[:80]!r} is not a host name or address")
        slots[name] = slots.get(name, 0) + 1
    if not slots:
        raise UserError(f"{where} lists no host; an OAR or PBS node file has one host name per line")
    return list(slots.items())


def expand_hostlist(expression: str, source: str) -> list[str]:
    """A Slurm hostlist expression (``node[01-04,07]``) as host names, by python-hostlist."""
    import hostlist

    try:
        names = hostlist.expand_hostlist(expression)
    except hostlist.BadHostlist as exc:
        raise UserError(f"{source}: hostlist {expression!r} is not a Slurm hostlist expression ({exc}); "
                        f"write it like node[01-04,07]") from None
    if not names:
        raise UserError(f"{source}: hostlist {expression!r} names no host; write it like node[01-04,07]")
    for name in names:
        if not _HOST_NAME.match(name):
            raise UserError(f"{source}: hostlist {expression!r} gives {name!r}, which is not a host name or address")
    return names


def _allocation_key(data: dict, source: str) -> str:
    """Which allocation a description names ('nodefile' or 'hostlist'), its keys checked."""
    _reject_unknown(set(data), TOP_KEYS | set(ALLOCATION_KEYS) | SHARED_HOST_KEYS, source)
    given = [k for k in ("hosts", *ALLOCATION_KEYS) if k in data]
    if len(given) > 1:
        raise UserError(f"{source}: give one of 'hosts', 'nodefile' and 'hostlist', not both {given[0]!r} "
                        f"and {given[1]!r}")
    _text(data[given[0]], source, given[0])
    return given[0]


def _allocation(data: dict, source: str, environ: Mapping[str, str]) -> tuple[list[dict], str]:
    """The 'hosts' list an allocation stands for (one object per host, with the shared host keys), and its origin."""
    key = _allocation_key(data, source)
    value = expand_references(data[key].strip(), key, source, environ)
    shared = {k: data[k] for k in SHARED_HOST_KEYS if k in data}
    if key == "nodefile":
        hosts = [{"host": name, "slots": count, **shared} for name, count in read_nodefile(value, source)]
    else:
        hosts = [{"host": name, **shared} for name in expand_hostlist(value, source)]
    if len(hosts) > MAX_ALLOCATION_HOSTS:
        raise UserError(f"{source}: {key} gives {len(hosts)} hosts, more than {MAX_ALLOCATION_HOSTS}; check it")
    return hosts, f"{key} {value}"


def parse(data: Any, source: str = "hosts.json", environ: Mapping[str, str] | None = None) -> ClusterConfig:
    """Validate a decoded hosts.json, expanding an allocation (see the module's docstring) with ``environ``
    (default: this process's environment); ``source`` names it in messages."""
    options: dict = {}
    if isinstance(data, dict):
        if any(k in data for k in ALLOCATION_KEYS):
            where = f"{source}: {next(k for k in ALLOCATION_KEYS if k in data)}"
            hosts, allocation = _allocation(data, source, os.environ if environ is None else environ)
            config = parse({"hosts": hosts, **{k: data[k] for k in OPTION_KEYS if k in data}}, where, environ)
            return replace(config, allocation=allocation)
        _reject_unknown(set(data), TOP_KEYS, source)
        if "hosts" not in data:
            raise UserError(f"{source}: missing the 'hosts' list (or a 'nodefile' or 'hostlist' allocation)")
        options = {k: data[k] for k in ("ssh_config", "known_hosts") if k in data}
        for key, value in options.items():
            _text(value, source, key)
        accept = data.get("accept_new_host_keys", False)
        if not isinstance(accept, bool):
            raise UserError(f"{source}: accept_new_host_keys must be true or false, got {accept!r}")
        options["accept_new_host_keys"] = accept
        data = data["hosts"]
    if not isinstance(data, list):
        raise UserError(f"{source}: expected a JSON list of hosts (or an object with a 'hosts' list), "
                        f"got {type(data).__name__}")
    if not data:
        raise UserError(f"{source}: the list of hosts is empty")
    hosts = []
    for index, entry in enumerate(data):
        where = f"{source}: host #{index + 1}"
        if isinstance(entry, str):
            hosts.append(_from_string(entry, where))
        elif isinstance(entry, dict):
            hosts.append(_from_object(entry, where))
        else:
            raise UserError(f"{where}: expected a host name or an object, got {type(entry).__name__}")
    seen: dict[tuple, int] = {}
    for index, spec in enumerate(hosts):
        key = (spec.host, spec.port)
        if key in seen:
            raise UserError(f"{source}: host #{index + 1} ({spec.host}) duplicates host #{seen[key] + 1}")
        seen[key] = index
    return ClusterConfig(hosts=hosts, **options)


def check_description(data: Any, source: str) -> None:
    """Validate a description as ``parse`` does, but leave an allocation unexpanded (it may not exist yet):
    its value must be a string, and its shared host keys are checked on a stand-in host."""
    key = next((k for k in ALLOCATION_KEYS if isinstance(data, dict) and k in data), None)
    if key is None:
        parse(data, source)
        return
    key = _allocation_key(data, source)
    stand_in = {"host": "allocated-host", **{k: data[k] for k in SHARED_HOST_KEYS if k in data}}
    parse({"hosts": [stand_in], **{k: data[k] for k in OPTION_KEYS if k in data}}, f"{source}: {key}")


YAML_SUFFIXES = (".yaml", ".yml")


def read_description(path: str) -> Any:
    """A cluster description file as data, unvalidated: YAML when named .yaml/.yml (PyYAML's safe loader), else JSON."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path} is not text (UTF-8)") from None
    if not text.strip():
        raise UserError(f"{path} is empty; describe the cluster's hosts in it (see README, Clusters over SSH)")
    if path.lower().endswith(YAML_SUFFIXES):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            where = getattr(exc, "problem_mark", None)
            at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise UserError(f"{path} is not valid YAML{at}: {problem}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None


def load(path: str, environ: Mapping[str, str] | None = None) -> ClusterConfig:
    return parse(read_description(path), source=path, environ=environ)
