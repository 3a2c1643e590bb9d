"""audit.json ``months``: each calendar month of a window that spans two or more, audited as a
sub-window on the same reading of the sources (audit/pipeline.py, METHOD §10).

Each month is rounded on its own (its total to the cent, its buckets by largest remainder to that
total); the quarter's figures are the sums of the rounded months, and the audit's headline total and
bucket amounts are those sums, so that the quarter and the headline agree to the cent.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from audit.audit_json_cents import Cents, rounded
from audit.buckets import BUCKETS
from audit.money import ZERO, cents, dsum, fmt, largest_remainder, share
from audit.result import AuditResult

UNIT_PLACES = 6
NOTE = "the quarter's figures are the sums of the rounded months"


def _iso(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def months_section(result: AuditResult) -> dict[str, Any] | None:
    """The months and the quarter (their sums); None when the window lies inside one calendar month."""
    if not result.months:
        return None
    months = [month_entry(m) for m in result.months]
    services = sorted({name for m in months for name in m["services"]})
    summed = {name: _quarter_service([m["services"].get(name) for m in months]) for name in services}
    quarter = {
        "total": str(dsum(Decimal(m["total"]) for m in months)),
        "buckets": {b: str(dsum(Decimal(m["buckets"][b]) for m in months)) for b in BUCKETS},
        "services": summed,
    }
    # services_note: whole_window_differences, once the whole window is rounded (audit/audit_json.py)
    return {"months": months, "quarter": quarter, "note": NOTE, "services_note": None}


def whole_window_differences(rounded: Cents, quarter: dict[str, dict[str, Any]]) -> str | None:
    """Where a service's quarter (the sum of its months) differs from its whole-window cost (the
    services table's ``total_cost``, ``rounded``): each month splits its shared cost by that month's
    allocation key, the whole window by the window's; named with both figures, never left to be found."""
    found = []
    for name, entry in sorted(quarter.items()):
        held = rounded.services.get(name)
        whole = held.total if held is not None else ZERO
        summed = Decimal(entry["total_cost"])
        entry["whole_window_cost"] = str(whole)
        entry["difference"] = str(summed - whole)
        if summed != whole:
            found.append(f"{name} {summed} against {whole} ({summed - whole:+})")
    if not found:
        return None
    return ("a service's quarter column is the sum of its months, each of which splits its shared cost by that "
            "month's allocation key; the services table splits the whole window's shared cost by the window's "
            "key, so they differ: " + "; ".join(found))


def month_entry(month: AuditResult) -> dict[str, Any]:
    """One month: its window, total, buckets and shares, unit costs per service and coverage."""
    total = cents(month.reconciliation.conservation.in_scope_total)
    raw = {b: ZERO for b in BUCKETS}
    for part in month.ledger.parts.values():
        raw[part.bucket] += part.amount
    buckets = largest_remainder(raw, total)
    held = rounded(month, total).services  # the month's services rounded together, as the headline's are
    paid = dsum(c.paid_seconds for c in month.coverage.values())
    seen = dsum(c.observed_seconds for c in month.coverage.values())
    unpaid = dsum(c.seen_unpaid_seconds for c in month.coverage.values())  # GPU-hours seen that no line pays
    return {"month": month.case.start.strftime("%Y-%m"),
            "window": {"start": _iso(month.case.start), "end": _iso(month.case.end)},
            "total": str(total), "buckets": {b: str(buckets[b]) for b in BUCKETS},
            "shares": {b: share(buckets[b], total) for b in BUCKETS},
            "services": {name: _service(uc, held[name].total) for name, uc in sorted(month.unit_costs.items())},
            "coverage": {"gpu_hours_paid": fmt(paid / 3600, 2), "gpu_hours_observed": fmt(seen / 3600, 2),
                         "share": share(seen, paid), "seen_unpaid_gpu_hours": fmt(unpaid / 3600, 2)}}


def _service(uc, cost: Decimal) -> dict[str, Any]:
    """A service's month: ``cost`` its total rounded with the month's other figures (audit/audit_json_cents.py:
    services, unattributed and the unallocated share add to the month's total), its unit costs from the
    exact own + shared cost."""
    full = uc.own + uc.shared
    t = uc.traffic
    requests = int(t.requests) if t is not None and t.requests is not None else None
    tokens = int(t.tokens) if t is not None and t.tokens is not None else None
    return {"total_cost": str(cost), "requests": requests,
            "cost_per_1k_requests": fmt(full * 1000 / requests, UNIT_PLACES) if requests else None,
            "cost_per_1m_tokens": fmt(full * 1_000_000 / tokens, UNIT_PLACES) if tokens else None}


def _quarter_service(entries: list[dict[str, Any] | None]) -> dict[str, Any]:
    present = [e for e in entries if e is not None]
    counted = [e["requests"] for e in present if e["requests"] is not None]
    return {"total_cost": str(dsum(Decimal(e["total_cost"]) for e in present)),
            "requests": sum(counted) if counted else None}
