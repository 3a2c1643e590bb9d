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


def table_cents(cells: Mapping[str, Mapping[str, Decimal]], row_targets: Mapping[str, Decimal],
                column_targets: Mapping[str, Decimal]) -> dict[str, dict[str, Decimal]]:
    """A table of amounts rounded to the cent so that every row sums to its target and every column
    to its (controlled rounding; the targets' totals agree): each cell is its floor or, where it has a
    remainder, the cent above, never further (an exact cell, a zero among them, stays as it is).
    The cents above go column by column, the column needing most first, to the rows needing most,
    largest remainder first (Gale–Ryser's greedy). Where that finds no way, each row is rounded by
    largest remainder to its target alone (its columns may then be a cent off)."""
    floors = {r: {c: v.quantize(CENT, rounding=decimal.ROUND_FLOOR) for c, v in row.items()} for r, row in cells.items()}
    need_row = {r: int((row_targets[r] - dsum(f.values())) / CENT) for r, f in floors.items()}
    columns = list(column_targets)
    need_col = {c: int((column_targets[c] - dsum(floors[r][c] for r in floors)) / CENT) for c in columns}
    out = {r: dict(f) for r, f in floors.items()}
    for column in sorted(columns, key=lambda c: (-need_col[c], c)):
        rows = sorted((r for r in cells if need_row[r] > 0 and cells[r][column] != floors[r][column]),
                      key=lambda r: (-need_row[r], -(cells[r][column] - floors[r][column]), r))
        if need_col[column] < 0 or need_col[column] > len(rows):
            return {r: largest_remainder(row, row_targets[r]) for r, row in cells.items()}
        for r in rows[:need_col[column]]:
            out[r][column] += CENT
            need_row[r] -= 1
    if any(need_row.values()):
        return {r: largest_remainder(row, row_targets[r]) for r, row in cells.items()}
    return out


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
