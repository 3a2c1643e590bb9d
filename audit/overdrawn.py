"""Classes whose credits exceed their charges: a negative net, named as a fit warning (rule 5).

A credit is netted into the charges it applies to (:mod:`audit.adjust`, METHOD §2); where it is larger
than them, the class (and the part and service it goes to) comes out negative. Conservation holds, but
a negative part is no cost a service pays per request, nor one an option can save from: the audit
says so here, naming the class, its part and service, the credit lines that did it and the amounts,
and its unit costs and option savings are not priced on it (audit_json_units, rank).
"""
from __future__ import annotations

from decimal import Decimal

import pandas as pd

from audit.buckets import CLASS_PARTS
from audit.lines import CREDIT_CATEGORIES, basis_amount, listed, named_amounts
from audit.misfit import Misfit
from audit.money import ZERO

#: the credit lines a warning names, largest first, before "… n more"
NAMED_CREDITS = 3


def overdrawn(charges: pd.DataFrame, lines: pd.DataFrame, basis: str) -> tuple[Misfit, ...]:
    """One warning per class and owning service whose net after credits is below zero; ``lines``:
    the in-scope lines, whose credit lines are named."""
    owners = charges["claimed_by"].fillna("") if "claimed_by" in charges.columns else pd.Series("", charges.index)
    gpu = charges["resource_class"] == "gpu_compute"  # GPU charges are split by GPU time, not by claim
    credited = (charges["credits"] != 0).to_numpy(dtype=bool)
    if not credited.any():
        return ()
    narrow = charges[["net", "credits", "resource_id", "service_name"]]  # each group a take of these alone
    found = []
    for (klass, owner), frame in narrow.groupby([charges["resource_class"], owners.where(~gpu, "")], sort=True):
        net = sum(frame["net"], ZERO)
        credits = sum(frame["credits"], ZERO)
        if net < 0 and credits < 0:
            found.append(_warning(klass, owner, net, credits, _credit_lines(frame, lines, basis)))
    return tuple(found)


def _credit_lines(frame: pd.DataFrame, lines: pd.DataFrame, basis: str) -> str:
    """The credit lines netted into ``frame``'s charges: those naming one of its credited resources,
    and those naming no resource but one of its credited services, largest first."""
    took = frame[frame["credits"] != 0]
    resources = set(took["resource_id"].fillna("")) - {""}
    services = set(took["service_name"].fillna(""))
    credit = lines[lines["charge_category"].isin(CREDIT_CATEGORIES)]
    resource = credit["resource_id"].fillna("")
    named = credit[resource.isin(resources) | ((resource == "") & credit["service_name"].isin(services))]
    return listed(named_amounts(named, basis_amount(named, basis)), NAMED_CREDITS) or "none named"


def _warning(klass: str, owner: str, net: Decimal, credits: Decimal, named: str) -> Misfit:
    bucket, name = CLASS_PARTS.get(klass, (None, None))
    part = f"part {bucket}.{name}" if bucket else "its GPU parts"
    held = f", service {owner}" if owner else ""
    subject = f"class {klass}" + (f" ({owner})" if owner else "")
    message = (f"credits exceed the charges of class {klass} ({part}{held}): it nets {net:.2f} after "
               f"{credits:.2f} of credits on {net - credits:.2f} of charges; credit line(s): {named}. "
               "A negative cost is no unit cost and no saving: unit costs of a service whose cost is "
               "negative are not priced, nor options acting on a negative part")
    return Misfit("credits_exceed_charges", subject, message, ())
