"""Each charge priced bottom-up: quantity × unit price, for reconciliation (METHOD §5).

The contracted unit price is used, else the list price (flagged as a fallback); a line without a
quantity or a unit price, and a purchase, is taken at its cost; so is the unused part of a commitment
on the list and contracted bases, which count it at 0 (METHOD §1: they price the usage before
commitments): priced at its quantity, the bottom-up would count what the top-down does not.
``pretax`` is the cost before tax and credits (gross plus the commitment spread onto the line).
"""
from __future__ import annotations

import pandas as pd

from audit.lines import PRE_COMMITMENT

PRICE_COLUMNS = ("pricing_quantity", "contracted_unit_price", "list_unit_price", "charge_category", "gross",
                 "commitment", "commitment_discount_status")


def priced(charges: pd.DataFrame, basis: str) -> pd.DataFrame:
    """The charges with ``priced``, ``has_price``, ``list_price_fallback`` and ``pretax`` columns, on
    the case's cost ``basis``."""
    amounts, has_price, fallback = [], [], []
    before_commitments = basis in PRE_COMMITMENT
    for quantity, unit, listed, category, gross, commitment, status in zip(*(charges[c] for c in PRICE_COLUMNS)):
        used_list = False
        if unit is None and listed is not None:
            unit, used_list = listed, True
        ok = (quantity is not None and unit is not None and category != "Purchase"
              and not (before_commitments and status == "Unused"))
        amounts.append(quantity * unit if ok else gross + commitment)
        has_price.append(ok)
        fallback.append(ok and used_list)
    pretax = [g + c for g, c in zip(charges["gross"], charges["commitment"])]
    return charges.assign(priced=amounts, has_price=has_price, list_price_fallback=fallback, pretax=pretax)

