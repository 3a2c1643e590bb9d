"""The rows of a local GCP billing export that lie wholly outside the window, said by name (rule 5).

The GCP reader drops such rows inside its own aggregate (``gcp_sql.GCP_LINES`` keeps the rows whose
usage period overlaps the window), before the FOCUS step that notes the lines it leaves out
(:mod:`connectors.billing.window_outside`); :func:`outside_rows` says the same of the export's rows, in
the same words: how many export rows, their cost, first usage start, last usage end and the first
rows as ``file:line`` (a Parquet file: its row).

The figures follow the reader's mapping: each row's ``cost`` is what its charge line bills, and its
credits are Credit lines of their own (BilledCost = EffectiveCost = the credit), so "billed" is the
summed ``cost`` (before credits) and "effective" the summed ``cost`` plus credits, what the rows would
have added to the audit. Each amount is rounded to 9 places as the aggregate rounds it (``money``).

One aggregate over view ``billing_export`` counts and sums (no row numbers: a window function over the
whole export would stop its parallel read); only where rows are outside are the files read one at a
time, numbered as :func:`connectors.billing.gcp_files.numbered` numbers them, for the first rows.

A BigQuery table gets no such note: the rows outside the window would need a second query (its own dry
run and bytes), or a marker row in the shared aggregate that every step after it would have to skip.
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from connectors.billing.focus_checks import extent_notes
from connectors.billing.gcp_files import JSON_COLUMNS, PERIOD_COLUMNS
from connectors.billing.window_outside import EXAMPLES, MOMENT, outside_sql, outside_text
from connectors.duck import quote_text

MONEY = "CAST(CAST({} AS VARCHAR) AS DECIMAL(38, 9))"
#: an export row's credits, summed as the aggregate sums them
CREDITS = f"coalesce(list_sum(list_transform(credits, lambda c: {MONEY.format('c.amount')})), 0)"


def window_notes(con, files: tuple[list[str], str], ctx, lines: int) -> list[tuple[int, str, str]]:
    """The notes of a local export's window: the rows wholly outside it (:func:`outside_rows`) where it
    holds ``lines``, else where the export's rows lie (focus_checks.extent_notes)."""
    if not lines:
        return extent_notes(con, "billing_export", *PERIOD_COLUMNS)
    return outside_rows(con, files, (ctx.start, ctx.end), ctx.currency)


def outside_rows(con, files: tuple[list[str], str], window: tuple[datetime, datetime],
                 currency: str) -> list[tuple[int, str, str]]:
    """(first row, usage_start_time, note) on the export rows of ``files`` (the files and their format)
    wholly outside ``window``; none where every row overlaps it."""
    start, end = PERIOD_COLUMNS
    cost = MONEY.format("cost")
    count, billed, effective, first, last, found = con.execute(
        f"SELECT count(*), CAST(sum({cost}) AS VARCHAR), CAST(sum({cost} + {CREDITS}) AS VARCHAR), "
        f"strftime(min({start}), '{MOMENT}'), strftime(max({end}), '{MOMENT}'), min(currency) "
        f"FROM billing_export WHERE {outside_sql(window, start, end)}").fetchone()
    if not count:
        return []
    rows = first_rows(con, *files, window)
    note = outside_text(window, (count, billed, effective, first, last),
                        [f"{Path(file).name}:{row}" for file, row in rows], currency if found is None else found)
    return [(rows[0][1] if rows else 0, start, note)]


def first_rows(con, files: list[str], fmt: str, window: tuple[datetime, datetime]) -> list[tuple[str, int]]:
    """(file, line) of the first :data:`EXAMPLES` rows wholly outside ``window``, file by file."""
    found: list[tuple[str, int]] = []
    for file in files:
        limit = EXAMPLES - len(found)
        found += [(file, int(n)) for (n,) in con.execute(
            f"SELECT n FROM ({numbered(file, fmt)}) WHERE {outside_sql(window, 's', 'e')} ORDER BY n LIMIT {limit}"
        ).fetchall()]
        if len(found) >= EXAMPLES:
            break
    return found


def numbered(file: str, fmt: str) -> str:
    """SQL: (n, s, e) of one export file: its row (a JSON file's line), usage start and end."""
    start, end = PERIOD_COLUMNS
    times = f"CAST({start} AS TIMESTAMPTZ) AS s, CAST({end} AS TIMESTAMPTZ) AS e"
    if fmt == "json":
        spec = "{" + ", ".join(f"{quote_text(c)}: {quote_text(JSON_COLUMNS[c])}" for c in PERIOD_COLUMNS) + "}"
        return (f"SELECT row_number() OVER () AS n, {times} "
                f"FROM read_json({quote_text(file)}, format='newline_delimited', columns={spec})")
    return f"SELECT file_row_number + 1 AS n, {times} FROM read_parquet({quote_text(file)}, file_row_number=true)"
