"""GPU lines of a resource that no line bills GPU time for (METHOD §2; rule 5: no silent misfit).

A resource's GPU count and GPU-hours come from a line that bills GPU time: a GPU meter, an instance
of a type with GPUs, or the Core line of a GCP machine with GPUs that no meter bills
(:func:`audit.lines.bundled_machines`). A resource with none of them (a GCP machine billed in parts
whose GPU meter is missing and whose lines name no machine type) still has gpu_compute lines: their
money pays for GPUs, but how many and for how long the bill does not say, so they can go to no
GPU-interval. :func:`no_gpu_time` gives their money, spread over their periods' intervals as any
line's, to the holder ``NO_GPU_TIME`` (unattributed, ``gpu_time_not_billed``, with no GPU time), and
names each resource (``gpu_time_not_billed``): before, the split left it nowhere and the audit
stopped on a broken conservation. Both walks of the split run it, after their own, on the same plan.

A scale set's line that gives no GPUs (a marketplace licence billed per GPU-hour on the set, whose
VMs' own rows bill their GPU time) is not such a resource: :func:`on_scale_sets` spreads it over the
set's nodes' GPUs, money only, as METHOD §2 spreads any line billing several nodes of a set.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Mapping

from audit.ledger import NO_GPU_TIME, Group
from audit.misfit import LISTED, Misfit, text
from audit.money import ZERO


def on_scale_sets(keys: list[str], fact_of_line: list[int], facts, gpus: dict[str, int],
                  nodes_of: Mapping[str, tuple[str, ...]]) -> list[int]:
    """Each line's fact, those of a key with no GPU count (``gpus`` 0) whose resource has nodes that
    other keys bill GPU time for, all with one GPU count (a scale set billed one row per VM, each row
    keyed by its VM: audit/gpu_turns.py), made money only over all its nodes
    (:meth:`~audit.line_facts.LineFacts.money_only`) and its key given their GPU count (``gpus``
    updated): a line that bills several nodes of a scale set is spread evenly over them (METHOD §2),
    as the set's own VM line would be. Before, a marketplace licence billed per GPU-hour on the set
    (NVAIE, no machine type) was unattributed as ``gpu_time_not_billed``."""
    adopted = _set_gpus({key for key, count in gpus.items() if count <= 0}, keys, gpus, nodes_of)
    if not adopted:
        return fact_of_line
    gpus.update({key: count for key, (count, _) in adopted.items()})
    return [facts.money_only(fact, *adopted[key]) if key in adopted else fact
            for key, fact in zip(keys, fact_of_line)]


def _set_gpus(timeless: set[str], keys: list[str], gpus: Mapping[str, int],
              nodes_of: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[int, int]]:
    """(GPUs per node, nodes) of each ``timeless`` key whose nodes other keys all bill with one GPU count."""
    if not timeless or not nodes_of:
        return {}
    per_node: dict[str, set[int]] = {}
    for key in dict.fromkeys(keys):
        for node in nodes_of.get(key, ()) if gpus.get(key, 0) > 0 else ():
            per_node.setdefault(node, set()).add(gpus[key])
    out: dict[str, tuple[int, int]] = {}
    for key in sorted(timeless):
        known = [node for node in nodes_of.get(key, ()) if node]
        counts = {count for node in known for count in per_node.get(node, {0})}
        if known and len(counts) == 1 and min(counts) > 0:
            out[key] = (min(counts), len(known))
    return out


def no_gpu_time(groups: dict, plan, lines, coverage: Mapping, currency: str) -> tuple[Misfit, ...]:
    """Add the money of the lines of resources with no GPU count (``plan.gpus`` 0) to the
    ``NO_GPU_TIME`` groups of their intervals, in line order; a warning naming the resources."""
    keys = {key for key, count in plan.gpus.items() if count <= 0}
    if not keys:
        return ()
    money: dict[str, Decimal] = {}
    counts: dict[str, int] = {}
    billed: set[str] = set()  # the keys a line of which names its machine type
    columns = zip(plan.keys, plan.period, plan.line_counts, lines["net"], lines["pretax"], lines["priced"],
                  lines["committed"], lines["machine"])
    for key, period, count, net, gross, priced, committed, machine in columns:
        grid, parts = plan.grids[period]
        if key not in keys or not parts:
            continue
        if machine:
            billed.add(key)
        for (ts, _), part in zip(grid, parts):
            group = groups.get((NO_GPU_TIME, ts))
            if group is None:
                group = groups[(NO_GPU_TIME, ts)] = Group(NO_GPU_TIME, ts)
            group.paid += net * part
            group.gross += gross * part
            group.priced += priced * part
            if committed:
                group.committed += committed * part
            group.nodes.update(n for n in coverage[key].node.split(", ") if n)
        money[key] = money.get(key, ZERO) + net
        counts[key] = counts.get(key, 0) + int(count)
    return (_named(money, counts, coverage, currency, billed),) if money else ()


def _named(money: dict[str, Decimal], counts: dict[str, int], coverage: Mapping, currency: str,
           billed: set[str]) -> Misfit:
    """The ``gpu_time_not_billed`` warning: each resource, its lines and money, largest first; the
    machine type its lines name (``billed``), else the one telemetry reports for its node."""
    order = sorted(money, key=lambda key: (-abs(money[key]), key))
    names = [text(coverage[key].resource_id or key) for key in order]
    shown = "; ".join(f"{name}{_machine(coverage[key], key in billed)}: {counts[key]} line(s), "
                      f"{money[key]:.2f} {currency}"
                      for name, key in zip(names[:LISTED], order))
    more = f"; … {len(order) - LISTED} more" if len(order) > LISTED else ""
    total = sum(money.values(), ZERO)
    message = (f"{len(order):,} GPU resource(s) have GPU lines but no line that bills GPU time (no GPU meter, "
               f"no line naming an instance or machine type with GPUs in the shipped table): {shown}{more}. How many GPUs "
               f"their {total:.2f} {currency} paid for, and for how long, is not in the bill: it is unattributed "
               "(gpu_time_not_billed), in no GPU-interval. The GPU meter's lines, or the machine type (GCP "
               "machine_spec) on the lines, would place it.")
    return Misfit("gpu_time_not_billed", "billing quantities", message, tuple(names[:LISTED]))


def _machine(cover, billed: bool) -> str:
    """" (machine m, node n)" as far as the coverage names them; where no line names the machine
    type (``billed`` false) and telemetry does, says so: the nearest type, which the bill lacks."""
    if cover.instance_type and not billed:
        return (f" (the bill names no machine type; telemetry reports node {text(cover.node)} as "
                f"{text(cover.instance_type)}, the nearest)")
    said = [f"machine {text(cover.instance_type)}" if cover.instance_type else "",
            f"node {text(cover.node)}" if cover.node else ""]
    return f" ({', '.join(s for s in said if s)})" if any(said) else ""
