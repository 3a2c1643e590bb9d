"""Enable prefix / KV cache reuse: prefill cost × (h₁ − h₀) / (1 − h₀) (METHOD §7).

Per service, the prefill cost is its ``model_compute.kernel_active`` over the window × its measured
prefill share (audit/phases.py: the kernel profile's prefill and decode steps, else the servers'
phase timers); h₀ is the measured prefix-cache hit rate (vLLM ``prefix_cache_hits`` /
``prefix_cache_queries``, tokens; else V0's ``gpu_prefix_cache_hit_rate`` gauge) and h₁ the hit
rate the option states (``hit_rate``: low / expected / high, or one number). The measured prefill
cost already excludes the tokens served from cache, so raising the hit rate from h₀ to h₁ removes
(h₁ − h₀) / (1 − h₀) of it; an option that states h₁ ≤ h₀ saves nothing. A service whose split or
hit rate is not measured is left out, named with the reason; with none left the option stays
*assumed*. The bands are the option's low / high hit rates.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Mapping

from audit.money import ZERO
from audit.phases import hit_rate, measured_splits, model_compute, service_split
from audit.pricing import Input, Modelled, ordered
from audit.pricing.assumed import MISSING

DEFAULT_HIT_RATE = {"low": "0.3", "expected": "0.5", "high": "0.7"}


def stated(spec: Mapping[str, Any], key: str, default: Mapping[str, str]) -> dict[str, Decimal]:
    """An option input as low / expected / high Decimals (one number stands for all three)."""
    value = spec.get(key, default)
    if isinstance(value, Mapping):
        return {b: Decimal(str(value[b])) for b in ("low", "expected", "high")}
    return dict.fromkeys(("low", "expected", "high"), Decimal(str(value)))


def saving(prefill: Decimal, h0: Decimal, h1: Decimal) -> Decimal:
    """prefill × (h₁ − h₀) / (1 − h₀), never below 0 (h₀ = 1: nothing left to cache)."""
    if h0 >= 1 or h1 <= h0:
        return ZERO
    return prefill * (min(h1, Decimal(1)) - h0) / (1 - h0)


def phase_parts(given) -> dict[str, Decimal]:
    """``model_compute.prefill`` and ``model_compute.decode`` over the window, summed over the services
    whose split is measured (the parts the prefix-cache and generation-cap options act on); absent
    where no service's split is measured."""
    serving = given.serving if given.serving is not None else None
    prefill = decode = ZERO
    measured = False
    for name in given.case.services:
        split = service_split(name, serving, given.case.services, given.profiles.get(name))
        if split.used is None:
            continue
        measured = True
        amount = model_compute(given.ledger, name)
        prefill += amount * split.used.share
        decode += amount - amount * split.used.share
    return {"model_compute.prefill": prefill, "model_compute.decode": decode} if measured else {}


def prefix_cache(spec: Mapping[str, Any], given) -> Modelled | str:
    """The model on the rank stage's input (audit.rank.RankInput), or why it stays assumed."""
    h1 = stated(spec, "hit_rate", DEFAULT_HIT_RATE)
    source = ("the option's hit_rate (audit/data/options.toml, or the case's [[options]])" if "hit_rate" in spec
              else "the model's default hit_rate (audit/pricing/prefix_cache.py)")
    totals = dict.fromkeys(("low", "expected", "high"), ZERO)
    inputs: list[Input] = []
    missing: list[str] = []
    for name, split in measured_splits(given, missing):
        h0 = hit_rate(given.serving, given.case.services, name)
        if isinstance(h0, str):
            missing.append(h0)
            continue
        rate, rate_source = h0
        amount = model_compute(given.ledger, name)
        prefill = amount * split.used.share
        for band in totals:
            totals[band] += saving(prefill, rate, h1[band])
        inputs += [(f"{name}: model_compute.kernel_active over the window", f"{amount:.2f}", "ledger (GPU split)"),
                   (f"{name}: prefill share", f"{split.used.share:.6f}", split.used.source),
                   (f"{name}: prefill cost over the window", f"{prefill:.2f}", "kernel_active × prefill share"),
                   (f"{name}: measured hit rate h0", f"{rate:.6f}", rate_source)]
    if not inputs:
        return "; ".join(missing) or MISSING["prefix_cache"]
    inputs.append(("stated hit rate h1", f"{h1['low']} / {h1['expected']} / {h1['high']}", source))
    inputs.extend(("not modelled", why, "prefix-cache model") for why in missing)
    return Modelled(ordered(totals["low"], totals["expected"], totals["high"]), tuple(inputs),
                    "prefill cost × (h1 − h0) / (1 − h0) at the option's low / expected / high h1")
