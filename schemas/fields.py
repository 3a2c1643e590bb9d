"""Shared field helpers and registered checks: money is Decimal, fractions lie in [0, 1]."""
from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pandera.pandas as pa
from pandera import extensions


def _register(name, fn):
    try:
        extensions.register_check_method(fn)
    except ValueError:  # already registered (module reloaded)
        pass


def is_decimal(series: pd.Series) -> pd.Series:
    """Every value is a decimal.Decimal (never a float)."""
    return series.map(lambda v: isinstance(v, Decimal)).astype(bool)


def is_decimal_or_none(series: pd.Series) -> pd.Series:
    """Every value is a Decimal or None."""
    return series.map(lambda v: v is None or isinstance(v, Decimal)).astype(bool)


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
