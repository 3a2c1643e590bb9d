"""schemas/fields.py: the money checks accept Decimal (and None where optional), and nothing else."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pandera.pandas as pa
import pytest
from pandera.typing import Series

from schemas.fields import Money, OptionalDecimal, is_decimal, is_decimal_or_none


class Cents(Decimal):
    """A Decimal subclass: still a Decimal."""


VALUES = [Decimal("1.10"), None, 1.5, Cents("2"), "3.00", float("nan"), np.float64(1), 7, pd.NA, Decimal("NaN")]


def test_is_decimal_is_true_for_decimals_and_their_subclasses_only():
    series = pd.Series(VALUES, index=range(10, 20), dtype=object)
    assert is_decimal(series).tolist() == [True, False, False, True, False, False, False, False, False, True]
    assert is_decimal(series).index.tolist() == list(range(10, 20))


def test_is_decimal_or_none_also_takes_none_but_not_nan_or_na():
    series = pd.Series(VALUES, dtype=object)
    assert is_decimal_or_none(series).tolist() == [True, True, False, True, False, False, False, False, False, True]


def test_an_empty_column_passes():
    assert is_decimal(pd.Series([], dtype=object)).tolist() == []


class Row(pa.DataFrameModel):
    amount: Series[object] = Money()
    maybe: Series[object] = OptionalDecimal()


def test_a_float_in_a_money_column_is_named_by_row():
    good = pd.DataFrame({"amount": [Decimal("1"), Decimal("2")], "maybe": [None, Decimal("3")]})
    assert Row.validate(good, lazy=True) is not None
    bad = good.assign(amount=[Decimal("1"), 2.0])
    with pytest.raises(pa.errors.SchemaErrors) as caught:
        Row.validate(bad, lazy=True)
    cases = caught.value.failure_cases
    assert cases["column"].tolist() == ["amount"] and cases["index"].tolist() == [1]
