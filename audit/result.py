"""The audit's result: :class:`AuditResult`, and the typed result of each stage it holds.

Every stage after attribution returns one of the frozen types below (unit costs, reconciliation,
options, evidence); the pipeline gathers them into an :class:`AuditResult`, which the audit.json
writer (:mod:`audit.audit_json`) only formats. Amounts are unrounded Decimals; rounding is the
writer's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Mapping

import pandas as pd

from audit.case import Case
from audit.collected import Collected
from audit.fit import Fit
from audit.ledger import Group, Ledger, NodeCoverage, ServiceInterval
from audit.money import ZERO
from audit.normalised import ProfileSummary, Telemetry
from connectors.telemetry.families import counter_beside

#: the low / expected / high figures of an option
Bands = Mapping[str, Decimal]
#: one figure of the serving evidence: {"value", "source", "reason"} as audit.json writes it
Figure = Mapping[str, str | None]


#: a request log's classes, as audit.json ``request_counts`` names them
COUNT_CLASSES = ("lines", "successful", "failed", "health_checks", "unparseable", "other_paths")


#: the token counts of a service's traffic
TOKEN_COLUMNS = ("prompt_tokens", "generated_tokens")


def _counter_of(sources: frozenset[str]) -> str:
    """The request counter a traffic source names ("<source> (<format>): <counter>"; audit/normalise.py)."""
    return min(sources, default="").rpartition(": ")[2]


@dataclass(frozen=True)
class TrafficTotals:
    """Requests and tokens of one service, in total and per interval (from the serving counters).
    A token total is None (not measured) unless a token series measured it in every pod-interval
    the request source counted (``rows``; ``token_rows``: how many each token column measured)."""

    #: None where no request series measured it (the source's pods had token series only)
    requests: Decimal | None
    prompt_tokens: Decimal | None
    generated_tokens: Decimal | None
    by_ts: Mapping[datetime, Decimal]
    by_pod_ts: Mapping[tuple[str, datetime], Decimal]
    pods: frozenset[str]
    sources: frozenset[str]
    #: every source's request total (the chosen source's included), for the denominator check
    by_source: Mapping[str, Decimal]
    #: request logs' line classes per source (METHOD §4): lines (all requests), successful, failed,
    #: health_checks, unparseable, other_paths (2xx/3xx outside the path filter); {} for counters
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    rows: int = 0
    token_rows: Mapping[str, int] = field(default_factory=dict)
    #: all requests a server counter's pods received (METHOD §4): its received-request counter, else its
    #: successful + failed requests; None where not measured (``all_unmeasured`` says what is missing)
    all_requests: Decimal | None = None
    #: the series that measured ``all_requests`` ("<source> (<format>): <counter>[ + <counter>]")
    all_source: str | None = None
    all_unmeasured: str | None = None

    @property
    def counted_by_logs(self) -> bool:
        """Whether the denominator is request logs (not a server counter beside them)."""
        return bool(self.counts) and bool(self.sources) and set(self.sources) <= set(self.counts)

    @property
    def tokens(self) -> Decimal | None:
        """Prompt plus generated tokens; None where either is not measured."""
        if self.prompt_tokens is None or self.generated_tokens is None:
            return None
        return self.prompt_tokens + self.generated_tokens

    def tokens_unmeasured(self, columns: tuple[str, ...] = TOKEN_COLUMNS) -> str | None:
        """Why the token ``columns`` left None are not measured (None where all are): the request
        counter had no token series beside it, the family counts no tokens (Triton), or the token
        series measured only some of the pod-intervals the request counter counted."""
        missing = [c for c in columns if getattr(self, c) is None]
        if not missing:
            return None
        where = ", ".join(sorted(self.sources))
        if self.counted_by_logs:
            return f"a request log ({where}) counts no tokens"
        found = [counter_beside(_counter_of(self.sources), c) for c in missing]
        series = [s for s in found if s is not None]
        if len(series) < len(found):
            return f"{where} counts requests only: its server exports no token counter"
        measured = [self.token_rows.get(c, 0) for c in missing]
        if not any(measured):
            return f"no {' or '.join(series)} series beside {where}"
        return (f"{where} counted {self.rows:,} pod-intervals, of which "
                + ", ".join(f"{s} measured {n:,}" for s, n in zip(series, measured)))

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
    #: what the service owns outright, by part: its GPU parts and the lines assigned to it
    owned_lines: Decimal = ZERO


@dataclass(frozen=True)
class SharedSplit:
    """How the shared cost was split over services (METHOD §4).

    ``key`` is the case's allocation key, ``used`` the key that split (a fallback when the case's
    summed to zero, with ``note`` saying so), ``weights`` each service's weight under it, ``pool`` the
    shared cost and ``unallocated`` what no service could take (there is no service to take it).
    """

    key: str
    used: str
    note: str | None
    pool: Decimal
    unallocated: Decimal
    weights: Mapping[str, Decimal]
    #: service -> shared part name -> its share of that part (share × part / pool; they sum to its share)
    by_part: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)


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
    # --- the plan (audit/plan.py, METHOD §7), set by plan.plan(); the defaults mean "not planned" ---
    #: the bucket.part the option counts towards when options on one part are combined
    plan_part: str | None = None
    #: that part's amount a month (the whole part, not the option's own base)
    plan_part_monthly: Decimal | None = None
    #: money a month it adds to run (already subtracted from ``saving``)
    run_cost: Decimal = ZERO
    #: its saving after the options ranked above it on the same part took theirs (net of run cost)
    marginal_saving: Bands | None = None
    #: s₀: the monthly saving available at the end of W; s₁: the extra from the commitment's end
    saving_now: Bands | None = None
    saving_deferred: Bands | None = None
    #: t_c: months from the end of W to the commitment's end (None: no end date known)
    deferred_months: Decimal | None = None
    #: the share of the saving on committed capacity (METHOD §7), where some is; None: none
    committed_share: Decimal | None = None
    #: payback (expected) under the low and high of each input
    sensitivity: tuple[Sensitivity, ...] = ()
    #: the monthly saving that pays the expected cost back within the horizon
    break_even: Decimal | None = None
    horizon_months: Decimal | None = None
    #: who can act: the owners of the part it acts on (services' owner, or the case's owner_tag)
    owners: tuple[str, ...] = ()
    next_step: str | None = None
    depends_on: tuple[str, ...] = ()
    # --- end of the plan block ---
    # --- how the saving was formed (audit/pricing/, METHOD §7), set by rank._price ---
    #: "modelled" (a model of audit/pricing/ on the measured data) or "assumed" (the catalogue fraction)
    basis: str = "assumed"
    #: (name, value as text, source) of each figure the saving stood on
    inputs: tuple[tuple[str, str, str], ...] = ()
    #: modelled: how low and high were formed; assumed: why no model priced it
    basis_note: str | None = None
    #: where the saving starts at a commitment's end: that end, when the billing names it
    commitment_end: datetime | None = None
    #: service -> low / expected / high monthly saving, where the model replays per service (right-size)
    by_service: Mapping[str, Bands] | None = None
    # --- end of the pricing block ---

    @property
    def bucket(self) -> str:
        return self.acts_on.split(".")[0]


@dataclass(frozen=True)
class Sensitivity:
    """An option's expected payback with one input at its low and at its high (METHOD §7)."""

    input: str
    low: str                          # the input's low, as text ("0.5", "112.50 USD/h")
    high: str
    payback_at_low: Decimal | None    # None: no saving at that value
    payback_at_high: Decimal | None


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
    #: service -> its profile's top idle call paths (audit/trace/idle.py; "cost" = share × in_flight_idle)
    idle_paths: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)


#: days in a month for commitment terms (METHOD §7: a month is 30.4375 days)
MONTH_DAYS = Decimal("30.4375")


@dataclass(frozen=True)
class Commitment:
    """One contract commitment of a FOCUS 1.3 Contract Commitment dataset (METHOD §7: its end is
    when a saving that lies on committed capacity can start)."""

    id: str
    type: str                           # ContractCommitmentType: "Savings Plan", "Reserved Instance", …
    category: str                       # "Spend" or "Usage"
    start: datetime
    end: datetime
    term_months: Decimal                # (end − start) in months of 30.4375 days
    months_after_window: Decimal        # end − the window's end, in months (negative: ended before it)
    unit: str                           # ContractCommitmentUnit ("" for a spend commitment)
    quantity: Decimal | None
    cost: Decimal | None
    currency: str
    contract_id: str
    contract_end: datetime | None
    description: str
    source: str                         # the billing source whose option named the dataset


def commitments_of(collected: Collected, window_end: datetime) -> tuple[Commitment, ...]:
    """The commitments of every billing source that read a Contract Commitment dataset, by end date."""
    found = []
    for frame in collected.frames:
        table = frame.tables.get("commitments")
        if table is None:
            continue
        for r in table.to_dict("records"):
            start, end = r["start"].to_pydatetime(), r["end"].to_pydatetime()
            found.append(Commitment(
                r["commitment_id"], r["commitment_type"], r["category"], start, end,
                _months(end - start), _months(end - window_end), r["unit"], r["quantity"], r["cost"],
                r["currency"], r["contract_id"],
                None if pd.isna(r["contract_end"]) else r["contract_end"].to_pydatetime(),
                r["description"], frame.spec.name))
    return tuple(sorted(found, key=lambda c: (c.end, c.id)))


def _months(span) -> Decimal:
    return Decimal(int(span.total_seconds())) / (MONTH_DAYS * 86400)


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
    #: what of the case matches nothing in the data (audit/fit.py), as audit.json ``fit`` lists it
    fit: Fit = Fit()
    #: how shared cost was split over services (audit/unit_costs.py)
    shared: SharedSplit | None = None
    #: each calendar month of a window that spans two or more, audited as a sub-window on the same
    #: reading of the sources (audit/pipeline.py; METHOD §10); () for a window inside one month
    months: tuple[AuditResult, ...] = ()
    #: where the GPU split's sums ran when a billing source asked for its own engine
    #: (audit/split_remote.py ``InPlace``); None: here
    split_in_place: Any = None

    @property
    def commitments(self) -> tuple[Commitment, ...]:
        """The contract commitments the billing sources' Contract Commitment datasets list."""
        return commitments_of(self.collected, self.case.end)
