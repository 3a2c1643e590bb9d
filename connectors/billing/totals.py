"""Billing totals pushed down to DuckDB: FOCUS and CUR sources aggregated where they lie.

``costaudit billing`` wants a handful of numbers per source: BilledCost and EffectiveCost by
ChargeCategory, ServiceName and BillingCurrency, and GPU-hours by instance type, within a window.
Reading tens of millions of lines through a connector (one pandas row per line, a Decimal per
amount) only to add them up is far too slow and too big. Here the source becomes three DuckDB
views and one query; only its few hundred result rows come back to Python.

* ``line_groups``: the source's lines grouped on the raw values (as stored, no per-line text
  work) of every column the totals read, with the window test of each line as one more key, the
  amounts summed exactly and the lines counted. A line whose period straddles an edge of the window
  has one key more, the share of its period inside it (:func:`connectors.billing.totals_sql.clip_key`):
  the query returns such groups' sums apart and :func:`clipped` scales them, exactly in Python, as
  the connectors clip each line (:mod:`connectors.billing.clip`). This is the only part that touches every line,
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

The views are built in :mod:`connectors.billing.totals_focus` and
:mod:`connectors.billing.totals_cur` from the expressions of :mod:`connectors.billing.totals_sql`;
the GPU rules are :mod:`connectors.billing.gpu_sql`'s.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import duckdb

from connectors.billing.catalogue import HOUR_RE
from connectors.billing.clip import share
from connectors.billing.gpu_sql import gpu_meter_sql, hint_sql, instance_type_sql, load_gpu_instances
from connectors.billing.totals_cur import cur_views
from connectors.billing.totals_focus import focus_views
from connectors.duck import first_line, prepare, quote_text
from connectors.errors import InputError, with_article
from schemas.errors import UsageError

FORMATS = ("focus", "cur")
# DuckDB's buffer pool for one summary; the aggregate holds a few thousand groups.
MEMORY_LIMIT = os.environ.get("COSTAUDIT_DUCKDB_MEMORY", "512MB")
CHARGE_CATEGORIES = ("Usage", "Purchase", "Tax", "Credit", "Adjustment", "Refund")


@dataclass
class Totals:
    """Exact totals of one source: [billed, effective] by key, GPU-hours by instance type."""

    rows: int = 0
    lines: int = 0
    by_category: dict[str, list[Decimal]] = field(default_factory=dict)
    by_service: dict[str, list[Decimal]] = field(default_factory=dict)
    by_currency: dict[str, list[Decimal]] = field(default_factory=dict)
    gpu_hours: dict[str, Decimal] = field(default_factory=dict)
    #: lines whose charge period has an hour past 23 carried into the next day (FOCUS text periods)
    carried_hours: int = 0
    #: whether a purchase billed but not effective (EffectiveCost 0) meets no commitment line that carries
    #: amortisation (Effective ≠ Billed): the effective total may lack that purchase, which only the
    #: lines tell (audit.bridge.unamortised_reason, as `costaudit run` and the line-level sources do)
    unamortised: bool = False


# --- entry point -----------------------------------------------------------------------------

def read_totals(path: Path, fmt: str, window: tuple[datetime, datetime], currency: str, *,
                memory_limit: str | None = None, threads: int | None = None) -> Totals:
    """Totals of a local FOCUS file or CUR file / export folder, aggregated in DuckDB.

    DOUBLE amounts are first summed as counts of 10^-10 units; should any line hold a value
    that is not such a count, the query runs again reading every amount from its text.
    """
    if fmt not in FORMATS:
        raise UsageError(f"no pushdown for format {fmt!r}; known: {', '.join(FORMATS)}")
    path = Path(path)
    if not path.exists():
        raise InputError(path, "file not found", expected=f"{with_article(fmt)} file or folder")
    for exact in (False, True):
        with connect(memory_limit, threads) as con:
            rows_sql = build_views(con, path, fmt, window, exact)
            load_gpu_instances(con)
            try:
                result = con.execute(totals_sql(rows_sql, currency)).fetchall()
            except (duckdb.ConversionException, duckdb.InvalidInputException, duckdb.IOException,
                    duckdb.NotImplementedException) as exc:     # a CSV line past its buffer
                explain(path, fmt, window, currency, f"DuckDB: {first_line(exc)}")
        totals, problem, inexact_lines = totals_from_rows(result)
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
      SELECT w, _clip, ChargeCategory AS cat, coalesce(ServiceName, '') AS svc, BillingCurrency AS cur, {keys},
             sum(BilledCost) AS billed, sum(EffectiveCost) AS effective, sum(GpuQuantity) AS quantity,
             sum(Lines) AS n, sum(Inexact) AS inexact, sum(Carried) AS carried,
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
                      ELSE 0 END) AS hours, t._clip
      FROM typed_group t LEFT JOIN gpu_instances gi ON gi.instance_type = t.itype
      WHERE (t.hourly AND gi.instance_type IS NOT NULL) OR (gi.instance_type IS NULL AND t.meter IS NOT NULL)
      GROUP BY 1, t._clip
    )
    SELECT 'category', cat, sum(billed), sum(effective), NULL, sum(n), _clip FROM kept GROUP BY cat, _clip
    UNION ALL SELECT 'service', svc, sum(billed), sum(effective), NULL, sum(n), _clip FROM kept GROUP BY svc, _clip
    UNION ALL SELECT 'currency', currency, sum(billed), sum(effective), NULL, sum(n), _clip FROM kept
      GROUP BY currency, _clip
    UNION ALL SELECT 'gpu', name, NULL, NULL, hours, NULL, _clip FROM gpu
    UNION ALL SELECT 'rows', NULL, NULL, NULL, NULL, ({rows_sql}), NULL
    UNION ALL SELECT 'lines', NULL, NULL, NULL, NULL, coalesce((SELECT sum(n) FROM kept), 0), NULL
    UNION ALL SELECT 'bad', NULL, NULL, NULL, NULL, (SELECT sum(bad) FROM grouped), NULL
    UNION ALL SELECT 'currencies', NULL, NULL, NULL, NULL, (SELECT currencies FROM currencies), NULL
    UNION ALL SELECT 'inexact', NULL, NULL, NULL, NULL, (SELECT sum(inexact) FROM grouped), NULL
    UNION ALL SELECT 'carried', NULL, NULL, NULL, NULL, (SELECT sum(carried) FROM grouped), NULL
    UNION ALL SELECT 'unamortised', NULL, NULL, NULL, NULL, (SELECT {unamortised_sql()} FROM kept), NULL
    UNION ALL SELECT 'unknown category', cat, NULL, NULL, NULL, sum(n), NULL FROM grouped
      WHERE cat IS NULL OR cat NOT IN ({categories}) GROUP BY cat
    """


def unamortised_sql() -> str:
    """SQL aggregate over the kept groups: 1 where some purchase group is billed but not effective and no
    usage group of a commitment (CommitmentDiscountStatus Used / Unused) carries amortisation, else 0.

    Only a hint: the groups hold no CommitmentDiscountId, so the lines themselves say which purchase
    lacks what (:func:`audit.bridge.unamortised_reason`, run on them only then)."""
    leaving = "count_if(cat = 'Purchase' AND billed <> 0 AND effective = 0)"
    carrying = "count_if(status IS NOT NULL AND billed IS DISTINCT FROM effective)"
    return f"CASE WHEN {leaving} > 0 AND {carrying} = 0 THEN 1 ELSE 0 END"


def totals_from_rows(result: list[tuple]) -> tuple[Totals, str | None, int]:
    """The query's rows as Totals, what looks wrong with the source (or None), and the number of
    lines whose DOUBLE amounts were not exact counts of 10^-10 units."""
    totals = Totals()
    inexact_lines = 0
    tables = {"category": totals.by_category, "service": totals.by_service, "currency": totals.by_currency}
    problem = None
    for kind, name, billed, effective, hours, n, clip in result:
        if kind in tables:
            sums = tables[kind].setdefault(name, [Decimal(0), Decimal(0)])
            sums[0] += clipped(billed or Decimal(0), clip)
            sums[1] += clipped(effective or Decimal(0), clip)
        elif kind == "gpu":
            totals.gpu_hours[name] = totals.gpu_hours.get(name, Decimal(0)) + clipped(hours or Decimal(0), clip)
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
        elif kind == "carried":
            totals.carried_hours = int(n or 0)
        elif kind == "unamortised":
            totals.unamortised = bool(n)
    return totals, problem, inexact_lines


def clipped(amount: Decimal, clip: str | None) -> Decimal:
    """A group's sum over lines straddling an edge of the window, clipped to its part inside
    (``clip``: ``'inside/whole'`` microseconds, :func:`connectors.billing.totals_sql.clip_key`),
    as the connectors clip each line (:func:`connectors.billing.clip.share`); unchanged when None."""
    if clip is None:
        return amount
    inside, whole = clip.split("/")
    return share(amount, int(inside), int(whole))


# --- the error path --------------------------------------------------------------------------

def explain(path: Path, fmt: str, window: tuple[datetime, datetime], currency: str, problem: str) -> None:
    """Raise the error the source's connector gives (file, row, column), else one naming ``problem``."""
    from connectors.base import ReadContext, SourceSpec
    from connectors.registry import resolve
    spec = SourceSpec(path.name, "billing", fmt, path, {})
    resolve(fmt)(spec, ReadContext(window[0], window[1], currency)).fetch()
    raise InputError(path, f"cannot total the source: {problem}",
                     expected=f"{with_article(fmt)} source whose lines the connector reads")
