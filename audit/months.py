"""A window's calendar months as sub-windows of one reading of the sources (METHOD §10).

:func:`calendar_months` cuts [start, end) at the first of each month (UTC); :func:`narrowed` keeps,
of what collection read for the whole window, what falls in one month: the billing lines of its
period and the telemetry rows of its intervals. A line whose charge period crosses a month boundary
(the billing readers join a run of identical hourly GPU charges into one line) is cut at the
boundary, its costs and quantities pro rata of its time in each month, so that the months partition
what was read exactly (the first month keeps what of a line lies before the window, the last what
lies after it, as the whole audit does). Profiles stay whole (a profile is representative traffic,
not a period).
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from decimal import Decimal

import pandas as pd

from audit.collected import Collected

#: the time column of the telemetry tables that are cut
TIME_COLUMNS = ("ts", "first_ts")
#: a billing line's columns that add up over its period (cut pro rata of time)
SUMMED = ("billed_cost", "effective_cost", "list_cost", "contracted_cost", "pricing_quantity", "consumed_quantity")


def calendar_months(start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """The calendar months [start, end) touches, each clipped to the window."""
    out = []
    lo = start
    while lo < end:
        first = lo.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(month=first.month + 1)
        hi = min(nxt, end)
        out.append((lo, hi))
        lo = hi
    return out


def narrowed(collected: Collected, start: datetime, end: datetime, first: bool, last: bool) -> Collected:
    """What of ``collected`` falls in [start, end); ``first`` / ``last``: the window's first / last month,
    which also keep the rows before / after it (so that the months partition what was read)."""
    frames = []
    for frame in collected.frames:
        if frame.spec.kind == "billing":
            tables = {name: _lines(table, start, end, first, last) if name == "lines" else table
                      for name, table in frame.tables.items()}
        elif frame.spec.kind == "telemetry":
            tables = {name: _cut(table, start, end, first, last) for name, table in frame.tables.items()}
        else:
            tables = dict(frame.tables)
        frames.append(replace(frame, tables=tables))
    return Collected(tuple(frames), collected.missing)


def _lines(table: pd.DataFrame, start: datetime, end: datetime, first: bool, last: bool) -> pd.DataFrame:
    """The billing lines' pieces in [start, end): each line's period clipped to the month (not at the
    window's edges), its summed columns × the share of its period the piece covers."""
    if table.empty or "start" not in table.columns:
        return table
    lo, hi = table["start"], table["end"]
    a = lo if first else lo.clip(lower=pd.Timestamp(start))
    b = hi if last else hi.clip(upper=pd.Timestamp(end))
    instant = lo >= hi
    held = instant & (first | (lo >= pd.Timestamp(start))) & (last | (lo < pd.Timestamp(end)))
    keep = (~instant & (a < b)) | held
    out = table[keep].copy()
    for idx in out.index[(~instant[keep]) & ((a[keep] != lo[keep]) | (b[keep] != hi[keep]))]:
        span = Decimal(int((hi[idx] - lo[idx]).value))
        n0, n1 = Decimal(int((a[idx] - lo[idx]).value)), Decimal(int((b[idx] - lo[idx]).value))
        for column in SUMMED:
            value = out.at[idx, column] if column in out.columns else None
            if value is not None and not (isinstance(value, float) and value != value):
                # the share of [lo, b) less the share of [lo, a): the months' pieces telescope to the line
                out.at[idx, column] = value * n1 / span - value * n0 / span
        out.at[idx, "start"], out.at[idx, "end"] = a[idx], b[idx]
    return out


def _cut(table: pd.DataFrame, start: datetime, end: datetime, first: bool, last: bool) -> pd.DataFrame:
    column = next((c for c in TIME_COLUMNS if c in table.columns), None)
    if column is None or table.empty:
        return table
    moments = pd.to_datetime(table[column], utc=True)
    keep = pd.Series(True, index=table.index)
    if not first:
        keep &= moments >= pd.Timestamp(start)
    if not last:
        keep &= moments < pd.Timestamp(end)
    if first:
        keep |= moments.isna()  # a row with no time (an undated count) stays in the first month
    return table[keep]
