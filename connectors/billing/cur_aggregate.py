"""One query that pre-aggregates an AWS CUR table where it lives (Athena / Trino, or DuckDB).

The query is built once per table layout and window as a sqlglot expression
(:func:`aggregate_query`) and rendered for ``duckdb`` or ``trino`` (Athena engine v3) by
:func:`render`. Its rows have the shape of CUR lines, so the CUR connector maps them exactly as it
maps the lines of a file (``connectors/billing/cur_sql.py``): summing is linear, so the mapping applied to
the sums gives the money it gives on the raw lines.

* **Keys.** Every non-money field that ``cur_sql.mapped_sql`` reads, as text (null literals ``''``,
  ``NULL``, ``null``, ``\\N`` as NULL), and the unit prices (``*_rate``, which are not summed): a
  DOUBLE or DECIMAL price as the text of its DECIMAL(38, 18) value. Tags are keys too: flat
  ``resource_tags_*`` columns one by one, a CUR 2.0 tag MAP as its JSON text. ``product_*`` fields
  that are not columns are read from the ``product`` MAP.
* **Period.** Lines that may bill GPU time keep their usage period (grouped by start and end).
  So do lines whose period straddles an edge of the window (they are clipped by their own period).
  Every other line is grouped by the UTC day of its start and gets the earliest start and the
  latest end of its group. A line may bill GPU time when a GPU instance type of
  ``connectors/billing/data/gpu_instances.csv`` (or a per-GPU meter of ``gpu_skus.csv``) appears in its instance
  type, usage type, description, resource id or SKU, or when it shares its resource id with such a
  line: a superset of what the FOCUS reader keeps by the hour, so no hour it needs is summed away.
  So do the lines of a resource id that has a line the mapping makes a credit or refund
  (``cur_sql.base_columns`` ChargeCategory; the FOCUS reader's ``_credited``): an hour's credit nets
  into that hour's line (audit.adjust), which a sum over the day would hide.
* **Money.** Every amount and quantity is summed as DECIMAL(38, 18), converted per line before the
  sum: text as is; a DOUBLE through its shortest text in DuckDB (``CAST(CAST(x AS VARCHAR) AS
  DECIMAL)``) and by ``CAST(x AS DECIMAL(38, 18))`` in Trino. No sum runs over a DOUBLE.
* **Window.** Lines whose usage period overlaps [start, end) (a zero-length period counts when its
  instant lies in it), in UTC. A table with a ``billing_period`` column (CUR 2.0) or ``year`` /
  ``month`` columns (legacy CUR through Athena) is also filtered on them, so Athena reads only the
  partitions of the window's months.
* **Output.** Every column as text (``VARCHAR``), the period as ``YYYY-MM-DDTHH:MM:SSZ``, plus
  ``_lines`` (the CUR lines summed), ordered by every column: the same rows in the same order
  whichever engine runs it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import sqlglot
from sqlglot import exp

from connectors.billing import cur_sql as sql
from connectors.billing.cur_sql import text_or_null
from connectors.billing.focus_lines import CREDITED
from connectors.billing.gcp_sql import set_table
from connectors.duck import quote_ident as ident
from connectors.duck import quote_text
from schemas.errors import UsageError

DIALECTS = ("duckdb", "trino")
MONEY = "DECIMAL(38, 18)"
PERIOD_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
RATES = ("line_item_unblended_rate", "pricing_public_on_demand_rate")
SUMMED = tuple(name for name in sql.NUMERIC if name not in RATES)
KEYS = tuple(name for name in sql.FIELDS if name not in sql.NUMERIC and name not in sql.PERIOD)
LINES = "_lines"
STAND_IN = "cur_table"
MAX_LISTED_MONTHS = 36

# Pseudo-functions of the query and their spelling per dialect ({0}: the argument's SQL).
PSEUDO = {
    "money_text": {"duckdb": f"CAST({{0}} AS {MONEY})", "trino": f"CAST({{0}} AS {MONEY})"},
    "money_double": {"duckdb": f"CAST(CAST({{0}} AS VARCHAR) AS {MONEY})",
                     "trino": f"CAST({{0}} AS {MONEY})"},
    "money_exact": {"duckdb": f"CAST({{0}} AS {MONEY})", "trino": f"CAST({{0}} AS {MONEY})"},
    "ts_text": {"duckdb": "timezone('UTC', CAST({0} AS TIMESTAMPTZ))",
                "trino": "CAST(from_iso8601_timestamp({0}) AT TIME ZONE 'UTC' AS TIMESTAMP)"},
    "ts_local": {"duckdb": "CAST({0} AS TIMESTAMP)", "trino": "CAST({0} AS TIMESTAMP)"},
    "ts_zoned": {"duckdb": "timezone('UTC', {0})",
                 "trino": "CAST({0} AT TIME ZONE 'UTC' AS TIMESTAMP)"},
    "map_get": {"duckdb": "element_at({0}, {1})[1]", "trino": "element_at({0}, {1})"},
    "map_json": {"duckdb": "CAST(to_json({0}) AS VARCHAR)", "trino": "json_format(CAST({0} AS JSON))"},
}


@dataclass(frozen=True)
class Plan:
    """Where each CUR field of one table comes from, and how its columns are typed.

    ``columns``: (name, kind) of the table, kind one of text, double, decimal, integer,
    timestamp, timestamptz, map, other. ``fields``: field → SQL reference (a quoted column, or a
    ``map_get`` of the product MAP). ``aliases``: field → output column name (the table's own
    spelling where it is a column). ``tags``: flat tag columns; ``tag_map``: the tag MAP column.
    """

    columns: tuple[tuple[str, str], ...]
    fields: tuple[tuple[str, str], ...]
    aliases: tuple[tuple[str, str], ...]
    tags: tuple[str, ...]
    tag_map: str | None
    partitions: str | None   # "billing_period", "year_month" or None

    @property
    def kinds(self) -> dict[str, str]:
        return dict(self.columns)

    @property
    def missing(self) -> list[str]:
        """Required CUR fields the table lacks."""
        found = dict(self.fields)
        return [name for name in sql.REQUIRED if name not in found]


def kind_of(type_text: str) -> str:
    """A column type (Glue / Hive, Trino or DuckDB spelling) reduced to what the query needs."""
    text = type_text.strip().lower()
    if text.startswith("map"):
        return "map"
    if text.startswith("timestamp") and ("with time zone" in text or text == "timestamptz"):
        return "timestamptz"
    if text.startswith(("timestamp", "datetime")):
        return "timestamp"
    if text in ("double", "float", "real", "float4", "float8"):
        return "double"
    if text.startswith(("decimal", "numeric")):
        return "decimal"
    if text in ("tinyint", "smallint", "int", "integer", "bigint", "hugeint", "ubigint", "uinteger"):
        return "integer"
    if text.startswith(("string", "varchar", "char", "text")):
        return "text"
    return "other"


def plan(columns: list[tuple[str, str]]) -> Plan:
    """Resolve a table's columns (name, type) to CUR fields, tags and partition columns."""
    kinds = [(name, kind_of(dtype)) for name, dtype in columns]
    described = [(name, "MAP(VARCHAR, VARCHAR)" if kind == "map" else "VARCHAR") for name, kind in kinds]
    layout = sql.layout_of(Path("table"), "parquet", "table", described, text_maps=False)
    names = {name for name, _ in kinds}
    maps = {sql.MAP_COLUMNS[name.lower()]: name for name, kind in kinds
            if kind == "map" and name.lower() in sql.MAP_COLUMNS}
    fields, aliases = [], []
    for field in sql.FIELDS:
        spelled = layout.names.get(field)
        if spelled is None:
            continue
        if spelled in names:
            fields.append((field, ident(spelled)))
            aliases.append((field, spelled))
        else:  # product['key']
            key = field[len("product_"):]
            fields.append((field, f"map_get({ident(maps['product'])}, {quote_text(key)})"))
            aliases.append((field, field))
    tags = tuple(name for name, kind in kinds if kind != "map" and name.startswith(sql.TAG_PREFIXES))
    lowered = {name.lower() for name in names}
    partitions = ("billing_period" if "billing_period" in lowered else
                  "year_month" if {"year", "month"} <= lowered else None)
    return Plan(tuple(kinds), tuple(fields), tuple(aliases), tags, maps.get("tags"), partitions)


def money(ref: str, kind: str) -> str:
    """SQL (pseudo-functions): one amount as DECIMAL(38, 18)."""
    if kind == "double":
        return f"money_double({ref})"
    if kind in ("decimal", "integer"):
        return f"money_exact({ref})"
    return f"money_text({text_or_null(ref)})"


def moment(ref: str, kind: str) -> str:
    """SQL (pseudo-functions): a usage date as a TIMESTAMP in UTC."""
    if kind == "timestamp":
        return f"ts_local({ref})"
    if kind == "timestamptz":
        return f"ts_zoned({ref})"
    return f"ts_text({text_or_null(ref)})"


def gpu_pattern() -> str:
    """A regular expression matching any GPU instance type or per-GPU meter (lower case text)."""
    from connectors.billing.catalogue import gpu_instances, gpu_skus

    names = sorted({name.lower() for name in gpu_instances()}, key=lambda n: (-len(n), n))
    parts = [re.escape(name) for name in names] + [pattern.pattern.lower() for pattern, _ in gpu_skus()]
    return "(" + "|".join(parts) + ")"


def literal(moment_: datetime) -> str:
    """A window bound as a UTC TIMESTAMP literal."""
    if moment_.tzinfo is None:
        moment_ = moment_.replace(tzinfo=timezone.utc)
    text = moment_.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return f"CAST('{text}' AS TIMESTAMP)"


def months(start: datetime, end: datetime) -> list[tuple[int, int]]:
    """(year, month) of every month the window [start, end) touches (UTC)."""
    start, last = (m.astimezone(timezone.utc) if m.tzinfo else m for m in (start, end - timedelta(microseconds=1)))
    out, year, month = [], start.year, start.month
    while (year, month) <= (last.year, last.month):
        out.append((year, month))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def partition_filter(plan_: Plan, start: datetime, end: datetime) -> str | None:
    """SQL pruning the table's partitions to the window's months, or None."""
    if plan_.partitions is None or end <= start:
        return None
    spans = months(start, end)
    lowered = {name.lower(): name for name, _ in plan_.columns}
    kinds = plan_.kinds
    if plan_.partitions == "billing_period":
        column = lowered["billing_period"]
        if kinds[column] != "text":
            return None
        first, last = (f"{y:04d}-{m:02d}" for y, m in (spans[0], spans[-1]))
        return f"{ident(column)} BETWEEN '{first}' AND '{last}'"
    year, month = lowered["year"], lowered["month"]
    as_text = kinds[year] == "text" and kinds[month] == "text"
    if not as_text and not (kinds[year] == "integer" and kinds[month] == "integer"):
        return None
    if len(spans) > MAX_LISTED_MONTHS:
        low, high = spans[0][0], spans[-1][0]
        return (f"{ident(year)} BETWEEN '{low}' AND '{high}'" if as_text
                else f"{ident(year)} BETWEEN {low} AND {high}")
    terms = []
    for y, m in spans:
        if as_text:
            terms.append(f"({ident(year)} = '{y}' AND {ident(month)} IN ('{m}', '{m:02d}'))")
        else:
            terms.append(f"({ident(year)} = {y} AND {ident(month)} = {m})")
    return "(" + " OR ".join(terms) + ")"


def aggregate_query(plan_: Plan, start: datetime, end: datetime) -> exp.Expr:
    """THE query: the CUR table summed by every key the mapping reads, over the window.

    Returned with pseudo-functions (money_*, ts_*, map_*) and the stand-in table ``cur_table``;
    :func:`render` spells them for a dialect.
    """
    refs, aliases = dict(plan_.fields), dict(plan_.aliases)
    missing = plan_.missing
    if missing:
        raise UsageError(f"not a CUR table: no column(s) {', '.join(missing)}")

    def kind(field: str) -> str:
        return field_kind(plan_, field)

    line: list[str] = []       # columns of each CUR line
    keys: list[str] = []       # output aliases grouped by
    sums: list[str] = []
    for field in KEYS + RATES:
        if field not in refs:
            continue
        alias = ident(aliases[field])
        if field in RATES and kind(field) in ("double", "decimal", "integer"):
            line.append(f"CAST({money(refs[field], kind(field))} AS VARCHAR) AS {alias}")
        else:
            line.append(f"{text_or_null(refs[field])} AS {alias}")
        keys.append(alias)
    for name in plan_.tags:
        line.append(f"{text_or_null(ident(name))} AS {ident(name)}")
        keys.append(ident(name))
    if plan_.tag_map:
        line.append(f"map_json({ident(plan_.tag_map)}) AS {ident(plan_.tag_map)}")
        keys.append(ident(plan_.tag_map))
    for field in SUMMED:
        if field in refs:
            line.append(f"{money(refs[field], kind(field))} AS {ident(aliases[field])}")
            sums.append(ident(aliases[field]))
    start_col, end_col = (ident(aliases[f]) for f in sql.PERIOD)
    line.append(f"{moment(refs[sql.PERIOD[0]], kind(sql.PERIOD[0]))} AS _start")
    line.append(f"{moment(refs[sql.PERIOD[1]], kind(sql.PERIOD[1]))} AS _end")
    text = " || ' ' || ".join(f"coalesce(lower({text_or_null(refs[f])}), '')" for f in (
        "product_instance_type", "line_item_usage_type", "line_item_line_item_description",
        "line_item_resource_id", "product_sku") if f in refs)
    line.append(f"coalesce(regexp_matches({text}, {quote_text(gpu_pattern())}), FALSE) AS _gpu")
    resource = text_or_null(refs["line_item_resource_id"]) if "line_item_resource_id" in refs else "NULL"
    line.append(f"{resource} AS _resource")
    line.append(f"{text_or_null(refs['line_item_line_item_type'])} AS t")  # as cur_sql.base_columns reads it
    credit = f"coalesce({sql.base_columns()['ChargeCategory']} IN ({CREDITED}), FALSE)"

    lo, hi = literal(start), literal(end)
    start_sql = moment(refs[sql.PERIOD[0]], kind(sql.PERIOD[0]))
    end_sql = moment(refs[sql.PERIOD[1]], kind(sql.PERIOD[1]))
    scan_where = [f"{start_sql} < {hi}", f"({start_sql} >= {lo} OR {end_sql} > {lo})"]
    pruned = partition_filter(plan_, start, end)
    if pruned:
        scan_where.insert(0, pruned)

    # a line straddling an edge of the window keeps its period too (connectors.billing.clip clips it)
    straddles = f"(_start < {lo} AND _end > {lo}) OR (_start < {hi} AND _end > {hi})"
    group = keys + [f"CASE WHEN _apart OR {straddles} THEN _start END",
                    f"CASE WHEN _apart OR {straddles} THEN _end END",
                    "CASE WHEN _apart THEN NULL ELSE date_trunc('day', _start) END"]
    outputs = keys + [f"strftime(min(_start), '{PERIOD_FORMAT}') AS {start_col}",
                      f"strftime(max(_end), '{PERIOD_FORMAT}') AS {end_col}"]
    outputs += [f"CAST(sum({name}) AS VARCHAR) AS {name}" for name in sums]
    outputs.append(f"CAST(count(*) AS VARCHAR) AS {LINES}")
    order = ", ".join(f"{n} NULLS FIRST" for n in [start_col, end_col] + keys + sums + [LINES])
    text_sql = f"""
    WITH cur_line AS (
      SELECT {', '.join(line)}
      FROM {STAND_IN} AS c
      WHERE {' AND '.join(scan_where)}
    ), apart_line AS (
      SELECT *, CASE WHEN _resource IS NOT NULL THEN bool_or(_gpu OR {credit}) OVER (PARTITION BY _resource)
                ELSE _gpu END AS _apart
      FROM cur_line
    )
    SELECT {', '.join(outputs)}
    FROM apart_line
    GROUP BY {', '.join(group)}
    ORDER BY {order}
    """
    return sqlglot.parse_one(text_sql, read="duckdb")


def field_kind(plan_: Plan, field: str) -> str:
    """How CUR field ``field`` of the table is typed (a field read from the ``product`` MAP: text)."""
    ref = dict(plan_.fields)[field]
    return plan_.kinds.get(dict(plan_.aliases)[field], "text") if ref.startswith('"') else "text"


def extent_query(plan_: Plan) -> exp.Expr:
    """The first usage start and the last usage end of every line of the table (every partition),
    as ``PERIOD_FORMAT`` text (``first``, ``last``): asked only where the window holds no line, so
    that the refusal says where the lines lie (rule 5)."""
    refs = dict(plan_.fields)
    first, last = (moment(refs[field], field_kind(plan_, field)) for field in sql.PERIOD)
    return sqlglot.parse_one(f"SELECT strftime(min({first}), '{PERIOD_FORMAT}') AS first, "
                             f"strftime(max({last}), '{PERIOD_FORMAT}') AS last FROM {STAND_IN} AS c", read="duckdb")


def render(tree: exp.Expr, dialect: str, table: str, pretty: bool = False) -> str:
    """The query as SQL of ``dialect`` over ``table`` (``[catalog.][schema.]table`` or a
    DuckDB view name)."""
    if dialect not in DIALECTS:
        raise UsageError(f"unknown dialect {dialect!r}; known: {', '.join(DIALECTS)}")
    tree = tree.copy()
    set_table(tree, table, dialect, STAND_IN)
    spell_pseudo(tree, PSEUDO, dialect)
    return tree.sql(dialect=dialect, pretty=pretty)


def spell_pseudo(tree: exp.Expr, pseudo: dict[str, dict[str, str]], dialect: str) -> None:
    """Replace each call of a pseudo-function of ``pseudo`` (name → {dialect: format text of its
    arguments' SQL}) by its spelling in ``dialect``, innermost first."""
    for call in reversed(list(tree.find_all(exp.Anonymous, bfs=False))):
        spelling = pseudo.get(call.name.lower())
        if spelling is None:
            continue
        args = [arg.sql(dialect=dialect) for arg in call.expressions]
        call.replace(sqlglot.parse_one(spelling[dialect].format(*args), read=dialect))
