"""The coverage table's view: paid, observed and seen-but-unpaid GPU-hours, in total and by node."""
from __future__ import annotations

from typing import Any

from audit.reporters.formatting import NOT_MEASURED, number, percent, to_decimal


def hours(v: Any) -> str:
    return number(v, 2) if v is not None else NOT_MEASURED


def coverage_view(c: dict) -> dict[str, Any]:
    rows = []
    for n in c.get("by_node") or []:
        paid, seen = to_decimal(n.get("paid_gpu_hours")), to_decimal(n.get("observed_gpu_hours"))
        rows.append({"node": n.get("node") or "", "resource_id": n.get("resource_id") or "",
                     "instance_type": n.get("instance_type") or "",
                     "paid": hours(n.get("paid_gpu_hours")),
                     "observed": hours(n.get("observed_gpu_hours")),
                     "seen_unpaid": hours(n.get("seen_unpaid_gpu_hours", "0")),
                     "share": percent(seen / paid) if paid and seen is not None else "—"})
    beyond = to_decimal(c.get("seen_unpaid_gpu_hours"))
    return {"paid": hours(c.get("paid_gpu_hours")), "observed": hours(c.get("observed_gpu_hours")),
            "unmeasured": hours(c.get("unmeasured_gpu_hours")), "by_node": rows,
            "seen_unpaid": hours(c.get("seen_unpaid_gpu_hours")) if beyond else ""}
