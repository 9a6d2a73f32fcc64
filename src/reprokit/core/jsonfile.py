"""JSON documents on disk: written atomically, read with one-line errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reprokit.core.errors import UserError
from reprokit.core.files import read_regular
from reprokit.core.outputs import replace_file
from reprokit.core.values import shown

MAX_JSON_BYTES = 32 << 20  # a document of ours (the largest: an imported bundle's description, its manifest in it)


def write_json(path: Path, data: object) -> None:
    """Write JSON atomically: readers see the old file or the new one, never half of one."""
    replace_file(Path(path), json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path, what: str, limit: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """A JSON object from ``path``, a regular file of at most ``limit`` bytes (files.read_regular); anything else
    is a UserError naming ``what`` ("a run record") and the file."""
    path = Path(path)
    raw = read_regular(path, what, limit)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise UserError(f"cannot read {what} {shown(path)}: {type(exc).__name__}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{what} {shown(path)} is not a JSON object")
    return data
