"""What a GPU line's quantities and meter mean for the split (METHOD §3): how many GPUs it bills, how
many instances, and how much of its billing period it bills GPU time for.

A line bills a period (an hour, mostly) and a quantity. An instance that ran 18 minutes of the hour
is billed 0.3 instance-hours over a one-hour period: its money spreads over the period's intervals as
any line's does (the bill does not say which minutes; where telemetry saw its node in only some of
them, audit/gpu_presence.py places it there), but the GPU time it paid for is 0.3 h, not the
hour, so each interval's paid GPU-seconds are its overlap × the line's *occupancy*: the quantity ÷
(period hours × instances), at most 1. A line that bills more than its instances can run in its
period (1.2 instance-hours of one instance in an hour) is a value out of range: its paid GPU time is
capped at the period, and :func:`capped_fit` names it (rule 5: no silent misfit; audit.json ``fit``).
Paid GPU-hours then add up to the quantities billed, as ``costaudit billing`` counts them, and a
GPU-second's price is the line's cost over the time it paid.

A line bills its own GPUs: the instance table's for its instance type (a VM resized in the window
bills 1 GPU on its NC24ads line and 2 on its NC48ads one). A GPU meter (GCP) bills GPU-hours of its
machine, whose GPUs are its machine type's (``machine_spec``), else the most the resource's lines bill
in a period, its meter SKUs of the period together (a Spot and an on-demand SKU billing parts of one
hour add up: audit/gpu_lines.py ``_machine_gpus``): a machine that ran
from 00:30 is billed 4 GPU-hours of its 8 GPUs in hour 00, so each of its 8 GPUs paid for half of
the hour (occupancy 0.5), as a request that ran part of an interval holds a fraction of it
(audit/gpuunits.py), not 4 of them the whole hour (:meth:`LineFacts.on_machine`).
"""
from __future__ import annotations

from decimal import Decimal

import numpy as np

from audit.lines import gpu_hours_of, gpu_sku_model, line_name
from audit.misfit import LISTED, Misfit
from audit.money import ZERO

ONE = Decimal(1)
#: the time code of a line that bills GPU time for the whole of its period
ONE_CODE = 1


class LineFacts:
    """What a line's quantities and meter mean for the split, worked out once per distinct
    (GPUs per instance, pricing quantity, consumed quantity, meter text, period hours):
    (GPU count, instances billed, time code). The time code is 0 where the line bills no GPU time
    (the vCPU / RAM part of a machine billed in parts), else the index of its occupancy in
    :attr:`occupancies` (1: the whole period): an integer an engine can group by, where the
    occupancy itself is a Decimal no two engines spell alike."""

    def __init__(self):
        self.index: dict[tuple, int] = {}
        self.facts: list[tuple[int, int, int]] = []
        self.occupancies: list[Decimal] = [ZERO, ONE]
        self._codes: dict[Decimal, int] = {ZERO: 0, ONE: 1}
        self._meters: dict[str, str] = {}
        #: fact -> (quantity billed, what its instances or GPUs can run in the period, unit, period
        #: hours, instances or GPUs) of the facts that bill more than that: their occupancy is capped at 1
        self.over: dict[int, tuple[Decimal, Decimal, str, Decimal, int]] = {}
        #: fact -> (GPU-hours, period hours) of the GPU meter facts: their GPUs and time are their
        #: machine's (:meth:`on_machine`)
        self.metered: dict[int, tuple[Decimal, Decimal]] = {}

    def of(self, gpi, pq, cq, text, span: Decimal) -> int:
        """The index of a line's facts (equal quantities give equal facts, whatever their exponent)."""
        key = (gpi, pq, cq, text, span)
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.facts)
            self.facts.append(self._worked_out(gpi, pq, cq, text, span, found))
        return found

    def on_machines(self, fact_of_line: list[int], keys: list[str], gpus: dict[str, int]) -> list[int]:
        """Each line's fact, a GPU meter line's spread over its key's ``gpus`` (:meth:`on_machine`)."""
        if not self.metered:
            return fact_of_line
        metered = self.metered
        return [self.on_machine(fact, gpus[key]) if fact in metered else fact for fact, key in zip(fact_of_line, keys)]

    def on_machine(self, fact: int, gpus: int) -> int:
        """The facts of a GPU meter line (``fact``) on a machine of ``gpus`` GPUs: all of them, for
        the share of the period its GPU-hours cover (4 GPU-hours in an hour of 8 GPUs: 0.5), capped
        at the period (kept in :attr:`over`). A machine of no GPUs (a meter line that bills none)
        keeps the line's own facts."""
        if gpus <= 0:
            return fact
        key = ("machine", fact, gpus)
        found = self.index.get(key)
        if found is None:
            gpu_hours, span = self.metered[fact]
            found = self.index[key] = len(self.facts)
            self.facts.append((gpus, self.facts[fact][1], self._time(gpu_hours, span, gpus, "GPU-hours", found)))
        return found

    def money_only(self, fact: int, gpus: int, instances: int) -> int:
        """The facts of a line that pays for ``instances`` instances of ``gpus`` GPUs but bills none of
        their time (a licence billed on a scale set whose VMs' own rows bill the GPU time,
        :func:`audit.gpu_timeless.on_scale_sets`): time code 0, as a machine's RAM part."""
        key = ("money only", fact, gpus, instances)
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.facts)
            self.facts.append((gpus, instances, 0))
        return found

    def occupancy(self, code: int) -> Decimal:
        """The share of its period a line of time code ``code`` bills GPU time for (0: none)."""
        return self.occupancies[code]

    def _worked_out(self, gpi, pq, cq, text, span: Decimal, fact: int) -> tuple[int, int, int]:
        """GPUs: the instance table's, or GPU-meter hours ÷ line hours (GCP), at least one where the
        meter bills any; instances: usage hours ÷ line hours (1 for per-instance lines); time: a
        quantity of an instance with GPUs bills GPU time, for the share of the period its quantity
        covers (a quantity above what the period holds kept in :attr:`over`); a per-GPU meter's is
        worked out on its machine (kept in :attr:`metered` for :meth:`on_machine`)."""
        quantity = pq or cq
        count = int(gpi or 0)
        gpu_hours = ZERO
        if not count:
            gpu_hours = gpu_hours_of({"pricing_quantity": pq, "consumed_quantity": cq, "gpus_per_instance": gpi,
                                      "charge_description": text})
            count = max(1, int((gpu_hours / span).to_integral_value())) if span and gpu_hours > 0 else 0
        instances = max(1, int((quantity / span).to_integral_value())) if gpi and quantity and span else 1
        if not gpi and text not in self._meters:
            self._meters[text] = gpu_sku_model({"charge_description": text})
        if not quantity or not (gpi or self._meters[text]):
            return count, instances, 0
        if not gpi:
            self.metered[fact] = (gpu_hours, span)
            return count, instances, ONE_CODE
        return count, instances, self._time(quantity, span, instances, "instance-hours", fact)

    def _time(self, billed: Decimal, span: Decimal, units: int, unit: str, fact: int) -> int:
        """The time code of ``billed`` ``unit`` over ``units`` instances or GPUs of a ``span``-hour
        period: their share of the period, at most 1 (a quantity above it kept in :attr:`over`)."""
        whole = span * units
        if whole > 0 and billed > whole:
            self.over[fact] = (billed, whole, unit, span, units)
        return self._code(min(ONE, billed / whole) if whole > 0 and billed > 0 else ONE)

    def _code(self, occupancy: Decimal) -> int:
        found = self._codes.get(occupancy)
        if found is None:
            found = self._codes[occupancy] = len(self.occupancies)
            self.occupancies.append(occupancy)
        return found


def capped_fit(facts: LineFacts, fact_of_line: list[int], resources: list, described: list) -> list[Misfit]:
    """A ``quantity_over_period`` warning naming the lines that bill more GPU time than their
    instances (or a GPU meter's GPUs) can run in their period, whose paid GPU time the split caps at
    the period. Counted per distinct fact, with numpy: each fact named by its first line."""
    if not facts.over:
        return []
    codes = np.asarray(fact_of_line)
    where = np.flatnonzero(np.isin(codes, np.fromiter(facts.over, dtype=codes.dtype, count=len(facts.over))))
    found, first, counts = np.unique(codes[where], return_index=True, return_counts=True)
    order = sorted(range(len(found)), key=lambda i: (-counts[i], first[i]))
    named = [_capped(facts.over[int(found[i])], line_name(("", resources[where[first[i]]] or "",
                                                                described[where[first[i]]] or "")), int(counts[i]))
             for i in order]
    more = f"; … {len(named) - LISTED} more" if len(named) > LISTED else ""
    message = (f"{int(counts.sum()):,} GPU line(s) bill more GPU time than their period holds: "
               f"{'; '.join(m for m, _ in named[:LISTED])}{more}. The paid GPU time was capped at the period "
               "(occupancy 1): the money is spread over the period as billed, and each GPU-second is priced "
               "at the line's cost over the period's GPU time.")
    return [Misfit("quantity_over_period", "billing quantities", message, tuple(n for _, n in named[:LISTED]))]


def _capped(over: tuple[Decimal, Decimal, str, Decimal, int], name: str, lines: int) -> tuple[str, str]:
    """"name (n lines): billed unit, at most capacity (units × hours h)", and the name."""
    billed, whole, unit, span, units = over
    what = "instance" if unit == "instance-hours" else "GPU"
    return (f"{name} ({lines} line{'s' if lines != 1 else ''}): {_figure(billed)} {unit}, at most "
            f"{_figure(whole)} ({units} {what}{'s' if units != 1 else ''} × {_figure(span)} h)", name)


def _figure(value: Decimal) -> str:
    """A quantity without trailing zeros or exponent (1.20 → 1.2, 1E+1 → 10)."""
    return f"{Decimal(value).normalize():f}"
