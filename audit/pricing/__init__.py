"""Models of the options' savings on the measured data (METHOD §7), one module per model.

Every model is pure: the measured figures in, a :class:`Modelled` out (the saving over the window
as low / expected / high, the inputs it used with their sources, and how the bands were formed), or
None where its evidence is missing (the rank stage then prices the catalogue's fraction, *assumed*).
No model imports a stage; the rank stage (:mod:`audit.rank`) calls them.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Mapping

#: (name, value as text, source) of one measured figure a model used
Input = tuple[str, str, str]
BANDS = ("low", "expected", "high")


@dataclass(frozen=True)
class Modelled:
    """A model's saving over the window (money, not yet per month) and what it stood on."""

    saving: Mapping[str, Decimal]          # low / expected / high over the window
    inputs: tuple[Input, ...]
    bands: str                             # how low and high were formed, in words
    commitment_end: datetime | None = None  # where the saving starts at a commitment's end
    #: service -> low / expected / high over the window, where the model replays per service (right-size)
    by_service: Mapping[str, Mapping[str, Decimal]] | None = None


def ordered(low: Decimal, expected: Decimal, high: Decimal) -> dict[str, Decimal]:
    """Bands with low <= expected <= high (a model's variations need not move the saving one way)."""
    return {"low": min(low, expected), "expected": expected, "high": max(high, expected)}
