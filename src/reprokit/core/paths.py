"""Where things are in this repository (the core is used from its checkout, as CK uses the entries), and the one
check that a path about to be written fits its filesystem: name length and free space."""
from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reprokit.core.errors import UserError
from reprokit.core.values import shown

SRC_DIR = Path(__file__).resolve().parents[2]  # put on PYTHONPATH of child interpreters that import reprokit
REPO_ROOT = SRC_DIR.parent
PROGRAM_DIR = REPO_ROOT / "program" / "p3"  # what runs inside the engine's interpreter

MB = 1024 * 1024
_FULL = (errno.ENOSPC, errno.EDQUOT)


def _existing_folder(path: Path) -> Path:
    """The nearest folder of ``path`` (itself included) that exists: where its filesystem can be asked."""
    for candidate in (path, *path.parents):
        if os.path.isdir(candidate):  # False, not an error, for a name too long to look up
            return candidate
    return Path("/")


def check_room(path: str | os.PathLike[str], need_bytes: int, what: str) -> None:
    """Before ``what`` writes ``path`` (a file or a folder, made with its parents if missing): every name in it
    fits its filesystem, and that filesystem has ``need_bytes`` free. Raises a UserError naming the fix."""
    path = Path(os.path.abspath(path))
    folder = _existing_folder(path)
    name_max = os.pathconf(folder, "PC_NAME_MAX")
    path_max = os.pathconf(folder, "PC_PATH_MAX")
    for name in path.relative_to(folder).parts:
        if len(os.fsencode(name)) > name_max:
            raise UserError(f"{what}: the name {shown(Path(name))} in {shown(folder)} is {len(os.fsencode(name))} bytes long, "
                            f"more than the {name_max} its filesystem allows; shorten the name")
    if len(os.fsencode(str(path))) >= path_max:
        raise UserError(f"{what}: the path {shown(path)} is {len(os.fsencode(str(path)))} bytes long, more "
                        f"than the {path_max - 1} its filesystem allows; shorten the name")
    free = shutil.disk_usage(folder).free
    if free < need_bytes:
        raise UserError(f"{what}: only {free / MB:.1f} MB free on {shown(folder)}, {need_bytes / MB:.1f} MB needed for "
                        f"{shown(path)}; free space on {shown(folder)}, or write elsewhere")


def disk_error(exc: OSError, what: str, where: str | os.PathLike[str] = "") -> UserError | None:
    """The one line for an OSError a full filesystem or an overlong name raised while ``what`` wrote (``where``
    when the error does not say); None for any other OSError."""
    path = str(exc.filename or where or "?")
    if exc.errno in _FULL:
        folder = _existing_folder(Path(os.path.abspath(path)).parent)
        return UserError(f"{what}: no space left writing {shown(Path(path))}; free space on {shown(folder)} and try again")
    if exc.errno == errno.ENAMETOOLONG:
        return UserError(f"{what}: the name {shown(Path(path))} is too long for its filesystem; shorten the name")
    return None


@contextmanager
def disk_errors(what: str, where: str | os.PathLike[str] = "") -> Iterator[None]:
    """Inside: a full filesystem or an overlong name ends as one UserError line (see ``disk_error``)."""
    try:
        yield
    except OSError as exc:
        error = disk_error(exc, what, where)
        if error is None:
            raise
        raise error from None
