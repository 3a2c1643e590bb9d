"""The bridge of one pair of audits: steps from the earlier total to the later one (METHOD §10),
and the services side by side.

Per service with requests in both audits, four steps (volume, price, efficiency, overhead: exact
effects rounded once by largest remainder to the change of the rounded ``composition.services``
figures); a service with no requests in either audit, new or vanished, is one step (its change);
then the unattributed bucket's change and the shared cost no service took. The steps sum to the
later total less the earlier one to the cent; where an audit's own composition does not foot to
its total, the difference is a ``rounding`` step, named.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from audit.money import ZERO, cents, dsum
from audit.review.effects import EFFECTS, Component, Split, rounded, split, to_decimal
from audit.review.load import Audit, count_of, decimal_of, fraction_of
from audit.review.words import service_driver
from connectors.errors import InputError

STATUS_WORDS = {"new": "new service", "vanished": "vanished service",
                "no_requests": "no requests in one of the audits"}


def composition(audit: Audit) -> dict:
    """The audit's composition in cents: services (name → cents), unattributed, unallocated, total."""
    services = audit.get("composition", "services")
    if not isinstance(services, dict):
        raise InputError(audit.path, "composition.services is not an object of services")
    out: dict = {"services": {name: decimal_of(audit, value, f"composition.services.{name}")
                              for name, value in services.items()}}
    for key in ("unattributed", "unallocated", "total"):
        out[key] = audit.money("composition", key)
    return out


def service_costs(audit: Audit) -> dict[str, Decimal]:
    """Each service's own + shared cost in cents: the composition's, else (an audit.json without
    one) the services' total_cost."""
    if audit.has("composition", "services"):
        return composition(audit)["services"]
    return {name: decimal_of(audit, entry.get("total_cost"), f"services.{name}.total_cost")
            for name, entry in audit.get("services").items() if isinstance(entry, dict)}


def components(audit: Audit, service: str) -> dict[str, Component]:
    """A service's exact cost components (audit.json ``services[name].components``)."""
    found = audit.get("services", service, "components")
    if not isinstance(found, dict):
        raise InputError(audit.path, f"services.{service}.components is not an object of components")
    out = {}
    for key, value in found.items():
        where = f"services.{service}.components.{key}"
        if not isinstance(value, dict):
            raise InputError(audit.path, f"{where} is not an object with cost and quantity")
        out[key] = Component(fraction_of(audit, value.get("cost"), where + ".cost"),
                             fraction_of(audit, value.get("quantity"), where + ".quantity"),
                             str(value.get("unit") or "currency"))
    return out


def requests(audit: Audit, service: str) -> int | None:
    entry = audit.get("services", service, default=None)
    if not isinstance(entry, dict):
        return None
    return count_of(audit, entry.get("requests"), f"services.{service}.requests")


def _checked_sum(audit: Audit, service: str, parts: dict[str, Component], rounded_cost: Decimal) -> None:
    total = sum((c.cost for c in parts.values()), Fraction(0))
    if abs(total - Fraction(rounded_cost)) >= Fraction(1, 100):
        raise InputError(audit.path, f"services.{service}.components sum to {cents(to_decimal(total))}, but "
                                     f"composition.services.{service} is {rounded_cost}: the audit.json is inconsistent")


def status(service: str, c0: dict, c1: dict, q0: int | None, q1: int | None) -> str:
    if service not in c0:
        return "new"
    if service not in c1:
        return "vanished"
    return "both" if q0 and q1 else "no_requests"


def pair_bridge(earlier: Audit, later: Audit) -> tuple[dict, list[dict], dict[str, Split]]:
    """(bridge, service rows, the exact splits by service) of a comparable pair."""
    comp0, comp1 = composition(earlier), composition(later)
    s0, s1 = comp0["services"], comp1["services"]
    steps: list[dict] = []
    rows: list[dict] = []
    splits: dict[str, Split] = {}
    for name in sorted(set(s0) | set(s1)):
        row, service_steps, found = service_change(earlier, later, name, s0, s1)
        rows.append(row)
        steps += service_steps
        if found is not None:
            splits[name] = found
    for key, label in (("unattributed", "unattributed spend"), ("unallocated", "shared cost no service took")):
        steps.append(_step(key, key, None, label, comp1[key] - comp0[key]))
    t0, t1 = earlier.money("total"), later.money("total")
    drift = (t1 - _footing(comp1)) - (t0 - _footing(comp0))
    if drift != 0:
        steps.append(_step("rounding", "rounding", None, "rounding: the audits' compositions do not foot to their "
                           f"totals ({earlier.path} {signed_gap(comp0, t0)}, {later.path} {signed_gap(comp1, t1)})",
                           drift))
    bridge = {"from_total": str(cents(t0)), "to_total": str(cents(t1)), "steps": steps}
    return bridge, rows, splits


def _footing(comp: dict) -> Decimal:
    return dsum(comp["services"].values()) + comp["unattributed"] + comp["unallocated"]


def signed_gap(comp: dict, total: Decimal) -> str:
    return f"off by {total - _footing(comp)}"


def _step(id_: str, kind: str, service: str | None, label: str, amount: Decimal) -> dict:
    return {"id": id_, "kind": kind, "service": service, "label": label, "amount": str(cents(amount))}


def service_change(earlier: Audit, later: Audit, name: str, s0: dict, s1: dict) -> tuple[dict, list[dict], Split | None]:
    """One service's row, its steps and (when it has requests in both audits) its exact split."""
    q0, q1 = requests(earlier, name), requests(later, name)
    kind = status(name, s0, s1, q0, q1)
    cost0, cost1 = s0.get(name, ZERO), s1.get(name, ZERO)
    change = cost1 - cost0
    row = service_row(earlier, later, name, kind, cost0, cost1, q0, q1)
    if kind != "both":
        row["driver"] = _status_driver(kind, q0, q1)
        return row, [_step(f"{name}/service", "service", name, f"{name}: {STATUS_WORDS[kind]}", change)], None
    parts0, parts1 = components(earlier, name), components(later, name)
    _checked_sum(earlier, name, parts0, cost0)
    _checked_sum(later, name, parts1, cost1)
    found = split(q0 or 0, parts0, q1 or 0, parts1)
    amounts = rounded(found.effects, change)
    row["effects"] = {k: str(v) for k, v in amounts.items()}
    row["driver"] = service_driver(found, amounts)
    steps = [_step(f"{name}/{k}", k, name, f"{name}: {k}", amounts[k]) for k in EFFECTS]
    return row, steps, found


def side_by_side(earlier: Audit, later: Audit, why: str) -> list[dict]:
    """The service rows of a pair that is not bridged: costs, requests and unit costs, no effects."""
    s0, s1 = service_costs(earlier), service_costs(later)
    rows = []
    for name in sorted(set(s0) | set(s1)):
        q0, q1 = requests(earlier, name), requests(later, name)
        kind = status(name, s0, s1, q0, q1)
        row = service_row(earlier, later, name, kind, s0.get(name, ZERO), s1.get(name, ZERO), q0, q1)
        row["driver"] = _status_driver(kind, q0, q1) if kind != "both" else f"not split: {why}"
        rows.append(row)
    return rows


def _status_driver(kind: str, q0: int | None, q1: int | None) -> str:
    if kind == "new":
        return "new service: not in the earlier audit"
    if kind == "vanished":
        return "vanished: not in the later audit"
    where = " and ".join(w for w, q in (("the earlier audit", q0), ("the later audit", q1)) if not q)
    return f"no requests counted in {where}: no unit cost to split, the change is one step"


def service_row(earlier: Audit, later: Audit, name: str, kind: str, cost0: Decimal, cost1: Decimal,
                q0: int | None, q1: int | None) -> dict:
    def unit(audit: Audit) -> str | None:
        entry = audit.get("services", name, default=None)
        return entry.get("cost_per_1k_requests") if isinstance(entry, dict) else None

    return {"service": name, "status": kind, "cost_from": str(cents(cost0)), "cost_to": str(cents(cost1)),
            "change": str(cents(cost1 - cost0)), "requests_from": q0, "requests_to": q1,
            "unit_cost_from": unit(earlier), "unit_cost_to": unit(later), "effects": None, "driver": ""}
