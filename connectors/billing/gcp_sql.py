"""Billing aggregations written once, rendered with sqlglot for DuckDB, BigQuery and Trino (Athena).

Each query (:data:`QUERIES`) is DuckDB-dialect SQL text over a stand-in table name; :func:`render`
parses it, puts in the real table and the window, applies the few rewrites a dialect needs and
prints it in that dialect. The same query therefore gives the same numbers whichever engine runs it.
A name, dialect, grain or table name :func:`render` does not take is a ``UsageError``.

Conventions of every query:

* Money is ``DECIMAL(38, 9)`` (BigQuery ``NUMERIC``: 29 integer and 9 fractional digits), converted
  per row before it is summed, so no sum ever runs over FLOAT64 / DOUBLE. The GCP export stores
  ``cost`` and ``credits.amount`` as FLOAT64; each row is rounded to 9 decimal places (half away
  from zero in every engine), far below the micro-units GCP bills in.
* The window [start, end) is compared in UTC.
* Pseudo-function ``json_text(x)``: x as a JSON string literal (BigQuery ``TO_JSON_STRING``,
  DuckDB ``to_json``, Trino ``json_format``).
* Pseudo-function ``money(x)``: x as an exact decimal with 9 places, through the shortest text of
  the value: DuckDB ``CAST(CAST(x AS VARCHAR) AS DECIMAL(38, 9))``, BigQuery
  ``PARSE_NUMERIC(CAST(x AS STRING))``, Trino ``CAST(x AS DECIMAL(38, 9))``. Text, NUMERIC and
  DECIMAL inputs pass unchanged; a FLOAT64 / DOUBLE becomes the decimal its writer meant. DuckDB's
  direct DOUBLE → DECIMAL cast is off in the last digits above about 10^7 (2.57e15 becomes
  2570000000000000.230686720). BigQuery's CAST to NUMERIC(38, 9) is not used because BigQuery
  allows type parameters on columns only, and the bare NUMERIC is what BigQuery emulators map to
  DuckDB's DECIMAL(18, 3) (3 decimal places).

Dialect rewrites (same results, different spelling):

* DuckDB: a correlated aggregate over an array, ``(SELECT SUM(f(c)) FROM UNNEST(a) AS _c(c)
  WHERE p(c))``, becomes ``list_sum(list_transform(list_filter(a, p), f))`` (and ``MAX``,
  ``STRING_AGG`` likewise). DuckDB runs correlated UNNEST subqueries about a hundred times slower
  than list lambdas (1.4 s against 0.03 s for a million rows here); the value is the same, NULL
  for an empty or NULL array included. ``STRING_AGG(... ORDER BY key)`` sorts the rendered
  ``"key":"value"`` texts, which is the key order for GCP label keys (lower-case letters, digits,
  ``_`` and ``-``, all above the ``"`` that closes a key).
* Trino: rendered and parsed only. Trino's UNNEST of an ``ARRAY(ROW(...))`` yields one column per
  field, so ``gcp_lines`` (which unnests STRUCT arrays) is not meant for Athena: GCP exports live
  in BigQuery or in local files. ``billing_totals`` has no UNNEST and runs anywhere.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from functools import lru_cache

import sqlglot
from sqlglot import exp

from connectors.billing.catalogue import GCP_MACHINE_RE, gpu_instances
from connectors.billing.gpu_sql import gpu_meter_sql
from connectors.duck import quote_text
from schemas.errors import UsageError

DIALECTS = ("duckdb", "bigquery", "trino")
GRAINS = ("hour", "day")
STAND_IN = "billing_source"

# credits.type values of the GCP export; any other (or a NULL type) lands in credit_other, which
# the connector computes as credit_total minus these, so no credit is ever dropped.
CREDIT_TYPES = (
    "COMMITTED_USAGE_DISCOUNT", "COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE", "DISCOUNT", "FREE_TIER",
    "PROMOTION", "RESELLER_MARGIN", "SUBSCRIPTION_BENEFIT", "SUSTAINED_USAGE_DISCOUNT",
    "FEE_UTILIZATION_OFFSET",
)
# The grouping keys of gcp_lines, in output order. ``alone_end``: the end of a row whose period
# straddles an edge of the window (NULL for every other row), so that such a row is summed only
# with rows of its own period (see :data:`BUCKET`).
GCP_KEYS = (
    "bucket", "alone_end", "billing_account_id", "project_id", "service_id", "service_description", "sku_id",
    "sku_description", "resource_name", "region", "cost_type", "currency", "invoice_month",
    "usage_unit", "pricing_unit", "labels", "machine_spec",
)
GCP_SUMS = ("cost", "usage_amount", "pricing_quantity", "credit_total")
#: the list-price cost of a group (the export's ``cost_at_list``): known only where every row of the
#: group has one (a partial sum would be a wrong list total, never a smaller known one), else NULL
LIST_COST = "list_cost"
#: the largest currency_conversion_rate (US dollars to the billing currency) of a group's rows:
#: a spend-based commitment states its committed amount in dollars (gcp_commitments)
CONVERSION_RATE = "conversion_rate"



def known_sum(column: str) -> str:
    """SQL: the sum of ``column`` over a group where every row has a value, else NULL."""
    return f"CASE WHEN COUNT({column}) = COUNT(*) THEN SUM({column}) END"


_CREDIT_COLUMNS = ",\n    ".join(
    f"COALESCE((SELECT SUM(money(c.amount)) FROM UNNEST(e.credits) AS _c(c) "
    f"WHERE c.type = '{kind}'), 0) AS credit_{kind.lower()}" for kind in CREDIT_TYPES)

# GCP Cloud Billing export (standard gcp_billing_export_v1_* or detailed
# gcp_billing_export_resource_v1_*) aggregated by time bucket (:data:`BUCKET`) and every key the
# audit needs. invoice.month is the invoice's month in US Pacific time (a row of 00:00-08:00 UTC on
# the 1st belongs to the previous invoice month); it is kept as a key. A row is read where its usage
# period overlaps the window (UTC), as every billing reader keeps lines: the FOCUS reader clips one
# that straddles an edge (connectors.billing.clip). Credits are summed per row by a correlated
# subquery, never joined. ``{gpu_row}`` is :func:`gpu_row_sql` at grain day, FALSE at grain hour.
GCP_LINES = f"""
WITH export_line AS (
  SELECT
    e.usage_start_time AS usage_start,
    e.usage_end_time AS usage_end,
    (e.usage_start_time < CAST(:start AS TIMESTAMPTZ) AND e.usage_end_time > CAST(:start AS TIMESTAMPTZ))
      OR (e.usage_start_time < CAST(:end AS TIMESTAMPTZ) AND e.usage_end_time > CAST(:end AS TIMESTAMPTZ))
      AS straddles,
    COALESCE(e.billing_account_id, '') AS billing_account_id,
    COALESCE(e.project.id, '') AS project_id,
    COALESCE(e.service.id, '') AS service_id,
    COALESCE(e.service.description, '') AS service_description,
    COALESCE(e.sku.id, '') AS sku_id,
    COALESCE(e.sku.description, '') AS sku_description,
    COALESCE(e.resource.name, '') AS resource_name,
    COALESCE(e.location.region, e.location.location, '') AS region,
    COALESCE(e.cost_type, 'regular') AS cost_type,
    e.currency AS currency,
    COALESCE(e.invoice.month, '') AS invoice_month,
    COALESCE(e.usage.unit, '') AS usage_unit,
    COALESCE(e.usage.pricing_unit, '') AS pricing_unit,
    '{{' || COALESCE((SELECT string_agg(json_text(l.key) || ':' || json_text(l.value), ','
                                       ORDER BY l.key NULLS FIRST)
                      FROM UNNEST(e.labels) AS _l(l)), '') || '}}' AS labels,
    COALESCE((SELECT MAX(s.value) FROM UNNEST(e.system_labels) AS _s(s)
              WHERE s.key = 'compute.googleapis.com/machine_spec'), '') AS machine_spec,
    money(e.cost) AS cost,
    money(e.cost_at_list) AS {LIST_COST},
    money(e.usage.amount) AS usage_amount,
    money(e.usage.amount_in_pricing_units) AS pricing_quantity,
    COALESCE((SELECT SUM(money(c.amount)) FROM UNNEST(e.credits) AS _c(c)), 0)
      AS credit_total,
    {_CREDIT_COLUMNS},
    money(e.currency_conversion_rate) AS {CONVERSION_RATE}
  FROM {STAND_IN} AS e
  WHERE e.usage_start_time < CAST(:end AS TIMESTAMPTZ)
    AND (e.usage_start_time >= CAST(:start AS TIMESTAMPTZ) OR e.usage_end_time > CAST(:start AS TIMESTAMPTZ))
),
gpu_line AS (
  SELECT *, {{gpu_row}} AS gpu_row FROM export_line
),
bucketed AS (
  SELECT *, {{bucket}} AS bucket,
    CASE WHEN straddles THEN usage_end END AS alone_end
  FROM gpu_line
)
SELECT
  {", ".join(GCP_KEYS)},
  MIN(usage_start) AS period_start,
  MAX(usage_end) AS period_end,
  {", ".join(f"SUM({name}) AS {name}" for name in GCP_SUMS)},
  {", ".join(f"SUM(credit_{kind.lower()}) AS credit_{kind.lower()}" for kind in CREDIT_TYPES)},
  MAX({CONVERSION_RATE}) AS {CONVERSION_RATE},
  {known_sum(LIST_COST)} AS {LIST_COST},
  COUNT(*) AS export_rows
FROM bucketed
GROUP BY {", ".join(GCP_KEYS)}
"""

#: the time bucket of an export row, by grain. Hour: the hour of its start. Day: the UTC day of its
#: start, but for a row that may bill GPU time (``gpu_row``, or any row of a resource that has one:
#: the core and RAM parts of a GPU machine), which keeps its hour: METHOD §3 prices each GPU-interval
#: at the line that bills it, and a day's GPU cost and credits summed over 24 hours would move money
#: between the hours (and so between buckets). In both grains a row whose period straddles an edge
#: of the window is summed only with rows of its own period (its start here, its end ``alone_end``):
#: connectors.billing.clip clips it pro rata by its own period, which a sum with rows of other hours
#: (a sustained-use credit is not even over the day) would not be.
BUCKET = {
    "hour": "CASE WHEN straddles THEN usage_start ELSE date_trunc('hour', usage_start) END",
    "day": ("CASE WHEN straddles THEN usage_start "
            "WHEN (CASE WHEN resource_name <> '' THEN bool_or(gpu_row) OVER (PARTITION BY resource_name) "
            "ELSE gpu_row END) THEN date_trunc('hour', usage_start) "
            "ELSE date_trunc('day', usage_start) END"),
}


def gpu_row_sql() -> str:
    """SQL: whether an export row may bill GPU time, by the GPU rules of the FOCUS reader
    (connectors.billing.focus_lines.mark_timed, the shipped catalogue): a per-GPU meter in the SKU
    description, or a machine type with GPUs named in the SKU description, resource name or SKU id;
    here also the ``machine_spec`` system label, which a standard export (no resource) still has.
    DuckDB-dialect functions that sqlglot spells for every engine."""
    machines = ", ".join(quote_text(name) for name in sorted(gpu_instances()))
    text = "lower(sku_description || ' ' || resource_name || ' ' || sku_id)"
    named = f"nullif(regexp_extract({text}, {quote_text(GCP_MACHINE_RE.pattern)}, 1), '')"
    return (f"(({gpu_meter_sql('sku_description')}) IS NOT NULL "
            f"OR COALESCE(nullif(machine_spec, ''), {named}, '') IN ({machines}))")


# Totals by charge category, service and currency over a FOCUS-named table or view (the quick
# look of `costaudit billing`). Lines are kept as the FOCUS connector keeps them: the charge
# period overlaps the window (a zero-length period counts when its instant lies in it).
BILLING_TOTALS = f"""
SELECT
  COALESCE(ChargeCategory, '') AS charge_category,
  COALESCE(ServiceName, '') AS service_name,
  BillingCurrency AS currency,
  SUM(money(BilledCost)) AS billed_cost,
  SUM(money(EffectiveCost)) AS effective_cost,
  COUNT(*) AS lines
FROM {STAND_IN} AS f
WHERE CAST(ChargePeriodStart AS TIMESTAMPTZ) < CAST(:end AS TIMESTAMPTZ)
  AND (CAST(ChargePeriodStart AS TIMESTAMPTZ) >= CAST(:start AS TIMESTAMPTZ)
       OR CAST(ChargePeriodEnd AS TIMESTAMPTZ) > CAST(:start AS TIMESTAMPTZ))
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
"""

#: query name → its DuckDB-dialect SQL text (what :func:`render` parses and spells for a dialect)
QUERIES = {"gcp_lines": GCP_LINES, "billing_totals": BILLING_TOTALS}


def render(name: str, dialect: str, *, table: str, start: datetime, end: datetime,
           grain: str = "hour", detailed: bool = True, list_cost: bool = True,
           partition_slack_days: int | None = None, list_lambdas: bool = True) -> str:
    """The query ``name`` as SQL of ``dialect`` over ``table`` for the window [start, end).

    ``table``: a DuckDB table or view name, ``project.dataset.table`` (BigQuery) or
    ``[catalog.]schema.table`` (Trino). gcp_lines only: ``grain`` (hour or day); ``detailed=False``
    for a standard export, which has no ``resource`` column (ResourceId is then empty);
    ``list_cost=False`` for an export without ``cost_at_list`` (read as NULL: the list cost unknown);
    ``partition_slack_days`` (BigQuery) also filters ``_PARTITIONTIME`` to [start − 1 day,
    end + slack days): far fewer bytes, at the price of rows exported later than the slack.
    ``list_lambdas=False`` keeps DuckDB's correlated subqueries as written (slow; for checking the
    rewrite).
    """
    if name not in QUERIES:
        raise UsageError(f"unknown query {name!r}; known: {', '.join(sorted(QUERIES))}")
    if dialect not in DIALECTS:
        raise UsageError(f"unknown dialect {dialect!r}; known: {', '.join(DIALECTS)}")
    if grain not in GRAINS:
        raise UsageError(f"unknown grain {grain!r}; known: {', '.join(GRAINS)}")
    tree = _parsed(name, grain).copy()
    tree = exp.replace_placeholders(tree, start=_timestamp(start), end=_timestamp(end))
    set_table(tree, table, dialect)
    if not detailed:
        _drop_columns(tree, lambda column: column.table == "resource", "VARCHAR")
    if not list_cost:
        _drop_columns(tree, lambda column: column.name == "cost_at_list", "DOUBLE")
    if partition_slack_days is not None:
        tree = _partition_filter(tree, dialect, start, end, int(partition_slack_days))
    tree = tree.transform(_json_text).transform(lambda node: _money(node, dialect))
    if dialect == "duckdb" and list_lambdas:
        tree = tree.transform(_unnest_to_list)
    return tree.sql(dialect=dialect, pretty=True)


@lru_cache(maxsize=None)
def _parsed(name: str, grain: str) -> exp.Expr:
    """The query parsed once per grain (callers copy it)."""
    text = QUERIES[name].replace("{bucket}", BUCKET[grain])
    return sqlglot.parse_one(text.replace("{gpu_row}", gpu_row_sql() if grain == "day" else "FALSE"), read="duckdb")


def _timestamp(moment: datetime) -> exp.Literal:
    """A window bound as UTC text every dialect casts to a timestamp ('... UTC')."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    text = moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")
    return exp.Literal.string(f"{text} UTC")


def set_table(tree: exp.Expr, table: str, dialect: str, stand_in: str = STAND_IN) -> None:
    """Put the real table (quoted parts, :func:`split_table`) where the stand-in is, keeping its alias."""
    parts = split_table(table, dialect)
    for node in tree.find_all(exp.Table):
        if node.name != stand_in:
            continue
        names = dict(zip(("this", "db", "catalog"), [exp.to_identifier(p, quoted=True)
                                                      for p in reversed(parts)]))
        for key in ("this", "db", "catalog"):
            node.set(key, names.get(key))


def split_table(table: str, dialect: str) -> list[str]:
    """Parts of a table name: BigQuery ``project.dataset.table`` (a domain-scoped project such as
    ``example.com:proj`` keeps its dot), else one to three dot-separated names."""
    text = table.strip().strip("`")
    if dialect == "bigquery":
        parts = text.rsplit(".", 2)
        if len(parts) != 3 or not all(parts):
            raise UsageError(f"BigQuery table {table!r} is not project.dataset.table")
        return parts
    parts = [p.strip('"') for p in text.split(".")]
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise UsageError(f"table {table!r} is not [catalog.][schema.]table")
    return parts


def _drop_columns(tree: exp.Expr, absent, kind: str) -> None:
    """Replace every column the export lacks (``absent(column)``: e.g. the fields of ``resource``,
    or ``cost_at_list``) by a NULL of type ``kind``."""
    for column in list(tree.find_all(exp.Column)):
        if absent(column):
            column.replace(exp.cast(exp.null(), exp.DataType.build(kind)))


def _partition_filter(tree: exp.Expr, dialect: str, start: datetime, end: datetime,
                      slack_days: int) -> exp.Expr:
    """AND a _PARTITIONTIME range onto the scan of the export (BigQuery only)."""
    if dialect != "bigquery":
        raise UsageError("partition_slack_days applies to BigQuery export tables only")
    low = _timestamp(start)
    low_sql = f"TIMESTAMP_SUB(CAST({low.sql()} AS TIMESTAMP), INTERVAL 1 DAY)"
    high_sql = f"TIMESTAMP_ADD(CAST({_timestamp(end).sql()} AS TIMESTAMP), INTERVAL {slack_days} DAY)"
    condition = sqlglot.parse_one(f"_PARTITIONTIME >= {low_sql} AND _PARTITIONTIME < {high_sql}",
                                  read="bigquery")
    table = next(t for t in tree.find_all(exp.Table) if t.alias == "e")
    table.find_ancestor(exp.Select).where(condition, copy=False)
    return tree


def _json_text(node: exp.Expr) -> exp.Expr:
    """json_text(x) → the dialect's JSON string literal of x."""
    if isinstance(node, exp.Anonymous) and node.name.lower() == "json_text":
        return exp.JSONFormat(this=node.expressions[0])
    return node


def _money(node: exp.Expr, dialect: str) -> exp.Expr:
    """money(x) → x as a decimal with 9 places, through its text (see the module notes)."""
    if not (isinstance(node, exp.Anonymous) and node.name.lower() == "money"):
        return node
    value = node.expressions[0]
    if dialect == "bigquery":
        return exp.Anonymous(this="PARSE_NUMERIC", expressions=[
            exp.cast(value, exp.DataType.build("VARCHAR"))])
    if dialect == "duckdb":
        value = exp.cast(value, exp.DataType.build("VARCHAR"))
    return exp.cast(value, exp.DataType.build("DECIMAL(38, 9)"))


LIST_AGGREGATES = {exp.Sum: "list_sum", exp.Max: "list_max", exp.Min: "list_min"}


def _unnest_to_list(node: exp.Expr) -> exp.Expr:
    """DuckDB: (SELECT AGG(f(c)) FROM UNNEST(a) AS _t(c) [WHERE p(c)]) → list lambdas over a."""
    if not isinstance(node, exp.Subquery) or not isinstance(node.this, exp.Select):
        return node
    select = node.this
    source = select.args.get("from_") or select.args.get("from")
    unnest = source.this if source is not None else None
    if (not isinstance(unnest, exp.Unnest) or len(select.expressions) != 1 or select.args.get("joins")
            or select.args.get("group")):
        return node
    alias = unnest.args.get("alias")
    columns = alias.columns if alias is not None else []
    if len(columns) != 1:
        return node
    var = columns[0].name
    array = unnest.expressions[0].copy()
    where = select.args.get("where")
    if where is not None:
        array = exp.ArrayFilter(this=array, expression=_lambda(where.this, var))
    aggregate = select.expressions[0]
    aggregate = aggregate.this if isinstance(aggregate, exp.Alias) else aggregate
    return _list_form(aggregate, array, var) or node


def _list_form(aggregate: exp.Expr, array: exp.Expr, var: str) -> exp.Expr | None:
    """The list-function equivalent of one aggregate over the (filtered) array, or None."""
    for kind, function in LIST_AGGREGATES.items():
        if type(aggregate) is kind:
            mapped = exp.Transform(this=array, expression=_lambda(aggregate.this, var))
            return exp.Anonymous(this=function, expressions=[mapped])
    if isinstance(aggregate, exp.GroupConcat):
        body = aggregate.this.this if isinstance(aggregate.this, exp.Order) else aggregate.this
        mapped = exp.Transform(this=array, expression=_lambda(body, var))
        separator = aggregate.args.get("separator") or exp.Literal.string(",")
        return exp.Anonymous(this="array_to_string", expressions=[
            exp.Anonymous(this="list_sort", expressions=[mapped]), separator.copy()])
    return None


def _lambda(body: exp.Expr, var: str) -> exp.Lambda:
    """``lambda var: body`` (columns ``var.field`` stay as they are: DuckDB resolves them)."""
    return exp.Lambda(this=body.copy(), expressions=[exp.to_identifier(var)])


def identifier_ok(name: str) -> bool:
    """Whether ``name`` is a plain SQL identifier (local table or view names)."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None
