"""The gpu_compute lines as the GPU split reads them (audit/gpusplit.py): one list per column, each
line's billing period, and what is worked out once per line for both ways of walking them
(:class:`LinePlan`): its resource key, its facts (audit/line_facts.py), its period's interval grid.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Mapping

import numpy as np
import pandas as pd

from audit.gpu_over import stacked_keys
from audit.gpu_timeless import on_scale_sets
from audit.line_facts import LineFacts, capped_fit
from audit.lines import as_machine, bundled_machines, resource_key
from audit.money import ZERO
from audit.table_rows import column_values
from connectors.billing.catalogue import gpu_instances
from schemas.errors import UsageError

#: the columns of a gpu_compute line that the split reads; the first eight even when there is no line
NEEDED = ("resource_id", "line_id", "gpus_per_instance", "start", "end", "pricing_quantity", "consumed_quantity",
          "charge_description")
LINE_COLUMNS = NEEDED + ("instance_type", "machine_type", "net", "pretax", "priced", "commitment_discount_id",
                         "line_count")


class GpuLines:
    """The gpu_compute lines as one list per column, holding the values ``to_dict("records")`` gave
    (a dict per line was half of the split's 11 s on a 1 M-line bill), and each line's billing period
    as an index into the distinct (start, end) pairs, which hold the Timestamps. ``committed`` is
    each line's net money where a commitment discount bills it (:func:`committed_money`). ``machine``
    is the machine each line bills, as the coverage table names it: classification's ``machine_type``
    (a GCP part line's machine spec), else the instance type where a table built in memory lacks it."""

    def __init__(self, frame: pd.DataFrame):
        missing = [c for c in NEEDED if c not in frame.columns]
        if missing:
            raise KeyError(f"gpu_compute lines lack the columns {missing}")
        self.size = len(frame)
        self.columns = {c: column_values(frame[c]) for c in LINE_COLUMNS if c in frame.columns and c not in
                        ("start", "end", "commitment_discount_id")}
        self.columns["committed"] = committed_money(frame)
        self.columns["machine"] = self.columns.get("machine_type") or self.columns.get("instance_type") or [""] * self.size
        self.period, self.periods = _periods(frame["start"], frame["end"])

    def __getitem__(self, column: str) -> list:
        return self.columns[column]


def committed_money(frame: pd.DataFrame) -> list:
    """Each line's net money where a commitment discount bills it (CommitmentDiscountId set), else 0:
    the money of a GPU-capacity part that is released only when the commitment ends (METHOD §7).
    Array work (46 ms a million lines; a bill with no commitment: a list of zeros)."""
    zeros = np.full(len(frame), ZERO, dtype=object)
    if "commitment_discount_id" not in frame.columns or "net" not in frame.columns:
        return zeros.tolist()
    named = (frame["commitment_discount_id"].fillna("").astype(str) != "").to_numpy(dtype=bool)
    if named.any():
        zeros[named] = frame["net"].to_numpy(dtype=object)[named]
    return zeros.tolist()


def _periods(start: pd.Series, end: pd.Series) -> tuple[list[int], list[tuple]]:
    """Each line's index into the distinct (start, end) pairs, and those pairs (as Timestamps)."""
    if not len(start):
        return [], []
    if pd.api.types.is_datetime64_any_dtype(start) and pd.api.types.is_datetime64_any_dtype(end):
        pairs = np.stack([start.array.asi8, end.array.asi8], axis=1)
        _, first, inverse = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        return inverse.ravel().tolist(), [(start.array[j], end.array[j]) for j in first.tolist()]
    index: dict[tuple, int] = {}
    codes = [index.setdefault(pair, len(index)) for pair in zip(start.tolist(), end.tolist())]
    return codes, list(index)


def line_hours(start, end) -> Decimal:
    """The hours a line's billing period spans (whole seconds)."""
    return Decimal(int((end - start).total_seconds())) / 3600


def interval_grid(start: datetime, end: datetime, step: int, lo: datetime, hi: datetime):
    """(interval start, overlap seconds) of [lo, hi) on the grid aligned to the window start."""
    lo, hi = max(lo, start), min(hi, end)
    if hi <= lo:
        return []
    k = int((lo - start).total_seconds() // step)
    out = []
    t = start + timedelta(seconds=k * step)
    while t < hi:
        u = t + timedelta(seconds=step)
        overlap = (min(u, hi) - max(t, lo)).total_seconds()
        if overlap > 0:
            out.append((t, Decimal(int(overlap)) if float(overlap).is_integer() else Decimal(repr(overlap))))
        t = u
    return out


class LinePlan:
    """What the split reads of each line, worked out once for both ways of walking them: its
    resource (key), its facts (a GCP Core line that bills its machine's GPUs, no GPU meter of the
    resource billing them, as an instance line of that machine: :func:`audit.lines.bundled_machines`),
    its GPU count (``line_gpus``: its own, else its key's), its billing
    period's grid, the lines whose quantity the facts cap at their period, named, and the keys whose
    GPU-time lines overlap in time (``stacked``: only they can bill an interval beyond their GPUs,
    :mod:`audit.gpu_over`). A key's GPU count (``gpus``: the most any of its lines gives,
    :func:`_machine_gpus`) is its machine's: a GPU meter line's machine type's, else its period's meter
    lines' together, spread over by each meter line (:meth:`LineFacts.on_machine`) and by the lines
    that give none (the core / RAM part of a machine billed in parts, a line of no instance type). A
    scale set's lines that give no GPUs while its VMs' own rows do (a licence billed on the set) take
    its nodes' GPUs, money only (``nodes_of``: :func:`audit.gpu_timeless.on_scale_sets`)."""

    def __init__(self, lines: GpuLines, grid_of, nodes_of: Mapping[str, tuple[str, ...]] | None = None):
        ids = lines["resource_id"]
        keys_of = {rid: resource_key(rid) for rid in set(ids)}
        self.resources = [keys_of[rid] for rid in ids]
        self.keys = [r or line_id for r, line_id in zip(self.resources, lines["line_id"])]
        hours = [line_hours(start, end) for start, end in lines.periods]
        self.grids = [grid_of(start, end) for start, end in lines.periods]
        facts = self.facts = LineFacts()
        bundled = bundled_machines(self.keys, lines["machine"], lines["charge_description"], lines["gpus_per_instance"])
        self.fact = [_fact_of(facts, kind, gpi, pq, cq, text, hours[period])
                     for kind, gpi, pq, cq, text, period in zip(
                         bundled, lines["gpus_per_instance"], lines["pricing_quantity"], lines["consumed_quantity"],
                         lines["charge_description"], lines.period)]
        self.gpus = _machine_gpus(self.keys, self.fact, facts, lines.columns.get("machine_type") or [""] * lines.size,
                                  lines["charge_description"], lines.period)
        self.fact = facts.on_machines(self.fact, self.keys, self.gpus)
        self.fact = on_scale_sets(self.keys, self.fact, facts, self.gpus, nodes_of or {})
        self.line_gpus = [facts.facts[fact][0] or self.gpus[key] for key, fact in zip(self.keys, self.fact)]
        self.capped = tuple(capped_fit(facts, self.fact, ids, lines["charge_description"]))
        self.line_ids, self.period, self.periods = lines["line_id"], lines.period, lines.periods
        #: the rows each line stands for (a billing reader sums an hourly charge's run into one line)
        self.line_counts = lines.columns.get("line_count") or [1] * lines.size
        codes = np.fromiter((code for _, _, code in facts.facts), dtype=np.int64, count=len(facts.facts))
        self.stacked = stacked_keys(self.keys, lines.period, lines.periods,
                                    codes[np.asarray(self.fact, dtype=np.int64)] != 0 if self.fact else np.zeros(0, bool))


def _fact_of(facts: LineFacts, kind, gpi, pq, cq, text, span) -> int:
    """A line's facts, a Core line billing its machine's GPUs (``kind``) as an instance line of it."""
    gpus, priced, consumed = as_machine(kind, pq, cq) if kind else (gpi, pq, cq)
    return facts.of(gpus, priced, consumed, text, span)


def _machine_gpus(keys: list[str], fact_of_line: list[int], facts: LineFacts, machines: list, texts: list,
                  periods: list[int]) -> dict[str, int]:
    """Each key's GPU count: the most any of its lines gives (0 where none gives any). A GPU meter
    line (GCP) gives its machine type's in the instance table (``machine_type``, from ``machine_spec``:
    a g2-standard-48 has 4 L4s, however its meters bill them), else the GPU-hours of the key's meter
    SKUs of its billing period together: a machine billed 1 GPU-hour on a Spot SKU and 3 on the
    on-demand one in an hour has 4 GPUs, not the 3 one line gives. Lines of one SKU do not add (the
    most of them counts), so that a row billed twice is GPU time beyond the GPUs (audit/gpu_over.py),
    not GPUs of their own."""
    catalogue = gpu_instances()
    gpus: dict[str, int] = {}
    metered: dict[tuple[str, int], dict[str, Decimal]] = {}
    for key, fact, machine, text, period in zip(keys, fact_of_line, machines, texts, periods):
        kind = catalogue.get(machine) if machine and fact in facts.metered else None
        if fact in facts.metered and kind is None:
            hours, span = facts.metered[fact]
            skus = metered.setdefault((key, period), {})
            skus[text] = max(skus.get(text, ZERO), hours / span if span else ZERO)
            count = 0
        else:
            count = kind.gpus if kind is not None else facts.facts[fact][0]
        gpus[key] = max(gpus.get(key, 0), count)
    for (key, _), skus in metered.items():
        per_hour = sum(skus.values(), ZERO)
        gpus[key] = max(gpus[key], max(1, int(per_hour.to_integral_value())) if per_hour > 0 else 0)
    return gpus


def taken_in_turn(known: tuple[str, ...], instances: int, turn: int) -> list[str]:
    """The nodes a line billing ``instances`` of a resource with nodes ``known`` covers. A line
    billing fewer than all of them (a scale set billed one row per VM, the VM not named) takes the
    next ones in turn, so that each VM's row lands on a node of its own."""
    if instances >= len(known):
        return (list(known) + [""] * instances)[:instances]
    return [known[(turn * instances + i) % len(known)] for i in range(instances)]


def walk_named(engine: str | None = None) -> str:
    """The split's walk: ``engine``, else ``$COSTAUDIT_SPLIT``, else "python"; a name that is neither
    "python" nor an engine of :data:`audit.split_sql.ENGINES` is a ``UsageError`` naming the choices
    (sqlglot and DuckDB are imported only when an engine is named)."""
    name = (engine or os.environ.get("COSTAUDIT_SPLIT", "")).strip() or "python"
    if name == "python":
        return name
    from audit import split_sql

    if name not in split_sql.ENGINES:
        where = f"COSTAUDIT_SPLIT={name!r}" if not engine else f"split engine {name!r}"
        raise UsageError(f"{where}: expected one of python, {', '.join(sorted(split_sql.ENGINES))} "
                         "(how the GPU split walks the lines)")
    return name
