"""The PDF prints the top rows of each long table and says where the rest is; the HTML keeps every row.

A document with 5,000 rows in each long table (benchmarks/report/run.py ``large_audit``) prints
in bounded time: each such table shows its top ``PDF_ROWS`` rows and the line "25 of 5,000 rows
shown; all rows in tables.xlsx (sheet …) and report.html". A case whose tables are all short
prints the same page as before (the limit changes nothing).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from decimal import Decimal

import pytest

from audit.reporters.html import charts_of, render_html
from audit.reporters.pdf import PDF_ROWS, PdfReporter, pdf_html
from audit.reporters.view import build_model
from audit.reporters.xlsx import SHEETS
from benchmarks.report.run import large_audit
from tests.paths import TEST_DATA

ROWS = 5000
#: a generous bound for a loaded 2-core machine: about 3 s idle, 12 s seen with other test runs
#: beside it; printed whole, 500 rows a table took 38 s (benchmarks/report/run.py --rows 500)
BOUND_S = 30.0


@pytest.fixture(scope="module")
def large():
    model = build_model(large_audit(ROWS))
    charts_of(model)  # drawn once, as in a run where the HTML is written first
    return model


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed")
def test_pdf_of_5000_rows_prints_in_bounded_time_and_says_where_the_rest_is(large, tmp_path):
    start = time.perf_counter()
    PdfReporter().report(large, tmp_path / "report.pdf")
    elapsed = time.perf_counter() - start
    assert elapsed < BOUND_S, f"the PDF of {ROWS} rows a table took {elapsed:.1f} s"
    text = subprocess.run(["pdftotext", str(tmp_path / "report.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    flat = re.sub(r"\s+", " ", text)
    sample = json.loads((TEST_DATA / "sample_audit.json").read_text(encoding="utf-8"))
    counts = {"classes": ROWS, "gpu_split": ROWS, "coverage": ROWS, "sources": ROWS, "findings": ROWS,
              "reconciliation": ROWS, "options": len(sample["options"]) + ROWS // 10,
              "buckets": len(sample["buckets"]["platform_overhead"]["parts"]) + ROWS}
    for sheet, count in counts.items():
        line = f"{PDF_ROWS} of {count:,} rows shown; all rows in tables.xlsx (sheet {SHEETS[sheet]}) and report.html"
        assert line in flat, line
    assert f"{PDF_ROWS} of 5,000 rows shown; all rows in report.html and audit.json (queue)" in flat
    # classes and the drivers (which name classes) print their top rows only
    assert len(set(re.findall(r"class_\d{5}", flat))) <= 2 * PDF_ROWS

def test_the_cut_table_shows_the_largest_amounts(large):
    html = pdf_html(large)
    classes = large.audit["classes"]
    largest = sorted(classes, key=lambda c: -abs(Decimal(c["net"])))[:PDF_ROWS]
    table = html.split("Resource classes: gross, tax, credits, net", 1)[1].split("</table>", 1)[0]
    shown = re.findall(r"<td>(class_\d{5})</td>", table)
    assert shown == [c["class"] for c in largest]


def test_html_keeps_every_row(large):
    html = render_html(large)
    assert "rows shown" not in html
    for name in ("class_", "gpu-node-", "billing-", "Finding "):
        assert len(set(re.findall(re.escape(name) + r"\d+", html))) >= ROWS, name


def test_a_case_with_short_tables_prints_as_before():
    model = build_model(json.loads((TEST_DATA / "sample_audit.json").read_text(encoding="utf-8")))
    assert pdf_html(model) == render_html(model)
