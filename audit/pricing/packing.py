"""Consolidate / release unallocated GPUs: the held GPUs packed onto whole nodes (METHOD §7).

Per interval and instance type, the GPUs billed are those of every holder on nodes of that type
(the GPU split counts each holder's GPUs per instance type: ``Group.types``); the GPUs held are
those less the unallocated ones (GPUs no workload held; an unmeasured GPU counts as held). Packed
onto whole nodes, the held GPUs need ⌈held ÷ GPUs per instance⌉ nodes; the nodes billed beyond that
could be released, priced at the unallocated GPUs' paid cost per GPU on that type. The instance
type is the billing line's, else the one telemetry gives the node (a GCP machine billed in parts);
GPUs per instance are the split's (the instance table, or the GPU meter). Unallocated GPUs on a node
of unknown type or size are left as they are, and counted in the inputs. Bands: expected, node-hours
released per interval; low, only nodes free throughout the longest scale reaction either side (a node
cannot be drained and handed back faster than its workloads reschedule); high, every unallocated GPU
released (GPU granularity).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Mapping

from audit.ledger import UNALLOCATED, Group
from audit.money import ZERO
from audit.pricing import Modelled, ordered
from audit.pricing.replay import reach_of


@dataclass
class Slot:
    """One instance type in one interval: GPUs billed, unallocated ones and what they were paid."""

    billed: int = 0
    free: int = 0
    free_paid: Decimal = ZERO
    free_seconds: Decimal = ZERO


@dataclass(frozen=True)
class Packing:
    """Per (instance type, interval): the slot and the whole nodes its packing releases."""

    slots: Mapping[tuple[str, datetime], Slot]
    released: Mapping[tuple[str, datetime], int]


def slots_of(groups: Mapping[tuple[str, datetime], Group]) -> dict:
    """Sum each interval's holders per instance type ("" where no type is known)."""
    slots: defaultdict[tuple[str, datetime], Slot] = defaultdict(Slot)
    for (holder, ts), group in groups.items():
        for kind, gpus in group.types.items():
            slot = slots[(kind, ts)]
            slot.billed += gpus
            if holder == UNALLOCATED:
                slot.free += gpus
                slot.free_paid += group.type_paid.get(kind, ZERO)
                slot.free_seconds += group.type_seconds.get(kind, ZERO)
    return dict(slots)


def nodes_released(slot: Slot, per_instance: int) -> int:
    """Whole nodes billed beyond those the held GPUs need, packed."""
    if per_instance <= 0 or not slot.free:
        return 0
    held = slot.billed - slot.free
    return max(0, slot.billed // per_instance - math.ceil(held / per_instance))


def pack(groups: Mapping[tuple[str, datetime], Group], per_instance: Mapping[str, int]) -> Packing:
    slots = slots_of(groups)
    released = {key: nodes_released(slot, per_instance.get(key[0], 0)) for key, slot in slots.items()
                if key[0]}
    return Packing(slots, released)


def held_free(released: Mapping[tuple[str, datetime], int], reach: int) -> dict[tuple[str, datetime], int]:
    """Nodes free in every interval within ``reach`` either side (per instance type, in time order)."""
    out = {}
    by_type: defaultdict[str, list[datetime]] = defaultdict(list)
    for t, ts in released:
        by_type[t].append(ts)
    for t, times in by_type.items():
        times.sort()
        counts = [released[(t, ts)] for ts in times]
        for i, ts in enumerate(times):
            out[(t, ts)] = min(counts[max(0, i - reach): i + reach + 1])
    return out


def money_of(slot: Slot, nodes: int, per_instance: int) -> Decimal:
    """The paid cost of ``nodes`` whole nodes of the slot, at its unallocated GPUs' cost per GPU."""
    if not nodes or not slot.free:
        return ZERO
    return min(slot.free_paid, Decimal(nodes * per_instance) * slot.free_paid / slot.free)


def consolidate(groups: Mapping[tuple[str, datetime], Group], per_instance: Mapping[str, int],
                reaction_seconds: int, step: int) -> Modelled | None:
    """The packing model, or None where no unallocated GPU lies on nodes of a known type and size."""
    packing = pack(groups, per_instance)
    packable = {k: s for k, s in packing.slots.items() if s.free and k[0] and per_instance.get(k[0], 0) > 0}
    if not packable:
        return None
    reach = reach_of(reaction_seconds, step)
    steady = held_free(packing.released, reach)
    expected = low = node_seconds = ZERO
    for key, slot in packable.items():
        n = per_instance[key[0]]
        expected += money_of(slot, packing.released[key], n)
        low += money_of(slot, steady.get(key, 0), n)
        node_seconds += packing.released[key] * slot.free_seconds / slot.free
    high = sum((s.free_paid for s in packing.slots.values()), ZERO)
    free_hours = sum((s.free_seconds for s in packing.slots.values()), ZERO) / 3600
    types = sorted({k[0] for k in packable})
    inputs = (
        ("GPUs per instance", ", ".join(f"{t}: {per_instance[t]}" for t in types),
         "GPU split: billing instance table, or GPU meter hours ÷ line hours"),
        ("unallocated GPU-hours", f"{free_hours:.2f}", "telemetry: unallocated GPUs (held by no pod) in the GPU split"),
        ("intervals with unallocated GPUs", str(len(packable)), "GPU split per interval"),
        ("node-hours that could be released", f"{node_seconds / 3600:.2f}", "packing of the held GPUs onto whole nodes"),
        ("unallocated GPU-hours left as they are (node of unknown instance type or size)",
         f"{sum((s.free_seconds for k, s in packing.slots.items() if k not in packable), ZERO) / 3600:.2f}",
         "GPU split: instance type from billing or telemetry, GPUs per instance"),
        ("drain window for the low band", f"{reaction_seconds} s ({reach} intervals either side)",
         "case: longest [services] scale_reaction"),
    )
    return Modelled(ordered(low, expected, high), inputs,
                    "low: nodes free throughout the longest scale reaction either side; "
                    "high: every unallocated GPU released (as if nodes came one GPU at a time)")
