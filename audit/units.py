"""Unit costs per service (METHOD §4): own GPU parts plus a share of shared costs, per request and token."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

import pandas as pd

from audit.attribute import Ledger, ServiceInterval
from audit.gpusplit import service_of
from audit.money import ZERO, split_evenly

SHARED_PARTS = {("serving_path", "serving_compute"), ("serving_path", "serving_network"),
                ("platform_overhead", "egress"), ("platform_overhead", "observability"),
                ("platform_overhead", "orchestration"), ("platform_overhead", "commitment_unused"),
                ("platform_overhead", "unallocated")}


@dataclass
class ServiceTraffic:
    """Requests and tokens of one service, in total and per interval."""

    requests: Decimal = ZERO
    prompt_tokens: Decimal = ZERO
    generated_tokens: Decimal = ZERO
    by_ts: dict = field(default_factory=lambda: defaultdict(lambda: ZERO))
    by_pod_ts: dict = field(default_factory=lambda: defaultdict(lambda: ZERO))
    pods: set = field(default_factory=set)
    sources: set = field(default_factory=set)
    by_source: dict = field(default_factory=lambda: defaultdict(lambda: ZERO))

    def requests_of(self, ts, pods) -> Decimal:
        """Requests served in an interval by the given pods (all pods when none of them has counters)."""
        if pods and self.pods & set(pods):
            return sum((self.by_pod_ts.get((p, ts), ZERO) for p in pods), ZERO)
        return self.by_ts.get(ts, ZERO)


@dataclass
class UnitCost:
    """What one service costs and serves."""

    service: str
    own: Decimal
    shared: Decimal
    unattributed: Decimal
    by_bucket: dict
    traffic: ServiceTraffic | None


def pod_models(traffic: pd.DataFrame) -> dict:
    """(namespace, pod) -> served model name, from the serving counters."""
    return {(r.namespace, r.pod): r.model_name for r in traffic.itertuples(index=False) if r.pod}


def traffic_by_service(traffic: pd.DataFrame, services) -> dict[str, ServiceTraffic]:
    """Counter increases per service (pods matched by the services' matchers).

    When two sources count one service (server counters and request logs), the one that also
    counts tokens is the denominator; every source's total is kept for the denominator check.
    """
    per_source: dict[tuple[str, str], ServiceTraffic] = {}
    for row in traffic.itertuples(index=False):
        labels = {"namespace": row.namespace, "pod": row.pod, "model_name": row.model_name, "container": ""}
        name = service_of(labels, services, {}) or _named_service(row, services)
        if name is None:
            continue
        source = getattr(row, "source", "") or "traffic table"
        _add_row(per_source.setdefault((name, source), ServiceTraffic()), row, source)
    out: dict[str, ServiceTraffic] = {}
    for (name, source), t in sorted(per_source.items(), key=lambda kv: (-(kv[1].prompt_tokens + kv[1].generated_tokens), kv[0])):
        primary = out.setdefault(name, t)
        primary.by_source[source] = t.requests
    return out


def _named_service(row, services) -> str | None:
    """Request logs carry no pod labels: their rows name the service the case gave the source."""
    if not row.namespace and not row.model_name and row.pod in services:
        return row.pod
    return None


def _add_row(t: ServiceTraffic, row, source: str) -> None:
    requests = Decimal(repr(float(row.requests)))
    t.requests += requests
    t.prompt_tokens += Decimal(repr(float(row.prompt_tokens)))
    t.generated_tokens += Decimal(repr(float(row.generated_tokens)))
    ts = row.ts.to_pydatetime()
    t.by_ts[ts] += requests
    t.by_pod_ts[(row.pod, ts)] += requests
    t.pods.add(row.pod)
    t.sources.add(source)


def unit_costs(ledger: Ledger, intervals: list[ServiceInterval], services,
               traffic: dict[str, ServiceTraffic]) -> dict[str, UnitCost]:
    """Own cost, shared share (pro rata to paid GPU cost) and unattributed per service."""
    own, unattributed, paid = defaultdict(lambda: ZERO), defaultdict(lambda: ZERO), defaultdict(lambda: ZERO)
    by_bucket = defaultdict(lambda: defaultdict(lambda: ZERO))
    for part in ledger.parts.values():
        if part.service is None:
            continue
        if part.bucket == "unattributed":
            unattributed[part.service] += part.amount
        else:
            own[part.service] += part.amount
            by_bucket[part.service][part.bucket] += part.amount
    for iv in intervals:
        paid[iv.service] += iv.paid
    pool = sum((p.amount for p in ledger.parts.values() if (p.bucket, p.name) in SHARED_PARTS), ZERO)
    names = [s for s in services if paid[s] > 0]
    shares = dict(zip(names, split_evenly(pool, [paid[s] for s in names])))
    return {s: UnitCost(s, own[s], shares.get(s, ZERO), unattributed[s], dict(by_bucket[s]), traffic.get(s))
            for s in services}
