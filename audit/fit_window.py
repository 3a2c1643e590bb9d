"""Whether the billing covers the case's window: days of the window with no usage line at all.

A bill exported on the 20th and audited for the month gives the 1st–20th as the month's figures:
every figure is right for what was billed and wrong for the window, and nothing in the case matches
nothing. :func:`window_fit` names the days of the window on which no billing source has a usage line
(``window_not_billed``, a warning), with the span the usage does cover.

Only usage lines of a day or less count (hourly and daily lines, as every provider writes usage): a
monthly fee or a month-long line says nothing of which days were exported. Without any such line the
check says nothing. A window whose whole calendar month has no line at all is an error of the
pipeline's month audit (audit/pipeline.py ``months_without_billing``).
"""
from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from audit.case import Case
from audit.misfit import Misfit

DAY_NS = 86_400 * 10 ** 9
#: the spans listed in the message
LISTED_SPANS = 4


def window_fit(case: Case, lines: pd.DataFrame) -> list[Misfit]:
    """A ``window_not_billed`` warning naming the days of the window no usage line falls on."""
    covered = billed_days(case, lines)
    if covered is None or covered.all():
        return []
    spans = _spans(~covered)
    day0 = pd.Timestamp(case.start).floor("D")
    def when(first: int, last: int) -> str:
        return f"{day0 + timedelta(days=first):%Y-%m-%d} – {day0 + timedelta(days=last + 1):%Y-%m-%d}"
    missing = int((~covered).sum())
    listed = ", ".join(when(a, b) for a, b in spans[:LISTED_SPANS])
    more = f" and {len(spans) - LISTED_SPANS} more span(s)" if len(spans) > LISTED_SPANS else ""
    billed = _spans(covered)
    usage = when(billed[0][0], billed[-1][1])
    message = (f"no billing source has a usage line on {missing} of the window's {len(covered)} day(s): {listed}{more}. "
               f"The figures are those of the days billed ({usage}), not of the whole window "
               f"{case.start:%Y-%m-%d} – {case.end:%Y-%m-%d}; an export that covers the window, or a window "
               f"inside {usage}, fits")
    return [Misfit("window_not_billed", "[case] window", message, (usage,))]


def billed_days(case: Case, lines: pd.DataFrame) -> np.ndarray | None:
    """Per UTC day the window touches, whether a usage line of a day or less overlaps it; None when
    no such line was read (nothing to tell the days apart by)."""
    needed = {"start", "end", "charge_category"}
    if not len(lines) or not needed <= set(lines.columns):
        return None
    start = pd.DatetimeIndex(lines["start"]).as_unit("ns").asi8
    end = pd.DatetimeIndex(lines["end"]).as_unit("ns").asi8
    usage = (lines["charge_category"] == "Usage").to_numpy(dtype=bool) & (end - start <= DAY_NS) & (end >= start)
    if not usage.any():
        return None
    lo = pd.Timestamp(case.start).floor("D").value
    days = -(-(pd.Timestamp(case.end).value - lo) // DAY_NS)
    first = (start[usage] - lo) // DAY_NS
    last = (np.maximum(end[usage] - 1, start[usage]) - lo) // DAY_NS  # the day holding its last instant
    inside = (last >= 0) & (first < days)
    first, last = np.clip(first[inside], 0, days - 1), np.clip(last[inside], 0, days - 1)
    marks = np.zeros(days + 1, dtype=np.int64)
    np.add.at(marks, first, 1)
    np.add.at(marks, last + 1, -1)
    return np.cumsum(marks)[:days] > 0


def _spans(flags: np.ndarray) -> list[tuple[int, int]]:
    """The runs of True in ``flags`` as (first, last) indices."""
    edges = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist()))
