"""XlsxReporter: one sheet per table, amounts as numeric cells in the case currency's format.

Each column has a kind (:mod:`audit.reporters.xlsx_cells`): money and unit costs are numbers (the
exact Decimal of their audit.json text) with a currency format, counts and quantities numbers,
fractions percentages; headers are readable words; the header row is frozen. Sheets: the summary,
the CSV tables, the options with their low / expected / high ranges, the plan (combined saving per
part and the total), the sensitivity of each ranked option's payback, and the findings.

Every data string is written as a string cell, never a formula (a node named ``=HYPERLINK(…)``
stays text). The file is the same bytes for the same audit: the document dates are the audit
window's end and the zip entries carry a fixed time.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

from audit.reporters.csv import build_tables
from audit.reporters.formatting import shown
from audit.reporters.months_view import months_table
from audit.reporters.xlsx_cells import (
    cell_kinds,
    decimals,
    findings_table,
    header,
    number,
    number_format,
    safe_currency,
    summary_table,
)

ZIP_TIME = (1980, 1, 1, 0, 0, 0)
DOC_DATES = re.compile(rb"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:\2>)")
MAX_WIDTH = 60

SHEETS = {
    "summary": "Summary", "buckets": "Buckets and parts", "services": "Services - unit costs",
    "options": "Options", "plan": "Plan", "sensitivity": "Sensitivity", "findings": "Findings",
    "reconciliation": "Reconciliation",
    "coverage": "Coverage by node", "gpu_split": "GPU split", "sources": "Sources", "classes": "Classes",
    "months": "Months",
}


def sheet_specs(audit: dict) -> dict[str, tuple[list[str], list[list[Any]], list[list[str | None]]]]:
    """Every sheet as (header, rows, kind of each cell), in workbook order."""
    (head, rows), row_kinds = summary_table(audit)
    specs = {"summary": (head, rows, [[None, kind] for kind in row_kinds])}
    tables = {**build_tables(audit), "findings": findings_table(audit)}
    for name in SHEETS:
        if name in tables:
            head, rows = tables[name]
            specs[name] = (head, rows, cell_kinds(name, head, rows))
    months = months_table(audit)
    if months is not None:  # the quarter as months: a kind per row (money, count, unit cost, share)
        months_head, months_rows, months_kinds = months
        specs["months"] = (months_head, months_rows,
                           [[None, None, *[k] * (len(months_head) - 2)] for k in months_kinds])
    return specs


def fill(sheet, head: list[str], rows: list[list[Any]], kinds: list[list[str | None]], currency: str) -> None:
    """Write one table: readable bold headers, typed cells, column widths, the header row frozen."""
    from openpyxl.styles import Font

    sheet.append([header(column) for column in head])
    for c in sheet[1]:
        c.font = Font(bold=True)
    places = column_places(rows, kinds)
    for r, (row, row_kinds) in enumerate(zip(rows, kinds), 2):
        for i, (value, kind) in enumerate(zip(row, row_kinds), 1):
            put(sheet.cell(r, i), value, kind, number_format(kind, places[(i, kind)], currency) if kind else "@")
    widths(sheet, head, rows)
    sheet.freeze_panes = "A2"


def put(cell, value: Any, kind: str | None, number_shown: str) -> None:
    """One cell: a number (typed column, finite decimal), empty (typed column, not measured) or text."""
    from openpyxl.styles import Alignment

    exact = number(value) if kind else None
    if exact is not None:
        cell.value = exact if isinstance(exact, int) else format(exact, "f")
        cell.data_type = "n"  # a number whose stored text is the exact decimal (no float)
        cell.number_format = number_shown
        cell.alignment = Alignment(horizontal="right")
    elif kind and value is None:
        return  # not measured: an empty cell, never a zero
    else:
        cell.value = "" if value is None else shown(str(value))  # control and bidi characters escaped
        cell.data_type = "s"  # a string cell, even when it starts with "=": never a formula
        cell.number_format = "@"


def column_places(rows: list[list[Any]], kinds: list[list[str | None]]) -> dict[tuple[int, str | None], int]:
    """Decimals to show for (column, kind): the most any value of that kind in the column carries."""
    places: dict[tuple[int, str | None], int] = {}
    for row, row_kinds in zip(rows, kinds):
        for i, (value, kind) in enumerate(zip(row, row_kinds), 1):
            places[(i, kind)] = max(places.get((i, kind), 0), decimals(value))
    return places


def widths(sheet, head: list[str], rows: list[list[Any]]) -> None:
    """Column widths from the longest header or value (numbers: room for separators and currency)."""
    for i, column in enumerate(head, 1):
        longest = max([len(header(column))] + [len(str(r[i - 1] if r[i - 1] is not None else "")) for r in rows])
        numeric = any(number(r[i - 1]) is not None for r in rows)
        sheet.column_dimensions[sheet.cell(1, i).column_letter].width = min(MAX_WIDTH, longest + (8 if numeric else 2))


def stamp(audit: dict) -> str:
    """The document date: the end of the audit window (so the same audit gives the same bytes)."""
    end = (audit.get("window") or {}).get("end") or "2000-01-01T00:00:00Z"
    return str(end)


def reproducible(data: bytes, when: str) -> bytes:
    """The workbook's zip with fixed entry times and document dates."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            body = source.read(info.filename)
            if info.filename == "docProps/core.xml":
                body = DOC_DATES.sub(lambda m: m.group(1) + when.encode() + m.group(3), body)
            entry = zipfile.ZipInfo(info.filename, date_time=ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            target.writestr(entry, body)
    return out.getvalue()


class XlsxReporter:
    report_type = "xlsx"
    output = "tables.xlsx"
    takes = "audit"
    is_dir = False

    def report(self, audit: dict, path: Path) -> None:
        from openpyxl import Workbook

        book = Workbook()
        book.remove(book.active)
        currency = safe_currency(audit.get("currency"))
        for name, (head, rows, kinds) in sheet_specs(audit).items():
            fill(book.create_sheet(SHEETS[name]), head, rows, kinds, currency)
        buffer = io.BytesIO()
        book.save(buffer)
        Path(path).write_bytes(reproducible(buffer.getvalue(), stamp(audit)))
