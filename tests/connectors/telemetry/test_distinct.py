"""by_values calls its function once per distinct combination, whatever the columns' widths."""
from __future__ import annotations

import pandas as pd

from connectors.telemetry.distinct import by_values


def test_once_per_distinct_combination_in_row_order():
    calls: list[tuple] = []

    def joined(*values):
        calls.append(values)
        return "|".join(values)

    a, b = ["x", "y", "x", "x"], pd.Categorical(["1", "2", "1", "2"])
    assert list(by_values(joined, a, b)) == ["x|1", "y|2", "x|1", "x|2"]
    assert sorted(calls) == [("x", "1"), ("x", "2"), ("y", "2")]


def test_many_wide_columns_do_not_overflow_the_combined_code():
    """Five columns of 100,000 distinct values: the product of their sizes (1e25) is far past int64."""
    values = [str(i) for i in range(100_000)]
    columns = [values, values[::-1], values, values[::-1], values]
    found = by_values(lambda *v: "|".join(v), *columns)
    assert all(x == "|".join(row) for x, row in zip(found, zip(*columns)))
