"""Demand replay: the whole replicas a service needs per interval against those it holds (METHOD §7).

Demand per interval is the GPU time the served work took (kernel-busy plus in-flight serving-path
seconds) divided by the target utilisation; the replicas needed are whole replicas of the service's
GPUs, smoothed over its scale reaction (the most needed within that many intervals either side: a
scaler cannot shed a replica faster than it reacts) and never below its minimum. The surplus is the
whole replicas held beyond that, priced at the interval's paid cost per GPU and capped by what the
caller says the surplus can remove in that interval.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable, Mapping, Sequence

from audit.ledger import ServiceInterval
from audit.money import ZERO


@dataclass(frozen=True)
class Policy:
    """How a service would scale: the utilisation it aims at, how fast it reacts, its replica shape."""

    target: Decimal
    reaction_seconds: int
    gpus_per_replica: int
    min_replicas: int


@dataclass(frozen=True)
class Replay:
    """What one replay found over the window."""

    saving: Decimal              # money of the surplus replicas (capped per interval)
    held_gpu_hours: Decimal
    needed_gpu_hours: Decimal
    intervals: int


def demand_gpus(iv: ServiceInterval, target: Decimal, step: int) -> Decimal:
    """GPUs the interval's served work needed at the target utilisation."""
    return (iv.busy_seconds + (iv.serving_seconds or ZERO)) / (target * Decimal(step))


def replicas_needed(demand: Decimal, gpus_per_replica: int) -> int:
    """Whole replicas that carry ``demand`` GPUs."""
    return math.ceil(demand / gpus_per_replica)


def reach_of(reaction_seconds: int, step: int) -> int:
    """Intervals either side a scaler with this reaction cannot shed a replica within."""
    return max(0, math.ceil(reaction_seconds / step))


def smoothed(need: Sequence[int], reach: int, floor: int) -> list[int]:
    """The most replicas needed within ``reach`` intervals either side, never below ``floor``."""
    return [max(max(need[max(0, i - reach): i + reach + 1]), floor) for i in range(len(need))]


def replay(ivs: Sequence[ServiceInterval], policy: Policy, step: int,
           cap: Callable[[ServiceInterval], Decimal]) -> Replay:
    """Replay one service's intervals (in time order) under a policy."""
    need = [replicas_needed(demand_gpus(iv, policy.target, step), policy.gpus_per_replica) for iv in ivs]
    kept = smoothed(need, reach_of(policy.reaction_seconds, step), policy.min_replicas)
    saving = held = needed = ZERO
    for iv, replicas in zip(ivs, kept):
        surplus = max(0, iv.gpus // policy.gpus_per_replica - replicas)
        money = Decimal(surplus * policy.gpus_per_replica) * iv.paid / iv.gpus
        saving += max(ZERO, min(money, cap(iv)))
        hours = iv.paid_seconds / iv.gpus / 3600
        held += Decimal(iv.gpus) * hours
        needed += Decimal(min(iv.gpus, replicas * policy.gpus_per_replica)) * hours
    return Replay(saving, held, needed, len(ivs))


def headroom_at(iv: ServiceInterval, target: Decimal) -> Decimal:
    """The interval's idle kept as headroom at a target utilisation (METHOD §3's split)."""
    served = iv.kernel + (iv.serving or ZERO)
    return min(iv.overhead, max(ZERO, served / target - served))


def replayable(intervals: Sequence[ServiceInterval]) -> dict[str, list[ServiceInterval]]:
    """Each service's intervals with a measured serving split and GPUs, in time order."""
    out: dict[str, list[ServiceInterval]] = {}
    for iv in intervals:
        if iv.serving is not None and iv.gpus:
            out.setdefault(iv.service, []).append(iv)
    for ivs in out.values():
        ivs.sort(key=lambda iv: iv.ts)
    return out


def left_out(intervals: Sequence[ServiceInterval], replayed: Mapping[str, object]) -> str:
    """What a replay leaves out, in words: the services holding GPUs whose idle no kernel profile
    split (their idle is idle_not_separated: no replica of theirs is priced); "" where none is."""
    names = sorted({iv.service for iv in intervals if iv.gpus and iv.serving is None} - set(replayed))
    return (f"; not replayed (no serving split: their idle is idle_not_separated): {', '.join(names)}"
            if names else "")
