"""The billing totals' views over a CUR file or export folder, through the CUR connector's mapping.

``line_groups`` groups the lines of every current file (Parquet files of one schema in one scan)
on the raw values of the CUR fields the totals read; ``raw`` reads the groups as the mapping of
:mod:`connectors.billing.cur_sql` reads lines; ``focus_lines`` maps them to FOCUS names, with a row
per group of unused commitments. Why this holds for groups as for lines:
:mod:`connectors.billing.totals`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from connectors.billing import cur
from connectors.billing import cur_sql as sql
from connectors.billing.focus_load import file_format
from connectors.billing.totals_sql import (
    SUM_TYPE,
    TEXT_COLUMNS,
    Column,
    as_text,
    clip_key,
    exact_text,
    focus_select,
    group_sql,
    inexact,
    money_lines,
    money_sums,
    parquet_types,
    period_test,
)
from connectors.duck import MAX_ERRORS, first_line, quote_text, raise_all
from connectors.errors import InputError

NEEDED = ("ChargeCategory", "ServiceName", "BillingCurrency", "BilledCost", "EffectiveCost",
          "ChargePeriodStart", "ChargePeriodEnd", "PricingUnit", "ConsumedUnit", "PricingQuantity",
          "ConsumedQuantity", "CommitmentDiscountStatus", "ChargeDescription", "SkuId", "x_InstanceType",
          "x_UsageType")
TYPE = "line_item_line_item_type"


def cur_views(con, root: Path, window: tuple[datetime, datetime], exact: bool) -> str:
    """Views over a CUR file or export folder (the current files of each billing period)."""
    described = [describe(con, path, label) for path, label in cur.discover(root)]
    layouts = [layout for layout, _ in described]
    raise_all([e for layout in layouts for e in cur.missing_columns(layout)][:MAX_ERRORS])
    groups = same_schema(described)
    plan = CurPlan.of(layouts, groups, exact)
    lookup = map_lookup(con)
    lines = " UNION ALL ".join(cur_scan(group, plan, window, lookup) for group in groups)
    con.execute(f"CREATE TEMP VIEW line_groups AS {group_sql(lines, list(plan.keys) + ['w', '_clip'], plan.aggregates())}")
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


# cur_sql.text_or_null(ref) and cur_sql's MAP lookup, taken apart to read the stored value itself.
RAW_REF = re.compile(r"^CASE WHEN trim\(CAST\((?P<ref>.+) AS VARCHAR\)\) IN \(.*\) THEN NULL "
                     r"ELSE CAST\((?P=ref) AS VARCHAR\) END$")
PLAIN_REF = re.compile(r"^CAST\((?P<ref>.+) AS VARCHAR\)$")   # a number's or moment's text (no null literal)
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
    match = RAW_REF.match(text) or PLAIN_REF.match(text)
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
    start, end = (columns[name] for name in sql.PERIOD)
    assert start is not None and end is not None  # required columns (the layout's check)
    parts["w"] = period_test(start, end, window)
    parts["_clip"] = clip_key(start, end, window)
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
        return f"({exact_text(Column(stored, columns[name].dtype, sql.text_or_null(stored)))})"
    return re.sub(r"\b(" + "|".join(sql.FIELDS) + r")\b", exact, amount)


def cur_raw_sql(plan: CurPlan) -> str:
    """View ``raw`` over the groups: the CUR fields as the CUR mapping reads them.

    Text keys get their null literals turned into NULL (the line item type stays as stored: a
    null literal is no known type either way). They are guarded by ``_n > 0`` (always true) so
    that DuckDB keeps the split-row test on the groups: pushed below the grouping, it would run
    on every line. An amount the line item type's money needs is NULL where a line lacked it, so
    the totals query finds it.
    """
    parts = [TYPE] + [f"CASE WHEN _n > 0 THEN {sql.text_or_null(n)} END AS {n}" for n in plan.keys if n != TYPE]
    parts += [f"CASE WHEN {n}__nulls > 0 THEN NULL ELSE {n} END AS {n}" if n in plan.required else n
              for n in plan.money]
    absent = [n for n in sql.FIELDS if n not in plan.keys and n not in plan.money]
    parts += [f"NULL::VARCHAR AS {n}" for n in absent]
    parts += [f"_unused{i}, _unused{i}_n" for i in range(len(sql.UNUSED))]
    return f"SELECT w, _clip, _n, _inexact, {', '.join(parts)} FROM line_groups"


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
    select.append("0 AS Carried")  # the CUR mapping carries no hour past 23
    where = " OR ".join(f"(part = {i} AND {when})" for i, (_, _, when) in enumerate(parts))
    numbers = ", ".join(f"({i})" for i in range(len(parts)))
    staged = (f"SELECT w, _clip, {', '.join(select)} FROM {sql.money_source()}, (VALUES {numbers}) AS parts(part) "
              f"WHERE {where}")
    quantity = ("CASE WHEN ChargeCategory = 'Usage' THEN CASE WHEN coalesce(PricingQuantity, 0) <> 0 "
                "THEN PricingQuantity ELSE coalesce(ConsumedQuantity, 0) END END")
    return f"SELECT {focus_select()} FROM (SELECT *, {quantity} AS GpuQuantity FROM ({staged}))"
