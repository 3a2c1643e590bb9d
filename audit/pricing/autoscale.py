"""Autoscaling policy: the demand replay with the option's faster reaction and higher target (METHOD §7).

The policy the option states (``scale_reaction`` seconds, ``target_utilisation``: lower headroom) is
replayed against the one the case declares; the saving is the whole replicas the policy sheds beyond
those right-sizing at the case's policy sheds. Under the policy an interval can shed its capacity
above demand plus the headroom the higher target no longer keeps; under the case's policy only its
capacity above demand. Low and high: the policy's target ∓ 0.1 (never below the case's target),
each less what right-sizing sheds at the case's target, and the high less right-sizing's own high
(its target + 0.1, or the case's range): right-sizing's high and autoscaling's high then add up to
what the policy alone sheds at its high, never counting a replica twice, and a low never claims
right-sizing's own range as the policy's.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Mapping, Sequence

from audit.case import Service
from audit.ledger import ServiceInterval
from audit.money import ZERO
from audit.pricing import Modelled, ordered
from audit.pricing.replay import Policy, headroom_at, left_out, reach_of, replay, replayable
from audit.pricing.rightsize import (
    TARGET_RANGE,
    TELEMETRY,
    above_demand,
    case_policy,
    clamp_target,
    target_bands,
)


def policy_target(case_target: Decimal, stated: Decimal | None) -> Decimal:
    """The target the policy reaches: the option's, never below the case's own."""
    return max(case_target, clamp_target(stated)) if stated is not None else case_target


def shed_under(target: Decimal):
    """What an interval can shed at a policy's target: its overhead beyond the headroom still kept."""
    def cap(iv: ServiceInterval) -> Decimal:
        return iv.overhead - headroom_at(iv, target)
    return cap


def policy_of(service: Service, target: Decimal, reaction: int | None) -> Policy:
    fastest = service.scale_reaction_seconds if reaction is None else min(reaction, service.scale_reaction_seconds)
    return Policy(target, fastest, service.gpus_per_replica, service.min_replicas)


def autoscale(intervals: Sequence[ServiceInterval], services: Mapping[str, Service], case_target: Decimal,
              step: int, target: Decimal | None, reaction: int | None,
              target_range: tuple[Decimal, Decimal] | None = None) -> Modelled | None:
    """The autoscaling model, or None where nothing can be replayed or the option states no policy;
    ``target_range`` is the case's, which right-sizing's bands replay at."""
    by_service = replayable(intervals)
    if not by_service or (target is None and reaction is None):
        return None
    reach = policy_target(case_target, target)
    bands = {"low": max(case_target, reach - TARGET_RANGE), "expected": reach,
             "high": clamp_target(reach + TARGET_RANGE)}
    sized = target_bands(case_target, target_range)
    right_sized = {band: sum((replay(ivs, case_policy(services[n], t), step, above_demand).saving
                              for n, ivs in by_service.items()), ZERO) for band, t in sized.items()}
    now = right_sized["expected"]
    saving = {}
    for band, t in bands.items():
        runs = (replay(ivs, policy_of(services[n], t, reaction), step, shed_under(t)) for n, ivs in by_service.items())
        saving[band] = max(ZERO, sum((r.saving for r in runs), ZERO) - max(now, right_sized[band]))
    inputs = (("case target utilisation", f"{case_target}", "case: target_utilisation"),
              ("policy target utilisation", f"{reach}", target_source(case_target, target)),
              ("policy scale reaction", "the case's" if reaction is None else f"{reaction} s",
               "options.toml / case [[options]]: scale_reaction"),
              ("services replayed", ", ".join(sorted(by_service)), TELEMETRY),
              ("right-sizing at the case's policy already sheds", f"{now:.2f}", "audit.pricing.rightsize replay"))
    return Modelled(ordered(saving["low"], saving["expected"], saving["high"]), inputs,
                    f"low / high: the policy replayed at target utilisation {bands['low']} / {bands['high']}; "
                    f"each less what right-sizing at the case's policy sheds at {sized['expected']}, the high "
                    f"less its own high (at {sized['high']})"
                    + raised_target(case_target, target)
                    + unresolved_reaction(services, list(by_service), step, reaction) + left_out(intervals, by_service))


def target_source(case_target: Decimal, stated: Decimal | None) -> str:
    """Where the policy's target came from: the option's, or the case's where the option's is below
    it (:func:`policy_target`) or gives none."""
    if stated is not None and policy_target(case_target, stated) == clamp_target(stated):
        return "options.toml / case [[options]]: target_utilisation"
    return "case: target_utilisation" + (f" (the option's {stated} is below it)" if stated is not None else "")


def raised_target(case_target: Decimal, stated: Decimal | None) -> str:
    """Rule 5, no silent misfit: an option's target below the case's is named, with the target used."""
    if stated is None or policy_target(case_target, stated) == clamp_target(stated):
        return ""
    return (f"; the option's target utilisation {stated} is below the case's {case_target}: the policy is "
            f"replayed at {case_target} (a policy never holds less than the case's target)")


def unresolved_reaction(services: Mapping[str, Service], names: Sequence[str], step: int, reaction: int | None) -> str:
    """Where the step cannot tell the policy's reaction from the services' own (each keeps its
    replicas as many intervals either side), that said: the saving then comes from the target alone."""
    if reaction is None:
        return ""
    kept = {n: (reach_of(policy_of(services[n], ZERO, reaction).reaction_seconds, step),
                reach_of(services[n].scale_reaction_seconds, step)) for n in names}
    if any(policy != own for policy, own in kept.values()):
        return ""
    intervals = sorted({own for _, own in kept.values()})
    return (f"; the policy's {reaction} s reaction changes nothing at the case's {step} s step: replicas are kept "
            f"{', '.join(map(str, intervals))} interval(s) either side under it as under the services' own "
            "reaction, so the saving comes from the target alone (a finer step would resolve the reaction)")
