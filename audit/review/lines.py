"""Lines that appeared or vanished between two audits (services, SKUs, accounts), above a
threshold: max(0.5 % of the later total, 1.00) in the case currency.

An SKU is matched by its id (``<ServiceName>|<SKU or charge description>``), an account by its id,
a service by its name in the composition (else ``services``). audit.json keeps the top 300 SKUs
by amount; where an audit's ``other_skus`` is not zero, an SKU missing from its list may be among
them, and the note says so.
"""
from __future__ import annotations

from decimal import Decimal

from audit.money import CENT, ZERO, cents
from audit.review.bridge import service_costs
from audit.review.load import Audit, decimal_of

SHARE = Decimal("0.005")
FLOOR = Decimal("1.00")


def threshold(later: Audit) -> Decimal:
    return max(cents(abs(later.money("total")) * SHARE), FLOOR).quantize(CENT)


def _skus(audit: Audit) -> dict[str, Decimal]:
    rows = audit.get("lines", "skus", default=None) or []
    return {str(r.get("id")): decimal_of(audit, r.get("amount"), f"lines.skus[{i}].amount") for i, r in enumerate(rows)}


def _accounts(audit: Audit) -> dict[str, Decimal]:
    rows = audit.get("lines", "accounts", default=None) or []
    return {str(r.get("account")): decimal_of(audit, r.get("amount"), f"lines.accounts[{i}].amount")
            for i, r in enumerate(rows)}


def changed_lines(earlier: Audit, later: Audit) -> dict:
    """{"threshold", "appeared", "vanished", "note"}: what is in one audit only, by kind then amount."""
    limit = threshold(later)
    appeared: list[dict] = []
    vanished: list[dict] = []
    for kind, read in (("service", service_costs), ("sku", _skus), ("account", _accounts)):
        before, after = read(earlier), read(later)
        appeared += _only(kind, after, before, limit)
        vanished += _only(kind, before, after, limit)
    notes = []
    for audit, word in ((earlier, "appeared"), (later, "vanished")):
        if not audit.has("lines"):
            notes.append(f"{audit.path} has no lines section: SKUs and accounts not compared")
            continue
        other = decimal_of(audit, audit.get("lines").get("other_skus") or "0", "lines.other_skus")
        if other != 0:
            notes.append(f"{audit.path} lists its top SKUs only ({cents(other)} in the others): an SKU shown as "
                         f"{word} may have been among them")
    return {"threshold": str(limit), "appeared": appeared, "vanished": vanished, "note": "; ".join(notes) or None}


def _only(kind: str, here: dict[str, Decimal], there: dict[str, Decimal], limit: Decimal) -> list[dict]:
    found = [(k, v) for k, v in here.items() if there.get(k, ZERO) == 0 and v != 0 and abs(v) >= limit]
    found.sort(key=lambda kv: (-abs(kv[1]), kv[0]))
    return [{"kind": kind, "id": k, "amount": str(cents(v))} for k, v in found]
