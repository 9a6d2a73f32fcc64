"""What a run ships into each role's working folder, and under which name there.

Most shipped files land flat, under their own name: program/p3's scripts, a run's compute profile. The code the
engine's interpreter and the framework both import, the package ``reprokit.wire``, keeps its path under src
(``reprokit/__init__.py``, ``reprokit/wire/p3_timeline.py``), so beside the scripts it is a package the engine's
interpreter imports under the framework's own name: no copy of a format, and nothing loaded by path.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from reprokit.core.paths import SRC_DIR

WIRE_DIR = SRC_DIR / "reprokit" / "wire"  # standard library only: see its __init__.py


def wire_files() -> list[Path]:
    """The package ``reprokit.wire`` as the engine's interpreter needs it: its modules and ``reprokit/__init__.py``
    (which imports nothing), so that ``import reprokit.wire.p3_timeline`` works beside the scripts."""
    return [SRC_DIR / "reprokit" / "__init__.py", *sorted(WIRE_DIR.glob("*.py"))]


def shipped_name(local: str | os.PathLike[str]) -> str:
    """``local``'s name in a role's working folder: its path under src for a module of reprokit
    (``reprokit/wire/role_van.py``), its own name for any other file."""
    path = Path(os.path.abspath(local))
    return path.relative_to(SRC_DIR).as_posix() if path.is_relative_to(SRC_DIR) else path.name


def stage(files: Iterable[str | os.PathLike[str]], folder: Path) -> None:
    """Copy ``files`` into ``folder`` under their shipped names (making the package's folders); a file already in
    its place is left as it is."""
    for local in files:
        target = folder / shipped_name(local)
        if Path(local).resolve() != target.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(local, target)
