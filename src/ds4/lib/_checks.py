"""Argument checks of the library faces: a bad value is a Ds4Error naming it, never a
clamp, a hang or a failure deep inside the engine (docs/library.md)."""

from __future__ import annotations

from ds4.domain.errors import Ds4Error


def int_in(name: str, value: object, low: int, high: int) -> int:
    """`value` as an int in low..high (bool refused: True is not a count)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise Ds4Error(f"{name} must be an integer, not {type(value).__name__}")
    if not low <= value <= high:
        raise Ds4Error(f"{name} {value} is out of range ({low}..{high})")
    return value
