"""The one way we read a file that a user or another evaluator gives us: a regular file, of a bounded size.

A device (/dev/zero, /dev/urandom) never ends and would fill memory; a FIFO blocks its reader until someone
writes; a folder is no document. Each is refused in one line before it is read, and so is a file over the
limit its kind of document has (a cluster description, a record, a key), naming its size and that limit.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from reprokit.core.errors import UserError
from reprokit.core.values import shown

_KINDS = (  # what a path is when it is not a regular file
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def size_text(n: int) -> str:
    """A byte count as a limit is stated: 1 MiB, 64 KiB, 300 bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def _refuse_unless_regular(mode: int, path: Path, what: str) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise UserError(f"{shown(path)} is {kind}, not a regular file; {what} must be a regular file")


def read_regular(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes; otherwise one UserError
    naming the file and what it should be (``what``: "a cluster description", read as "WHAT is at most ...")."""
    path = Path(path).expanduser()
    try:
        _refuse_unless_regular(os.stat(path).st_mode, path, what)  # before opening: opening a device may act
        # O_NONBLOCK: should it become a FIFO after the check, the open returns at once instead of waiting
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            _refuse_unless_regular(os.fstat(handle.fileno()).st_mode, path, what)  # what was opened
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise UserError(f"{shown(path)} does not exist; {what} was expected there") from None
    except OSError as exc:
        raise UserError(f"cannot read {shown(path)} ({what}): {exc.strerror or exc}") from None
    if len(data) > limit:
        size = max(len(data), _size(path))
        raise UserError(f"{shown(path)} is {size} bytes; {what} is at most {size_text(limit)}")
    return data


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
