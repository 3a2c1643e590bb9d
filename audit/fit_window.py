"""Whether the billing and the telemetry cover the case's window, day by day.

A bill exported on the 20th and audited for the month gives the 1st–20th as the month's figures:
every figure is right for what was billed and wrong for the window, and nothing in the case matches
nothing. :func:`window_fit` names the days of the window on which no billing source has a usage line
(``window_not_billed``, a warning), with the span the usage does cover.

Only usage lines of a day or less count (hourly and daily lines, as every provider writes usage; a
run of hourly lines the reader joined into one counts for the days it spans, a day or less per line
it joins): a monthly fee or a month-long line says nothing of which days were exported. Without any such line the
check says nothing. A window whose whole calendar month has no line at all is an error of the
pipeline's month audit (audit/pipeline.py ``months_without_billing``).

:func:`telemetry_days_fit` names the days on which GPU time is billed but no GPU of any node has an
activity sample (``telemetry_gap``, a warning): telemetry exported for part of the month leaves the
rest of the GPU time unmeasured, which the unattributed bucket says interval by interval; the warning
says where, at once. One node's missing day is not such a day (the coverage section reports it).
"""
from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from audit.case import Case
from audit.misfit import Misfit
from audit.normalised import Telemetry

DAY_NS = 86_400 * 10 ** 9
#: the spans listed in the message
LISTED_SPANS = 4


def window_fit(case: Case, lines: pd.DataFrame) -> list[Misfit]:
    """A ``window_not_billed`` warning naming the days of the window no usage line falls on."""
    covered = billed_days(case, lines)
    if covered is None or covered.all() or not covered.any():
        return []  # every day billed, or no usage line of a day in the window to tell days by
    missing = int((~covered).sum())
    listed, usage = _days_text(case, ~covered), _extent_text(case, covered)
    message = (f"no billing source has a usage line on {missing} of the window's {len(covered)} day(s): {listed}. "
               f"The figures are those of the days billed ({usage}), not of the whole window "
               f"{case.start:%Y-%m-%d} – {case.end:%Y-%m-%d}; an export that covers the window, or a window "
               f"inside {usage}, fits")
    return [Misfit("window_not_billed", "[case] window", message, (usage,))]


def telemetry_days_fit(case: Case, gpu_lines: pd.DataFrame, tele: Telemetry) -> list[Misfit]:
    """A ``telemetry_gap`` warning naming the days GPU time is billed with no GPU activity sample at all."""
    billed = billed_days(case, gpu_lines)
    if billed is None or not billed.any():
        return []
    if not len(tele.activity):
        return _no_activity(case, billed)
    sampled = sampled_days(case, tele.activity["ts"], len(billed), tele.step)
    gap = billed & ~sampled
    if not gap.any() or not sampled.any():
        return []  # no GPU sample in the window at all: the nodes' misfits say so
    listed, covers = _days_text(case, gap), _extent_text(case, sampled)
    message = (f"GPU time is billed on {int(gap.sum())} day(s) on which no GPU has an activity sample: {listed}. "
               f"That GPU time is unmeasured (unattributed: GPU-intervals without a sample); telemetry samples "
               f"GPUs within {covers}")
    return [Misfit("telemetry_gap", "telemetry", message, (covers,))]


def _no_activity(case: Case, billed: np.ndarray) -> list[Misfit]:
    """A ``telemetry_gap`` warning where the case reads telemetry and none of it holds a GPU activity
    sample in the window (a DCGM export for another month beside this month's kube-state-metrics):
    every billed GPU-hour is then unmeasured, and no node misfit says so, the nodes being known."""
    sources = [s.name for s in case.sources if s.kind == "telemetry"]
    if not sources:
        return []  # a billing-only case: the coverage says that nothing measures the GPUs
    message = (f"GPU time is billed on {int(billed.sum())} day(s) of the window, and no telemetry source "
               f"({', '.join(sources)}) has a GPU activity sample in it (DCGM_FI_PROF_GR_ENGINE_ACTIVE, "
               "DCGM_FI_DEV_GPU_UTIL or NVML utilisation): every GPU-hour is unmeasured (unattributed: "
               "GPU-intervals without a sample)")
    return [Misfit("telemetry_gap", "telemetry", message, ())]


def telemetry_window_fit(case: Case, tele: Telemetry) -> list[Misfit]:
    """A ``telemetry_outside_window`` warning per telemetry source whose samples all lie outside the
    window: every one of its GPU-intervals is unmeasured, and without this the only word was that
    telemetry names no pod of a service. Where the reader knows them, the samples' first and last
    times are named, and a window inside them."""
    found = []
    for name, rows, first, last in tele.outside_window:
        window = f"{case.start:%Y-%m-%d} – {case.end:%Y-%m-%d}"
        if first is None or last is None:
            message = (f"telemetry source {name} holds {rows:,} sample(s), none timed inside the window {window} "
                       f"(a scrape without timestamps has no time): nothing it holds is measured in the window")
            found.append(Misfit("telemetry_outside_window", f"telemetry source {name}", message, ()))
            continue
        span = f"{first:%Y-%m-%d %H:%M} – {last:%Y-%m-%d %H:%M} UTC"
        message = (f"telemetry source {name} holds {rows:,} sample(s), none in the window {window}: they run from "
                   f"{first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC. Nothing it holds is measured in the window "
                   f"(its GPU time is unattributed); telemetry exported for the window, or a window inside "
                   f"{first:%Y-%m-%d} – {last:%Y-%m-%d}, fits")
        found.append(Misfit("telemetry_outside_window", f"telemetry source {name}", message, (span,)))
    return found


def sampled_days(case: Case, ts: pd.Series, days: int, step: int = 0) -> np.ndarray:
    """Per UTC day of the window, whether any GPU activity row's interval (``ts`` to ``ts`` +
    ``step`` seconds) falls on it: a step of a week samples each day of the week, not its first."""
    lo = pd.Timestamp(case.start).floor("D").value
    starts = np.unique(pd.DatetimeIndex(ts).as_unit("ns").asi8)
    first = (starts - lo) // DAY_NS
    last = (starts + max(int(step), 1) * 10 ** 9 - 1 - lo) // DAY_NS  # the interval's last nanosecond
    out = np.zeros(days + 1, dtype=np.int64)  # +1 at each interval's first day, -1 after its last
    np.add.at(out, np.clip(first, 0, days), 1)
    np.add.at(out, np.clip(last + 1, 0, days), -1)
    return np.cumsum(out)[:days] > 0


def billed_days(case: Case, lines: pd.DataFrame) -> np.ndarray | None:
    """Per UTC day the window touches, whether a usage line of a day or less (per line it joins,
    ``line_count``) overlaps it; None when no such line was read (nothing to tell the days apart by)."""
    needed = {"start", "end", "charge_category"}
    if not len(lines) or not needed <= set(lines.columns):
        return None
    start, end, usage = _usage_lines(lines)
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


def _usage_lines(lines: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, whether each line is a usage line of a day or less per line it joins), in ns."""
    start = pd.DatetimeIndex(lines["start"]).as_unit("ns").asi8
    end = pd.DatetimeIndex(lines["end"]).as_unit("ns").asi8
    count = lines["line_count"].to_numpy(dtype=np.int64) if "line_count" in lines.columns else np.ones(len(lines), np.int64)
    # a run of hourly lines the reader joined into one keeps its line count: a day or less per line
    usage = ((lines["charge_category"] == "Usage").to_numpy(dtype=bool) & (end >= start)
             & (end - start <= DAY_NS * np.maximum(count, 1)))
    return start, end, usage


def usage_span(lines: pd.DataFrame) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """The first start and last end of the usage lines :func:`billed_days` tells days by (UTC), None
    without any: ``costaudit init`` proposes their whole days, so that this check finds every day billed."""
    if not len(lines) or not {"start", "end", "charge_category"} <= set(lines.columns):
        return None
    start, end, usage = _usage_lines(lines)
    if not usage.any():
        return None
    return pd.Timestamp(int(start[usage].min()), tz="UTC"), pd.Timestamp(int(end[usage].max()), tz="UTC")


def _span_text(case: Case, first: int, last: int) -> str:
    """Days ``first``..``last`` of the window (from its first UTC day) as "YYYY-MM-DD – YYYY-MM-DD", end exclusive."""
    day0 = pd.Timestamp(case.start).floor("D")
    return f"{day0 + timedelta(days=first):%Y-%m-%d} – {day0 + timedelta(days=last + 1):%Y-%m-%d}"


def _days_text(case: Case, flags: np.ndarray) -> str:
    """The runs of flagged days, the first :data:`LISTED_SPANS` of them, and how many more."""
    spans = _spans(flags)
    listed = ", ".join(_span_text(case, a, b) for a, b in spans[:LISTED_SPANS])
    return listed + (f" and {len(spans) - LISTED_SPANS} more span(s)" if len(spans) > LISTED_SPANS else "")


def _extent_text(case: Case, flags: np.ndarray) -> str:
    """From the first flagged day to the end of the last one."""
    spans = _spans(flags)
    return _span_text(case, spans[0][0], spans[-1][1])


def _spans(flags: np.ndarray) -> list[tuple[int, int]]:
    """The runs of True in ``flags`` as (first, last) indices."""
    edges = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist()))
