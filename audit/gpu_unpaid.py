"""What telemetry saw of a node beyond the time its lines pay (METHOD §5, coverage driver).

A scale-in billed short (a VM's row billing 12 h of a day telemetry saw its node for 21 h) places the
paid 12 h in the hours the node was seen (:mod:`audit.gpu_presence`); the other 9 h of each seen hour's
GPU time, and the kernel activity in it, lie in no bucket. Coverage's observed GPU-hours count the
paid time only; this module measures the rest, per billed resource: its hours, the GPU-seconds its
observed GPUs had in them (``seen_unpaid_seconds``), and the kernel-active GPU-seconds per holder and
interval (``unpaid_busy``), which the reconciliation names as a coverage driver: the requests served
in those hours are in the bottom-up, their GPU time in no line of the top-down.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Callable, Mapping

from audit.gpu_presence import Presence, hours_figure
from audit.ledger import NodeCoverage, is_service
from audit.money import ZERO
from audit.result import Driver


def add_unpaid(presence: Presence, coverage: Mapping[str, NodeCoverage],
               holdings: Callable[[str, object, int], tuple[int, tuple]]) -> None:
    """Fill each node's coverage with the time telemetry saw it beyond its lines (``holdings(node,
    interval, gpus)``: the GPU split's (GPUs observed, (holder, weight, busy, …) parts) of a node's
    billed GPUs in an interval)."""
    covers = _covers(coverage)
    for node, hours in presence.unpaid_hours().items():
        cover = covers.get(node)
        if cover is not None:
            cover.unpaid_hours += hours
    for node, ts, seconds in presence.unpaid_intervals():
        cover = covers.get(node)
        if cover is None:
            continue
        observed, parts = holdings(node, ts, cover.gpus)
        cover.seen_unpaid_seconds += seconds * observed
        for holder, weight, busy, *_ in parts:
            if busy:
                key = (holder, ts)
                cover.unpaid_busy[key] = cover.unpaid_busy.get(key, ZERO) + seconds * busy * weight


def _covers(coverage: Mapping[str, NodeCoverage]) -> dict[str, NodeCoverage]:
    """Node -> the first billed resource (in key order) that pays GPU time on it."""
    out: dict[str, NodeCoverage] = {}
    for _, cover in sorted(coverage.items()):
        if cover.paid_seconds > 0 and cover.gpus > 0:
            for node in cover.node.split(", "):
                if node:
                    out.setdefault(node, cover)
    return out


def unpaid_busy(coverage: Mapping[str, NodeCoverage]) -> dict[tuple, Decimal]:
    """(holder, interval) -> kernel-active GPU-seconds telemetry saw in time no line pays, over every node."""
    out: dict[tuple, Decimal] = {}
    for cover in coverage.values():
        for key, seconds in cover.unpaid_busy.items():
            out[key] = out.get(key, ZERO) + seconds
    return out


def unpaid_drivers(coverage: Mapping[str, NodeCoverage], priced_at: Mapping[tuple, Decimal], top: Decimal
                   ) -> list[Driver]:
    """A coverage driver per node telemetry saw beyond its lines: its unpaid hours and kernel-active
    seconds, and the gap they open. The bottom-up counts every request an interval served
    (requests × profile kernel-seconds, METHOD §5), those served in the unpaid time too, at the
    interval's price per GPU-second (``priced_at``, per (service, interval) so estimated); the
    top-down pays none of it. Gap: −(that kernel time × price) ÷ top-down; the most unpaid first."""
    out = []
    for _, c in sorted(coverage.items(), key=lambda kv: (-kv[1].unpaid_hours, kv[0])):
        if not c.unpaid_hours:
            continue
        busy = sum(c.unpaid_busy.values(), ZERO)
        counted = {key: s for key, s in c.unpaid_busy.items() if key in priced_at}
        money = sum((s * priced_at[key] for key, s in counted.items()), ZERO)
        out.append(Driver("coverage", c.node or c.resource_id, -money / top if top else None,
                          f"{hours_figure(c.unpaid_hours)} h seen but not billed ({c.seen_unpaid_seconds / 3600:.1f} "
                          f"GPU-h), kernel-active {busy:.0f} s outside paid time ({_holders(c.unpaid_busy)}): "
                          f"the bottom-up counts the requests served in it, {sum(counted.values(), ZERO):.0f} s "
                          f"priced at {money:.2f}, which no line of the top-down pays (fit telemetry_beyond_billed)"))
    return out


def _holders(busy: Mapping[tuple, Decimal]) -> str:
    """"chat 83759 s, other 120 s": the kernel-active seconds per service, the rest as other."""
    per: dict[str, Decimal] = {}
    for (holder, _), seconds in busy.items():
        name = holder if is_service(holder) else "other"
        per[name] = per.get(name, ZERO) + seconds
    return ", ".join(f"{name} {per[name]:.0f} s" for name in sorted(per, key=lambda n: (n == "other", n)))
