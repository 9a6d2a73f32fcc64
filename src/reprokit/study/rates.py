"""Bandwidths as tc rates (``100mbit``, ``4gbit``) and ``native``: links whose capacity is not known."""
from __future__ import annotations

import re

from reprokit.errors import UserError
from reprokit.values import shown

RATE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$")
_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
NATIVE = "native"  # a configuration whose links were not shaped and whose capacity is not known


def rate_bps(rate: str) -> float | None:
    """Bits per second of a tc rate like ``4gbit``; None for ``native``."""
    if rate == NATIVE:
        return None
    match = RATE.match(rate)
    if not match:
        raise UserError(f"bandwidth {shown(rate)} is not a rate like 100mbit, 1gbit or 4gbit (or 'native')")
    return float(match.group(1)) * _UNITS[match.group(2)]


def shaped_bps(rate: str) -> float:
    """Bits per second of a tc rate where only a rate makes sense (a shaped link, a link capacity): ``native``
    has no number and is refused."""
    bps = rate_bps(rate)
    if bps is None:
        raise UserError(f"bandwidth {shown(rate)} has no rate here; give one like 100mbit, 1gbit or 4gbit")
    return bps


def same_rate(a: str | None, b: str | None) -> bool:
    if a is None or b is None or NATIVE in (a, b):
        return a == b
    return rate_bps(a) == rate_bps(b)
