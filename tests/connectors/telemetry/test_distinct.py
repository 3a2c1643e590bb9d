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
    """Five columns of 65,536 distinct values each: a combined code of c0 × 65,536^4 + … wraps at
    2^64 and loses the first column, so (1, 0, 0, 0, 0) would take the answer of (0, 0, 0, 0, 0)."""
    n = 2**16
    values = [str(i) for i in range(n)]
    columns = [values + ["1"]] + [values + ["0"] for _ in range(4)]
    found = by_values(lambda *v: "|".join(v), *columns)
    assert found[-1] == "1|0|0|0|0" and found[0] == "0|0|0|0|0"
    assert all(x == "|".join(row) for x, row in zip(found, zip(*columns)))
