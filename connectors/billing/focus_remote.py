"""A FOCUS table read in place (Athena, BigQuery): the table recognised by its columns, the rows
of :mod:`connectors.billing.focus_aggregate` handed to the FOCUS connector.

Both warehouse connectors call :func:`focus_plan` when a table is not in the format they know
(CUR, the Cloud Billing export): a FOCUS table gets its plan; any other table is one error naming
the table, the columns expected and the nearest columns found. The query's rows land in DuckDB as
text; :func:`read_rows` names them with FOCUS names and runs them through
``load_focus_named`` + ``read_focus_table`` (checks, window, normalisation: every later stage as
for a FOCUS file). A line's ``line_id`` is ``<query id>:<result row>``; ``line_count`` the FOCUS
lines its row sums.
"""
from __future__ import annotations

from pathlib import Path

from connectors.billing import focus_aggregate as fagg
from connectors.billing.focus import load_focus_named, read_focus_table
from connectors.billing.focus_load import MANDATORY
from connectors.duck import quote_ident
from connectors.errors import InputError

#: BigQuery field types → the type names :func:`connectors.billing.cur_aggregate.kind_of` reads
BIGQUERY_TYPES = {"FLOAT64": "double", "FLOAT": "double", "NUMERIC": "decimal", "BIGNUMERIC": "decimal",
                  "INT64": "bigint", "INTEGER": "bigint", "STRING": "string", "TIMESTAMP": "timestamp",
                  "DATETIME": "timestamp"}


def focus_plan(where: str, columns: list[tuple[str, str]], known: str, missing: list[str]) -> fagg.Plan:
    """The plan of a FOCUS table, or the one error for a table that is neither ``known`` (the
    connector's own format, which lacks ``missing``) nor FOCUS."""
    plan = fagg.plan(columns)
    if not plan.missing:
        return plan
    wanted = tuple(missing) + tuple(plan.missing)
    found = fagg.nearest(columns, wanted)
    raise InputError(where, f"neither {known} (no column(s) {', '.join(missing)}) nor a FOCUS table (no "
                     f"column(s) {', '.join(plan.missing)}); nearest columns found: "
                     f"{', '.join(found) if found else 'none'}", column=", ".join(plan.missing),
                     expected=f"{known}, or a FOCUS table with columns {', '.join(MANDATORY)}")


def bigquery_columns(schema) -> list[tuple[str, str]]:
    """(name, type) of a BigQuery table's fields: a RECORD, JSON or repeated field as ``json``
    (read as its JSON text)."""
    return [(field.name, "json" if field.mode == "REPEATED" else
             BIGQUERY_TYPES.get(str(field.field_type).upper(), "json")) for field in schema]


def read_rows(con, table: str, names: list[str], where: Path, label: str, ctx) -> tuple[dict, int, tuple]:
    """The query's rows (DuckDB table ``table``, columns in query order, in result order) through
    the FOCUS reader; returns its tables, the FOCUS lines summed and the covered span."""
    described = [name for name, *_ in con.execute(f"DESCRIBE {quote_ident(table)}").fetchall()]
    parts = [f"CAST({quote_ident(column)} AS VARCHAR) AS {quote_ident(name)}"
             for column, name in zip(described, names)]
    con.execute(f"CREATE TABLE focus_rows AS SELECT {', '.join(parts)} FROM {quote_ident(table)} ORDER BY rowid")
    con.execute(f"DROP TABLE {quote_ident(table)}")
    lines = int(con.execute(f"SELECT coalesce(sum(CAST({fagg.LINES} AS BIGINT)), 0) FROM focus_rows").fetchall()[0][0])
    columns = load_focus_named(con, "focus_rows", where, consume=True, weight=fagg.LINES)
    tables, _, covered = read_focus_table(con, columns, where, ctx, label=label)
    return tables, lines, covered


def read_focus_rows(con, names: list[str], where: Path, job_id: str, ctx, extent) -> tuple[dict, int, tuple]:
    """A BigQuery job's rows (DuckDB table ``agg``) through the FOCUS reader (:func:`read_rows`),
    with the table's extent in the notes where the window holds no line."""
    import pandas as pd

    from connectors.billing.focus_checks import extent_note, notes_table

    tables, lines, covered = read_rows(con, "agg", names, where, job_id, ctx)
    if not len(tables["lines"]) and extent:
        tables["notes"] = pd.concat([tables["notes"], notes_table(extent_note(*extent))], ignore_index=True)
    return tables, lines, covered
