"""Charges in scope that no class rule matches, by name (METHOD §2, rule 5: no silent misfit).

A line no rule (case or shipped) and no FOCUS category classes goes to *unattributed*. That is the
method, but a total that is largely unattributed without a word reads as a finding when it is a
misfit of the case: most often a CPU instance the case meant as a serving node, which the shipped
serving_compute rule takes only when telemetry (``kube_node_info``) or ``[nodes]`` names it as a node
of the audited cluster, or a service's tag claim, which gives a line its owner but not its class.
``lines_unmatched`` names the lines, largest first, with their amount and share, what claims them,
and how to class them.
"""
from __future__ import annotations

from decimal import Decimal

import pandas as pd

from audit.case import Case
from audit.lines import ADJUSTING_CATEGORIES, basis_amount
from audit.misfit import LISTED, Misfit, text
from audit.money import ZERO, cents

HINT = ("a [[rules]] entry classes them (e.g. class = \"serving_compute\" for a CPU serving tier), and a CPU "
        "instance is serving_compute by the shipped rules once kube_node_info or [nodes] names it as a node "
        "of the audited cluster")


def unmatched_fit(case: Case, classified: pd.DataFrame) -> list[Misfit]:
    """A ``lines_unmatched`` warning naming the charges in scope no rule classes, largest first."""
    if classified.empty:
        return []
    charges = classified[~classified["charge_category"].isin(ADJUSTING_CATEGORIES).to_numpy(dtype=bool)]
    unmatched = (charges["resource_class"] == "unmatched").to_numpy(dtype=bool)
    if not unmatched.any():
        return []
    amounts = basis_amount(charges, case.cost_basis)
    total = sum((a for a in amounts if a is not None), ZERO)
    named = _by_name(charges[unmatched], amounts[unmatched])
    amount = sum((a for _, a, _ in named), ZERO)
    if amount == 0:
        return []
    share = f" ({amount / total:.1%} of the charges in scope)" if total > 0 else ""
    largest = "; ".join(f"{text(name)} {cents(a)} ({n} line{'s' if n != 1 else ''})"
                        for name, a, n in named[:LISTED])
    more = f"; … {len(named) - LISTED} more" if len(named) > LISTED else ""
    claimed = _claimed(charges[unmatched])
    message = (f"{int(unmatched.sum()):,} charge line(s) in scope, {cents(amount)} {case.currency}{share}, match no "
               f"class rule and are unattributed: {largest}{more}.{claimed} {HINT[0].upper()}{HINT[1:]}")
    return [Misfit("lines_unmatched", "billing lines no rule classes", message,
                   tuple(text(name) for name, _, _ in named[:LISTED]))]


def _by_name(lines: pd.DataFrame, amounts: pd.Series) -> list[tuple[str, Decimal, int]]:
    """(service: resource or description, amount, lines) per distinct name, largest amount first."""
    service = lines["service_name"].fillna("").astype(str)
    what = lines["resource_id"].fillna("").astype(str)
    described = lines["charge_description"].fillna("").astype(str) if "charge_description" in lines.columns else what
    what = what.where(what != "", described)
    names = (service + ": " + what).where(service != "", what)
    sums: dict[str, list] = {}
    for name, amount in zip(names, amounts):
        entry = sums.setdefault(name or "(no service, resource or description)", [ZERO, 0])
        entry[0] += amount if amount is not None else ZERO
        entry[1] += 1
    return sorted(((n, a, k) for n, (a, k) in sums.items()), key=lambda x: (-abs(x[1]), x[0]))


def _claimed(lines: pd.DataFrame) -> str:
    """Which services' claims take some of the lines: a claim gives a line its owner, not its class."""
    if "claimed_by" not in lines.columns:
        return ""
    owners = lines["claimed_by"].fillna("").astype(str)
    counts = owners[owners != ""].value_counts().sort_index()
    if counts.empty:
        return ""
    who = ", ".join(f"{text(o)} claims {n}" for o, n in counts.items())
    return (f" {who[0].upper()}{who[1:]} of them: a claim gives a line its owner, not its class, so the claimed "
            "lines stay out of the service's unit cost.")
