"""The times and names of one chunk of trace events: timestamps and durations as float64 columns,
and the events left out of the trace because their duration is negative or absent, their timestamp
is before 0 or they have no name (counted by kind, never read as zero-duration work). connectors/profiles/columns.py calls these.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import NoReturn

import numpy as np

from connectors.bounds import shown
from connectors.errors import InputError

# The largest trace time read (microseconds, either sign): 2^53, where float64 stops holding every
# whole microsecond (about 285 years; an epoch timestamp of today is 1.8e15). A larger ts or dur is
# not a time a profiler wrote, and would carry an absurd duration into every figure after it.
MAX_US = float(2 ** 53)


def time_column(path: Path, first: int, keep: np.ndarray, events: list, values: tuple, field: str) -> np.ndarray:
    """``ts`` or ``dur`` as float64 us; a missing (absent or null) dur is NaN, for the caller to
    exclude and count (never read as zero). A value that is not a number, not finite or beyond
    :data:`MAX_US` is named (its event, row and field)."""
    try:
        column = np.fromiter(values, dtype=np.float64, count=len(values))
    except (TypeError, ValueError):
        _raise_bad_time(path, first, keep.tolist(), [events[i] for i in keep.tolist()], field)
    # a JSON true or false reads as 1.0 or 0.0: only those values are looked at for one
    ones = np.flatnonzero((column == 1.0) | (column == 0.0)).tolist()
    if ones and any(values[i].__class__ is bool for i in ones):
        _raise_bad_time(path, first, keep.tolist(), [events[i] for i in keep.tolist()], field)
    finite = np.isfinite(column) & (np.abs(column) <= MAX_US)
    if field == "dur" and not finite.all():
        finite |= np.isnan(column) & np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    if not finite.all():
        _raise_bad_time(path, first, keep.tolist(), [events[i] for i in keep.tolist()], field)
    return column


def _raise_bad_time(path: Path, first: int, keep, kept: list, field: str) -> NoReturn:
    """Name the first event whose ``field`` is not a finite number of microseconds."""
    for position, event in zip(keep, kept):
        value = getattr(event, field)
        if field == "dur" and value is None:
            continue
        try:
            number = None if value.__class__ is bool else float(value)
        except (TypeError, ValueError):
            number = None
        if number is None or not math.isfinite(number) or abs(number) > MAX_US:
            index = first + position
            raise InputError(path, f"traceEvents[{index}] ({shown(event.cat, 40)} {shown(str(event.name), 60)}): "
                             f"{field} is {shown(value)}", row=index + 1, column=field,
                             expected="a finite number of microseconds, at most 2^53 either side of 0")
    raise AssertionError("no bad time found")


def left_out(intern, first: int, at: np.ndarray, start: np.ndarray, dur: np.ndarray, names: tuple) -> np.ndarray | None:
    """Per kept event: whether it is left out (a negative duration, none (NaN here), a timestamp
    before 0, or no name), counted by kind in ``intern``; None when none is. A profiler writes
    times from the epoch or from its base time, never before 0: one event there would stretch its
    device's window, and the idle in it, by the whole distance."""
    negative, missing, early = dur < 0, np.isnan(dur), start < 0
    nameless = names.count(None) + names.count("")
    if not (nameless or negative.any() or missing.any() or early.any()):
        return None
    early &= ~(negative | missing)
    unnamed = np.fromiter((n is None or n == "" for n in names), dtype=bool, count=len(names)) if nameless \
        else np.zeros(dur.size, dtype=bool)
    unnamed &= ~(negative | missing | early)
    return count_left_out(intern, first, at, {"negative_dur": negative, "missing_dur": missing,
                                               "negative_ts": early, "no_name": unnamed})


def count_left_out(intern, first: int, at: np.ndarray, masks: dict[str, np.ndarray]) -> np.ndarray:
    """Count each kind's events in ``intern`` (with the traceEvents row of the first); the union."""
    out = np.zeros(at.size, dtype=bool)
    for kind, mask in masks.items():
        hits = np.flatnonzero(mask)
        if hits.size:
            intern.excluded[kind] += int(hits.size)
            intern.excluded_at.setdefault(kind, ("traceEvents", first + int(at[hits[0]]) + 1))
        out |= mask
    return out
