"""XlsxReporter: one sheet per table; amounts kept exact as text cells (format '@').

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

from audit.reporters.csv import build_tables, is_number

ZIP_TIME = (1980, 1, 1, 0, 0, 0)
DOC_DATES = re.compile(rb"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:\2>)")

SHEETS = {
    "summary": "Summary", "buckets": "Buckets and parts", "services": "Services - unit costs",
    "options": "Options", "reconciliation": "Reconciliation", "coverage": "Coverage by node",
    "gpu_split": "GPU split", "sources": "Sources", "classes": "Classes",
}


def summary_table(a: dict) -> tuple[list[str], list[list[Any]]]:
    window, recon = a.get("window") or {}, a.get("reconciliation") or {}
    rows: list[list[Any]] = [
        ["case", a.get("case")], ["window_start", window.get("start")],
        ["window_end", window.get("end")], ["days", window.get("days")],
        ["currency", a.get("currency")], ["cost_basis", a.get("cost_basis")],
        ["total", a.get("total")], ["invoice_total", a.get("invoice_total")],
        ["outside_scope", (a.get("outside_scope") or {}).get("amount")],
    ]
    rows += [[f"bridge.{k}", v] for k, v in (a.get("bridge") or {}).items()]
    rows += [[f"bucket.{k}", b.get("amount")] for k, b in (a.get("buckets") or {}).items()]
    rows += [[f"reconciliation.{k}", recon.get(k)] for k in ("verdict", "gap", "tolerance", "top_down",
                                                              "bottom_up")]
    return ["field", "value"], rows


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
        from openpyxl.styles import Alignment, Font

        tables = {"summary": summary_table(audit), **build_tables(audit)}
        book = Workbook()
        book.remove(book.active)
        right, bold = Alignment(horizontal="right"), Font(bold=True)
        for name, (head, rows) in tables.items():
            sheet = book.create_sheet(SHEETS[name])
            sheet.append(head)
            for c in sheet[1]:
                c.font = bold
            for row in rows:
                sheet.append([v if isinstance(v, int) and not isinstance(v, bool) else
                              ("" if v is None else str(v)) for v in row])
            for row in sheet.iter_rows(min_row=2):
                for c in row:
                    if isinstance(c.value, str):
                        c.data_type = "s"  # a string cell, even when it starts with "=": never a formula
                        c.number_format = "@"  # text: the exact decimal string, never a float
                    if is_number(c.value):
                        c.alignment = right
            for i, title in enumerate(head, 1):
                width = max([len(str(title))] + [len(str(r[i - 1] or "")) for r in rows])
                sheet.column_dimensions[sheet.cell(1, i).column_letter].width = min(60, width + 2)
            sheet.freeze_panes = "A2"
        buffer = io.BytesIO()
        book.save(buffer)
        Path(path).write_bytes(reproducible(buffer.getvalue(), stamp(audit)))
