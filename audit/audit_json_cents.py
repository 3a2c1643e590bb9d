"""Every cent figure of audit.json from one rounding (METHOD §4, §5: amounts are rounded once, at the
end, and the leftover cents handed out by largest remainder).

Two partitions of the total are shown, by bucket and by service, and each must sum to it:

- the buckets are rounded by largest remainder to the headline total (or taken from the rounded
  months), each bucket's parts by largest remainder to the bucket;
- a service's ``by_bucket`` is the sum of its rounded parts per bucket, its ``cost`` the sum of
  ``by_bucket``, its ``owned_lines`` and ``unattributed`` the sums of its line and unattributed parts;
- the shared pool is the sum of the rounded shared parts; it goes by largest remainder to each
  service's ``total_cost`` less its ``cost`` and to what no service took, so that ``total_cost`` is
  its exact own + shared cost to the cent (the remainder handed out once, over the services) and
  ``shared_cost`` = ``total_cost`` − ``cost`` (a service with no exact share takes none);
- ``composition`` = each ``total_cost``, the unattributed bucket and the unallocated share: it sums
  to the total because every rounded part lies in exactly one of them.

Rounding each figure on its own (``cents(own + shared)``) could land a cent away from these sums:
40.514869 rounds to 40.51 alone, while 40.51 + 4.33 + 12.54 = 57.38 against a total of 57.39.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Mapping

from audit.buckets import BUCKETS, LINE_PARTS, SHARED_PARTS
from audit.money import ZERO, dsum, largest_remainder
from audit.result import AuditResult

#: the buckets a service owns parts in (its unattributed parts are shown apart, never owned)
OWNED_BUCKETS = ("model_compute", "serving_path", "platform_overhead")
PartKey = tuple[str, str, "str | None"]
#: zero to the cent, where a sum of rounded parts starts (written "0.00", never "0")
NO_CENTS = Decimal("0.00")


@dataclass(frozen=True)
class ServiceCents:
    """One service's cent figures, sums of its rounded parts and its rounded share of the pool."""

    by_bucket: Mapping[str, Decimal]
    owned_lines: Decimal = NO_CENTS
    shared: Decimal = NO_CENTS
    unattributed: Decimal = NO_CENTS
    #: its model_compute.kernel_active part (what the prefill / decode costs split)
    kernel_active: Decimal = NO_CENTS

    @property
    def own(self) -> Decimal:
        """What it owns: Σ by_bucket."""
        return NO_CENTS + dsum(self.by_bucket.values())

    @property
    def total(self) -> Decimal:
        """Own + shared: its ``total_cost`` and its member of ``composition``."""
        return self.own + self.shared


@dataclass(frozen=True)
class Cents:
    """The rounded buckets and parts of an audit and every figure summed from them."""

    buckets: Mapping[str, Decimal]
    parts: Mapping[PartKey, Decimal]
    #: each bucket's parts in the order audit.json lists them (largest first)
    order: Mapping[str, list[PartKey]]
    services: Mapping[str, ServiceCents]
    pool: Decimal
    unallocated: Decimal


def rounded(result: AuditResult, total: Decimal, given: Mapping[str, str] | None = None) -> Cents:
    """The audit's cent figures: buckets to ``total`` (or ``given``, the sums of the rounded months),
    parts to their bucket, services and the pool from the rounded parts."""
    raw: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    for p in result.ledger.parts.values():
        raw[p.bucket] += p.amount
    buckets = ({b: Decimal(given[b]) for b in BUCKETS} if given is not None
               else largest_remainder({b: raw[b] for b in BUCKETS}, total))
    parts: dict[PartKey, Decimal] = {}
    order: dict[str, list[PartKey]] = {}
    for bucket in BUCKETS:
        mine = sorted((p for p in result.ledger.parts.values() if p.bucket == bucket),
                      key=lambda p: (-p.amount, p.name, p.service or ""))
        order[bucket] = [(p.bucket, p.name, p.service) for p in mine]
        # keyed by position, so that equal remainders go to the larger part first
        shares = largest_remainder({f"{i}": p.amount for i, p in enumerate(mine)}, buckets[bucket]) if mine else {}
        parts.update((key, shares[f"{i}"]) for i, key in enumerate(order[bucket]))
    pool = NO_CENTS + dsum(v for (b, n, s), v in parts.items() if s is None and (b, n) in SHARED_PARTS)
    owned = {name: _service(parts, name) for name in result.unit_costs}
    shared, unallocated = _split_pool(result, owned, pool)
    services = {name: replace(held, shared=shared.get(name, NO_CENTS)) for name, held in owned.items()}
    return Cents(buckets, parts, order, services, pool, unallocated)


def _split_pool(result: AuditResult, owned: Mapping[str, ServiceCents],
                pool: Decimal) -> tuple[dict[str, Decimal], Decimal]:
    """The rounded pool by largest remainder to each service with a share, by what its exact own +
    shared cost lacks beyond its rounded ``cost``, and to what no service took: each service's
    ``total_cost`` is then its exact cost to the cent, whatever its parts' cents added up to."""
    lacks = {f"s:{name}": uc.own + uc.shared - owned[name].own
             for name, uc in result.unit_costs.items() if uc.shared}
    lacks["unallocated"] = result.shared.unallocated if result.shared else ZERO
    split = largest_remainder(lacks, pool)
    return ({name: split[f"s:{name}"] for name in result.unit_costs if f"s:{name}" in split},
            split["unallocated"])


def _service(parts: Mapping[PartKey, Decimal], name: str) -> ServiceCents:
    """A service's owned figures: the sums of its rounded parts (its share of the pool comes after)."""
    by_bucket = {b: NO_CENTS for b in OWNED_BUCKETS}
    lines = unattributed = NO_CENTS
    for (bucket, part, service), amount in parts.items():
        if service != name:
            continue
        if bucket == "unattributed":
            unattributed += amount
            continue
        by_bucket[bucket] += amount
        if part in LINE_PARTS:
            lines += amount
    return ServiceCents(by_bucket, lines, NO_CENTS, unattributed,
                        parts.get(("model_compute", "kernel_active", name), NO_CENTS))
