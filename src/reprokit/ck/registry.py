"""Look-ups in CK's registry (env entries, machines) that return typed, plain values."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reprokit.ck.errors import access
from reprokit.core.errors import UserError
from reprokit.core.values import shown
from reprokit.data.registered import EnvEntry
from reprokit.engines.base import ARTIFACT, InstalledEngine, engines_on
from reprokit.engines.choice import select_engine
from reprokit.run.settings import IMAGE_SCRIPT, RunSettings


def env_entries(tags: str) -> list[EnvEntry]:
    """Every env entry with ``tags``, as uid, alias and its variables."""
    r = access({"action": "search", "module_uoa": "env", "tags": tags, "add_meta": "yes"})
    if r["return"] > 0:
        raise UserError(f"cannot search CK's env entries: {r['error']}")
    return [EnvEntry(uid=e["data_uid"], alias=e.get("data_uoa", ""), variables=e.get("meta", {}).get("env", {}),
                     customize=e.get("meta", {}).get("customize", {})) for e in r["lst"]]


def installed_engines(side: str = "") -> list[tuple[EnvEntry, InstalledEngine | None]]:
    """Every env entry of a registered engine (of one side of the ENGINE knob, or all), with the usable install it
    registers (None: its install was removed); each engine's tags are searched once, in the engines' order."""
    found: list[tuple[EnvEntry, InstalledEngine | None]] = []
    wanted = engines_on(side)
    for tags in dict.fromkeys(e.env_tags for e in wanted):
        readers = [e for e in wanted if e.env_tags == tags]
        for entry in env_entries(tags):
            found.append((entry, next((i for i in (r.installed_from_env(entry) for r in readers) if i is not None),
                                      None)))
    return found


def find_engine(variant: str, engine: str = "", pinned: str = "") -> InstalledEngine:
    """The engine for ``variant`` (see engines.choice.select_engine); ``pinned`` is an env UID or alias."""
    entries = installed_engines()
    pinned = next((e.uid for e, _ in entries if pinned and pinned == e.alias), pinned)
    return select_engine([c for _, c in entries if c is not None], variant, engine, pinned)


def engine_for_run(settings: RunSettings, engine: str = "", pinned: str = "") -> InstalledEngine:
    """The engine a run of ``settings`` gets on the ENGINE knob's ``engine`` (find_engine), checked for what the run
    needs of it (its for_run: ByteScheduler for its variant, Sockeye): a UserError naming what is missing."""
    choice = find_engine(settings.variant, engine, pinned)
    # An emulated Sockeye run builds no Sockeye (train.py waits its profile): the engine is checked as for images.
    return choice.engine.for_run(choice, settings.script == IMAGE_SCRIPT, settings.variant)


def engine_check() -> Callable[[RunSettings, str], None]:
    """engine_for_run for a sweep's runs before the first one (study.sweep.options.check_runs): each variant,
    engine and kind of model checked once."""
    checked: set[tuple[str, str, bool]] = set()

    def check(settings: RunSettings, engine: str) -> None:
        key = (settings.variant.value, engine, settings.script == IMAGE_SCRIPT)
        if key not in checked:
            engine_for_run(settings, engine)
            checked.add(key)
    return check


def artifact_builds() -> set[str]:
    """The authors' builds registered and usable (p3, baseline)."""
    return {c.build.value for _, c in installed_engines(ARTIFACT) if c is not None}


def machine_cluster_data(name: str) -> Any:
    """The hosts.json data a cluster machine entry was registered with."""
    r = access({"action": "load", "module_uoa": "machine", "data_uoa": name})
    if r["return"] > 0:
        raise UserError(f"there is no machine entry {shown(name)}; register it with: "
                        f"ck add machine:{shown(name, quoted=False)} --type=cluster --config_file=hosts.json --quiet")
    data = r["dict"].get("device_cfg", {}).get("remote_params", {}).get("cluster_config")
    if data is None:
        raise UserError(f"machine:{name} is not a cluster; register one with --type=cluster --config_file=hosts.json")
    return data
