"""The report's rows of a profile's top idle call paths (audit.json ``profiles[i].idle_paths``)."""
from __future__ import annotations

from typing import Any

from audit.reporters.formatting import number, percent

CLASS_WORDS = {"sync_drain": "sync drain", "host_compute": "host compute", "launch_bound": "launch-bound",
               "input_wait": "input wait", "copy_bound": "copy-bound", "gpu_side": "GPU-side wait",
               "untraced": "untraced", "other": "all other paths"}


def idle_rows(profile: dict[str, Any], limit: int = 5) -> list[dict[str, str]]:
    """Formatted rows (call path, class, ms, share of the profile's GPU time, share of its idle: the
    time serving_path.in_flight_idle stands for, the share the cost is taken on, cost) of the
    largest idle call paths."""
    rows = []
    for r in (profile.get("idle_paths") or [])[:limit]:
        path = r.get("callpath") or ""
        rows.append({"callpath": path if len(path) <= 260 else "…" + path[-259:],
                     "category": CLASS_WORDS.get(r.get("category") or "", r.get("category") or ""),
                     "ms": number(float(r.get("idle_us") or 0) / 1000, 2), "share": percent(r.get("share")),
                     "share_of_part": percent(r.get("share_of_part")),
                     "cost": number(r["cost"], 2) if r.get("cost") is not None else "not measured"})
    return rows
