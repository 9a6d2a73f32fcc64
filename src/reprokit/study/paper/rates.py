"""Bandwidths as tc rates (``100mbit``, ``4gbit``) and ``native``: links whose capacity is not known."""
from __future__ import annotations

from reprokit.core.errors import UserError
from reprokit.core.values import shown, tc_rate_bps

NATIVE = "native"  # a configuration whose links were not shaped and whose capacity is not known


def rate_bps(rate: str) -> float | None:
    """Bits per second of a tc rate like ``4gbit``; None for ``native``."""
    if rate == NATIVE:
        return None
    bps = tc_rate_bps(rate)
    if bps is None:
        raise UserError(f"bandwidth {shown(rate)} is not a rate of at least 1kbit like 100mbit, 1gbit or 4gbit "
                        f"(or 'native')")
    return bps


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
