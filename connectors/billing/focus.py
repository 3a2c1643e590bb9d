"""FOCUS 1.0–1.2 billing data (CSV, gzipped CSV or Parquet) → table ``lines`` (``BillingLine``).

DuckDB reads every column as text (CSV: all VARCHAR; Parquet: each column CAST to VARCHAR), so
no amount ever passes through a float: money becomes ``decimal.Decimal`` in Python, from the text.
Checks, timestamp parsing and the window filter run in SQL over a numbered copy of the file.

Conventions (see docs/architecture.md, "focus → table lines"):

* ``row`` is the 1-based data row: the header is not counted, and neither are blank lines (DuckDB
  skips them), so in a file with blank lines it is the n-th record, not the n-th text line.
* Column names are matched to the FOCUS names case-insensitively (the FOCUS 1.2 spec examples
  spell ``SkuPriceid``); two headers that differ only in case are an error.
* Mandatory: BilledCost, EffectiveCost, ChargeCategory, ChargePeriodStart, ChargePeriodEnd.
  ServiceName is optional ("" when absent): the FOCUS 1.2 spec example files have no ServiceName
  column, and they must load. Every spec example has the ChargePeriod columns, so there is no
  BillingPeriod fallback: a charge period is never guessed from the billing period.
* Timestamps without an offset are UTC (FOCUS defines UTC); with an offset or ``Z`` they are
  converted to UTC. An hour past 23 (the FOCUS 1.2 spec examples write ``2023-02-01T30:00:00Z``)
  carries into the following day(s) and is reported in table ``notes``, never refused.
* Lines whose charge period overlaps [ctx.start, ctx.end) are kept; a zero-length period counts
  when its instant lies in the window. Every data row is still checked (numbers, timestamps,
  categories, currency, duplicate ids); Tags and ``x_*`` columns are parsed for kept lines only.
* Lines identical in every column are all counted (FOCUS has no uniqueness rule, and the spec's own
  example with two resources repeats a line): table ``notes`` says which rows repeat which. A dialect
  whose lines carry their own identity (CUR, or any file with an Id / x_Id column) makes them an
  error instead (``duplicates="error"``).
  A repeated ``Id`` / ``x_Id`` is always an error.
* A null BillingCurrency cell takes the file's one currency (the case currency if the column is
  all null or absent); two currencies in one file are an error. A currency that differs from
  the case's is left for the audit to report.
* ``extra`` holds every ``x_*`` column and SkuPriceDetails that is not null, as text (sorted
  keys); SkuPriceDetails is embedded as an object when it parses as a JSON object.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import re
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from connectors.base import Connector
from connectors.errors import InputError, InputErrors
from schemas.billing import CHARGE_CATEGORIES, BillingLine

MAX_ERRORS = 20
NULL_TEXT = ("", "NULL", "null", "\\N")
NUMBER_PATTERN = r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"
SUFFIXES = {".csv": "csv", ".csv.gz": "csv.gz", ".parquet": "parquet"}
MANDATORY = ("BilledCost", "EffectiveCost", "ChargeCategory", "ChargePeriodStart", "ChargePeriodEnd")
# Parsed timestamps must fit pandas' datetime64[ns] range.
TIMESTAMP_RANGE = ("1678-01-01", "2262-01-01")

TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    # ServiceProviderName is the FOCUS 1.3 name of ProviderName; accepting it costs nothing.
    "provider": ("ProviderName", "ServiceProviderName", "PublisherName", "InvoiceIssuerName"),
    "billing_account_id": ("BillingAccountId",),
    "sub_account_id": ("SubAccountId",),
    "service_name": ("ServiceName",),
    "service_category": ("ServiceCategory",),
    "charge_category": ("ChargeCategory",),
    "charge_class": ("ChargeClass",),
    "charge_description": ("ChargeDescription",),
    "charge_frequency": ("ChargeFrequency",),
    "pricing_unit": ("PricingUnit",),
    "consumed_unit": ("ConsumedUnit",),
    "pricing_category": ("PricingCategory",),
    "commitment_discount_id": ("CommitmentDiscountId",),
    "commitment_discount_status": ("CommitmentDiscountStatus",),
    "commitment_discount_type": ("CommitmentDiscountType",),
    "resource_id": ("ResourceId",),
    "resource_name": ("ResourceName",),
    "resource_type": ("ResourceType",),
    "region": ("RegionId",),
    "sku_id": ("SkuId",),
    "sku_price_id": ("SkuPriceId",),
}
MONEY_FIELDS = {"billed_cost": "BilledCost", "effective_cost": "EffectiveCost"}
DECIMAL_FIELDS = {
    "list_cost": "ListCost",
    "contracted_cost": "ContractedCost",
    "list_unit_price": "ListUnitPrice",
    "contracted_unit_price": "ContractedUnitPrice",
    "pricing_quantity": "PricingQuantity",
    "consumed_quantity": "ConsumedQuantity",
}
PERIOD = ("ChargePeriodStart", "ChargePeriodEnd")
# Line-id columns: a repeated value is a duplicated line even when other columns differ.
ID_COLUMNS = ("Id", "x_Id")
OTHER_COLUMNS = ("BillingCurrency", "Tags", "SkuPriceDetails")
KNOWN_COLUMNS = tuple(dict.fromkeys(
    [n for names in TEXT_FIELDS.values() for n in names]
    + list(MONEY_FIELDS.values()) + list(DECIMAL_FIELDS.values())
    + list(PERIOD) + list(ID_COLUMNS) + list(OTHER_COLUMNS)))
OUTPUT_COLUMNS = list(BillingLine.to_schema().columns)


@dataclass(frozen=True)
class Columns:
    """The file's header, resolved: FOCUS name or ``x_*`` name → internal column ``cN``."""

    header: list[str]
    focus: dict[str, str]
    extras: dict[str, str]

    def has(self, name: str) -> bool:
        """Whether the file has the FOCUS column ``name``."""
        return name in self.focus


class FocusConnector(Connector):
    """Reads one FOCUS export into the ``lines`` table."""

    format_name = "focus"
    kind = "billing"
    schemas = {"lines": BillingLine}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Load, check every row, keep the lines in the window and normalise them."""
        fmt = file_format(self.path)
        with session() as con:
            columns = load(con, self.path, fmt)
            return read_focus_table(con, columns, self.path, self.ctx, grain=self.spec.options.get("grain"))


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


def read_focus_table(con, columns: "Columns", path: Path, ctx, duplicates: str = "note",
                     grain: str = "auto") -> tuple[dict[str, pd.DataFrame], int, tuple]:
    """From table ``src`` (VARCHAR columns c0..cN described by ``columns``) to the ``lines`` table.

    Every dialect connector (CUR, Azure exports, ...) maps its own columns to FOCUS names in SQL,
    calls :func:`adopt` and then this, so checks, window and normalisation are written once.
    ``duplicates``: ``"note"`` counts identical lines and notes them, ``"error"`` refuses them.
    Table ``notes`` (row, column, note) lists what was read in a way the file did not spell out.
    """
    require(columns, path)
    create_view(con, columns)
    repeated = repeated_lines(con, columns)
    errors = check_rows(con, columns, path, {rn for rn, _, _ in repeated})
    # A line that carries its own id (Id, x_Id) and repeats another line whole is the same line twice.
    if any(columns.has(name) for name in ID_COLUMNS):
        duplicates = "error"
    raise_all((duplicate_errors(repeated, path) if duplicates == "error" else []) + errors)
    rows = con.execute("SELECT count(*) FROM src").fetchall()[0][0]
    currency = file_currency(con, columns, ctx.currency)
    kept = select_window(con, columns, (ctx.start, ctx.end), path.name, currency, line_grain(grain, path))
    lines = build_lines(kept, columns, path)
    notes = hour_notes(con) + (repeat_notes(repeated) if duplicates == "note" else [])
    return {"lines": lines, "notes": notes_table(notes)}, int(rows), covered(lines)


GRAINS = ("auto", "line")


def line_grain(value, path: Path) -> str:
    """A source's ``grain`` option for its lines: ``auto`` (sum what the audit does not tell apart)
    or ``line`` (keep every invoice line as a line of its own)."""
    value = "auto" if value is None else str(value)
    if value not in GRAINS:
        raise InputError(path, f"grain {value!r} is not known", column="grain",
                         expected="one of " + ", ".join(GRAINS))
    return value


def adopt(con, table: str, path: Path) -> "Columns":
    """Turn ``table`` (columns named with FOCUS / ``x_*`` names, any type) into ``src``, all VARCHAR.

    The table's row order is the row numbering of error messages, so dialects should build it in
    file order.
    """
    described = con.execute(f"DESCRIBE {quote_ident(table)}").fetchall()
    header = [name for name, *_ in described]
    parts = []
    for i, (name, dtype, *_) in enumerate(described):
        ident = quote_ident(name)
        nested = dtype.startswith(("MAP", "STRUCT")) or dtype.endswith("]") or dtype == "JSON"
        expr = f"CAST(to_json({ident}) AS VARCHAR)" if nested else f"CAST({ident} AS VARCHAR)"
        parts.append(f"{expr} AS c{i}")
    con.execute(f"CREATE TABLE src AS SELECT {', '.join(parts)} FROM {quote_ident(table)}")
    return resolve_columns(header, path)


# --- loading ----------------------------------------------------------------------------------

def file_format(path: Path) -> str:
    """``csv``, ``csv.gz`` or ``parquet`` from the file name; anything else is an InputError."""
    name = path.name.lower()
    for suffix, fmt in sorted(SUFFIXES.items(), key=lambda item: -len(item[0])):
        if name.endswith(suffix):
            return fmt
    raise InputError(path, f"unknown file extension {''.join(path.suffixes) or '(none)'!r}",
                     expected="a .csv, .csv.gz or .parquet file")


def load(con, path: Path, fmt: str) -> Columns:
    """Copy the file into table ``src`` (columns c0..cN, all VARCHAR, file order)."""
    header = csv_header(path, fmt) if fmt != "parquet" else parquet_header(con, path)
    columns = resolve_columns(header, path)
    try:
        if fmt == "parquet":
            con.execute(parquet_sql(con, path))
        else:
            con.execute(csv_sql(len(header), fmt), [str(path)])
    except duckdb.Error as exc:
        raise read_error(path, fmt, exc) from None
    return columns


def csv_header(path: Path, fmt: str) -> list[str]:
    """The header record (BOM stripped); an empty file or a broken gzip is an InputError."""
    opener = gzip.open if fmt == "csv.gz" else open
    try:
        with opener(path, "rb") as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
            for record in csv.reader(text):
                if any(field.strip() for field in record):
                    return [field.strip() for field in record]
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise gzip_error(path, exc) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(path, f"unreadable header: {exc}", row=0,
                         expected="a UTF-8 CSV header of FOCUS column names") from None
    raise InputError(path, "file is empty (no header)", expected="a FOCUS CSV header and data rows")


def parquet_header(con, path: Path) -> list[str]:
    """Column names of a Parquet file."""
    try:
        described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    except duckdb.Error as exc:
        raise InputError(path, f"not a readable Parquet file: {first_line(exc)}",
                         expected="a Parquet file") from None
    return [name for name, *_ in described]


def csv_sql(width: int, fmt: str) -> str:
    """CREATE TABLE src from a CSV read with no type sniffing: every column VARCHAR."""
    names = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(width))
    compression = "gzip" if fmt == "csv.gz" else "none"
    return ("CREATE TABLE src AS SELECT * FROM read_csv(?, auto_detect=false, header=true, "
            f"columns={{{names}}}, delim=',', quote='\"', escape='\"', strict_mode=true, "
            f"compression='{compression}', encoding='utf-8')")


def parquet_sql(con, path: Path) -> str:
    """CREATE TABLE src from a Parquet file, each column cast to VARCHAR in file order.

    Nested columns (a Tags MAP or STRUCT) become JSON text; DECIMAL becomes its exact text; a
    DOUBLE column (a file that already stored money as float) becomes its shortest round-trip text.
    """
    described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    parts = []
    for i, (name, dtype, *_) in enumerate(described):
        ident = quote_ident(name)
        nested = dtype.startswith(("MAP", "STRUCT")) or dtype.endswith("]") or dtype == "JSON"
        expr = f"CAST(to_json({ident}) AS VARCHAR)" if nested else f"CAST({ident} AS VARCHAR)"
        parts.append(f"{expr} AS c{i}")
    source = f"read_parquet({quote_text(str(path))}, file_row_number=true)"
    return f"CREATE TABLE src AS SELECT {', '.join(parts)} FROM {source} ORDER BY file_row_number"


def resolve_columns(header: list[str], path: Path) -> Columns:
    """Match header names to FOCUS names (case-insensitive); collect ``x_*`` and SkuPriceDetails."""
    known = {name.lower(): name for name in KNOWN_COLUMNS}
    focus: dict[str, str] = {}
    extras: dict[str, str] = {}
    seen: dict[str, str] = {}
    for i, name in enumerate(header):
        key = name.lower()
        if key and key in seen:
            raise InputError(path, f"duplicate column {name!r} (also {seen[key]!r})", row=0,
                             column=name, expected="each column once")
        seen[key] = name
        if key.startswith("x_") or key == "skupricedetails":
            extras[name] = f"c{i}"
        if key in known:
            focus[known[key]] = f"c{i}"
    return Columns(list(header), focus, extras)


def require(columns: Columns, path: Path) -> None:
    """Raise one InputError naming every missing mandatory column."""
    missing = [name for name in MANDATORY if not columns.has(name)]
    if missing:
        raise InputError(path, f"missing mandatory column(s): {', '.join(missing)}",
                         column=", ".join(missing),
                         expected="the mandatory FOCUS columns " + ", ".join(MANDATORY))


def create_view(con, columns: Columns) -> None:
    """View ``n``: row number plus every FOCUS column by name, nulls normalised (absent → NULL)."""
    parts = ["rowid + 1 AS rn"]
    for name in KNOWN_COLUMNS:
        internal = columns.focus.get(name)
        parts.append(f"{null_expr(internal) if internal else 'NULL::VARCHAR'} AS {name}")
    for i, internal in enumerate(columns.extras.values()):
        parts.append(f"{null_expr(internal)} AS e{i}")
    con.execute(f"CREATE TEMP VIEW m AS SELECT {', '.join(parts)} FROM src")
    con.execute(f"CREATE TEMP VIEW n AS SELECT *, {moment_sql('ChargePeriodStart')} AS _ps, "
                f"{moment_sql('ChargePeriodEnd')} AS _pe FROM m")


# ISO date, then the hour: an hour past 23 carries into the next day(s).
_HOUR = r"^(\d{4}-\d{2}-\d{2}[T ])(\d{2})"


def moment_sql(column: str) -> str:
    """TIMESTAMPTZ of an ISO 8601 cell (no offset = UTC); ``…T30:00:00Z`` is the next day at 06:00."""
    hour = f"TRY_CAST(regexp_extract({column}, {quote_text(_HOUR)}, 2) AS INTEGER)"
    carried = (f"TRY_CAST(regexp_replace({column}, {quote_text(_HOUR)}, '\\100') AS TIMESTAMPTZ) "
               f"+ to_hours({hour})")
    return f"coalesce(TRY_CAST({column} AS TIMESTAMPTZ), CASE WHEN {hour} >= 24 THEN {carried} END)"


def null_expr(column: str) -> str:
    """SQL that turns the null literals (empty, NULL, null, \\N, blank) into NULL."""
    literals = ", ".join(quote_text(text) for text in NULL_TEXT)
    return f"CASE WHEN trim({column}) IN ({literals}) THEN NULL ELSE {column} END"


# --- row checks -------------------------------------------------------------------------------

def check_rows(con, columns: Columns, path: Path, repeated: set[int]) -> list[InputError]:
    """Every problem found in the data rows, at most MAX_ERRORS of each kind.

    A repeated Id on a line that repeats a whole line (``repeated``) is that line's repetition,
    not a second problem.
    """
    errors = []
    errors += check_numbers(con, path)
    errors += check_timestamps(con, path)
    errors += check_period_order(con, path)
    errors += check_categories(con, path)
    errors += check_currency(con, path)
    errors += [e for e in check_duplicate_ids(con, columns, path) if e.row not in repeated]
    return errors


def check_numbers(con, path: Path) -> list[InputError]:
    """Money and quantity cells that are not decimal numbers; required money that is null."""
    required = set(MONEY_FIELDS.values())
    queries = []
    for name in list(MONEY_FIELDS.values()) + list(DECIMAL_FIELDS.values()):
        null_bad = "TRUE" if name in required else "FALSE"
        queries.append((name, f"SELECT rn, {name} FROM n WHERE ({name} IS NULL AND {null_bad}) OR "
                              f"NOT regexp_full_match(trim({name}), {quote_text(NUMBER_PATTERN)})"))
    return column_errors(con, path, queries, "unparseable number", "a decimal number")


def check_timestamps(con, path: Path) -> list[InputError]:
    """ChargePeriodStart / End cells that are null or not timestamps (or out of range)."""
    low, high = TIMESTAMP_RANGE
    queries = [(name, f"SELECT rn, {name} FROM (SELECT rn, {name}, {parsed} AS t "
                      f"FROM n) WHERE t IS NULL OR t < TIMESTAMPTZ '{low}' OR t >= TIMESTAMPTZ '{high}'")
               for name, parsed in zip(PERIOD, ("_ps", "_pe"))]
    return column_errors(con, path, queries, "unparseable timestamp",
                         "an ISO 8601 timestamp (no offset = UTC)")


def column_errors(con, path: Path, queries, what: str, expected: str) -> list[InputError]:
    """Run (column, query selecting rn and the bad value) checks; at most MAX_ERRORS errors in all."""
    errors: list[InputError] = []
    for name, sql in queries:
        for rn, value in con.execute(f"{sql} ORDER BY rn LIMIT {MAX_ERRORS - len(errors)}").fetchall():
            message = "missing value" if value is None else f"{what} {value!r}"
            errors.append(InputError(path, message, row=rn, column=name, expected=expected))
        if len(errors) >= MAX_ERRORS:
            break
    return errors


def check_period_order(con, path: Path) -> list[InputError]:
    """Lines whose ChargePeriodEnd lies before their ChargePeriodStart."""
    sql = ("SELECT rn, ChargePeriodStart, ChargePeriodEnd FROM n "
           "WHERE _pe < _ps "
           f"ORDER BY rn LIMIT {MAX_ERRORS}")
    return [InputError(path, f"period ends ({end!r}) before it starts ({start!r})", row=rn,
                       column="ChargePeriodEnd", expected="an end at or after ChargePeriodStart")
            for rn, start, end in con.execute(sql).fetchall()]


def check_categories(con, path: Path) -> list[InputError]:
    """ChargeCategory cells outside the FOCUS set."""
    allowed = ", ".join(quote_text(c) for c in CHARGE_CATEGORIES)
    sql = (f"SELECT rn, ChargeCategory FROM n WHERE ChargeCategory IS NULL OR "
           f"ChargeCategory NOT IN ({allowed}) ORDER BY rn LIMIT {MAX_ERRORS}")
    return [InputError(path, f"unknown charge category {value!r}" if value else "missing value",
                       row=rn, column="ChargeCategory", expected="one of " + ", ".join(CHARGE_CATEGORIES))
            for rn, value in con.execute(sql).fetchall()]


def check_currency(con, path: Path) -> list[InputError]:
    """One InputError when the file bills in more than one currency."""
    sql = ("SELECT BillingCurrency, min(rn) FROM n WHERE BillingCurrency IS NOT NULL "
           "GROUP BY BillingCurrency ORDER BY min(rn)")
    found = con.execute(sql).fetchall()
    if len(found) <= 1:
        return []
    listed = ", ".join(f"{value!r} (first on row {rn})" for value, rn in found[:10])
    return [InputError(path, f"mixed currencies in one file: {listed}", column="BillingCurrency",
                       expected="one billing currency per file")]


def repeated_lines(con, columns: Columns) -> list[tuple[int, int, int]]:
    """(row, the earlier row it repeats, how many such rows in all) for the first MAX_ERRORS lines
    identical in every column to an earlier line.

    A hash of every column finds the candidates cheaply; the exact comparison runs on them only.
    """
    keys = ", ".join(f"c{i}" for i in range(len(columns.header)))
    sql = (f"WITH h AS (SELECT rowid AS r, hash({keys}) AS k FROM src), "
           "twice AS (SELECT k FROM h GROUP BY k HAVING count(*) > 1) "
           f"SELECT rn, first, count(*) OVER () FROM (SELECT rowid + 1 AS rn, first_value(rowid + 1) OVER "
           f"(PARTITION BY {keys} ORDER BY rowid) AS first FROM src "
           "WHERE rowid IN (SELECT r FROM h WHERE k IN (SELECT k FROM twice))) "
           f"WHERE rn <> first ORDER BY rn LIMIT {MAX_ERRORS}")
    return con.execute(sql).fetchall()


def repeat_text(found: list[tuple[int, int, int]], i: int, what: str) -> str:
    """``what`` identical in every column to row N, the last one listed with the total."""
    rn, first, total = found[i]
    more = f" ({total} such lines in all)" if i == len(found) - 1 and total > len(found) else ""
    return f"{what}: identical in every column to row {first}{more}"


def duplicate_errors(found: list[tuple[int, int, int]], path: Path) -> list[InputError]:
    """Repeated lines as errors (sources whose lines carry their own identity)."""
    return [InputError(path, repeat_text(found, i, "duplicate line"), row=rn, expected="each line once")
            for i, (rn, _, _) in enumerate(found)]


def check_duplicate_ids(con, columns: Columns, path: Path) -> list[InputError]:
    """Repeated values of a line-id column (Id, x_Id)."""
    errors: list[InputError] = []
    for name in ID_COLUMNS:
        if not columns.has(name):
            continue
        sql = (f"SELECT rn, {name}, first FROM (SELECT rn, {name}, first_value(rn) OVER "
               f"(PARTITION BY {name} ORDER BY rn) AS first FROM n WHERE {name} IS NOT NULL) "
               f"WHERE rn <> first ORDER BY rn LIMIT {MAX_ERRORS}")
        errors += [InputError(path, f"duplicate line id {value!r} (also on row {first})", row=rn,
                              column=columns.header[int(columns.focus[name][1:])],
                              expected="a unique id per line")
                   for rn, value, first in con.execute(sql).fetchall()]
    return errors[:MAX_ERRORS]


def hour_notes(con) -> list[tuple[int, str, str]]:
    """(row, column, note) for every period cell whose hour ran past 23 and was carried over."""
    notes = []
    for name, parsed in zip(PERIOD, ("_ps", "_pe")):
        sql = (f"SELECT rn, {name}, strftime({parsed}, '%Y-%m-%dT%H:%M:%SZ') FROM n "
               f"WHERE TRY_CAST({name} AS TIMESTAMPTZ) IS NULL AND {parsed} IS NOT NULL ORDER BY rn")
        notes += [(rn, name, f"hour past 23 in {text!r}, read as {moment}")
                  for rn, text, moment in con.execute(sql).fetchall()]
    return notes


def repeat_notes(found: list[tuple[int, int, int]]) -> list[tuple[int, str, str]]:
    """(row, "", note) for every line that repeats an earlier one and was counted again."""
    return [(rn, "", repeat_text(found, i, "counted again")) for i, (rn, _, _) in enumerate(found)]


def notes_table(notes: list[tuple[int, str, str]]) -> pd.DataFrame:
    """Table ``notes``: one row per cell read in a way the file did not spell out."""
    return pd.DataFrame(notes, columns=["row", "column", "note"]).astype(
        {"row": "int64", "column": "str", "note": "str"})


# --- selection and normalisation --------------------------------------------------------------

def file_currency(con, columns: Columns, case_currency: str) -> str:
    """The file's one BillingCurrency (checked already), else the case currency."""
    if not columns.has("BillingCurrency"):
        return case_currency
    found = con.execute("SELECT min(BillingCurrency) FROM n").fetchall()[0][0]
    return found if found is not None else case_currency


def select_window(con, columns: Columns, window: tuple[datetime, datetime], name: str,
                  currency: str, grain: str = "auto") -> pa.Table:
    """The kept lines (period overlaps the window), aggregated in DuckDB, in file order, as Arrow.

    Text columns come out with nulls as ""; money and quantities as exact decimal text; the period
    as TIMESTAMPTZ (UTC); ``line_id`` built in SQL from the first row of each aggregate.

    ``grain = "auto"`` (see :func:`grouped_sql`) sums lines that no stage of the audit tells apart;
    ``"line"`` keeps every line as it is (each an aggregate of one).
    """
    lo, hi = (quote_text(utc_text(moment)) for moment in window)
    parts = ["rn", f"{quote_text(name)} || ':' || rn AS line_id"]
    parts += [f"coalesce({', '.join(names)}, '') AS {out}" for out, names in TEXT_FIELDS.items()]
    parts += [f"trim({col}) AS {out}" for out, col in {**MONEY_FIELDS, **DECIMAL_FIELDS}.items()]
    parts += [f"coalesce(BillingCurrency, {quote_text(currency)}) AS currency", "Tags AS tags"]
    parts += [f"e{i}" for i in range(len(columns.extras))]
    parts += ["_ps AS p_start", "_pe AS p_end"]
    con.execute(f"CREATE OR REPLACE TEMP VIEW kept AS SELECT * FROM (SELECT {', '.join(parts)} FROM n) "
                f"WHERE p_start < CAST({hi} AS TIMESTAMPTZ) "
                f"AND (p_start >= CAST({lo} AS TIMESTAMPTZ) OR p_end > CAST({lo} AS TIMESTAMPTZ))")
    if grain == "auto" and not lossy_sums(con):
        sql = grouped_sql(con, columns)
    else:
        sql = "SELECT *, 1::BIGINT AS line_count FROM kept"
    table = con.sql(sql).to_arrow_table()
    # preserve_insertion_order keeps a filtered scan in file order, which is far cheaper than an
    # ORDER BY over wide rows; sort only if that ever fails to hold (it does after a GROUP BY).
    rn = table.column("rn")
    if len(rn) > 1 and not pc.all(pc.greater(rn[1:], rn[:-1])).as_py():
        table = table.sort_by("rn")
    return table


# Summed columns: money and quantities. Unit prices are keys (lines at other prices stay apart).
SUMMED = ("billed_cost", "effective_cost", "list_cost", "contracted_cost", "pricing_quantity",
          "consumed_quantity")
SUM_TYPE = "DECIMAL(38,20)"


def lossy_sums(con) -> bool:
    """Whether some amount of a kept line does not fit DECIMAL(38,20) exactly (then no line is summed)."""
    tests = []
    for column in SUMMED:
        fraction = f"length(regexp_extract({column}, '\\.(\\d+)', 1))"
        exponent = f"coalesce(TRY_CAST(regexp_extract({column}, '[eE]([+-]?\\d+)', 1) AS INTEGER), 0)"
        tests.append(f"({column} IS NOT NULL AND (TRY_CAST({column} AS {SUM_TYPE}) IS NULL "
                     f"OR {fraction} - {exponent} > 20))")
    return bool(con.execute(f"SELECT count(*) FROM kept WHERE {' OR '.join(tests)}").fetchall()[0][0])


def grouped_sql(con, columns: Columns) -> str:
    """SQL summing the kept lines that no stage of the audit tells apart.

    * Lines that may bill GPU time (:func:`timed_sql`) keep their hours: only a run of consecutive
      lines identical in every column but the period (the same hourly charge, hour after hour)
      becomes one line over the run. Spread evenly over its hours, the run gives every hour what
      its own line gave, so the GPU-intervals do not change.
    * Every other line is summed per UTC day of its start with the lines identical in every other
      column: no stage uses the hour of a line that bills no GPU (it is classified by its columns
      and counted over the window).
    A sum of one line keeps the line's own text; sums are exact (DECIMAL(38,20), checked first).
    """
    keys = (["currency", "tags", "list_unit_price", "contracted_unit_price"]
            + [out for out in TEXT_FIELDS] + [f"e{i}" for i in range(len(columns.extras))])
    same = ", ".join(keys + list(SUMMED) + ["p_end - p_start"])
    island = ("epoch(p_start) - epoch(p_end - p_start) * "
              f"row_number() OVER (PARTITION BY {same} ORDER BY p_start, rn)")
    as_key = ", ".join(f"CASE WHEN _timed THEN {c} END AS _k_{c}" for c in SUMMED)
    sums = []
    for column in SUMMED:
        total = f"CAST(sum(CAST({column} AS {SUM_TYPE})) AS VARCHAR)"
        text = f"CASE WHEN strpos({total}, '.') > 0 THEN rtrim(rtrim({total}, '0'), '.') ELSE {total} END"
        sums.append(f"CASE WHEN count(*) = 1 THEN any_value({column}) ELSE {text} END AS {column}")
    return f"""
    WITH marked AS ({timed_sql(con, columns)}),
    keyed AS (
      SELECT *, {as_key},
             CASE WHEN _timed THEN {island} ELSE epoch(date_trunc('day', p_start)) END AS _grain
      FROM marked
    )
    SELECT min(rn) AS rn, arg_min(line_id, rn) AS line_id, {', '.join(keys)}, {', '.join(sums)},
           min(p_start) AS p_start, max(p_end) AS p_end, count(*)::BIGINT AS line_count
    FROM keyed
    GROUP BY {', '.join(keys)}, _timed, {', '.join(f'_k_{c}' for c in SUMMED)}, _grain
    """


def timed_sql(con, columns: Columns) -> str:
    """SQL: ``kept`` with ``_timed``, whether a line may bill GPU time, by the classifier's own
    tables (an instance type with GPUs, a per-GPU meter), or shares its resource with such a line
    (the core / RAM parts of a GPU machine)."""
    from connectors.billing.totals import (
        HINT_KEYS,
        gpu_meter_sql,
        hint_sql,
        instance_type_sql,
        load_gpu_instances,
    )
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'gpu_instances'").fetchall()[0][0]:
        load_gpu_instances(con)
    extras = {name.lower(): f"e{i}" for i, name in enumerate(columns.extras)}
    named = [f"{extras.get(key.lower(), 'NULL::VARCHAR')} AS {key}" for key in HINT_KEYS if key.startswith("x_")]
    named += [f"{extras.get('skupricedetails', 'NULL::VARCHAR')} AS spd",
              f"coalesce({extras.get('x_usagetype', 'NULL::VARCHAR')}, '') AS usage",
              "charge_description AS descr",
              "charge_description || ' ' || resource_name || ' ' || sku_id AS text"]
    gpu_line = (f"charge_category = 'Usage' AND (({instance_type_sql()}) IN (SELECT instance_type FROM gpu_instances) "
                f"OR ({gpu_meter_sql()}) IS NOT NULL)")
    return (f"SELECT *, CASE WHEN resource_id <> '' THEN bool_or(_gpu) OVER (PARTITION BY resource_id) "
            f"ELSE _gpu END AS _timed FROM (SELECT *, coalesce({gpu_line}, FALSE) AS _gpu FROM "
            f"(SELECT *, {hint_sql()} AS hint FROM (SELECT *, {', '.join(named)} FROM kept)))")


def build_lines(kept: pa.Table, columns: Columns, path: Path) -> pd.DataFrame:
    """The ``lines`` table from the kept lines: Decimals, UTC datetimes, canonical JSON."""
    rows = kept.column("rn").to_pylist()
    out: dict[str, pd.Series] = {"row": kept.column("rn").to_pandas().astype("int64"),
                                 "line_count": kept.column("line_count").to_pandas().astype("int64")}
    for name in TEXT_FIELDS.keys() | {"line_id", "currency"}:
        out[name] = kept.column(name).to_pandas()
    for name in MONEY_FIELDS:
        out[name] = object_series([Decimal(v) for v in kept.column(name).to_pylist()])
    for name in DECIMAL_FIELDS:
        out[name] = object_series([None if v is None else Decimal(v)
                                   for v in kept.column(name).to_pylist()])
    out["start"] = utc_series(kept.column("p_start").to_pandas())
    out["end"] = utc_series(kept.column("p_end").to_pandas())
    out["tags"] = pd.Series(canonical_tags(kept.column("tags").to_pylist(), rows, path), dtype="str")
    out["extra"] = pd.Series(extra_json(kept, columns), dtype="str")
    return pd.DataFrame({name: out[name] for name in OUTPUT_COLUMNS + ["line_count"]})


def canonical_tags(values: list, rows: list[int], path: Path) -> list[str]:
    """Tags as canonical JSON object text; null → ``{}``; a cell that is no JSON object is an error.

    Exports repeat a handful of tag sets over millions of lines, so each distinct text is parsed once.
    """
    seen: dict[str, str | None] = {}
    result: list[str] = []
    errors: list[InputError] = []
    for rn, value in zip(rows, values):
        if value is None:
            result.append("{}")
            continue
        if value not in seen:
            seen[value] = canonical_object(value)
        if seen[value] is None:
            if len(errors) < MAX_ERRORS:
                errors.append(InputError(path, f"unparseable Tags {shorten(value)!r}", row=rn,
                                         column="Tags", expected="a JSON object"))
            continue
        result.append(seen[value])
    raise_all(errors)
    return result


def canonical_object(value: str) -> str | None:
    """Canonical text of a JSON object, or None when ``value`` is not one."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return canonical_json(parsed) if isinstance(parsed, dict) else None


def extra_json(kept: pa.Table, columns: Columns) -> list[str]:
    """Per line, a JSON object of its non-null ``x_*`` and SkuPriceDetails cells (sorted keys)."""
    if not columns.extras:
        return ["{}"] * kept.num_rows
    names = list(columns.extras)
    cells = [kept.column(f"e{i}").to_pylist() for i in range(len(names))]
    seen: dict[tuple, str] = {}
    result = []
    for values in zip(*cells):
        if values not in seen:
            entry = {name: embed(name, v) for name, v in zip(names, values) if v is not None}
            seen[values] = canonical_json(entry)
        result.append(seen[values])
    return result


def embed(name: str, value: str):
    """SkuPriceDetails as an object when it parses as one; every other value as its text."""
    if name.lower() == "skupricedetails":
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return value


def covered(lines: pd.DataFrame) -> tuple[datetime | None, datetime | None]:
    """(earliest start, latest end) of the kept lines, or (None, None)."""
    if lines.empty:
        return (None, None)
    return (lines["start"].min().to_pydatetime(), lines["end"].max().to_pydatetime())


# --- small helpers ----------------------------------------------------------------------------

def utc_series(values: pd.Series) -> pd.Series:
    """Fetched TIMESTAMPTZ values (UTC session) as datetime64[ns, UTC]."""
    if values.empty:
        return pd.Series([], dtype="datetime64[ns, UTC]")
    return values.dt.tz_convert("UTC").astype("datetime64[ns, UTC]")


def object_series(values: list) -> pd.Series:
    """Python objects (Decimal, None) in an object column, never coerced to float."""
    return pd.Series(values, dtype="object")


def utc_text(moment: datetime) -> str:
    """ISO text of a window bound in UTC (a naive bound is read as UTC)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.isoformat(sep=" ")


def canonical_json(value: dict) -> str:
    """Canonical JSON object text: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def shorten(value: str, limit: int = 60) -> str:
    """A cell value cut to ``limit`` characters for a message."""
    return value if len(value) <= limit else value[:limit] + "…"


def quote_ident(name: str) -> str:
    """A SQL identifier in double quotes."""
    return '"' + name.replace('"', '""') + '"'


def quote_text(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def first_line(exc: Exception) -> str:
    """The first line of an exception message."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def gzip_error(path: Path, exc: Exception) -> InputError:
    """The InputError for a gzip stream that ends early or is not gzip at all."""
    return InputError(path, f"truncated or corrupt gzip ({first_line(exc)})",
                      expected="a complete gzip stream")


def read_error(path: Path, fmt: str, exc: duckdb.Error) -> InputError:
    """Turn a DuckDB read failure into an InputError naming the file and, if known, the line."""
    message = str(exc)
    if fmt == "csv.gz" and "gzip" in message.lower():
        return gzip_error(path, exc)
    if fmt == "parquet":
        return InputError(path, f"not a readable Parquet file: {first_line(exc)}",
                          expected="a Parquet file")
    line = re.search(r"CSV Error on Line: (\d+)", message)
    reason = next((ln.strip() for ln in message.splitlines()[1:]
                   if ln.strip() and not ln.startswith("Original Line")), first_line(exc))
    where = f"malformed CSV at file line {line.group(1)}: " if line else "unreadable CSV: "
    return InputError(path, where + reason, expected="RFC 4180 CSV, one value per header column")


def raise_all(errors: list[InputError]) -> None:
    """Raise nothing, the one error, or every error together."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InputErrors(errors)
