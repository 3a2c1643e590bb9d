"""Which VM of a scale set each of its rows that names no VM bills: the line's turn (METHOD §3).

An Azure cost details export bills a scale set one row per VM, meter and day. A row that names its
VM (AdditionalInfo's ``VMName``, FocusCost's SkuPriceDetails / x_SkuDetails) is keyed by the VM's
own ARM id when it is read (connectors/billing/scale_sets.py) and so lands on that VM's node; a row
that names none bills one instance of the set, and the set's rows of one day and meter are taken
in turn over the set's nodes (:func:`audit.gpu_lines.taken_in_turn`), so that each lands on a node
of its own. The turn is worked out here, once, for both walks of the split (the Python one and the
engine query's, which reads it as a column of ``split_lines``).

In file order, a row of 8 h (a VM scaled in at 08:00) may land on the VM telemetry saw all day and
the 24 h row on the one seen until 08:00: 16 h of each node unmeasured, or unbilled. So where the
rows of a day and meter each bill one VM, no more rows than the set has nodes, and telemetry saw
the nodes for different hours of the day, the rows are paired with the nodes whose seen share of
the day matches their billed share best: both ordered from the longest, paired in that order,
which gives the least total difference. The file order is kept where that pairing is no closer
(the nodes seen alike, or already paired best), so a bill telemetry cannot tell apart reads as
before.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Mapping, Sequence

from audit.money import ZERO


def line_turns(plan, meters: Sequence, nodes_of_resource: Mapping[str, tuple[str, ...]],
               seen: Mapping[str, set]) -> list[int]:
    """Each line's turn among its resource's lines of its billing period and meter (``meters``: each
    line's meter, compared for equality): its place in file order, or, where telemetry tells the
    set's VMs apart, the place of the node whose seen hours match its billed hours best
    (:func:`_matched`). ``plan`` is the split's :class:`audit.gpu_lines.LinePlan`; ``seen`` each
    node's intervals with a DCGM sample (:class:`audit.gpu_presence.Presence`)."""
    turns = [0] * len(plan.keys)
    groups: dict[tuple, list[int]] = {}
    for j, group_key in enumerate(zip(plan.resources, plan.period, meters)):
        members = groups.setdefault(group_key, [])
        turns[j] = len(members)
        members.append(j)
    for (resource, period, _), members in groups.items():
        known = nodes_of_resource.get(resource, ())
        if 1 < len(members) <= len(known) and all(plan.facts.facts[plan.fact[j]][1] == 1 for j in members):
            billed = [plan.facts.occupancy(plan.facts.facts[plan.fact[j]][2]) for j in members]
            for j, turn in zip(members, _matched(billed, _seen_shares(known, plan.grids[period][0], seen))):
                turns[j] = turn
    return turns


def _seen_shares(known: tuple[str, ...], grid: list, seen: Mapping[str, set]) -> list[Decimal]:
    """Each node's share of the period's seconds in the window that telemetry saw it in."""
    total = sum((overlap for _, overlap in grid), ZERO)
    if not total:
        return [ZERO] * len(known)
    return [sum((overlap for ts, overlap in grid if ts in seen.get(node, ())), ZERO) / total for node in known]


def _matched(billed: list[Decimal], shares: list[Decimal]) -> list[int]:
    """The node index each line takes: the lines and the nodes each ordered from the longest (billed,
    seen; ties in file order) and paired in that order, where that is closer in total than the
    file order (line ``i`` on node ``i``); else the file order."""
    in_order = list(range(len(billed)))
    lines = sorted(in_order, key=lambda i: -billed[i])
    nodes = sorted(range(len(shares)), key=lambda n: -shares[n])
    paired = dict(zip(lines, nodes))
    best = [paired[i] for i in in_order]
    if _distance(billed, shares, best) < _distance(billed, shares, in_order):
        return best
    return in_order


def _distance(billed: list[Decimal], shares: list[Decimal], nodes: list[int]) -> Decimal:
    """How far apart the lines' billed shares and their nodes' seen shares are, in total."""
    return sum((abs(b - shares[n]) for b, n in zip(billed, nodes)), ZERO)
