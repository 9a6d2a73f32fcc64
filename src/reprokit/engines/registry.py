"""The engines by name: ``@register_engine(kind)`` on an engine's class, ``get_engine(kind)``, ``engines()``.

Adding an engine is one module holding its class under ``@register_engine``,
plus that module's name in ENGINE_MODULES (imported the first time an engine is
asked for, as ReFrame's scheduler backends are).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TypeVar

from reprokit.engines.base import Engine, EngineKind

ENGINE_MODULES = (
    "reprokit.engines.stock",  # stock MXNet 1.9.1, with its P3
    "reprokit.engines.artifact.engine",  # the authors' P3 fork and their baseline build
)
_ENGINES: dict[EngineKind, Engine] = {}
E = TypeVar("E", bound=Engine)


def register_engine(kind: EngineKind | str) -> Callable[[type[E]], type[E]]:
    """Class decorator: registers one instance of the engine class under ``kind``."""
    engine_kind = EngineKind(kind)

    def register(cls: type[E]) -> type[E]:
        if engine_kind in _ENGINES:
            raise ValueError(f"an engine is already registered as {engine_kind.value!r}")
        cls.kind = engine_kind
        _ENGINES[engine_kind] = cls()
        return cls

    return register


def _load() -> None:
    for module in ENGINE_MODULES:
        importlib.import_module(module)


def get_engine(kind: EngineKind | str) -> Engine:
    """The engine registered as ``kind`` (stock, p3, baseline)."""
    _load()
    try:
        return _ENGINES[EngineKind(kind)]
    except (KeyError, ValueError):
        raise KeyError(f"no engine is registered as {str(kind)!r}; registered: "
                       f"{', '.join(k.value for k in _ENGINES)}") from None


def engines() -> list[Engine]:
    """Every registered engine, in EngineKind's order (stock, then the authors' P3 fork and baseline build)."""
    _load()
    return [_ENGINES[kind] for kind in EngineKind if kind in _ENGINES]


def engines_on(side: str = "") -> list[Engine]:
    """The engines one value of the ENGINE knob chooses (embedded, artifact), in registration order; all for ""."""
    return [e for e in engines() if not side or e.side == side]


def engine_switches() -> tuple[str, ...]:
    """Every registered engine's switches (``Engine.switches``), each once: what no role inherits from a shell."""
    return tuple(dict.fromkeys(name for engine in engines() for name in engine.switches))


def builds(side: str) -> tuple[str, ...]:
    """The stored kinds of the engines on one side of the ENGINE knob (artifact: p3, baseline)."""
    return tuple(e.kind.value for e in engines() if e.side == side)
