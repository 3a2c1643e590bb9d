"""Usage lines whose quantity is below zero while their cost is above it (no silent misfit).

A usage line bills a quantity at a price: PricingQuantity × a unit price is its cost, and
ConsumedQuantity is what was used. A negative quantity at a positive cost is not a refund (that is a
Credit line, or a negative cost) but a value outside its range: the GPU split reads GPU-hours from a
GPU meter's quantity, and the reconciliation's price check multiplies it. The audit reads the
quantity as given, and the warning ``negative_quantity`` names the lines, so that the user knows
which figures rest on it. A positive quantity at a negative cost on a usage line (``negative_cost``)
is named likewise: a refund is a Credit line, and this one lowers every bucket it reaches. So is a
usage line listed below its contracted cost (``list_below_contracted``): ListCost is the price before
every discount, so it is never below ContractedCost; below it, the bridge's list → contracted step
(negotiated discounts) raises the cost instead of discounting it (a CUR whose Savings Plan-covered
rows gave the plan's effective cost as their public on-demand cost: negotiated_discounts +471.84).
"""
from __future__ import annotations

import numpy as np
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


def list_fit(lines: pd.DataFrame) -> list[Misfit]:
    """A ``list_below_contracted`` warning for the usage lines whose ListCost is below their
    ContractedCost: how many, the money on each side, the first lines. One comparison per line, done
    by numpy on the (summed) lines the readers made: cheap at the fleet's 10 M CUR lines (558 k rows)."""
    if lines.empty or "list_cost" not in lines.columns or "contracted_cost" not in lines.columns:
        return []
    listed, contracted = (lines[c].to_numpy(dtype=object) for c in ("list_cost", "contracted_cost"))
    known = (lines["charge_category"] == "Usage").to_numpy(dtype=bool) & pd.notna(listed) & pd.notna(contracted)
    below = np.zeros(len(lines), dtype=bool)
    below[known] = listed[known] < contracted[known]
    found = lines[below]
    if found.empty:
        return []
    low, high = sum(found["list_cost"]), sum(found["contracted_cost"])
    currency = f" {found['currency'].iloc[0]}" if "currency" in found.columns else ""
    shown = ", ".join(str(i) for i in found["line_id"].head(LISTED)) + (", …" if len(found) > LISTED else "")
    first = found.iloc[0]
    return [Misfit("list_below_contracted", "billing ListCost",
                   f"{line_total(found):,} usage line(s) list below their ContractedCost (ListCost {low:,.2f} "
                   f"against ContractedCost {high:,.2f}{currency}, {high - low:,.2f} less; lines {shown}; the first: "
                   f"ListCost {first['list_cost']} at ContractedCost {first['contracted_cost']}): a list price is "
                   "before every discount, so the list basis and the bridge's negotiated_discounts step (list → "
                   f"contracted), which adds {high - low:,.2f} instead of taking a discount off, rest on it",
                   (str(first["contracted_cost"]),))]


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
