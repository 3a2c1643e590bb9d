"""Shared field helpers and registered checks: money is Decimal, fractions lie in [0, 1]."""
from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pandera.pandas as pa
from pandera import extensions

NONE_TYPE = type(None)


def _register(name, fn):
    try:
        extensions.register_check_method(fn)
    except ValueError:  # already registered (module reloaded)
        pass


def is_decimal(series: pd.Series) -> pd.Series:
    """Every value is a decimal.Decimal (never a float)."""
    return _decimals(series, none_too=False)


def is_decimal_or_none(series: pd.Series) -> pd.Series:
    """Every value is a Decimal or None."""
    return _decimals(series, none_too=True)


def _decimals(series: pd.Series, none_too: bool) -> pd.Series:
    """Per value: a Decimal (or None when ``none_too``). The type of every value is taken in C and
    compared at once; only values of another exact type (a Decimal subclass, or a wrong value) are
    tested one by one with isinstance."""
    values = series.to_numpy(dtype=object)
    kinds = np.fromiter(map(type, values), dtype=object, count=len(values))
    ok = kinds == Decimal
    if none_too:
        ok |= kinds == NONE_TYPE
    for at in np.flatnonzero(~ok):
        ok[at] = isinstance(values[at], Decimal)
    return pd.Series(ok, index=series.index, dtype=bool)


_register("is_decimal", is_decimal)
_register("is_decimal_or_none", is_decimal_or_none)


def Money(**kwargs):
    """A required Decimal money column."""
    return pa.Field(is_decimal=(), **kwargs)


def OptionalDecimal(**kwargs):
    """A Decimal column whose values may be None."""
    return pa.Field(nullable=True, is_decimal_or_none=(), **kwargs)


def Fraction(**kwargs):
    """A float fraction in [0, 1]."""
    return pa.Field(ge=0.0, le=1.0, **kwargs)


def Measured(**kwargs):
    """A non-negative float figure, NaN where no series measured it (never a stand-in 0)."""
    return pa.Field(**{"nullable": True, "ge": 0, **kwargs})
