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

Anything else is refused with one line saying what is wrong and where.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from reprokit.errors import UserError

HOST_KEYS = {"host", "port", "user", "identity_file", "interface", "workers", "servers", "python", "proxy_command"}
TOP_KEYS = {"hosts", "ssh_config", "known_hosts", "accept_new_host_keys"}
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

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class ClusterConfig:
    hosts: list[HostSpec]
    ssh_config: str | None = None
    known_hosts: str | None = None
    accept_new_host_keys: bool = False

    @property
    def names(self) -> list[str]:
        return [h.host for h in self.hosts]

    def host(self, name: str) -> HostSpec:
        return next(h for h in self.hosts if h.host == name)


def _port(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit() \
            or not 1 <= int(value) <= 65535:
        raise UserError(f"{where}: port {value!r} is not a number from 1 to 65535")
    return int(value)


def _count(value: Any, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{where}: {key} must be a whole number >= 0, got {value!r}")
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
    )


def parse(data: Any, source: str = "hosts.json") -> ClusterConfig:
    """Validate a decoded hosts.json; ``source`` names it in messages."""
    options: dict = {}
    if isinstance(data, dict):
        _reject_unknown(set(data), TOP_KEYS, source)
        if "hosts" not in data:
            raise UserError(f"{source}: missing the 'hosts' list")
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


def load(path: str) -> ClusterConfig:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    return parse(data, source=path)
