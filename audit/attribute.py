"""Stage 3: every cost-basis amount in scope goes to one bucket part, with its source and reason.

Non-GPU classes go whole to their part; adjustments with nothing to apply to are unattributed;
each (holder, interval) sum of the GPU split is divided by METHOD §3 into kernel-active time, the
serving-path gap, headroom and capacity above demand.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Callable, Iterable, Mapping, Sequence

import pandas as pd

from audit.billing_words import lines_of, noun, unused_reason
from audit.buckets import BUCKETS, CLASS_PARTS
from audit.case import Case
from audit.collected import Collected
from audit.ledger import (
    NO_GPU_TIME,
    NO_SAMPLE,
    NO_VALID_SAMPLE,
    NOT_IN_TELEMETRY,
    UNALLOCATED,
    UNDECLARED,
    UNKNOWN,
    Attribution,
    GpuSplit,
    Group,
    Ledger,
    Leftover,
    ServiceInterval,
)
from audit.lines import NAME_COLUMNS, line_name, listed, named_amounts
from audit.money import ZERO
from audit.normalised import ProfileSummary

#: how a part names the measurements behind a group: (group, service or None) -> source text
Describer = Callable[[Group, "str | None"], str]

HOLDER_PARTS = {
    UNALLOCATED: ("platform_overhead", "unallocated", "GPU time of GPUs no workload held"),
    UNKNOWN: ("unattributed", "allocation_unknown",
              "allocation unknown: neither pod labels nor scheduler GPU requests for these GPU-intervals"),
    UNDECLARED: ("unattributed", "undeclared_workload", "pods that match no [services] entry"),
    NO_SAMPLE: ("unattributed", "no_activity_sample", "GPU-intervals with no kernel-activity sample"),
    NO_VALID_SAMPLE: ("unattributed", "no_valid_activity_sample",
                      "GPU-intervals whose every kernel-activity sample was excluded (out of range "
                      "or not finite; counted under telemetry.excluded_samples)"),
    NOT_IN_TELEMETRY: ("unattributed", "gpu_not_in_telemetry",
                       "GPUs billed on the invoice that telemetry never names"),
    NO_GPU_TIME: ("unattributed", "gpu_time_not_billed",
                  "GPU lines of resources no line bills GPU time for (no GPU meter, no instance or machine type "
                  "with GPUs): how many GPUs they paid for, and for how long, is not in the bill"),
}


def attribute(case: Case, collected: Collected, charges: pd.DataFrame, leftovers: Iterable[Leftover],
              split: GpuSplit, profiles: Mapping[str, ProfileSummary], undeclared: Sequence[str] = ()) -> Attribution:
    """Every charge, leftover and GPU-interval group of the case into the ledger (METHOD §3);
    ``undeclared``: the pods no service matches, named in the undeclared-workload part's reason."""
    ledger = Ledger()
    formats = {f.spec.name: f.data_format for f in collected.of("billing")}
    billing = lines_of(formats.values(), collected.names("billing"))
    attribute_lines(ledger, charges, billing, formats)
    attribute_leftovers(ledger, leftovers, noun(formats.values()), collected.names("billing"))
    gaps = {s: (p.gap_ratio, f"{p.name} ({p.trace_label})")
            for s, p in profiles.items() if p.gap_ratio is not None}
    intervals = split_groups(ledger, split.groups, gaps, case.target_utilisation,
                             describer(collected, billing), undeclared_reason(undeclared))
    return Attribution(ledger, tuple(intervals))


#: the telemetry tables whose rows name the kernel-activity metric a GPU-interval was measured by
ACTIVITY_TABLES = ("gpu_activity", "unmeasured_intervals")


def describer(collected: Collected, billing: str) -> Describer:
    """The source text of the parts a GPU-interval group makes: its activity metrics, named with the
    telemetry sources whose activity rows carry them (a request log or a phase-timer file that holds
    no activity sample measured none of it), × the cost of ``billing`` (the billing lines, by format
    and source: :func:`audit.billing_words.lines_of`)."""
    by_metric = activity_sources(collected)
    looked = ", ".join(dict.fromkeys(n for names in by_metric.values() for n in names)) or "none"

    def describe(group: Group, service: str | None) -> str:
        if group.holder == NO_GPU_TIME:
            nodes = ", ".join(sorted(group.nodes)) or "none"
            return f"GPU lines of {billing} with no GPU time (nodes {nodes})"
        metrics = "/".join(sorted(group.sources)) or "no kernel-activity sample"
        names = [n for m in sorted(group.sources) for n in by_metric.get(m, ())]
        telemetry_names = ", ".join(dict.fromkeys(names)) or looked
        placed = "".join(f"; {note}" for note in sorted(group.placed))
        return f"{metrics} ({telemetry_names}) × GPU-interval cost of {billing}{placed}"
    return describe


def activity_sources(collected: Collected) -> dict[str, tuple[str, ...]]:
    """Kernel-activity metric -> the telemetry sources (in case order) whose activity rows carry it."""
    out: dict[str, dict[str, None]] = defaultdict(dict)
    for frame in collected.of("telemetry"):
        for name in ACTIVITY_TABLES:
            table = frame.tables.get(name)
            column = "source" if name == "gpu_activity" else "metric"
            if table is None or not len(table) or column not in table:
                continue
            for metric in table[column].drop_duplicates().astype(str):
                out[metric][frame.spec.name] = None
    return {metric: tuple(names) for metric, names in out.items()}


def attribute_lines(ledger: Ledger, charges: pd.DataFrame, billing: str, formats: Mapping[str, str]) -> None:
    """Non-GPU classes go whole to their bucket part: one part per class and owning service
    (METHOD §4: a line a rule or a service's claim assigns), one shared part per class for the rest.
    ``billing`` names the lines (:func:`audit.billing_words.lines_of`); ``formats``: billing source
    name → format, so that a rule's reason names the field of the export its lines came from."""
    owners = charges["claimed_by"] if "claimed_by" in charges.columns else pd.Series("", index=charges.index)
    read = [c for c in ("resource_class", "rule_reason", "claim_reason", "net", "line_count", "source", *NAME_COLUMNS)
            if c in charges.columns]
    narrow = charges[read]  # each group is a row take: of the columns read, not of every column
    for (klass, owner), frame in narrow.groupby([charges["resource_class"], owners.fillna("")], sort=True):
        if klass == "gpu_compute" or klass not in CLASS_PARTS:
            continue
        bucket, name = CLASS_PARTS[klass]
        read_from = [formats.get(n, "") for n in frame["source"].drop_duplicates()] if "source" in frame else []
        reasons = sorted({unused_reason(r, read_from) for r in set(frame["rule_reason"])})
        source = f"{billing}, class {klass}"
        if klass == "unmatched" and set(NAME_COLUMNS) <= set(frame.columns):
            source = f"{source}: {named_lines(frame)}"[:400]  # the lines are what measured it
        reason = "; ".join(reasons)[:300]
        if owner:
            claims = sorted(set(frame["claim_reason"])) if "claim_reason" in frame.columns else []
            reason = ("; ".join(claims)[:200] + "; " + reason)[:400]
        ledger.add(bucket, name, owner or None, sum(frame["net"], ZERO), source, reason)


def named_lines(frame: pd.DataFrame) -> str:
    """The unmatched lines of a part by name, largest first (one name: the part's amount is its)."""
    named = named_amounts(frame, frame["net"])
    if len(named) == 1:
        key, _, count = named[0]
        return f"{line_name(key)} ({count} line{'s' if count != 1 else ''})"
    return listed(named, 3)


def attribute_leftovers(ledger: Ledger, leftovers: Iterable[Leftover], billing_noun: str, billing_names: str) -> None:
    """Tax or credits with nothing to apply to are unattributed, never spread at random; each named
    as a line of the billing format (``billing_noun``) and sources it was read from."""
    for item in leftovers:
        ledger.add("unattributed", "unapplied_adjustment", None, item.amount,
                   f"{billing_noun} line {item.line_id} ({billing_names})", item.reason)


#: pods named in the undeclared-workload part's reason; then how many more
PODS_NAMED = 5


def undeclared_reason(pods: Sequence[str]) -> str:
    """The undeclared-workload part's reason, naming the pods (the first :data:`PODS_NAMED`)."""
    reason = HOLDER_PARTS[UNDECLARED][2]
    if not pods:
        return reason
    more = f" … ({len(pods) - PODS_NAMED} more)" if len(pods) > PODS_NAMED else ""
    return f"{reason}: {', '.join(pods[:PODS_NAMED])}{more}"


def split_groups(ledger: Ledger, groups: Mapping[tuple[str, datetime], Group],
                 gap_of: Mapping[str, tuple[Decimal, str]], target: Decimal,
                 describe: Describer, undeclared: str | None = None) -> list[ServiceInterval]:
    """Apply METHOD §3 to every (holder, interval) group; return the per-service intervals.

    ``gap_of`` maps a profiled service to (gap ratio, the profile source that measured it);
    ``undeclared``: the undeclared-workload part's reason (:func:`undeclared_reason`).
    """
    intervals = []
    for (holder, _ts), group in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if holder in HOLDER_PARTS:
            _unmeasured_parts(ledger, group, describe, undeclared if holder == UNDECLARED else None)
            continue
        intervals.append(_split_service(ledger, group, gap_of.get(holder), target, describe))
    return intervals


def _unmeasured_parts(ledger: Ledger, group: Group, describe: Describer, reason_of: str | None = None) -> None:
    """A holder's part of its own (unallocated, allocation unknown, no sample, …); of GPUs no sample
    measured, what the scheduler's GPU requests place under a declared service's pods is that
    service's unattributed cost, which its unit costs leave out and say so (METHOD §4)."""
    bucket, name, reason = HOLDER_PARTS[group.holder]
    reason = reason_of or reason
    paid, seconds, committed = group.paid, group.paid_seconds, group.committed
    for service, amount in sorted(group.owned_paid.items()):
        owned = group.owned_seconds.get(service, ZERO)
        owned_committed = committed_of(amount, group.committed, group.paid)
        ledger.add(bucket, name, service, amount,
                   f"{describe(group, service)}; {service}'s pods held them (the scheduler's GPU requests)", reason,
                   owned, owned_committed)
        paid, seconds, committed = paid - amount, seconds - owned, committed - owned_committed
    if paid or seconds or not group.owned_paid:
        ledger.add(bucket, name, None, paid, describe(group, None), reason, seconds, committed)


def committed_of(amount: Decimal, committed: Decimal, paid: Decimal) -> Decimal:
    """Of ``amount``, a slice of money ``paid`` of which ``committed`` is billed under a commitment
    discount, the committed money, in that proportion (0 where nothing is committed)."""
    return amount * committed / paid if committed and paid else ZERO


def _split_service(ledger: Ledger, group: Group, profiled: tuple[Decimal, str] | None, target: Decimal,
                   describe: Describer) -> ServiceInterval:
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
    idle_committed = group.committed - group.committed_busy  # the idle GPU time's committed money
    ledger.add("model_compute", "kernel_active", service, B, src,
               "forward-pass kernel time; includes padding not separated", group.busy_seconds)
    gap_source = f"; gap ratio g = {gap:.4f} from kernel profile {profile_name}"
    ledger.add("serving_path", "in_flight_idle", service, S, src + gap_source,
               "GPU idle the serving path causes while it serves: min(g × B, P − B)", S_sec)
    ledger.add("platform_overhead", "headroom", service, headroom, src,
               f"idle kept as headroom at target utilisation {target}",
               committed=committed_of(headroom, idle_committed, P - B))
    ledger.add("platform_overhead", "capacity_above_demand", service, O - headroom, src,
               "paid GPU time the served work did not need, beyond headroom",
               committed=committed_of(O - headroom, idle_committed, P - B))
    return ServiceInterval(service, group.ts, group.gpus, P, group.gross, group.priced, B, S, O, headroom,
                           group.paid_seconds, group.busy_seconds, S_sec, frozenset(group.pods))


def bucket_totals(ledger: Ledger) -> dict[str, Decimal]:
    """Unrounded total per bucket."""
    totals: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    for part in ledger.parts.values():
        totals[part.bucket] += part.amount
    return {b: totals[b] for b in BUCKETS}
