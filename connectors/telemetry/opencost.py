"""OpenCost ``/allocation`` API JSON -> ``allocations`` (evidence) and ``gpu_requests``.

An import of what OpenCost computed, never a bill: ``{"code": 200, "data": [{"<name>": {"name",
"properties": {"cluster", "node", "namespace", "pod", ...}, "window": {"start", "end"}, "start",
"end", "gpuHours", "gpuCost", "gpuCostAdjustment", "totalCost", ...}}, ...]}`` — ``data``
holds one set per step of the query (``window=…&step=…``). The path is one file or a folder of
``*.json``.

Tables:

- ``allocations``: name, namespace, pod, node, start, end, gpu_hours, gpu_cost (gpuCost +
  gpuCostAdjustment) and total_cost, both Decimal (parsed from the JSON text, never via float).
- ``gpu_requests``: each allocation with GPU-hours spread evenly over the time it ran — its own
  ``start``..``end`` (the part of its window the pod was up; the ``window`` when those are
  absent) — so gpus = gpuHours / hours of that span, and the GPU-hours are kept exactly. The
  intervals are those of the case's grid (its step, else 60 s). ``__idle__`` and ``__unallocated__`` entries
  hold no pod and make no request rows; they remain in ``allocations``.

In error messages ``row`` is the position of the allocation (from 1, across the file) and
``column`` the JSON field at fault.
"""
from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import ClassVar

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from connectors.base import Connector
from connectors.bounds import nested_too_deep, shown
from connectors.errors import InputError
from connectors.telemetry.grid import DEFAULT_STEP, Grid, utc_ns
from connectors.telemetry.prom_dump import dump_files
from connectors.telemetry.sacct import spread
from connectors.telemetry.tables import empty_table, finish
from schemas.fields import Money
from schemas.usage import GpuRequest

FORM = '{"code": 200, "data": [{"<name>": {"properties": {...}, "start", "end", "gpuHours", ...}}]}'
NOT_PODS = {"__idle__", "__unallocated__"}


class Allocation(pa.DataFrameModel):
    """One OpenCost allocation: who held what, for how long, at OpenCost's price."""

    name: Series[str]
    namespace: Series[str]
    pod: Series[str]
    node: Series[str]
    start: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    end: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    gpu_hours: Series[float] = pa.Field(ge=0)
    gpu_cost: Series[object] = Money()
    total_cost: Series[object] = Money()


def load(path) -> list:
    """The ``data`` list of one response (JSON numbers kept as Decimal)."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, f"not valid JSON ({shown(str(exc))})", expected=FORM) from None
    except RecursionError:
        raise InputError(path, nested_too_deep(), expected=FORM) from None
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise InputError(path, "no 'data' list", column="data", expected=FORM)
    if body.get("code", 200) != 200:
        raise InputError(path, f"API answered code {shown(body.get('code'))}: {shown(body.get('message', ''))}",
                         column="code", expected="200")
    return body["data"]


def decimal(entry: dict, key: str, path, row: int) -> Decimal:
    """A money field as Decimal (absent = 0)."""
    value = entry.get(key, 0)
    try:
        out = Decimal(str(value))
    except InvalidOperation:
        out = Decimal("NaN")
    if not out.is_finite() or abs(out) >= LIMIT or isinstance(value, bool):
        raise InputError(path, f"{key} {shown(value)} is not a number", row=row, column=key,
                         expected="a number less than 10^18 in magnitude")
    return out


LIMIT = Decimal(10) ** 18
"""Amounts and hours are read up to what the audit sums exactly (DECIMAL(38, 20), as billing)."""


def when(entry: dict, key: str, path, row: int) -> pd.Timestamp:
    """The allocation's ``start`` / ``end`` (falling back to its window's) as UTC."""
    window = entry.get("window") or {}
    text = entry.get(key) or (window.get(key) if isinstance(window, dict) else None)
    try:
        stamp = pd.Timestamp(text)
    except (TypeError, ValueError):
        stamp = None
    if stamp is None or stamp is pd.NaT:
        raise InputError(path, f"{key} {shown(text)} is not a time", row=row, column=key,
                         expected="an RFC 3339 time")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def record(key: str, entry, path, row: int) -> dict:
    """One allocation as a row of ``allocations``."""
    if not isinstance(entry, dict):
        raise InputError(path, f"allocation {shown(key)} is not an object", row=row, expected=FORM)
    props = entry.get("properties") or {}
    if not isinstance(props, dict):
        raise InputError(path, f"allocation {shown(key)}: properties is {shown(props)}", row=row,
                         column="properties", expected="an object")
    start, end = when(entry, "start", path, row), when(entry, "end", path, row)
    if end < start:
        raise InputError(path, "end is before start", row=row, column="end",
                         expected="end >= start")
    hours = float(decimal(entry, "gpuHours", path, row))
    if hours < 0:
        raise InputError(path, f"gpuHours {hours} is negative", row=row, column="gpuHours",
                         expected=">= 0")
    return {"name": str(entry.get("name", key)), "namespace": str(props.get("namespace", "")),
            "pod": str(props.get("pod", "")), "node": str(props.get("node", "")),
            "start": start, "end": end, "gpu_hours": hours,
            "gpu_cost": decimal(entry, "gpuCost", path, row)
            + decimal(entry, "gpuCostAdjustment", path, row),
            "total_cost": decimal(entry, "totalCost", path, row)}


def read_allocations(paths) -> pd.DataFrame:
    """Every allocation of every step set of every file."""
    rows = []
    for path in paths:
        row = 0
        for step_set in load(path):
            if not isinstance(step_set, dict):
                raise InputError(path, "data entry is not an object", row=row + 1, column="data",
                                 expected=FORM)
            for key, entry in step_set.items():
                row += 1
                rows.append(record(key, entry, path, row))
    columns = list(Allocation.to_schema().columns)
    frame = pd.DataFrame.from_records(rows, columns=columns)
    for column in ("start", "end"):
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[ns, UTC]")
    return frame.astype({c: "str" for c in ("name", "namespace", "pod", "node")})


def requests(allocations: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """GPUs per interval: each allocation's GPU-hours spread evenly over its span."""
    held = allocations.loc[(allocations["gpu_hours"] > 0) & ~allocations["name"].isin(NOT_PODS)
                           & (allocations["end"] > allocations["start"])]
    if held.empty:
        return empty_table("gpu_requests")
    start_ns = held["start"].astype("int64").to_numpy()
    end_ns = held["end"].astype("int64").to_numpy()
    spans = pd.DataFrame({"namespace": held["namespace"].to_numpy(),
                          "pod": held["pod"].to_numpy(), "node": held["node"].to_numpy(),
                          "gpus": held["gpu_hours"].to_numpy() * 3600e9 / (end_ns - start_ns),
                          "start_ns": start_ns, "end_ns": end_ns})
    out = spread(spans, grid)
    out = out.groupby(["k", "ts", "namespace", "pod", "node"], as_index=False)["gpus"].sum()
    out["mig_profile"] = ""  # OpenCost's gpuHours: whole GPUs, no MIG profile
    return finish("gpu_requests", out.sort_values(["ts", "namespace", "pod", "node"]))


class OpenCostConnector(Connector):
    """Imports OpenCost ``/allocation`` responses (a file or a folder of them)."""

    format_name: ClassVar[str] = "opencost"
    kind: ClassVar[str] = "telemetry"
    schemas: ClassVar[dict] = {"allocations": Allocation, "gpu_requests": GpuRequest}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Read the allocations, then spread their GPU-hours over the window grid."""
        allocations = read_allocations(dump_files(self.path))
        if allocations.empty:
            raise InputError(self.path, "no allocations", expected=FORM)
        start_ns, end_ns = utc_ns(self.ctx.start), utc_ns(self.ctx.end)
        if end_ns <= start_ns:
            raise InputError(self.path, "the case window is empty", expected="start < end")
        grid = Grid(start_ns, end_ns, int(self.ctx.step_seconds or DEFAULT_STEP))
        tables = {"allocations": allocations.reset_index(drop=True),
                  "gpu_requests": requests(allocations, grid)}
        self.extent = (allocations["start"].min().to_pydatetime(), allocations["end"].max().to_pydatetime())
        window_start, window_end = pd.Timestamp(start_ns, tz="UTC"), pd.Timestamp(end_ns, tz="UTC")
        if not ((allocations["end"] > window_start) & (allocations["start"] < window_end)).any():
            return tables, len(allocations), (None, None)  # none in the window: named (audit/fit_window.py)
        first = max(allocations["start"].min(), window_start)
        last = min(allocations["end"].max(), window_end)
        return tables, len(allocations), (first.to_pydatetime(), last.to_pydatetime())
