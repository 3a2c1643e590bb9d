"""DuckDB helpers the connectors share: the session, SQL quoting, results as pandas, messages.

Every connector that reads through DuckDB opens its connection with :func:`session` (or calls
:func:`prepare` on one of its own): UTC, file order kept. Values go into SQL text through
:func:`quote_ident` / :func:`quote_text` only. Errors are collected, at most ``MAX_ERRORS`` of a
kind, and raised together by :func:`raise_all`.
"""
from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timezone

import duckdb
import pandas as pd

from connectors.errors import InputError, InputErrors

MAX_ERRORS = 20


@contextmanager
def session():
    """An in-memory DuckDB connection with the settings every FOCUS read relies on."""
    with duckdb.connect(":memory:") as con:
        prepare(con)
        yield con


def prepare(con) -> None:
    """Session settings every FOCUS read relies on (UTC, file order kept)."""
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET preserve_insertion_order = true")


def quote_ident(name: str) -> str:
    """A SQL identifier in double quotes."""
    return '"' + name.replace('"', '""') + '"'


def quote_text(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def utc_text(moment: datetime) -> str:
    """ISO text of a window bound in UTC (a naive bound is read as UTC)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.isoformat(sep=" ")


def utc_series(values: pd.Series) -> pd.Series:
    """Fetched TIMESTAMPTZ values (UTC session) as datetime64[ns, UTC]."""
    if values.empty:
        return pd.Series([], dtype="datetime64[ns, UTC]")
    return values.dt.tz_convert("UTC").astype("datetime64[ns, UTC]")


def object_series(values: list) -> pd.Series:
    """Python objects (Decimal, None) in an object column, never coerced to float."""
    return pd.Series(values, dtype="object")


def first_line(exc: Exception) -> str:
    """The first line of an exception message."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def raise_all(errors: list[InputError]) -> None:
    """Raise nothing, the one error, or every error together."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InputErrors(errors)
