"""FOCUS 1.0–1.3 billing data (CSV, gzipped CSV or Parquet) → table ``lines`` (``BillingLine``).

DuckDB reads every column as text (CSV: all VARCHAR; Parquet: each column CAST to VARCHAR), so
no amount ever passes through a float: money becomes ``decimal.Decimal`` in Python, from the text.
Checks, timestamp parsing and the window filter run in SQL over a numbered copy of the file.

Conventions (see docs/architecture.md, "focus → table lines"):

* ``row`` is the 1-based data row: the header is not counted, and neither are blank lines (DuckDB
  skips them), so in a file with blank lines it is the n-th record, not the n-th text line.
* Column names are matched to the FOCUS names case-insensitively (the FOCUS 1.2 spec examples
  spell ``SkuPriceid``); two headers that differ only in case are an error.
* Mandatory: BilledCost, EffectiveCost, ChargeCategory, ChargePeriodStart, ChargePeriodEnd.
  ServiceName is optional ("" when absent): the FOCUS 1.2 spec example files have no ServiceName
  column, and they must load. Every spec example has the ChargePeriod columns, so there is no
  BillingPeriod fallback: a charge period is never guessed from the billing period.
* Timestamps without an offset are UTC (FOCUS defines UTC); with an offset or ``Z`` they are
  converted to UTC. An hour past 23 (the FOCUS 1.2 spec examples write ``2023-02-01T30:00:00Z``)
  carries into the following day(s) and is reported in table ``notes``, never refused.
* Lines whose charge period overlaps [ctx.start, ctx.end) are kept; a zero-length period counts
  when its instant lies in the window. Every data row is still checked (numbers, timestamps,
  categories, currency, duplicate ids); Tags and ``x_*`` columns are parsed for kept lines only.
* Lines identical in every column are all counted (FOCUS has no uniqueness rule, and the spec's own
  example with two resources repeats a line): table ``notes`` says which rows repeat which. A dialect
  whose lines carry their own identity (CUR, or any file with an Id / x_Id column) makes them an
  error instead (``duplicates="error"``).
  A repeated ``Id`` / ``x_Id`` is always an error.
* A null BillingCurrency cell takes the file's one currency (the case currency if the column is
  all null or absent: BillingCurrency is mandatory in FOCUS, so table ``notes`` says first that the
  amounts were read in the case's currency, assumed); two currencies in one file are an error. A
  currency that differs from the case's is left for the audit to report.
* ``extra`` holds every ``x_*`` column and SkuPriceDetails that is not null, as text (sorted
  keys); SkuPriceDetails is embedded as an object when it parses as a JSON object.
* FOCUS 1.3: ServiceProviderName is the provider (ProviderName / PublisherName, deprecated, are
  still read where it is absent: 1.0–1.2 files load unchanged), HostProviderName ``host_provider``.
  Split cost allocation rows (AllocatedMethodId, AllocatedResourceId, AllocatedResourceName,
  AllocatedTags) are lines like any other: a provider's split *replaces* the charge it splits, so
  every row counts once; the allocated columns stay on the line (AllocatedTags as canonical JSON)
  for the scope and the services to match. ContractApplied keeps its ContractCommitmentIds (JSON
  array text); ContractApplied and AllocatedMethodDetails must be ``{"Elements": [...]}`` objects.
* A usage correction without a quantity (ChargeCategory Usage, ChargeClass Correction, PricingQuantity
  0 or null: a refund, which FOCUS 1.0+ writes in the category of the charge it corrects) is read as
  ChargeCategory ``Refund``, as a dialect's refund is (:func:`connectors.billing.focus_lines.charge_category_sql`).
* Source option ``contract_commitment``: a FOCUS 1.3 Contract Commitment dataset read beside the
  lines into table ``commitments`` (:mod:`connectors.billing.focus_commitments`).

The work is split in three: :mod:`connectors.billing.focus_load` (the file as table ``src``, view
``n``), :mod:`connectors.billing.focus_checks` (row checks, repeated lines, notes) and
:mod:`connectors.billing.focus_lines` (window selection, normalisation into ``lines``).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

import pandas as pd

from connectors.base import Connector
from connectors.billing.block_window import blocks_to_window
from connectors.billing.clip import clip_to_window
from connectors.billing.focus_checks import (
    check_rows,
    duplicate_errors,
    extent_notes,
    hour_notes,
    notes_table,
    repeat_notes,
    repeated_lines,
)
from connectors.billing.focus_commitments import read_commitments
from connectors.billing.focus_lines import (
    build_lines,
    covered,
    currency_notes,
    file_currency,
    purchases_outside,
    select_window,
)
from connectors.billing.focus_load import (
    ID_COLUMNS,
    Columns,
    create_view,
    file_format,
    load,
    require,
    resolve_columns,
    varchar_columns,
)
from connectors.billing.window_outside import outside_notes, period_notes
from connectors.bounds import check_source_path
from connectors.duck import quote_ident, raise_all, session
from connectors.errors import InputError
from schemas.billing import BillingLine, ContractCommitment


class FocusConnector(Connector):
    """Reads one FOCUS export into the ``lines`` table."""

    format_name = "focus"
    kind = "billing"
    schemas = {"lines": BillingLine, "commitments": ContractCommitment}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Load, check every row, keep the lines in the window and normalise them; read the
        Contract Commitment dataset the ``contract_commitment`` option names."""
        fmt = file_format(self.path)
        with session() as con:
            columns = load(con, self.path, fmt)
            tables, rows, span = read_focus_table(con, columns, self.path, self.ctx,
                                                  grain=self.spec.options.get("grain"))
        dataset = commitment_path(self.spec.options.get("contract_commitment"), self.path)
        if dataset is not None:
            currency = str(tables["lines"]["currency"].iloc[0]) if len(tables["lines"]) else self.ctx.currency
            tables["commitments"] = read_commitments(dataset, currency)
        return tables, rows, span


def commitment_path(value, lines_path: Path) -> Path | None:
    """The Contract Commitment file of option ``contract_commitment`` (None when not given).

    The case resolves it against the case folder; a relative path given to the connector directly
    lies beside the Cost and Usage file."""
    if value is None:
        return None
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise InputError(lines_path, f"contract_commitment {value!r} is not a file name", column="contract_commitment",
                         expected="the path of a FOCUS 1.3 Contract Commitment file (.csv, .csv.gz, .parquet)")
    path = Path(value)
    path = path if path.is_absolute() else lines_path.parent / path
    check_source_path(path, expected="a FOCUS 1.3 Contract Commitment file")
    return path


def read_focus_table(con, columns: Columns, path: Path, ctx, duplicates: str = "note",
                     grain: str = "auto", normalised: bool = False,
                     label: str | None = None,
                     name: Callable[[int], str] | None = None) -> tuple[dict[str, pd.DataFrame], int, tuple]:
    """From table ``src`` (VARCHAR columns c0..cN described by ``columns``) to the ``lines`` table.

    Every dialect connector (CUR, Azure exports, ...) maps its own columns to FOCUS names in SQL,
    calls :func:`load_focus_named` and then this, so checks, window and normalisation are written once.
    ``duplicates``: ``"note"`` counts identical lines and notes them, ``"error"`` refuses them.
    Table ``notes`` (row, column, note) lists what was read in a way the file did not spell out;
    table ``purchases_outside`` the commitment purchases outside the window, per commitment
    (:func:`connectors.billing.focus_lines.purchases_outside`).
    ``normalised``: the dialect turned every null literal into NULL already
    (:func:`connectors.billing.focus_load.create_view`). ``label``: what line ids start with
    (default the file's name; a table read in place: its query's id). ``name``: a row of table ``src``
    as the notes name it (default ``label:row``; a dialect whose rows are not the file's gives its own).
    The lines wholly outside the window, and those whose charge period lies outside their billing
    period, are named in ``notes`` (:mod:`connectors.billing.window_outside`).
    """
    require(columns, path)
    create_view(con, columns, normalised)
    repeated = repeated_lines(con, columns)
    errors = check_rows(con, columns, path, {rn for rn, _, _ in repeated})
    # A line that carries its own id (Id, x_Id) and repeats another line whole is the same line twice.
    if any(columns.has(name) for name in ID_COLUMNS):
        duplicates = "error"
    raise_all((duplicate_errors(repeated, path) if duplicates == "error" else []) + errors)
    rows = con.execute("SELECT count(*) FROM src").fetchall()[0][0]
    currency = file_currency(con, columns, ctx.currency)
    label = label or path.name
    kept = select_window(con, columns, (ctx.start, ctx.end), label, currency, line_grain(grain, path))
    beyond = purchases_outside(con, (ctx.start, ctx.end), label)
    lines, clipped = clip_to_window(build_lines(kept, columns, path), (ctx.start, ctx.end))
    lines, blocks = blocks_to_window(con, columns, lines, (ctx.start, ctx.end), label)
    clipped += blocks
    notes = currency_notes(con, columns, ctx.currency) + hour_notes(con) + clipped
    notes += repeat_notes(repeated) if duplicates == "note" else []
    notes += extent_notes(con) if lines.empty and rows else []
    named = name or (lambda rn: f"{label}:{rn}")
    notes += outside_notes(con, (ctx.start, ctx.end), currency, named) if len(lines) else []
    notes += period_notes(con, currency, named)
    return {"lines": lines, "notes": notes_table(notes), "purchases_outside": beyond}, int(rows), covered(lines)


GRAINS = ("auto", "line")


def line_grain(value, path: Path) -> str:
    """A source's ``grain`` option for its lines: ``auto`` (sum what the audit does not tell apart)
    or ``line`` (keep every invoice line as a line of its own)."""
    value = "auto" if value is None else str(value)
    if value not in GRAINS:
        raise InputError(path, f"grain {value!r} is not known", column="grain",
                         expected="one of " + ", ".join(GRAINS))
    return value


def load_focus_named(con, table: str, path: Path, consume: bool = False, weight: str | None = None) -> Columns:
    """Load ``table`` (columns a dialect named with FOCUS / ``x_*`` names, any type) as the FOCUS
    reader's table ``src``, every column VARCHAR; returns its columns resolved to FOCUS names.

    The table's row order is the row numbering of error messages, so dialects should build it in
    file order. ``consume``: the dialect no longer needs ``table``; when its columns are all VARCHAR
    it becomes ``src`` by renaming (no copy). ``weight``: the column of ``table`` (VARCHAR digits)
    that counts the invoice lines each row stands for (:attr:`Columns.weight`), when the dialect
    summed lines already; it is no FOCUS column.
    """
    described = con.execute(f"DESCRIBE {quote_ident(table)}").fetchall()
    header = [name for name, *_ in described]
    if consume and all(dtype == "VARCHAR" for _, dtype, *_ in described):
        con.execute(f"ALTER TABLE {quote_ident(table)} RENAME TO src")
        for i, name in enumerate(header):
            con.execute(f"ALTER TABLE src RENAME COLUMN {quote_ident(name)} TO c{i}")
        return weighted(resolve_columns(header, path), header, weight)
    con.execute(f"CREATE TABLE src AS SELECT {varchar_columns(described)} FROM {quote_ident(table)}")
    return weighted(resolve_columns(header, path), header, weight)


def weighted(columns: Columns, header: list[str], weight: str | None) -> Columns:
    """``columns`` with :attr:`Columns.weight` set to the internal name of header column ``weight``."""
    if weight is None:
        return columns
    return replace(columns, weight=f"c{header.index(weight)}")
