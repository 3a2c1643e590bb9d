"""The audit's result: :class:`AuditResult`, and the typed result of each stage it holds.

Every stage after attribution returns one of the frozen types below (unit costs, reconciliation,
options, evidence); the pipeline gathers them into an :class:`AuditResult`, which the audit.json
writer (:mod:`audit.audit_json`) only formats. Amounts are unrounded Decimals; rounding is the
writer's.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Mapping

import pandas as pd

from audit.case import Case
from audit.collected import Collected
from audit.ledger import Group, Ledger, NodeCoverage, ServiceInterval
from audit.money import ZERO
from audit.normalised import ProfileSummary, Telemetry

#: the low / expected / high figures of an option
Bands = Mapping[str, Decimal]
#: one figure of the serving evidence: {"value", "source", "reason"} as audit.json writes it
Figure = Mapping[str, str | None]


@dataclass(frozen=True)
class TrafficTotals:
    """Requests and tokens of one service, in total and per interval (from the serving counters)."""

    requests: Decimal
    prompt_tokens: Decimal
    generated_tokens: Decimal
    by_ts: Mapping[datetime, Decimal]
    by_pod_ts: Mapping[tuple[str, datetime], Decimal]
    pods: frozenset[str]
    sources: frozenset[str]
    #: every source's request total (the chosen source's included), for the denominator check
    by_source: Mapping[str, Decimal]

    def requests_of(self, ts: datetime, pods: frozenset[str] | set[str]) -> Decimal:
        """Requests served in an interval by the given pods (all pods when none of them has counters)."""
        if pods and self.pods & set(pods):
            return sum((self.by_pod_ts.get((p, ts), ZERO) for p in pods), ZERO)
        return self.by_ts.get(ts, ZERO)


@dataclass(frozen=True)
class UnitCost:
    """What one service costs and serves (METHOD §4)."""

    service: str
    own: Decimal
    shared: Decimal
    unattributed: Decimal
    by_bucket: Mapping[str, Decimal]
    traffic: TrafficTotals | None


@dataclass(frozen=True)
class Driver:
    """One check behind the verdict, with its own gap."""

    name: str
    subject: str
    gap: Decimal | None
    detail: str


@dataclass(frozen=True)
class Conservation:
    """Every amount in scope is in exactly one part: the ledger's total against the lines in scope."""

    parts_total: Decimal
    in_scope_total: Decimal


@dataclass(frozen=True)
class Reconciliation:
    """The verdict and how it was reached (METHOD §5), with the conservation check it passed."""

    top_down: Decimal
    bottom_up: Decimal | None
    gap: Decimal | None
    tolerance: Decimal
    verdict: str
    reason: str
    covered_seconds: Decimal
    drivers: tuple[Driver, ...]
    conservation: Conservation


@dataclass(frozen=True)
class Option:
    """One priced (or unmeasured) intervention (METHOD §7)."""

    id: str
    title: str
    acts_on: str
    status: str
    part_monthly: Decimal | None
    saving: Bands | None
    cost: Bands
    payback: Bands | None
    effort: Bands
    assumptions: tuple[str, ...] = ()
    overridden: bool = False
    reason: str | None = None
    rank: int | None = None

    @property
    def bucket(self) -> str:
        return self.acts_on.split(".")[0]


@dataclass(frozen=True)
class KernelFinding:
    """A kernel-level finding of a service's profile, costed on the part it lies in (METHOD §6)."""

    service: str
    profile: str
    #: the analyser's finding as ``costaudit trace`` reports it (id, bucket, part, share, gpu_ms, …)
    finding: Mapping[str, Any]
    #: share × the part's amount, unrounded; None when the part was not measured in this case
    cost: Decimal | None


@dataclass(frozen=True)
class Evidence:
    """What explains the buckets without moving money: serving figures and kernel analysis."""

    #: service -> figure name -> figure
    serving: Mapping[str, Mapping[str, Figure]]
    #: option id -> the measured serving figures that bear on it ({"service", "figure", "value", "source"})
    for_options: Mapping[str, tuple[Mapping[str, Any], ...]]
    #: service -> its profile's top call paths (at most 10)
    call_paths: Mapping[str, tuple[Mapping[str, Any], ...]]
    findings: tuple[KernelFinding, ...]


@dataclass(frozen=True)
class AuditResult:
    """Everything the report needs, built once by the pipeline; read by :func:`audit.audit_json.to_dict`."""

    case: Case
    collected: Collected
    lines: pd.DataFrame                              # every billing line read (schemas.billing.BillingLine)
    scope_mask: pd.Series                            # lines in scope
    scope_reasons: tuple[str, ...]                   # why lines fell outside the scope
    charges: pd.DataFrame                            # classified lines in scope, adjusted and priced
    ledger: Ledger
    intervals: tuple[ServiceInterval, ...]
    groups: Mapping[tuple[str, datetime], Group]
    coverage: Mapping[str, NodeCoverage]
    telemetry: Telemetry
    profiles: Mapping[str, ProfileSummary]
    traffic: Mapping[str, TrafficTotals]
    unit_costs: Mapping[str, UnitCost]
    reconciliation: Reconciliation
    options: tuple[Option, ...]
    extra_gpu_nodes: frozenset[str]
    evidence: Evidence
