"""audit.json ``services[name].phases``: model compute split into prefill and decode (METHOD §4).

``prefill`` / ``decode``: ``cost`` (the service's ``model_compute.kernel_active`` × the phase's share,
rounded by largest remainder to the part as audit.json shows it, so the two add up to the part and
to the service's ``by_bucket.model_compute``), ``service_cost`` (the service's whole cost, owned +
shared, × the share: the cost the per-token figures stand on, rounded likewise to its ``total_cost``,
so that prefill + decode = the service's cost), ``share`` (decimal-string fraction of measured phase time) and ``source``.
``cost_per_1m_prompt_tokens`` = prefill service cost × 10⁶ / prompt tokens and
``cost_per_1m_generated_tokens`` = decode service cost × 10⁶ / generated tokens, to 6 places
(METHOD §4). ``also`` lists the other sources that measured the split (their prefill share), for
comparison. Where nothing measures both phases every figure is null and ``reason`` says why; where
the timers of some pod-intervals time one phase only, ``reason`` names them (left out of the split).
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from audit.audit_json_cents import ServiceCents
from audit.money import fmt, largest_remainder, share
from audit.phases import Split, model_compute, service_split

PLACES = 6


def _per_million(cost: Decimal, tokens: int | None) -> str | None:
    return fmt(cost * 1_000_000 / tokens, PLACES) if tokens else None


def _whole(t, column: str) -> int | None:
    """A token total of the service's traffic as a whole number; None where not measured."""
    count = getattr(t, column) if t else None
    return None if count is None else int(count)


def _unmeasured(t, column: str, count: int | None) -> str:
    """Why the cost per 1 M tokens of ``column`` is not measured: no token count (and why), or 0 counted."""
    figure = f"cost per 1 M {column.replace('_tokens', '')} tokens not measured"
    if t is None:
        return f"no request counter for this service: {figure}"
    if count is None:
        return f"{figure}: {t.tokens_unmeasured((column,))}"
    return f"{figure}: {', '.join(sorted(t.sources))} counted no {column.replace('_', ' ')} in the window"


def phases_of(result, uc) -> Split:
    """The split of one service (audit.phases) on the result's telemetry and profile."""
    serving = result.telemetry.serving
    return service_split(uc.service, serving, result.case.services, result.profiles.get(uc.service))


def phases_entry(result, uc, held: ServiceCents) -> dict[str, Any]:
    """The ``phases`` entry of one service: its kernel-active part and its total cost as ``held``
    rounded them, each split by largest remainder (so prefill + decode = the part, and = total_cost)."""
    split = phases_of(result, uc)
    if split.used is None:
        empty = {"cost": None, "service_cost": None, "share": None, "source": None}
        return {"prefill": dict(empty), "decode": dict(empty), "cost_per_1m_prompt_tokens": None,
                "cost_per_1m_generated_tokens": None, "also": [], "reason": split.reason}
    used = split.used
    part = model_compute(result.ledger, uc.service)
    whole = uc.own + uc.shared
    prefill_whole = whole * used.share
    costs = largest_remainder({"prefill": part * used.share, "decode": part - part * used.share},
                              held.kernel_active)
    service_costs = largest_remainder({"prefill": prefill_whole, "decode": whole - prefill_whole}, held.total)
    t = uc.traffic
    prompt = _whole(t, "prompt_tokens")
    generated = _whole(t, "generated_tokens")
    total = used.prefill + used.decode
    reasons = [_unmeasured(t, column, count) for column, count in (("prompt_tokens", prompt),
                                                                    ("generated_tokens", generated)) if not count]
    return {
        **{phase: {"cost": str(costs[phase]), "service_cost": str(service_costs[phase]),
                   "share": share(time, total), "source": used.source}
           for phase, time in (("prefill", used.prefill), ("decode", used.decode))},
        "cost_per_1m_prompt_tokens": _per_million(prefill_whole, prompt),
        "cost_per_1m_generated_tokens": _per_million(whole - prefill_whole, generated),
        "also": [{"source": m.source, "prefill_share": share(m.prefill, m.prefill + m.decode)} for m in split.others],
        "reason": "; ".join([*used.notes, *reasons]) or None,
    }
