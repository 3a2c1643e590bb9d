"""The SQL the billing totals' FOCUS and CUR views share: per-line expressions and grouping.

How a scanned column is read (:class:`Column`): amounts exact (``DECIMAL(38, 20)``, or DOUBLE as
counts of 10^-10 units, checked by :func:`inexact`), the window test of a charge period, group
keys as stored; :func:`group_sql` groups the lines; :func:`focus_select` types the columns of
view ``focus_lines``. Why the totals read a source this way: :mod:`connectors.billing.totals`.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from connectors.billing.focus_load import moment_sql
from connectors.duck import quote_text, utc_text

SUM_TYPE = "DECIMAL(38,20)"
UNIT = "CAST(0.0000000001 AS DECIMAL(11,10))"
# The text columns of focus_lines (group keys); the GPU rules read all but the first three.
TEXT_COLUMNS = ("ChargeCategory", "ServiceName", "BillingCurrency", "PricingUnit", "ConsumedUnit",
                "CommitmentDiscountStatus", "ChargeDescription", "ResourceName", "SkuId",
                "SkuPriceDetails", "x_InstanceType", "x_ArmSkuName", "x_SkuMeterName", "x_UsageType")
# The sums of focus_lines; GpuQuantity is PricingQuantity, or ConsumedQuantity where that is 0 or
# missing (audit.lines.gpu_hours_of), on Usage lines.
SUM_COLUMNS = ("BilledCost", "EffectiveCost", "GpuQuantity")


@dataclass(frozen=True)
class Column:
    """One column of a scanned file: how to refer to it, its DuckDB type, its null-normalised text."""

    ref: str
    dtype: str
    text: str

    @property
    def double(self) -> bool:
        """Whether the column is stored as a float (money to be read as its shortest text)."""
        return self.dtype.upper() in ("DOUBLE", "FLOAT", "REAL")


def exact_text(column: Column) -> str:
    """SQL: the column's value as DECIMAL, from its text (DOUBLE: its shortest round-trip text)."""
    kind = column.dtype.upper()
    if kind.startswith("DECIMAL") or kind in INTEGERS:
        return f"CAST({column.ref} AS {SUM_TYPE})"
    if column.double:
        return f"CAST(CAST({column.ref} AS VARCHAR) AS {SUM_TYPE})"
    return f"CAST({column.text} AS {SUM_TYPE})"


INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
            "UINTEGER", "UBIGINT"}


def units(ref: str) -> str:
    """SQL: a DOUBLE in whole 10^-10 units (BIGINT, rounded to the nearest), clamped to ±10^5 so
    it cannot overflow."""
    return f"CAST(greatest(least({ref}, 100000.0), -100000.0) * 10000000000.0 AS BIGINT)"


def money_lines(name: str, column: Column | None, fast: bool) -> dict[str, str]:
    """Per-line columns of one amount called ``name``: ``name__n``, a count of 10^-10 units
    (BIGINT), when ``fast`` (DOUBLE columns, see :func:`inexact`); else ``name__x``, its exact
    DECIMAL."""
    if fast:
        return {f"{name}__n": units(column.ref) if column else "NULL::BIGINT"}
    return {f"{name}__x": exact_text(column) if column else f"NULL::{SUM_TYPE}"}


def money_sums(name: str, fast: bool, nulls: bool = True) -> dict[str, str]:
    """Group aggregates of one amount: ``name`` (its exact sum, NULL when no line has it) and,
    with ``nulls``, ``name__nulls`` (the lines without it)."""
    column = f"{name}__n" if fast else f"{name}__x"
    total = f"CAST(CAST(sum({column}) AS DECIMAL(38,0)) * {UNIT} AS {SUM_TYPE})" if fast else f"sum({column})"
    out = {name: total}
    if nulls:
        out[f"{name}__nulls"] = f"count(*) - count({column})"
    return out


def inexact(pairs: list[tuple[str, str]]) -> str:
    """SQL, per line: some DOUBLE amount is not its count of 10^-10 units (then the sums are
    redone from the amounts' text). ``pairs``: (units, value) SQL of each amount."""
    tests = [f"coalesce({count} / 10000000000.0 <> {value}, FALSE)" for count, value in pairs]
    return " OR ".join(tests) if tests else "FALSE"


def period_test(start: Column, end: Column, window: tuple[datetime, datetime]) -> str:
    """SQL: the charge period overlaps the window [lo, hi) (NULL when a bound is missing)."""
    lo, hi = window
    return (f"({moment(start)} < {bound(start, hi)} AND ({moment(start)} >= {bound(start, lo)} "
            f"OR {moment(end)} > {bound(end, lo)}))")


def clip_key(start: Column, end: Column, window: tuple[datetime, datetime]) -> str:
    """SQL: for a line whose period straddles an edge of the window, ``'inside/whole'`` (microseconds
    of its period inside the window, and of all of it) as text, a group key; NULL for every other
    line. The totals scale a group's sums by it in Python, exactly (:mod:`connectors.billing.clip`'s
    rule: DuckDB divides a DECIMAL as a DOUBLE)."""
    lo, hi = window
    s, e = moment(start), moment(end)
    low, high = bound(start, lo), bound(end, hi)
    inside = f"epoch_us(least({e}, {high})) - epoch_us(greatest({s}, {low}))"
    return (f"CASE WHEN ({s} < {low} AND {e} > {low}) OR ({s} < {high} AND {e} > {high}) "
            f"THEN CAST({inside} AS VARCHAR) || '/' || CAST(epoch_us({e}) - epoch_us({s}) AS VARCHAR) END")


NAIVE = ("TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S", "DATE")


def moment(column: Column) -> str:
    """SQL of a period column as compared: as stored when it is a timestamp (a naive one is UTC,
    compared with a naive bound: no time-zone conversion per line), else cast from its text
    (no offset = UTC; the session is UTC)."""
    kind = column.dtype.upper()
    if kind in NAIVE or kind == "TIMESTAMP WITH TIME ZONE":
        return column.ref
    # As the connector reads it (connectors.billing.focus_load.moment_sql): an hour past 23 carries into the
    # next day; any other unparseable text still fails the CAST, and the connector explains it.
    return f"coalesce({moment_sql(column.text)}, CAST({column.text} AS TIMESTAMPTZ))"


def carried_hours(start: Column, end: Column) -> str:
    """SQL, per line: a period cell read only by carrying an hour past 23 into the next day (it is
    text, not NULL, and no TIMESTAMPTZ as it stands; any other such text fails :func:`moment`'s CAST).
    The totals then ask the connector for its notes on those cells, as `costaudit run` gives them."""
    tests = [f"({c.text} IS NOT NULL AND TRY_CAST({c.text} AS TIMESTAMPTZ) IS NULL)" for c in (start, end)
             if moment(c) != c.ref]
    return " OR ".join(tests) if tests else "FALSE"


def bound(column: Column, when: datetime) -> str:
    """SQL literal of a window bound, of the type :func:`moment` gives the column."""
    kind = "TIMESTAMP" if column.dtype.upper() in NAIVE else "TIMESTAMPTZ"
    return f"{kind} {quote_text(utc_text(when))}"


def as_text(column: Column) -> str:
    """SQL: a group key as stored (nested values as JSON text, other types as VARCHAR)."""
    kind = column.dtype.upper()
    if kind.startswith(("MAP", "STRUCT")) or kind.endswith("]") or kind == "JSON":
        return f"CAST(to_json({column.ref}) AS VARCHAR)"
    return column.ref if kind == "VARCHAR" else f"CAST({column.ref} AS VARCHAR)"


def group_sql(lines: str, keys: list[str], aggregates: dict[str, str]) -> str:
    """SELECT grouping ``lines`` (a subquery) on ``keys`` with ``aggregates`` and a line count."""
    parts = keys + [f"{expr} AS {alias}" for alias, expr in aggregates.items()] + ["count(*) AS _n"]
    return f"SELECT {', '.join(parts)} FROM ({lines}) GROUP BY ALL"


def parquet_types(con, files: list[Path]) -> list[tuple[str, str]]:
    """(column, DuckDB type) of Parquet files with one schema."""
    described = con.execute("DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = false)",
                            [[str(p) for p in files]]).fetchall()
    return [(name, dtype) for name, dtype, *_ in described]


def focus_select() -> str:
    """The columns of focus_lines, typed."""
    text = [f"CAST({n} AS VARCHAR) AS {n}" for n in TEXT_COLUMNS]
    sums = [f"CAST({n} AS {SUM_TYPE}) AS {n}" for n in SUM_COLUMNS]
    return f"w, _clip, {', '.join(text)}, {', '.join(sums)}, Lines, Inexact, Carried"
