"""The hours a machine billed in parts lacks one of its parts (METHOD §2; no silent misfit).

A GCP GPU machine is billed in parts, one SKU line each per hour: its cores (Core), its memory (RAM)
and, where its GPUs have their own meter, its GPUs (GPU). GPU-hours come from the GPU SKU's quantity,
so an hour whose GPU line is missing bills no GPU time, and an hour whose RAM line is missing bills
less than the machine cost: the bill reads as whole, and each figure built on those hours is short.
:func:`parts_fit` names, per resource, each part that some of its hours have and others lack, with
the hours that lack it (``billed_part_missing``): the same on a native export and on its FOCUS copy,
since both give each line's description and period.
"""
from __future__ import annotations

import re
from datetime import timedelta

import pandas as pd

from audit.lines import gpu_sku_model, resource_key
from audit.misfit import LISTED, Misfit, text
from audit.normalised import NodeMap
from connectors.billing.catalogue import CORE_RE

RAM_RE = re.compile(r"(?i)\b(ram|memory)\b")
HOUR = timedelta(hours=1)
#: the runs of hours a warning lists per part, then how many more
RUNS = 3


def part_of(description: str) -> str:
    """The part of a machine a line bills, from its description: "GPU", "Core", "RAM", else ""."""
    if gpu_sku_model({"charge_description": description}):
        return "GPU"
    if CORE_RE.search(description):
        return "Core"
    return "RAM" if RAM_RE.search(description) else ""


def parts_fit(gpu_lines: pd.DataFrame, nodes: NodeMap) -> list[Misfit]:
    """A ``billed_part_missing`` warning naming each resource's parts missing in hours its other parts bill."""
    needed = {"resource_id", "charge_description", "start", "end"}
    if not len(gpu_lines) or not needed <= set(gpu_lines.columns):
        return []
    usage = gpu_lines if "charge_category" not in gpu_lines.columns else \
        gpu_lines[gpu_lines["charge_category"].astype(str) == "Usage"]
    hours = _part_hours(usage[list(needed)].drop_duplicates())
    missing = [(key, part, sorted(set().union(*held.values()) - own))
               for key, held in sorted(hours.items()) if len(held) > 1
               for part, own in sorted(held.items())]
    missing = [(key, part, gaps) for key, part, gaps in missing if gaps]
    if not missing:
        return []
    shown = "; ".join(f"{_named(key, nodes)}: {part} in {len(gaps)} hour(s), {_runs(gaps)}"
                      for key, part, gaps in missing[:LISTED])
    more = f"; … {len(missing) - LISTED} more" if len(missing) > LISTED else ""
    message = (f"{len(missing)} part(s) of machines billed in parts are missing in hours the machine's other parts "
               f"bill: {shown}{more}. An hour without its GPU line bills no GPU time (GPU-hours come from the GPU "
               "SKU, METHOD §2), one without its Core or RAM line less than the machine: the figures of those "
               "hours rest on an incomplete bill (an export cut short, or rows filtered out).")
    names = tuple(dict.fromkeys(text(key) for key, _, _ in missing))[:LISTED]
    return [Misfit("billed_part_missing", "billing parts", message, names)]


def _part_hours(lines: pd.DataFrame) -> dict[str, dict[str, set]]:
    """resource key -> part -> the hours (their starts, UTC) its lines of that part bill."""
    out: dict[str, dict[str, set]] = {}
    parts: dict[str, str] = {}
    for rid, described, start, end in zip(lines["resource_id"], lines["charge_description"], lines["start"],
                                          lines["end"]):
        key = resource_key(str(rid or ""))
        described = str(described or "")
        part = parts.setdefault(described, part_of(described))
        if not key or not part or pd.isna(start) or pd.isna(end):
            continue
        held = out.setdefault(key, {}).setdefault(part, set())
        hour = pd.Timestamp(start).floor("h")
        while hour < end:
            held.add(hour)
            hour += HOUR
    return out


def _named(key: str, nodes: NodeMap) -> str:
    """A resource as the warning names it: its key, and its nodes where telemetry joins it."""
    joined = nodes.nodes_of.get(key, ())
    return text(key) + (f" (node {', '.join(text(n) for n in joined)})" if joined else "")


def _runs(hours: list) -> str:
    """Hours as runs: "2026-09-01 03:00–06:00 UTC", the first :data:`RUNS`, then how many more."""
    runs: list[list] = []
    for hour in hours:
        if runs and hour == runs[-1][1]:
            runs[-1][1] = hour + HOUR
        else:
            runs.append([hour, hour + HOUR])
    shown = ", ".join(f"{a:%Y-%m-%d %H:%M}–{b:%H:%M} UTC" if a.date() == (b - HOUR).date() and b.hour
                      else f"{a:%Y-%m-%d %H:%M}–{b:%Y-%m-%d %H:%M} UTC" for a, b in runs[:RUNS])
    return shown + (f" … ({len(runs) - RUNS} more)" if len(runs) > RUNS else "")
