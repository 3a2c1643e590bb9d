"""Exact money: Decimal with a wide context, rounded once at the end by largest remainder."""
from __future__ import annotations

import decimal
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Iterable, Mapping, Sequence

CENT = Decimal("0.01")
ZERO = Decimal(0)
CONTEXT = decimal.Context(prec=50, rounding=ROUND_HALF_EVEN)


def use_context() -> None:
    """Install the audit's Decimal context (50 significant digits)."""
    decimal.setcontext(CONTEXT)


def to_decimal(value) -> Decimal:
    """A Decimal from an int, a string or a Decimal (floats go through their repr)."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


def cents(value: Decimal) -> Decimal:
    """Round to the cent, half to even."""
    return value.quantize(CENT, rounding=ROUND_HALF_EVEN)


def dsum(values: Iterable[Decimal]) -> Decimal:
    """Sum of Decimals that starts at Decimal 0."""
    total = ZERO
    for v in values:
        total += v
    return total


def largest_remainder(amounts: Mapping[str, Decimal], target: Decimal | None = None) -> dict[str, Decimal]:
    """Round every amount to the cent so that they sum exactly to ``target`` (default: the rounded sum).

    Each amount is truncated towards minus infinity to the cent; the leftover cents go to the amounts
    with the largest remainders (ties broken by key, so the result is deterministic).
    """
    if target is None:
        target = cents(dsum(amounts.values()))
    floors = {k: v.quantize(CENT, rounding=decimal.ROUND_FLOOR) for k, v in amounts.items()}
    leftover = int(((target - dsum(floors.values())) / CENT).to_integral_value())
    order = sorted(amounts, key=lambda k: (-(amounts[k] - floors[k]), k))
    step = CENT if leftover >= 0 else -CENT
    if leftover < 0:
        order = list(reversed(order))
    for key in order[: abs(leftover)] if order else []:
        floors[key] += step
    if order and abs(leftover) > len(order):
        floors[order[0]] += step * (abs(leftover) - len(order))
    return floors


def fmt(value: Decimal | None, places: int = 2) -> str | None:
    """A decimal string with a fixed number of places (None stays None)."""
    if value is None:
        return None
    q = Decimal(1).scaleb(-places)
    context = decimal.Context(prec=max(50, value.adjusted() + places + 2))
    return plain(value.quantize(q, rounding=ROUND_HALF_EVEN, context=context))


def plain(value: Decimal) -> str:
    """A Decimal as positional text, never scientific notation (``0E-8`` is ``0.00000000``) and never
    a negative zero."""
    if value.is_zero():
        value = abs(value)
    return format(value, "f")


def share(part: Decimal, whole: Decimal, places: int = 6) -> str | None:
    """part / whole as a decimal-string fraction (None when whole is zero)."""
    if whole == 0:
        return None
    return fmt(part / whole, places)


def split_evenly(amount: Decimal, weights: Sequence[Decimal]) -> list[Decimal]:
    """Split ``amount`` pro rata to ``weights`` exactly (the last share takes the remainder)."""
    total = dsum(weights)
    if total == 0:
        return [ZERO for _ in weights]
    parts = [amount * w / total for w in weights]
    if parts:
        parts[-1] = amount - dsum(parts[:-1])
    return parts
