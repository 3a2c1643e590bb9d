"""Unit costs per service (METHOD §4): own GPU parts plus a share of shared costs, per request and token.

:func:`traffic_by_service` sums the serving counters per declared service (the denominators);
:func:`unit_costs` gives each service its own parts, a share of the shared parts (pro rata to paid
GPU cost) and what of its GPU time stayed unattributed.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Mapping, Sequence

import pandas as pd

from audit.case import Service
from audit.ledger import Ledger, ServiceInterval
from audit.money import ZERO, split_evenly
from audit.result import TrafficTotals, UnitCost
from audit.services import service_of

SHARED_PARTS = {("serving_path", "serving_compute"), ("serving_path", "serving_network"),
                ("platform_overhead", "egress"), ("platform_overhead", "observability"),
                ("platform_overhead", "orchestration"), ("platform_overhead", "commitment_unused"),
                ("platform_overhead", "unallocated")}


@dataclass
class _Counts:
    """Requests and tokens of one service from one source, as they are summed."""

    requests: Decimal = ZERO
    prompt_tokens: Decimal = ZERO
    generated_tokens: Decimal = ZERO
    by_ts: defaultdict[datetime, Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))
    by_pod_ts: defaultdict[tuple[str, datetime], Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))
    pods: set[str] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)

    def add(self, row, source: str) -> None:
        requests = Decimal(repr(float(row.requests)))
        self.requests += requests
        self.prompt_tokens += Decimal(repr(float(row.prompt_tokens)))
        self.generated_tokens += Decimal(repr(float(row.generated_tokens)))
        ts = row.ts.to_pydatetime()
        self.by_ts[ts] += requests
        self.by_pod_ts[(row.pod, ts)] += requests
        self.pods.add(row.pod)
        self.sources.add(source)

    def totals(self, by_source: Mapping[str, Decimal]) -> TrafficTotals:
        return TrafficTotals(self.requests, self.prompt_tokens, self.generated_tokens, dict(self.by_ts),
                             dict(self.by_pod_ts), frozenset(self.pods), frozenset(self.sources), dict(by_source))


def traffic_by_service(traffic: pd.DataFrame, services: Mapping[str, Service]) -> dict[str, TrafficTotals]:
    """Counter increases per service (pods matched by the services' matchers).

    When two sources count one service (server counters and request logs), the one that also
    counts tokens is the denominator; every source's total is kept for the denominator check.
    """
    per_source: dict[tuple[str, str], _Counts] = {}
    for row in traffic.itertuples(index=False):
        labels = {"namespace": row.namespace, "pod": row.pod, "model_name": row.model_name, "container": ""}
        name = service_of(labels, services, {}) or _named_service(row, services)
        if name is None:
            continue
        source = getattr(row, "source", "") or "traffic table"
        per_source.setdefault((name, source), _Counts()).add(row, source)
    primary: dict[str, _Counts] = {}
    by_source: dict[str, dict[str, Decimal]] = defaultdict(dict)
    for (name, source), counts in sorted(per_source.items(),
                                         key=lambda kv: (-(kv[1].prompt_tokens + kv[1].generated_tokens), kv[0])):
        primary.setdefault(name, counts)
        by_source[name][source] = counts.requests
    return {name: counts.totals(by_source[name]) for name, counts in primary.items()}


def _named_service(row, services: Mapping[str, Service]) -> str | None:
    """Request logs carry no pod labels: their rows name the service the case gave the source."""
    if not row.namespace and not row.model_name and row.pod in services:
        return row.pod
    return None


def unit_costs(ledger: Ledger, intervals: Sequence[ServiceInterval], services: Mapping[str, Service],
               traffic: Mapping[str, TrafficTotals]) -> dict[str, UnitCost]:
    """Own cost, shared share (pro rata to paid GPU cost) and unattributed per service."""
    own: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    unattributed: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    paid: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    by_bucket: defaultdict[str, defaultdict[str, Decimal]] = defaultdict(lambda: defaultdict(lambda: ZERO))
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
