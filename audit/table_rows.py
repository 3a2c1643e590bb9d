"""Telemetry and line tables as Python rows and column lists, built once per column.

The GPU split walks tables of hundreds of thousands of rows; iterating a DataFrame (``itertuples``,
``to_dict``) boxes every value again. These helpers turn each column into a list once (one
Python object per distinct value), and group a table's rows by (node, interval) with one sort.
"""
from __future__ import annotations

from collections import abc, namedtuple
from datetime import datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

#: the types an object column's values keep as they are (what ``to_dict("records")`` leaves alone)
_NATIVE = frozenset({Decimal, str, int, float, bool, type(None), datetime, pd.Timestamp})


def native(value):
    """A numpy scalar as the Python value ``to_dict("records")`` gives for it (numbers and booleans
    as Python's, datetime64 / timedelta64 as pandas' Timestamp / Timedelta, ``pd.NA`` as None);
    anything else as it is."""
    if value is pd.NA:
        return None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.datetime64):
        return pd.Timestamp(value)
    if isinstance(value, np.timedelta64):  # before np.integer: numpy makes it a signed integer
        return pd.Timedelta(value)
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value


def column_values(column: pd.Series) -> list:
    """The values of a column as iterating it gives them (``itertuples``), with an object column's
    numpy scalars and NA boxed as ``to_dict`` does (``native``); Arrow strings through numpy
    (iterating them costs 3 µs a value), one Python object per distinct value (:func:`shared`)."""
    if isinstance(column.dtype, pd.StringDtype):
        return shared(column, lambda uniques: uniques.to_numpy().tolist())
    values = column.tolist()
    if column.dtype == object and not _NATIVE.issuperset(map(type, values)):
        values = [native(v) for v in values]
    return values


def rows_by_node_interval(frame: pd.DataFrame, order: list[np.ndarray]) -> abc.Mapping:
    """(node, ts) -> the rows (:func:`table_rows`) of that node and interval, sorted by the ``order``
    keys (integer ranks, the first compared first), ties in table order: one stable sort of the
    table and slices of its rows, not a Python append and sort per group."""
    if not len(frame):
        return {}
    nodes = pd.factorize(frame["node"], use_na_sentinel=False)[0]
    stamps = pd.factorize(frame["ts"], use_na_sentinel=False)[0]
    perm = np.lexsort([*reversed(order), stamps, nodes])  # the last key is the first compared
    rows = RowsByKey(frame.iloc[perm])
    nodes, stamps = nodes[perm], stamps[perm]
    starts = (np.flatnonzero((np.diff(nodes) != 0) | (np.diff(stamps) != 0)) + 1).tolist()
    for a, b in zip([0, *starts], [*starts, len(frame)]):
        rows.bounds[(rows.node[a], rows.ts[a])] = (a, b)
    return rows


class RowsByKey(abc.Mapping):
    """(node, ts) -> the rows (:func:`table_rows`) of that node and interval, made when asked for
    from the table's column lists: a named tuple per row of a 744,000-row table held at once was
    a third of the split's peak memory, and each key is asked for about once (the holdings of a
    node and interval are worked out once)."""

    def __init__(self, frame: pd.DataFrame):
        self.row, self.columns = _row_type_and_columns(frame)
        self.node, self.ts = self.columns[self.row._fields.index("node")], self.columns[self.row._fields.index("ts")]
        self.bounds: dict[tuple, tuple[int, int]] = {}

    def __getitem__(self, key) -> list:
        a, b = self.bounds[key]
        return list(map(self.row._make, zip(*(column[a:b] for column in self.columns))))

    def __contains__(self, key) -> bool:
        return key in self.bounds

    def __iter__(self):
        return iter(self.bounds)

    def __len__(self) -> int:
        return len(self.bounds)


def ranks(column: pd.Series, key=None) -> np.ndarray:
    """Each row's rank among the column's distinct values ordered by ``key`` (equal keys, equal
    ranks, as a sort by that key sees them); the key is worked out once per distinct value."""
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    keys = [key(v) if key else v for v in uniques]
    rank_of = {k: i for i, k in enumerate(sorted(set(keys)))}
    return np.array([rank_of[k] for k in keys], dtype=np.int64)[codes]


def table_rows(frame: pd.DataFrame):
    """The rows of a telemetry table as ``itertuples`` gives them, but built from column lists, and
    with ``ts`` as the datetime the indices key on (iterating Arrow strings costs 3 µs a value)."""
    if not len(frame):
        return iter(())
    row, columns = _row_type_and_columns(frame)
    return map(row._make, zip(*columns))


def _row_type_and_columns(frame: pd.DataFrame) -> tuple[Any, list[list]]:
    """The named tuple type ``itertuples`` would give the frame's rows, and its columns as lists."""
    row = namedtuple("Pandas", frame.columns, rename=True)  # type: ignore[misc]
    return row, [datetimes_of(frame[c]) if c == "ts" else column_values(frame[c]) for c in frame.columns]


def datetimes_of(column: pd.Series) -> list:
    if pd.api.types.is_datetime64_any_dtype(column):
        return shared(column, lambda uniques: uniques.to_pydatetime().tolist())
    return [value.to_pydatetime() for value in column_values(column)]


def shared(column: pd.Series, convert) -> list:
    """The column's values as a list in which equal values are one object: ``convert`` turns the
    distinct values into Python objects once. A telemetry table repeats each node, pod, model and
    interval start over hundreds of thousands of rows; a string or datetime per row held 0.8 GiB
    in the GPU split of a 1,000-GPU month."""
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    values = np.empty(len(uniques), dtype=object)
    values[:] = convert(uniques)
    return values[codes].tolist()
