"""Right-size a commitment: the level that minimises cost over the window's hourly usage (METHOD §7).

From the billing: each hour's usage the commitment covered (lines with a commitment discount and
status Used) and its unused part (status Unused), each line spread evenly over its hours. The
commitment's discount d = 1 − effective ÷ list cost of the covered lines. At a level L (money per
hour at committed rates) an hour whose covered usage is e costs L + max(0, e − L) ÷ (1 − d) (what the
level no longer covers runs on demand). The best level is the one of {0} ∪ {e} with the lowest cost
over the window (the lowest on a tie); the saving is what the commitment cost over the window (used
plus unused) less the cost at that level, from the commitment's renewal on. Usage the commitment did
not cover is not the commitment's: buying more is another decision, not this option.
Bands: expected and high, the best level; low, the level that still covers the busiest hour's
usage (nothing moves on demand), never above the level held now.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from audit.money import ZERO
from audit.pricing import Input, Modelled, ordered

BILLING = "billing lines with CommitmentDiscountId"
#: the columns of the charges the model reads
COLUMNS = ["commitment_discount_id", "commitment_discount_status", "start", "end", "net", "list_cost",
           "effective_cost"]


@dataclass(frozen=True)
class Usage:
    """The window's hourly figures of the commitments (money, spread evenly over each line's hours)."""

    covered: tuple[Decimal, ...]      # Used: usage the commitment covered
    unused: tuple[Decimal, ...]       # Unused: commitment paid for nothing
    discount: Decimal                 # 1 − effective ÷ list of the covered lines
    ids: tuple[str, ...]


def hours_of(start: datetime, end: datetime) -> int:
    return max(0, int((end - start).total_seconds() // 3600))


HOUR_NS = 3600 * 10**9


def spread(lines: pd.DataFrame, start: datetime, hours: int, column: str = "net") -> list[Decimal]:
    """Each line's ``column`` spread evenly over its whole hours, within the window, summed per hour
    in line order. Times are read as integer nanoseconds (a month of hourly lines is 100,000s of them)."""
    out = [ZERO] * hours
    lo, hi = _ns(lines["start"]), _ns(lines["end"])
    origin = pd.Timestamp(start).as_unit("ns").value
    spans = np.maximum(0, (hi - lo) // HOUR_NS)
    firsts = (lo - origin) // HOUR_NS
    for span, first, amount in zip(spans.tolist(), firsts.tolist(), lines[column].to_numpy(dtype=object)):
        if not span:
            continue
        per_hour = amount / span
        for h in range(max(0, first), min(hours, first + span)):
            out[h] += per_hour
    return out


def _ns(times: pd.Series) -> np.ndarray:
    """UTC times as int64 nanoseconds since the epoch."""
    return pd.to_datetime(times, utc=True).dt.as_unit("ns").astype("int64").to_numpy()


def discount_of(covered: pd.DataFrame) -> Decimal | None:
    """1 − effective ÷ list cost over the covered lines, None without list costs."""
    listed, effective = ZERO, ZERO
    for list_cost, effective_cost in zip(covered["list_cost"].to_numpy(dtype=object),
                                         covered["effective_cost"].to_numpy(dtype=object)):
        if list_cost is not None and list_cost == list_cost:  # None or NaN: no list cost
            listed += list_cost
            effective += effective_cost
    return None if listed <= 0 else max(ZERO, min(Decimal("0.99"), 1 - effective / listed))


def usage_of(lines: pd.DataFrame | Sequence[Mapping], start: datetime, end: datetime) -> Usage | None:
    """The hourly usage of the commitments in ``lines`` (charges, or their records), None without any."""
    frame = lines if isinstance(lines, pd.DataFrame) else pd.DataFrame(list(lines), columns=COLUMNS)
    ids = frame["commitment_discount_id"].fillna("").astype(str)
    committed = frame[ids != ""]
    status = committed["commitment_discount_status"].fillna("").astype(str).str.lower()
    used, unused = committed[status == "used"], committed[status == "unused"]
    discount = discount_of(used) if len(used) else None
    if not len(used) or discount is None:
        return None
    hours = hours_of(start, end)
    return Usage(tuple(spread(used, start, hours)), tuple(spread(unused, start, hours)), discount,
                 tuple(sorted(set(ids[ids != ""]))))


def cost_at(level: Decimal, demand: Sequence[Decimal], discount: Decimal) -> Decimal:
    """The window's cost at a constant commitment level (committed rates; the excess on demand)."""
    excess = sum((max(ZERO, e - level) for e in demand), ZERO)
    return level * len(demand) + excess / (1 - discount)


def best_level(demand: Sequence[Decimal], discount: Decimal) -> Decimal:
    """The level of {0} ∪ demand with the lowest cost over the window (the lowest level on a tie).

    Sorted once; Σ max(0, e − L) is the suffix sum above L less L × the hours above it.
    """
    values = sorted(demand)
    n = len(values)
    suffix = [ZERO] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + values[i]
    best, best_cost = ZERO, suffix[0] / (1 - discount)
    for i, level in enumerate(values):
        above = n - i - 1
        cost = level * n + (suffix[i + 1] - level * above) / (1 - discount)
        if cost < best_cost:
            best, best_cost = level, cost
    return best


def right_size_commitment(lines: pd.DataFrame | Sequence[Mapping], start: datetime, end: datetime,
                          ends: Mapping[str, datetime]) -> Modelled | None:
    """The commitment model over the window, or None where no covered usage with a list cost is billed."""
    usage = usage_of(lines, start, end)
    if usage is None:
        return None
    demand = list(usage.covered)
    paid = sum(usage.covered, ZERO) + sum(usage.unused, ZERO)
    best = best_level(demand, usage.discount)
    hours = len(demand)
    level_now = (paid / hours) if hours else ZERO
    cautious = min(max(demand, default=ZERO), level_now)
    best_cost = cost_at(best, demand, usage.discount)
    expected = paid - best_cost
    low = paid - cost_at(cautious, demand, usage.discount)
    found = [ends[i] for i in usage.ids if i in ends]
    end_at = min(found) if found else None
    return Modelled(ordered(low, expected, expected), tuple(_inputs(usage, best, end_at, (paid, best_cost))),
                    "expected / high: the level with the lowest cost on the measured hourly usage; low: the "
                    "level covering the busiest hour (nothing on demand), never above the level now", end_at)


def _inputs(usage: Usage, best: Decimal, end_at: datetime | None, costs: tuple[Decimal, Decimal]) -> list[Input]:
    """What the saving stood on; ``costs``: the window's commitment cost now and at the best level (the
    saving is their difference, negative where the commitments held now, whose hourly level need not be
    constant, cost less than any one constant level)."""
    hours = len(usage.covered)
    level_now = costs[0] / hours if hours else ZERO
    return [
        ("commitments", ", ".join(usage.ids), BILLING),
        ("hours in the window", str(hours), "case: window"),
        ("commitment level now (per hour)", f"{level_now:.4f}", BILLING + " (Used + Unused, spread per hour)"),
        ("unused commitment over the window", f"{sum(usage.unused, ZERO):.2f}", BILLING + " status Unused"),
        ("covered usage over the window", f"{sum(usage.covered, ZERO):.2f}", BILLING + " status Used"),
        ("commitment discount", f"{usage.discount:.4f}", "billing: 1 − EffectiveCost ÷ ListCost of the Used lines"),
        ("best level (per hour)", f"{best:.4f}", "minimum cost over the window's hours"),
        ("commitment cost over the window now", f"{costs[0]:.2f}", BILLING + " (Used + Unused)"),
        ("cost over the window at the best level", f"{costs[1]:.2f}",
         "best level × hours + covered usage above it at on-demand rates (÷ (1 − discount))"),
        ("commitment end", end_at.isoformat() if end_at else "not known",
         "Contract Commitment dataset" if end_at else "no Contract Commitment dataset names it"),
    ]
