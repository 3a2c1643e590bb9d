"""Scope, cost basis, and the spreading of commitments, credits and tax (METHOD §1–§2).

Tax follows the charges it taxes, credits are netted into the charges they apply to, and a
commitment purchase (billed basis) is spread over the lines that used it. Nothing is rounded here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

import pandas as pd

from audit.money import ZERO, dsum, split_evenly

CREDIT_CATEGORIES = {"Credit", "Refund", "Adjustment"}


@dataclass(frozen=True)
class Leftover:
    """An adjustment with no charge to apply to: reported as unattributed."""

    line_id: str
    amount: Decimal
    reason: str


def basis_amount(lines: pd.DataFrame, basis: str) -> pd.Series:
    """The cost-basis amount of every line (Decimal)."""
    return lines["effective_cost" if basis == "effective" else "billed_cost"]


def in_scope(lines: pd.DataFrame, scope) -> tuple[pd.Series, list[str]]:
    """Boolean mask of in-scope lines and the reasons lines fell outside."""
    mask = pd.Series(True, index=lines.index)
    reasons = []
    accounts = set(scope.get("accounts") or [])
    if accounts:
        mask &= lines["sub_account_id"].isin(accounts) | lines["billing_account_id"].isin(accounts)
        reasons.append(f"account not in [scope].accounts ({', '.join(sorted(accounts))})")
    adjustments = lines["charge_category"].isin(CREDIT_CATEGORIES | {"Tax"})
    services = set(scope.get("services") or [])
    if services:
        mask &= lines["service_name"].isin(services) | adjustments
        reasons.append("service not in [scope].services")
    for key, value in dict(scope.get("tags") or {}).items():
        mask &= lines["tags"].map(lambda t: str(json.loads(t or "{}").get(key, "")) == value) | adjustments
        reasons.append(f"tag {key}={value} absent")
    return mask, reasons


def spread(lines: pd.DataFrame, basis: str) -> tuple[pd.DataFrame, list[Leftover]]:
    """Charges with gross, commitment, credit, tax and net columns; adjustments folded in."""
    amount = basis_amount(lines, basis)
    is_tax = lines["charge_category"] == "Tax"
    is_credit = lines["charge_category"].isin(CREDIT_CATEGORIES)
    is_purchase = (lines["charge_category"] == "Purchase") & (lines["commitment_discount_id"] != "")
    charges = lines[~(is_tax | is_credit)].copy()
    charges["gross"] = amount[charges.index]
    for column in ("commitment", "credits", "tax"):
        charges[column] = [ZERO] * len(charges)
    leftovers: list[Leftover] = []
    spent = _spread_purchases(charges, lines[is_purchase], amount)
    charges = charges.drop(index=spent)
    for idx in lines[is_credit].index:
        _spread_one(charges, lines.loc[idx], amount[idx], "credits", _credit_targets, leftovers)
    for idx in lines[is_tax].index:
        _spread_one(charges, lines.loc[idx], amount[idx], "tax", _tax_targets, leftovers)
    charges["net"] = [g + c + k + t for g, c, k, t in zip(charges["gross"], charges["commitment"],
                                                          charges["credits"], charges["tax"])]
    return charges, leftovers


def _spread_purchases(charges, purchases, amount) -> list:
    """A commitment purchase moves onto the lines that used (or left unused) that commitment.

    A line belongs to a commitment when its CommitmentDiscountId is the purchase's or lies under it
    (Azure bills a reservation *order*, ``…/reservationOrders/O``, and its usage names the
    reservation, ``…/reservationOrders/O/reservations/R``). Weights: the lines' EffectiveCost; where
    those are all zero (an actual-cost export, in which covered usage costs 0) their ListCost, else
    their PricingQuantity. Returns the purchase lines whose amount moved; they leave the charges
    (their money is in the ``commitment`` column of the lines they paid for).
    """
    members = _members_by_commitment(charges["commitment_discount_id"])
    added: dict = {}
    spent = []
    for idx, commitment in purchases["commitment_discount_id"].items():
        targets = [t for t in members.get(commitment, ()) if t != idx]
        weights = _purchase_weights(charges.loc[targets]) if targets else None
        if weights is None:
            continue  # stays a charge of its own, classified by the rules
        spent.append(idx)
        for t, share in zip(targets, split_evenly(amount[idx], weights)):
            added[t] = added.get(t, ZERO) + share
    if added:
        charges["commitment"] = [c + added.get(t, ZERO) for t, c in zip(charges.index, charges["commitment"])]
    return spent


def _members_by_commitment(ids: pd.Series) -> dict[str, list]:
    """Commitment id → the charges under it: their own id and every ``/``-prefix of it."""
    members: dict[str, list] = {}
    for idx, commitment in ids[ids != ""].items():
        parts = commitment.split("/")
        for end in range(len(parts), 0, -1):
            prefix = "/".join(parts[:end])
            if prefix.strip("/"):
                members.setdefault(prefix, []).append(idx)
    return members


def _purchase_weights(targets: pd.DataFrame) -> list[Decimal] | None:
    """The first of EffectiveCost, ListCost, PricingQuantity that is known on every target and not
    all zero; None when there is none (the purchase then stays a charge of its own)."""
    for column in ("effective_cost", "list_cost", "pricing_quantity"):
        values = list(targets[column])
        if all(v is not None for v in values) and dsum(values) != 0:
            return values
    return None


def _spread_one(charges, line, value: Decimal, column: str, targets_of, leftovers) -> None:
    if value == 0:
        return
    targets = targets_of(charges, line)
    weights = [g + c for g, c in zip(targets["gross"], targets["commitment"])]
    if not len(targets) or dsum(weights) == 0:
        leftovers.append(Leftover(line["line_id"], value,
                                  f"{line['charge_category'].lower()} line with no charge to apply to"))
        return
    for t, share in zip(targets.index, split_evenly(value, weights)):
        charges.at[t, column] = charges.at[t, column] + share


def _account_mask(charges, line):
    if line["sub_account_id"]:
        return charges["sub_account_id"] == line["sub_account_id"]
    return charges["billing_account_id"] == line["billing_account_id"]


def _credit_targets(charges, line):
    """A credit naming a resource applies to it; otherwise to the account's usage, pro rata."""
    if line["resource_id"]:
        named = charges[charges["resource_id"] == line["resource_id"]]
        if len(named):
            return named
    return charges[_account_mask(charges, line) & (charges["charge_category"] == "Usage")]


def _tax_targets(charges, line):
    """Tax applies to every charge of its account."""
    return charges[_account_mask(charges, line)]
