"""Stage 5: the options catalogue × measured parts -> saving, cost and payback bands, ranked (METHOD §7)."""
from __future__ import annotations

import difflib
import math
import tomllib
from collections import defaultdict
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

import pandas as pd

from audit.case import Case, Service
from audit.errors import ConfigError
from audit.ledger import Ledger, ServiceInterval
from audit.money import ZERO
from audit.normalised import ProfileSummary
from audit.result import Option

MONTH_DAYS = Decimal("30.4375")  # 365.25 / 12
BANDS = ("low", "expected", "high")
UNMEASURED_PARTS = {
    "model_compute.prefill": "the profiles do not separate prefill from decode",
    "model_compute.decode": "the profiles do not separate prefill from decode",
}
#: parts measured whenever the GPU split ran, even where they came out zero
ALWAYS_MEASURED = {"platform_overhead.unallocated", "platform_overhead.capacity_above_demand",
                   "platform_overhead.headroom"}
#: parts a kernel profile measures
PROFILE_MEASURED = {"serving_path.in_flight_idle", "model_compute.kernel_active"}


@dataclass(frozen=True)
class RankInput:
    """What ranking prices the catalogue on: the case, the ledger and the service intervals, the
    telemetry interval, the charges (for the share under commitment) and the kernel profiles."""

    case: Case
    ledger: Ledger
    intervals: Sequence[ServiceInterval]
    step: int                                    # telemetry interval, seconds
    charges: pd.DataFrame                        # classified, adjusted and priced (audit.prices)
    profiles: Mapping[str, ProfileSummary]


@lru_cache(maxsize=1)
def catalogue() -> tuple[dict, ...]:
    """The shipped options, in file order."""
    raw = tomllib.loads(resources.files("audit").joinpath("data/options.toml").read_text())
    return tuple(raw["option"])


def _bands(table, key) -> dict[str, Decimal]:
    value = table[key]
    return {b: Decimal(str(value[b])) for b in BANDS}


def merged_catalogue(overrides: Mapping[str, Mapping[str, Any]], case_path: Path) -> list[tuple[dict, bool]]:
    """Shipped options with the case's overrides applied; an unknown id is an error."""
    ids = [o["id"] for o in catalogue()]
    problems = []
    for key in overrides:
        if key not in ids:
            near = difflib.get_close_matches(key, ids, n=1)
            problems.append(f"[[options]] id {key!r} is not in the catalogue"
                            + (f"; did you mean {near[0]!r}?" if near else f" ({', '.join(ids)})"))
    if problems:
        raise ConfigError(case_path, problems)
    out = []
    for option in catalogue():
        override = overrides.get(option["id"])
        merged = dict(option, **{k: v for k, v in (override or {}).items() if k != "id"})
        out.append((merged, override is not None))
    return out


def part_amounts(ledger: Ledger) -> dict[str, Decimal]:
    """Amount per bucket.part over the window (services summed)."""
    totals: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    for p in ledger.parts.values():
        totals[f"{p.bucket}.{p.name}"] += p.amount
    return dict(totals)


def rightsizable(intervals: Sequence[ServiceInterval], services: Mapping[str, Service], target: Decimal,
                 step: int) -> Decimal:
    """Money of whole replicas held beyond smoothed demand, capped by capacity above demand."""
    total = ZERO
    by_service = defaultdict(list)
    for iv in intervals:
        if iv.serving is not None and iv.gpus:
            by_service[iv.service].append(iv)
    for name, ivs in by_service.items():
        svc = services[name]
        ivs.sort(key=lambda iv: iv.ts)
        need = [_replicas_needed(iv, target, step, svc.gpus_per_replica) for iv in ivs]
        reach = max(0, math.ceil(svc.scale_reaction_seconds / step))
        for i, iv in enumerate(ivs):
            smoothed = max(max(need[max(0, i - reach): i + reach + 1]), svc.min_replicas)
            surplus = max(0, iv.gpus // svc.gpus_per_replica - smoothed)
            money = Decimal(surplus * svc.gpus_per_replica) * iv.paid / iv.gpus
            total += min(money, iv.overhead - (iv.headroom or ZERO))
    return total


def _replicas_needed(iv: ServiceInterval, target: Decimal, step: int, per_replica: int) -> int:
    demand_gpus = (iv.busy_seconds + (iv.serving_seconds or ZERO)) / (target * Decimal(step))
    return math.ceil(demand_gpus / per_replica)


GPU_CAPACITY_PARTS = {"platform_overhead.capacity_above_demand", "platform_overhead.unallocated",
                      "platform_overhead.headroom"}


def rank_options(given: RankInput) -> list[Option]:
    """Price every catalogue option on its part and rank by expected payback.

    Releasing capacity billed under a commitment saves nothing until the commitment ends, which
    the options on GPU capacity say (with the committed share of GPU compute).
    """
    case = given.case
    amounts = part_amounts(given.ledger)
    measured = measured_parts(given.ledger, given.profiles)
    committed = committed_share(given.charges)
    per_month = MONTH_DAYS / case.days
    options = []
    for spec, overridden in merged_catalogue(case.option_overrides, case.path):
        part = spec["acts_on"]
        base: Decimal | None
        if spec.get("pricing") == "whole_replicas" and part in amounts:
            base = rightsizable(given.intervals, case.services, case.target_utilisation, given.step)
            note = "priced on whole replicas above smoothed demand, not on the whole part"
        else:
            base, note = amounts.get(part), None
        option = _price(spec, overridden, part, base, per_month, case, measured, note)
        if part in GPU_CAPACITY_PARTS and committed > 0:
            option = replace(option, assumptions=option.assumptions + (
                f"{committed:.0%} of GPU compute is under a commitment: the saving "
                "on that capacity starts when the commitment ends",))
        options.append(option)
    return _ranked(options)


def measured_parts(ledger: Ledger, profiles: Mapping[str, ProfileSummary]) -> set[str]:
    """Parts the case measured: those in the ledger, and those measured even where they came out zero."""
    parts = {f"{p.bucket}.{p.name}" for p in ledger.parts.values()} | ALWAYS_MEASURED
    return parts | PROFILE_MEASURED if profiles else parts


def committed_share(charges: pd.DataFrame) -> Decimal:
    """Share of GPU compute (pre tax) billed under a commitment discount."""
    gpu = charges[charges["resource_class"] == "gpu_compute"]
    total = sum(gpu["pretax"], ZERO)
    committed = sum(gpu.loc[gpu["commitment_discount_id"] != "", "pretax"], ZERO)
    return committed / total if total else ZERO


def _price(spec: Mapping[str, Any], overridden: bool, part: str, base: Decimal | None, per_month: Decimal,
           case: Case, measured_parts: Collection[str], note: str | None) -> Option:
    effort = _bands(spec, "effort_hours")
    cost = {b: effort[b] * case.loaded_rate for b in BANDS}
    recover = _bands(spec, "recoverable")
    run_cost = Decimal(str(spec.get("run_cost_per_month", 0)))
    assumptions = [f"recoverable share of the part {recover['low']} / {recover['expected']} / {recover['high']}",
                   f"effort {effort['low']} / {effort['expected']} / {effort['high']} h at "
                   f"{case.loaded_rate} {case.currency}/h", f"why: {spec['reason']}"]
    if run_cost:
        assumptions.append(f"adds {run_cost} {case.currency} a month to run")
    if note:
        assumptions.append(note)
    option = Option(spec["id"], spec["title"], part, "priced", None, None, cost, None, effort,
                    tuple(assumptions), overridden)
    if part in UNMEASURED_PARTS or (base is None and part not in measured_parts):
        why = UNMEASURED_PARTS.get(part, "no measurement in this case produced it")
        return replace(option, status="not_measured", reason=f"part not measured: {why}")
    monthly = (base or ZERO) * per_month
    saving = {b: monthly * recover[b] - run_cost for b in BANDS}
    if saving["low"] <= 0:
        return replace(option, part_monthly=monthly, saving=saving, status="no_saving",
                       reason="the part is zero (or below the run cost) in this case")
    payback = {"low": cost["low"] / saving["high"], "expected": cost["expected"] / saving["expected"],
               "high": cost["high"] / saving["low"]}
    return replace(option, part_monthly=monthly, saving=saving, payback=payback)


def _ranked(options: list[Option]) -> list[Option]:
    priced = sorted((o for o in options if o.status == "priced"), key=_expected_payback)
    rest = sorted((o for o in options if o.status != "priced"), key=lambda o: (o.status, o.title))
    return [replace(option, rank=i) for i, option in enumerate(priced + rest, 1)]


def _expected_payback(option: Option) -> tuple[Decimal, str]:
    """A priced option's sort key: its expected payback, then its id."""
    assert option.payback is not None, option.id  # every priced option has its payback
    return option.payback["expected"], option.id
