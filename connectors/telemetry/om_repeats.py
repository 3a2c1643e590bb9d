"""Repeated samples: two samples of one series (metric name and label set) at one timestamp.

OpenMetrics allows one sample per series and timestamp (Prometheus refuses a second one:
"duplicate sample for timestamp"). A repeat with the same value changes nothing once dropped: it
is dropped and counted in ``excluded_samples`` (reason ``REPEATED``, the example naming the file
and row of the first repeat and of the sample it repeats), as a NaN sample is. A repeat with
another value leaves no way to tell which one the exporter meant: an ``InputError`` naming the
file, the row, the series and both values.

The stream reader (``om_stream``) keeps no row per sample: it checks that each series' timestamps
increase (``Ascending``: the latest timestamp per series, a block at a time); a series whose
timestamp does not (a repeat, or samples out of order) raises ``Repeated`` and the file is read
again line by line, every sample's row kept, and ``drop_repeats`` finds the repeats exactly.
"""
from __future__ import annotations

from array import array

import numpy as np
import pandas as pd

from connectors.errors import InputError
from connectors.telemetry.families import Family
from connectors.telemetry.validity import EXCLUDED_COLUMNS, finish_table, no_exclusions, shown_value

REPEATED = "repeated sample (same series, timestamp and value)"
ONE_SAMPLE = "one sample per series and timestamp"


class Repeated(Exception):
    """A series' timestamp did not increase: the file is read again, every sample's row kept."""


class Ascending:
    """Per family and series, the latest timestamp so far; ``check`` raises ``Repeated`` when a
    series' timestamps do not increase (samples without a timestamp are not checked)."""

    def __init__(self):
        self.last: dict[int, np.ndarray] = {}

    def check(self, key: int, sid: np.ndarray, t: np.ndarray) -> None:
        """Samples of family ``key`` in file order."""
        if np.isnan(t).any():
            timed = ~np.isnan(t)
            sid, t = sid[timed], t[timed]
        if not len(sid):
            return
        last = self._room(key, int(sid.max()) + 1)
        if (sid[1:] >= sid[:-1]).all():  # a file written series by series: no sort
            s, u = sid, t
        else:
            order = np.argsort(sid, kind="stable")
            s, u = sid[order], t[order]
        head = np.ones(len(s), dtype=bool)
        head[1:] = s[1:] != s[:-1]
        before = np.empty_like(u)
        before[1:] = u[:-1]
        before[head] = last[s[head]]
        if (u <= before).any():
            raise Repeated
        tail = np.append(head[1:], True)
        last[s[tail]] = u[tail]

    def _room(self, key: int, size: int) -> np.ndarray:
        """The family's latest times, room for ``size`` series (a new one starts at -inf)."""
        last = self.last.get(key, np.zeros(0))
        if len(last) < size:
            last = np.r_[last, np.full(max(size, 2 * len(last)) - len(last), -np.inf)]
            self.last[key] = last
        return last


def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether two samples' values are the same (NaN the same as NaN)."""
    return (a == b) | (np.isnan(a) & np.isnan(b))


def drop_repeats(families: list[Family]) -> pd.DataFrame:
    """Drop every repeated sample with the same value from the families (each read with its rows:
    ``Family.at``) and return their ``excluded_samples`` rows; a repeat with another value is an
    InputError (the first in the file)."""
    parts = [_repeats(family) for family in families
             if family.at is not None and len(family.at[1]) == len(family.sid)]
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else no_exclusions()


def _repeats(family: Family) -> pd.DataFrame:
    """One family's repeats dropped, as ``excluded_samples`` rows."""
    sid, t, v = (np.frombuffer(a, dtype=d) if len(a) else np.zeros(0, d) for a, d in
                 ((family.sid, np.int64), (family.t, float), (family.v, float)))
    timed = np.flatnonzero(~np.isnan(t))
    order = timed[np.lexsort((t[timed], sid[timed]))]  # stable: file order among equals
    same = (sid[order][1:] == sid[order][:-1]) & (t[order][1:] == t[order][:-1])
    if not same.any():
        return no_exclusions()
    later, earlier = order[1:][same], order[:-1][same]
    differ = ~same_values(v[later], v[earlier])
    if differ.any():
        first = int(np.argmin(np.where(differ, later, np.iinfo(np.int64).max)))
        raise _conflict(family, int(earlier[first]), int(later[first]))
    table = _excluded(family, later, earlier)
    keep = np.ones(len(sid), dtype=bool)
    keep[later] = False
    for name, code in (("sid", "q"), ("t", "d"), ("v", "d")):
        kept = np.frombuffer(getattr(family, name), dtype=np.int64 if code == "q" else float)[keep]
        setattr(family, name, array(code, kept.tobytes()))
    at = family.at
    assert at is not None  # repeats are found on a reading that keeps rows
    family.at = [at[0], array("q", np.frombuffer(at[1], np.int64)[keep].tobytes()),
                 array("q", np.frombuffer(at[2], np.int64)[keep].tobytes())]
    return table


def _series(family: Family) -> dict[int, tuple[str, str]]:
    """Series id -> (metric name, label text) of a family's kept series."""
    return {sid: (name, raw or "") for (name, raw), sid in family.index.items() if sid >= 0}


def _where(family: Family, i: int) -> tuple[str, int]:
    """(file, row) of a family's sample ``i``."""
    assert family.at is not None
    files, file_of, rows = family.at
    return files[file_of[i]], rows[i]


def _conflict(family: Family, earlier: int, later: int) -> InputError:
    """Two samples of one series at one timestamp with different values."""
    name, raw = _series(family)[family.sid[later]]
    path, row = _where(family, later)
    first_path, first_row = _where(family, earlier)
    there = "" if first_path == path else f" of {first_path}"
    return InputError(path, f"series {name}{raw} has two samples at timestamp {family.t[later]!r}: "
                      f"{shown_value(family.v[earlier])} (row {first_row}{there}) and "
                      f"{shown_value(family.v[later])} (row {row})", row=row, expected=ONE_SAMPLE)


def _excluded(family: Family, later: np.ndarray, earlier: np.ndarray) -> pd.DataFrame:
    """Per metric: how many repeats, and the first in the file as the example (its value, file,
    row and the row it repeats)."""
    series = _series(family)
    metric = np.array([series[family.sid[i]][0] for i in later], dtype=object)
    frame = pd.DataFrame({"metric": metric, "i": later, "first": earlier}).sort_values("i", kind="stable")
    out = frame.groupby("metric", sort=True).agg(count=("i", "size"), i=("i", "first"),
                                                  first=("first", "first")).reset_index()
    out["reason"], out["expected"] = REPEATED, ONE_SAMPLE
    out["example"] = [_example(family, int(i), int(f)) for i, f in zip(out["i"], out["first"])]
    micros = np.rint(np.array([family.t[int(i)] for i in out["i"]]) * 1e6).astype(np.int64)
    out["first_ts"] = pd.to_datetime(micros * 1000, utc=True)
    return finish_table(out, EXCLUDED_COLUMNS)


def _example(family: Family, i: int, first: int) -> str:
    """``0.5 (metrics.om row 12, a repeat of row 11)``."""
    path, row = _where(family, i)
    first_path, first_row = _where(family, first)
    there = "" if first_path == path else f" of {first_path}"
    return f"{shown_value(family.v[i])} ({path} row {row}, a repeat of row {first_row}{there})"
