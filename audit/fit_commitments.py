"""A billed basis whose commitment purchases the data lacks (METHOD §1, rule 5: no silent misfit).

On the billed basis a commitment's covered usage and unused share cost 0 (they were invoiced through
the purchase), and the purchase, spread onto them (audit/adjust.py), carries their price. An export of
the amortised view (Azure's AmortizedCost export, Microsoft's FOCUS export) has no purchase: the
reserved GPUs then cost 0 on the billed basis, their priced bottom-up exceeds it, and without a word
the audit reads that as a finding. So has an export of the billed view (Azure's ActualCost export)
whose purchase was bought in an earlier month or in another subscription: its covered usage costs 0
on both bases and its amortised cost is in no line (named at its contracted price; nearest: the
commitments), on the effective basis as well. ``commitment_purchases_missing`` names the amounts and the
commitments (:func:`audit.bridge.unpurchased`), and the exports or basis that hold them. Where the
data does hold a priced purchase of such a commitment that the ``[scope]`` leaves out (an ActualCost
purchase row with an empty SubscriptionId, outside ``[scope].accounts``), the warning names those
lines (``file:row``, amount) and the scope rule that leaves them out (nearest: those lines); where a
source holds one outside the window (the reader's table ``purchases_outside``: a recurring purchase
dated later in the month than a one-day window), those rows (``file:row``, date, amount; nearest:
those rows), not "the export has none".
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from audit.bridge import EXAMPLES, related, unpurchased, unpurchased_reason
from audit.case import Case
from audit.collected import Collected
from audit.fit_scope import left_out_by
from audit.lines import commitment_purchases
from audit.misfit import Misfit, text
from audit.money import cents
from schemas.billing import line_total

#: the bases whose total a missing purchase leaves short
BASES = ("billed", "effective")


def purchases_fit(case: Case, classified: pd.DataFrame, lines: pd.DataFrame | None = None,
                  beyond: pd.DataFrame | None = None) -> list[Misfit]:
    """A ``commitment_purchases_missing`` warning where the billed or effective basis lacks
    commitment purchases (``classified``: the lines in scope; ``lines``: every line read, where
    the purchases the scope leaves out are looked for; ``beyond``: the sources' purchases outside
    the window, :func:`window_purchases`)."""
    if case.cost_basis not in BASES or classified.empty:
        return []
    found = unpurchased(classified, case.cost_basis)
    if found is None:
        return []
    subject = f"[case] cost_basis {case.cost_basis}"
    message = f"{subject}: {unpurchased_reason(classified, case.cost_basis)}"
    nearest = ("effective",) if found.lines else found.commitments[:EXAMPLES]
    outside = _purchases_outside(lines, classified, found.commitments) if lines is not None else None
    if outside is not None and len(outside):
        shown = [f"{text(i)} ({cents(b)} {case.currency} billed)" for i, b in
                 zip(outside["line_id"][:EXAMPLES], outside["billed_cost"][:EXAMPLES])]
        more = ", …" if len(outside) > EXAMPLES else ""
        message += (f". The data does hold {line_total(outside):,} purchase line(s) of these commitment(s) outside "
                    f"the scope: {', '.join(shown)}{more}, left out by {left_out_by(case.scope, outside)}")
        nearest = tuple(text(i) for i in outside["line_id"][:EXAMPLES])
    later = _mine(beyond, found.commitments) if beyond is not None else None
    if later is not None and len(later):
        message += (f". The data does hold {int(later['rows'].sum()):,} purchase row(s) of these commitment(s) "
                    f"outside the window: {', '.join(_dated(row, case.currency) for row in later[:EXAMPLES].itertuples())}"
                    f"{', …' if len(later) > EXAMPLES else ''}")
        nearest = tuple(text(i) for i in later["first_line"][:EXAMPLES])
    return [Misfit("commitment_purchases_missing", subject, message, nearest)]


def window_purchases(collected: Collected) -> pd.DataFrame | None:
    """The billing sources' commitment purchases outside the window, per source and commitment (their
    readers' table ``purchases_outside``), in source order; None where no reader keeps the table."""
    found = [t for t in (f.tables.get("purchases_outside") for f in collected.of("billing")) if t is not None]
    return pd.concat(found, ignore_index=True) if found else None


def _mine(rows: pd.DataFrame, commitments: tuple[str, ...]) -> pd.DataFrame:
    """The ``rows`` whose commitment is one of ``commitments`` or holds one, with money on them."""
    ids = rows["commitment_discount_id"].fillna("").astype(str).str.rstrip("/")
    return rows[np.array([bool(i) and bool(b) and any(related(c, {i}) for c in commitments)
                          for i, b in zip(ids, rows["billed_cost"])], dtype=bool)]


def _dated(row, currency: str) -> str:
    """One commitment's purchase rows outside the window: the first row, the dates, the amount."""
    days = f"{row.first_start:%Y-%m-%d}" + (f" – {row.last_start:%Y-%m-%d}" if row.last_start != row.first_start else "")
    more = f" and {row.rows - 1:,} more row(s)" if row.rows > 1 else ""
    return f"{text(row.first_line)}{more} ({days}, {cents(row.billed_cost)} {currency} billed)"


def _purchases_outside(lines: pd.DataFrame, classified: pd.DataFrame, commitments: tuple[str, ...]) -> pd.DataFrame:
    """The priced commitment purchase lines the scope leaves out whose commitment is one of
    ``commitments`` or holds one (a reservation order's purchase, its reservations' usage)."""
    chosen = commitment_purchases(lines).to_numpy(dtype=bool) & ~lines.index.isin(classified.index)
    if not chosen.any():
        return lines.iloc[:0]
    return _mine(lines[chosen], commitments)
