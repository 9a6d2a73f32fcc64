"""The one validation idiom for documents users and other evaluators give us: a small schema language.

A document is checked against a spec before any typed value is built from it:
every key known and of its type, numbers finite and in range, identifiers plain
names (never a path), text without control characters, sizes bounded. The first
problem is raised as ``Invalid``, naming where it is (``config.model``) and what
was expected, in one line. Each spec sits beside its type: a study's records and
bundles (store.RECORD_SCHEMA, bundle.MANIFEST_SCHEMA), the study entry
(claims.STUDY_SCHEMA); host names here (HOST_NAME, the one rule, which
cluster/hosts.py applies to hosts.json too).

Why not a JSON Schema library: the checks we need (plain names, rates, finite
numbers, sizes) are a few lines each, and a record must be refused with a
message a user can act on.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from reprokit.core.values import shown  # a value as a message quotes it: repr, clipped

PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# Host names, ssh_config aliases and IPv4 addresses, as hosts.json and allocations give them (the one rule).
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")
HEX = re.compile(r"[0-9a-f]+\Z")
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # tab, newline, CR are text; terminal escapes, NUL are not


class Invalid(ValueError):
    """A document does not fit its spec: ``where`` (a dotted path) and ``problem`` (what was expected)."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where or 'it'} {problem}")
        self.where, self.problem = where, problem


def _at(where: str, key: object) -> str:
    return f"{where}.{key}" if where else str(key)


class Spec:
    def check(self, value: Any, where: str) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Name(Spec):
    """An identifier that can never be a path: letters, digits, '.', '_', '-', starting with a letter or digit."""
    max_len: int = 128
    allow_empty: bool = False

    def check(self, value: Any, where: str) -> None:
        if value == "" and self.allow_empty:
            return
        if not isinstance(value, str) or len(value) > self.max_len or not PLAIN_NAME.match(value):
            raise Invalid(where, f"must be a plain name (letters, digits, '.', '_', '-'; at most {self.max_len}), "
                                 f"got {shown(value)}")


@dataclass(frozen=True)
class Host(Spec):
    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, str) or len(value) > 253 or not HOST_NAME.match(value):
            raise Invalid(where, f"must be a host name or address, got {shown(value)}")


@dataclass(frozen=True)
class Hex(Spec):
    length: int

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, str) or len(value) != self.length or not HEX.match(value):
            raise Invalid(where, f"must be {self.length} lowercase hex digits, got {shown(value)}")


@dataclass(frozen=True)
class Text(Spec):
    """Free text, shown escaped wherever it is rendered: bounded, no control characters but tab, newline and CR
    (a terminal escape in a record would act on the terminal of whoever prints the Markdown report)."""
    max_len: int = 4000

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, str):
            raise Invalid(where, f"must be text, got {shown(value)}")
        if len(value) > self.max_len:
            raise Invalid(where, f"is longer than {self.max_len} characters")
        if CONTROL.search(value):
            raise Invalid(where, f"holds a control character: {shown(value)}")


@dataclass(frozen=True)
class Int(Spec):
    low: int
    high: int

    def check(self, value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(where, f"must be a whole number, got {shown(value)}")
        if not self.low <= value <= self.high:
            raise Invalid(where, f"must be from {self.low} to {self.high}, got {value}")


@dataclass(frozen=True)
class Number(Spec):
    low: float
    high: float

    def check(self, value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise Invalid(where, f"must be a finite number, got {shown(value)}")
        if not self.low <= value <= self.high:
            raise Invalid(where, f"must be from {self.low:g} to {self.high:g}, got {value:g}")


@dataclass(frozen=True)
class Bool(Spec):
    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, bool):
            raise Invalid(where, f"must be true or false, got {shown(value)}")


@dataclass(frozen=True)
class OneOf(Spec):
    values: tuple[object, ...]

    def check(self, value: Any, where: str) -> None:
        if isinstance(value, bool) or value not in self.values:
            raise Invalid(where, f"must be one of {', '.join(map(str, self.values))}; got {shown(value)}")


@dataclass(frozen=True)
class Optional(Spec):
    spec: Spec

    def check(self, value: Any, where: str) -> None:
        if value is not None:
            self.spec.check(value, where)


@dataclass(frozen=True)
class Where(Spec):
    """``spec``, then ``test(value)`` (True when fine); ``expected`` says what a failing value should be."""
    spec: Spec
    test: Callable[[Any], bool]
    expected: str

    def check(self, value: Any, where: str) -> None:
        self.spec.check(value, where)
        if not self.test(value):
            raise Invalid(where, f"must be {self.expected}, got {shown(value)}")


@dataclass(frozen=True)
class ListOf(Spec):
    item: Spec
    max_items: int = 1000
    min_items: int = 0

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise Invalid(where, f"must be a list, got {shown(value)}")
        if not self.min_items <= len(value) <= self.max_items:
            raise Invalid(where, f"must hold {self.min_items} to {self.max_items} items, holds {len(value)}")
        for i, item in enumerate(value):
            self.item.check(item, f"{where}[{i}]")


@dataclass(frozen=True)
class Json(Spec):
    """Any JSON value, bounded: depth, items per container, text length (text as Text: no control characters)."""
    depth: int = 6
    max_items: int = 10000
    max_text: int = 100_000

    def check(self, value: Any, where: str, _depth: int = 0) -> None:
        if value is None or isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise Invalid(where, f"must be a finite number, got {shown(value)}")
            return
        if isinstance(value, str):
            Text(self.max_text).check(value, where)
            return
        if not isinstance(value, (list, dict)):
            raise Invalid(where, f"is not JSON: {shown(value)}")
        if _depth >= self.depth:
            raise Invalid(where, f"is nested deeper than {self.depth} levels")
        if len(value) > self.max_items:
            raise Invalid(where, f"holds more than {self.max_items} items")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(value, dict):
                Text(200).check(key, f"{where} key")
            self.check(item, f"{where}[{key}]" if isinstance(value, list) else _at(where, key), _depth + 1)


@dataclass(frozen=True)
class Obj(Spec):
    """A JSON object: ``required`` and ``optional`` keys with their specs; other keys are refused, or checked
    against ``extra`` when given."""
    required: Mapping[str, Spec] = field(default_factory=dict)
    optional: Mapping[str, Spec] = field(default_factory=dict)
    extra: Spec | None = None
    max_extra: int = 1000

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise Invalid(where, f"must be an object, got {shown(value)}")
        for key, spec in self.required.items():
            if key not in value:
                raise Invalid(where, f"has no {key!r}")
            spec.check(value[key], _at(where, key))
        unknown = [k for k in value if k not in self.required and k not in self.optional]
        for key, spec in self.optional.items():
            if key in value:
                spec.check(value[key], _at(where, key))
        if unknown and self.extra is None:
            listed = sorted(unknown, key=repr)  # by repr: keys of other types (a number) do not sort with names
            more = f" and {len(listed) - 3} more" if len(listed) > 3 else ""
            raise Invalid(where, f"has unknown key(s) {', '.join(map(shown, listed[:3]))}{more}; known: "
                                 f"{', '.join([*self.required, *self.optional])}")
        if len(unknown) > self.max_extra:
            raise Invalid(where, f"holds more than {self.max_extra} extra keys")
        for key in unknown:
            Text(200).check(key, f"{where} key")
            if self.extra is not None:  # always: unknown keys without it were refused above
                self.extra.check(value[key], _at(where, key))


@dataclass(frozen=True)
class MapOf(Spec):
    """A JSON object whose keys all fit ``key`` and whose values all fit ``value``."""
    key: Spec
    value: Spec
    max_items: int = 100_000

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise Invalid(where, f"must be an object, got {shown(value)}")
        if len(value) > self.max_items:
            raise Invalid(where, f"holds more than {self.max_items} entries")
        for key, item in value.items():
            self.key.check(key, f"{where} key {shown(key)}")
            self.value.check(item, _at(where, key))


def fields_of(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The items of ``data`` that are fields of dataclass ``cls``: a document written by another version of ours
    keeps what both know (the one ``from_dict`` filter)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
