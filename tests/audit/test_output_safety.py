"""Untrusted data strings in the spreadsheet outputs: never formulas; the outputs are reproducible."""
from __future__ import annotations

import copy
import csv
import json
import zipfile

import openpyxl
import pytest

from audit.reporters.csv import CsvReporter, neutralised
from audit.reporters.xlsx import XlsxReporter

HOSTILE = ['=HYPERLINK("http://example.invalid","click")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\r=1"]


@pytest.fixture(scope="module")
def audit(demo_audit) -> dict:
    return json.loads(json.dumps(demo_audit))


def _planted(audit: dict) -> dict:
    doc = copy.deepcopy(audit)
    for source, text in zip(doc["sources"], HOSTILE):
        source["name"] = text
    return doc


@pytest.mark.parametrize("text", HOSTILE)
def test_formula_starts_are_neutralised(text):
    assert neutralised(text) == "'" + text


@pytest.mark.parametrize("number", ["-12.50", "+3", "-0.000001", "12"])
def test_numbers_stay_numbers(number):
    assert neutralised(number) == number


def test_xlsx_cells_are_never_formulas(audit, tmp_path):
    doc = _planted(audit)
    XlsxReporter().report(doc, tmp_path / "t.xlsx")
    book = openpyxl.load_workbook(tmp_path / "t.xlsx")
    names = [row[0].value for row in book["Sources"].iter_rows(min_row=2)]
    assert names[:len(doc["sources"])] == [s["name"] for s in doc["sources"]]
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            assert all(c.data_type != "f" for c in row), sheet.title
    with zipfile.ZipFile(tmp_path / "t.xlsx") as z:
        assert not any(b"<f>" in z.read(n) for n in z.namelist() if n.startswith("xl/worksheets/"))


def test_csv_cells_are_neutralised_and_amounts_untouched(audit, tmp_path):
    doc = _planted(audit)
    CsvReporter().report(doc, tmp_path)
    with open(tmp_path / "sources.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row, text in zip(rows, HOSTILE):
        assert row["name"] == "'" + text
    with open(tmp_path / "buckets.csv", newline="", encoding="utf-8") as fh:
        amounts = [r["amount"] for r in csv.DictReader(fh)]
    assert all(not a.startswith("'") for a in amounts)


def test_csv_and_xlsx_cells_escape_bidi_and_control_characters(audit, tmp_path):
    """A right-to-left override or a newline in a data string is written as its escape, as the fit
    messages and the HTML/PDF pages show it (before: raw, the cell reading "@SUM(1)live")."""
    doc = copy.deepcopy(audit)
    doc["sources"][0]["name"], doc["sources"][1]["name"] = "@SUM(1)\u202eevil", "new\nline \u2066x\u2069"
    CsvReporter().report(doc, tmp_path)
    XlsxReporter().report(doc, tmp_path / "t.xlsx")
    with open(tmp_path / "sources.csv", newline="", encoding="utf-8") as fh:
        names = [row["name"] for row in csv.DictReader(fh)][:2]
    sheet = openpyxl.load_workbook(tmp_path / "t.xlsx")["Sources"]
    assert names == ["'@SUM(1)\\u202eevil", "new\\nline \\u2066x\\u2069"]
    assert [sheet.cell(r, 1).value for r in (2, 3)] == ["@SUM(1)\\u202eevil", "new\\nline \\u2066x\\u2069"]


def test_xlsx_is_the_same_bytes_for_the_same_audit(audit, tmp_path):
    XlsxReporter().report(audit, tmp_path / "a.xlsx")
    XlsxReporter().report(audit, tmp_path / "b.xlsx")
    assert (tmp_path / "a.xlsx").read_bytes() == (tmp_path / "b.xlsx").read_bytes()


def test_every_output_is_the_same_bytes_across_runs(audit, tmp_path, monkeypatch):
    """Two renders of the same audit, far enough apart for a timestamp (zip: 2 s; the PDF's font
    subsets: 1 s) to show."""
    import time

    from audit.render import render

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    formats = ["json", "html", "xlsx", "csv", "pdf"]
    first = render(audit, tmp_path / "a", formats)
    time.sleep(2.1)
    second = render(copy.deepcopy(audit), tmp_path / "b", formats)
    assert [p.relative_to(tmp_path / "a") for p in first] == [p.relative_to(tmp_path / "b") for p in second]
    assert len(first) == 4 + 9  # the 4 files and 9 CSVs (plan, sensitivity added)
    assert "SOURCE_DATE_EPOCH" not in __import__("os").environ
    for one, other in zip(first, second):
        assert one.read_bytes() == other.read_bytes(), one.name
