"""A billed basis whose commitment purchases the data lacks (METHOD §1, rule 5: no silent misfit).

On the billed basis a commitment's covered usage and unused share cost 0 (they were invoiced through
the purchase), and the purchase, spread onto them (audit/adjust.py), carries their price. An export of
the amortised view (Azure's AmortizedCost export, Microsoft's FOCUS export) has no purchase: the
reserved GPUs then cost 0 on the billed basis, their priced bottom-up exceeds it, and without a word
the audit reads that as a finding. So has an export of the billed view (Azure's ActualCost export)
whose purchase was bought in an earlier month or in another subscription: its covered usage costs 0
on both bases and its amortised cost is in no line (named at its contracted price; nearest: the
commitments), on the effective basis as well. ``commitment_purchases_missing`` names the amounts and the
commitments (:func:`audit.bridge.unpurchased`), and the exports or basis that hold them.
"""
from __future__ import annotations

import pandas as pd

from audit.bridge import EXAMPLES, unpurchased, unpurchased_reason
from audit.case import Case
from audit.misfit import Misfit

#: the bases whose total a missing purchase leaves short
BASES = ("billed", "effective")


def purchases_fit(case: Case, classified: pd.DataFrame) -> list[Misfit]:
    """A ``commitment_purchases_missing`` warning where the billed or effective basis lacks
    commitment purchases (``classified``: the lines in scope)."""
    if case.cost_basis not in BASES or classified.empty:
        return []
    found = unpurchased(classified, case.cost_basis)
    if found is None:
        return []
    subject = f"[case] cost_basis {case.cost_basis}"
    return [Misfit("commitment_purchases_missing", subject,
                   f"{subject}: {unpurchased_reason(classified, case.cost_basis)}",
                   ("effective",) if found.lines else found.commitments[:EXAMPLES])]
