"""XlsxReporter: one sheet per table; amounts kept exact as text cells (format '@')."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from audit.reporters.csv import build_tables

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


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    try:
        return isinstance(value, str) and Decimal(value).is_finite()
    except InvalidOperation:
        return False


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
                        c.number_format = "@"  # text: the exact decimal string, never a float
                    if _is_number(c.value):
                        c.alignment = right
            for i, title in enumerate(head, 1):
                width = max([len(str(title))] + [len(str(r[i - 1] or "")) for r in rows])
                sheet.column_dimensions[sheet.cell(1, i).column_letter].width = min(60, width + 2)
            sheet.freeze_panes = "A2"
        book.save(path)
