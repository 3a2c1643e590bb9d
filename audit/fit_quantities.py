"""Usage lines whose quantity is below zero while their cost is above it (no silent misfit).

A usage line bills a quantity at a price: PricingQuantity × a unit price is its cost, and
ConsumedQuantity is what was used. A negative quantity at a positive cost is not a refund (that is a
Credit line, or a negative cost) but a value outside its range: the GPU split reads GPU-hours from a
GPU meter's quantity, and the reconciliation's price check multiplies it. The audit reads the
quantity as given, and the warning ``negative_quantity`` names the lines, so that the user knows
which figures rest on it.
"""
from __future__ import annotations

import pandas as pd

from audit.misfit import Misfit
from schemas.billing import line_total

LISTED = 3
QUANTITIES = {"pricing_quantity": "PricingQuantity", "consumed_quantity": "ConsumedQuantity"}


def quantities_fit(lines: pd.DataFrame) -> list[Misfit]:
    """A ``negative_quantity`` warning for the usage lines that bill a negative quantity at a positive cost."""
    if lines.empty:
        return []
    usage = (lines["charge_category"] == "Usage").to_numpy(dtype=bool)
    cost = lines["billed_cost"].to_numpy(dtype=object)
    positive = pd.Series([c is not None and c == c and c > 0 for c in cost], index=lines.index) & usage
    out = []
    for column, name in QUANTITIES.items():
        if column not in lines.columns:
            continue
        values = lines[column].to_numpy(dtype=object)
        negative = pd.Series([q is not None and q == q and q < 0 for q in values], index=lines.index)
        found = lines[negative & positive]
        if found.empty:
            continue
        shown = ", ".join(str(i) for i in found["line_id"].head(LISTED)) + (", …" if len(found) > LISTED else "")
        first = found.iloc[0]
        out.append(Misfit(
            "negative_quantity", f"billing {name}",
            f"{line_total(found):,} usage line(s) bill a negative {name} at a positive BilledCost (lines {shown}; "
            f"the first: {first[column]} at {first['billed_cost']}): the quantity is read as given, and the GPU "
            "hours and price checks that use it rest on it", (str(first[column]),)))
    return out
