"""Kernel-level findings of a profile (METHOD §6): what wastes GPU time, where, and what it costs.

Each finding names the kernel identity and the call path that launched it, its share of the
profile's GPU time (the sum of the device windows: first to last GPU work per device), the bucket
part it lies in, its ``share_of_part``: its GPU time as a share of the profile's time that part
stands for (its idle for ``in_flight_idle``, its busy time for ``kernel_active``), and, given a
price per GPU-hour, its cost: ``cost`` = share × price, what the
waste costs per GPU-hour the profiled workload runs (4 places), and ``profile_cost`` = the
finding's GPU time in the profile × price (9 places). In an audit, a finding's money is its
``share_of_part`` × the amount of its bucket part (METHOD §6), so that the findings and idle paths
of a part never cost more than the part. Findings explain the buckets and never add to them.
``findings_from_profile`` is the entry point (docs/trace.md lists every rule).
"""
from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

from audit.trace.breakdown import ranks
from audit.trace.findings_idle import copy_overhead, host_compute, launch_bound, sync_waste
from audit.trace.findings_kernels import batch_size_mismatch, memory_bound_chains
from audit.trace.findings_rules import IDLE, Finding, input_bound
from audit.trace.profile_view import ProfileView
from connectors.profiles.events import GPU_WORK, Trace
from connectors.profiles.intervals import among

RULES = (sync_waste, input_bound, launch_bound, host_compute, copy_overhead, memory_bound_chains, batch_size_mismatch)
BUCKET_OF_PART = {IDLE: "serving_path", "kernel_active": "model_compute"}
US_PER_HOUR = Decimal(3_600_000_000)


def load_profile(path: Path) -> Trace:
    """A Kineto Chrome trace (.json, .json.gz) or an Nsight Systems SQLite export (.sqlite)."""
    path = Path(path)
    if path.suffix in (".sqlite", ".db", ".sqlite3"):
        from connectors.profiles.nsys import kernel_view, read_nsys
        trace = read_nsys(path)
        kernel_view(path, trace)  # an export of copies alone is refused, as in a case
        return trace
    from connectors.profiles.events import read_trace
    return read_trace(path)


def findings_from_profile(path: Path | str, price_per_gpu_hour: Decimal | str | float | None = None) -> list[dict]:
    """JSON-able findings of one profile, largest GPU time first (money as decimal strings)."""
    return findings_from_traces([load_profile(Path(path))], price_per_gpu_hour)


def findings_from_traces(traces: list[Trace], price_per_gpu_hour=None) -> list[dict]:
    """Findings of a set of traces (one per rank), largest GPU time first."""
    price = None if price_per_gpu_hour is None else Decimal(str(price_per_gpu_hour))
    out = []
    for rank, trace in zip(ranks(traces), traces):
        if among(trace.role, GPU_WORK).any():
            out += views_findings(ProfileView(trace, rank), price)
    return sorted(out, key=lambda f: (-float(f["gpu_ms"]), f["id"], f["trace"], f["call_path"]))


def views_findings(view: ProfileView, price: Decimal | None = None) -> list[dict]:
    """Findings of one prepared view (trace_cli reuses the view it already built)."""
    out = [finding_dict(f, view, price) for rule in RULES for f in rule(view)]
    return sorted(out, key=lambda f: (-float(f["gpu_ms"]), f["id"], f["call_path"]))


def part_time(view: ProfileView, part: str) -> Decimal:
    """The profile's GPU time (us) that a bucket part stands for: its idle for ``in_flight_idle``,
    its busy time (window less idle) for ``kernel_active``."""
    from audit.trace.idle import idle_by_category

    idle = Decimal(repr(sum(idle_by_category(view).values())))
    return idle if part == IDLE else Decimal(repr(view.window_us)) - idle


def finding_dict(finding: Finding, view: ProfileView, price: Decimal | None) -> dict:
    """The JSON form of one finding: shares to 6 places, money as decimal strings."""
    gpu_us = Decimal(repr(float(finding.gpu_us)))
    window = Decimal(repr(view.window_us)) if view.window_us > 0 else None
    share = gpu_us / window if window else None
    of_part = part_time(view, finding.part)
    out = {
        "id": finding.id, "title": finding.title, "trace": view.trace.path.name, "rank": view.rank,
        "device": str(view.trace.device_keys[finding.device]), "kernel": finding.kernel,
        "call_path": finding.call_path, "gpu_ms": f"{gpu_us / 1000:.3f}",
        "share": None if share is None else f"{share:.6f}",
        "share_of_part": f"{gpu_us / of_part:.6f}" if of_part > 0 else None,
        "bucket": BUCKET_OF_PART[finding.part], "part": finding.part,
        "price_per_gpu_hour": None if price is None else str(price),
        "cost": None, "profile_cost": None,
        "reason": "no price per GPU-hour given" if price is None else None,
        "evidence": finding.evidence, "fix": finding.fix,
    }
    if price is not None:
        out["profile_cost"] = format((gpu_us * price / US_PER_HOUR).quantize(Decimal("1e-9"), ROUND_HALF_EVEN), "f")
        if share is not None:
            out["cost"] = format((share * price).quantize(Decimal("0.0001"), ROUND_HALF_EVEN), "f")
    return out
