"""Stage 3: every cost-basis amount in scope goes to one bucket part, with its source and reason."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from audit.buckets import BUCKETS
from audit.gpusplit import NO_SAMPLE, NOT_IN_TELEMETRY, UNALLOCATED, UNDECLARED, UNKNOWN, Group
from audit.money import ZERO

CLASS_PARTS = {
    "serving_compute": ("serving_path", "serving_compute"),
    "serving_network": ("serving_path", "serving_network"),
    "egress": ("platform_overhead", "egress"),
    "observability": ("platform_overhead", "observability"),
    "orchestration": ("platform_overhead", "orchestration"),
    "commitment_unused": ("platform_overhead", "commitment_unused"),
    "unmatched": ("unattributed", "unmatched_line"),
}
HOLDER_PARTS = {
    UNALLOCATED: ("platform_overhead", "unallocated", "GPU time of GPUs no workload held"),
    UNKNOWN: ("unattributed", "allocation_unknown",
              "allocation unknown: neither pod labels nor scheduler GPU requests for these GPU-intervals"),
    UNDECLARED: ("unattributed", "undeclared_workload", "pods that match no [services] entry"),
    NO_SAMPLE: ("unattributed", "no_activity_sample", "GPU-intervals with no kernel-activity sample"),
    NOT_IN_TELEMETRY: ("unattributed", "gpu_not_in_telemetry",
                       "GPUs billed on the invoice that telemetry never names"),
}


@dataclass
class Part:
    """One named part of a bucket, summed over the window."""

    bucket: str
    name: str
    service: str | None
    amount: Decimal = ZERO
    gpu_seconds: Decimal | None = None
    sources: set = field(default_factory=set)
    reason: str = ""


@dataclass
class ServiceInterval:
    """The split of one service's GPUs over one interval (METHOD §3 table)."""

    service: str
    ts: datetime
    gpus: int
    paid: Decimal
    gross: Decimal
    priced: Decimal
    kernel: Decimal
    serving: Decimal | None
    overhead: Decimal
    headroom: Decimal | None
    paid_seconds: Decimal
    busy_seconds: Decimal
    serving_seconds: Decimal | None
    pods: frozenset = frozenset()


class Ledger:
    """Accumulates parts keyed by (bucket, name, service)."""

    def __init__(self):
        self.parts: dict[tuple, Part] = {}

    def add(self, bucket, name, service, amount, source, reason, seconds=None) -> None:
        key = (bucket, name, service)
        part = self.parts.get(key)
        if part is None:
            part = self.parts[key] = Part(bucket, name, service, reason=reason)
        part.amount += amount
        if seconds is not None:
            part.gpu_seconds = (part.gpu_seconds or ZERO) + seconds
        if source:
            part.sources.add(source)

    def total(self) -> Decimal:
        return sum((p.amount for p in self.parts.values()), ZERO)


def attribute_lines(ledger: Ledger, charges, billing_names: str) -> None:
    """Non-GPU classes go whole to their bucket part."""
    for klass, frame in charges.groupby("resource_class"):
        if klass == "gpu_compute" or klass not in CLASS_PARTS:
            continue
        bucket, name = CLASS_PARTS[klass]
        reasons = sorted(set(frame["rule_reason"]))
        source = f"FOCUS lines ({billing_names}), class {klass}"
        reason = "; ".join(reasons)[:300]
        ledger.add(bucket, name, None, sum(frame["net"], ZERO), source, reason)


def attribute_leftovers(ledger: Ledger, leftovers, billing_names: str) -> None:
    """Tax or credits with nothing to apply to are unattributed, never spread at random."""
    for item in leftovers:
        ledger.add("unattributed", "unapplied_adjustment", None, item.amount,
                   f"FOCUS line {item.line_id} ({billing_names})", item.reason)


def split_groups(ledger: Ledger, groups: dict, gap_of: dict, target: Decimal, describe) -> list[ServiceInterval]:
    """Apply METHOD §3 to every (holder, interval) group; return the per-service intervals.

    ``gap_of`` maps a profiled service to (gap ratio, the profile source that measured it).
    """
    intervals = []
    for (holder, ts), group in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if holder in HOLDER_PARTS:
            bucket, name, reason = HOLDER_PARTS[holder]
            ledger.add(bucket, name, None, group.paid, describe(group, None), reason, group.paid_seconds)
            continue
        intervals.append(_split_service(ledger, group, gap_of.get(holder), target, describe))
    return intervals


def _split_service(ledger, group: Group, profiled, target, describe) -> ServiceInterval:
    service, P, B = group.holder, group.paid, group.busy
    gap, profile_name = profiled if profiled else (None, None)
    src = describe(group, service)
    if gap is None:
        ledger.add("unattributed", "no_kernel_profile", service, B, src,
                   "kernel-active time of a service with no kernel profile", group.busy_seconds)
        ledger.add("platform_overhead", "idle_not_separated", service, P - B, src,
                   "idle GPU time; serving-path share not separated (no profile)",
                   group.paid_seconds - group.busy_seconds)
        return ServiceInterval(service, group.ts, group.gpus, P, group.gross, group.priced, B, None, P - B,
                               None, group.paid_seconds, group.busy_seconds, None, frozenset(group.pods))
    S = min(gap * B, P - B)
    S_sec = min(gap * group.busy_seconds, group.paid_seconds - group.busy_seconds)
    O = P - B - S
    headroom = min(O, max(ZERO, (B + S) / target - B - S))
    ledger.add("model_compute", "kernel_active", service, B, src,
               "forward-pass kernel time; includes padding not separated", group.busy_seconds)
    ledger.add("serving_path", "in_flight_idle", service, S, src + f"; gap ratio g = {gap:.4f} from kernel profile {profile_name}",
               "GPU idle the serving path causes while it serves: min(g × B, P − B)", S_sec)
    ledger.add("platform_overhead", "headroom", service, headroom, src,
               f"idle kept as headroom at target utilisation {target}")
    ledger.add("platform_overhead", "capacity_above_demand", service, O - headroom, src,
               "paid GPU time the served work did not need, beyond headroom")
    return ServiceInterval(service, group.ts, group.gpus, P, group.gross, group.priced, B, S, O, headroom,
                           group.paid_seconds, group.busy_seconds, S_sec, frozenset(group.pods))


def bucket_totals(ledger: Ledger) -> dict[str, Decimal]:
    """Unrounded total per bucket."""
    totals = defaultdict(lambda: ZERO)
    for part in ledger.parts.values():
        totals[part.bucket] += part.amount
    return {b: totals[b] for b in BUCKETS}
