"""One query that sums a FOCUS table where it lives (Athena / Trino, BigQuery, or DuckDB).

The ``athena`` and ``gcp_billing`` connectors read a FOCUS table in place when its columns are
FOCUS columns (:func:`is_focus`: the mandatory ones, matched case-insensitively, as AWS Data
Exports' FOCUS table in Glue spells them in lower case). The query is built once per table layout
and window as a sqlglot expression (:func:`aggregate_query`) and rendered for ``duckdb``,
``trino`` or ``bigquery`` by :func:`render`. Its rows carry FOCUS names, so the FOCUS connector
checks, windows and normalises them as it does the rows of a file
(:func:`connectors.billing.focus.load_focus_named` + ``read_focus_table``); summing is linear, and
the FOCUS reader sums the same lines again by the same keys, so the lines it makes are those of
the file read locally.

* **Keys.** Every column the FOCUS reader reads (``focus_load.KNOWN_COLUMNS`` but the line ids
  ``Id`` / ``x_Id``, which would keep every line apart), every ``x_*`` column and the other extra
  columns, as text (null literals ``''``, ``NULL``, ``null``, ``\\N`` as NULL). A MAP (Athena's
  ``tags``, ``x_discounts``) or any other non-scalar column comes as its JSON text; the unit
  prices ListUnitPrice / ContractedUnitPrice, when numeric, as the text of their exact decimal.
  Output names are the FOCUS spellings (an ``x_*`` column AWS names: its FOCUS-export spelling,
  :data:`X_NAMES`), whatever the table's case.
* **Period.** Every line keeps its charge period (grouped by its start and end): lines are summed
  only with lines of the same period, and the FOCUS reader then sums them by the day where no
  GPU rule needs the hour (its rules are not rendered here).
* **Money.** BilledCost, EffectiveCost, ListCost, ContractedCost, PricingQuantity and
  ConsumedQuantity are summed exactly, converted per line before the sum: DECIMAL(38, 18) in
  DuckDB (a DOUBLE through its shortest text) and Trino (``CAST(x AS DECIMAL(38, 18))``, the
  shortest decimal of a double); in BigQuery NUMERIC through the text of the value
  (``PARSE_NUMERIC(CAST(x AS STRING))``, as in ``gcp_sql``: never a sum over FLOAT64; nine
  decimal places). Each sum comes back as text.
* **Window.** Lines whose charge period overlaps [start, end) in UTC (a zero-length period counts
  when its instant lies in it), as the FOCUS reader keeps them.
* **Output.** Every column as text, the period as ``YYYY-MM-DDTHH:MM:SSZ``, plus ``_n`` (the
  lines summed), ordered by every column: the same rows in the same order on every engine.
"""
from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from connectors.billing.cur_aggregate import PERIOD_FORMAT, kind_of, literal, spell_pseudo
from connectors.billing.focus_load import (
    DECIMAL_FIELDS,
    EXTRA_COLUMNS,
    ID_COLUMNS,
    KNOWN_COLUMNS,
    MANDATORY,
    MONEY_FIELDS,
    PERIOD,
    null_expr,
)
from connectors.billing.gcp_sql import set_table
from connectors.duck import quote_ident as ident
from schemas.errors import UsageError

DIALECTS = ("duckdb", "trino", "bigquery")
MONEY = "DECIMAL(38, 18)"
LINES = "_n"
STAND_IN = "focus_table"
SUMMED = tuple(name for name in (*MONEY_FIELDS.values(), *DECIMAL_FIELDS.values())
               if name not in ("ListUnitPrice", "ContractedUnitPrice"))
UNIT_PRICES = ("ListUnitPrice", "ContractedUnitPrice")
#: ``x_*`` and extra columns of AWS's FOCUS exports, spelled as the export's CSV spells them (Glue lower-cases them)
X_NAMES = {name.lower(): name for name in (
    "x_CostCategories", "x_Discounts", "x_Operation", "x_ServiceCode", "x_UsageType",
    "x_InstanceType", "x_ArmSkuName", "x_SkuMeterName", "x_SkuDescription",
    "CapacityReservationId", "CapacityReservationStatus")}

# Pseudo-functions of the query and their spelling per dialect ({0}: the argument's SQL).
PSEUDO = {
    "money_text": {"duckdb": f"CAST({{0}} AS {MONEY})", "trino": f"CAST({{0}} AS {MONEY})",
                   "bigquery": "PARSE_NUMERIC({0})"},
    "money_number": {"duckdb": f"CAST(CAST({{0}} AS VARCHAR) AS {MONEY})", "trino": f"CAST({{0}} AS {MONEY})",
                     "bigquery": "PARSE_NUMERIC(CAST({0} AS STRING))"},
    "as_text": {"duckdb": "CAST({0} AS VARCHAR)", "trino": "CAST({0} AS VARCHAR)",
                "bigquery": "CAST({0} AS STRING)"},
    "ts_text": {"duckdb": "timezone('UTC', CAST({0} AS TIMESTAMPTZ))",
                "trino": "CAST(from_iso8601_timestamp(replace(trim({0}), ' ', 'T')) AT TIME ZONE 'UTC' AS TIMESTAMP)",
                "bigquery": "CAST({0} AS TIMESTAMP)"},
    "ts_local": {"duckdb": "CAST({0} AS TIMESTAMP)", "trino": "CAST({0} AS TIMESTAMP)",
                 "bigquery": "CAST({0} AS TIMESTAMP)"},
    "ts_zoned": {"duckdb": "timezone('UTC', {0})", "trino": "CAST({0} AT TIME ZONE 'UTC' AS TIMESTAMP)",
                 "bigquery": "CAST({0} AS TIMESTAMP)"},
    "bound": {"duckdb": "CAST({0} AS TIMESTAMP)", "trino": "CAST({0} AS TIMESTAMP)",
              "bigquery": "CAST({0} AS TIMESTAMP)"},
    "period_text": {"duckdb": f"strftime({{0}}, '{PERIOD_FORMAT}')",
                    "trino": "date_format({0}, '%Y-%m-%dT%H:%i:%sZ')",
                    "bigquery": f"FORMAT_TIMESTAMP('{PERIOD_FORMAT}', {{0}}, 'UTC')"},
    "json_text": {"duckdb": "CAST(to_json({0}) AS VARCHAR)", "trino": "json_format(CAST({0} AS JSON))",
                  "bigquery": "TO_JSON_STRING({0})"},
}


@dataclass(frozen=True)
class Plan:
    """A table's columns resolved to the FOCUS reader's: (output name, table column, kind) of each
    key, summed and period column. ``kind``: :func:`connectors.billing.cur_aggregate.kind_of`."""

    columns: tuple[tuple[str, str], ...]
    keys: tuple[tuple[str, str, str], ...]
    sums: tuple[tuple[str, str, str], ...]
    period: tuple[tuple[str, str, str], ...]

    @property
    def missing(self) -> list[str]:
        """Mandatory FOCUS columns the table lacks."""
        found = {name for name, _, _ in self.keys + self.sums + self.period}
        return [name for name in MANDATORY if name not in found]

    @property
    def names(self) -> list[str]:
        """The output columns, in order (what the query returns)."""
        return [name for name, _, _ in self.keys] + [n for n, _, _ in self.period] + \
            [n for n, _, _ in self.sums] + [LINES]


def plan(columns: list[tuple[str, str]]) -> Plan:
    """Resolve a table's columns (name, type: Glue / Hive, Trino, BigQuery or DuckDB spelling)."""
    known = {name.lower(): name for name in KNOWN_COLUMNS if name not in ID_COLUMNS}
    keys, sums, period = [], [], []
    for column, dtype in columns:
        lowered, kind = column.lower(), kind_of(dtype)
        if lowered in (i.lower() for i in ID_COLUMNS):
            continue
        name = known.get(lowered)
        if name in PERIOD:
            period.append((name, column, kind))
        elif name in SUMMED:
            sums.append((name, column, kind))
        elif name is not None:
            keys.append((name, column, kind))
        elif lowered.startswith("x_") or lowered in EXTRA_COLUMNS:
            keys.append((X_NAMES.get(lowered, column), column, kind))
    period.sort(key=lambda item: PERIOD.index(item[0]))
    return Plan(tuple(columns), tuple(keys), tuple(sums), tuple(period))


def is_focus(columns: list[tuple[str, str]]) -> bool:
    """Whether a table with these (name, type) columns is a FOCUS table (its mandatory columns)."""
    return not plan(columns).missing


def nearest(columns: list[tuple[str, str]], wanted: tuple[str, ...]) -> list[str]:
    """The table's column names closest to each of ``wanted`` (for an error: what was found)."""
    import difflib

    names = [name for name, _ in columns]
    found = []
    for name in wanted:
        match = difflib.get_close_matches(name.lower(), [n.lower() for n in names], n=1, cutoff=0.5)
        if match:
            found.append(next(n for n in names if n.lower() == match[0]))
    return list(dict.fromkeys(found))


def key_sql(name: str, column: str, kind: str) -> str:
    """SQL (pseudo-functions): one key column as text, NULL for a null literal."""
    ref = ident(column)
    if name in UNIT_PRICES and kind in ("double", "decimal", "integer"):
        return f"as_text(money_number({ref}))"
    if kind == "text":
        return null_expr(ref)
    if kind in ("map", "other"):
        return f"json_text({ref})"
    return f"as_text({ref})"


def money(column: str, kind: str) -> str:
    """SQL (pseudo-functions): one amount as an exact decimal."""
    ref = ident(column)
    if kind in ("double", "decimal", "integer"):
        return f"money_number({ref})"
    return f"money_text({null_expr(f'trim({ref})')})"


def moment(column: str, kind: str) -> str:
    """SQL (pseudo-functions): a charge period bound as a TIMESTAMP in UTC."""
    ref = ident(column)
    if kind == "timestamp":
        return f"ts_local({ref})"
    if kind == "timestamptz":
        return f"ts_zoned({ref})"
    return f"ts_text({null_expr(ref)})"


def bound(moment_) -> str:
    """SQL (pseudo-function): a window bound as a UTC TIMESTAMP."""
    return f"bound({literal(moment_).removeprefix('CAST(').removesuffix(' AS TIMESTAMP)')})"


def aggregate_query(plan_: Plan, start, end) -> exp.Expr:
    """THE query: the FOCUS table's lines of the window summed by every key the reader reads and
    their charge period. Returned with pseudo-functions and the stand-in table ``focus_table``;
    :func:`render` spells them for a dialect."""
    if plan_.missing:
        raise UsageError(f"not a FOCUS table: no column(s) {', '.join(plan_.missing)}")
    line = [f"{key_sql(*key)} AS {ident(key[0])}" for key in plan_.keys]
    line += [f"{money(column, kind)} AS {ident(name)}" for name, column, kind in plan_.sums]
    (_, start_col, start_kind), (_, end_col, end_kind) = plan_.period
    start_sql, end_sql = moment(start_col, start_kind), moment(end_col, end_kind)
    line += [f"{start_sql} AS _start", f"{end_sql} AS _end"]
    lo, hi = (bound(moment_) for moment_ in (start, end))
    keys = [ident(name) for name, _, _ in plan_.keys]
    sums = [ident(name) for name, _, _ in plan_.sums]
    period = [ident(name) for name, _, _ in plan_.period]
    outputs = keys + [f"period_text(_start) AS {period[0]}", f"period_text(_end) AS {period[1]}"]
    outputs += [f"as_text(sum({name})) AS {name}" for name in sums]
    outputs.append(f"as_text(count(*)) AS {LINES}")
    order = ", ".join(f"{n} NULLS FIRST" for n in period + keys + sums + [LINES])
    text = f"""
    SELECT * FROM (
    WITH focus_line AS (
      SELECT {', '.join(line)}
      FROM {STAND_IN} AS f
      WHERE {start_sql} < {hi} AND ({start_sql} >= {lo} OR {end_sql} > {lo})
    )
    SELECT {', '.join(outputs)}
    FROM focus_line
    GROUP BY {', '.join(keys + ['_start', '_end'])}
    ) AS g
    ORDER BY {order}
    """
    return sqlglot.parse_one(text, read="duckdb")


def extent_query(plan_: Plan) -> exp.Expr:
    """The first charge period start and the last end of the whole table, as ``PERIOD_FORMAT``
    text (``first``, ``last``): asked only where the window holds no line (rule 5)."""
    (_, start_col, start_kind), (_, end_col, end_kind) = plan_.period
    return sqlglot.parse_one(f"SELECT period_text(min({moment(start_col, start_kind)})) AS first, "
                             f"period_text(max({moment(end_col, end_kind)})) AS last FROM {STAND_IN} AS f",
                             read="duckdb")


def render(tree: exp.Expr, dialect: str, table: str, pretty: bool = False) -> str:
    """The query as SQL of ``dialect`` over ``table`` (``[catalog.][schema.]table``, BigQuery
    ``project.dataset.table``, or a DuckDB view name)."""
    if dialect not in DIALECTS:
        raise UsageError(f"unknown dialect {dialect!r}; known: {', '.join(DIALECTS)}")
    tree = tree.copy()
    set_table(tree, table, dialect, STAND_IN)
    spell_pseudo(tree, PSEUDO, dialect)
    return tree.sql(dialect=dialect, pretty=pretty)
