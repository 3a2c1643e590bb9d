"""Parquet inputs for the fuzz suite: a seed table's columns, each stored as a random Arrow type
(text, float with NaN and infinities, 64-bit integers, DECIMAL(38, 10), booleans, timestamps, maps,
all-null), some cells hostile."""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from tests.fuzz.harness import nasty

KINDS = ("string", "string", "string", "float", "int", "decimal", "bool", "timestamp", "map", "null")


def _text(draw, seed: str) -> str | None:
    choice = draw(st.integers(0, 9))
    if choice < 6:
        return seed
    if choice == 6:
        return None
    return draw(nasty()).decode("utf-8", "replace")


def _float(seed: str) -> float | None:
    try:
        return float(seed)
    except ValueError:
        return None


def column(draw, kind: str, seeds: list[str]) -> pa.Array:
    """One column of ``kind`` for the seed cells."""
    n = len(seeds)
    if kind == "string":
        return pa.array([_text(draw, s) for s in seeds], pa.string())
    if kind == "float":
        extra = st.floats(allow_nan=True, allow_infinity=True)
        return pa.array([_float(s) if draw(st.booleans()) else draw(extra) for s in seeds], pa.float64())
    if kind == "int":
        return pa.array(draw(st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), min_size=n, max_size=n)), pa.int64())
    if kind == "decimal":
        values = st.decimals(min_value=Decimal("-1e27"), max_value=Decimal("1e27"), places=10,
                             allow_nan=False, allow_infinity=False)
        return pa.array(draw(st.lists(values, min_size=n, max_size=n)), pa.decimal128(38, 10))
    if kind == "bool":
        return pa.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), pa.bool_())
    if kind == "timestamp":
        moments = st.datetimes(min_value=__import__("datetime").datetime(1900, 1, 1),
                               max_value=__import__("datetime").datetime(2300, 1, 1))
        return pa.array(draw(st.lists(moments, min_size=n, max_size=n)), pa.timestamp("us"))
    if kind == "map":
        pairs = st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=3)
        return pa.array(draw(st.lists(pairs, min_size=n, max_size=n)), pa.map_(pa.string(), pa.string()))
    return pa.nulls(n, pa.string())


@st.composite
def parquet_file(draw, header: list[str], rows: list[list[str]], path: Path) -> Path:
    """Write the seed table to ``path`` with random column types and hostile cells."""
    arrays, names = [], []
    for i, name in enumerate(header):
        if draw(st.integers(0, 19)) == 0:
            continue                                   # a column left out
        seeds = [r[i] if i < len(r) else "" for r in rows]
        arrays.append(column(draw, draw(st.sampled_from(KINDS)), seeds))
        names.append(name)
    pq.write_table(pa.Table.from_arrays(arrays, names=names), path)
    return path
