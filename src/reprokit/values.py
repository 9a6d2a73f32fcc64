"""The one validation of numbers that users type (settings, command options, package variables)."""
from __future__ import annotations

from reprokit.errors import UserError


def whole_number(raw: object, name: str, fix: str, low: int = 0, high: int | None = None) -> int:
    """``raw`` as an int in [low, high]; otherwise one line naming ``name``, the value and ``fix``."""
    text = str(raw).strip()
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"{name} must be a whole number, got {text!r}; fix it with {fix}") from None
    if value < low:
        raise UserError(f"{name} must be at least {low}, got {value}; fix it with {fix}")
    if high is not None and value > high:
        raise UserError(f"{name} must be at most {high}, got {value}; fix it with {fix}")
    return value


def decimal(raw: object, name: str, fix: str, low: float, high: float) -> float:
    """``raw`` as a float in [low, high]; otherwise one line naming ``name``, the value and ``fix``."""
    text = str(raw).strip()
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{name} must be a number from {low} to {high}, got {text!r}; fix it with {fix}") from None
    if not low <= value <= high:
        raise UserError(f"{name} must be a number from {low} to {high}, got {text!r}; fix it with {fix}")
    return value
