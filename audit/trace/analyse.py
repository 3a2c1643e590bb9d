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
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from audit.trace.profile_view import ProfileView
    from connectors.profiles.events import Trace

TOP_PATHS = 10


def analyse(paths: list[Path], price: Decimal | None) -> tuple[dict, list[str]]:
    """The JSON document of a rank set, and its folded stacks (GPU time)."""
    document, stacks, _ = analyse_with_idle(paths, price)
    return document, stacks


def analyse_with_idle(paths: list[Path], price: Decimal | None) -> tuple[dict, list[str], list[str]]:
    """The JSON document of a rank set, its folded stacks of GPU time and its folded stacks of
    idle time (the idle flame graph: each gap under the call path it is attributed to).

    Running out of memory (a trace of tens of millions of events on a small machine) is one named
    error, not a traceback.
    """
    try:
        return _analyse(paths, price)
    except MemoryError:
        from connectors.errors import InputError

        raise InputError(", ".join(str(p) for p in paths), "not enough memory to analyse the trace "
                         "(it needs about 30 bytes per event)",
                         expected="fewer ranks at once, or a machine with more memory") from None


def _analyse(paths: list[Path], price: Decimal | None) -> tuple[dict, list[str], list[str]]:
    """:func:`analyse`, unguarded. pandas (the call-path tables) is loaded before the traces are
    read: short of memory, it is the analysis that fails (one named error), not the loading of a
    library half-way through (an ImportError, or worse)."""
    import pandas  # noqa: F401

    from audit.trace.breakdown import breakdown, hta_breakdown
    from audit.trace.callpath import folded_stacks
    from audit.trace.findings import load_profile, views_findings
    from audit.trace.idle import idle_folded

    traces = [load_profile(Path(p)) for p in paths]
    document = {"format": 1, "traces": [str(p) for p in paths], "price_per_gpu_hour": None if price is None else str(price),
                "ranks": _rounded(breakdown(traces)), "hta_compatible": _rounded(hta_breakdown(traces)),
                "call_paths": [], "idle_paths": [], "findings": []}
    stacks: list[str] = []
    idle_stacks: list[str] = []
    for rank, trace, view in gpu_views(traces):
        document["call_paths"].append(top_call_paths(rank, trace, view))
        document["idle_paths"].append(top_idle_paths(rank, trace, view, price))
        document["findings"] += views_findings(view, price)
        stacks += folded_stacks(trace, view.paths)
        idle_stacks += idle_folded(view)
    document["findings"] = sorted_findings(document["findings"])
    for device in (d for r in document["ranks"] for d in r["devices"]):
        active = device["kernel_active_us"]
        device["gap_ratio"] = round((device["window_us"] - active) / active, 6) if active > 0 else None
    return document, stacks, idle_stacks


def kernel_evidence(traces: list[Trace]) -> tuple[list[dict], list[dict], list[dict]]:
    """The call paths, the (unpriced) findings and the idle call paths of a rank set, as
    :func:`analyse` reports them.

    The audit's evidence stage calls this on the traces its profiles connectors parsed.
    """
    from audit.trace.findings import views_findings

    call_paths, findings, idle = [], [], []
    for rank, trace, view in gpu_views(traces):
        call_paths.append(top_call_paths(rank, trace, view))
        idle.append(top_idle_paths(rank, trace, view, None))
        findings += views_findings(view, None)
    return call_paths, sorted_findings(findings), idle


def top_idle_paths(rank: int, trace: Trace, view: ProfileView, price: Decimal | None) -> dict:
    """One rank's idle by class and its top idle call paths (at most TOP_PATHS): ``callpath``,
    ``category``, ``idle_us``, ``gaps``, ``share`` of the profile's GPU time and, given a price,
    ``cost`` = share × price (per GPU-hour the workload runs, as the findings' cost)."""
    from audit.trace.idle import idle_by_category, idle_groups

    top = []
    for group in idle_groups(view)[:TOP_PATHS]:
        row = {k: group[k] for k in ("callpath", "category", "idle_us", "gaps", "share")}
        if price is not None and group["share"] is not None:
            row["cost"] = format((Decimal(group["share"]) * price).quantize(Decimal("0.0001")), "f")
        top.append(row)
    return {"rank": rank, "file": trace.path.name,
            "by_category_us": {k: round(v, 3) for k, v in idle_by_category(view).items()}, "top": top}


def gpu_views(traces: list[Trace]) -> Iterator[tuple[int, Trace, ProfileView]]:
    """(rank, trace, view) of every trace of a rank set with GPU work, one view at a time."""
    from audit.trace.breakdown import ranks
    from audit.trace.profile_view import ProfileView
    from connectors.profiles.events import GPU_WORK
    from connectors.profiles.intervals import among

    for rank, trace in zip(ranks(traces), traces):
        if among(trace.role, GPU_WORK).any():
            yield rank, trace, ProfileView(trace, rank)


def top_call_paths(rank: int, trace: Trace, view: ProfileView) -> dict:
    """One rank's busiest call paths by GPU time (at most TOP_PATHS)."""
    from audit.trace.callpath import path_table

    table = path_table(trace, view.paths).head(TOP_PATHS)
    return {"rank": rank, "file": trace.path.name, "top": [
        {"call_path": r.call_path, "top_kernel": r.top_kernel, "events": int(r.events),
         "gpu_us": round(float(r.gpu_us), 3), "share_of_gpu_work": f"{r.share:.6f}"}
        for r in table.itertuples()]}


def sorted_findings(findings: list[dict]) -> list[dict]:
    """Findings largest GPU time first (then id, trace, call path)."""
    return sorted(findings, key=lambda f: (-float(f["gpu_ms"]), f["id"], f["trace"], f["call_path"]))


def _rounded(value):
    """Floats rounded to 3 decimals (nanoseconds when in microseconds), recursively."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
