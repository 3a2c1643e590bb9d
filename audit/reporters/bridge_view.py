"""The bridge across the cost bases (audit.json ``bridge``, METHOD §1) as rows of the report.

Totals are always shown; a step only when it moves money or is not measured (a step of 0.00 says
nothing a reader needs). A row's note is why it is not measured, which lines carry a step outside
the commitment groups, or what a measured step leaves out (``<step>_lacks``); a note the row above
already gave reads "as above".
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Callable

#: audit.json bridge key → label, in bridge order; totals are marked
ROWS = (
    ("list", "List cost (public on-demand)", True),
    ("negotiated_discounts", "Negotiated discounts", False),
    ("adjustments_list_to_contracted", "Tax, credits, adjustments: contracted vs list", False),
    ("contracted", "Contracted cost (negotiated rates)", True),
    ("covered_usage", "Commitment-covered usage (0 on the invoice)", False),
    ("commitment_purchases", "Commitment purchases and fees", False),
    ("unused_commitment_billed", "Unused commitment: billed vs contracted", False),
    ("other_contracted_to_billed", "Other lines: billed vs contracted", False),
    ("billed", "Billed cost (invoiced)", True),
    ("amortised_commitment", "Amortised commitment on covered usage", False),
    ("unused_commitment", "Unused commitment", False),
    ("purchases_amortised", "Purchases and fees, replaced by their amortisation", False),
    ("other_billed_to_effective", "Other lines: effective vs billed", False),
    ("effective", "Effective cost (commitments amortised)", True),
)


#: a row's note where it repeats the last note shown (five steps one missing column leaves unmeasured
#: printed the same three lines five times, running page 1 onto page 2)
AS_ABOVE = "as above"


def bridge_rows(bridge: dict, money: Callable[[object], str]) -> list[tuple[str, str, str, bool]]:
    """(label, amount, note, is_total) of every row to show, in bridge order."""
    reasons = _reasons(str(bridge.get("not_measured") or ""))
    rows, said = [], ""
    for key, label, total in ROWS:
        if key not in bridge:
            continue
        value = bridge[key]
        if not total and value is not None and _zero(value):
            continue
        note = reasons.get(key, "") if value is None else str(bridge.get(f"{key}_lines") or bridge.get(f"{key}_lacks")
                                                              or "")
        rows.append((label, money(value), AS_ABOVE if note and note == said else note, total))
        said = note or said
    return rows


def _reasons(text: str) -> dict[str, str]:
    """``"a, b: why; c: why2"`` → {a: why, b: why, c: why2}."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split("; "))):
        keys, _, why = part.partition(": ")
        for key in keys.split(", "):
            out[key] = why
    return out


def _zero(value: object) -> bool:
    try:
        return Decimal(str(value)) == 0
    except InvalidOperation:
        return False
