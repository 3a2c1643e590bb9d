"""The audit.json sections a later review reads (METHOD §10, docs/audit-json.md): the method version,
the scope, the options that shipped, the composition of the total, each service's cost components
and per-day GPU parts, stable ids of parts and findings, the in-scope SKUs and accounts.

Only formats what the stages computed: a component is a sum of ledger parts (or of the shared split's
per-part shares), a day is a sum of the GPU split's intervals. "Exact" figures are written with 12
decimal places; amounts in cents are rounded by largest remainder where they must sum to a total.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Iterable, Mapping

from audit.audit_json_cents import Cents
from audit.lines import basis_amount
from audit.money import ZERO, cents, dsum, fmt, largest_remainder
from audit.result import AuditResult, KernelFinding, Option

#: the method version (../shared/METHOD.md) whose rules this audit followed; audits that differ in it
#: are not bridged by a review
METHOD_VERSION = "2026-12"
EXACT = 12
#: GPU-seconds in audit.json: to the microsecond
SECOND_PLACES = 6
#: the parts the GPU split makes of a service's paid GPU time (audit/attribute.py, METHOD §3)
GPU_PARTS = {("model_compute", "kernel_active"), ("serving_path", "in_flight_idle"),
             ("platform_overhead", "headroom"), ("platform_overhead", "capacity_above_demand"),
             ("platform_overhead", "idle_not_separated"), ("unattributed", "no_kernel_profile")}
TOP_SKUS = 300


def exact(value: Decimal | None) -> str | None:
    return fmt(value, EXACT)


def seconds_text(value: Decimal | None) -> str | None:
    """GPU-seconds to the microsecond: they come from float samples (busy fractions), whose last
    digits differ between a Prometheus server and the same samples read from a file."""
    return fmt(value, SECOND_PLACES)


def scope(result: AuditResult) -> dict[str, Any]:
    """The case's [scope], normalised (None where a member is not set), and the declared services."""
    given = result.case.scope
    return {"accounts": sorted(given.get("accounts") or []) or None,
            "tags": dict(sorted((given.get("tags") or {}).items())) or None,
            "services": list(given.get("services") or []) or None,
            "declared_services": sorted(result.case.services)}


def shipped(result: AuditResult) -> list[dict[str, Any]]:
    """The case's [[shipped]] entries, in file order."""
    return [{"option": s.option, "service": s.service, "date": _day_or_moment(s.date), "note": s.note}
            for s in result.case.shipped]


def _day_or_moment(moment: datetime) -> str:
    if (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0):
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def composition(rounded: Cents, total: Decimal) -> dict[str, Any]:
    """Each service's own + shared cost (its ``total_cost``), the unattributed bucket and the shared cost
    no service took, as audit/audit_json_cents.py rounded them: sums of the rounded parts, which sum
    to ``total`` (the headline, in cents)."""
    return {"services": {name: str(rounded.services[name].total) for name in sorted(rounded.services)},
            "unattributed": str(rounded.buckets["unattributed"]), "unallocated": str(rounded.unallocated),
            "total": str(total)}


def components(result: AuditResult, service: str) -> dict[str, dict[str, str | None]]:
    """A service's cost components (METHOD §10): busy and idle GPU time with their GPU-seconds, each
    non-GPU line part it owns and its share of each shared part; they sum to its own + shared cost."""
    paid = busy = ZERO
    for iv in result.intervals:
        if iv.service == service:
            paid += iv.paid_seconds
            busy += iv.busy_seconds
    found: dict[str, tuple[Decimal, Decimal, str]] = {}
    gpu_busy = gpu_idle = ZERO
    for part in sorted(result.ledger.parts.values(), key=lambda p: (p.bucket, p.name)):
        if part.service != service or part.bucket == "unattributed":
            continue
        if (part.bucket, part.name) in GPU_PARTS:
            if part.bucket == "model_compute":
                gpu_busy += part.amount
            else:
                gpu_idle += part.amount
        else:
            found[f"line:{part.name}"] = (part.amount, part.amount, "currency")
    shares = result.shared.by_part.get(service, {}) if result.shared else {}
    for name, amount in sorted(shares.items()):
        found[f"shared:{name}"] = (amount, amount, "currency")
    out = {"gpu_busy": (gpu_busy, busy, "gpu_second"), "gpu_idle": (gpu_idle, paid - busy, "gpu_second"), **found}
    return {k: {"cost": exact(cost), "quantity": seconds_text(qty) if unit == "gpu_second" else exact(qty), "unit": unit}
            for k, (cost, qty, unit) in out.items() if cost or qty}


def daily(result: AuditResult, service: str) -> list[dict[str, Any]]:
    """Per UTC day of the window: requests, paid and busy GPU-seconds, GPU cost and each GPU part's
    cost and GPU-seconds, from the GPU split's intervals (METHOD §3)."""
    days = _days(result.case.start, result.case.end)
    sums: dict[str, dict[str, Any]] = {d: {"paid": ZERO, "busy": ZERO, "cost": ZERO, "parts": {}} for d in days}
    names: set[str] = set()
    for iv in result.intervals:
        if iv.service != service:
            continue
        day = sums.setdefault(iv.ts.strftime("%Y-%m-%d"), {"paid": ZERO, "busy": ZERO, "cost": ZERO, "parts": {}})
        day["paid"] += iv.paid_seconds
        day["busy"] += iv.busy_seconds
        day["cost"] += iv.paid
        for key, cost, seconds in interval_parts(iv):
            names.add(key)
            held = day["parts"].setdefault(key, [ZERO, ZERO])
            held[0] += cost
            held[1] += seconds
    traffic = result.traffic.get(service)
    if traffic is not None and traffic.requests is None:  # token series only: requests not measured, not 0
        traffic = None
    requests: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    if traffic is not None:
        for ts, count in traffic.by_ts.items():
            requests[ts.strftime("%Y-%m-%d")] += count
    return [{"day": d, "requests": _count(requests[d]) if traffic is not None else None,
             "paid_gpu_seconds": seconds_text(s["paid"]), "busy_gpu_seconds": seconds_text(s["busy"]),
             "gpu_cost": exact(s["cost"]),
             "parts": {k: {"cost": exact(s["parts"].get(k, (ZERO, ZERO))[0]),
                           "gpu_seconds": seconds_text(s["parts"].get(k, (ZERO, ZERO))[1])} for k in sorted(names)}}
            for d, s in sorted(sums.items())]


def interval_parts(iv) -> Iterable[tuple[str, Decimal, Decimal]]:
    """("bucket.name", cost, GPU-seconds) of one service interval's split (METHOD §3): headroom and
    capacity above demand share the idle seconds not in flight pro rata of their cost."""
    if iv.serving is None:
        yield "unattributed.no_kernel_profile", iv.kernel, iv.busy_seconds
        yield "platform_overhead.idle_not_separated", iv.overhead, iv.paid_seconds - iv.busy_seconds
        return
    idle = iv.paid_seconds - iv.busy_seconds - (iv.serving_seconds or ZERO)
    headroom = iv.headroom or ZERO
    headroom_s = idle * headroom / iv.overhead if iv.overhead else ZERO
    yield "model_compute.kernel_active", iv.kernel, iv.busy_seconds
    yield "serving_path.in_flight_idle", iv.serving, iv.serving_seconds or ZERO
    yield "platform_overhead.headroom", headroom, headroom_s
    yield "platform_overhead.capacity_above_demand", iv.overhead - headroom, idle - headroom_s


def _count(value: Decimal) -> str:
    """A request count as text: whole numbers as integers, else exact."""
    return str(int(value)) if value == value.to_integral_value() else str(exact(value))


def _days(start: datetime, end: datetime) -> list[str]:
    out, day = [], start.replace(hour=0, minute=0, second=0, microsecond=0)
    while day < end:
        out.append(day.strftime("%Y-%m-%d"))
        day += timedelta(days=1)
    return out


def part_id(bucket: str, name: str, service: str | None) -> str:
    """A part's stable id: "<bucket>.<name>/<service or '-'>"."""
    return f"{bucket}.{name}/{service or '-'}"


def finding_ids(findings: Iterable[KernelFinding]) -> list[str]:
    """Stable ids "<service>/<profile>/<kind>/<kernel>": the call path is added where two findings
    would share an id, then, where two still would (the ranks of a rank set finding the same waste
    on the same call path), the rank, then the device."""
    found = list(findings)
    ids = [f"{f.service}/{f.profile}/{f.finding.get('id')}/{f.finding.get('kernel') or f.finding.get('call_path')}"
           for f in found]
    for key, said in (("call_path", "@{}"), ("rank", "@rank {}"), ("device", "@device {}")):
        twice = {i for i in ids if ids.count(i) > 1}
        ids = [i + said.format(f.finding.get(key)) if i in twice else i for i, f in zip(ids, found)]
    return ids


def by_service(option: Option) -> dict[str, dict[str, str | None]] | None:
    """The option's monthly saving per service, where its model replays per service."""
    if option.by_service is None:
        return None
    return {s: {b: fmt(v, 2) for b, v in bands.items()} for s, bands in sorted(option.by_service.items())}


#: the columns :func:`lines` groups by
LINE_KEYS = ("service_name", "sku_id", "charge_description", "sub_account_id", "billing_account_id")


def lines(result: AuditResult) -> dict[str, Any]:
    """The in-scope lines on the cost basis by ServiceName | SkuId (ChargeDescription where a line has
    none) and by account, rounded by largest remainder to the in-scope total; the largest 300 SKUs."""
    scoped = result.lines[result.scope_mask]
    amounts = basis_amount(scoped, result.case.cost_basis)
    skus: defaultdict[tuple[str, str], Decimal] = defaultdict(lambda: ZERO)
    accounts: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    columns = [scoped[c].to_numpy(dtype=object) for c in LINE_KEYS]  # iterating Arrow-backed text is slow
    for service, sku, what, sub, account, amount in zip(*columns, amounts):
        skus[(service, sku or what)] += amount
        accounts[sub or account] += amount
    target = cents(dsum(amounts))
    keyed = {f"{s}|{k}": v for (s, k), v in skus.items()}
    rounded = largest_remainder(keyed, target) if keyed else {}
    order = sorted(skus, key=lambda sk: (-abs(skus[sk]), sk))
    top = order[:TOP_SKUS]
    rest = dsum(rounded[f"{s}|{k}"] for s, k in order[TOP_SKUS:])
    by_account = largest_remainder(dict(accounts), target) if accounts else {}
    return {"skus": [{"id": f"{s}|{k}", "service_name": s, "sku": k, "amount": str(rounded[f"{s}|{k}"])}
                     for s, k in top],
            "accounts": [{"account": a, "amount": str(v)} for a, v in sorted(by_account.items())],
            "other_skus": str(cents(rest)),
            "note": (f"in-scope lines on the {result.case.cost_basis} cost basis, by ServiceName and SkuId "
                     f"(ChargeDescription where a line has no SkuId), rounded by largest remainder to {target}; "
                     f"the {TOP_SKUS} largest by |amount|, the rest summed in other_skus")}


def review_fields(result: AuditResult, rounded: Cents, total: Decimal) -> dict[str, Any]:
    """The top-level sections a later review reads, beside the rest of audit.json."""
    return {"scope": scope(result), "shipped": shipped(result), "composition": composition(rounded, total),
            "lines": lines(result)}


def service_fields(result: AuditResult) -> Mapping[str, dict[str, Any]]:
    """Per service: its cost components and its days."""
    return {name: {"components": components(result, name), "daily": daily(result, name)}
            for name in result.unit_costs}
