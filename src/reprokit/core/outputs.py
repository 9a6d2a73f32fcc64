"""Files we write where a user pointed us: the destination checked before any work, and every file created afresh
or replaced atomically, so that nothing is ever written through a link someone planted there; and a figure's text
kept literal."""
from __future__ import annotations

import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from reprokit.core.errors import UserError
from reprokit.core.values import shown


def output_folder(raw: str | os.PathLike[str], option: str) -> Path:
    """The folder ``option`` names, made if missing and checked writable, before any work; a UserError naming the
    option otherwise (a file, a device, a read-only or full place)."""
    path = Path(raw).expanduser()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UserError(f"{option}={shown(Path(raw))}: cannot use it ({exc.strerror}); give a folder you can write") from None
    if mode is not None and not stat.S_ISDIR(mode):
        kind = "a file" if stat.S_ISREG(mode) else "a device or special file"
        raise UserError(f"{option}={shown(Path(raw))} is {kind}, not a folder; give a folder (it is made if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{option}={shown(Path(raw))}: cannot write there ({exc.strerror}); give a folder you can "
                        f"write") from None
    return path.resolve()


def output_file(raw: str | os.PathLike[str], option: str) -> Path:
    """A file ``option`` names, to be replaced: not a folder or device, its folder checked as output_folder."""
    path = Path(raw).expanduser()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:  # an overlong name, a loop of links: is_dir() would raise it as a traceback
        raise UserError(f"{option}={shown(Path(raw))}: cannot use it ({exc.strerror}); name a file in a folder you "
                        f"can write") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise UserError(f"{option}={shown(Path(raw))} is not a file we can write; name a new file or one to replace")
    try:
        return output_folder(path.parent, option) / path.name
    except UserError as exc:
        raise UserError(str(exc).replace(f"{option}=", f"{option}={shown(Path(raw))}: its folder ", 1).replace(
            "give a folder you can write", "name a file in a folder you can write")) from None


def replace_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` to a new file beside ``path`` (created exclusively), then rename it over ``path``: readers see
    the old file or the new one, and a link at ``path`` is replaced, never written through."""
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:60]}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_figure(fig: Any, path: Path, **options: Any) -> None:
    """A matplotlib figure into ``path`` as replace_file writes (savefig itself would follow a link)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix.lstrip(".") or "png", **options)
    replace_file(path, buffer.getvalue())


def figure_text(text: object) -> str:
    """Text for matplotlib without mathtext: a '$' from record content would be parsed as math. (Here, beside
    save_figure, because both the report's figures and the what-if model's draw it.)"""
    return str(text).replace("$", r"\$")


def create_once(path: Path, payload: bytes, mode: int = 0o644) -> bool:
    """Create ``path`` with ``payload``, complete or not at all, unless it exists: written to a new file beside it,
    synced, then hard-linked into place (a link fails on an existing name, where a rename would replace it).
    False when ``path`` existed (another process made it first)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:60]}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        Path(tmp).unlink(missing_ok=True)
