"""The analysis behind `costaudit trace` and the audit's kernel evidence: one document per rank set.

Several files are read as the ranks of one job (Kineto Chrome traces, .json / .json.gz, or Nsight
Systems SQLite exports). Printed per rank: each device's window, busy and idle time, kernel-active
time, serving gap ratio, coarse and fine categories, its busiest streams; the same figures under
HTA's rules; the top call paths by GPU time; then the findings, priced when a price is given.
``--json`` prints the same as one JSON document (format 1).
"""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np

TOP_PATHS = 10


def analyse(paths: list[Path], price: Decimal | None) -> tuple[dict, list[str]]:
    """The JSON document of a rank set, and its folded stacks."""
    from audit.trace.findings import load_profile, views_findings
    from audit.trace.profile_view import ProfileView
    from audit.trace.breakdown import breakdown, hta_breakdown, ranks
    from audit.trace.callpath import folded_stacks, path_table
    from connectors.profiles.events import GPU_WORK

    traces = [load_profile(Path(p)) for p in paths]
    document = {"format": 1, "traces": [str(p) for p in paths], "price_per_gpu_hour": None if price is None else str(price),
                "ranks": _rounded(breakdown(traces)), "hta_compatible": _rounded(hta_breakdown(traces)),
                "call_paths": [], "findings": []}
    stacks: list[str] = []
    for rank, trace in zip(ranks(traces), traces):
        if not np.isin(trace.role, GPU_WORK).any():
            continue
        view = ProfileView(trace, rank)
        table = path_table(trace, view.paths).head(TOP_PATHS)
        document["call_paths"].append({"rank": rank, "file": trace.path.name, "top": [
            {"call_path": r.call_path, "top_kernel": r.top_kernel, "events": int(r.events),
             "gpu_us": round(float(r.gpu_us), 3), "share_of_gpu_work": f"{r.share:.6f}"}
            for r in table.itertuples()]})
        document["findings"] += views_findings(view, price)
        stacks += folded_stacks(trace, view.paths)
    document["findings"].sort(key=lambda f: (-float(f["gpu_ms"]), f["id"], f["trace"], f["call_path"]))
    for device in (d for r in document["ranks"] for d in r["devices"]):
        active = device["kernel_active_us"]
        device["gap_ratio"] = round((device["window_us"] - active) / active, 6) if active > 0 else None
    return document, stacks


def _rounded(value):
    """Floats rounded to 3 decimals (nanoseconds when in microseconds), recursively."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
