"""The FOCUS reader's window selection and normalisation: view ``n`` → the ``lines`` table.

:func:`select_window` keeps the lines whose charge period overlaps the window (those that straddle
an edge of it stay lines of their own, for :mod:`connectors.billing.clip` to clip) and, at grain
``auto``, sums in DuckDB the lines no stage of the audit tells apart (:func:`grouped_sql`; the GPU
rules of :mod:`connectors.billing.gpu_sql` say which lines keep their hours). :func:`build_lines`
turns the kept lines into ``BillingLine`` rows: Decimals from the exact text, UTC datetimes,
canonical JSON for Tags and the ``x_*`` columns.
"""
from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from connectors.billing.focus_checks import elements_test
from connectors.billing.focus_load import DECIMAL_FIELDS, MONEY_FIELDS, TEXT_FIELDS, Columns
from connectors.billing.gpu_sql import HINT_KEYS, ensure_gpu_instances, gpu_line_sql, hint_sql
from connectors.billing.scale_sets import INFO_COLUMNS, vm_resource_id_sql
from connectors.bounds import MAX_DEPTH, deeper_than, nested_too_deep
from connectors.duck import MAX_ERRORS, object_series, quote_text, raise_all, utc_series, utc_text
from connectors.errors import InputError
from schemas.billing import BillingLine

OUTPUT_COLUMNS = list(BillingLine.to_schema().columns)


#: how a note on a file that names no currency ends (audit/fit_sources.py, audit/discover/billing.py read it)
CURRENCY_ASSUMED = "the case's currency (assumed)"


def file_currency(con, columns: Columns, case_currency: str) -> str:
    """The file's one BillingCurrency (checked already), else the case currency."""
    if not columns.has("BillingCurrency"):
        return case_currency
    found = con.execute("SELECT min(BillingCurrency) FROM n").fetchall()[0][0]
    return found if found is not None else case_currency


def currency_notes(con, columns: Columns, case_currency: str) -> list[tuple[int, str, str]]:
    """(0, BillingCurrency, note) where the file names no currency (no BillingCurrency column, or the
    column empty on every row) and its amounts are read in the case currency: BillingCurrency is
    mandatory in FOCUS, so the currency is the case's assumption, and the note says so."""
    if not columns.has("BillingCurrency"):
        said = "no BillingCurrency column"
    elif con.execute("SELECT count(BillingCurrency) FROM n").fetchall()[0][0] == 0:
        said = "BillingCurrency empty on every row"
    else:
        return []
    return [(0, "BillingCurrency", f"{said}: amounts read as {case_currency}, {CURRENCY_ASSUMED}")]


def currency_assumed(notes) -> list[str]:
    """The notes of table ``notes`` (None or a frame) that say the file names no currency."""
    if notes is None or not len(notes):
        return []
    return [str(n) for c, n in zip(notes["column"], notes["note"])
            if c == "BillingCurrency" and str(n).endswith(CURRENCY_ASSUMED)]


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
    info = next((f"e{i}" for i, name in enumerate(columns.extras) if name.lower() in INFO_COLUMNS), None)
    for out, names in TEXT_FIELDS.items():
        text = f"coalesce({', '.join(names)}, '')"
        if out == "resource_id" and info:  # Microsoft's per-VM rows of a scale set name their VM
            text = vm_resource_id_sql(text, info)
        if out == "charge_category":
            text = charge_category_sql(text)
        parts.append(f"{text} AS {out}")
    parts += [f"trim({col}) AS {out}" for out, col in {**MONEY_FIELDS, **DECIMAL_FIELDS}.items()]
    parts += [f"coalesce(BillingCurrency, {quote_text(currency)}) AS currency", "Tags AS tags",
              "AllocatedTags AS allocated_tags", f"{contract_ids_sql('ContractApplied')} AS contract_applied"]
    parts += [f"e{i}" for i in range(len(columns.extras))]
    parts += ["_ps AS p_start", "_pe AS p_end", "_n",
              f"(_ps < CAST({lo} AS TIMESTAMPTZ) AND _pe > CAST({lo} AS TIMESTAMPTZ)) OR "
              f"(_ps < CAST({hi} AS TIMESTAMPTZ) AND _pe > CAST({hi} AS TIMESTAMPTZ)) AS _straddles"]
    con.execute(f"CREATE OR REPLACE TEMP VIEW kept AS SELECT * FROM (SELECT {', '.join(parts)} FROM n) "
                f"WHERE p_start < CAST({hi} AS TIMESTAMPTZ) "
                f"AND (p_start >= CAST({lo} AS TIMESTAMPTZ) OR p_end > CAST({lo} AS TIMESTAMPTZ))")
    if grain == "auto" and not lossy_sums(con):
        mark_timed(con, columns)
        # A GROUP BY loses the file order: DuckDB sorts the groups (the fleet's 10 M-line CUR, 558 k
        # groups: 0.3 s, against 3.3 s for Arrow's sort_by of the result), once ``marked`` is freed
        # (sorted beside it, the 50 M-line CUR's read peaked 0.5 GiB higher).
        con.execute(f"CREATE OR REPLACE TEMP TABLE _grouped AS {grouped_sql(con, columns)}")
        con.execute("DROP TABLE marked")
        sql = "SELECT * FROM _grouped ORDER BY rn"
    else:
        sql = "SELECT *, _n AS line_count FROM kept"
    table = con.sql(sql).to_arrow_table()
    con.execute("DROP TABLE IF EXISTS _grouped")
    # preserve_insertion_order keeps a filtered scan in file order, which is far cheaper than an
    # ORDER BY over wide rows; sort only if that ever fails to hold.
    rn = table.column("rn")
    if len(rn) > 1 and not pc.all(pc.greater(rn[1:], rn[:-1])).as_py():
        table = table.sort_by("rn")
    return table


#: the ChargeCategory a usage correction without a quantity is read as (:func:`charge_category_sql`)
CORRECTION_CATEGORY = "Refund"


def charge_category_sql(category: str) -> str:
    """SQL: the line's charge category, ``category`` (its ChargeCategory text), but for a usage
    correction that bills no quantity (ChargeCategory Usage, ChargeClass Correction, PricingQuantity
    null or 0: money given back or charged again for a prior charge), read as ``Refund``.

    FOCUS 1.0+ has no Refund category: a correction keeps the category of the charge it corrects and
    says so in ChargeClass. Priced as usage, its quantity × unit price is 0 against its cost, and the
    bottom-up missed the whole refund (cloudgen aks 10909 with a NAT Gateway refund −25.00 and an
    H100 VM refund −100.00: gap −0.030883 in FOCUS against 0.000031 in the Azure export, whose
    ChargeType Refund the Azure reader names Refund). Read as a refund it nets into the charges of its
    resource and passes through both sides, as the export's does (METHOD §5). A correction with a
    quantity stays usage, priced at quantity × unit price; a purchase's correction (a commitment
    refund) stays a purchase."""
    quantity = f"TRY_CAST(trim(PricingQuantity) AS {SUM_TYPE})"
    return (f"CASE WHEN ChargeCategory = 'Usage' AND ChargeClass = 'Correction' AND "
            f"(PricingQuantity IS NULL OR {quantity} = 0) THEN {quote_text(CORRECTION_CATEGORY)} ELSE {category} END")


def purchases_outside(con, window: tuple[datetime, datetime], name: str) -> pd.DataFrame:
    """Table ``purchases_outside``: per commitment, the purchase rows naming it (ChargeCategory
    Purchase, a CommitmentDiscountId) whose charge period lies outside the window, left out of the
    lines with every other row there: how many, the first (``file:row``), the first and last period
    start, the BilledCost summed (exact). Where the window lacks a commitment's purchase, the audit
    names these rather than say the file holds none (audit/fit_commitments.py)."""
    lo, hi = (quote_text(utc_text(moment)) for moment in window)
    table = con.sql(f"""SELECT CommitmentDiscountId AS commitment_discount_id, sum(_n) AS rows,
        arg_min({quote_text(name)} || ':' || rn, rn) AS first_line, min(_ps) AS first_start, max(_ps) AS last_start,
        CAST(sum(TRY_CAST(trim(BilledCost) AS {SUM_TYPE})) AS VARCHAR) AS billed_cost
        FROM n WHERE ChargeCategory = 'Purchase' AND coalesce(CommitmentDiscountId, '') <> ''
          AND NOT (_ps < CAST({hi} AS TIMESTAMPTZ) AND (_ps >= CAST({lo} AS TIMESTAMPTZ) OR _pe > CAST({lo} AS TIMESTAMPTZ)))
        GROUP BY 1 ORDER BY min(rn)""").df()
    return table.assign(rows=table["rows"].astype("int64"), first_start=utc_series(table["first_start"]),
                        last_start=utc_series(table["last_start"]),
                        billed_cost=object_series([None if v is None or v != v else Decimal(v).normalize()
                                                   for v in table["billed_cost"]]))


# Summed columns: money and quantities. Unit prices are keys (lines at other prices stay apart).
SUMMED = ("billed_cost", "effective_cost", "list_cost", "contracted_cost", "pricing_quantity",
          "consumed_quantity")
SUM_TYPE = "DECIMAL(38,20)"


def contract_ids_sql(column: str) -> str:
    """SQL: the ContractCommitmentIds of a FOCUS 1.3 ContractApplied cell, distinct and sorted, as a
    JSON array text (``[]`` when null). The applied amounts stay behind: they differ line by line
    and would keep apart lines the audit sums; the line's own cost is what the audit counts."""
    ids = f"json_extract_string({column}, '$.Elements[*].ContractCommitmentId')"
    return (f"CASE WHEN {column} IS NULL THEN '[]' WHEN {elements_test(column)} "
            f"THEN CAST(to_json(list_sort(list_distinct({ids}))) AS VARCHAR) ELSE '[]' END")


def lossy_sums(con) -> bool:
    """Whether some amount of a kept line does not fit DECIMAL(38,20) exactly (then no line is summed)."""
    tests = " OR ".join(lossy_sql(column) for column in SUMMED)
    return bool(con.execute(f"SELECT EXISTS (SELECT 1 FROM kept WHERE {tests})").fetchall()[0][0])


def lossy_sql(column: str) -> str:
    """SQL: amount text ``column`` (trimmed) is not null and does not fit DECIMAL(38,20) exactly.

    An amount of at most 18 characters without an exponent that casts has at most 18 digits before
    the point and 17 after it, so it fits: only longer amounts, or ones with an exponent, are
    measured (digits after the point less the exponent, at most 20)."""
    fits = (f"(length({column}) <= 18 AND strpos({column}, 'e') = 0 AND strpos({column}, 'E') = 0 "
            f"AND TRY_CAST({column} AS {SUM_TYPE}) IS NOT NULL)")
    fraction = f"length(regexp_extract({column}, '\\.(\\d+)', 1))"
    exponent = f"coalesce(TRY_CAST(regexp_extract({column}, '[eE]([+-]?\\d+)', 1) AS INTEGER), 0)"
    return (f"({column} IS NOT NULL AND NOT {fits} AND (TRY_CAST({column} AS {SUM_TYPE}) IS NULL "
            f"OR {fraction} - {exponent} > 20))")


def sum_text_sql(column: str, value: str | None = None, alone: str | None = None) -> str:
    """SQL aggregate: the exact sum of amount texts ``column`` as text without trailing zeros; the
    amount's own text when the group has one row (so a line alone keeps the text it had). Only
    amounts that fit DECIMAL(38,20) are summed (:func:`lossy_sql`): one that does not is left out
    (TRY_CAST) rather than failing the query, and the caller discards the sum.
    ``value``: SQL of each row's amount as DECIMAL(38,20), where the caller has a cheaper exact one
    than the cast of the text; ``alone``: SQL aggregate of a one-row group's text (``any_value`` of it)."""
    value = value or f"TRY_CAST({column} AS {SUM_TYPE})"
    total = f"CAST(sum({value}) AS VARCHAR)"
    text = f"CASE WHEN strpos({total}, '.') > 0 THEN rtrim(rtrim({total}, '0'), '.') ELSE {total} END"
    return f"CASE WHEN count(*) = 1 THEN {alone or f'any_value({column})'} ELSE {text} END"


def grouped_sql(con, columns: Columns) -> str:
    """SQL summing the kept lines (table ``marked``, :func:`mark_timed`) that no stage of the audit
    tells apart.

    * Lines that may bill GPU time (``_timed``) keep their hours: only a run of consecutive
      lines identical in every column but the period (the same hourly charge, hour after hour)
      becomes one line over the run. Spread evenly over its hours, the run gives every hour what
      its own line gave, so the GPU-intervals do not change. A line repeated for the same period
      stays a line of its own (it would join hours that are not consecutive).
      Lines of a resource that has a credit (refund, adjustment) keep their own periods: a credit
      nets into the hours it names (audit.adjust), which a run over the day would hide.
    * Every other line is summed per UTC day of its start with the lines identical in every other
      column: no stage uses the hour of a line that bills no GPU (it is classified by its columns
      and counted over the window), but for a credit's: the lines of a resource that has a credit
      keep their own periods here too (a CPU node's hourly credit nets into that hour's instance
      line, which a sum over the day would make a day's line like its data transfer's).
    * A line whose period straddles an edge of the window (``_straddles``) stays a line of its own:
      :mod:`connectors.billing.clip` clips it to its part inside the window, pro rata by its own period.
    A sum of one line keeps the line's own text; sums are exact (DECIMAL(38,20), checked first).
    ``_timed`` is a function of the key columns, so the runs are numbered among the GPU lines only
    (a window over the few GPU lines, not over every line).
    """
    keys = (["currency", "tags", "allocated_tags", "contract_applied", "list_unit_price", "contracted_unit_price"]
            + [out for out in TEXT_FIELDS] + [f"e{i}" for i in range(len(columns.extras))])
    same = ", ".join(keys + list(SUMMED) + ["p_end - p_start"])
    # A line repeated for the same hour (two identical lines, 00:00 twice) is no part of a run: numbered
    # with the others, it would make lines that are not consecutive agree (00:00, 00:00, 02:00 gives
    # -1 h, -2 h, -1 h) and spread their money over an hour neither bills. Each repeat stays a line of its own.
    island = (f"CASE WHEN _repeats > 1 OR _credited OR _straddles THEN -rn ELSE epoch(p_start) - epoch(p_end - p_start) * "
              f"row_number() OVER (PARTITION BY {same}, _repeats > 1 ORDER BY p_start, rn) END")
    repeats = f"count(*) OVER (PARTITION BY {same}, p_start) AS _repeats"
    sums = [f"{sum_text_sql(column)} AS {column}" for column in SUMMED]
    aggregates = (f"min(rn) AS rn, arg_min(line_id, rn) AS line_id, {', '.join(keys)}, {', '.join(sums)}, "
                  "min(p_start) AS p_start, max(p_end) AS p_end, sum(_n)::BIGINT AS line_count")
    return f"""
    SELECT {aggregates}
    FROM (SELECT *, {island} AS _grain FROM (SELECT *, {repeats} FROM marked WHERE _timed))
    GROUP BY {', '.join(keys)}, {', '.join(SUMMED)}, _grain
    UNION ALL
    SELECT {aggregates}
    FROM marked WHERE NOT _timed
    GROUP BY {', '.join(keys)}, CASE WHEN _credited THEN -rn ELSE epoch(date_trunc('day', p_start)) END,
      CASE WHEN _straddles THEN rn END
    """


#: the charge categories whose lines net into the charges of their resource and period (audit.adjust)
CREDITED = "'Credit', 'Refund', 'Adjustment'"


def mark_timed(con, columns: Columns) -> None:
    """Table ``marked``: ``kept`` with ``_timed``, whether a line may bill GPU time, by the
    classifier's own tables (an instance type with GPUs, a per-GPU meter), or shares its resource
    with such a line (the core / RAM parts of a GPU machine).

    The rules read a few columns whose distinct values an export repeats over millions of lines:
    they run once per distinct value (and resource), and the lines take the answer by a join."""
    ensure_gpu_instances(con)
    extras = {name.lower(): f"e{i}" for i, name in enumerate(columns.extras)}
    named = [f"{extras.get(key.lower(), 'NULL::VARCHAR')} AS {key}" for key in HINT_KEYS if key.startswith("x_")]
    named += [f"{extras.get('skupricedetails', 'NULL::VARCHAR')} AS spd",
              f"coalesce({extras.get('x_usagetype', 'NULL::VARCHAR')}, '') AS usage",
              "charge_description AS descr",
              "charge_description || ' ' || resource_name || ' ' || sku_id AS text"]
    wanted = [key.lower() for key in HINT_KEYS if key.startswith("x_")] + ["skupricedetails", "x_usagetype"]
    inputs = ["charge_category", "charge_description", "resource_name", "sku_id"]
    inputs += sorted({extras[key] for key in wanted if key in extras})
    listed = ", ".join(inputs)
    gpu_line = gpu_line_sql()
    same = " AND ".join(f"a.{c} IS NOT DISTINCT FROM b.{c}" for c in ["resource_id"] + inputs)
    # The answers per distinct key first, as a table of their own: in one statement with the join,
    # DuckDB built its hash table on the kept lines rather than on the few keys (the fleet's 50 M-line
    # CUR: 6.2 s against 1.8 s).
    con.execute(f"""
    CREATE OR REPLACE TEMP TABLE _timed_keys AS
    WITH seen AS (SELECT DISTINCT resource_id, {listed} FROM kept),
    rules AS (SELECT {listed}, coalesce({gpu_line}, FALSE) AS _gpu FROM
              (SELECT *, {hint_sql()} AS hint FROM (SELECT {listed}, {', '.join(named)} FROM
               (SELECT DISTINCT {listed} FROM seen)))),
    timed AS (SELECT seen.resource_id, rules.*,
                     CASE WHEN seen.resource_id <> '' THEN bool_or(_gpu) OVER (PARTITION BY seen.resource_id)
                     ELSE _gpu END AS _timed,
                     seen.resource_id <> '' AND bool_or(rules.charge_category IN ({CREDITED}))
                         OVER (PARTITION BY seen.resource_id) AS _credited
              FROM seen JOIN rules ON {" AND ".join(f"seen.{c} IS NOT DISTINCT FROM rules.{c}" for c in inputs)})
    SELECT * FROM timed
    """)
    con.execute(f"CREATE OR REPLACE TEMP TABLE marked AS SELECT a.*, b._timed, b._credited FROM kept a "
                f"JOIN _timed_keys b ON {same}")
    con.execute("DROP TABLE _timed_keys")


def build_lines(kept: pa.Table, columns: Columns, path: Path) -> pd.DataFrame:
    """The ``lines`` table from the kept lines: Decimals, UTC datetimes, canonical JSON."""
    rows = kept.column("rn").to_pylist()
    out: dict[str, pd.Series] = {"row": kept.column("rn").to_pandas().astype("int64"),
                                 "line_count": kept.column("line_count").to_pandas().astype("int64")}
    for name in TEXT_FIELDS.keys() | {"line_id", "currency"}:
        out[name] = kept.column(name).to_pandas()
    for name in MONEY_FIELDS:
        out[name] = decimal_series(kept.column(name), nullable=False)
    for name in DECIMAL_FIELDS:
        out[name] = decimal_series(kept.column(name))
    out["start"] = utc_series(kept.column("p_start").to_pandas())
    out["end"] = utc_series(kept.column("p_end").to_pandas())
    out["tags"] = canonical_tags(kept.column("tags"), rows, path)
    out["allocated_tags"] = canonical_tags(kept.column("allocated_tags"), rows, path, "AllocatedTags")
    out["contract_applied"] = kept.column("contract_applied").to_pandas().astype("str")
    out["extra"] = pd.Series(extra_json(kept, columns), dtype="str")
    return pd.DataFrame({name: out[name] for name in OUTPUT_COLUMNS + ["line_count"]})


def decimal_series(texts: pa.ChunkedArray, nullable: bool = True) -> pd.Series:
    """Exact decimal texts as an object column of Decimals (null → None).

    Exports repeat a few thousand amounts over millions of lines, so each distinct text is parsed
    once and the lines share its (immutable) Decimal. A null where ``nullable`` is False fails as
    ``Decimal(None)`` does."""
    if not nullable and texts.null_count:
        return object_series([Decimal(v) for v in texts.to_pylist()])
    encoded = pc.dictionary_encode(texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string()))
    values = np.empty(len(encoded.dictionary) + 1, dtype=object)
    values[:-1] = [Decimal(v) for v in encoded.dictionary.to_pylist()]
    values[-1] = None
    at = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    return object_series(values[at])


def canonical_tags(values, rows: list[int], path: Path, column: str = "Tags") -> pd.Series:
    """Tags (or AllocatedTags) texts ``values`` (a list or an Arrow array) as a column of canonical
    JSON object texts; null → ``{}``; a cell that is no JSON object is an error (each such line
    named, in order, up to MAX_ERRORS).

    Exports repeat a handful of tag sets over millions of lines, so each distinct text is parsed
    once and the lines take its canonical text by index, in Arrow (no Python string a line)."""
    texts = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, pa.string())
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    encoded = pc.dictionary_encode(texts)
    canonical = [canonical_object(value) for value in encoded.dictionary.to_pylist()]
    bad = [i for i, text in enumerate(canonical) if text is None]
    at = encoded.indices.fill_null(len(canonical)).to_numpy(zero_copy_only=False)
    if bad:
        failing = np.flatnonzero(np.isin(at, bad))[:MAX_ERRORS]
        raise_all([tags_error(texts[int(i)].as_py(), rows[int(i)], path, column) for i in failing])
    table = pa.array([*canonical, "{}"], pa.string())
    return table.take(pa.array(at)).to_pandas().astype("str")


def tags_error(value: str, rn: int, path: Path, column: str = "Tags") -> InputError:
    """The error for a Tags (AllocatedTags) cell that is not a JSON object (or nests too deeply)."""
    if parse_object(value) is TOO_DEEP:
        return InputError(path, f"{column} {shorten(value)!r}: {nested_too_deep(MAX_DEPTH)}", row=rn,
                          column=column, expected=f"a JSON object at most {MAX_DEPTH} levels deep")
    return InputError(path, f"unparseable {column} {shorten(value)!r}", row=rn, column=column,
                      expected="a JSON object")


TOO_DEEP = object()
"""What :func:`parse_object` returns for JSON nested past MAX_DEPTH."""


def parse_object(value: str):
    """The JSON object of ``value``; None when it is not one, TOO_DEEP when it nests too deeply."""
    try:
        parsed = json.loads(value)
    except RecursionError:
        return TOO_DEEP
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    return TOO_DEEP if deeper_than(parsed, MAX_DEPTH) else parsed


def canonical_object(value: str) -> str | None:
    """Canonical text of a JSON object, or None when ``value`` is not one (or nests too deeply)."""
    parsed = parse_object(value)
    return None if parsed is None or parsed is TOO_DEEP else canonical_json(parsed)


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
        parsed = parse_object(value)
        return value if parsed is None or parsed is TOO_DEEP else parsed
    return value


def covered(lines: pd.DataFrame) -> tuple[datetime | None, datetime | None]:
    """(earliest start, latest end) of the kept lines, or (None, None)."""
    if lines.empty:
        return (None, None)
    return (lines["start"].min().to_pydatetime(), lines["end"].max().to_pydatetime())


# --- small helpers ----------------------------------------------------------------------------

def canonical_json(value: dict) -> str:
    """Canonical JSON object text: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def shorten(value: str, limit: int = 60) -> str:
    """A cell value cut to ``limit`` characters for a message."""
    return value if len(value) <= limit else value[:limit] + "…"
