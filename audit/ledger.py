"""The ledger of bucket parts, and what adjustment and the GPU split hand to attribution.

Adjustment (:mod:`audit.adjust`) leaves the :class:`Leftover` adjustments that had no charge to
apply to; the GPU split (:mod:`audit.gpusplit`) fills :class:`Group` sums per holder and interval and
:class:`NodeCoverage` per billed resource; attribution (:mod:`audit.attribute`) turns them into
:class:`Part` amounts of the :class:`Ledger` and per-service :class:`ServiceInterval` splits, which
unit costs, reconciliation, ranking, evidence and the audit.json writer read. A holder is a declared
service or one of the ``__…__`` names below.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Mapping

from audit.misfit import Misfit
from audit.money import ZERO

UNALLOCATED = "__unallocated__"
UNKNOWN = "__allocation_unknown__"
UNDECLARED = "__undeclared__"
NO_SAMPLE = "__no_sample__"
NO_VALID_SAMPLE = "__no_valid_sample__"
NOT_IN_TELEMETRY = "__not_in_telemetry__"
#: the money of GPU lines whose resource no line bills GPU time for (audit/gpu_timeless.py)
NO_GPU_TIME = "__no_gpu_time__"
#: holders whose GPU time telemetry did not measure (no sample, samples all excluded as out of
#: range or not finite, or a GPU it never names)
UNMEASURED_HOLDERS = (NO_SAMPLE, NO_VALID_SAMPLE, NOT_IN_TELEMETRY)


def is_service(holder: str) -> bool:
    """A declared service, rather than one of the ``__…__`` holders."""
    return not holder.startswith("__")


@dataclass(frozen=True)
class Leftover:
    """An adjustment with no charge to apply to: reported as unattributed."""

    line_id: str
    amount: Decimal
    reason: str


@dataclass
class Group:
    """Sums over the GPU-intervals of one holder in one interval (filled by the GPU split)."""

    holder: str
    ts: datetime
    gpus: int = 0
    paid: Decimal = ZERO          # net cost (after tax, credits, commitments)
    gross: Decimal = ZERO         # cost-basis cost before tax and credits
    priced: Decimal = ZERO        # quantity × unit price
    busy: Decimal = ZERO          # Σ b × net cost
    committed: Decimal = ZERO     # net cost of lines a commitment discount bills (CommitmentDiscountId)
    committed_busy: Decimal = ZERO  # Σ b × committed net cost
    paid_seconds: Decimal = ZERO
    busy_seconds: Decimal = ZERO
    sources: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    pods: set[str] = field(default_factory=set)
    #: the notes of lines placed in the intervals telemetry saw their node (audit/gpu_presence.py)
    placed: set[str] = field(default_factory=set)
    #: GPUs per instance type of their nodes ("" where neither billing nor telemetry names it)
    types: dict[str, int] = field(default_factory=dict)
    #: paid cost and paid GPU-seconds per instance type, kept for the unallocated holder only
    #: (the consolidation model prices the nodes it would release at them)
    type_paid: dict[str, Decimal] = field(default_factory=dict)
    type_seconds: dict[str, Decimal] = field(default_factory=dict)
    #: paid cost and GPU-seconds per declared service, kept for the unmeasured holders only (no
    #: sample, not in telemetry): GPUs the scheduler's requests place under the service's pods
    owned_paid: dict[str, Decimal] = field(default_factory=dict)
    owned_seconds: dict[str, Decimal] = field(default_factory=dict)
    #: the most GPUs any one line placed on each named node (and on each node and instance type):
    #: lines that bill the same node in the interval (two half hours, a GPU meter in two rows) bill
    #: the same GPUs, counted once in ``gpus`` and ``types``
    node_gpus: dict[tuple, Decimal] = field(default_factory=dict)

    def count_gpus(self, node: str, kind: str, gpus, lines: int = 1) -> None:
        """Count ``gpus`` held on ``node`` (of instance type ``kind``) by ``lines`` lines or placements:
        on a named node only what exceeds the most an earlier line placed there; lines with no node
        (billed instances telemetry does not name) add theirs each, their GPUs known to no other."""
        self.gpus += self._beyond((node,), gpus) if node else gpus * lines
        self.types[kind] = self.types.get(kind, 0) + (self._beyond((node, kind), gpus) if node else gpus * lines)

    def _beyond(self, where: tuple, gpus):
        """What ``gpus`` adds to the most counted at ``where`` so far (kept)."""
        most = self.node_gpus.get(where, 0)
        if gpus <= most:
            return 0
        self.node_gpus[where] = gpus
        return gpus - most


@dataclass
class NodeCoverage:
    """Paid vs observed GPU-hours of one billed resource (filled by the GPU split)."""

    resource_id: str
    node: str
    instance_type: str            # the machine the billing line bills (its instance type, a GCP part
                                  # line's machine spec), else the instance type telemetry gives its node
    paid_seconds: Decimal = ZERO
    observed_seconds: Decimal = ZERO
    gpus: int = 0                 # GPUs per instance billed (the instance table, or the GPU meter)
    #: telemetry's GPU time beyond what the lines pay (a node seen for more hours than billed,
    #: audit/gpu_unpaid.py): its hours, its GPU-seconds, and its kernel-active GPU-seconds per
    #: (holder, interval); in no bucket
    unpaid_hours: Decimal = ZERO
    seen_unpaid_seconds: Decimal = ZERO
    unpaid_busy: dict = field(default_factory=dict)


@dataclass
class Part:
    """One named part of a bucket, summed over the window."""

    bucket: str
    name: str
    service: str | None
    amount: Decimal = ZERO
    gpu_seconds: Decimal | None = None
    sources: set[str] = field(default_factory=set)
    reason: str = ""
    #: of ``amount``, what lines a commitment discount bills paid (kept for the GPU-capacity parts:
    #: releasing it saves nothing until the commitment ends, METHOD §7)
    committed: Decimal = ZERO


@dataclass(frozen=True)
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
    pods: frozenset[str] = frozenset()


class Ledger:
    """Parts keyed by (bucket, name, service), accumulated by attribution and read by every later stage."""

    def __init__(self) -> None:
        self.parts: dict[tuple[str, str, str | None], Part] = {}

    def add(self, bucket: str, name: str, service: str | None, amount: Decimal, source: str | None,
            reason: str, seconds: Decimal | None = None, committed: Decimal = ZERO) -> None:
        key = (bucket, name, service)
        part = self.parts.get(key)
        if part is None:
            part = self.parts[key] = Part(bucket, name, service, reason=reason)
        part.amount += amount
        part.committed += committed
        if seconds is not None:
            part.gpu_seconds = (part.gpu_seconds or ZERO) + seconds
        if source:
            part.sources.add(source)

    def total(self) -> Decimal:
        """The sum of every part (unrounded)."""
        return sum((p.amount for p in self.parts.values()), ZERO)

    def amounts(self) -> dict[tuple[str, str, str | None], Decimal]:
        """(bucket, name, service) -> amount."""
        return {key: part.amount for key, part in self.parts.items()}


@dataclass(frozen=True)
class GpuSplit:
    """What the GPU split hands to attribution and reconciliation."""

    #: (holder, interval start) -> the sums of its GPU-intervals
    groups: Mapping[tuple[str, datetime], Group]
    #: billed resource key (or line id) -> paid vs observed GPU time
    coverage: Mapping[str, NodeCoverage]
    #: nodes on which telemetry names more GPUs than the invoice bills
    extra_gpus: frozenset[str]
    #: lines whose paid GPU time was capped at their period (audit/line_facts.py ``capped_fit``)
    misfits: tuple[Misfit, ...] = ()


@dataclass(frozen=True)
class Attribution:
    """What attribution hands on: the ledger of parts and the per-service interval splits."""

    ledger: Ledger
    intervals: tuple[ServiceInterval, ...]
