"""Whether a ``[scope]`` keeps tax or credits it cannot place (METHOD §1–§2; no silent misfit).

A ``services`` or ``tags`` scope keeps a tax, credit, refund or adjustment line with the charges it
applies to (:func:`audit.adjust.in_scope`). One that names no service (under ``services``), or no
resource a charge bills and no tags (under ``tags``), applies to its whole account: the scope keeps it
whole, and it is spread over the account's in-scope charges alone, although some of the charges it
applies to lie outside. Where they do, the user is told by name: the lines, and their accounts'
charges outside the scope.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from audit.lines import ADJUSTING_CATEGORIES, accounts_in, names_no_charge, names_no_service, tags_of
from audit.misfit import Misfit, listing
from schemas.billing import line_total

LISTED = 3


def scope_adjustments_fit(scope: Mapping, lines: pd.DataFrame, classified: pd.DataFrame) -> list[Misfit]:
    """A warning where the scope keeps whole an adjustment line that also applies to charges it
    leaves out. ``lines``: every billing line read; ``classified``: those in scope (same index)."""
    if lines.empty or classified.empty or not (scope.get("services") or scope.get("tags")):
        return []
    kept = lines.index.isin(classified.index)
    unplaced = pd.Series(False, index=lines.index)
    if scope.get("services"):
        unplaced |= names_no_service(lines)
    if scope.get("tags"):
        unplaced |= names_no_charge(lines, tags_of(lines))
    account = _account(lines)
    charges = ~lines["charge_category"].isin(ADJUSTING_CATEGORIES)
    left_out = set(account[charges & ~kept])
    whole = lines[unplaced & kept & account.isin(left_out)]
    if whole.empty:
        return []
    shown = ", ".join(str(i) for i in whole["line_id"].head(LISTED)) + (", …" if len(whole) > LISTED else "")
    accounts = sorted(set(account[whole.index]))
    outside = line_total(lines[charges & ~kept & account.isin(accounts)])
    return [Misfit(
        "scope_adjustment_whole", "[scope]",
        f"[scope] keeps whole {line_total(whole):,} tax, credit or adjustment line(s) that name no "
        f"{_what(scope)} (lines {shown}): they apply to the whole of account(s) {', '.join(accounts[:LISTED])}, "
        f"whose {outside:,} charge line(s) outside the scope they also cover, and are spread over the "
        "in-scope charges alone (scope by [scope].accounts to keep them exact)", tuple(accounts[:LISTED]))]


def left_out_by(scope: Mapping, outside: pd.DataFrame) -> str:
    """Which ``[scope]`` pieces leave ``outside`` (lines the scope does not keep) out, as the case
    writes them, with the accounts or services of the lines each leaves out (rule 5: a misfit names
    the rule behind it); ``[scope].tags`` where neither of those explains some of them."""
    parts = []
    explained = pd.Series(False, index=outside.index)
    if scope.get("accounts"):
        accounts = list(scope["accounts"])
        out = ~(accounts_in(outside["sub_account_id"], accounts) | accounts_in(outside["billing_account_id"], accounts))
        if out.any():
            parts.append(f"[scope].accounts = {accounts} (their account(s): {listing(_accounts_named(outside[out]))})")
        explained |= out
    if scope.get("services"):
        out = ~outside["service_name"].isin(list(scope["services"]))
        if out.any():
            parts.append(f"[scope].services = {list(scope['services'])} (their service(s): "
                         f"{listing(sorted(set(outside['service_name'][out].astype(str))))})")
        explained |= out
    if scope.get("tags") and not explained.all():
        parts.append(f"[scope].tags = {dict(scope['tags'])}")
    return " and ".join(parts) or "[scope]"


def _accounts_named(lines: pd.DataFrame) -> list[str]:
    """The lines' accounts, each once: the SubAccountId, else the BillingAccountId said to stand for
    an empty SubAccountId (an Azure purchase row with no SubscriptionId)."""
    sub = lines["sub_account_id"].fillna("").astype(str)
    named = sub.where(sub != "", lines["billing_account_id"].fillna("").astype(str) + " (SubAccountId empty)")
    return sorted(set(named))


def _account(lines: pd.DataFrame) -> pd.Series:
    """Each line's account: its SubAccountId, else its BillingAccountId."""
    sub = lines["sub_account_id"].fillna("").astype(str)
    return sub.where(sub != "", lines["billing_account_id"].fillna("").astype(str))


def _what(scope: Mapping) -> str:
    return " or ".join(w for w, key in (("service", "services"), ("resource or tags", "tags")) if scope.get(key))
