"""Per-sample label columns handled by their distinct values, never one Python call per sample.

The OpenMetrics reader hands its tables per-sample label columns as pandas Categoricals (codes
into a sorted vocabulary shared by every family with that column, ``""`` included: see
``om_stream.family_frames``), so that grouping, sorting, de-duplicating and merging run on integer
codes in the order the strings have. The other readers hand plain string columns; both kinds go
through the same table code. Two helpers keep it that way:

- ``by_values``: a function of one or more label values, evaluated once per distinct combination
  and spread back to the rows (a metric's valid range, a counter's report name, a unit scale);
- ``plain``: an aggregated frame or series with its categorical columns (or index levels) turned
  into plain strings, before the small per-interval code that pivots, fills and concatenates.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd


def by_values(func: Callable, *columns) -> np.ndarray:
    """``[func(*row) for row in zip(*columns)]`` as an object array, with ``func`` called once
    per distinct combination of values."""
    n = len(columns[0])
    if n == 0:
        return np.empty(0, dtype=object)
    codes, uniques = [], []
    for column in columns:
        if not isinstance(column, (pd.Series, pd.Categorical, pd.Index)):
            column = np.asarray(column, dtype=object)
        code, unique = pd.factorize(column, use_na_sentinel=False)
        codes.append(np.asarray(code, dtype=np.int64))
        uniques.append(list(unique))
    combined = codes[0]
    for code, unique in zip(codes[1:], uniques[1:]):
        # renumbered densely (< n) after each column, so the product never overflows int64
        combined = pd.factorize(combined * max(len(unique), 1) + code)[0].astype(np.int64)
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    values = np.empty(len(first), dtype=object)
    values[:] = [func(*(u[c[i]] for u, c in zip(uniques, codes))) for i in first]
    return values[inverse.reshape(-1)]


def plain(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its categorical columns as plain strings (NaN stays missing)."""
    categorical = [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)]
    if not categorical:
        return frame
    return frame.astype({c: "str" for c in categorical})


def plain_index(series: pd.Series) -> pd.Series:
    """An aggregated series with categorical index levels turned into plain strings."""
    names = list(series.index.names)
    if not any(isinstance(level.dtype, pd.CategoricalDtype) for level in
               (series.index.levels if isinstance(series.index, pd.MultiIndex)
                else [series.index])):
        return series
    name = series.name if series.name is not None else "_value"
    flat = plain(series.rename(name).reset_index())
    return flat.set_index(names)[name].rename(series.name)
