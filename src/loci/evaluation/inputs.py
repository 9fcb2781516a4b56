"""What an evaluation is asked: context windows and points of a session, read from
comma-separated text (``loci eval``'s options, the REST route's query) and checked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from loci import ValidationError

#: A window under this holds the fixed layers and hardly any history: nothing to measure.
MIN_WINDOW = 1000
Number = TypeVar("Number", int, float)


def numbers(text: str, kind: Callable[[str], Number], name: str) -> list[Number]:
    """``"16000,32000"`` as ``[16000, 32000]``; a ``ValidationError`` naming ``name``
    for anything else."""
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValidationError(f"{name}: expected comma-separated numbers, got {text!r}"
                              ) from None
    if not values:
        raise ValidationError(f"{name}: give at least one")
    return values


def checked(windows: Sequence[int], cuts: Sequence[float]) -> tuple[list[int], list[float]]:
    """The windows and the points in order, each once; a ``ValidationError`` for none,
    a window under ``MIN_WINDOW`` tokens or a point outside (0, 1]."""
    if not windows or not cuts:
        raise ValidationError("give at least one window and one point")
    if any(w < MIN_WINDOW for w in windows):
        raise ValidationError(f"a window is at least {MIN_WINDOW} tokens")
    if any(not 0 < c <= 1 for c in cuts):  # NaN too
        raise ValidationError("points are fractions in (0, 1] of the session's messages")
    return sorted(set(windows)), sorted(set(cuts))
