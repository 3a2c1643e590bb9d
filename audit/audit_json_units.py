"""The audit.json ``services`` and ``allocation`` sections: unit costs per service (METHOD §4).

Formats what :mod:`audit.unit_costs` computed: each service's owned cost, its share of the shared
cost and the key that split it, the unattributed cost the unit costs leave out, every denominator a
source counted (successful requests, all requests, failed, health checks, unparseable, outside the
path filter) and the unit costs from exact quotients: cost per request, per 1,000 requests, per 1 M
tokens to 6 places and requests per currency unit to 3, rounded half-even.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from audit.audit_json_cents import OWNED_BUCKETS, Cents, ServiceCents
from audit.audit_json_phases import phases_entry
from audit.money import dsum, fmt, share
from audit.result import COUNT_CLASSES, AuditResult, SharedSplit, TrafficTotals, UnitCost
from connectors.telemetry.families import REQUEST_COUNTER, counter_beside

UNIT_PLACES = 6
PER_UNIT_PLACES = 3


def services(result: AuditResult, rounded: Cents) -> dict[str, dict[str, Any]]:
    """audit.json ``services``: one entry per declared service."""
    used = result.shared.used if result.shared else "gpu_cost"
    return {name: service_entry(result, uc, used, rounded.services[name]) for name, uc in result.unit_costs.items()}


def service_entry(result: AuditResult, uc: UnitCost, key: str, held: ServiceCents) -> dict[str, Any]:
    """One service's entry: its cent figures as ``held`` (audit/audit_json_cents.py) rounded them, so
    that they sum to the composition's; its unit costs from the exact figures."""
    t = uc.traffic
    full = uc.own + uc.shared
    requests = _whole(t.requests) if t else None
    logged = logs_count_it(t)
    # a request log counts no tokens, nor a server without token series: none measured (not 0)
    tokens = _whole(t.tokens) if t and not logged else None
    counts = denominator_counts(t)
    # all requests from the denominator's own source: a request log's lines where the logs are the
    # denominator, else what the server counter's pods received (audit/unit_costs.py: all_requests); a
    # log's lines beside a counter are another population, and no unit cost of either
    every = counts["lines"] if counts and logged else _whole(t.all_requests) if t else None
    every_source = (counts["source"] if counts and logged else t.all_source if t else None) if every is not None else None
    paid = dsum(iv.paid_seconds for iv in result.intervals if iv.service == uc.service)
    return {
        "requests": requests,
        "prompt_tokens": _whole(t.prompt_tokens) if t and not logged else None,
        "generated_tokens": _whole(t.generated_tokens) if t and not logged else None,
        "gpu_hours": fmt(paid / 3600, 2),
        "cost": str(held.own),
        "owned_lines": str(held.owned_lines),
        "shared_cost": str(held.shared),
        "allocation_key": key,
        "total_cost": str(held.total),
        "unattributed": str(held.unattributed),
        "by_bucket": {b: str(held.by_bucket[b]) for b in OWNED_BUCKETS},
        "traffic_source": ", ".join(sorted(t.sources)) if t else None,
        "request_counts": counts,
        "all_requests": every,
        "all_requests_source": every_source,
        # a service that owns nothing and takes no share has no unit cost to show (not a cost of 0)
        "cost_per_request": _per(full, requests, 1),
        "cost_per_1k_requests": _per(full, requests, 1000),
        "cost_per_1k_all_requests": _per(full, every, 1000),
        "cost_per_1m_tokens": _per(full, tokens, 1_000_000),
        "requests_per_currency_unit": {
            "successful": fmt(Decimal(requests) / full, PER_UNIT_PLACES) if requests is not None and full > 0 else None,
            "all": fmt(Decimal(every) / full, PER_UNIT_PLACES) if every is not None and full > 0 else None,
        },
        "reason": service_reason(uc, requests, full, t, tokens, every, held.unattributed,
                                 uncounted_gpu_time(result, uc.service) + uncounted_span(result, t),
                                 failures_only(result, uc.service)),
        "phases": phases_entry(result, uc, held),  # prefill / decode split (audit/audit_json_phases.py)
    }


def _whole(count: Decimal | None) -> int | None:
    """A count as a whole number; None (not measured) stays None."""
    return None if count is None else int(count)


def _per(cost: Decimal, count: int | None, per: int) -> str | None:
    """``cost`` per ``per`` of ``count``; None where nothing is counted, or the cost is none or
    negative (credits above the charges: a negative price is no unit cost)."""
    return fmt(cost * per / count, UNIT_PLACES) if count and cost > 0 else None


def logs_count_it(t: TrafficTotals | None) -> bool:
    """Whether the service's denominator is its request logs (not a server counter beside them)."""
    return t is not None and t.counted_by_logs


def denominator_counts(t: TrafficTotals | None) -> dict[str, Any] | None:
    """The classes of the request logs that count the service, added (two load balancers' logs, or
    the month's halves, count different requests: audit/unit_costs.py), named together, and
    whether they are the denominator (a server counter beside them is, where it counts tokens);
    None when no request log counts it."""
    if t is None or not t.counts:
        return None
    logs = sorted(t.counts)
    return {"source": " + ".join(logs), **{k: sum(t.counts[s][k] for s in logs) for k in COUNT_CLASSES},
            "denominator": logs_count_it(t)}


def uncounted_gpu_time(result: AuditResult, service: str) -> list[str]:
    """What of the service's GPU time its request counter does not count: the pods of the telemetry
    check ``gpu_pod_without_requests`` (audit/mismatches.py), as the reason says it."""
    return [f"part of its GPU time has no request count: {m['gpu_hours']} GPU-h of pods "
            f"{', '.join(m['values'])}{' …' if m['count'] > len(m['values']) else ''} that {m['against']} "
            "does not count (telemetry.label_mismatches): its unit costs divide that time's cost by its "
            "other pods' requests"
            for m in result.telemetry.label_mismatches
            if m.get("check") == "gpu_pod_without_requests" and m.get("service") == service]


def uncounted_span(result: AuditResult, t: TrafficTotals | None) -> list[str]:
    """Where the request counters that count a service were sampled over less of the window than its
    cost covers (a window starting or ending between scrapes): counters are differenced between their
    samples and never extrapolated (METHOD §4), so its unit costs divide the whole window's cost by
    the requests of part of it; the reason says how much. Request logs count by line time: none."""
    if t is None or not t.requests or logs_count_it(t):
        return []
    out = []
    for f in result.collected.frames:
        lo, hi = f.covered
        if lo is None or hi is None or not any(s == f.spec.name or s.startswith(f"{f.spec.name} (") for s in t.sources):
            continue
        start, end = result.case.start, result.case.end
        lo, hi = max(lo, start), min(hi, end)
        counted, whole = max(hi - lo, timedelta(0)), end - start
        if counted >= whole:
            continue
        out.append(f"its requests are counted by {f.spec.name} between its samples from {_moment(lo)} to "
                   f"{_moment(hi)} UTC, {_percent(counted, whole)} % "
                   "of the window (counters are never extrapolated): its unit costs divide the whole window's cost "
                   "by the requests of that part")
    return out


def _moment(moment: datetime) -> str:
    """A sample's time to the minute, with its seconds where they are not 0 (00:14:50, not 00:14)."""
    return f"{moment:%Y-%m-%d %H:%M}" + (f":{moment:%S}" if moment.second else "")


def _percent(part: timedelta, whole: timedelta) -> str:
    return f"{Decimal(part.total_seconds()) * 100 / Decimal(whole.total_seconds()):.1f}"


def failures_only(result: AuditResult, service: str) -> str | None:
    """Where no request counter counts the service but its pods' failed requests are counted (the
    serving evidence's ``failed_requests``: Triton ``nv_inference_request_failure`` without
    ``nv_inference_request_success``), what the reason says of it: the failure counter matched, with
    its source and count, and the successful-request counter its server would export beside it;
    None where no failure counter matched either."""
    failed = (result.evidence.serving.get(service) or {}).get("failed_requests") or {}
    source, value = failed.get("source"), failed.get("value")
    if not source or value is None:
        return None
    missing = [success for success in REQUEST_COUNTER.values()
               if (beside := counter_beside(success, "failures")) and beside in source]
    return (f"its pods' failed requests are counted ({source}: {int(Decimal(value)):,}, serving_evidence."
            f"failed_requests), but no successful-request counter ({', '.join(missing) or 'none'}) or request log "
            "matched this service: unit costs unmeasured")


def service_reason(uc: UnitCost, requests: int | None, full: Decimal, t: TrafficTotals | None,
                   tokens: int | None, every: int | None, unattributed: Decimal,
                   uncounted: list[str], failures: str | None = None) -> str | None:
    """Why each unit cost the entry leaves null is not measured, and what its figures leave out
    (``unattributed``: its unattributed cost as the entry shows it, in cents; ``uncounted``: GPU
    time its requests do not count, :func:`uncounted_gpu_time`; ``failures``: what a failure
    counter counts where no request counter matched, :func:`failures_only`)."""
    reasons = list(uncounted)
    if t is None:
        reasons.append(failures or "no request counter or request log matched this service: unit costs unmeasured")
    elif requests is None:
        reasons.append(f"its traffic source ({', '.join(sorted(t.sources))}) has no request series (token series "
                       "only): requests not measured, unit costs per request unmeasured")
    elif not requests:
        reasons.append(f"its request source ({', '.join(sorted(t.sources))}) counted no successful request in "
                       "the window: unit costs per request unmeasured")
    if full < 0:
        reasons.append("its cost is negative after credits (they exceed its charges: see fit): its unit costs "
                       "are not measured, a negative price being no unit cost")
    elif full == 0:
        reasons.append("the service owns no billing line and no GPU time, and takes no shared cost: its unit "
                       "costs are unmeasured (claim its lines with [services] tags or resource_ids, or name it "
                       "in a rule)")
    elif t is not None and requests:
        reasons += _unmeasured_denominators(t, tokens, every)
    if uc.unattributed:
        reasons.append(f"unit costs leave out {unattributed} of its cost that stayed unattributed")
    return "; ".join(reasons) or None


def _unmeasured_denominators(t: TrafficTotals, tokens: int | None, every: int | None) -> list[str]:
    """Why the per-token and all-requests figures of a service with requests are null, where they are."""
    out = []
    logs = sorted(t.counts)
    counters = sorted(set(t.sources) - set(t.counts))
    if logs_count_it(t):
        out.append(f"cost per 1 M tokens not measured: a request log ({', '.join(logs)}) counts no tokens")
    elif tokens is None:
        out.append(f"cost per 1 M tokens not measured: {t.tokens_unmeasured()}")
    elif not tokens:
        out.append(f"cost per 1 M tokens not measured: {', '.join(counters)} counted no tokens in the window")
    if every is None and not logs_count_it(t):
        out.append("cost per 1,000 of all requests not measured: " + _all_unmeasured(t, logs, counters))
    return out


def _all_unmeasured(t: TrafficTotals, logs: list[str], counters: list[str]) -> str:
    """Why a server counter's service has no all-requests figure: what its counter's source lacks
    (audit/unit_costs.py: all_requests), and a request log beside it counts another population."""
    own = t.all_unmeasured or f"the denominator ({', '.join(counters)}) counts successful requests only"
    if not logs:
        return own
    return (f"{own}; the request log ({', '.join(logs)}) counts another population than the denominator "
            f"({', '.join(counters)})")


def allocation(result: AuditResult, rounded: Cents) -> dict[str, Any] | None:
    """audit.json ``allocation``: the key that split the shared cost, and each service's share; the pool
    and what no service took as ``rounded`` holds them (Σ services' shared_cost + unallocated = pool)."""
    split: SharedSplit | None = result.shared
    if split is None:
        return None
    total = dsum(split.weights.values())
    return {"key": split.key, "used": split.used, "note": split.note,
            "shared_cost": str(rounded.pool), "unallocated": str(rounded.unallocated),
            "weights": {s: share(w, total) for s, w in sorted(split.weights.items())}}


def gpu_count(value) -> int | float:
    """A count of GPUs as audit.json's number: whole GPUs an integer, a sum of MIG slices (a
    fraction of a GPU each, at 50 digits) at 2 places, as the GPU-hours beside it."""
    if value == int(value):
        return int(value)
    return float(fmt(Decimal(value), 2) or 0)
