"""What a GPU line's quantities and meter mean for the split (METHOD §3): how many GPUs it bills, how
many instances, and how much of its billing period it bills GPU time for.

A line bills a period (an hour, mostly) and a quantity. An instance that ran 18 minutes of the hour
is billed 0.3 instance-hours over a one-hour period: its money spreads over the period's intervals as
any line's does (the bill does not say which minutes), but the GPU time it paid for is 0.3 h, not the
hour, so each interval's paid GPU-seconds are its overlap × the line's *occupancy*: the quantity ÷
(period hours × instances), at most 1. Paid GPU-hours then add up to the quantities billed, as
``costaudit billing`` counts them, and a GPU-second's price is the line's cost over the time it paid.
"""
from __future__ import annotations

from decimal import Decimal

from audit.lines import gpu_hours_of, gpu_sku_model
from audit.money import ZERO

ONE = Decimal(1)


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

    def of(self, gpi, pq, cq, text, span: Decimal) -> int:
        """The index of a line's facts (equal quantities give equal facts, whatever their exponent)."""
        key = (gpi, pq, cq, text, span)
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.facts)
            self.facts.append(self._worked_out(gpi, pq, cq, text, span))
        return found

    def occupancy(self, code: int) -> Decimal:
        """The share of its period a line of time code ``code`` bills GPU time for (0: none)."""
        return self.occupancies[code]

    def _worked_out(self, gpi, pq, cq, text, span: Decimal) -> tuple[int, int, int]:
        """GPUs: the instance table's, or GPU-meter hours ÷ line hours (GCP), at least one where the
        meter bills any; instances: usage hours ÷ line hours (1 for per-instance lines); time: a
        quantity of an instance with GPUs or of a per-GPU meter bills GPU time, for the share of
        the period its quantity covers."""
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
        billed = quantity if gpi else gpu_hours
        whole = span * (instances if gpi else count)
        return count, instances, self._code(min(ONE, billed / whole) if whole > 0 and billed > 0 else ONE)

    def _code(self, occupancy: Decimal) -> int:
        found = self._codes.get(occupancy)
        if found is None:
            found = self._codes[occupancy] = len(self.occupancies)
            self.occupancies.append(occupancy)
        return found
