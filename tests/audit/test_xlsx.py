"""tables.xlsx as a finance reviewer opens it: money as numbers in the case currency, equal to
audit.json to the cent; readable headers; sheets for the options with their ranges and for the
findings."""
from __future__ import annotations

import copy
import json
import re
import zipfile
from decimal import Decimal

import openpyxl
import pytest

from audit.buckets import BUCKETS
from audit.reporters.xlsx import XlsxReporter
from audit.reporters.xlsx_cells import header, number, number_format

MONEY_FORMAT = re.compile(r'^#,##0\.00+ "(?P<currency>[A-Z]+)"$')


@pytest.fixture(scope="module")
def audit(demo_audit) -> dict:
    return json.loads(json.dumps(demo_audit))


@pytest.fixture(scope="module")
def book(audit, tmp_path_factory):
    path = tmp_path_factory.mktemp("xlsx") / "tables.xlsx"
    XlsxReporter().report(audit, path)
    workbook = openpyxl.load_workbook(path)
    yield workbook, path
    workbook.close()


def columns(sheet) -> dict[str, int]:
    return {c.value: c.column for c in sheet[1]}


def same(cell, amount: str) -> bool:
    """A numeric cell holding exactly the audit.json decimal (openpyxl reads it back as a float,
    whose shortest text is the decimal for amounts of up to 15 significant digits)."""
    return cell.data_type == "n" and Decimal(repr(cell.value)) == Decimal(amount)


def money_cell(cell, amount: str, currency: str = "USD") -> None:
    assert same(cell, amount), (cell.coordinate, cell.value, amount)
    match = MONEY_FORMAT.match(cell.number_format)
    assert match and match["currency"] == currency, cell.number_format


def test_parts_are_numbers_in_the_currency_equal_to_audit_json(book, audit):
    workbook, _ = book
    sheet = workbook["Buckets and parts"]
    col = columns(sheet)
    parts = [p for k in BUCKETS for p in audit["buckets"][k]["parts"]]
    assert sheet.max_row - 1 == len(parts)
    for r, part in enumerate(parts, 2):
        money_cell(sheet.cell(r, col["Amount"]), part["amount"])
        if part.get("gpu_hours") is not None:
            cell = sheet.cell(r, col["GPU Hours"])
            assert same(cell, part["gpu_hours"]) and "USD" not in cell.number_format
    share = sheet.cell(2, col["Share of Total"])
    assert share.data_type == "n" and share.number_format.endswith("%")
    total = sum(Decimal(p["amount"]) for p in parts)
    assert total == Decimal(audit["total"])


def test_summary_and_services_hold_numbers(book, audit):
    workbook, _ = book
    summary = {row[0].value: row[1] for row in workbook["Summary"].iter_rows(min_row=2)}
    money_cell(summary["Total in Scope"], audit["total"])
    money_cell(summary["Invoice Total"], audit["invoice_total"])
    for key, amount in audit["bridge"].items():
        money_cell(summary[f"Bridge: {header(key)}"], amount)
    assert summary["Case"].data_type == "s" and summary["Currency"].value == "USD"
    sheet = workbook["Services - unit costs"]
    col = columns(sheet)
    for r, (name, service) in enumerate(audit["services"].items(), 2):
        assert sheet.cell(r, col["Service"]).value == name
        money_cell(sheet.cell(r, col["Cost"]), service["cost"])
        assert sheet.cell(r, col["Requests"]).value == service["requests"]
        unit = sheet.cell(r, col["Cost per 1,000 Requests"])
        money_cell(unit, service["cost_per_1k_requests"])
        assert unit.number_format.count("0") >= 7  # six decimals at least (METHOD §4)


def test_headers_are_readable_and_frozen(book):
    workbook, _ = book
    for sheet in workbook.worksheets:
        heads = [c.value for c in sheet[1]]
        assert all(isinstance(h, str) and "_" not in h and h[:1].isupper() for h in heads), (sheet.title, heads)
        assert sheet.freeze_panes == "A2"
        assert all(sheet.column_dimensions[c.column_letter].width >= len(c.value) for c in sheet[1])


def test_options_sheet_has_every_range(book, audit):
    workbook, _ = book
    sheet = workbook["Options"]
    col = columns(sheet)
    for name in ("Title", "Part", "Monthly Saving (Low)", "Monthly Saving (Expected)", "Monthly Saving (High)",
                 "Engineering Hours (Expected)", "One-off Cost (High)", "Payback Months (Low)"):
        assert name in col
    for r, option in enumerate(audit["options"], 2):
        assert sheet.cell(r, col["Title"]).value == option["title"]
        assert sheet.cell(r, col["Part"]).value == option["acts_on"]
        for band in ("low", "expected", "high"):
            saving = sheet.cell(r, col[f"Monthly Saving ({band.title()})"])
            if option["monthly_saving"] is None:
                assert saving.value is None  # not measured: an empty cell, not a zero
                continue
            money_cell(saving, option["monthly_saving"][band])
            money_cell(sheet.cell(r, col[f"One-off Cost ({band.title()})"]), option["one_off_cost"][band])
            payback = (option["payback_months"] or {}).get(band)   # None: no saving at that band (METHOD §7)
            cell = sheet.cell(r, col[f"Payback Months ({band.title()})"])
            assert cell.value is None if payback is None else same(cell, payback)
            assert same(sheet.cell(r, col[f"Engineering Hours ({band.title()})"]), option["effort_hours"][band])


def test_findings_sheet(book, audit):
    workbook, _ = book
    assert audit["findings"]
    sheet = workbook["Findings"]
    col = columns(sheet)
    assert sheet.max_row - 1 == len(audit["findings"])
    # before: a first column "Rank", 0 on every row: the trace's process rank read as the finding's order
    assert sheet.cell(1, 1).value == "Title" and "Rank" not in col
    for r, finding in enumerate(audit["findings"], 2):
        assert sheet.cell(r, col["Trace Rank (Process)"]).value == finding["rank"]
        assert sheet.cell(r, col["Title"]).value == finding["title"]
        assert sheet.cell(r, col["Kernel"]).value == finding["kernel"]
        money_cell(sheet.cell(r, col["Cost"]), finding["cost"])


def test_raw_xml_holds_the_exact_decimal(book, audit):
    """The stored text of a money cell is the audit.json decimal, not a float's long expansion."""
    _, path = book
    with zipfile.ZipFile(path) as z:
        xml = z.read("xl/worksheets/sheet1.xml").decode()
    stored = re.findall(r"<v>([^<]*)</v>", xml)
    assert audit["total"] in stored and audit["invoice_total"] in stored
    assert not any("e" in v.lower() for v in stored)  # fixed-point, never 9.76e-06 nor 0E-8


def test_case_currency_and_long_amounts(audit, tmp_path):
    doc = copy.deepcopy(audit)
    doc["currency"] = "CAD"
    doc["total"] = "12345678901234.56"  # 16 significant digits: no spreadsheet number holds it exactly
    XlsxReporter().report(doc, tmp_path / "cad.xlsx")
    workbook = openpyxl.load_workbook(tmp_path / "cad.xlsx")
    summary = {row[0].value: row[1] for row in workbook["Summary"].iter_rows(min_row=2)}
    money_cell(summary["Invoice Total"], doc["invoice_total"], "CAD")
    assert summary["Total in Scope"].data_type == "s" and summary["Total in Scope"].value == doc["total"]
    workbook.close()


def test_cell_helpers():
    assert number("0E-8") == Decimal("0E-8") and number("12") == Decimal(12) and number(7) == 7
    assert number("=1+1") is None and number(None) is None and number(True) is None
    assert number_format("money", 2, "EUR") == '#,##0.00 "EUR"'
    assert number_format("unit", 2, "USD") == '#,##0.000000 "USD"'
    assert number_format("pct", 4, "USD") == "0.00%"
    assert header("cost_per_1m_tokens") == "Cost per 1 M Tokens"
    assert header("effort_hours_high") == "Engineering Hours (High)"


def test_the_options_table_says_each_saving_basis(book, audit):
    """METHOD §7: each option says which basis its saving is on. Before: options.csv and the Options
    sheet had no basis column (only audit.json and report.html said it); now `basis` and `basis_note`."""
    from audit.reporters.csv import build_tables

    head, rows = build_tables(audit)["options"]
    by_id = {row[head.index("id")]: row for row in rows}
    log = by_id["log_sampling"]
    assert (log[head.index("basis")], log[head.index("basis_note")]) == (
        "assumed", "no model of this option on the measured data yet: the catalogue's recoverable fraction")
    assert {row[head.index("basis")] for row in rows} == {"assumed", "modelled"}
    workbook, _ = book
    sheet = workbook["Options"]
    col = columns(sheet)
    for r, option in enumerate(audit["options"], 2):
        assert sheet.cell(r, col["Basis"]).value == option["basis"]
        assert sheet.cell(r, col["Basis Note"]).value == (option["basis_note"] or None)
