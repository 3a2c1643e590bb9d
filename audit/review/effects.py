"""A service's cost change split into volume, price, efficiency and overhead effects (METHOD §10).

With Q the service's requests and its cost C = Σₖ cₖ over its components k (busy GPU-seconds,
idle GPU-seconds, each non-GPU line part, each share of a shared part), pₖ = cₖ / nₖ the unit
price of component k and xₖ = nₖ / Q its quantity per request (nₖ its quantity):

* volume = ΔQ · u₀ (u₀ = C₀ / Q₀);
* price = Q₁ · Σₖ Δpₖ · xₖ₀;
* efficiency = Q₁ · p_busy,1 · Δx_busy;
* overhead = Q₁ · Σ over the other components of pₖ₁ · Δxₖ.

They add up to C₁ − C₀ identically: everything is an exact :class:`~fractions.Fraction` of the
audit.json's exact strings, rounded once (:func:`rounded`) by largest remainder. Where a component's
quantity is 0 in one audit (it appeared or vanished), its unit price is the other audit's, so the
whole change lands in efficiency or overhead. A component with a cost but no quantity (which
audit.json never writes for a GPU component) is read as currency in both audits, and said so.
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Mapping

from audit.money import largest_remainder

EFFECTS = ("volume", "price", "efficiency", "overhead")
#: the component whose quantity per request is the model's efficiency: kernel-busy GPU-seconds
BUSY = "gpu_busy"
ZERO = Fraction(0)


@dataclass(frozen=True)
class Component:
    """One cost component of a service in one audit: exact cost and quantity, and its unit."""

    cost: Fraction
    quantity: Fraction
    unit: str = "currency"


@dataclass(frozen=True)
class ComponentChange:
    """What one component contributes: its effects and the prices and quantities per request behind them."""

    effects: dict[str, Fraction]
    price_from: Fraction
    price_to: Fraction
    per_request_from: Fraction
    per_request_to: Fraction
    unit: str


@dataclass(frozen=True)
class Split:
    """The four effects of one service, exact, with each component's part in them."""

    effects: dict[str, Fraction]
    components: dict[str, ComponentChange]
    requests_from: int
    requests_to: int
    cost_from: Fraction
    cost_to: Fraction
    notes: list[str] = field(default_factory=list)


def split(q0: int, earlier: Mapping[str, Component], q1: int, later: Mapping[str, Component]) -> Split:
    """The exact effects of a service with requests in both audits (q0, q1 > 0)."""
    if q0 <= 0 or q1 <= 0:
        raise ValueError("the effects need requests in both audits")
    totals = {name: ZERO for name in EFFECTS}
    changes: dict[str, ComponentChange] = {}
    notes: list[str] = []
    nothing = Component(ZERO, ZERO)
    for key in sorted(set(earlier) | set(later)):
        a, b = earlier.get(key, nothing), later.get(key, nothing)
        if (a.quantity == 0 and a.cost != 0) or (b.quantity == 0 and b.cost != 0):
            notes.append(f"component {key} has a cost but no quantity: read as currency (no price effect)")
            a, b = Component(a.cost, a.cost, "currency"), Component(b.cost, b.cost, "currency")
        if a.quantity == 0 and b.quantity == 0:
            continue
        change = _component(key, q0, a, q1, b)
        changes[key] = change
        for name, amount in change.effects.items():
            totals[name] += amount
    return Split(totals, changes, q0, q1, sum((c.cost for c in earlier.values()), ZERO),
                 sum((c.cost for c in later.values()), ZERO), notes)


def _component(key: str, q0: int, a: Component, q1: int, b: Component) -> ComponentChange:
    p0 = a.cost / a.quantity if a.quantity else b.cost / b.quantity
    p1 = b.cost / b.quantity if b.quantity else p0
    x0, x1 = a.quantity / q0, b.quantity / q1
    volume = (q1 - q0) * p0 * x0
    price = q1 * (p1 - p0) * x0
    use = q1 * p1 * (x1 - x0)
    effects = {"volume": volume, "price": price,
               "efficiency": use if key == BUSY else ZERO, "overhead": ZERO if key == BUSY else use}
    return ComponentChange(effects, p0, p1, x0, x1, b.unit if b.quantity else a.unit)


def to_decimal(value: Fraction) -> Decimal:
    """A Fraction as a Decimal of 60 significant digits (enough that no cent is misplaced)."""
    with decimal.localcontext(decimal.Context(prec=60)):
        return Decimal(value.numerator) / Decimal(value.denominator)


def rounded(exact: Mapping[str, Fraction], target: Decimal) -> dict[str, Decimal]:
    """The exact amounts rounded to the cent once, by largest remainder, so they sum to ``target``
    (the change of the rounded figures); keys keep their order."""
    cents = largest_remainder({k: to_decimal(v) for k, v in exact.items()}, target)
    return {k: cents[k] for k in exact}
