"""Stage 5: the options catalogue × measured parts -> saving, cost and payback bands, ranked (METHOD §7)."""
from __future__ import annotations

import difflib
import math
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from importlib import resources

from audit.attribute import Ledger, ServiceInterval
from audit.errors import ConfigError
from audit.money import ZERO

MONTH_DAYS = Decimal("30.4375")  # 365.25 / 12
BANDS = ("low", "expected", "high")
UNMEASURED_PARTS = {
    "model_compute.prefill": "the profiles do not separate prefill from decode",
    "model_compute.decode": "the profiles do not separate prefill from decode",
}


@dataclass
class Option:
    """One priced (or unmeasured) intervention."""

    id: str
    title: str
    acts_on: str
    status: str
    part_monthly: Decimal | None
    saving: dict | None
    cost: dict
    payback: dict | None
    effort: dict
    assumptions: list[str] = field(default_factory=list)
    overridden: bool = False
    reason: str | None = None
    rank: int | None = None

    @property
    def bucket(self) -> str:
        return self.acts_on.split(".")[0]


@lru_cache(maxsize=1)
def catalogue() -> tuple[dict, ...]:
    """The shipped options, in file order."""
    raw = tomllib.loads(resources.files("audit").joinpath("data/options.toml").read_text())
    return tuple(raw["option"])


def _bands(table, key) -> dict[str, Decimal]:
    value = table[key]
    return {b: Decimal(str(value[b])) for b in BANDS}


def merged_catalogue(overrides, case_path) -> list[tuple[dict, bool]]:
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
    totals = defaultdict(lambda: ZERO)
    for p in ledger.parts.values():
        totals[f"{p.bucket}.{p.name}"] += p.amount
    return dict(totals)


def rightsizable(intervals: list[ServiceInterval], services, target: Decimal, step: int) -> Decimal:
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


def rank_options(ledger, intervals, services, case, step: int, measured_parts: set[str],
                 committed_share: Decimal = ZERO) -> list[Option]:
    """Price every catalogue option on its part and rank by expected payback.

    ``committed_share`` is the share of GPU compute billed under a commitment: releasing that
    capacity saves nothing until the commitment ends, which the options say.
    """
    amounts = part_amounts(ledger)
    per_month = MONTH_DAYS / case.days
    options = []
    for spec, overridden in merged_catalogue(case.option_overrides, case.path):
        part = spec["acts_on"]
        if spec.get("pricing") == "whole_replicas" and part in amounts:
            base = rightsizable(intervals, services, case.target_utilisation, step)
            note = "priced on whole replicas above smoothed demand, not on the whole part"
        else:
            base, note = amounts.get(part), None
        option = _price(spec, overridden, part, base, per_month, case, measured_parts, note)
        if part in GPU_CAPACITY_PARTS and committed_share > 0:
            option.assumptions.append(f"{committed_share:.0%} of GPU compute is under a commitment: the saving "
                                      "on that capacity starts when the commitment ends")
        options.append(option)
    return _ranked(options)


def _price(spec, overridden, part, base, per_month, case, measured_parts, note) -> Option:
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
                    assumptions, overridden)
    if part in UNMEASURED_PARTS or (base is None and part not in measured_parts):
        option.status, option.reason = "not_measured", f"part not measured: {UNMEASURED_PARTS.get(part, 'no measurement in this case produced it')}"
        return option
    monthly = (base or ZERO) * per_month
    option.part_monthly = monthly
    option.saving = {b: monthly * recover[b] - run_cost for b in BANDS}
    if option.saving["low"] <= 0:
        option.status, option.reason = "no_saving", "the part is zero (or below the run cost) in this case"
        return option
    option.payback = {"low": cost["low"] / option.saving["high"], "expected": cost["expected"] / option.saving["expected"],
                      "high": cost["high"] / option.saving["low"]}
    return option


def _ranked(options: list[Option]) -> list[Option]:
    priced = sorted((o for o in options if o.status == "priced"), key=lambda o: (o.payback["expected"], o.id))
    rest = sorted((o for o in options if o.status != "priced"), key=lambda o: (o.status, o.title))
    for i, option in enumerate(priced + rest, 1):
        option.rank = i
    return priced + rest
