"""Where in its billing period a line that bills part of it ran: in the intervals telemetry saw its
node (METHOD §3).

A scale set that grows by one VM at 12:00 bills that VM one daily row of 12 h. The bill does not
say which 12 hours; telemetry does: the node's GPUs have DCGM samples from 12:00 on, none before.
Spread evenly over the day (occupancy 0.5 in each of 24 hours), half the line's money would land
in the 12 hours the node did not exist, on GPU-intervals with no activity sample (unattributed),
and coverage would read half the node's paid time unobserved. So a line of occupancy below 1 on a
node that telemetry saw in some but not all of its period's intervals places its paid GPU time in
the intervals where the node was seen, evenly over them, at most the whole of each; what is left
(a node seen for fewer hours than billed) is spread over the period's other intervals, evenly, as
before; and each interval's part of the line's money is its part of that paid time, so a
GPU-second still costs the line's cost over the GPU time it paid. A node never seen, or seen in
every interval of the period, keeps the even spread. The series that placed it is named in the
source of the parts the line's money reaches (:meth:`Presence.note`).

The presence series is the node's GPUs' DCGM samples: its kernel-activity rows (``gpu_activity``)
and the GPU-intervals whose samples were all excluded (``unmeasured_intervals``): an excluded
sample still says the GPU was there. ``kube_node_info`` is read without its sample times (the node
table holds one row per node), so it places nothing.
"""
from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Iterable, Mapping

from audit.misfit import LISTED, Misfit, text
from audit.money import ZERO

ONE = Decimal(1)


class Presence:
    """Per node, the intervals telemetry saw it in and the series that saw it; each placement worked
    out once per (node, billing period, occupancy)."""

    def __init__(self, seen: Mapping[str, set], series: Mapping[str, set[str]]):
        self.seen = seen
        self.series = series
        self._spreads: dict[tuple, tuple[list[tuple], str]] = {}
        #: (node, period) -> (seconds a line pays, seconds telemetry saw the node) where it saw more
        self.short: dict[tuple, tuple[Decimal, Decimal]] = {}
        #: (node, period) -> (interval, seconds of it seen and paid by no line) of each interval it was seen in
        self.unpaid: dict[tuple, list[tuple]] = {}

    @classmethod
    def of(cls, node_intervals: Iterable[tuple], node_series: Iterable[tuple[str, str]]) -> Presence:
        """From the (node, interval) keys that hold a sample and the (node, series) pairs that name
        them (empty nodes left out)."""
        seen: defaultdict = defaultdict(set)
        for node, ts in node_intervals:
            if node:
                seen[node].add(ts)
        series: defaultdict = defaultdict(set)
        for node, name in node_series:
            if node and name:
                series[node].add(name)
        return cls(dict(seen), dict(series))

    def spread(self, node: str, period: tuple, grid: list, parts: list, occupancy: Decimal) -> tuple[list[tuple], str]:
        """(interval, overlap, part of the line's money, occupancy) of each interval a line of
        ``occupancy`` on ``node`` pays GPU time in (``grid``/``parts``: the intervals of its billing
        ``period``, (start, end), and their parts of it), and the note naming the series that placed
        it ("" for the even spread)."""
        key = (node, period, occupancy)
        found = self._spreads.get(key)
        if found is None:
            found = self._spreads[key] = self._placed(node, grid, parts, occupancy, period)
        return found

    def _placed(self, node: str, grid: list, parts: list, occupancy: Decimal, period: tuple = ()
                ) -> tuple[list[tuple], str]:
        """The paid GPU time of the line (occupancy × the period's seconds in the window) in the
        intervals the node was seen, evenly, at most each interval's seconds; the rest evenly over
        the others; money by paid time. Unplaced (0 < occupancy < 1 only, the node seen in some of the
        intervals but not all): each interval at the line's occupancy and part."""
        even = [(ts, overlap, part, occupancy) for (ts, overlap), part in zip(grid, parts)]
        seen = self.seen.get(node, ()) if node and ZERO < occupancy < ONE else ()
        here = [ts in seen for ts, _ in grid]
        if not any(here):
            return even, ""
        total = sum((overlap for _, overlap in grid), ZERO)
        paid = occupancy * total
        inside = sum((overlap for (_, overlap), h in zip(grid, here) if h), ZERO)
        self._seen_beyond(node, period, paid, inside, [g for g, h in zip(grid, here) if h])
        if all(here):
            return even, ""
        held = min(ONE, paid / inside)
        left = paid - held * inside
        outside = (left / (total - inside)) if left > 0 else ZERO
        placed = [(ts, overlap, overlap * o / paid, o)
                  for (ts, overlap), o in ((g, held if h else outside) for g, h in zip(grid, here)) if o > 0]
        return placed, self.note(node)

    def _seen_beyond(self, node: str, period: tuple, paid: Decimal, inside: Decimal, seen: list[tuple]) -> None:
        """Keep (paid, seen) seconds of a node-period telemetry saw for longer than a line pays, and
        the unpaid seconds of each ``seen`` (interval, overlap): the paid time is placed evenly over
        them (:meth:`_placed`), so each holds the same unpaid share."""
        if inside <= paid:
            return
        before = self.short.get((node, period), (ZERO, ZERO))[0]
        if paid < before:
            return
        self.short[(node, period)] = (paid, inside)
        left = ONE - paid / inside
        self.unpaid[(node, period)] = [(ts, overlap * left) for ts, overlap in seen]

    def unpaid_intervals(self) -> list[tuple]:
        """(node, interval, seconds) of each interval a node was seen in for time no line pays."""
        return [(node, ts, seconds) for (node, _), rows in sorted(self.unpaid.items(), key=lambda kv: kv[0][0])
                for ts, seconds in rows if seconds > 0]

    def unpaid_hours(self) -> dict[str, Decimal]:
        """Per node, the hours telemetry saw it that no line pays, summed over its periods."""
        out: dict[str, Decimal] = {}
        for (node, _), (paid, inside) in self.short.items():
            out[node] = out.get(node, ZERO) + (inside - paid) / 3600
        return out

    def misfits(self) -> list[Misfit]:
        """A ``telemetry_beyond_billed`` warning naming each node telemetry saw for more hours than the
        line billing it in a period pays (rule 5: no silent misfit), its billed and seen hours summed
        over its periods, the most unpaid first."""
        hours: dict[str, list[Decimal]] = {}
        for (node, _), (paid, inside) in self.short.items():
            sums = hours.setdefault(node, [ZERO, ZERO])
            sums[0] += paid / 3600
            sums[1] += inside / 3600
        if not hours:
            return []
        order = sorted(hours, key=lambda n: (-(hours[n][1] - hours[n][0]), -hours[n][1], n))
        shown = "; ".join(f"{text(n)}: billed {hours_figure(hours[n][0])} h, seen {hours_figure(hours[n][1])} h"
                          for n in order[:LISTED])
        more = f"; … {len(order) - LISTED} more" if len(order) > LISTED else ""
        message = (f"{len(order):,} GPU node(s) seen in telemetry for more hours than the bill pays for them: "
                   f"{shown}{more}. Telemetry saw these nodes for hours no line pays (a row missing or cut short, "
                   "a scale-in billed shorter than the node ran): the paid GPU time is placed in the hours they "
                   "were seen, and coverage's observed GPU-hours count only that paid time: the rest is its "
                   "seen_unpaid_gpu_hours, in no bucket, and the reconciliation names its kernel activity as a "
                   "coverage driver (the bottom-up counts the requests served in it, no line pays it).")
        return [Misfit("telemetry_beyond_billed", "coverage", message, tuple(text(n) for n in order[:LISTED]))]

    def note(self, node: str) -> str:
        """"placed by node presence in <series> (<node>)": the source of a placed line's parts."""
        return f"placed by node presence in {'/'.join(sorted(self.series.get(node, ())))} ({node})"


def hours_figure(value: Decimal) -> str:
    """Hours to two places without trailing zeros (12.00 → 12, 10.50 → 10.5)."""
    shown = f"{value.quantize(Decimal('0.01')):f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown
