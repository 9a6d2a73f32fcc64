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
files are read by ``load``, within bounds (``read_description``: size, nesting, aliases, each key once);
``ck add machine`` itself reads only JSON: ``ck convert cluster`` writes a YAML description as the JSON it
registers.
"""
from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import hostlist
import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from reprokit.cluster.slurm import job_of
from reprokit.core import schema as s
from reprokit.core.errors import UserError
from reprokit.core.files import read_regular
from reprokit.core.schema import HOST_NAME
from reprokit.core.values import shown

# NUM_WORKERS/NUM_SERVERS and hosts.json's per-host counts, whatever the hosts: 1000 nodes x 100 roles. It
# keeps a typo (1e9) from being laid out role by role before the per-host limit sees it.
MAX_ROLES = 100_000

HOST_KEYS = {"host", "port", "user", "identity_file", "interface", "workers", "servers", "python", "proxy_command",
             "slots"}
ALLOCATION_KEYS = ("nodefile", "hostlist")  # a batch scheduler's allocation in place of the 'hosts' list
OPTION_KEYS = {"ssh_config", "known_hosts", "accept_new_host_keys"}
TOP_KEYS = {"hosts", *OPTION_KEYS}
SHARED_HOST_KEYS = HOST_KEYS - {"host", "slots"}  # top-level keys an allocation gives to each of its hosts
# $NAME or ${NAME}: an environment reference in a nodefile or hostlist value.
_ENV_REFERENCE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
MAX_HOSTS = 4096  # listed or allocated: more is a mistake (a range typo, the wrong file), not a cluster
MAX_NODEFILE_BYTES = 16 << 20  # a node file of 100,000 cores is about 4 MB
# Host names, IPv4 addresses and ssh_config aliases; nothing a shell would interpret.
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

    def to_dict(self) -> dict[str, Any]:
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

    def to_data(self) -> dict[str, Any]:
        """The description with every host spelled out (an allocation expanded): ``parse`` reads it back as is."""
        data: dict[str, Any] = {"hosts": [h.to_dict() for h in self.hosts]}
        data.update({k: v for k, v in (("ssh_config", self.ssh_config), ("known_hosts", self.known_hosts))
                     if v is not None})
        data["accept_new_host_keys"] = self.accept_new_host_keys
        return data


def _valid(spec: s.Spec, value: Any, where: str) -> Any:
    """``value`` checked against ``spec`` (the one validation idiom, reprokit.core.schema); a refusal is one line."""
    try:
        spec.check(value, where)
    except s.Invalid as exc:
        raise UserError(str(exc)) from None
    return value


def _port_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, str)) and str(value).isdigit() \
        and 1 <= int(value) <= 65535


NONEMPTY = s.Where(s.Text(4096), lambda v: bool(v.strip()), "a non-empty string")
PORT = s.Where(s.Json(depth=0), _port_number, "a port number from 1 to 65535")
ROLES = s.Int(0, MAX_ROLES)
# One entry of the 'hosts' list, as an object ("name" and "name:port" strings become one first).
HOST_ENTRY = s.Obj(required={"host": s.Host()}, optional={
    "port": PORT, "user": s.Where(s.Text(32), lambda v: bool(_USER.match(v)), "a user name (letters, digits, "
                                                                                 "'.', '_', '-')"),
    "identity_file": NONEMPTY, "interface": s.Where(s.Text(15), lambda v: bool(_INTERFACE.match(v)),
                                                    "a network interface name"),
    "workers": ROLES, "servers": ROLES, "python": NONEMPTY, "proxy_command": NONEMPTY, "slots": s.Int(1, 1_000_000)})
OPTIONS = {"ssh_config": NONEMPTY, "known_hosts": NONEMPTY, "accept_new_host_keys": s.Bool()}


def _from_entry(entry: Any, where: str) -> HostSpec:
    if isinstance(entry, str):
        name, _, port = entry.partition(":") if entry.count(":") == 1 else (entry, "", "")
        entry = {"host": name, **({"port": port} if port else {})}
    if not isinstance(entry, dict):
        raise UserError(f"{where}: expected a host name or an object, got {type(entry).__name__}")
    _valid(HOST_ENTRY, entry, where)
    return HostSpec(**{**entry, **({"port": int(entry["port"])} if "port" in entry else {})})


def expand_references(value: str, key: str, source: str, environ: Mapping[str, str]) -> str:
    """``$NAME``/``${NAME}`` replaced from ``environ`` (no shell); an unset or empty one is refused."""
    what = "path" if key == "nodefile" else "expression"

    def lookup(match: re.Match[str]) -> str:
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
    if not os.path.exists(os.path.expanduser(path)):
        raise UserError(f"{where} does not exist; is the allocation still running? (OAR: $OAR_NODEFILE, "
                        f"PBS: $PBS_NODEFILE)")
    try:
        lines = read_regular(path, "the node file of an allocation", MAX_NODEFILE_BYTES).decode().splitlines()
    except UserError as exc:
        raise UserError(f"{source}: nodefile {exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{where} is not text (UTF-8); name the node file of the allocation") from None
    slots: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        name = line.strip()
        if not name:
            continue
        if not HOST_NAME.match(name):
            raise UserError(f"{where}: line {number} {shown(name)} is not a host name or address")
        slots[name] = slots.get(name, 0) + 1
    if not slots:
        raise UserError(f"{where} lists no host; an OAR or PBS node file has one host name per line")
    return list(slots.items())


def expand_hostlist(expression: str, source: str) -> list[str]:
    """A Slurm hostlist expression (``node[01-04,07]``) as host names, by python-hostlist."""
    try:
        names: list[str] = hostlist.expand_hostlist(expression)
    except hostlist.BadHostlist as exc:
        raise UserError(f"{source}: hostlist {shown(expression)} is not a Slurm hostlist expression ({exc}); "
                        f"write it like node[01-04,07]") from None
    if not names:
        raise UserError(f"{source}: hostlist {shown(expression)} names no host; write it like node[01-04,07]")
    for name in names:
        if not HOST_NAME.match(name):
            raise UserError(f"{source}: hostlist {shown(expression)} gives {shown(name)}, which is not a host name "
                            f"or address")
    return names


def _allocation_key(data: dict[str, Any], source: str) -> str:
    """Which allocation a description names ('nodefile' or 'hostlist'), its keys checked."""
    known = TOP_KEYS | set(ALLOCATION_KEYS) | SHARED_HOST_KEYS
    _valid(s.Obj(optional={k: s.Json() for k in sorted(known)}), data, source)
    given = [k for k in ("hosts", *ALLOCATION_KEYS) if k in data]
    if len(given) > 1:
        raise UserError(f"{source}: give one of 'hosts', 'nodefile' and 'hostlist', not both {given[0]!r} "
                        f"and {given[1]!r}")
    _valid(NONEMPTY, data[given[0]], f"{source}: {given[0]}")
    return given[0]


def _allocation(data: dict[str, Any], source: str, environ: Mapping[str, str]) -> tuple[list[dict[str, Any]], str]:
    """The 'hosts' list an allocation stands for (one object per host, with the shared host keys), and its origin."""
    key = _allocation_key(data, source)
    value = expand_references(data[key].strip(), key, source, environ)
    shared = {k: data[k] for k in SHARED_HOST_KEYS if k in data}
    if key == "nodefile":
        hosts = [{"host": name, "slots": count, **shared} for name, count in read_nodefile(value, source)]
    else:
        hosts = [{"host": name, **shared} for name in expand_hostlist(value, source)]
    if len(hosts) > MAX_HOSTS:
        raise UserError(f"{source}: {key} gives {len(hosts)} hosts; a cluster has at most {MAX_HOSTS}: check it")
    return hosts, f"{key} {value}"


def parse(data: Any, source: str = "hosts.json", environ: Mapping[str, str] | None = None) -> ClusterConfig:
    """Validate a decoded hosts.json, expanding an allocation (see the module's docstring) with ``environ``
    (default: this process's environment); ``source`` names it in messages."""
    options: dict[str, Any] = {}
    if isinstance(data, dict) and "slurm" in data:  # a Slurm job (cluster.slurm); read inside it, its allocation
        data = _without_job(data, source)
    if isinstance(data, dict):
        if any(k in data for k in ALLOCATION_KEYS):
            where = f"{source}: {next(k for k in ALLOCATION_KEYS if k in data)}"
            hosts, allocation = _allocation(data, source, os.environ if environ is None else environ)
            config = parse({"hosts": hosts, **{k: data[k] for k in OPTION_KEYS if k in data}}, where, environ)
            return replace(config, allocation=allocation)
        _valid(s.Obj(optional={"hosts": s.Json(depth=3, max_items=MAX_HOSTS * 20), **OPTIONS}), data, source)
        if "hosts" not in data:
            raise UserError(f"{source}: missing the 'hosts' list (or a 'nodefile' or 'hostlist' allocation)")
        options = {k: data[k] for k in OPTIONS if k in data}
        data = data["hosts"]
    if not isinstance(data, list):
        raise UserError(f"{source}: expected a JSON list of hosts (or an object with a 'hosts' list), "
                        f"got {type(data).__name__}")
    if not data:
        raise UserError(f"{source}: the list of hosts is empty")
    if len(data) > MAX_HOSTS:  # never echoed: a list this long is the wrong file or a generated mistake
        raise UserError(f"{source}: the list holds {len(data)} hosts; a cluster description lists at most "
                        f"{MAX_HOSTS}: check it")
    specs: list[HostSpec] = []
    for index, entry in enumerate(data):
        specs.append(_from_entry(entry, f"{source}: host #{index + 1}"))
    seen: dict[tuple[str, int | None], int] = {}
    for index, spec in enumerate(specs):
        key = (spec.host, spec.port)
        if key in seen:
            raise UserError(f"{source}: host #{index + 1} ({spec.host}) duplicates host #{seen[key] + 1}")
        seen[key] = index
    return ClusterConfig(hosts=specs, **options)


def _without_job(data: dict[str, Any], source: str) -> dict[str, Any]:
    """A description naming a Slurm job (its ``slurm`` section checked) as the hosts it runs on: its own
    ``hosts``/``nodefile``/``hostlist`` if it gives them, else the job's allocation."""
    job_of(data, source)
    rest = {k: v for k, v in data.items() if k != "slurm"}
    if not any(k in rest for k in ("hosts", *ALLOCATION_KEYS)):
        rest["hostlist"] = "$SLURM_JOB_NODELIST"
    return rest


def check_description(data: Any, source: str) -> None:
    """Validate a description as ``parse`` does, but leave an allocation unexpanded (it may not exist yet):
    its value must be a string, and its shared host keys are checked on a stand-in host."""
    if isinstance(data, dict) and "slurm" in data:
        data = _without_job(data, source)
    key = next((k for k in ALLOCATION_KEYS if isinstance(data, dict) and k in data), None)
    if key is None:
        parse(data, source)
        return
    key = _allocation_key(data, source)
    stand_in = {"host": "allocated-host", **{k: data[k] for k in SHARED_HOST_KEYS if k in data}}
    parse({"hosts": [stand_in], **{k: data[k] for k in OPTION_KEYS if k in data}}, f"{source}: {key}")


YAML_SUFFIXES = (".yaml", ".yml")
MAX_DESCRIPTION_BYTES = 1 << 20  # a description of MAX_HOSTS hosts, each with every key, is about 0.8 MB
MAX_NESTING = 20  # a description nests 4 deep (object, hosts list, host object, value)
MAX_ALIASES = 100  # YAML aliases (*name): a few share options; more are an alias bomb
MAX_NODES = 200_000  # values after YAML aliases are expanded (MAX_HOSTS hosts with every key: about 90,000)
_YAML_STR = "tag:yaml.org,2002:str"
_YAML_MERGE = "tag:yaml.org,2002:merge"


class _Refused(Exception):
    """A description's shape is refused: ``line`` (1-based, 0: none) and why."""

    def __init__(self, line: int, why: str):
        super().__init__(why)
        self.line = line


@functools.cache
def _bounded_loader() -> type:
    """PyYAML's safe loader, bounded while it composes: at most MAX_ALIASES aliases, MAX_NESTING levels and
    MAX_NODES nodes (libyaml's parser when PyYAML has it: 1 MiB in about 1 s, against 7 s in Python)."""
    if yaml.__with_libyaml__:
        from yaml._yaml import CParser as Parser  # noqa: PLC0415  libyaml's C parser: only if PyYAML was built with it
    else:
        from yaml.parser import Parser as PyParser  # noqa: PLC0415  PyYAML's Python parser: only without libyaml
        from yaml.reader import Reader  # noqa: PLC0415  PyYAML's Python parser: only without libyaml
        from yaml.scanner import Scanner  # noqa: PLC0415  PyYAML's Python parser: only without libyaml

        class Parser(Reader, Scanner, PyParser):  # type: ignore[no-redef]
            def __init__(self, stream: str):
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                PyParser.__init__(self)

    class BoundedSafeLoader(Composer, Parser, SafeConstructor, Resolver):
        def __init__(self, stream: str):
            Parser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self.aliases = self.depth = self.nodes = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            assert event is not None and event.start_mark is not None  # a node's event, which always has a mark
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise _Refused(line, f"it uses more than {MAX_ALIASES} aliases (*name); write the values out")
            else:
                self.nodes += 1
                if self.nodes > MAX_NODES:
                    raise _Refused(line, f"it holds more than {MAX_NODES} values; is it a cluster description?")
            self.depth += 1
            try:
                if self.depth > MAX_NESTING:
                    raise _Refused(line, f"it nests deeper than {MAX_NESTING} levels; a description nests 4")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedSafeLoader


def _check_yaml_nodes(root: Any) -> None:
    """The composed YAML, before anything is built from it: each mapping's keys strings, each given once (PyYAML
    would keep the last silently), and the document no deeper or larger than the limits once aliases are
    expanded (an alias bomb is small as written). A merge key (<<: *defaults) is YAML's own, not a duplicate."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (levels, values) with aliases expanded
    open_nodes: set[int] = set()

    def measure(node: Any, depth: int) -> tuple[int, int]:
        line = node.start_mark.line + 1
        if id(node) in open_nodes:
            raise _Refused(line, "an alias refers to a value that holds it (a recursive anchor); write it out")
        if id(node) not in measured:
            open_nodes.add(id(node))
            children: list[Any] = []
            if isinstance(node, yaml.MappingNode):
                _check_keys(node)
                children = [n for pair in node.value for n in pair]
            elif isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            levels, values = 1, 1
            for child in children:
                if depth + 1 > MAX_NESTING:
                    raise _Refused(line, f"with its aliases expanded it nests deeper than {MAX_NESTING} levels")
                child_levels, child_values = measure(child, depth + 1)
                levels, values = max(levels, child_levels + 1), values + child_values
            open_nodes.discard(id(node))
            measured[id(node)] = (levels, values)
        levels, values = measured[id(node)]
        if depth + levels - 1 > MAX_NESTING:
            raise _Refused(line, f"with its aliases expanded it nests deeper than {MAX_NESTING} levels")
        if values > MAX_NODES:
            raise _Refused(line, f"with its aliases expanded it holds {values} values, more than {MAX_NODES} "
                                 f"(an alias bomb?); write the values out")
        return measured[id(node)]

    measure(root, 1)


def _check_keys(node: Any) -> None:
    first: dict[str, int] = {}
    for key, _ in node.value:
        line = key.start_mark.line + 1
        if key.tag == _YAML_MERGE:
            continue
        if not isinstance(key, yaml.ScalarNode) or key.tag != _YAML_STR:
            written = f"the key {shown(key.value, quoted=False)}" if isinstance(key, yaml.ScalarNode) \
                else f"a {key.id} as a key"
            raise _Refused(line, f"{written} is not a name; keys are names like hosts or host (quote it if it is "
                                 f"meant as one)")
        if key.value in first:
            raise _Refused(line, f"the key {shown(key.value)} is given twice (first at line {first[key.value]}); "
                                 f"YAML would keep only the last: give each key once")
        first[key.value] = line


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _Refused(0, f"the key {shown(key)} is given twice in one object; JSON readers keep only the "
                              f"last: give each key once")
        data[key] = value
    return data


def _levels(data: Any, limit: int) -> int:
    """How many levels ``data`` has (a plain value: 1, as _check_yaml_nodes counts), counted no further than
    ``limit`` + 1."""
    if not isinstance(data, (list, dict)) or limit <= 0:
        return 1
    children = data.values() if isinstance(data, dict) else data
    return 1 + max((_levels(child, limit - 1) for child in children), default=0)


def read_description(path: str) -> Any:
    """A cluster description file as data, unvalidated: YAML when named .yaml/.yml (PyYAML's safe loader, bounded:
    see _bounded_loader), else JSON; a regular file of at most MAX_DESCRIPTION_BYTES (a device or a FIFO would
    never end or never start), with every key once. Anything else is one UserError."""
    raw = read_regular(path, "a cluster description", MAX_DESCRIPTION_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not text (UTF-8)") from None
    if not text.strip():
        raise UserError(f"{path} is empty; describe the cluster's hosts in it "
                        f"(see docs/reference/hosts-json.md)")
    try:
        if path.lower().endswith(YAML_SUFFIXES):
            return _load_yaml(text, path)
        try:
            data = json.loads(text, object_pairs_hook=_json_object)
        except RecursionError:
            raise _Refused(0, f"it nests deeper than {MAX_NESTING} levels; a description nests 4") from None
        except ValueError as exc:
            raise UserError(f"{path} is not valid JSON: {exc}") from None
        if _levels(data, MAX_NESTING) > MAX_NESTING:
            raise _Refused(0, f"it nests deeper than {MAX_NESTING} levels; a description nests 4")
        return data
    except _Refused as exc:
        raise UserError(f"{path}{f': line {exc.line}' if exc.line else ''}: {exc}") from None


def _load_yaml(text: str, path: str) -> Any:
    loader = _bounded_loader()(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_yaml_nodes(root)
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise UserError(f"{path} is not valid YAML{at}: {problem}") from None
    finally:
        loader.dispose()


def load(path: str, environ: Mapping[str, str] | None = None) -> ClusterConfig:
    return parse(read_description(path), source=path, environ=environ)
