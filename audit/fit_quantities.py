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
rows gave the plan's effective cost as their public on-demand cost: negotiated_discounts +471.84). A
usage line without a list price (ListCost 0, no ListUnitPrice: AWS Spot usage) is none of those; on
the list basis, which counts it 0, it is named (``list_price_missing``).
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


def list_fit(lines: pd.DataFrame, basis: str = "") -> list[Misfit]:
    """A ``list_below_contracted`` warning for the usage lines listed below their ContractedCost: how
    many, the money on each side, the first lines. One comparison per line, done by numpy on the
    (summed) lines the readers made: cheap at the fleet's 10 M CUR lines (558 k rows).

    Magnitudes are compared, on lines whose ListCost and ContractedCost have the same sign: a negative
    (reversal) line is listed below when less money comes off at list than at contracted, so a
    reversal of -4e-7 at list against -4e-11 contracted is not one; a line whose two costs differ in
    sign is not compared. A line with ListCost 0 and no ListUnitPrice (AWS gives no public on-demand
    price for Spot usage) has no list price: it is not listed below, and on the list ``basis`` it is
    named where its ContractedCost is not 0 (``list_price_missing``), since that basis counts it 0."""
    if lines.empty or "list_cost" not in lines.columns or "contracted_cost" not in lines.columns:
        return []
    listed, contracted = (lines[c].to_numpy(dtype=object) for c in ("list_cost", "contracted_cost"))
    usage = (lines["charge_category"] == "Usage").to_numpy(dtype=bool)
    unpriced = usage & _no_list_price(lines, listed)
    known = usage & pd.notna(listed) & pd.notna(contracted) & ~unpriced
    below = np.zeros(len(lines), dtype=bool)
    below[known] = [(l_ >= 0) == (c >= 0) and abs(l_) < abs(c)
                    for l_, c in zip(listed[known], contracted[known])]
    counted = unpriced & np.array([_above(c) or _below(c) for c in contracted], dtype=bool)
    return _below_contracted(lines[below]) + (_unpriced(lines[counted]) if basis == "list" else [])


def unlisted_usage(lines: pd.DataFrame) -> np.ndarray:
    """Whether each line is usage without a list price (ListCost 0, no ListUnitPrice: AWS Spot usage)
    at a ContractedCost other than 0: what the list total counts 0 (audit/bridge.py names them)."""
    if lines.empty or "list_cost" not in lines.columns or "contracted_cost" not in lines.columns:
        return np.zeros(len(lines), dtype=bool)
    usage = (lines["charge_category"] == "Usage").to_numpy(dtype=bool)
    contracted = lines["contracted_cost"].to_numpy(dtype=object)
    priced = np.array([_above(c) or _below(c) for c in contracted], dtype=bool)
    return usage & _no_list_price(lines, lines["list_cost"].to_numpy(dtype=object)) & priced


def _no_list_price(lines: pd.DataFrame, listed) -> np.ndarray:
    """Whether each line carries no list price: ListCost 0 and no ListUnitPrice."""
    rate = lines["list_unit_price"] if "list_unit_price" in lines.columns else pd.Series(None, index=lines.index)
    return np.array([v is not None and v == v and v == 0 for v in listed], dtype=bool) & rate.isna().to_numpy()


def _below_contracted(found: pd.DataFrame) -> list[Misfit]:
    """The ``list_below_contracted`` warning naming the lines ``found`` (none when empty)."""
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


def _unpriced(found: pd.DataFrame) -> list[Misfit]:
    """The ``list_price_missing`` warning naming the usage lines ``found`` that carry no list price at
    a ContractedCost other than 0, on the list basis (none when empty)."""
    if found.empty:
        return []
    currency = f" {found['currency'].iloc[0]}" if "currency" in found.columns else ""
    shown = ", ".join(str(i) for i in found["line_id"].head(LISTED)) + (", …" if len(found) > LISTED else "")
    return [Misfit("list_price_missing", "billing ListCost",
                   f"{line_total(found):,} usage line(s) carry no list price (ListCost 0, no ListUnitPrice; "
                   f"ContractedCost {sum(found['contracted_cost'].dropna()):,.2f}{currency}, BilledCost "
                   f"{sum(found['billed_cost'].dropna()):,.2f}; lines {shown}): the list basis counts them 0",
                   (str(found["line_id"].iloc[0]),))]


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
