"""Choosing among registered data (CK env entries, as plain values): the DATA mode and a pinned entry."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reprokit.core.errors import UserError
from reprokit.core.values import shown

T = TypeVar("T")


@dataclass(frozen=True)
class EnvEntry:
    """A CK env entry, reduced to what the choice needs."""
    uid: str
    alias: str
    variables: dict[str, Any]
    customize: dict[str, Any] = field(default_factory=dict)  # what the soft setup recorded (version, ...)


SYNTHETIC = "synthetic"


def data_mode(mode: str, pinned: str, registered: str, workload: str) -> str:
    """--env.DATA checked against the workload's modes: ``synthetic`` or its ``registered`` mode.

    Registered data is read only when the user asks for it (DATA=registered mode, or a pin with DATASET_ENV):
    a default run never depends on what else this CK holds (a small set registered for a test would break it)."""
    mode = mode.strip() or (registered if pinned else SYNTHETIC)
    valid = (SYNTHETIC, registered)
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


def best_or_explain(usable: Sequence[tuple[Any, T]], pinned: str, gone: str, missing: str) -> T:
    """The best-ranked usable entry (ranks: ints or tuples, compared with each other); else one line saying why none fits (a pinned one is gone, none is registered)."""
    if usable:
        return max(usable, key=lambda pair: pair[0])[1]
    raise UserError(gone if pinned else missing)
