"""GPU time billed beyond a node's GPUs: a resource whose GPU lines bill more GPU-seconds in an
interval than its GPUs can give (METHOD §3; rule 5: no silent misfit).

Two lines of one instance billing the same hour (a row appended twice, with another cost) pay for
16 GPU-hours of an 8-GPU node in one hour. Telemetry saw 8: the GPU time beyond the node's GPUs is
paid, not observed, and no workload held it, so it is platform overhead (unallocated), not the
time of whoever held the GPUs. Which of the lines is the extra one the bill does not say, so in
such an interval (a *full* one) every line keeps the share ``fit`` = (GPUs × interval) ÷ (GPU-seconds
billed) of its GPU time and money for the GPUs' holders, and the rest goes to the unallocated
holder, unobserved; :func:`over_fit` names each resource, its intervals and lines
(``gpu_time_over_capacity``).

Only the keys whose GPU-time lines overlap in time (:func:`stacked_keys`, array work per line) can
fill an interval beyond its GPUs; the GPU-seconds are summed per key, node and interval for those
alone (:meth:`Beyond.full`), so a bill whose lines of a resource never overlap pays nothing more.
A line placed on no known node (telemetry does not name the resource) is not weighed: how many
machines it stands for (a scale set billed one row per VM) is not in the data.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from audit.ledger import UNALLOCATED, Group
from audit.misfit import LISTED, Misfit, text
from audit.money import ZERO

HOUR = Decimal(3600)


def stacked_keys(keys: list[str], period: list[int], periods: list[tuple], timed: np.ndarray) -> frozenset[str]:
    """The resource keys two of whose GPU-time lines (``timed``) overlap in time. Each line is one
    int64, its key's code × the periods + its period's rank by (start, end), sorted once: a key's
    lines overlap where a period repeats, or where one starts before the one before it ends (a line
    that overlaps any earlier one overlaps the one just before it). About 4 s for 10 M lines."""
    where = np.flatnonzero(timed)
    if len(where) < 2:
        return frozenset()
    codes, names = pd.factorize(np.asarray(keys, dtype=object)[where])
    bounds = np.array([[s.value, e.value] for s, e in periods], dtype=np.int64).reshape(-1, 2)
    rank = np.lexsort((bounds[:, 1], bounds[:, 0]))  # the periods in (start, end) order
    place = np.empty(len(rank), dtype=np.int64)
    place[rank] = np.arange(len(rank))
    line = np.sort(codes.astype(np.int64) * len(rank) + place[np.asarray(period, dtype=np.int64)[where]])
    key, spans = line // len(rank), bounds[rank[line % len(rank)]]
    overlap = (key[1:] == key[:-1]) & (spans[1:, 0] < spans[:-1, 1])
    return frozenset(names[np.unique(key[1:][overlap])].tolist())


def held_back(plan, lines, placed: list) -> dict:
    """(key, node, period, GPUs, time code, instances) -> [placements, net, gross, priced, committed]
    of the stacked keys' lines, summed in line order (``placed``: each line's nodes): the rows the
    engine's ``SUMS`` gives (audit/split_sql.py), so that both walks weigh a full interval alike."""
    held: dict = {}
    for key, period, fact, count, nodes, *money in zip(plan.keys, lines.period, plan.fact, plan.line_gpus, placed,
                                                        lines["net"], lines["pretax"], lines["priced"],
                                                        lines["committed"]):
        if key not in plan.stacked or not plan.grids[period][1] or count <= 0:
            continue
        _, instances, time_code = plan.facts.facts[fact]
        for node in nodes:
            row = held.setdefault((key, node, period, count, time_code, instances), [0, ZERO, ZERO, ZERO, ZERO])
            row[0] += 1
            for j, amount in enumerate(money, 1):
                row[j] += amount
    return held


class Beyond:
    """The full intervals of a split and what lies beyond their GPUs."""

    def __init__(self):
        #: (key, node, interval) -> fit; (key, interval) -> [GPU-seconds beyond, money beyond]
        self.fits: dict[tuple, Decimal] = {}
        self.over: dict[tuple, list] = {}
        #: (key, interval) of a full one -> [GPU-seconds billed, GPU-seconds its nodes' GPUs hold]
        self.billed: dict[tuple, list] = {}
        #: key -> the nodes its stacked lines are placed on
        self.nodes: dict[str, set[str]] = {}
        self._counted: set[tuple] = set()

    def full(self, rows: Iterable[tuple], spread: Callable[[str, int, int], list],
             room: Callable[[datetime], Decimal], gpus_of: Mapping[str, int]) -> None:
        """The fit of each interval whose GPU-seconds billed on a node exceed its GPUs (``gpus_of`` a
        key: its machine's, whatever GPUs each line bills: a VM resized in the window bills 1 on one
        line and 2 on another) × the interval (``room`` of an interval: its seconds), and for the
        warning, per key and such interval, the
        GPU-seconds its lines bill on all its nodes and what those nodes' GPUs hold (a scale set's
        rows spread over its VMs: 24 GPU-hours billed of 2 × 8 GPUs, not one node's 16 of 8).
        ``rows``: (key, node, period, gpus, time code, placements) of the stacked keys' lines,
        summed per key, node, period and facts (:func:`held_back`); ``spread`` of (node, period, time
        code): the (interval, overlap, part, occupancy) its lines pay GPU time in
        (:meth:`audit.gpu_presence.Presence.spread`)."""
        paid: defaultdict = defaultdict(Decimal)
        for key, node, period, gpus, code, placements in rows:
            if not node or not code:
                continue
            self.nodes.setdefault(key, set()).add(node)
            for ts, overlap, _, occupancy in spread(node, period, code):
                paid[(key, node, ts)] += overlap * (occupancy * placements * gpus)
        self.fits = {found: room(found[2]) * gpus_of[found[0]] / seconds for found, seconds in paid.items()
                     if seconds > room(found[2]) * gpus_of[found[0]]}
        full = {(key, ts) for key, _, ts in self.fits}
        for (key, _, ts), seconds in paid.items():
            if (key, ts) in full:
                billed = self.billed.setdefault((key, ts), [ZERO, ZERO])
                billed[0] += seconds
                billed[1] += room(ts) * gpus_of[key]

    def split(self, groups: dict, key, node, ts, time, gpus, money) -> tuple | None:
        """None where (key, node, interval) is not full; else the 1 − fit of the GPU time and money
        (per GPU) that lie beyond the node's GPUs go to the unallocated holder, unobserved and with no
        GPUs of their own (no node to release), noted for :func:`over_fit`; returns what the GPUs'
        holders keep and how many times they count their GPUs: once per key, node and interval,
        whatever number of lines billed them."""
        fit = self.fits.get((key, node, ts))
        if fit is None:
            return None
        kept, share = time * fit, tuple(amount * fit for amount in money)
        over = [amount - part for amount, part in zip(money, share)]
        group = groups.get((UNALLOCATED, ts)) or groups.setdefault((UNALLOCATED, ts), Group(UNALLOCATED, ts))
        group.paid += over[0] * gpus
        group.gross += over[1] * gpus
        group.priced += over[2] * gpus
        if over[3]:
            group.committed += over[3] * gpus
        group.paid_seconds += (time - kept) * gpus
        if node:
            group.nodes.add(node)
        sums = self.over.setdefault((key, ts), [ZERO, ZERO])
        sums[0] += (time - kept) * gpus
        sums[1] += over[0] * gpus
        counted = 0 if (key, node, ts) in self._counted else 1
        self._counted.add((key, node, ts))
        return kept, share, counted


def over_fit(beyond: Beyond, plan, coverage: Mapping, currency: str) -> list[Misfit]:
    """A ``gpu_time_over_capacity`` warning naming each resource that billed GPU time beyond its
    GPUs: its GPUs and nodes, its full intervals (GPU-hours its lines bill on all its nodes and what
    their GPUs hold), the GPU-hours and money beyond, and the lines that bill those intervals (line
    id and period; a line the reader summed of several rows says so). ``beyond``: the walk's
    :class:`Beyond`."""
    over = beyond.over
    if not over:
        return []
    keys = list(dict.fromkeys(key for key, _ in over))
    named = [_resource(key, sorted(ts for k, ts in over if k == key), beyond, plan, coverage[key], currency)
             for key in keys]
    hours = sum((sums[0] for sums in over.values()), Decimal(0)) / HOUR
    money = sum((sums[1] for sums in over.values()), Decimal(0))
    more = f"; … {len(named) - LISTED} more" if len(named) > LISTED else ""
    message = (f"{len(named):,} GPU resource(s) bill more GPU time in an interval than their GPUs can give "
               f"({_figure(hours)} GPU-hours, {money:.2f} {currency} beyond): {'; '.join(named[:LISTED])}{more}. "
               "The GPU time beyond the GPUs is paid, not observed, and no workload held it: with its share "
               "of each line's money (every line of a full interval by the same share) it is platform "
               "overhead (unallocated), not the time of the GPUs' holders.")
    return [Misfit("gpu_time_over_capacity", "billing quantities", message,
                   tuple(text(coverage[key].resource_id or key) for key in keys[:LISTED]))]


def _resource(key: str, times: list, beyond: Beyond, plan, cover, currency: str) -> str:
    """"resource (GPUs, nodes): intervals (billed, at most); beyond; lines"."""
    billed = beyond.billed
    shown = ", ".join(f"{_when(ts)} ({_figure(billed[(key, ts)][0] / HOUR)} GPU-hours billed, at most "
                      f"{_figure(billed[(key, ts)][1] / HOUR)})" for ts in times[:LISTED])
    over = [beyond.over[(key, ts)] for ts in times]
    hours = sum((sums[0] for sums in over), Decimal(0)) / HOUR
    money = sum((sums[1] for sums in over), Decimal(0))
    lines = _lines(key, set(times), plan)
    listed = ", ".join(lines[:LISTED]) + (f", … {len(lines) - LISTED} more" if len(lines) > LISTED else "")
    return (f"{text(cover.resource_id or key)} ({_gpus(cover.gpus, sorted(beyond.nodes[key]))}): "
            f"{len(times)} interval(s): {shown}{', …' if len(times) > LISTED else ''}; {_figure(hours)} GPU-hours "
            f"and {money:.2f} {currency} beyond its GPUs; lines {listed}")


def _gpus(gpus: int, nodes: list[str]) -> str:
    """"8 GPUs, node n1"; a resource on several nodes (a scale set's VMs): "16 GPUs: 8 a node × 2
    nodes, nodes vm-0, vm-1"."""
    if len(nodes) == 1:
        return f"{gpus} GPUs, node {text(nodes[0])}"
    named = ", ".join(text(node) for node in nodes[:LISTED]) + (", …" if len(nodes) > LISTED else "")
    return f"{gpus * len(nodes)} GPUs: {gpus} a node × {len(nodes)} nodes, nodes {named}"


def _lines(key: str, times: set, plan) -> list[str]:
    """"line id (period)" of each GPU-time line of ``key`` whose period bills one of ``times``; a line
    the billing reader summed of n rows (its ``line_count``: an hourly charge repeated hour after
    hour, one line over the run) is "line id and the n − 1 rows summed with it (period)": the id is
    its first row's, the period the run's."""
    out = []
    for i in (i for i, k in enumerate(plan.keys) if k == key):
        if plan.facts.facts[plan.fact[i]][2] and times & {ts for ts, _ in plan.grids[plan.period[i]][0]}:
            start, end = plan.periods[plan.period[i]]
            rows = _rows(plan.line_counts[i]) - 1
            summed = f" and the {rows:,} row{'s' if rows > 1 else ''} summed with it" if rows > 0 else ""
            out.append(f"{text(plan.line_ids[i])}{summed} ({_when(start)}–{_when(end)})")
    return out


def _rows(count) -> int:
    """The rows a line stands for: its ``line_count``, 1 where the reader gave none (NA)."""
    return int(count) if isinstance(count, (int, float, np.number)) and count == count else 1


def _when(ts) -> str:
    """An interval's start as the report writes it: 2026-09-01T03:00Z."""
    return pd.Timestamp(ts).strftime("%Y-%m-%dT%H:%MZ")


def _figure(value: Decimal) -> str:
    """GPU-hours to two places, trailing zeros off (8.00 → 8, 0.50 → 0.5)."""
    return f"{value.quantize(Decimal('0.01')).normalize():f}"
