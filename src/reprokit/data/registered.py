"""Choosing among registered data (CK env entries, as plain values): the DATA mode and a pinned entry."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from reprokit.errors import UserError
from reprokit.values import shown

T = TypeVar("T")


@dataclass(frozen=True)
class EnvEntry:
    """A CK env entry, reduced to what the choice needs."""
    uid: str
    alias: str
    variables: dict
    customize: dict = field(default_factory=dict)  # what the soft setup recorded (version, ...)


def data_mode(mode: str, pinned: str, valid: tuple[str, ...], workload: str) -> str:
    """--env.DATA checked against the workload's modes (auto when empty); synthetic and a pin exclude each other."""
    mode = mode.strip() or "auto"
    if mode not in valid:
        raise UserError(f"unknown DATA {shown(mode)} for {workload}; valid ones: {', '.join(valid)}")
    if mode == "synthetic" and pinned:
        raise UserError(f"DATA=synthetic reads no dataset, but DATASET_ENV={pinned} pins one; drop one of them")
    return mode


def pinned_entries(entries: list[EnvEntry], pinned: str, key: str, tags: str) -> list[EnvEntry]:
    if not pinned:
        return entries
    found = [e for e in entries if pinned in (e.uid, e.alias)]
    if not found:
        raise UserError(f"{key}={pinned} is not a registered env entry with tags {tags}; list them with: "
                        f"ck show env --tags={tags}")
    return found


def best_or_explain(usable: list[tuple[object, T]], pinned: str, gone: str, required: bool, missing: str) -> T | None:
    """The best-ranked usable entry; else one line saying why none fits (a pinned one is gone, a required one is
    missing), or None (generated data) when nothing was asked for."""
    if usable:
        return max(usable, key=lambda pair: pair[0])[1]
    if pinned:
        raise UserError(gone)
    if required:
        raise UserError(missing)
    return None
