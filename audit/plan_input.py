"""What the plan (audit/plan.py) needs from the case and the stages, gathered into a
:class:`~audit.plan.PlanInput`: the parts a month, the catalogue's run costs / next steps /
dependencies, who owns each part, where savings lie on committed capacity, and the ranges the
sensitivity uses (METHOD §7). Ranking calls :func:`plan_input` once, at the end of ``rank_options``.
"""
from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from audit.case import CLASSES, Case
from audit.ledger import Ledger
from audit.lines import tags_of
from audit.money import ZERO
from audit.plan import WHOLLY_COMMITTED, Deferral, PlanInput, owners_by_part, plan_part, target_range
from audit.result import Commitment

#: parts of GPU capacity: a saving there lies on committed capacity in the committed share of the
#: part's own money (:func:`part_committed_share`)
GPU_CAPACITY_PARTS = {"platform_overhead.capacity_above_demand", "platform_overhead.unallocated",
                      "platform_overhead.headroom"}
#: parts measured from GPU time (their lines are the gpu_compute lines); others are named for their class
GPU_CLASS = "gpu_compute"


def plan_input(case: Case, ledger: Ledger, charges: pd.DataFrame, commitments: Sequence[Commitment],
               part_monthly: Mapping[str, Decimal], specs: Sequence[Mapping[str, Any]], committed: Decimal,
               saving_at: Mapping[str, Callable[[Decimal], Decimal]]) -> PlanInput:
    """The plan's input; ``saving_at[id](u)``: what option ``id``'s model gives at the case's target
    utilisation ``u`` (for its target-utilisation sensitivity: the options whose saving depends on u);
    ``committed``: the committed share of all GPU compute, for a GPU-capacity part with no money."""
    owners = owners_by_part(
        ((f"{p.bucket}.{p.name}", p.service, p.amount) for p in ledger.parts.values()),
        {name: s.owner for name, s in case.services.items()},
        tag_values(charges, case.owner_tag, set(part_monthly)) if case.owner_tag else {})
    unused = unused_committed_share(charges)
    given = PlanInput(
        part_monthly=dict(part_monthly),
        run_costs={s["id"]: Decimal(str(s.get("run_cost_per_month", 0))) for s in specs},
        next_steps={s["id"]: str(s["next_step"]) for s in specs if s.get("next_step")},
        depends_on={s["id"]: tuple(str(d) for d in s.get("depends_on", ())) for s in specs},
        owners=owners,
        deferrals={s["id"]: d for s in specs if (d := part_deferral(s["acts_on"], ledger, committed, commitments,
                                                                   unused, charges)).share},
        loaded_rate=case.loaded_rate, loaded_rate_range=case.loaded_rate_range,
        target_utilisation=case.target_utilisation, target_range=case.target_utilisation_range,
        horizon_months=case.horizon_months, window_end=case.end)
    bounds = target_range(given)
    scales = {i: scale for i, at in saving_at.items()
              if (scale := target_scale(at, case.target_utilisation, bounds)) is not None}
    return replace(given, target_scale=scales) if scales else given


def part_deferral(acts_on: str, ledger: Ledger, fallback: Decimal, commitments: Sequence[Commitment],
                  unused_committed: Decimal, charges: pd.DataFrame) -> Deferral:
    """:func:`deferral` at the committed share of the part the option acts on."""
    share, source = part_committed_share(ledger, plan_part(acts_on), fallback)
    return deferral(acts_on, share, commitments, unused_committed, charges, source)


def part_committed_share(ledger: Ledger, part: str, fallback: Decimal) -> tuple[Decimal, str]:
    """The share of a part's money that lines billed under a commitment discount paid (the GPU split
    carries each line's committed money to the part: :attr:`audit.ledger.Part.committed`), and what
    measured it; ``fallback`` (the committed share of all GPU compute) where the part has no money."""
    amount = committed = ZERO
    for p in ledger.parts.values():
        if f"{p.bucket}.{p.name}" == part:
            amount, committed = amount + p.amount, committed + p.committed
    if amount <= 0:
        return fallback, "the part has no money of its own: the committed share of all GPU compute"
    share = min(max(committed / amount, ZERO), Decimal(1))
    return share, (f"{committed:.2f} of the part's {amount:.2f} over the window is on lines billed under "
                   "a commitment discount")


def deferral(acts_on: str, committed: Decimal, commitments: Sequence[Commitment], unused_committed: Decimal,
             charges: pd.DataFrame, share_source: str = "") -> Deferral:
    """The share of an option's saving on committed capacity, and t_c: the latest end, after the
    window, of the commitments the saving lies on (0 where all ended; None where none is listed).
    Those are the listed commitments whose id the part's lines name (CommitmentDiscountId or
    ContractApplied): an unrelated commitment of the contract (a spend floor ending years later)
    does not set t_c. Where no line names one, every listed commitment counts, and the note says so.
    ``unused_committed``: the share of the unused commitment part that commitments bill
    (:func:`unused_committed_share`); ``committed``: the GPU-capacity part's committed share
    (:func:`part_committed_share`), measured as ``share_source`` says."""
    part = plan_part(acts_on)
    share = unused_committed if part in WHOLLY_COMMITTED else committed if part in GPU_CAPACITY_PARTS else ZERO
    if not share:
        return Deferral()
    said = "" if part in WHOLLY_COMMITTED else share_source
    if not commitments:
        return Deferral(share, None, share_source=said)
    klass = "commitment_unused" if part in WHOLLY_COMMITTED else GPU_CLASS
    named = committed_ids(charges, klass)
    linked = [c for c in commitments if c.id in named]
    chosen = linked or list(commitments)
    latest = max(chosen, key=lambda c: c.months_after_window)
    source = (f"the end of commitment {latest.id}, the latest of the {len(linked)} its {klass} lines name"
              if linked else f"the latest end of the {len(chosen)} commitment(s) listed ({latest.id}): "
              f"no {klass} line names one of them")
    return Deferral(share, latest.months_after_window.max(ZERO), source, said)


def committed_ids(charges: pd.DataFrame, klass: str) -> set[str]:
    """The commitment ids the lines of class ``klass`` name: CommitmentDiscountId, and the
    ContractCommitmentIds of ContractApplied (a JSON array text)."""
    lines = charges.loc[charges["resource_class"] == klass]
    ids = {str(i) for i in lines["commitment_discount_id"].dropna().unique() if str(i)}
    if "contract_applied" in lines.columns:
        for text in lines["contract_applied"].dropna().unique():
            try:
                found = json.loads(text) if text else []
            except ValueError:
                continue
            ids |= {str(i) for i in found if i} if isinstance(found, list) else set()
    return ids


def target_scale(base_at: Callable[[Decimal], Decimal], target: Decimal,
                 bounds: tuple[Decimal, Decimal]) -> tuple[Decimal, Decimal] | None:
    """How a saving (``base_at(u)``) scales at the target's low and high (None where it is zero)."""
    base = base_at(target)
    if base <= 0:
        return None
    return base_at(bounds[0]) / base, base_at(bounds[1]) / base


def tag_values(charges: pd.DataFrame, tag: str, parts: set[str]) -> dict[str, dict[str, Decimal]]:
    """part -> value of ``tag`` -> amount on the part's lines: lines of the class a part is named for,
    the GPU compute lines for the parts measured from GPU time."""
    if charges.empty or "tags" not in charges.columns:
        return {}
    values = tags_of(charges).map(lambda t: str(t.get(tag, "")))
    out: dict[str, dict[str, Decimal]] = {}
    for part in parts:
        name = part.split(".")[1]
        klass = name if name in CLASSES else GPU_CLASS
        mask = (charges["resource_class"] == klass) & (values != "")
        for value, amount in zip(values[mask], charges.loc[mask, "net"]):
            out.setdefault(part, {}).setdefault(value, ZERO)
            out[part][value] += amount
    return out


def unused_committed_share(charges: pd.DataFrame) -> Decimal:
    """The share (pre tax) of the unused commitment part billed under a commitment discount. The rest
    is reserved capacity paid but not used (an On-Demand Capacity Reservation, FOCUS
    CapacityReservationStatus Unused), which is released when it is cancelled, not when a term ends.
    1 where the part is empty."""
    unused = charges.loc[charges["resource_class"] == "commitment_unused", ["pretax", "commitment_discount_id"]]
    total = sum(unused["pretax"], ZERO)
    if not total:
        return Decimal(1)
    return sum(unused.loc[unused["commitment_discount_id"].fillna("") != "", "pretax"], ZERO) / total
