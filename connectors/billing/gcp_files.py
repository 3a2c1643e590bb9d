"""The files of a local GCP billing export: where their records say what the aggregate cannot.

A timestamp, an amount or a nested field that does not read, or a record without its time or
cost, is named by file, line and column (:func:`bad_values`, :func:`missing_field`); DuckDB's own
errors name neither.

Files that hold the same rows (no silent misfit).

A folder given as one ``gcp_billing`` source is read as one export: its files are shards of it.
A month-to-date export left beside the month's, or a shard copied twice, puts the same charges in
two files, and summing them counts that money twice with no word. GCP's rows carry no line id, so a
row is known by everything the reader takes from it (times, SKU, project, resource, labels, cost,
usage and credits): where a file has at least :data:`SHARED_SHARE` of its distinct rows (and at
least :data:`SHARED_MIN` of them) identical in all of these to rows of other files, the read stops,
naming the file, how many of its rows repeat, and the files they repeat. A few identical
rows in two shards of a real export (one hour's identical charges split across files) stay below
that and are read as they are.
"""
from __future__ import annotations

from pathlib import Path

import duckdb

from connectors.billing.focus_checks import column_errors
from connectors.billing.focus_load import NUMBER_PATTERN
from connectors.bounds import shown
from connectors.duck import MAX_ERRORS
from connectors.duck import quote_text as quote
from connectors.errors import InputError

SHARED_SHARE = 0.01
SHARED_MIN = 2


def shared_rows(con, relation: str, path: Path) -> None:
    """Raise an InputError where a file of ``relation`` (a read with a ``filename`` column over an
    export's files) has :data:`SHARED_SHARE` of its rows (and :data:`SHARED_MIN`) in other files."""
    con.execute(f"CREATE TEMP TABLE _gcp_rows AS SELECT DISTINCT filename AS f, hash(*COLUMNS(* EXCLUDE (filename))) "
                f"AS h FROM {relation}")
    try:
        found = con.execute(f"""
            WITH pairs AS (SELECT a.f, a.h, b.f AS other FROM _gcp_rows AS a
                           JOIN _gcp_rows AS b ON a.h = b.h AND a.f <> b.f),
                 sizes AS (SELECT f, count(*) AS n FROM _gcp_rows GROUP BY f)
            SELECT p.f, count(DISTINCT p.h) AS shared, s.n, min(p.other), count(DISTINCT p.other)
            FROM pairs AS p JOIN sizes AS s USING (f)
            GROUP BY p.f, s.n
            HAVING count(DISTINCT p.h) >= {SHARED_MIN} AND count(DISTINCT p.h) >= {SHARED_SHARE} * s.n
            ORDER BY count(DISTINCT p.h) / s.n DESC, p.f LIMIT 1""").fetchall()
    finally:
        con.execute("DROP TABLE _gcp_rows")
    if found:
        name, shared, rows, other, others = found[0]
        where = Path(other).name + (f" and {others - 1} other file(s)" if others > 1 else "")
        raise InputError(path, f"{shared:,} of the {rows:,} distinct rows of {Path(name).name} are identical to rows of "
                               f"{where}: the same charges twice (a month-to-date export beside the month's, or a "
                               "copied shard) would be summed twice", expected="each charge in one file of the export")


PERIOD_COLUMNS = ("usage_start_time", "usage_end_time")


MONEY_COLUMNS = ("cost", "cost_at_list", "currency_conversion_rate")
#: the amounts inside nested fields (``credits`` a list of them), checked as :data:`MONEY_COLUMNS`
NESTED_AMOUNTS = ("credits.amount", "usage.amount", "usage.amount_in_pricing_units")
# The export's columns as the local reader types them: every leaf VARCHAR (money and quantities
# keep their text; the query casts them to DECIMAL), absent keys read as NULL.
_KV = "STRUCT(key VARCHAR, value VARCHAR)[]"
JSON_COLUMNS = {
    **{name: "VARCHAR" for name in ("billing_account_id", "usage_start_time", "usage_end_time",
                                    "cost", "currency", "cost_type", "currency_conversion_rate",
                                    "cost_at_list")},
    "service": "STRUCT(id VARCHAR, description VARCHAR)",
    "sku": "STRUCT(id VARCHAR, description VARCHAR)",
    "project": "STRUCT(id VARCHAR, number VARCHAR, name VARCHAR)",
    "labels": _KV, "system_labels": _KV,
    "location": "STRUCT(location VARCHAR, country VARCHAR, region VARCHAR, zone VARCHAR)",
    "resource": "STRUCT(name VARCHAR, global_name VARCHAR)",
    "usage": "STRUCT(amount VARCHAR, unit VARCHAR, amount_in_pricing_units VARCHAR, pricing_unit VARCHAR)",
    "credits": "STRUCT(name VARCHAR, amount VARCHAR, full_name VARCHAR, id VARCHAR, type VARCHAR)[]",
    "invoice": "STRUCT(month VARCHAR)",
}
#: the nested fields of :data:`JSON_COLUMNS` (an object, or an array of objects)
NESTED = [name for name, kind in JSON_COLUMNS.items() if kind.startswith("STRUCT")]
#: the words for json_type's names
JSON_KINDS = {"VARCHAR": "string", "BIGINT": "number", "UBIGINT": "number", "DOUBLE": "number",
              "BOOLEAN": "boolean", "OBJECT": "object", "ARRAY": "array"}
MONEY_TYPE = "DECIMAL(38, 9)"
MONEY_RANGE = "a decimal number of at most 29 integer digits (DECIMAL(38, 9), BigQuery NUMERIC)"


def value_checks() -> list[tuple[str, str, str, str]]:
    """(column, SQL true of its text ``v`` when the aggregate cannot read it, what, expected)."""
    number = f"regexp_full_match(trim(v), {quote(NUMBER_PATTERN)})"
    checks = [(c, "TRY_CAST(v AS TIMESTAMPTZ) IS NULL", "unreadable timestamp",
               "a timestamp such as 2026-09-01 00:00:00 UTC") for c in PERIOD_COLUMNS]
    amounts = (*MONEY_COLUMNS, *NESTED_AMOUNTS)
    checks += [(c, f"NOT {number}", "unparseable number", "a decimal number") for c in amounts]
    checks += [(c, f"{number} AND TRY_CAST(trim(v) AS {MONEY_TYPE}) IS NULL", "number out of range", MONEY_RANGE)
               for c in amounts]
    return checks


def bad_values(con, files: list[str], fmt: str, names) -> list[InputError]:
    """The cells the aggregate cannot read (a timestamp, an amount; in JSON, a nested field of another
    JSON type: :func:`nested_errors`), by file, row and column, at most MAX_ERRORS; DuckDB's own cast
    error names no row, and its JSON errors a line counted within its read buffer (line 2 for line 4).

    Each file is read on its own, one column as text, and its rows numbered in the order they
    arrive: a Parquet file's own row number, a JSON file's records by ``row_number() OVER ()`` (one
    a line; a blank line, which no export writes, is not counted). Numbered with ``PARTITION BY
    filename`` over the files together, rows came out of order, and the error named line 357,878
    or 96,221 for a bad value on line 234,567 of a 400,000-line export."""
    errors: list[InputError] = []
    for column, test, what, expected in value_checks():
        if column.split(".")[0] not in names:
            continue
        for file in files:
            query = f"SELECT n AS rn, v FROM ({numbered(file, fmt, column)}) WHERE v IS NOT NULL AND ({test})"
            try:
                errors += column_errors(con, Path(file), [(column, query)], what, expected, MAX_ERRORS - len(errors))
            except duckdb.Error:
                continue
            if len(errors) >= MAX_ERRORS:
                return errors
    # a Parquet file's nested columns are typed by its schema
    return errors + (nested_errors(con, files, MAX_ERRORS - len(errors)) if fmt == "json" else [])


def nested_errors(con, files: list[str], limit: int) -> list[InputError]:
    """The nested fields of JSON records that hold another JSON type than the reader's STRUCT or list of
    STRUCTs (labels written as a string, credits as an object, sku as a string), by file, line and field,
    at most ``limit``. DuckDB named none of them, only "in line 100: Expected ARRAY, but got VARCHAR"
    for line 200, and the read as VARCHAR that checks the scalars cannot tell a string ``"[…]"`` from
    an array ``[…]``: each field is read as JSON."""
    errors: list[InputError] = []
    for column in NESTED:
        listed, fields = nested_shape(column)
        expected = f"a JSON array of {{{fields}}} objects" if listed else f"a JSON object {{{fields}}}"
        for file in files:
            try:
                found = con.execute(nested_query(file, column, listed, limit - len(errors))).fetchall()
            except duckdb.Error:
                continue                    # a file that does not read as JSON lines: DuckDB's error says so
            errors += [InputError(file, nested_message(kind, element, text, listed), row=int(line),
                                  column=column, expected=expected) for line, kind, element, text in found]
            if len(errors) >= limit:
                return errors
    return errors


def nested_shape(column: str) -> tuple[bool, str]:
    """Whether a nested field of :data:`JSON_COLUMNS` is a list, and its fields ("key, value")."""
    kind = JSON_COLUMNS[column]
    return kind.endswith("[]"), kind.split("(", 1)[1].split(")", 1)[0].replace(" VARCHAR", "")


def parquet_nested(path: Path, types: dict[str, str]) -> list[InputError]:
    """The nested columns of a Parquet export typed otherwise (labels written as text): the column's
    type is the file's, so the error names the file and column. DuckDB's own error named neither
    ("Binder Error: Invalid LIST argument during lambda function binding!")."""
    errors = []
    for column in NESTED:
        listed, fields = nested_shape(column)
        kind = types.get(column)
        if kind and (not kind.startswith("STRUCT") or kind.endswith("[]") != listed):
            errors.append(InputError(path, f"a {kind} column", column=column, expected=(
                f"a list of {{{fields}}} structs" if listed else f"a struct {{{fields}}}")))
    return errors


def nested_query(file: str, column: str, listed: bool, limit: int) -> str:
    """SQL: (line, json_type, the first element's json_type that is no object, text) of the records of
    one JSON file whose ``column`` is not an object (``listed``: not an array of objects or nulls)."""
    source = f"read_json({quote(file)}, format='newline_delimited', columns={{{quote(column)}: 'JSON'}})"
    element = ("list_filter(list_transform(json_extract(v, '$[*]'), lambda e: json_type(e)), "
               "lambda t: t NOT IN ('OBJECT', 'NULL'))[1]") if listed else "NULL"
    kind = "ARRAY" if listed else "OBJECT"
    return (f"SELECT n, k, e, CASE k WHEN 'VARCHAR' THEN json_extract_string(v, '$') ELSE CAST(v AS VARCHAR) END "
            f"FROM (SELECT n, v, json_type(v) AS k, {element} AS e FROM (SELECT row_number() OVER () AS n, "
            f"{column} AS v FROM {source})) WHERE v IS NOT NULL AND (k <> '{kind}' OR e IS NOT NULL) "
            f"ORDER BY n LIMIT {limit}")


def nested_message(kind: str, element: str | None, text: str, listed: bool) -> str:
    """What a nested field holds instead (a string's own text shown, not its JSON quoting)."""
    if element is not None:
        return f"an array holding a JSON {JSON_KINDS.get(element, element)}, not objects: {shown(text)}"
    return f"a JSON {JSON_KINDS.get(kind, kind)}, not an {'array' if listed else 'object'}: {shown(text)}"


def numbered(file: str, fmt: str, column: str) -> str:
    """SQL: (n, v) of one file, ``v`` its column's text, ``n`` its row (a JSON file's line); a nested
    amount (``credits.amount``) gives a row per element of its list."""
    parent, _, field = column.partition(".")
    if fmt == "json":
        kind = JSON_COLUMNS[parent] if field else "VARCHAR"
        source = f"read_json({quote(file)}, format='newline_delimited', columns={{{quote(parent)}: {quote(kind)}}})"
        rows = f"SELECT row_number() OVER () AS n, {parent} AS x FROM {source}"
    else:
        rows = f"SELECT file_row_number + 1 AS n, {parent} AS x FROM read_parquet({quote(file)}, file_row_number=true)"
    if not field:
        value = "CAST(x AS VARCHAR)"
    elif nested_shape(parent)[0]:
        value = f"unnest(list_transform(x, lambda e: CAST(e.{field} AS VARCHAR)))"
    else:
        value = f"CAST(x.{field} AS VARCHAR)"
    return f"SELECT n, {value} AS v FROM ({rows})"


#: the fields every record of an export has (a JSON record without one reads them as null)
RECORD_FIELDS = ("usage_start_time", "usage_end_time", "cost", "currency")


def missing_field(con, files: list[str], fmt: str) -> InputError | None:
    """The first JSON record, by file and line, that lacks one of :data:`RECORD_FIELDS` (a JSON of
    another shape, or records cut of their cost); None when every record has them, or for Parquet
    (whose columns are checked by name)."""
    if fmt != "json":
        return None
    spec = "{" + ", ".join(f"{quote(k)}: 'VARCHAR'" for k in RECORD_FIELDS) + "}"
    which = " ".join(f"WHEN {k} IS NULL THEN {quote(k)}" for k in RECORD_FIELDS)
    for file in files:
        source = f"read_json({quote(file)}, format='newline_delimited', columns={spec})"
        try:
            found = con.execute(f"SELECT n, w FROM (SELECT row_number() OVER () AS n, CASE {which} END AS w "
                                f"FROM {source}) WHERE w IS NOT NULL ORDER BY n LIMIT 1").fetchall()
        except duckdb.Error:
            continue
        if found:
            line, field = found[0]
            return InputError(file, f"a record with no {field}", row=int(line), column=field,
                              expected="a Cloud Billing export record (" + ", ".join(RECORD_FIELDS) + " on every one)")
    return None


def ndjson(files: list[str]) -> None:
    """An InputError for a JSON file that opens a JSON array: the export is read one record a line
    (newline-delimited, as ``bq extract`` writes it), and an array read so was an unreadable time."""
    import gzip

    for file in files:
        try:
            with (gzip.open(file, "rb") if file.lower().endswith(".gz") else open(file, "rb")) as handle:
                head = handle.read(4096).lstrip()
        except (OSError, EOFError):
            continue  # the full read names what is wrong with it
        if head.startswith(b"["):
            raise InputError(file, "a JSON array, not one record a line", row=1,
                             expected="newline-delimited JSON (one export record a line), as bq extract writes it")
