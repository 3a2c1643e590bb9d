"""AWS Cost and Usage Reports (legacy CUR, Athena CUR, CUR 2.0) → table ``lines`` (``BillingLine``).

A source is one file (.csv, .csv.gz, .parquet) or a folder in an export layout. The CUR columns
are mapped to FOCUS names in DuckDB (``connectors/billing/cur_sql.py``); the FOCUS connector's checks,
window filter and normalisation then run on the mapped table (:func:`connectors.billing.focus.load_focus_named`,
:func:`connectors.billing.focus.read_focus_table`). No raw line passes through pandas.

* **Money.** BilledCost is ``lineItem/UnblendedCost`` for every line but Savings Plan covered usage
  and its negation, which net to zero on the invoice and both carry 0 (as AWS's FOCUS export does). EffectiveCost is the
  amortised cost, as AWS's own amortised-cost formula: RI-covered usage at
  ``reservation/EffectiveCost``, Savings Plan covered usage at ``savingsPlan/SavingsPlanEffectiveCost``,
  negations and commitment fees at 0, everything else unblended. An upfront ``Fee`` with a
  reservation ARN is a commitment purchase (EffectiveCost 0, its amortisation is in the usage).
* **Unused commitments.** Each ``SavingsPlanRecurringFee`` / ``RIFee`` line with an unused part gets
  a second row (ChargeCategory Usage, CommitmentDiscountStatus Unused, BilledCost 0, EffectiveCost =
  the unused part); fee rows and covered usage carry the commitment's ARN as CommitmentDiscountId, so
  the audit spreads a fee (billed basis) over the lines that used or left unused its commitment.
* **Savings Plan negations** carry no money and no quantity (the covered lines carry the
  instance-hours); they are kept so that row counts match the file.
* **Split cost allocation rows** (``EKSPod-EC2``, ``ECSTask-EC2``, or a split parent resource id other
  than the line's own) share out an instance line that is already billed: they are left out of
  ``lines``, summed once into table ``split_summary`` and named in the notes (with any money they
  carry of their own, which is left out too: :mod:`connectors.billing.cur_split`).
* **Tags.** ``resourceTags/*`` columns, flat ``resource_tags_*`` columns or the CUR 2.0 tag MAP, as
  a JSON object; user-defined tags lose their ``user:`` / ``user_`` prefix (FOCUS writes user tags
  without a prefix); AWS-generated tags keep theirs. A tag MAP in which two keys would become one
  (``user:team`` and ``user_team``) keeps every key as spelled.
* **Folders.** Data files are found recursively. Where ``*Manifest.json`` files exist, each billing
  period (a ``BILLING_PERIOD=…`` or ``yyyymmdd-yyyymmdd`` folder) is read from the files its current
  manifest lists (``reportKeys`` or ``dataFiles``), so a restated month is read once: the current
  manifest is the one nearest the period folder (the period-level manifest AWS overwrites on each
  delivery), then the newest by modification time. A period without a manifest is read whole.
* **Rows.** ``row`` is the 1-based data row of the line in its own file and ``line_id`` is
  ``<file>:<row>`` (``<file>`` = the file name, or its path inside the source folder); an unused
  commitment row is ``<file>:<row>:unused``. Errors name the file, its row and the CUR column.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from connectors.base import Connector
from connectors.billing import cur_sql as sql
from connectors.billing.cur_checks import HASHES_TABLE, check_raw, hash_rows_sql, map_errors, repeated_ids
from connectors.billing.cur_commitments import commitment_terms
from connectors.billing.cur_compact import compact
from connectors.billing.cur_split import split_notes, split_summary
from connectors.billing.focus import load_focus_named, read_focus_table
from connectors.billing.focus_checks import extent_notes, notes_table
from connectors.billing.focus_lines import covered
from connectors.billing.focus_load import check_last_line, csv_header, file_format, read_error
from connectors.bounds import EITHER, shown
from connectors.duck import MAX_ERRORS, first_line, raise_all, session
from connectors.errors import InputError, InputErrors
from connectors.header_hint import header_hint
from schemas.billing import BillingLine, ContractCommitment

DATA_SUFFIXES = (".csv", ".csv.gz", ".parquet")
PERIOD_FOLDER = re.compile(r"^(BILLING_PERIOD=.+|\d{8}-\d{8})$")
IGNORED_FOLDERS = {"cost_and_usage_data_status"}
# FOCUS column → the CUR field it comes from, for errors the FOCUS checks find.
FOCUS_SOURCE = {"BilledCost": "line_item_unblended_cost", "ChargeCategory": "line_item_line_item_type",
                "ChargePeriodStart": "line_item_usage_start_date",
                "ChargePeriodEnd": "line_item_usage_end_date", "BillingCurrency": "line_item_currency_code",
                "ListCost": "pricing_public_on_demand_cost", "ListUnitPrice": "pricing_public_on_demand_rate",
                "PricingQuantity": "line_item_usage_amount", "ConsumedQuantity": "line_item_usage_amount"}


class CurConnector(Connector):
    """Reads a CUR file or export folder into the ``lines`` table (and ``split_summary``)."""

    format_name = "cur"
    accepts = EITHER
    kind = "billing"
    schemas = {"lines": BillingLine, "commitments": ContractCommitment}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Find the current data files, map them to FOCUS in DuckDB, check, filter, normalise."""
        files = discover(self.path)
        with session() as con:
            return read_cur(con, files, self.path, self.ctx, grain=self.spec.options.get("grain"))


def read_cur(con, files: list[tuple[Path, str]], source: Path, ctx,
             grain: str | None = None) -> tuple[dict, int, tuple]:
    """Load ``files`` (path, label) into ``raw``, check them, map them and build the tables."""
    layouts = [describe(con, path, label) for path, label in files]
    raise_all([e for layout in layouts for e in missing_columns(layout)][:MAX_ERRORS])
    con.execute(HASHES_TABLE)
    for index in range(len(layouts)):
        load_file(con, layouts, index)
    con.execute(sql.raw_view_sql(layouts))
    return read_raw(con, layouts, source, ctx, grain=grain, from_files=True)


def read_raw(con, layouts: list[sql.Layout], source: Path, ctx, rows: int | None = None,
             grain: str | None = None, from_files: bool = False, weighted: bool = False) -> tuple[dict, int, tuple]:
    """From ``raw`` (the files' lines, or a query's result: ``layouts[_file]`` names where each row
    came from) to the tables: checks, mapping, FOCUS checks, window, relabelling.
    ``rows``: the CUR lines read (default: the rows of ``raw``). ``from_files``: ``raw`` is the view
    of :func:`read_cur` over the files' relations, whose lines are summed before they are mapped
    where that is exact (:mod:`connectors.billing.cur_compact`). ``weighted``: ``raw`` has column ``_n``
    already, the CUR lines each row sums (a query that summed them)."""
    raise_all(check_raw(con, layouts, from_files))
    repeats = repeated_ids(con, layouts) if from_files else []
    if rows is None:
        rows = con.execute("SELECT count(*) FROM raw").fetchall()[0][0]
    summed = from_files and compact(con, layouts, (ctx.start, ctx.end), grain)
    if from_files and not summed:
        check_tags(con, layouts)
    weighted = weighted or summed
    stage(con, weighted)
    split = split_summary(con, layouts, (ctx.start, ctx.end))
    terms = commitment_terms(con, ctx.currency)
    drop_raw(con, len(layouts))
    columns = load_focus_named(con, "mapped", source, consume=True, weight="_n")
    con.execute("DROP TABLE IF EXISTS mapped")
    try:
        # Every field of raw went through text_or_null and every mapped column is a field, a
        # literal, tags JSON or a number's text: no null literal is left in table src.
        tables, _, _ = read_focus_table(con, columns, source, ctx, duplicates="error", grain=grain,
                                        normalised=True, name=lambda rn: row_name(con, layouts, rn))
    except InputError as exc:
        raise translate(con, exc, layouts, source) from None
    except InputErrors as exc:
        raise InputErrors([translate(con, e, layouts, source) for e in exc.errors]) from None
    lines = relabel(con, tables["lines"], layouts)
    found = {"lines": lines}
    if len(split):
        found["split_summary"] = split
    if len(terms):
        found["commitments"] = terms
    notes = file_rows(con, tables["notes"])  # the FOCUS reader's: lines clipped to the window, …
    if lines.empty and rows and from_files:  # no line kept: where the files' own periods lie, alone
        notes = notes_table(files_extent(con, layouts))
    if len(split):
        notes = pd.concat([notes, notes_table(split_notes(split))], ignore_index=True)
    if repeats:
        notes = pd.concat([notes, notes_table(repeats)], ignore_index=True)
    if len(notes):
        found["notes"] = notes
    return found, int(rows), covered(lines)


def file_rows(con, notes: pd.DataFrame) -> pd.DataFrame:
    """The FOCUS reader's notes with each row number the file's own (table ``origin``, as
    :func:`relabel` gives the lines theirs); a row 0 (no row) stays 0."""
    if not len(notes):
        return notes
    origin = con.execute("SELECT _row FROM origin").fetchnumpy()["_row"]
    at = notes["row"].to_numpy()
    known = (at >= 1) & (at <= len(origin))
    rows = at.copy()
    rows[known] = np.asarray(origin)[at[known] - 1]
    return notes.assign(row=rows.astype("int64"))


def files_extent(con, layouts: list[sql.Layout]) -> list[tuple[int, str, str]]:
    """Where the files' usage periods lie, for a read that kept no line of the window: their
    relations are made again for this one query (only then)."""
    for index, layout in enumerate(layouts):
        con.execute(sql.file_relation_sql(layout, index))
    con.execute(sql.raw_view_sql(layouts))
    period = [f"TRY_CAST(line_item_usage_{end}_date AS TIMESTAMPTZ)" for end in ("start", "end")]
    notes = extent_notes(con, "raw", *period)
    drop_raw(con, len(layouts))
    return notes


def drop_raw(con, files: int) -> None:
    """Free what only staging read: ``raw`` (a view or a table), the files' relations, the row hashes."""
    kinds = dict(con.execute("SELECT table_name, 'TABLE' FROM duckdb_tables() UNION ALL "
                             "SELECT view_name, 'VIEW' FROM duckdb_views() WHERE NOT internal").fetchall())
    for name in ["raw", "_hashes"] + [f"f{index}" for index in range(files)]:
        if name in kinds:
            con.execute(f"DROP {kinds[name]} {name}")


# --- finding the files ---------------------------------------------------------------------------

def discover(root: Path) -> list[tuple[Path, str]]:
    """The data files to read, with the label line ids use: a file itself, or a folder's current files."""
    if root.is_file():
        return [(root, root.name)]
    everything = sorted(p for p in root.rglob("*") if p.is_file() and not hidden(p, root))
    files = [p for p in everything if is_data(p)]
    zipped = [p for p in everything if p.name.lower().endswith(".zip")]
    manifests = [p for p in everything if p.name.endswith("Manifest.json")]
    chosen = current_files(root, files, manifests) if manifests else files
    if zipped and not chosen:
        raise InputError(zipped[0], "ZIP-compressed CUR files are not read",
                         expected="CUR delivered as GZIP CSV or Parquet (or unzip the files)")
    if not chosen:
        raise InputError(root, "no CUR data files in the folder",
                         expected="CUR files (.csv, .csv.gz, .parquet) or an export folder")
    return [(p, p.relative_to(root).as_posix()) for p in chosen]


def hidden(path: Path, root: Path) -> bool:
    """Dot files, and the Athena integration's status table (not cost data)."""
    parts = path.relative_to(root).parts
    return any(part.startswith(".") or part in IGNORED_FOLDERS for part in parts)


def is_data(path: Path) -> bool:
    """A CUR data file by its name."""
    return path.name.lower().endswith(DATA_SUFFIXES)


def period_of(path: Path, root: Path) -> str:
    """The billing-period folder a file lies in (``BILLING_PERIOD=2024-01``, ``20240101-20240201``), or ""."""
    return next((part for part in path.relative_to(root).parts[:-1] if PERIOD_FOLDER.match(part)), "")


def current_files(root: Path, files: list[Path], manifests: list[Path]) -> list[Path]:
    """Per billing period, the files its current manifest lists; periods without a manifest whole."""
    by_period: dict[str, list[Path]] = {}
    for manifest in manifests:
        by_period.setdefault(period_of(manifest, root), []).append(manifest)
    chosen: set[Path] = set()
    for manifests_of_period in by_period.values():
        manifest = min(manifests_of_period, key=lambda m: (len(m.relative_to(root).parts),
                                                           -m.stat().st_mtime_ns, m.as_posix()))
        chosen |= set(listed_files(manifest, root, files))
    return [p for p in files if p in chosen or period_of(p, root) not in by_period]


def listed_files(manifest: Path, root: Path, files: list[Path]) -> list[Path]:
    """The local files a manifest names (S3 keys matched on their trailing path components)."""
    try:
        document = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(manifest, f"unreadable manifest: {exc}", expected="a CUR manifest (JSON)") from None
    keys = document.get("reportKeys", document.get("dataFiles")) if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise InputError(manifest, "manifest lists no files", column="reportKeys",
                         expected="'reportKeys' (legacy CUR) or 'dataFiles' (CUR 2.0)")
    local = {p.relative_to(root).as_posix(): p for p in files}
    found = []
    for key in keys:
        key = re.sub(r"^s3://[^/]+/", "", str(key)).lstrip("/")
        match = [p for rel, p in local.items() if rel == key or key.endswith("/" + rel)
                 or rel.endswith("/" + key)]
        if not match:
            raise InputError(manifest, f"lists {shown(key)}, which is not in the folder",
                             expected="every data file the current manifest lists")
        found.append(match[0])
    return found


# --- loading -------------------------------------------------------------------------------------

def describe(con, path: Path, label: str) -> sql.Layout:
    """The file's columns resolved to CUR fields."""
    fmt = file_format(path)
    if fmt == "parquet":
        try:
            described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
        except duckdb.Error as exc:
            raise InputError(path, f"not a readable Parquet file: {first_line(exc)}",
                             expected="a Parquet file") from None
        columns = [(name, dtype) for name, dtype, *_ in described]
    else:
        columns = [(name, "VARCHAR") for name in csv_header(path, fmt, "CUR")]
        check_last_line(path, fmt)
    no_duplicates(path, [name for name, _ in columns])
    return sql.layout_of(path, fmt, label, columns)


def no_duplicates(path: Path, header: list[str]) -> None:
    """An InputError for a column the file has twice: a field under two spellings
    (``lineItem/UnblendedCost`` and ``line_item_unblended_cost`` are one field: the first would be
    read and the other dropped with no word), or a tag column twice by its exact name (tag keys are
    case-sensitive, so ``user:Name`` and ``user:name`` are two tags)."""
    seen: dict[str, str] = {}
    for name in header:
        tag = any(name.startswith(p) for p in sql.TAG_PREFIXES)
        key = name if tag else sql.canonical(name)
        if key in seen:
            raise InputError(path, f"duplicate column {name!r} (also {seen[key]!r})", row=0, column=name,
                             expected="each column once")
        seen[key] = name


def missing_columns(layout: sql.Layout) -> list[InputError]:
    """One InputError when the file lacks a column every CUR has."""
    missing = [layout.spelling(name) for name in sql.REQUIRED if name not in layout.exprs]
    if not missing:
        return []
    return [InputError(layout.path, f"missing CUR column(s): {', '.join(missing)}"
                       + header_hint(file_columns(layout), missing, "cur"),
                       column=", ".join(missing),
                       expected="a Cost and Usage Report with " + ", ".join(missing))]


def file_columns(layout: sql.Layout) -> list[str]:
    """The file's column names, read again (only for a message)."""
    if layout.fmt != "parquet":
        return csv_header(layout.path, layout.fmt, "CUR")
    import pyarrow.parquet as pq
    return pq.read_schema(layout.path).names


def load_file(con, layouts: list[sql.Layout], index: int) -> None:
    """The file's relation ``f<index>`` (:func:`cur_sql.file_relation_sql`) and its hash pass: each
    line's candidate hash goes into ``_hashes`` (a line repeated whole is looked for there:
    :meth:`cur_sql.Layout.candidate_key`) with its flag of the checks
    (:func:`connectors.billing.cur_checks.hash_rows_sql`), so a file whose footer, types or
    checked columns cannot be read is named now. The summing stage reads the columns it sums on
    (naming the file it cannot read); where it sums nothing, it reads every value first
    (:func:`connectors.billing.cur_compact.read_whole`). (A file's tag sets are made JSON by the
    summing stage, or else by :func:`check_tags`.)"""
    layout = layouts[index]
    try:
        con.execute(sql.file_relation_sql(layout, index))
        map_errors(con, layout, index)
        con.execute(f"INSERT INTO _hashes {hash_rows_sql(layouts, index)}")
    except duckdb.Error as exc:
        raise read_error(layout.path, layout.fmt, exc) from None


def check_tags(con, layouts: list[sql.Layout]) -> None:
    """Each file's distinct tag sets made JSON, so that a tag set that cannot be is named by its
    file, not by a later query over every file (where the summing stage did not make them)."""
    for index, layout in enumerate(layouts):
        own = sql.shaped(layout)
        if not own.tag_sources:
            continue
        sources = ", ".join(own.tag_sources)
        try:
            con.execute(f"SELECT count({own.tags}) FROM (SELECT DISTINCT {sources} FROM f{index})").fetchall()
        except duckdb.Error as exc:
            raise read_error(layout.path, layout.fmt, exc) from None


# --- checks on the raw lines ---------------------------------------------------------------------

# --- mapping and relabelling ---------------------------------------------------------------------

def stage(con, weighted: bool = False) -> None:
    """``mapped`` (FOCUS columns, in file order) and ``origin`` (file, row, sub-row of each).

    ``raw`` is filled in file order, so the mapped lines come out in file order as they are
    mapped; that is checked, and a ``raw`` out of order is sorted (:func:`cur_sql.mapped_sql`).
    ``weighted``: ``raw`` has column ``_n`` (:mod:`connectors.billing.cur_compact`)."""
    con.execute(sql.staged_sql(weighted))
    staged = con.execute("SELECT _file, _row, _sub FROM staged").fetchnumpy()
    if not in_file_order(*(np.asarray(staged[c]) for c in ("_file", "_row", "_sub"))):
        con.execute("DROP TABLE staged")
        con.execute(sql.mapped_sql(weighted))
        con.execute(sql.origin_sql())
        return
    con.execute("CREATE TABLE origin AS SELECT _file, _row, _sub FROM staged")
    for column in ("_file", "_row", "_sub"):
        con.execute(f"ALTER TABLE staged DROP COLUMN {column}")
    con.execute("ALTER TABLE staged RENAME TO mapped")


def in_file_order(files: np.ndarray, rows: np.ndarray, subs: np.ndarray) -> bool:
    """Whether (file, row, sub-row) strictly increases from each row to the next."""
    if len(files) < 2:
        return True
    step = [(a[1:], a[:-1]) for a in (files, rows, subs)]
    (f1, f0), (r1, r0), (s1, s0) = step
    later = (f1 > f0) | ((f1 == f0) & ((r1 > r0) | ((r1 == r0) & (s1 > s0))))
    return bool(later.all())


def row_name(con, layouts: list[sql.Layout], rn: int) -> str:
    """Row ``rn`` of the mapped table as ``file:row`` of the CUR file it came from (a note's example)."""
    where = origin_of(con, rn)
    return f"{layouts[where[0]].label}:{where[1]}" if where else f"row {rn}"


def origin_of(con, rn: int) -> tuple[int, int, int] | None:
    """(file index, file row, sub-row) of row ``rn`` of the mapped table."""
    found = con.execute("SELECT _file, _row, _sub FROM origin WHERE rowid = ?", [rn - 1]).fetchall()
    return tuple(found[0]) if found else None


def translate(con, exc: InputError, layouts: list[sql.Layout], source: Path) -> InputError:
    """An error of the FOCUS checks (rows of the mapped table) retold in the CUR's own terms."""
    if exc.row is None:  # of no row: its column, in the first file's spelling
        field = FOCUS_SOURCE.get(exc.column or "")
        if not field or not layouts:
            return exc
        return InputError(exc.path, exc.message, column=layouts[0].spelling(field), expected=exc.expected)
    where = origin_of(con, exc.row)
    if where is None:
        return exc
    layout = layouts[where[0]]

    def row_text(match: re.Match) -> str:
        other = origin_of(con, int(match.group(1)))
        if other is None:
            return match.group(0)
        suffix = "" if other[0] == where[0] else f" of {layouts[other[0]].label}"
        return f"row {other[1]}{suffix}"

    message = re.sub(r"\brow (\d+)", row_text, exc.message)
    field = FOCUS_SOURCE.get(exc.column or "")
    column = layout.spelling(field) if field else exc.column
    return InputError(layout.path, message, row=where[1], column=column, expected=exc.expected)


def relabel(con, lines: pd.DataFrame, layouts: list[sql.Layout]) -> pd.DataFrame:
    """Rows and line ids of the file each line came from."""
    if lines.empty:
        return lines
    origin = con.execute("SELECT _file, _row, _sub FROM origin").fetchnumpy()
    at = lines["row"].to_numpy() - 1
    files, rows, subs = (np.asarray(origin[c])[at] for c in ("_file", "_row", "_sub"))
    lines = lines.copy()
    lines["row"] = rows.astype("int64")
    lines["line_id"] = line_ids([layout.label for layout in layouts], files, rows, subs).set_axis(lines.index)
    return lines


def line_ids(labels: list[str], files: np.ndarray, rows: np.ndarray, subs: np.ndarray) -> pd.Series:
    """``<file label>:<row>`` per line, ``:unused`` after it for a commitment's unused part (``subs``
    not 0), made in Arrow (no Python string a line)."""
    prefix = pa.array([f"{label}:" for label in labels], pa.string()).take(pa.array(files.astype("int64")))
    ids = pc.binary_join_element_wise(prefix, pc.cast(pa.array(rows.astype("int64")), pa.string()), "")
    unused = pc.binary_join_element_wise(ids, pa.scalar(":unused"), "")
    return pc.if_else(pa.array(subs != 0), unused, ids).to_pandas().astype("str")
