"""Billing totals pushed down to DuckDB: FOCUS and CUR sources aggregated where they lie.

``costaudit billing`` wants a handful of numbers per source: BilledCost and EffectiveCost by
ChargeCategory, ServiceName and BillingCurrency, and GPU-hours by instance type, within a window.
Reading tens of millions of lines through a connector (one pandas row per line, a Decimal per
amount) only to add them up is far too slow and too big. Here the source becomes three DuckDB
views and one query; only its few hundred result rows come back to Python.

* ``line_groups``: the source's lines grouped on the raw values (as stored, no per-line text
  work) of every column the totals read, with the window test of each line as one more key, the
  amounts summed exactly and the lines counted. This is the only part that touches every line,
  and it costs about what a plain GROUP BY over those columns costs.
* ``raw`` (CUR) and ``focus_lines``: the groups mapped to FOCUS names. Null literals (empty,
  ``NULL``, ``null``, ``\\N``) become NULL on the grouped values. For CUR the mapping is
  :mod:`connectors.billing.cur_sql`'s own: field resolution (``layout_of``: legacy, Athena and CUR 2.0
  MAP spellings), ``base_columns`` (line item types → ChargeCategory, BilledCost, EffectiveCost,
  quantities), ``money_source`` / ``is_split`` (split cost allocation rows left out), ``UNUSED``
  / ``unused_columns`` (a row per unused commitment). It applies to groups as to lines because
  every key it tests is a group key and every amount it picks is a sum over the group (a CASE on
  the line item type choosing an amount); the per-line conditions of the unused rows (amount > 0)
  are applied before grouping. CUR folders are read through :func:`connectors.billing.cur.discover`.
* the totals query: by category, service and currency, and GPU-hours by instance type with
  :mod:`audit.classify`'s rules (instance table joined in DuckDB, per-GPU meters, hour units,
  instance-type lookup) in SQL with the same regular expressions, run on the groups.

Money is exact: ``DECIMAL(38, 20)``, never DOUBLE. Text amounts (CSV, VARCHAR columns) are cast
from their text; DECIMAL and integer columns are cast. A DOUBLE amount means the decimal of its
shortest round-trip text, as the connectors read it. It is summed as a whole count of 10^-10
units (BIGINT, summed as HUGEINT) and every line checks that its count converts back to the same
double: for |x| ≤ 10^5 that count is then exactly the text's value (no other number of at most
ten decimals lies within half a unit in the last place). Should any line fail the check (more
than ten decimals, or a huge amount), the query runs again taking every DOUBLE through its text,
which is exact and slower. AWS writes at most ten decimals: the real CURs here never fail it.

Errors: a missing column or an unreadable file is an InputError naming the file (the connectors'
checks). When the query meets a value it cannot read (an amount or a timestamp that does not
parse, an unknown line item type or charge category, a missing amount or period, mixed
currencies) the source's connector is run to name the file, row and column; that is the error
path only. Not checked here (the connectors check it when an audit reads the source): duplicate
lines, and columns the totals do not read.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import duckdb

from connectors.billing.catalogue import AZURE_RE, GCP_MACHINE_RE, HOUR_RE, INSTANCE_RE, gpu_instances, gpu_skus
from connectors.billing import cur
from connectors.billing import cur_sql as sql
from connectors.errors import InputError
from connectors.billing.focus import (MAX_ERRORS, csv_header, file_format, first_line, moment_sql, parquet_header, prepare,
                              quote_ident, quote_text, raise_all, require, resolve_columns, utc_text)

SUM_TYPE = "DECIMAL(38,20)"
FORMATS = ("focus", "cur")
# DuckDB's buffer pool for one summary; the aggregate holds a few thousand groups.
MEMORY_LIMIT = os.environ.get("COSTAUDIT_DUCKDB_MEMORY", "512MB")
CHARGE_CATEGORIES = ("Usage", "Purchase", "Tax", "Credit", "Adjustment", "Refund")
UNIT = "CAST(0.0000000001 AS DECIMAL(11,10))"
# The text columns of focus_lines (group keys); the GPU rules read all but the first three.
TEXT_COLUMNS = ("ChargeCategory", "ServiceName", "BillingCurrency", "PricingUnit", "ConsumedUnit",
                "CommitmentDiscountStatus", "ChargeDescription", "ResourceName", "SkuId",
                "SkuPriceDetails", "x_InstanceType", "x_ArmSkuName", "x_SkuMeterName", "x_UsageType")
# The sums of focus_lines; GpuQuantity is PricingQuantity, or ConsumedQuantity where that is 0 or
# missing (audit.classify.gpu_hours_of), on Usage lines.
SUM_COLUMNS = ("BilledCost", "EffectiveCost", "GpuQuantity")
# Where audit.classify.instance_type_of looks for an instance type, in its order: an x_* column,
# else the same key in SkuPriceDetails.
HINT_KEYS = ("x_InstanceType", "InstanceType", "x_ArmSkuName", "x_SkuMeterName")
TYPE = "line_item_line_item_type"


@dataclass
class Totals:
    """Exact totals of one source: [billed, effective] by key, GPU-hours by instance type."""

    rows: int = 0
    lines: int = 0
    by_category: dict[str, list[Decimal]] = field(default_factory=dict)
    by_service: dict[str, list[Decimal]] = field(default_factory=dict)
    by_currency: dict[str, list[Decimal]] = field(default_factory=dict)
    gpu_hours: dict[str, Decimal] = field(default_factory=dict)


# --- entry point -----------------------------------------------------------------------------

def read_totals(path: Path, fmt: str, window: tuple[datetime, datetime], currency: str, *,
                memory_limit: str | None = None, threads: int | None = None) -> Totals:
    """Totals of a local FOCUS file or CUR file / export folder, aggregated in DuckDB.

    DOUBLE amounts are first summed as counts of 10^-10 units; should any line hold a value
    that is not such a count, the query runs again reading every amount from its text.
    """
    if fmt not in FORMATS:
        raise ValueError(f"no pushdown for format {fmt!r}; known: {', '.join(FORMATS)}")
    path = Path(path)
    if not path.exists():
        raise InputError(path, "file not found", expected=f"a {fmt} file or folder")
    for exact in (False, True):
        with connect(memory_limit, threads) as con:
            rows_sql = build_views(con, path, fmt, window, exact)
            load_gpu_instances(con)
            try:
                result = con.execute(totals_sql(rows_sql, currency)).fetchall()
            except (duckdb.ConversionException, duckdb.InvalidInputException, duckdb.IOException) as exc:
                explain(path, fmt, window, currency, f"DuckDB: {first_line(exc)}")
        totals, problem, inexact_lines = collect(result)
        if not inexact_lines:
            break
    if problem:
        explain(path, fmt, window, currency, problem)
    return totals


def connect(memory_limit: str | None = None, threads: int | None = None):
    """An in-memory DuckDB session: UTC, bounded memory, scans free to run out of order."""
    con = duckdb.connect(":memory:")
    prepare(con)
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"SET memory_limit = {quote_text(memory_limit or MEMORY_LIMIT)}")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    return con


def build_views(con, path: Path, fmt: str, window: tuple[datetime, datetime], exact: bool = False) -> str:
    """Create views ``line_groups`` and ``focus_lines``; return SQL counting the data rows read.

    ``exact``: read DOUBLE amounts from their text (else as counts of 10^-10 units, checked).
    """
    views = cur_views if fmt == "cur" else focus_views
    return views(con, path, window, exact)


# --- per-line expressions --------------------------------------------------------------------

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


NAIVE = ("TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S", "DATE")


def moment(column: Column) -> str:
    """SQL of a period column as compared: as stored when it is a timestamp (a naive one is UTC,
    compared with a naive bound: no time-zone conversion per line), else cast from its text
    (no offset = UTC; the session is UTC)."""
    kind = column.dtype.upper()
    if kind in NAIVE or kind == "TIMESTAMP WITH TIME ZONE":
        return column.ref
    # As the connector reads it (connectors.billing.focus.moment_sql): an hour past 23 carries into the
    # next day; any other unparseable text still fails the CAST, and the connector explains it.
    return f"coalesce({moment_sql(column.text)}, CAST({column.text} AS TIMESTAMPTZ))"


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


# --- FOCUS -----------------------------------------------------------------------------------

def focus_views(con, path: Path, window: tuple[datetime, datetime], exact: bool) -> str:
    """Views over one FOCUS file (CSV, CSV.gz or Parquet)."""
    fmt = file_format(path)
    if fmt == "parquet":
        header = parquet_header(con, path)
        dtypes = dict(parquet_types(con, [path]))
        refs = [quote_ident(name) for name in header]
        source = f"read_parquet({quote_text(str(path))}, hive_partitioning = false)"
    else:
        header = csv_header(path, fmt)
        dtypes = {}
        refs = [f"c{i}" for i in range(len(header))]
        source = sql.csv_read(sql.Layout(path, fmt, path.name, len(header), {}, {}, "'{}'", "0"))
    columns = resolve_columns(header, path)
    require(columns, path)
    found = {}
    for name, internal in {**columns.focus, **columns.extras}.items():
        index = int(internal[1:])
        ref = refs[index]
        found[name] = Column(ref, dtypes.get(header[index], "VARCHAR"), sql.nz(ref))
    con.execute(f"CREATE TEMP VIEW line_groups AS {focus_groups_sql(found, source, window, exact)}")
    con.execute(f"CREATE TEMP VIEW focus_lines AS {focus_lines_sql()}")
    return "SELECT sum(n) FROM grouped"


def focus_groups_sql(found: dict[str, Column], source: str, window: tuple[datetime, datetime],
                     exact: bool) -> str:
    """GROUP BY of a FOCUS file's lines on the raw text columns, with exact sums."""
    keys = [f"{as_text(found[n]) if n in found else 'NULL::VARCHAR'} AS {n}" for n in TEXT_COLUMNS]
    line = {"w": period_test(found["ChargePeriodStart"], found["ChargePeriodEnd"], window)}
    aggregates: dict[str, str] = {}
    fast = [found[n] for n in ("BilledCost", "EffectiveCost") if found[n].double and not exact]
    for name in ("BilledCost", "EffectiveCost"):
        line.update(money_lines(name, found[name], found[name] in fast))
        aggregates.update(money_sums(name, found[name] in fast))
    line["GpuQuantity"] = focus_quantity(found)
    line["_inexact"] = inexact([(units(c.ref), c.ref) for c in fast])
    aggregates["GpuQuantity"] = "sum(GpuQuantity)"
    aggregates["_inexact"] = "count_if(_inexact)"
    lines = f"SELECT {', '.join(keys)}, {', '.join(f'{e} AS {a}' for a, e in line.items())} FROM {source}"
    return group_sql(lines, list(TEXT_COLUMNS) + ["w"], aggregates)


def focus_quantity(found: dict[str, Column]) -> str:
    """SQL, per line: the GPU-hour quantity of a Usage line (PricingQuantity, else ConsumedQuantity)."""
    pricing, consumed = (exact_text(found[n]) if n in found else f"NULL::{SUM_TYPE}"
                         for n in ("PricingQuantity", "ConsumedQuantity"))
    category = found["ChargeCategory"].ref
    return (f"CASE WHEN {category} = 'Usage' THEN CASE WHEN coalesce({pricing}, 0) <> 0 THEN {pricing} "
            f"ELSE coalesce({consumed}, 0) END END")


def focus_lines_sql() -> str:
    """FOCUS-named groups: null literals of the raw keys turned into NULL."""
    keys = [f"{sql.nz(n)} AS {n}" for n in TEXT_COLUMNS]
    sums = [f"CASE WHEN {n}__nulls > 0 THEN NULL ELSE {n} END AS {n}" for n in ("BilledCost", "EffectiveCost")]
    return (f"SELECT w, {', '.join(keys)}, {', '.join(sums)}, GpuQuantity, _n AS Lines, _inexact AS Inexact "
            "FROM line_groups")


def parquet_types(con, files: list[Path]) -> list[tuple[str, str]]:
    """(column, DuckDB type) of Parquet files with one schema."""
    described = con.execute("DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = false)",
                            [[str(p) for p in files]]).fetchall()
    return [(name, dtype) for name, dtype, *_ in described]


# --- CUR -------------------------------------------------------------------------------------

NEEDED = ("ChargeCategory", "ServiceName", "BillingCurrency", "BilledCost", "EffectiveCost",
          "ChargePeriodStart", "ChargePeriodEnd", "PricingUnit", "ConsumedUnit", "PricingQuantity",
          "ConsumedQuantity", "CommitmentDiscountStatus", "ChargeDescription", "SkuId", "x_InstanceType",
          "x_UsageType")


def cur_views(con, root: Path, window: tuple[datetime, datetime], exact: bool) -> str:
    """Views over a CUR file or export folder (the current files of each billing period)."""
    described = [describe(con, path, label) for path, label in cur.discover(root)]
    layouts = [layout for layout, _ in described]
    raise_all([e for layout in layouts for e in cur.missing_columns(layout)][:MAX_ERRORS])
    groups = same_schema(described)
    plan = CurPlan.of(layouts, groups, exact)
    lookup = map_lookup(con)
    lines = " UNION ALL ".join(cur_scan(group, plan, window, lookup) for group in groups)
    con.execute(f"CREATE TEMP VIEW line_groups AS {group_sql(lines, list(plan.keys) + ['w'], plan.aggregates())}")
    con.execute(f"CREATE TEMP VIEW raw AS {cur_raw_sql(plan)}")
    con.execute(f"CREATE TEMP VIEW focus_lines AS {cur_lines_sql()}")
    counts = " UNION ALL ".join(f"SELECT count(*) AS n FROM {source_of(group)}" for group in groups)
    return f"SELECT sum(n) FROM ({counts})"


def referenced(text: str) -> list[str]:
    """The CUR fields an SQL text refers to, in FIELDS order."""
    return [name for name in sql.FIELDS if re.search(rf"\b{name}\b", text)]


Group = list[tuple[sql.Layout, dict[str, str]]]


@dataclass(frozen=True)
class CurPlan:
    """Which CUR fields the totals read: group keys (text), amounts (summed; ``fast`` ones as
    counts of 10^-10 units), amounts that must be present, the unused commitments' amounts."""

    keys: tuple[str, ...]
    money: tuple[str, ...]
    fast: frozenset[str]
    required: tuple[str, ...]
    unused: tuple[str, ...]

    @classmethod
    def of(cls, layouts: list[sql.Layout], groups: list[Group], exact: bool) -> "CurPlan":
        """The fields of the FOCUS columns the totals need and of the split-row test."""
        base = sql.base_columns()
        text = " ".join(base[name] for name in NEEDED) + " " + sql.is_split()
        kept = [n for n in referenced(text) if n not in sql.PERIOD]
        split_parent = any("split_line_item_parent_resource_id" in layout.exprs for layout in layouts)
        if not split_parent:  # is_split needs the parent and resource ids only where a parent is given
            kept = [n for n in kept if n not in ("line_item_resource_id", "split_line_item_parent_resource_id")]
        money = tuple(n for n in kept if n in sql.NUMERIC)
        keys = tuple(dict.fromkeys([TYPE] + [n for n in kept if n not in sql.NUMERIC]))
        fast = frozenset() if exact else frozenset(n for n in money if all_double(groups, n))
        required = tuple(n for n in referenced(base["BilledCost"] + " " + base["EffectiveCost"]) if n in money)
        unused = tuple(referenced(" ".join(amount for amount, *_ in sql.UNUSED.values())))
        return cls(keys, money, fast, required, unused)

    def aggregates(self) -> dict[str, str]:
        """Group aggregates: exact sums (and missing counts) of the amounts; per fee type, the sum
        and count of the lines with an unused part; lines whose units were not exact."""
        out: dict[str, str] = {}
        for name in self.money:
            out.update(money_sums(name, name in self.fast, name in self.required))
        for i in range(len(sql.UNUSED)):
            out[f"_unused{i}"] = f"sum(_unused{i})"
            out[f"_unused{i}_n"] = f"count(_unused{i})"
        out["_inexact"] = "count_if(_inexact)"
        return out


def all_double(groups: list[Group], name: str) -> bool:
    """Whether field ``name`` is a DOUBLE column (or absent) in every file."""
    for group in groups:
        layout, dtypes = group[0]
        column = cur_column(layout, name, dtypes)
        if column is not None and not column.double:
            return False
    return True


def describe(con, path: Path, label: str) -> tuple[sql.Layout, dict[str, str]]:
    """A data file's layout (:func:`connectors.billing.cur.describe`) and, for Parquet, its column types."""
    if file_format(path) != "parquet":
        return cur.describe(con, path, label), {}
    try:
        columns = parquet_types(con, [path])
    except duckdb.Error as exc:
        raise InputError(path, f"not a readable Parquet file: {first_line(exc)}",
                         expected="a Parquet file") from None
    return sql.layout_of(path, "parquet", label, columns), dict(columns)


def same_schema(described: list[tuple[sql.Layout, dict[str, str]]]) -> list[Group]:
    """Parquet files grouped by identical schema (one scan each), every CSV file alone."""
    groups: dict[tuple, list] = {}
    for index, (layout, dtypes) in enumerate(described):
        key = ("parquet", tuple(dtypes.items())) if layout.fmt == "parquet" else ("csv", index)
        groups.setdefault(key, []).append((layout, dtypes))
    return list(groups.values())


def source_of(group: Group) -> str:
    """The table function reading one group of files."""
    layout = group[0][0]
    if layout.fmt != "parquet":
        return sql.csv_read(layout)
    files = ", ".join(quote_text(str(item.path)) for item, _ in group)
    return f"read_parquet([{files}], hive_partitioning = false)"


# cur_sql.nz(ref) and cur_sql's MAP lookup, taken apart to read the stored value itself.
RAW_REF = re.compile(r"^CASE WHEN trim\(CAST\((?P<ref>.+) AS VARCHAR\)\) IN \(.*\) THEN NULL "
                     r"ELSE CAST\((?P=ref) AS VARCHAR\) END$")
MAP_ENTRY = re.compile(r"^element_at\((?P<map>.+), (?P<key>'(?:[^']|'')*')\)\[1\]$")


def map_lookup(con) -> bool:
    """Whether DuckDB has map_extract_value (one value, no list built per line)."""
    try:
        con.execute("SELECT map_extract_value(MAP {'k': 'v'}, 'k')").fetchall()
    except duckdb.Error:
        return False
    return True


def cur_column(layout: sql.Layout, name: str, dtypes: dict[str, str], lookup: bool = False) -> Column | None:
    """Field ``name`` of one file: the stored value (column, MAP entry or CSV cell) and its type.

    The reference is taken out of the layout's null-normalising expression (the whole expression
    when it is not of that form: the same values, only slower).
    """
    text = layout.exprs.get(name)
    if text is None:
        return None
    match = RAW_REF.match(text)
    ref = match.group("ref") if match else text
    entry = MAP_ENTRY.match(ref)
    if entry and lookup:
        ref = f"map_extract_value({entry.group('map')}, {entry.group('key')})"
    column = layout.names[name]
    dtype = dtypes.get(column, "VARCHAR") if layout.fmt == "parquet" else "VARCHAR"
    return Column(ref, dtype, text)


def cur_scan(group: Group, plan: CurPlan, window: tuple[datetime, datetime], lookup: bool) -> str:
    """SELECT of the per-line values of one group of files: keys as stored, window test, amounts,
    and per fee type the unused amount of a fee line that has one (``_unused{i}``)."""
    layout, dtypes = group[0]
    columns = {name: cur_column(layout, name, dtypes, lookup) for name in sql.FIELDS}
    parts = {name: (as_text(columns[name]) if columns[name] else "NULL::VARCHAR") for name in plan.keys}
    parts["w"] = period_test(*(columns[name] for name in sql.PERIOD), window)
    for name in plan.money:
        parts.update(money_lines(name, columns[name], name in plan.fast))
    checked = [n for n in plan.money if n in plan.fast and columns[n]]
    parts.update({f"{n}__v": columns[n].ref for n in checked})
    inner = ", ".join(f"{expr} AS {alias}" for alias, expr in parts.items())
    outer = [alias for alias in parts if not alias.endswith("__v")]
    outer.append(f"{inexact([(f'{n}__n', f'{n}__v') for n in checked])} AS _inexact")
    for i, (fee, (amount, *_)) in enumerate(sql.UNUSED.items()):
        amount = fee_amount(amount, columns)
        outer.append(f"CASE WHEN {TYPE} = {quote_text(fee)} THEN CASE WHEN ({amount}) > 0 THEN {amount} END END "
                     f"AS _unused{i}")
    return f"SELECT {', '.join(outer)} FROM (SELECT {inner}, {fee_columns(plan, columns)} FROM {source_of(group)})"


def fee_columns(plan: CurPlan, columns: dict[str, Column | None]) -> str:
    """The unused-commitment amounts as stored (``name__raw``), read on fee lines only."""
    return ", ".join(f"{columns[n].ref if columns[n] else 'NULL'} AS {n}__raw" for n in plan.unused)


def fee_amount(amount: str, columns: dict[str, Column | None]) -> str:
    """A cur_sql.UNUSED amount formula over :func:`fee_columns`, each amount exact."""
    def exact(match: re.Match) -> str:
        name = match.group(0)
        if columns[name] is None:
            return f"NULL::{SUM_TYPE}"
        stored = f"{name}__raw"
        return f"({exact_text(Column(stored, columns[name].dtype, sql.nz(stored)))})"
    return re.sub(r"\b(" + "|".join(sql.FIELDS) + r")\b", exact, amount)


def cur_raw_sql(plan: CurPlan) -> str:
    """View ``raw`` over the groups: the CUR fields as the CUR mapping reads them.

    Text keys get their null literals turned into NULL (the line item type stays as stored: a
    null literal is no known type either way). They are guarded by ``_n > 0`` (always true) so
    that DuckDB keeps the split-row test on the groups: pushed below the grouping, it would run
    on every line. An amount the line item type's money needs is NULL where a line lacked it, so
    the totals query finds it.
    """
    parts = [TYPE] + [f"CASE WHEN _n > 0 THEN {sql.nz(n)} END AS {n}" for n in plan.keys if n != TYPE]
    parts += [f"CASE WHEN {n}__nulls > 0 THEN NULL ELSE {n} END AS {n}" if n in plan.required else n
              for n in plan.money]
    absent = [n for n in sql.FIELDS if n not in plan.keys and n not in plan.money]
    parts += [f"NULL::VARCHAR AS {n}" for n in absent]
    parts += [f"_unused{i}, _unused{i}_n" for i in range(len(sql.UNUSED))]
    return f"SELECT w, _n, _inexact, {', '.join(parts)} FROM line_groups"


def cur_lines_sql() -> str:
    """FOCUS-named groups of ``raw``: the money lines (part 0), and a row per group of unused
    commitments of each fee type (parts 1, 2, ...), as the CUR connector stages them.

    The parts are one pass over ``raw`` joined to their numbers, not a UNION ALL of three
    SELECTs, which DuckDB would plan as three scans of the files. GpuQuantity is computed on the
    group's sums: for a CUR line PricingQuantity and ConsumedQuantity are the same usage amount
    or NULL, so "PricingQuantity, else ConsumedQuantity" adds up line by line.
    """
    base = sql.base_columns()
    parts = [(base, "_n", "TRUE")]
    for i, (fee, (amount, commitment, description, kind)) in enumerate(sql.UNUSED.items()):
        columns = sql.unused_columns(amount, commitment, description, kind)
        columns["EffectiveCost"] = f"_unused{i}"
        parts.append((columns, f"_unused{i}_n", f"t = {quote_text(fee)} AND _unused{i}_n > 0"))
    names = list(TEXT_COLUMNS) + ["BilledCost", "EffectiveCost", "PricingQuantity", "ConsumedQuantity"]

    def pick(values: list[str]) -> str:
        return "CASE part " + " ".join(f"WHEN {i} THEN {v}" for i, v in enumerate(values)) + " END"

    select = [f"{pick([cols.get(name, 'NULL') for cols, _, _ in parts])} AS {name}" for name in names]
    select.append(f"{pick([lines for _, lines, _ in parts])} AS Lines")
    select.append(f"{pick(['_inexact'] + ['0'] * (len(parts) - 1))} AS Inexact")
    where = " OR ".join(f"(part = {i} AND {when})" for i, (_, _, when) in enumerate(parts))
    numbers = ", ".join(f"({i})" for i in range(len(parts)))
    staged = (f"SELECT w, {', '.join(select)} FROM {sql.money_source()}, (VALUES {numbers}) AS parts(part) "
              f"WHERE {where}")
    quantity = ("CASE WHEN ChargeCategory = 'Usage' THEN CASE WHEN coalesce(PricingQuantity, 0) <> 0 "
                "THEN PricingQuantity ELSE coalesce(ConsumedQuantity, 0) END END")
    return f"SELECT {focus_select()} FROM (SELECT *, {quantity} AS GpuQuantity FROM ({staged}))"


def focus_select() -> str:
    """The columns of focus_lines, typed."""
    text = [f"CAST({n} AS VARCHAR) AS {n}" for n in TEXT_COLUMNS]
    sums = [f"CAST({n} AS {SUM_TYPE}) AS {n}" for n in SUM_COLUMNS]
    return f"w, {', '.join(text)}, {', '.join(sums)}, Lines, Inexact"


# --- the GPU rules in SQL --------------------------------------------------------------------

def load_gpu_instances(con) -> None:
    """Table ``gpu_instances`` from connectors/billing/data/gpu_instances.csv (through audit.classify)."""
    rows = ", ".join(f"({quote_text(name)}, {quote_text(kind.gpu_model)}, {int(kind.gpus)})"
                     for name, kind in gpu_instances().items())
    con.execute("CREATE TEMP TABLE gpu_instances (instance_type VARCHAR PRIMARY KEY, gpu_model VARCHAR, "
                "gpus INTEGER)")
    if rows:
        con.execute(f"INSERT INTO gpu_instances VALUES {rows}")


def normalised(expr: str) -> str:
    """SQL of :func:`audit.classify.normalise_instance`: trimmed, lower case, no ml. / standard_."""
    trimmed = f"lower(regexp_replace({expr}, '^\\s+|\\s+$', '', 'g'))"
    return f"replace(regexp_replace(regexp_replace({trimmed}, '^ml\\.', ''), '^standard_', ''), ' ', '_')"


def instance_type_sql() -> str:
    """SQL of :func:`audit.classify.instance_type_of` over a group's ``hint``, ``usage`` and ``text``."""
    instance, gcp = quote_text(INSTANCE_RE.pattern), quote_text(GCP_MACHINE_RE.pattern)
    azure = quote_text("(?i)" + AZURE_RE.pattern)
    rest = "substr(usage, strpos(usage, ':') + 1)"
    found = [("lower(text)", instance), ("lower(text)", gcp), ("text", azure)]
    whens = [f"WHEN hint IS NOT NULL THEN {normalised('hint')}",
             f"WHEN strpos(usage, ':') > 0 AND regexp_matches({rest}, {instance}) THEN {normalised(rest)}"]
    whens += [f"WHEN regexp_matches({subject}, {pattern}) THEN "
              f"{normalised(f'regexp_extract({subject}, {pattern}, 1)')}" for subject, pattern in found]
    return f"CASE {' '.join(whens)} ELSE '' END"


def hint_sql() -> str:
    """SQL: a group's first instance-type hint (an x_* column, else the key in SkuPriceDetails)."""
    obj = "CASE WHEN json_valid(spd) AND json_type(spd) = 'OBJECT' THEN spd END"
    parts = []
    for key in HINT_KEYS:
        if key.startswith("x_"):
            parts.append(f"nullif({key}, '')")
        parts.append(f"nullif(json_extract_string({obj}, {quote_text('$.' + key)}), '')")
    return f"coalesce({', '.join(parts)})"


def gpu_meter_sql() -> str:
    """SQL of :func:`audit.classify.gpu_sku_model` over ``descr``: the first per-GPU meter matched."""
    whens = " ".join(f"WHEN regexp_matches(descr, {quote_text('(?i)' + p.pattern)}) THEN {quote_text(m)}"
                     for p, m in gpu_skus())
    return f"CASE {whens} END" if whens else "NULL::VARCHAR"


# --- the query -------------------------------------------------------------------------------

def totals_sql(rows_sql: str, currency: str) -> str:
    """One query over ``focus_lines``: every total of the summary as (kind, name, billed,
    effective, hours, n) rows. The GPU rules run on the groups of Usage lines."""
    gpu_keys = {"status": "CommitmentDiscountStatus", "pricing_unit": "PricingUnit",
                "consumed_unit": "ConsumedUnit", "x_InstanceType": "x_InstanceType",
                "x_ArmSkuName": "x_ArmSkuName", "x_SkuMeterName": "x_SkuMeterName",
                "spd": "SkuPriceDetails", "usage": "x_UsageType", "descr": "ChargeDescription",
                "rname": "ResourceName", "sku": "SkuId"}
    keys = ", ".join(f"CASE WHEN ChargeCategory = 'Usage' THEN {e} END AS {a}" for a, e in gpu_keys.items())
    categories = ", ".join(quote_text(c) for c in CHARGE_CATEGORIES)
    return f"""
    WITH grouped AS (
      SELECT w, ChargeCategory AS cat, coalesce(ServiceName, '') AS svc, BillingCurrency AS cur, {keys},
             sum(BilledCost) AS billed, sum(EffectiveCost) AS effective, sum(GpuQuantity) AS quantity,
             sum(Lines) AS n, sum(Inexact) AS inexact,
             sum(CASE WHEN w IS NULL OR BilledCost IS NULL OR EffectiveCost IS NULL THEN Lines ELSE 0 END) AS bad
      FROM focus_lines GROUP BY ALL
    ), currencies AS (
      SELECT min(cur) AS file_currency, count(DISTINCT cur) AS currencies FROM grouped
    ), kept AS (
      SELECT g.*, coalesce(cur, c.file_currency, {quote_text(currency)}) AS currency
      FROM grouped g, currencies c WHERE w
    ), usage_group AS (
      SELECT *, {hint_sql()} AS hint,
             coalesce(descr, '') || ' ' || coalesce(rname, '') || ' ' || coalesce(sku, '') AS text,
             regexp_matches(coalesce(pricing_unit, '') || ' ' || coalesce(consumed_unit, ''),
                            {quote_text(HOUR_RE.pattern)}) AS hourly
      FROM kept WHERE cat = 'Usage' AND NOT regexp_matches(coalesce(status, ''), '(?i)^unused$')
    ), typed_group AS (
      SELECT *, {instance_type_sql()} AS itype, {gpu_meter_sql()} AS meter FROM usage_group
    ), gpu AS (
      SELECT coalesce(nullif(t.itype, ''), nullif(coalesce(gi.gpu_model, t.meter), ''), '(unknown)') AS name,
             sum(CASE WHEN gi.gpus > 0 THEN t.quantity * gi.gpus WHEN t.meter IS NOT NULL THEN t.quantity
                      ELSE 0 END) AS hours
      FROM typed_group t LEFT JOIN gpu_instances gi ON gi.instance_type = t.itype
      WHERE (t.hourly AND gi.instance_type IS NOT NULL) OR (gi.instance_type IS NULL AND t.meter IS NOT NULL)
      GROUP BY 1
    )
    SELECT 'category', cat, sum(billed), sum(effective), NULL, sum(n) FROM kept GROUP BY cat
    UNION ALL SELECT 'service', svc, sum(billed), sum(effective), NULL, sum(n) FROM kept GROUP BY svc
    UNION ALL SELECT 'currency', currency, sum(billed), sum(effective), NULL, sum(n) FROM kept GROUP BY currency
    UNION ALL SELECT 'gpu', name, NULL, NULL, hours, NULL FROM gpu
    UNION ALL SELECT 'rows', NULL, NULL, NULL, NULL, ({rows_sql})
    UNION ALL SELECT 'lines', NULL, NULL, NULL, NULL, coalesce((SELECT sum(n) FROM kept), 0)
    UNION ALL SELECT 'bad', NULL, NULL, NULL, NULL, (SELECT sum(bad) FROM grouped)
    UNION ALL SELECT 'currencies', NULL, NULL, NULL, NULL, (SELECT currencies FROM currencies)
    UNION ALL SELECT 'inexact', NULL, NULL, NULL, NULL, (SELECT sum(inexact) FROM grouped)
    UNION ALL SELECT 'unknown category', cat, NULL, NULL, NULL, sum(n) FROM grouped
      WHERE cat IS NULL OR cat NOT IN ({categories}) GROUP BY cat
    """


def collect(result: list[tuple]) -> tuple[Totals, str | None, int]:
    """The query's rows as Totals, what looks wrong with the source (or None), and the number of
    lines whose DOUBLE amounts were not exact counts of 10^-10 units."""
    totals = Totals()
    inexact_lines = 0
    tables = {"category": totals.by_category, "service": totals.by_service, "currency": totals.by_currency}
    problem = None
    for kind, name, billed, effective, hours, n in result:
        if kind in tables:
            tables[kind][name] = [billed or Decimal(0), effective or Decimal(0)]
        elif kind == "gpu":
            totals.gpu_hours[name] = hours or Decimal(0)
        elif kind == "rows":
            totals.rows = int(n or 0)
        elif kind == "lines":
            totals.lines = int(n)
        elif kind == "bad" and n:
            problem = f"{n} line(s) without an amount or a charge period"
        elif kind == "currencies" and n and n > 1:
            problem = "mixed currencies in one source"
        elif kind == "unknown category":
            problem = f"unknown charge category or line item type {name!r}"
        elif kind == "inexact":
            inexact_lines = int(n or 0)
    return totals, problem, inexact_lines


# --- the error path --------------------------------------------------------------------------

def explain(path: Path, fmt: str, window: tuple[datetime, datetime], currency: str, problem: str) -> None:
    """Raise the error the source's connector gives (file, row, column), else one naming ``problem``."""
    from connectors.base import ReadContext, SourceSpec
    from connectors.registry import resolve
    spec = SourceSpec(path.name, "billing", fmt, path, {})
    resolve(fmt)(spec, ReadContext(window[0], window[1], currency)).fetch()
    raise InputError(path, f"cannot total the source: {problem}",
                     expected=f"a {fmt} source whose lines the connector reads")
