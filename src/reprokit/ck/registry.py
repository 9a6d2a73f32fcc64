"""Look-ups in CK's registry (env entries, machines) that return typed, plain values."""
from __future__ import annotations

import os
from typing import Any

from reprokit.ck.errors import access
from reprokit.data.registered import EnvEntry
from reprokit.engines.artifact import ENV_PREFIX as ARTIFACT_ENV
from reprokit.engines.choice import (ARTIFACT_BUILDS, ARTIFACT_TAGS, STOCK_TAGS, EngineChoice, artifact_engine_name,
                                     select_engine)
from reprokit.errors import UserError
from reprokit.values import shown


def env_entries(tags: str) -> list[EnvEntry]:
    """Every env entry with ``tags``, as uid, alias and its variables."""
    r = access({"action": "search", "module_uoa": "env", "tags": tags, "add_meta": "yes"})
    if r["return"] > 0:
        raise UserError(f"cannot search CK's env entries: {r['error']}")
    return [EnvEntry(uid=e["data_uid"], alias=e.get("data_uoa", ""), variables=e.get("meta", {}).get("env", {}),
                     customize=e.get("meta", {}).get("customize", {})) for e in r["lst"]]


def _stock_engine(entry: EnvEntry) -> EngineChoice | None:
    python = entry.variables.get("CK_ENV_LIB_MXNET_PYTHON", "")
    if not (python and os.path.exists(python)):
        return None  # an entry whose install was removed
    version = entry.customize.get("version", "")
    return EngineChoice(env_uid=entry.uid, build="stock", name=f"mxnet-{version}-cpu", python=python,
                        rank=tuple(int(x) for x in version.split(".") if x.isdigit()))


def _artifact_engine(entry: EnvEntry) -> EngineChoice | None:
    v = entry.variables
    python, tree, build = v.get(f"{ARTIFACT_ENV}_PYTHON", ""), v.get(ARTIFACT_ENV, ""), v.get(f"{ARTIFACT_ENV}_BUILD", "")
    if not (python and os.path.exists(python) and tree and os.path.isdir(tree)) or build not in ARTIFACT_BUILDS:
        return None  # an entry whose install was removed
    return EngineChoice(env_uid=entry.uid, build=build, name=artifact_engine_name(build, v.get(f"{ARTIFACT_ENV}_COMMIT", "")),
                        python=python, rank=(v.get(f"{ARTIFACT_ENV}_INSTALLED_AT", ""),), tree=tree,
                        cuda=v.get(f"{ARTIFACT_ENV}_CUDA") == "1")


def find_engine(variant: str, engine: str = "", pinned: str = "") -> EngineChoice:
    """The engine for ``variant`` (see engines.choice.select_engine); ``pinned`` is an env UID or alias."""
    entries = [(e, _stock_engine(e)) for e in env_entries(STOCK_TAGS)]
    entries += [(e, _artifact_engine(e)) for e in env_entries(ARTIFACT_TAGS)]
    pinned = next((e.uid for e, _ in entries if pinned and pinned == e.alias), pinned)
    return select_engine([c for _, c in entries if c is not None], variant, engine, pinned)


def artifact_builds() -> set[str]:
    """The authors' builds registered and usable (p3, baseline)."""
    return {c.build for c in (_artifact_engine(e) for e in env_entries(ARTIFACT_TAGS)) if c is not None}


def machine_cluster_data(name: str) -> Any:
    """The hosts.json data a cluster machine entry was registered with."""
    r = access({"action": "load", "module_uoa": "machine", "data_uoa": name})
    if r["return"] > 0:
        raise UserError(f"there is no machine entry {shown(name)}; register it with: "
                        f"ck add machine:{name} --type=cluster --config_file=hosts.json --quiet")
    data = r["dict"].get("device_cfg", {}).get("remote_params", {}).get("cluster_config")
    if data is None:
        raise UserError(f"machine:{name} is not a cluster; register one with --type=cluster --config_file=hosts.json")
    return data
