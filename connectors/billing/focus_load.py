"""FOCUS files into DuckDB: the columns the reader knows, the file as table ``src``, view ``n``.

:func:`load` copies a FOCUS CSV, gzipped CSV or Parquet file into table ``src`` (columns c0..cN,
all VARCHAR, file order); :func:`resolve_columns` matches its header to the FOCUS names
(:class:`Columns`); :func:`create_view` names the columns, normalises null literals and parses the
charge period (view ``n``), which the row checks (:mod:`connectors.billing.focus_checks`) and the
window selection (:mod:`connectors.billing.focus_lines`) read. The conventions are in
:mod:`connectors.billing.focus`.
"""
from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import duckdb

from connectors.duck import first_line, last_line_longer, quote_ident, quote_text
from connectors.errors import InputError, with_article
from connectors.header_hint import foreign_delimiter, header_hint, utf16_hint

NULL_TEXT = ("", "NULL", "null", "\\N")
NUMBER_PATTERN = r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"
SUFFIXES = {".csv": "csv", ".csv.gz": "csv.gz", ".parquet": "parquet"}
MANDATORY = ("BilledCost", "EffectiveCost", "ChargeCategory", "ChargePeriodStart", "ChargePeriodEnd")
# Parsed timestamps must fit pandas' datetime64[ns] range.
TIMESTAMP_RANGE = ("1678-01-01", "2262-01-01")

TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    # FOCUS 1.3 names the provider ServiceProviderName (ProviderName and PublisherName are deprecated
    # there, still read for 1.0-1.2 files); HostProviderName (1.3) has no earlier equivalent.
    "provider": ("ServiceProviderName", "ProviderName", "PublisherName", "InvoiceIssuerName"),
    "host_provider": ("HostProviderName",),
    "billing_account_id": ("BillingAccountId",),
    "sub_account_id": ("SubAccountId",),
    "service_name": ("ServiceName",),
    "service_category": ("ServiceCategory",),
    "service_subcategory": ("ServiceSubcategory",),
    "charge_category": ("ChargeCategory",),
    "charge_class": ("ChargeClass",),
    "charge_description": ("ChargeDescription",),
    "charge_frequency": ("ChargeFrequency",),
    "pricing_unit": ("PricingUnit",),
    "consumed_unit": ("ConsumedUnit",),
    "pricing_category": ("PricingCategory",),
    "commitment_discount_id": ("CommitmentDiscountId",),
    "commitment_discount_status": ("CommitmentDiscountStatus",),
    "commitment_discount_type": ("CommitmentDiscountType",),
    "resource_id": ("ResourceId",),
    "resource_name": ("ResourceName",),
    "resource_type": ("ResourceType",),
    "region": ("RegionId",),
    "sku_id": ("SkuId",),
    "sku_price_id": ("SkuPriceId",),
    # FOCUS 1.3 split cost allocation: a provider's split of a shared charge onto what used it.
    "allocated_method_id": ("AllocatedMethodId",),
    "allocated_resource_id": ("AllocatedResourceId",),
    "allocated_resource_name": ("AllocatedResourceName",),
}
MONEY_FIELDS = {"billed_cost": "BilledCost", "effective_cost": "EffectiveCost"}
DECIMAL_FIELDS = {
    "list_cost": "ListCost",
    "contracted_cost": "ContractedCost",
    "list_unit_price": "ListUnitPrice",
    "contracted_unit_price": "ContractedUnitPrice",
    "pricing_quantity": "PricingQuantity",
    "consumed_quantity": "ConsumedQuantity",
}
PERIOD = ("ChargePeriodStart", "ChargePeriodEnd")
#: the billing period a line's charge period should lie in (FOCUS; not one of the line's fields)
BILLING_PERIOD = ("BillingPeriodStart", "BillingPeriodEnd")
# Line-id columns: a repeated value is a duplicated line even when other columns differ.
ID_COLUMNS = ("Id", "x_Id")
# JSON columns: Tags and AllocatedTags (key-value objects), ContractApplied (FOCUS 1.3: the contract
# commitments a charge counts towards), AllocatedMethodDetails (1.3: the split's ratios, checked only).
JSON_COLUMNS = ("Tags", "AllocatedTags", "ContractApplied", "AllocatedMethodDetails")
OTHER_COLUMNS = ("BillingCurrency", "SkuPriceDetails") + JSON_COLUMNS
KNOWN_COLUMNS = tuple(dict.fromkeys(
    [n for names in TEXT_FIELDS.values() for n in names]
    + list(MONEY_FIELDS.values()) + list(DECIMAL_FIELDS.values())
    + list(PERIOD) + list(ID_COLUMNS) + list(OTHER_COLUMNS)))


@dataclass(frozen=True)
class Columns:
    """The file's header, resolved: FOCUS name or ``x_*`` name → internal column ``cN``.

    ``weight``: the internal column that says how many invoice lines a row stands for, where a
    dialect summed lines before the FOCUS reader saw them (:mod:`connectors.billing.cur_compact`);
    None when every row is one line."""

    header: list[str]
    focus: dict[str, str]
    extras: dict[str, str]
    weight: str | None = None

    def has(self, name: str) -> bool:
        """Whether the file has the FOCUS column ``name``."""
        return name in self.focus

    def internal(self, name: str) -> str | None:
        """The internal column of header column ``name`` (case-insensitive), or None."""
        found = [i for i, header in enumerate(self.header) if header.lower() == name.lower()]
        return f"c{found[0]}" if found else None


# --- loading ----------------------------------------------------------------------------------

def file_format(path: Path) -> str:
    """``csv``, ``csv.gz`` or ``parquet`` from the file name; anything else is an InputError."""
    name = path.name.lower()
    for suffix, fmt in sorted(SUFFIXES.items(), key=lambda item: -len(item[0])):
        if name.endswith(suffix):
            return fmt
    raise InputError(path, f"unknown file extension {''.join(path.suffixes) or '(none)'!r}",
                     expected="a .csv, .csv.gz or .parquet file")


#: the files of a folder a message about it lists
FOLDER_LISTED = 5


def focus_files(path: Path) -> list[Path]:
    """The FOCUS data files of a source: the file itself, else every .csv, .csv.gz and .parquet file
    under the folder (dot files and folders left out), by path; a folder with none is an InputError
    naming what it holds."""
    if not path.is_dir():
        return [path]
    data = [p for p in folder_files(path) if p.name.lower().endswith(tuple(SUFFIXES))]
    if data:
        return data
    raise InputError(path, f"no FOCUS data file in the folder; {folder_held(path)}",
                     expected="FOCUS export files (.csv, .csv.gz, .parquet)")


def folder_files(path: Path) -> list[Path]:
    """The files under a folder, dot files and folders left out, by path."""
    return sorted(p for p in path.rglob("*") if p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(path).parts))


def folder_held(path: Path) -> str:
    """What a folder holds, for a message: "it holds N file(s): a, b … (k more)", or "it is empty"."""
    names = [p.relative_to(path).as_posix() for p in folder_files(path)]
    more = f" … ({len(names) - FOLDER_LISTED} more)" if len(names) > FOLDER_LISTED else ""
    return f"it holds {len(names)} file(s): {', '.join(names[:FOLDER_LISTED])}{more}" if names else "it is empty"


def load(con, path: Path, fmt: str, kind: str = "FOCUS") -> Columns:
    """Copy the file into table ``src`` (columns c0..cN, all VARCHAR, file order); ``kind``: the
    export the messages name ("FOCUS", "Azure cost details")."""
    header = csv_header(path, fmt, kind) if fmt != "parquet" else parquet_header(con, path)
    columns = resolve_columns(header, path)
    check_last_line(path, fmt)
    try:
        if fmt == "parquet":
            con.execute(parquet_sql(con, path))
        else:
            con.execute(csv_sql(len(header), fmt), [str(path)])
    except duckdb.Error as exc:
        raise read_error(path, fmt, exc) from None
    return columns


def csv_header(path: Path, fmt: str, kind: str = "FOCUS") -> list[str]:
    """The header record (BOM stripped), read from the first HEADER_BYTES of the file only.

    An empty file, a broken gzip, NUL bytes (a binary file, or gigabytes of zeros), no line break in
    the first HEADER_BYTES or a header that is not UTF-8 is an InputError (``kind``: the export the
    messages name, "FOCUS" or "CUR"). A data row's bytes are the full read's to judge: a byte that
    is not UTF-8 there is reported at its own line.
    """
    expected = f"a UTF-8 CSV header of {kind} column names"
    head = _head(path, fmt)
    if b"\0" in head:
        raise InputError(path, "NUL bytes in the first "
                         f"{len(head):,} bytes{' (decompressed)' if fmt == 'csv.gz' else ''}: not CSV text"
                         + utf16_hint(head),
                         row=0, expected=f"a UTF-8 CSV file with a header of {kind} column names")
    if len(head) >= HEADER_BYTES:
        cut = max(head.rfind(b"\n"), head.rfind(b"\r"))
        if cut < 0:
            raise InputError(path, f"no line break in the first {HEADER_BYTES:,} bytes: not a CSV header",
                             row=0, expected=expected)
        head = head[:cut + 1]
    try:
        # undecodable bytes become lone surrogates, so a data row's cannot stop the header's reading
        text = io.TextIOWrapper(io.BytesIO(head), encoding="utf-8-sig", errors="surrogateescape", newline="")
        for record in csv.reader(text):
            if any(field.strip() for field in record):
                return [_utf8(field.strip(), path, expected) for field in record]
    except csv.Error as exc:
        raise InputError(path, f"unreadable header: {exc}", row=0, expected=expected) from None
    raise InputError(path, "file is empty (no header)", expected=f"{with_article(kind)} CSV header and data rows")


def _utf8(name: str, path: Path, expected: str) -> str:
    """A header field, which must be UTF-8 text."""
    bad = next((i for i, c in enumerate(name) if "\udc80" <= c <= "\udcff"), None)
    if bad is not None:
        byte = ord(name[bad]) - 0xDC00
        raise InputError(path, f"unreadable header: byte 0x{byte:02x} in column {name.encode('utf-8', 'replace')!r} "
                               "is not UTF-8", row=0, expected=expected)
    return name


HEADER_BYTES = 1 << 20
"""Bytes read for the header: a FOCUS header is a few hundred bytes."""


def _head(path: Path, fmt: str) -> bytes:
    """The first HEADER_BYTES of the (decompressed) file; a gzip stream that breaks before any
    line was read is an InputError (one that breaks later is reported by the full read)."""
    opener = gzip.open if fmt == "csv.gz" else open
    head = b""
    try:
        with opener(path, "rb") as raw:
            while len(head) < HEADER_BYTES:
                block = raw.read(min(1 << 16, HEADER_BYTES - len(head)))
                if not block:
                    break
                head += block
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        if b"\n" not in head and b"\r" not in head:
            raise gzip_error(path, exc) from None
    return head


def parquet_header(con, path: Path) -> list[str]:
    """Column names of a Parquet file."""
    try:
        described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    except duckdb.Error as exc:
        raise InputError(path, f"not a readable Parquet file: {first_line(exc)}",
                         expected="a Parquet file") from None
    return [name for name, *_ in described]


MAX_CSV_LINE = 16 << 20
"""Longest CSV line a billing reader accepts (16 MiB): DuckDB's ``max_line_size``, raised from its
default of 2,000,000 bytes so that a long but valid field (a 3 MB ChargeDescription) reads; the
buffer stays 32 MiB, DuckDB's default, so memory is as before."""
LINE_LIMIT = f"{MAX_CSV_LINE:,} bytes (16 MiB, the CSV reader's max_line_size)"


def csv_options(width: int, fmt: str) -> str:
    """read_csv's options after the file: no type sniffing, every column VARCHAR named c0..cN,
    RFC 4180 quoting, lines of at most MAX_CSV_LINE bytes (every billing CSV reader's)."""
    names = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(width))
    compression = "gzip" if fmt == "csv.gz" else "none"
    return (f"auto_detect=false, header=true, columns={{{names}}}, delim=',', quote='\"', escape='\"', "
            f"strict_mode=true, max_line_size={MAX_CSV_LINE}, buffer_size={2 * MAX_CSV_LINE}, "
            f"compression='{compression}', encoding='utf-8'")


def csv_sql(width: int, fmt: str) -> str:
    """CREATE TABLE src from a CSV read with no type sniffing: every column VARCHAR."""
    return f"CREATE TABLE src AS SELECT * FROM read_csv(?, {csv_options(width, fmt)})"


def parquet_sql(con, path: Path) -> str:
    """CREATE TABLE src from a Parquet file, each column cast to VARCHAR in file order.

    Nested columns (a Tags MAP or STRUCT) become JSON text; DECIMAL becomes its exact text; a
    DOUBLE column (a file that already stored money as float) becomes its shortest round-trip text.
    """
    described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    source = f"read_parquet({quote_text(str(path))}, file_row_number=true)"
    return f"CREATE TABLE src AS SELECT {varchar_columns(described)} FROM {source} ORDER BY file_row_number"


def varchar_columns(described: list[tuple]) -> str:
    """The select list of the columns of a DESCRIBE result, each cast to VARCHAR as c0, c1, … in
    their order: the reader's ``src`` columns. A nested column (MAP, STRUCT, a list, JSON) becomes
    its JSON text, so that no tag or nested value is lost to a cast."""
    parts = []
    for i, (name, dtype, *_) in enumerate(described):
        ident = quote_ident(name)
        nested = dtype.startswith(("MAP", "STRUCT")) or dtype.endswith("]") or dtype == "JSON"
        expr = f"CAST(to_json({ident}) AS VARCHAR)" if nested else f"CAST({ident} AS VARCHAR)"
        parts.append(f"{expr} AS c{i}")
    return ", ".join(parts)


#: FOCUS columns kept in a line's ``extra`` as they are (lower-cased): what rules may match beside the
#: normalised columns. CapacityReservationId / CapacityReservationStatus (FOCUS 1.1+): a charge for
#: reserved capacity, ``Unused`` where nothing ran in it (a shipped rule's commitment_unused).
EXTRA_COLUMNS = ("skupricedetails", "capacityreservationid", "capacityreservationstatus")


def resolve_columns(header: list[str], path: Path) -> Columns:
    """Match header names to FOCUS names (case-insensitive); collect ``x_*`` and EXTRA_COLUMNS."""
    known = {name.lower(): name for name in KNOWN_COLUMNS}
    focus: dict[str, str] = {}
    extras: dict[str, str] = {}
    seen: dict[str, str] = {}
    for i, name in enumerate(header):
        key = name.lower()
        if key and key in seen:
            raise InputError(path, f"duplicate column {name!r} (also {seen[key]!r})", row=0,
                             column=name, expected="each column once")
        seen[key] = name
        if key.startswith("x_") or key in EXTRA_COLUMNS:
            extras[name] = f"c{i}"
        if key in known:
            focus[known[key]] = f"c{i}"
    return Columns(list(header), focus, extras)


def require(columns: Columns, path: Path) -> None:
    """Raise one InputError naming every missing mandatory column."""
    missing = [name for name in MANDATORY if not columns.has(name)]
    if missing:
        raise InputError(path, f"missing mandatory column(s): {', '.join(missing)}"
                         + header_hint(columns.header, missing, "focus"),
                         column=", ".join(missing),
                         expected="the mandatory FOCUS columns " + ", ".join(MANDATORY))


def create_view(con, columns: Columns, normalised: bool = False) -> None:
    """View ``n``: row number plus every FOCUS column by name, nulls normalised (absent → NULL).

    ``normalised``: no cell of ``src`` is a null literal (NULL_TEXT, blanks around it) already, so
    the cells are read as they are (a dialect that normalised its columns when it mapped them)."""
    null = (lambda internal: internal) if normalised else null_expr
    parts = ["rowid + 1 AS rn"]
    for name in KNOWN_COLUMNS:
        internal = columns.focus.get(name)
        parts.append(f"{null(internal) if internal else 'NULL::VARCHAR'} AS {name}")
    for i, internal in enumerate(columns.extras.values()):
        parts.append(f"{null(internal)} AS e{i}")
    parts.append(f"CAST({columns.weight} AS BIGINT) AS _n" if columns.weight else "1::BIGINT AS _n")
    for name in BILLING_PERIOD:  # read only to judge the charge period (connectors/billing/window_outside.py)
        internal = columns.internal(name)
        parts.append(f"{null(internal) if internal else 'NULL::VARCHAR'} AS _{name}")
    con.execute(f"CREATE TEMP VIEW m AS SELECT {', '.join(parts)} FROM src")
    con.execute(f"CREATE TEMP VIEW n AS SELECT *, {moment_sql('ChargePeriodStart')} AS _ps, "
                f"{moment_sql('ChargePeriodEnd')} AS _pe, {moment_sql('_BillingPeriodStart')} AS _bs, "
                f"{moment_sql('_BillingPeriodEnd')} AS _be FROM m")


# ISO date, then the hour: an hour past 23 carries into the next day(s).
_HOUR = r"^(\d{4}-\d{2}-\d{2}[T ])(\d{2})"


def moment_sql(column: str) -> str:
    """TIMESTAMPTZ of an ISO 8601 cell (no offset = UTC); ``…T30:00:00Z`` is the next day at 06:00."""
    hour = f"TRY_CAST(regexp_extract({column}, {quote_text(_HOUR)}, 2) AS INTEGER)"
    carried = (f"TRY_CAST(regexp_replace({column}, {quote_text(_HOUR)}, '\\100') AS TIMESTAMPTZ) "
               f"+ to_hours({hour})")
    return f"coalesce(TRY_CAST({column} AS TIMESTAMPTZ), CASE WHEN {hour} >= 24 THEN {carried} END)"


# DuckDB types whose text is never empty nor a null literal (a number, a moment, a truth value): their
# text needs no test for one (``nan`` and ``inf`` are not null literals).
PLAIN_TEXT_TYPES = re.compile(r"^(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|FLOAT|DOUBLE|REAL|DECIMAL\(\d+,\s*\d+\)|"
                              r"DATE|TIME|TIMESTAMP( WITH TIME ZONE|_S|_MS|_NS)?|BOOLEAN)$")


def text_or_null(expr: str, dtype: str = "VARCHAR") -> str:
    """SQL: ``expr`` as VARCHAR with the null literals (empty, NULL, null, \\N) turned into NULL.
    ``dtype``: the DuckDB type of ``expr``; a number, moment or truth value is only cast (its text is
    never one of them), which spares every row of a Parquet file a trim and a comparison."""
    text = f"CAST({expr} AS VARCHAR)"
    return text if PLAIN_TEXT_TYPES.match(dtype.upper()) else null_expr(text)


def null_expr(column: str) -> str:
    """SQL that turns the null literals (empty, NULL, null, \\N, blank) into NULL."""
    literals = ", ".join(quote_text(text) for text in NULL_TEXT)
    return f"CASE WHEN trim({column}) IN ({literals}) THEN NULL ELSE {column} END"


def other_format_hint(path: Path, fmt: str) -> str:
    """For a message about a file a reader does not take: what it is (an Avro extract; a CSV file, and
    which billing format its header is), or ``""``."""
    name = path.name.lower()
    if name.endswith(".avro") or (path.is_dir() and any(p.name.lower().endswith(".avro") for p in path.rglob("*"))):
        return ("; it is Avro: extract the table as newline-delimited JSON or Parquet "
                "(bq extract --destination_format NEWLINE_DELIMITED_JSON or PARQUET)")
    if path.is_dir() or not name.endswith((".csv", ".csv.gz")):
        return ""
    header = header_or_none(path, "csv.gz" if name.endswith(".gz") else "csv")
    return "" if header is None else "; it is a CSV file" + header_hint(header, (), fmt)


def header_or_none(path: Path, fmt: str) -> list[str] | None:
    """The file's CSV header, or None where it has none that reads (only for a message)."""
    try:
        return csv_header(path, fmt)
    except InputError:
        return None


# --- read failures ----------------------------------------------------------------------------

def gzip_error(path: Path, exc: Exception) -> InputError:
    """The InputError for a gzip stream that ends early or is not gzip at all."""
    return InputError(path, f"truncated or corrupt gzip ({first_line(exc)})",
                      expected="a complete gzip stream")


#: what DuckDB says of a line past max_line_size (or of a quoted field running past its buffer)
LONG_LINE_SIGNS = ("Maximum line size", "unterminated quote", "Parallel CSV Reader")


def read_error(path: Path, fmt: str, exc: duckdb.Error) -> InputError:
    """Turn a DuckDB read failure into an InputError naming the file and, if known, the line.

    A line past MAX_CSV_LINE is found by :func:`long_line` and named by its row and column; of
    any other failure the message gives DuckDB's reason, never the raw line it quotes.
    """
    message = str(exc)
    if fmt == "csv.gz" and "gzip" in message.replace(str(path), "").replace(path.name, "").lower():  # not the name's
        return gzip_error(path, exc)
    if fmt == "parquet":
        return InputError(path, f"not a readable Parquet file: {first_line(exc)}",
                          expected="a Parquet file")
    found = long_line(path, fmt) if any(sign in message for sign in LONG_LINE_SIGNS) else None
    if found is not None:
        return long_line_error(path, fmt, found)
    line = re.search(r"CSV Error on Line: (\d+)", message)
    reason = shown_reason(message) or first_line(exc)
    where = f"malformed CSV at file line {line.group(1)}: " if line else "unreadable CSV: "
    return InputError(path, where + reason + delimiter_hint(path, fmt), expected="RFC 4180 CSV, one value per header column")


def check_last_line(path: Path, fmt: str) -> None:
    """Raise the long-line InputError where a CSV file's last line is longer than MAX_CSV_LINE:
    DuckDB drops a last line longer than its buffer without a word (:func:`connectors.duck.last_line_longer`)."""
    if fmt != "parquet" and last_line_longer(path, MAX_CSV_LINE, fmt == "csv.gz"):
        raise long_line_error(path, fmt, long_line(path, fmt))


def long_line_error(path: Path, fmt: str, found: tuple[int, int | None] | None) -> InputError:
    """The InputError for a line past MAX_CSV_LINE at ``found`` (row, field index or None)."""
    row, index = found or (None, None)
    header = header_or_none(path, fmt) or []
    return InputError(path, f"line longer than {LINE_LIMIT}", row=row,
                      column=header[index] if index is not None and index < len(header) else None,
                      expected=f"CSV lines of at most {MAX_CSV_LINE:,} bytes")


REASON_CHARS = 200
"""Characters of DuckDB's reason kept in a message."""


def shown_reason(message: str) -> str:
    """DuckDB's reason for a CSV error, cut to REASON_CHARS: the last line before its "Possible
    fixes", else the first after its first line; never the line it quotes (which may be megabytes,
    on the line after "Original Line:")."""
    lines = message.splitlines()
    cut = next((i for i, ln in enumerate(lines) if ln.startswith("Possible")), None)
    quoted = next((i for i, ln in enumerate(lines) if ln.startswith("Original Line")), 0)
    skip = {quoted, quoted + 1} if lines[quoted:quoted + 1] == ["Original Line: "] else {quoted}
    said = [ln.strip() for i, ln in enumerate(lines[:cut]) if i > 0 and i not in skip and ln.strip()]
    reason = (said[-1] if cut is not None else said[0]) if said else ""
    return reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1] + "…"


def long_line(path: Path, fmt: str, limit: int = MAX_CSV_LINE) -> tuple[int, int | None] | None:
    """(row, field index or None) of the first line longer than ``limit`` bytes, else None.

    Lines are read ``limit + 1`` bytes at a time, so memory stays bounded whatever the file; the
    row counts records (a quoted field's line breaks continue one), the header being row 0; the
    field index counts the separators outside quotes before the cut, when the record starts on
    that line.
    """
    opener = gzip.open if fmt == "csv.gz" else open
    row, inside = 0, False
    try:
        with opener(path, "rb") as raw:
            for line in iter(lambda: raw.readline(limit + 1), b""):
                if len(line) > limit:
                    bare = re.sub(rb'"[^"]*("|$)', b"", line)
                    return row, None if inside else bare.count(b",")
                inside ^= line.count(b'"') % 2 == 1
                row += not inside
    except (OSError, EOFError, zlib.error):
        return None
    return None


def delimiter_hint(path: Path, fmt: str) -> str:
    """The hint for a CSV file whose one-column header is split by another delimiter, or ``""``."""
    header = header_or_none(path, fmt)
    return header_hint(header, ()) if header and foreign_delimiter(header) else ""
