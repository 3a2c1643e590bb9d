"""Charges in scope that no class rule matches, by name (METHOD §2, rule 5: no silent misfit).

A line no rule (case or shipped) and no FOCUS category classes goes to *unattributed*. That is the
method, but a total that is largely unattributed without a word reads as a finding when it is a
misfit of the case: most often a CPU instance the case meant as a serving node, which the shipped
serving_compute rule takes only when telemetry (``kube_node_info``) or ``[nodes]`` names it as a node
of the audited cluster, or a service's tag claim, which gives a line its owner but not its class.
``lines_unmatched`` names the lines, largest first, with their amount and share, what claims them,
and how to class them, where a service claims some of them (the case meant them) or they are
:data:`MATERIAL` of the charges or more; the unattributed part names them either way
(:func:`named_amounts`, audit/attribute.py). A commitment purchase whose amount moves onto the lines
of its commitment (:func:`audit.lines.purchase_spreads`) is none of them: no rule need class it, and
none of it is unattributed.
"""
from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd

from audit.case import Case
from audit.lines import (
    ADJUSTING_CATEGORIES,
    NAME_COLUMNS,
    basis_amount,
    commitment_purchases,
    line_name,
    listed,
    named_amounts,
    purchase_spreads,
)
from audit.misfit import LISTED, Misfit, text
from audit.money import ZERO, cents

HINT = "A [[rules]] entry classes them where they belong to the audit."
#: the share of the charges in scope unclaimed unmatched lines warn from (below it the part names them)
MATERIAL = Decimal("0.05")
INSTANCE_HINT = (" A CPU instance is serving_compute by the shipped rules once kube_node_info or [nodes] names it as "
                 "a node of the audited cluster; a service's claim alone gives it an owner, not a class.")


def unmatched_fit(case: Case, classified: pd.DataFrame) -> list[Misfit]:
    """A ``lines_unmatched`` warning naming the charges in scope no rule classes, largest first."""
    if classified.empty:
        return []
    kept = ~classified["charge_category"].isin(ADJUSTING_CATEGORIES).to_numpy(dtype=bool)
    unmatched = kept & (classified["resource_class"] == "unmatched").to_numpy(dtype=bool)
    if unmatched.any():
        unmatched &= ~classified.index.isin(_spread(classified, kept))
    if not unmatched.any():
        return []
    # every line in scope, as the audit reads them: a basis column missing is the audit's one error
    amounts = basis_amount(classified, case.cost_basis)
    found = amounts[unmatched]
    priced = np.fromiter((a is not None and a != 0 for a in found), dtype=bool, count=len(found))
    if not priced.any():
        return []
    read = [c for c in (*NAME_COLUMNS, "line_count", "claimed_by", "service_category") if c in classified.columns]
    lines = classified.loc[unmatched, read][priced]  # the unmatched lines only, and only what is read
    named = named_amounts(lines, found[priced])
    amount = sum((a for _, a, _ in named), ZERO)
    claimed = _claimed(lines)
    total = sum((a for a in amounts[kept] if a is not None), ZERO)
    if not claimed and not (total > 0 and abs(amount) >= MATERIAL * total):
        return []
    share = f" ({amount / total:.1%} of the charges)" if total > 0 else ""
    hint = HINT + (INSTANCE_HINT if _instances(lines) else "")
    message = (f"{sum(n for _, _, n in named):,} charge line(s) in scope, {cents(amount)} {case.currency}{share}, "
               f"match no class rule and are unattributed: {listed(named, LISTED)}.{claimed} {hint}")
    return [Misfit("lines_unmatched", "billing lines no rule classes", message,
                   tuple(line_name(key) for key, _, _ in named[:LISTED]))]


def _spread(classified: pd.DataFrame, kept: np.ndarray) -> list:
    """The commitment purchases among the charges whose amount moves onto their commitment's lines."""
    charges = classified[kept]
    purchases = charges[commitment_purchases(charges)]
    return [i for own, _, _ in purchase_spreads(charges, purchases) for i in own] if len(purchases) else []


def _instances(lines: pd.DataFrame) -> bool:
    """Whether some of the lines bill a compute instance (FOCUS ServiceCategory Compute)."""
    return "service_category" in lines.columns and bool((lines["service_category"] == "Compute").any())


def _claimed(lines: pd.DataFrame) -> str:
    """Which services' claims take some of the lines: a claim gives a line its owner, not its class."""
    if "claimed_by" not in lines.columns:
        return ""
    owners = lines["claimed_by"].fillna("").astype(str)
    weights = lines["line_count"] if "line_count" in lines.columns else pd.Series(1, index=lines.index)
    counts = weights[owners != ""].groupby(owners[owners != ""]).sum().sort_index()
    if counts.empty:
        return ""
    who = ", ".join(f"{text(o)} claims {n}" for o, n in counts.items())
    return (f" {who[0].upper()}{who[1:]} of them: a claim gives a line its owner, not its class, so the claimed "
            "lines stay out of the service's unit cost.")
