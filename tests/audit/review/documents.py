"""Small hand-made audit.json documents that follow the issue-15 contract (docs/audit-json.md):
just the sections a review reads, with the composition footing to the total."""
from __future__ import annotations

import copy
from decimal import Decimal

from audit.money import cents, dsum, largest_remainder

METHOD = "2026-12"


def component(cost, quantity=None, unit=None) -> dict:
    """A component: GPU time where a quantity is given, else currency (quantity = cost)."""
    if quantity is None:
        return {"cost": str(cost), "quantity": str(cost), "unit": "currency"}
    return {"cost": str(cost), "quantity": str(quantity), "unit": unit or "gpu_second"}


def audit(case: str = "q2", services: dict | None = None, *, unattributed="0", unallocated="0",
          basis: str = "effective", currency: str = "USD", method: str | None = METHOD, scope: dict | None = None,
          options: list | None = None, shipped: list | None = None, skus: dict | None = None,
          accounts: dict | None = None, coverage=("100.00", "100.00"), window=("2026-04-01", "2026-07-01")) -> dict:
    """An audit.json document; ``services`` maps name → {"requests", "components", optional "daily"}."""
    services = copy.deepcopy(services or {})
    exact = {f"s:{n}": dsum(Decimal(c["cost"]) for c in s.get("components", {}).values()) for n, s in services.items()}
    exact["unattributed"], exact["unallocated"] = Decimal(unattributed), Decimal(unallocated)
    total = cents(dsum(exact.values()))
    rounded = largest_remainder(exact, total)
    entries = {}
    for name, s in services.items():
        requests = s.get("requests")
        cost = rounded[f"s:{name}"]
        entries[name] = {"requests": requests, "total_cost": str(cost), "components": s.get("components", {}),
                         "daily": s.get("daily", []),
                         "cost_per_1k_requests": str(cents(cost * 1000 / requests)) if requests else None}
    parts = [{"name": "kernel_active", "service": n, "amount": str(rounded[f"s:{n}"])} for n in services]
    buckets = {"model_compute": {"amount": str(dsum(rounded[f"s:{n}"] for n in services)), "share": "0.9",
                                 "parts": parts},
               "serving_path": {"amount": "0.00", "share": "0", "parts": []},
               "platform_overhead": {"amount": str(rounded["unallocated"]), "share": "0",
                                     "parts": [{"name": "unallocated", "service": None,
                                                "amount": str(rounded["unallocated"])}]},
               "unattributed": {"amount": str(rounded["unattributed"]), "share": "0",
                                "parts": [{"name": "unmatched_line", "service": None,
                                           "amount": str(rounded["unattributed"])}]}}
    return {
        "meta": {"format": 1, "tool": "costaudit", "version": "0.1.0", **({"method": method} if method else {})},
        "case": case, "window": {"start": window[0] + "T00:00:00Z", "end": window[1] + "T00:00:00Z"},
        "currency": currency, "cost_basis": basis, "total": str(total),
        "scope": scope if scope is not None else {"accounts": ["111111111111"], "tags": None, "services": None,
                                                  "declared_services": sorted(services)},
        "composition": {"services": {n: str(rounded[f"s:{n}"]) for n in sorted(services)},
                        "unattributed": str(rounded["unattributed"]), "unallocated": str(rounded["unallocated"]),
                        "total": str(total)},
        "services": entries, "buckets": buckets,
        "coverage": {"paid_gpu_hours": coverage[0], "observed_gpu_hours": coverage[1]},
        "options": options or [], "shipped": shipped or [],
        "lines": {"skus": [{"id": k, "amount": v} for k, v in (skus or {}).items()],
                  "accounts": [{"account": k, "amount": v} for k, v in (accounts or {}).items()],
                  "other_skus": "0.00", "note": None},
    }
