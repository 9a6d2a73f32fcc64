"""JSON documents on disk: written atomically, read with one-line errors."""
from __future__ import annotations

import json
import os
from pathlib import Path

from reprokit.errors import UserError


def write_json(path: Path, data: object) -> None:
    """Write JSON atomically: readers see the old file or the new one, never half of one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path, what: str) -> dict:
    """A JSON object from ``path``; anything else is a UserError naming ``what`` and the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {what} {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{what} {path} is not a JSON object")
    return data
