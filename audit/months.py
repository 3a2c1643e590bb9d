"""A window's calendar months as sub-windows of one reading of the sources (METHOD §10).

:func:`calendar_months` cuts [start, end) at the first of each month (UTC); :func:`narrowed` keeps,
of what collection read for the whole window, what falls in one month: the billing lines whose charge
period starts in it (lines are not prorated: a line that crosses a month boundary counts in the month
it starts, and a line that started before the window counts in the first month) and the telemetry
rows of its intervals. Profiles stay whole (a profile is representative traffic, not a period).
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pandas as pd

from audit.collected import Collected

#: the time column of the tables that are cut, per kind of source
TIME_COLUMNS = {"billing": ("start",), "telemetry": ("ts", "first_ts")}


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
        columns = TIME_COLUMNS.get(frame.spec.kind, ())
        tables = {name: _cut(table, columns, start, end, first, last) for name, table in frame.tables.items()}
        frames.append(replace(frame, tables=tables))
    return Collected(tuple(frames), collected.missing)


def _cut(table: pd.DataFrame, columns, start: datetime, end: datetime, first: bool, last: bool) -> pd.DataFrame:
    column = next((c for c in columns if c in table.columns), None)
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
