"""The FOCUS reader's row checks, repeated lines and notes, all in SQL over view ``n``.

Every data row is checked (numbers, timestamps, period order, categories, currency, duplicate
ids); each check reports at most ``MAX_ERRORS`` rows, then how many more fail. Lines identical in every column to an
earlier one are found once (:func:`repeated_lines`) and become errors or notes as the dialect
asks (see :mod:`connectors.billing.focus`). Table ``notes`` lists what was read in a way the file
did not spell out.
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from connectors.billing.focus_load import (
    DECIMAL_FIELDS,
    ID_COLUMNS,
    MONEY_FIELDS,
    NUMBER_PATTERN,
    PERIOD,
    TIMESTAMP_RANGE,
    Columns,
)
from connectors.bounds import shown
from connectors.duck import MAX_ERRORS, quote_text
from connectors.errors import InputError
from schemas.billing import CHARGE_CATEGORIES


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
    errors += check_commitment_status(con, path)
    errors += check_currency(con, path)
    errors += check_elements(con, path)
    errors += [e for e in check_duplicate_ids(con, columns, path) if e.row not in repeated]
    return errors


def check_numbers(con, path: Path) -> list[InputError]:
    """Money and quantity cells that are not decimal numbers, or outside what the audit sums
    exactly (DECIMAL(38, 20): less than 10^18 in magnitude); required money that is null."""
    required = set(MONEY_FIELDS.values())
    queries, ranges = [], []
    for name in list(MONEY_FIELDS.values()) + list(DECIMAL_FIELDS.values()):
        null_bad = "TRUE" if name in required else "FALSE"
        queries.append((name, f"SELECT rn, {name} FROM n WHERE ({name} IS NULL AND {null_bad}) OR "
                              f"NOT regexp_full_match(trim({name}), {quote_text(NUMBER_PATTERN)})"))
        ranges.append((name, f"SELECT rn, {name} FROM n WHERE {name} IS NOT NULL AND "
                             f"regexp_full_match(trim({name}), {quote_text(NUMBER_PATTERN)}) AND "
                             f"TRY_CAST(trim({name}) AS {AMOUNT_TYPE}) IS NULL"))
    errors = column_errors(con, path, queries, "unparseable number", "a decimal number", commas=True)
    return errors + column_errors(con, path, ranges, "number out of range", AMOUNT_RANGE,
                                  MAX_ERRORS - len(errors))


AMOUNT_TYPE = "DECIMAL(38,20)"
AMOUNT_RANGE = "a decimal number less than 10^18 in magnitude (DECIMAL(38, 20))"


TIMESTAMP_SPAN = (f"a timestamp from {TIMESTAMP_RANGE[0]} to before {TIMESTAMP_RANGE[1]} "
                  "(the span of pandas' datetime64[ns])")


def check_timestamps(con, path: Path) -> list[InputError]:
    """ChargePeriodStart / End cells that are null or not timestamps, or out of the span the audit
    holds (the year 9999 was "unparseable")."""
    low, high = TIMESTAMP_RANGE
    tests = {"unparseable timestamp": "t IS NULL",
             "timestamp out of the supported range": f"t < TIMESTAMPTZ '{low}' OR t >= TIMESTAMPTZ '{high}'"}
    errors: list[InputError] = []
    for (what, test), expected in zip(tests.items(), ("an ISO 8601 timestamp (no offset = UTC)", TIMESTAMP_SPAN)):
        queries = [(name, f"SELECT rn, {name} FROM (SELECT rn, {name}, {parsed} AS t FROM n) WHERE {test}")
                   for name, parsed in zip(PERIOD, ("_ps", "_pe"))]
        errors += column_errors(con, path, queries, what, expected, MAX_ERRORS - len(errors))
    return errors


def column_errors(con, path: Path, queries, what: str, expected: str,
                  limit: int = MAX_ERRORS, commas: bool = False) -> list[InputError]:
    """Run (column, query selecting rn and the bad value) checks; at most ``limit`` rows named in
    all, each column's followed by :func:`column_tail` (how many more rows fail; with ``commas``,
    whether they are decimal commas)."""
    errors: list[InputError] = []
    for name, sql in queries:
        if len(errors) >= limit:
            break
        asked = limit - len(errors)
        found = con.execute(f"{sql} ORDER BY rn LIMIT {asked}").fetchall()
        errors += [InputError(path, "missing value" if value is None else f"{what} {shown(value)}", row=rn,
                              column=name, expected=expected) for rn, value in found]
        # fewer rows than asked are every failing row: no more to count, only the hint to test
        if found and (len(found) == asked or commas):
            errors += column_tail(con, path, (name, sql), len(found), what, expected, commas)
    return errors


#: a decimal number written with a comma for its point (``5,2572``, ``-0,5``)
COMMA_DECIMAL = r"[-+]?[0-9]+,[0-9]+"
COMMA_HINT = "the column uses a comma as the decimal separator; export with a point"


def column_tail(con, path: Path, check: tuple[str, str], named: int, what: str, expected: str,
                commas: bool) -> list[InputError]:
    """One error after a column's ``named`` rows: how many more rows fail its check (the rows named
    are capped, the count is not), and, with ``commas``, the hint where every failing value is a
    decimal comma. None where all were named and no hint applies."""
    name, sql = check
    total, other = con.execute(f"SELECT count(*), count(*) FILTER (WHERE v IS NULL OR NOT regexp_full_match("
                               f"trim(CAST(v AS VARCHAR)), {quote_text(COMMA_DECIMAL)})) FROM ({sql}) AS q(rn, v)"
                               ).fetchone()
    parts = [f"{what} in {total - named:,} more row(s)"] if total > named else []
    parts += [COMMA_HINT] if commas and total and not other else []
    return [InputError(path, "; ".join(parts), column=name, expected=expected)] if parts else []


def check_period_order(con, path: Path) -> list[InputError]:
    """Lines whose ChargePeriodEnd lies before their ChargePeriodStart."""
    sql = ("SELECT rn, ChargePeriodStart, ChargePeriodEnd FROM n "
           "WHERE _pe < _ps "
           f"ORDER BY rn LIMIT {MAX_ERRORS}")
    return [InputError(path, f"period ends ({shown(end)}) before it starts ({shown(start)})", row=rn,
                       column="ChargePeriodEnd", expected="an end at or after ChargePeriodStart")
            for rn, start, end in con.execute(sql).fetchall()]


def check_categories(con, path: Path) -> list[InputError]:
    """ChargeCategory cells outside the FOCUS set."""
    allowed = ", ".join(quote_text(c) for c in CHARGE_CATEGORIES)
    sql = (f"SELECT rn, ChargeCategory FROM n WHERE ChargeCategory IS NULL OR "
           f"ChargeCategory NOT IN ({allowed}) ORDER BY rn LIMIT {MAX_ERRORS}")
    return [InputError(path, f"unknown charge category {shown(value)}" if value else "missing value",
                       row=rn, column="ChargeCategory", expected="one of " + ", ".join(CHARGE_CATEGORIES))
            for rn, value in con.execute(sql).fetchall()]


#: FOCUS CommitmentDiscountStatus values (read in any letter case, as the audit compares them)
COMMITMENT_STATUSES = ("Used", "Unused")


def check_commitment_status(con, path: Path) -> list[InputError]:
    """CommitmentDiscountStatus cells that are neither Used nor Unused (any letter case). The audit
    reads the status to tell a commitment's covered usage from its unused part (class
    commitment_unused, the bridge, the commitment options), in any letter case but as written: an
    unknown one (or one padded with blanks) would count as neither."""
    allowed = ", ".join(quote_text(s.lower()) for s in COMMITMENT_STATUSES)
    sql = (f"SELECT rn, CommitmentDiscountStatus FROM n WHERE CommitmentDiscountStatus IS NOT NULL AND "
           f"lower(CommitmentDiscountStatus) NOT IN ({allowed}) ORDER BY rn LIMIT {MAX_ERRORS}")
    return [InputError(path, f"unknown commitment discount status {shown(value)}", row=rn,
                       column="CommitmentDiscountStatus",
                       expected=" or ".join(COMMITMENT_STATUSES) + " (or empty: no commitment discount)")
            for rn, value in con.execute(sql).fetchall()]


#: FOCUS 1.3 JSON columns holding an object with an ``Elements`` array of objects
ELEMENTS_COLUMNS = {"ContractApplied": "ContractCommitmentId", "AllocatedMethodDetails": "AllocatedRatio"}


def elements_test(column: str) -> str:
    """SQL: the cell is a JSON object with an ``Elements`` array (FOCUS 1.3 ContractApplied,
    AllocatedMethodDetails). Evaluated lazily, so a cell that is no JSON at all is never parsed on."""
    return (f"CASE WHEN json_valid({column}) THEN coalesce(json_type({column}) = 'OBJECT' "
            f"AND json_type({column}, '$.Elements') = 'ARRAY', FALSE) ELSE FALSE END")


def check_elements(con, path: Path) -> list[InputError]:
    """ContractApplied / AllocatedMethodDetails cells that are not ``{"Elements": [...]}`` objects."""
    errors: list[InputError] = []
    for name, key in ELEMENTS_COLUMNS.items():
        sql = (f"SELECT rn, {name} FROM n WHERE {name} IS NOT NULL AND NOT ({elements_test(name)}) "
               f"ORDER BY rn LIMIT {MAX_ERRORS - len(errors)}")
        errors += [InputError(path, f"{name} {shown(value)} is not a FOCUS 1.3 JSON object", row=rn,
                              column=name, expected=f'{{"Elements": [{{"{key}": ...}}, ...]}}')
                   for rn, value in con.execute(sql).fetchall()]
    return errors


def check_currency(con, path: Path) -> list[InputError]:
    """One InputError when the file bills in more than one currency."""
    sql = ("SELECT BillingCurrency, min(rn) FROM n WHERE BillingCurrency IS NOT NULL "
           "GROUP BY BillingCurrency ORDER BY min(rn)")
    found = con.execute(sql).fetchall()
    if len(found) <= 1:
        return []
    listed = ", ".join(f"{shown(value)} (first on row {rn})" for value, rn in found[:10])
    # the row where a second currency first appears (a CUR's reader retells it as the file's row)
    return [InputError(path, f"mixed currencies in one file: {listed}", row=int(found[1][1]),
                       column="BillingCurrency", expected="one billing currency per file")]


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
        errors += [InputError(path, f"duplicate line id {shown(value)} (also on row {first})", row=rn,
                              column=columns.header[int(columns.focus[name][1:])],
                              expected="a unique id per line")
                   for rn, value, first in con.execute(sql).fetchall()]
    return errors[:MAX_ERRORS]


#: how a note on a period cell whose hour ran past 23 begins (`costaudit billing` picks them out)
HOUR_PAST_23 = "hour past 23"


def hour_notes(con) -> list[tuple[int, str, str]]:
    """(row, column, note) for every period cell whose hour ran past 23 and was carried over."""
    notes = []
    for name, parsed in zip(PERIOD, ("_ps", "_pe")):
        sql = (f"SELECT rn, {name}, strftime({parsed}, '%Y-%m-%dT%H:%M:%SZ') FROM n "
               f"WHERE TRY_CAST({name} AS TIMESTAMPTZ) IS NULL AND {parsed} IS NOT NULL ORDER BY rn")
        notes += [(rn, name, f"{HOUR_PAST_23} in {text!r}, read as {moment}")
                  for rn, text, moment in con.execute(sql).fetchall()]
    return notes


WINDOW_EXTENT = "no line in the window"


def extent_notes(con, relation: str = "n", start: str = "_ps", end: str = "_pe") -> list[tuple[int, str, str]]:
    """For a file with no line in the window: (0, ChargePeriodStart, where its charge periods lie),
    from the moments ``start`` and ``end`` of ``relation``; nothing where they cannot be read."""
    try:
        first, last = con.execute(f"SELECT strftime(min({start}), '%Y-%m-%d %H:%M'), "
                                  f"strftime(max({end}), '%Y-%m-%d %H:%M') FROM {relation}").fetchone()
    except duckdb.Error:
        return []
    return [] if first is None else extent_note(first, last)


def extent_note(first, last) -> list[tuple[int, str, str]]:
    """The note of a source with no line in the window, its charge periods running from ``first``
    to ``last`` (UTC moments, or their text)."""
    first, last = (f"{m:%Y-%m-%d %H:%M}" if hasattr(m, "strftime") else m for m in (first, last))
    return [(0, "ChargePeriodStart", f"{WINDOW_EXTENT}: its charge periods run from {first} to {last} UTC")]


def repeat_notes(found: list[tuple[int, int, int]]) -> list[tuple[int, str, str]]:
    """(row, "", note) for every line that repeats an earlier one and was counted again."""
    return [(rn, "", repeat_text(found, i, "counted again")) for i, (rn, _, _) in enumerate(found)]


def notes_table(notes: list[tuple[int, str, str]]) -> pd.DataFrame:
    """Table ``notes``: one row per cell read in a way the file did not spell out."""
    return pd.DataFrame(notes, columns=["row", "column", "note"]).astype(
        {"row": "int64", "column": "str", "note": "str"})
