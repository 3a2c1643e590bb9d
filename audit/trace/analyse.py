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
from typing import TYPE_CHECKING, Iterator, Sequence

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
    """:func:`analyse`, unguarded, in this process. pandas (the call-path tables) is loaded before
    the traces are read: short of memory, it is the analysis that fails (one named error), not the
    loading of a library half-way through (an ImportError, or worse).

    The set is read first (what HTA's rules and the rank numbers take across ranks:
    :func:`set_terms`), then each rank is analysed by :func:`rank_parts`, the function the worker
    processes of :mod:`audit.trace.fanout` run, and :func:`assemble` joins them."""
    import pandas  # noqa: F401

    from audit.trace.findings import load_profile

    traces = [load_profile(Path(p)) for p in paths]
    headers = [rank_header(t) for t in traces]
    ranks, filter_steps, origin = set_terms(headers)
    warnings = rank_claims(paths, [written for written, _, _ in headers], ranks)
    return assemble(paths, price, [rank_parts(t, r, filter_steps, origin, price) for r, t in zip(ranks, traces)],
                    warnings)


def rank_header(trace: Trace) -> tuple[int | None, list[str], float | None]:
    """What the rest of its set needs of one rank: its distributedInfo rank, its ProfilerStep
    names and its base (None when it holds only Trace-category events)."""
    from connectors.profiles.events import TRACE

    return (trace.rank, sorted(n for n in trace.names if "ProfilerStep" in n),
            trace.base if bool((trace.role != TRACE).any()) else None)


def set_terms(headers: list[tuple[int | None, list[str], float | None]]) -> tuple[list[int], bool, float]:
    """From the headers of a set's ranks (:func:`rank_header`), in order: the distinct rank of each
    (as ``breakdown.ranks``), whether HTA's rules drop the last ProfilerStep (the set names more
    than one) and HTA's time origin (the set's earliest base), as ``breakdown.hta_breakdown``."""
    from connectors.profiles.rankset import distinct_ranks

    ranks = distinct_ranks([written for written, _, _ in headers])
    steps = {name for _, names, _ in headers for name in names}
    origin = min((base for _, _, base in headers if base is not None), default=0.0)
    return ranks, len(steps) > 1, origin


def rank_claims(paths: list[Path], written: list[int | None], ranks: list[int]) -> list[str]:
    """What the set's ranks say of its files (``written``: each file's distributedInfo rank, ``ranks``
    those :func:`set_terms` gave). Two files of the same content (sha256) are an error naming both:
    one trace given twice, whose GPU time would be counted twice. A file whose rank an earlier file
    holds is read at the rank it was given (docs/trace.md), with a warning naming both files, the
    rank claimed and the rank given."""
    from connectors.profiles.rankset import claimed_twice, no_copies

    no_copies(paths, written)
    return claimed_twice(paths, written, ranks)


def rank_parts(trace: Trace, rank: int, filter_steps: bool, origin: float, price: Decimal | None) -> dict:
    """Everything the document says of one rank, given the set's terms (:func:`set_terms`): its
    ``ranks`` and ``hta_compatible`` entries, its call paths, idle paths and findings (None and
    [] without GPU work) and its folded stacks. Small: no per-event column."""
    from audit.trace.breakdown import _hta_rank, breakdown
    from audit.trace.callpath import folded_stacks
    from audit.trace.findings import views_findings
    from audit.trace.idle import idle_folded
    from audit.trace.profile_view import ProfileView
    from connectors.profiles.events import GPU_WORK
    from connectors.profiles.intervals import among

    (entry,) = breakdown([trace])
    entry = _rounded({**entry, "rank": rank})
    for device in entry["devices"]:
        active = device["kernel_active_us"]
        device["gap_ratio"] = round((device["window_us"] - active) / active, 6) if active > 0 else None
    parts = {"rank": entry, "hta": _rounded({"rank": rank, "file": trace.path.name,
                                             **_hta_rank(trace, filter_steps, origin)}),
             "call_paths": None, "idle_paths": None, "findings": [], "stacks": [], "idle_stacks": []}
    if among(trace.role, GPU_WORK).any():
        view = ProfileView(trace, rank)
        parts.update(call_paths=top_call_paths(rank, trace, view), idle_paths=top_idle_paths(rank, trace, view, price),
                     findings=views_findings(view, price), stacks=folded_stacks(trace, view.paths),
                     idle_stacks=idle_folded(view))
    return parts


def assemble(paths: list[Path], price: Decimal | None, parts: list[dict],
             warnings: Sequence[str] = ()) -> tuple[dict, list[str], list[str]]:
    """The document of a rank set and its folded stacks, from its ranks' parts in order; ``warnings``
    what the set's reading said (:func:`rank_claims`)."""
    document = {"format": 1, "traces": [str(p) for p in paths], "price_per_gpu_hour": None if price is None else str(price),
                "warnings": list(warnings),
                "ranks": [p["rank"] for p in parts], "hta_compatible": [p["hta"] for p in parts],
                "call_paths": [p["call_paths"] for p in parts if p["call_paths"] is not None],
                "idle_paths": [p["idle_paths"] for p in parts if p["idle_paths"] is not None],
                "findings": sorted_findings([f for p in parts for f in p["findings"]])}
    return (document, [line for p in parts for line in p["stacks"]],
            [line for p in parts for line in p["idle_stacks"]])


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
    """One rank's GPU time (``window_us``), its idle by class and its top idle call paths (at most TOP_PATHS): ``callpath``,
    ``category``, ``idle_us``, ``gaps``, ``share`` of the profile's GPU time and, given a price,
    ``cost`` = share × price (per GPU-hour the workload runs, as the findings' cost)."""
    from audit.trace.idle import idle_by_category, idle_groups

    top = []
    for group in idle_groups(view)[:TOP_PATHS]:
        row = {k: group[k] for k in ("callpath", "category", "idle_us", "gaps", "share")}
        if price is not None and group["share"] is not None:
            row["cost"] = format((Decimal(group["share"]) * price).quantize(Decimal("0.0001")), "f")
        top.append(row)
    return {"rank": rank, "file": trace.path.name, "window_us": round(view.window_us, 3),
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
