"""The stock MXNet engine: where an installation's interpreter is, and which version it is.

An engine lives in its own prefix (a virtual environment holding mxnet and its
pinned numpy), never in the framework's environment.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from reprokit.core.errors import UserError

MXNET_LIBRARY = "libmxnet.so"  # the file CK's soft detection looks for
VERSION_TIMEOUT_S = 60


def prefix_of(library: str | Path) -> Path:
    """The prefix holding ``.../lib/pythonX.Y/site-packages/mxnet/libmxnet.so``."""
    path = Path(library).resolve()
    for parent in path.parents:
        if (parent / "bin" / "python").exists() and (parent / "lib").is_dir():
            return parent
    raise UserError(f"{library} is not inside a Python prefix with bin/python; "
                    f"point detection at the prefix that holds MXNet")


def interpreter_of(prefix: Path) -> Path:
    return prefix / "bin" / "python"


def version_of(python: str | Path) -> str:
    """Ask the engine's own interpreter which MXNet it imports."""
    try:
        out = subprocess.run([str(python), "-c", "import mxnet; print(mxnet.__version__)"],
                             capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot run {python} to read the MXNet version: {exc}") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{python} cannot import mxnet: {last}")
    return out.stdout.strip().splitlines()[-1]


def sockeye_version_in(init_file: Path) -> str:
    """Sockeye's version from its ``sockeye/__init__.py`` (``__version__ = '1.18.106'``), without importing it."""
    try:
        match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", init_file.read_text(), re.MULTILINE)
    except OSError as exc:
        raise UserError(f"cannot read {init_file}: {exc}") from None
    if not match:
        raise UserError(f"{init_file} does not state Sockeye's __version__")
    return match.group(1)


def sockeye_in_engine(python: str | Path) -> str:
    """The Sockeye version the engine's interpreter imports; a UserError naming the install command if none."""
    try:
        out = subprocess.run([str(python), "-c", "import sockeye; print(sockeye.__version__)"],
                             capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot run {python} to look for Sockeye: {exc}") from None
    if out.returncode != 0:
        raise UserError(f"Sockeye is not installed for the MXNet engine {python}; "
                        f"install it with: ck install package:lib-sockeye --quiet")
    return out.stdout.strip().splitlines()[-1]
