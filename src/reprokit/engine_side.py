"""Modules of program/p3 that the framework reads too (stdlib-only ones, e.g. the p3-comm line and trace format).

They ship to the engine's interpreter beside the training scripts; loading them here keeps one
implementation of each format for the writer (a worker) and the reader (result, report).
"""
from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from reprokit.core.paths import PROGRAM_DIR


def program_module(name: str) -> ModuleType:
    """program/p3/<name>.py, loaded once under a private name (it must import nothing but the standard library)."""
    key = f"reprokit._program_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, PROGRAM_DIR / f"{name}.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {PROGRAM_DIR / f'{name}.py'}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]
