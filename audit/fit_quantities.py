"""Usage lines whose quantity is below zero while their cost is above it (no silent misfit).

A usage line bills a quantity at a price: PricingQuantity × a unit price is its cost, and
ConsumedQuantity is what was used. A negative quantity at a positive cost is not a refund (that is a
Credit line, or a negative cost) but a value outside its range: the GPU split reads GPU-hours from a
GPU meter's quantity, and the reconciliation's price check multiplies it. The audit reads the
quantity as given, and the warning ``negative_quantity`` names the lines, so that the user knows
which figures rest on it. A positive quantity at a negative cost on a usage line (``negative_cost``)
is named likewise: a refund is a Credit line, and this one lowers every bucket it reaches.
"""
from __future__ import annotations

import pandas as pd

from audit.misfit import Misfit
from schemas.billing import line_total

LISTED = 3
QUANTITIES = {"pricing_quantity": "PricingQuantity", "consumed_quantity": "ConsumedQuantity"}


def quantities_fit(lines: pd.DataFrame) -> list[Misfit]:
    """A ``negative_quantity`` warning for the usage lines that bill a negative quantity at a positive
    cost, and a ``negative_cost`` one for those that bill a positive quantity at a negative cost (a
    refund is a Credit line: on a usage line the sum of the bill and its shares go below zero)."""
    if lines.empty:
        return []
    usage = (lines["charge_category"] == "Usage").to_numpy(dtype=bool)
    cost = lines["billed_cost"].to_numpy(dtype=object)
    positive = pd.Series([_above(c) for c in cost], index=lines.index) & usage
    negative_cost = pd.Series([_below(c) for c in cost], index=lines.index) & usage
    out = []
    for column, name in QUANTITIES.items():
        if column not in lines.columns:
            continue
        values = lines[column].to_numpy(dtype=object)
        below = pd.Series([_below(q) for q in values], index=lines.index)
        out += _named(lines[below & positive], "negative_quantity", name, column,
                      f"bill a negative {name} at a positive BilledCost",
                      "the quantity is read as given, and the GPU hours and price checks that use it rest on it")
    if "pricing_quantity" in lines.columns:
        above = pd.Series([_above(q) for q in lines["pricing_quantity"].to_numpy(dtype=object)], index=lines.index)
        out += _named(lines[above & negative_cost], "negative_cost", "BilledCost", "pricing_quantity",
                      "bill a positive PricingQuantity at a negative BilledCost",
                      "the cost is read as given (a refund is a Credit line), and every bucket it reaches is lower by it")
    return out


def _named(found: pd.DataFrame, kind: str, name: str, column: str, what: str, effect: str) -> list[Misfit]:
    """One warning naming the lines ``found`` (none when empty)."""
    if found.empty:
        return []
    shown = ", ".join(str(i) for i in found["line_id"].head(LISTED)) + (", …" if len(found) > LISTED else "")
    first = found.iloc[0]
    return [Misfit(kind, f"billing {name}",
                   f"{line_total(found):,} usage line(s) {what} (lines {shown}; the first: {first[column]} at "
                   f"{first['billed_cost']}): {effect}", (str(first[column] if kind == "negative_quantity"
                                                              else first["billed_cost"]),))]


def _above(value) -> bool:
    return value is not None and value == value and value > 0


def _below(value) -> bool:
    return value is not None and value == value and value < 0
