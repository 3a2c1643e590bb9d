"""A FOCUS 1.3 Contract Commitment dataset (CSV, gzipped CSV or Parquet) → table ``commitments``.

The dataset lists the terms of the contracts a customer agreed with a provider: one row per
contract commitment (a savings plan, a reservation, a spend or usage commitment), with its period,
its cost or quantity and unit. It joins the Cost and Usage lines through ContractCommitmentId (a
property of their ContractApplied objects; for AWS and Azure commitment discounts also their
CommitmentDiscountId). The FOCUS source reads it when its ``contract_commitment`` option names a
file (see docs/case.md); the audit carries the terms into audit.json ``commitments`` (METHOD §7:
a commitment's end is when the savings that lie on it can start).

Read the way the Cost and Usage reader reads: every column as text (no float ever), names matched
case-insensitively, null literals (empty, NULL, null, \\N) as null, timestamps without an offset
as UTC, every bad cell an InputError naming the file, row and column.
"""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd

from connectors.billing.focus_load import (
    NUMBER_PATTERN,
    check_last_line,
    csv_header,
    csv_sql,
    file_format,
    moment_sql,
    null_expr,
    parquet_header,
    parquet_sql,
    read_error,
)
from connectors.bounds import shown
from connectors.duck import MAX_ERRORS, object_series, quote_text, raise_all, session, utc_series
from connectors.errors import InputError

#: output column -> FOCUS 1.3 Contract Commitment column
TEXT = {"commitment_id": "ContractCommitmentId", "commitment_type": "ContractCommitmentType",
        "category": "ContractCommitmentCategory", "description": "ContractCommitmentDescription",
        "unit": "ContractCommitmentUnit", "currency": "BillingCurrency", "contract_id": "ContractId"}
NUMBERS = {"cost": "ContractCommitmentCost", "quantity": "ContractCommitmentQuantity"}
TIMES = {"start": "ContractCommitmentPeriodStart", "end": "ContractCommitmentPeriodEnd",
         "contract_start": "ContractPeriodStart", "contract_end": "ContractPeriodEnd"}
#: the columns FOCUS 1.3 says must not be null; the others may be absent from the file
REQUIRED = ("ContractCommitmentId", "ContractCommitmentType", "ContractCommitmentCategory",
            "ContractCommitmentPeriodStart", "ContractCommitmentPeriodEnd")
CATEGORIES = ("Spend", "Usage")
COLUMNS = tuple(TEXT.values()) + tuple(NUMBERS.values()) + tuple(TIMES.values())


def read_commitments(path: Path, currency: str) -> pd.DataFrame:
    """The ``commitments`` table (``schemas.billing.ContractCommitment``) of one dataset file.

    A null BillingCurrency is the FOCUS file's currency (``currency``)."""
    fmt = file_format(path)
    with session() as con:
        header = csv_header(path, fmt) if fmt != "parquet" else parquet_header(con, path)
        found = resolve(header, path)
        check_last_line(path, fmt)
        try:
            con.execute(parquet_sql(con, path) if fmt == "parquet" else csv_sql(len(header), fmt),
                        [] if fmt == "parquet" else [str(path)])
        except duckdb.Error as exc:
            raise read_error(path, fmt, exc) from None
        named = [f"{null_expr(found[c]) if c in found else 'NULL::VARCHAR'} AS {c}" for c in COLUMNS]
        con.execute(f"CREATE TEMP VIEW cc AS SELECT rowid + 1 AS rn, {', '.join(named)} FROM src")
        times = ", ".join(f"{moment_sql(c)} AS _{c}" for c in TIMES.values())
        con.execute(f"CREATE TEMP VIEW cct AS SELECT *, {times} FROM cc")
        raise_all(problems(con, path))
        table = con.execute("SELECT * FROM cct ORDER BY rn").fetch_df()
    return frame(table, currency)


def resolve(header: list[str], path: Path) -> dict[str, str]:
    """FOCUS Contract Commitment column → internal column ``cN``; missing required columns are an error."""
    known = {name.lower(): name for name in COLUMNS}
    found = {known[name.lower()]: f"c{i}" for i, name in enumerate(header) if name.lower() in known}
    missing = [name for name in REQUIRED if name not in found]
    if missing:
        raise InputError(path, f"missing Contract Commitment column(s): {', '.join(missing)}",
                         column=", ".join(missing),
                         expected="a FOCUS 1.3 Contract Commitment dataset with " + ", ".join(REQUIRED))
    return found


def problems(con, path: Path) -> list[InputError]:
    """Every bad cell, at most MAX_ERRORS: nulls where FOCUS forbids them, numbers, timestamps,
    categories, a period that ends before it starts, a commitment id listed twice."""
    pattern = quote_text(NUMBER_PATTERN)
    checks = [(c, f"{c} IS NULL", "missing value", "a value") for c in REQUIRED]
    checks += [(c, f"{c} IS NOT NULL AND NOT regexp_full_match(trim({c}), {pattern})", "unparseable number",
                "a decimal number") for c in NUMBERS.values()]
    checks += [(c, f"{c} IS NOT NULL AND _{c} IS NULL", "unparseable timestamp",
                "an ISO 8601 timestamp (no offset = UTC)") for c in TIMES.values()]
    allowed = ", ".join(quote_text(c) for c in CATEGORIES)
    checks.append(("ContractCommitmentCategory", f"ContractCommitmentCategory NOT IN ({allowed})",
                   "unknown category", "Spend or Usage"))
    checks.append(("ContractCommitmentPeriodEnd", "_ContractCommitmentPeriodEnd < _ContractCommitmentPeriodStart",
                   "period ends before it starts", "an end at or after ContractCommitmentPeriodStart"))
    checks.append(("ContractCommitmentId", "rn > min(rn) OVER (PARTITION BY ContractCommitmentId) "
                   "AND ContractCommitmentId IS NOT NULL", "listed again", "each commitment once"))
    errors: list[InputError] = []
    for column, test, what, expected in checks:
        if len(errors) >= MAX_ERRORS:
            break
        sql = (f"SELECT rn, {column} FROM (SELECT *, ({test}) AS _bad FROM cct) WHERE _bad "
               f"ORDER BY rn LIMIT {MAX_ERRORS - len(errors)}")
        errors += [InputError(path, what if value is None else f"{what} {shown(value)}", row=rn,
                              column=column, expected=expected)
                   for rn, value in con.execute(sql).fetchall()]
    return errors


def frame(table: pd.DataFrame, currency: str) -> pd.DataFrame:
    """The checked rows as ``ContractCommitment`` columns: Decimals from the text, UTC times."""
    out = {"row": table["rn"].astype("int64")}
    for name, column in TEXT.items():
        out[name] = table[column].fillna("").astype("str")
    out["currency"] = out["currency"].where(out["currency"] != "", currency)
    for name, column in NUMBERS.items():
        out[name] = object_series([None if v is None or v != v else Decimal(str(v).strip())
                                   for v in table[column].tolist()])
    for name, column in TIMES.items():
        out[name] = utc_series(pd.to_datetime(table[f"_{column}"], utc=True))
    return pd.DataFrame(out)
