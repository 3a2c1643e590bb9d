"""Each charge priced bottom-up: quantity × unit price, for reconciliation (METHOD §5).

The basis's own unit price is used: on the list basis the list price (ListCost is quantity × ListUnitPrice,
so a rate below on-demand, a spot price, a capacity block or a negotiated discount, is no price gap
there), on the others the contracted price; where a line lacks it, the other price (flagged as a fallback,
``price_fallback``); commitment-covered
usage at its commitment rate on the effective and billed bases (:func:`priced`); a line without a
quantity or a unit price, and a purchase, is taken at its cost; so is the unused part of a commitment
on the list and contracted bases, which count it at 0 (METHOD §1: they price the usage before
commitments): priced at its quantity, the bottom-up would count what the top-down does not.
A line whose unit price is 0 while it costs something is taken at its cost too (``zero_price``): a
price of 0 with a cost is no measured price (an Azure Marketplace row, UnitPrice and PayGPrice 0,
whose ContractedCost connectors/billing/azure_contracted.py takes at its cost as well).
``pretax`` is the cost before tax and credits (gross plus the commitment spread onto the line).
"""
from __future__ import annotations

from typing import Collection

import pandas as pd

from audit.lines import PRE_COMMITMENT

PRICE_COLUMNS = ("pricing_quantity", "contracted_unit_price", "list_unit_price", "charge_category", "gross",
                 "commitment", "commitment_discount_status")


def priced(charges: pd.DataFrame, basis: str, lacking: Collection[str] = ()) -> pd.DataFrame:
    """The charges with ``priced``, ``has_price``, ``price_fallback``, ``effective_rate``,
    ``unpurchased``, ``spread_rate``, ``unused_spread``, ``zero_price`` and ``pretax`` columns, on the
    case's cost ``basis``.

    On the list basis a line is priced at its ListUnitPrice, else its ContractedUnitPrice (flagged);
    on every other basis at its ContractedUnitPrice, else its ListUnitPrice (flagged). Priced at the
    contracted price on the list basis, a spot hour at 30 % of on-demand or a capacity block showed as
    a price gap of the whole discount (v2_capblock: gap 0.4735 against ListCost).

    On the effective basis, usage a commitment covers (CommitmentDiscountStatus Used) is priced at
    its effective rate, EffectiveCost ÷ quantity (METHOD §5's "or EffectiveCost ÷ quantity"): its
    ContractedUnitPrice excludes the commitment discount the effective basis counts, so priced at it
    every commitment case missed by the discount (a FOCUS export and the CUR of the same bill gave
    opposite verdicts, the CUR reader filling a reservation's rate this way).

    On the billed basis the same holds for covered usage a commitment purchase was spread onto
    (audit/adjust.py; its ``commitment`` column): its top-down is that spread purchase, so it is priced
    at the spread amount ÷ quantity (an Azure ActualCost export, whose covered usage costs 0 and whose
    purchases carry the price, missed by the whole discount: gap −26.7 %). Covered usage no purchase
    reached keeps its contracted price: its billed total lacks the purchase (audit/bridge.py
    :func:`~audit.bridge.unpurchased_reason` says so); ``unpurchased`` marks such lines costing 0, so
    that the price driver names them. So does covered usage costing 0 on the effective basis whose
    commitment is in ``lacking`` (:func:`audit.bridge.unpurchased`: an ActualCost export without its
    purchase): its rate, 0, is no price. On the billed basis the unused part of a commitment a purchase
    was spread onto (an AmortizedCost export with its purchases, Microsoft's FOCUS recipe) is priced at
    that spread too (``unused_spread``): its quantity × unit price is one day's amortised share, not the
    purchase its billed cost is (cloudgen aks 10504, a 30-day purchase: 52.89 against 1586.74).

    On every basis, usage of no commitment that a purchase was spread onto (an EC2 Capacity Block's
    instance-hours, billed 0, and the block's fee: audit/capacity_blocks.py) is priced at the spread
    amount ÷ quantity (``spread_rate``): its unit price, 0, is not what the block cost (a block tied to
    its instance priced the instance's day at 0 bottom-up against the fee top-down: gap 0.47)."""
    before_commitments = basis in PRE_COMMITMENT
    ids = charges["commitment_discount_id"].tolist() if lacking else [""] * len(charges)
    rows = [_line(basis, before_commitments, lacking, *values, cid)  # type: ignore[call-arg]
            for *values, cid in zip(*(charges[c].tolist() for c in PRICE_COLUMNS), ids)]
    columns = dict(zip(FLAGS, map(list, zip(*rows)))) if rows else {name: [] for name in FLAGS}
    pretax = [g + c for g, c in zip(charges["gross"], charges["commitment"])]
    return charges.assign(**columns, pretax=pretax)


#: the columns :func:`_line` gives, in its order
FLAGS = ("priced", "has_price", "price_fallback", "effective_rate", "unpurchased", "spread_rate", "unused_spread",
         "zero_price")


def _line(basis, before_commitments, lacking, quantity, contracted, listed, category, gross, commitment, status,
          cid) -> tuple:
    """One line's :data:`FLAGS` (see :func:`priced`)."""
    unit, other = (listed, contracted) if basis == "list" else (contracted, listed)
    used_other = False
    shown = not (gross + commitment == 0 and cid in lacking)
    block = bool(quantity) and status not in ("Used", "Unused") and commitment != 0
    spread_on = basis == "billed" and bool(quantity) and commitment != 0
    unused = spread_on and status == "Unused"
    at_rate = block or unused or (status == "Used" and bool(quantity) and (
        (basis == "effective" and shown) or spread_on))
    if unit is None and other is not None and not at_rate:
        unit, used_other = other, True
    zero = not at_rate and unit == 0 and gross + commitment != 0 and category != "Purchase"
    ok = at_rate or (quantity is not None and unit is not None and category != "Purchase" and not zero
                     and not (before_commitments and status == "Unused"))
    amount = quantity * unit if ok and not at_rate else gross + commitment
    unpurchased = status == "Used" and not at_rate and gross + commitment == 0 and (
        basis == "billed" or (basis == "effective" and not shown))
    return (amount, ok, ok and used_other, at_rate and not block and not unused, unpurchased, block, unused, zero)
