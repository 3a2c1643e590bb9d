"""Right-size replicas: whole replicas held beyond smoothed demand at the target utilisation (METHOD §7).

Each service's intervals are replayed (:mod:`audit.pricing.replay`) at the case's target utilisation,
scale reaction, replica size and minimum replicas; the saving in an interval is capped by the
interval's capacity above demand (its idle beyond headroom), the part the option acts on. The low
and high bands replay at the case's target_utilisation_range, or the target utilisation − 0.1 and
+ 0.1 (METHOD §7's default range).
"""
from __future__ import annotations

from decimal import Decimal
from typing import Mapping, Sequence

from audit.case import Service
from audit.ledger import ServiceInterval
from audit.money import ZERO
from audit.pricing import Input, Modelled, ordered
from audit.pricing.replay import Policy, Replay, left_out, replay, replayable

TARGET_RANGE = Decimal("0.1")
TELEMETRY = "GPU split per interval: kernel-busy seconds (telemetry) + serving-path seconds (kernel profile gap)"


def case_policy(service: Service, target: Decimal) -> Policy:
    """The policy the case declares for a service, at a given target utilisation."""
    return Policy(target, service.scale_reaction_seconds, service.gpus_per_replica, service.min_replicas)


def above_demand(iv: ServiceInterval) -> Decimal:
    """The interval's capacity above demand: idle beyond headroom (what right-sizing can remove)."""
    return iv.overhead - (iv.headroom or ZERO)


def clamp_target(target: Decimal) -> Decimal:
    return min(Decimal(1), max(Decimal("0.05"), target))


def target_bands(target: Decimal, given: tuple[Decimal, Decimal] | None) -> dict[str, Decimal]:
    """The targets of the low / expected / high replay: the case's range, else the target ∓ 0.1."""
    low, high = given if given else (target - TARGET_RANGE, target + TARGET_RANGE)
    return {"low": clamp_target(low), "expected": target, "high": clamp_target(high)}


def saving_at(intervals: Sequence[ServiceInterval], services: Mapping[str, Service], target: Decimal,
              step: int) -> Decimal:
    """Money of the whole replicas held beyond smoothed demand at ``target``, over the window."""
    return sum((replay(ivs, case_policy(services[n], target), step, above_demand).saving
                for n, ivs in replayable(intervals).items()), ZERO)


def right_size(intervals: Sequence[ServiceInterval], services: Mapping[str, Service], target: Decimal,
               step: int, target_range: tuple[Decimal, Decimal] | None = None) -> Modelled | None:
    """The right-size model, or None where no service has a measured serving split to replay."""
    by_service = replayable(intervals)
    if not by_service:
        return None
    bands = target_bands(target, target_range)
    saving = {}
    replays: dict[str, Replay] = {}
    per_service: dict[str, dict[str, Decimal]] = {name: {} for name in by_service}
    for band, t in bands.items():
        runs = {name: replay(ivs, case_policy(services[name], t), step, above_demand)
                for name, ivs in sorted(by_service.items())}
        saving[band] = sum((r.saving for r in runs.values()), ZERO)
        for name, run in runs.items():
            per_service[name][band] = run.saving
        if band == "expected":
            replays = runs
    inputs = [("target utilisation", f"{target}", "case: target_utilisation")]
    for name, run in replays.items():
        inputs.extend(service_inputs(name, services[name], run))
    source = "the case's target_utilisation_range" if target_range else f"the case's {target} ∓ {TARGET_RANGE}"
    return Modelled(ordered(saving["low"], saving["expected"], saving["high"]), tuple(inputs),
                    f"low / high: the same replay at target utilisation {bands['low']} / {bands['high']} ({source})"
                    + left_out(intervals, by_service),
                    by_service={name: ordered(b["low"], b["expected"], b["high"]) for name, b in per_service.items()})


def service_inputs(name: str, service: Service, run: Replay) -> list[Input]:
    """The figures one service's replay stood on, with their sources."""
    key = f"case: [services.{name}]"
    return [
        (f"{name}: GPUs per replica", str(service.gpus_per_replica), f"{key} gpus_per_replica"),
        (f"{name}: minimum replicas", str(service.min_replicas), f"{key} min_replicas"),
        (f"{name}: scale reaction", f"{service.scale_reaction_seconds} s", f"{key} scale_reaction"),
        (f"{name}: intervals replayed", str(run.intervals), TELEMETRY),
        (f"{name}: GPU-hours held", f"{run.held_gpu_hours:.2f}", "billing GPU-hours spread over telemetry intervals"),
        (f"{name}: GPU-hours needed", f"{run.needed_gpu_hours:.2f}", TELEMETRY),
    ]
