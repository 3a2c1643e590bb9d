"""Data strings as the reports show them: bidi and control characters escaped, long ones wrapped.

A name from the data holding U+202E (right-to-left override) would reverse the text after it
(a kernel ``@SUM(1)\\u202eevil`` printed as "@SUM(1)live"); every value the report templates print
goes through :func:`audit.reporters.formatting.shown` (the jinja2 environment's ``finalize``), as
do the chart labels and the CSV and XLSX cells (tests/audit/test_output_safety.py). A string of
thousands of characters without a space (a pod name, a commitment id) breaks anywhere in a
paragraph and in a reason, detail or source cell, so that it never runs past the page: checked in
Chromium at a phone's and a desktop's width and in the printed PDF's word boxes.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from markupsafe import Markup

from audit.reporters import html as html_reporter
from audit.reporters.formatting import shown
from audit.reporters.html import render_html
from audit.reporters.pdf import PdfReporter, pdf_html
from audit.reporters.view import build_model
from tests.audit.reporters.test_html_widths import measure

#: this checkout's templates/ (the installed ``audit.templates`` may be another checkout's)
SOURCE_TEMPLATES = Path(__file__).resolve().parents[3] / "templates"
EVIL = "@SUM(1)\u202eevil"
#: a reason of 5,000 characters without a space, as a hostile pod name makes one
LONG = "pods that match no [services] entry: research/" + "P" * 5000
#: A4 less the right margin (templates/report.css @page: 14 mm), in points
RIGHT_EDGE_PT = 595.28 - 14 * 72 / 25.4


@pytest.fixture
def source_templates(monkeypatch):
    """Render with this checkout's templates, the environment built afresh (and again after)."""
    monkeypatch.setattr(html_reporter, "TEMPLATES", SOURCE_TEMPLATES)
    html_reporter.environment.cache_clear()
    yield
    html_reporter.environment.cache_clear()


def planted(audit: dict, reason: str) -> dict:
    """The demo's audit with its first unattributed part's reason replaced by ``reason``."""
    doc = copy.deepcopy(audit)
    doc["buckets"]["unattributed"]["parts"][0]["reason"] = reason
    return doc


@pytest.mark.parametrize("raw, escaped", [
    (EVIL, "@SUM(1)\\u202eevil"),
    ("a\u202ab\u202bc\u202cd\u202de", "a\\u202ab\\u202bc\\u202cd\\u202de"),
    ("\u2066x\u2067y\u2068z\u2069", "\\u2066x\\u2067y\\u2068z\\u2069"),
    ("\u200el\u200fr\u061ca", "\\u200el\\u200fr\\u061ca"),
    ('new\nline "quote"\t\x00', 'new\\nline "quote"\\t\\x00'),
    ("re:^ranker-\\d+ → 1\u00a0000 · é", "re:^ranker-\\d+ → 1\u00a0000 · é"),
])
def test_shown_escapes_bidi_and_control_characters_only(raw, escaped):
    assert shown(raw) == escaped


def test_shown_leaves_printed_html_and_non_strings_as_they_are():
    assert shown(Markup("<td>a\nb</td>")) == Markup("<td>a\nb</td>")
    assert shown(3) == 3 and shown(None) is None


def test_html_page_and_pdf_page_print_a_reversing_name_escaped(demo_audit):
    """Before: the reason went into both pages raw, and read "@SUM(1)live"."""
    model = build_model(planted(demo_audit, EVIL))
    for page in (render_html(model), pdf_html(model)):
        assert "\u202e" not in page
        assert "<td class=\"reason\">@SUM(1)\\u202eevil</td>" in page


def test_report_css_wraps_data_strings_anywhere_but_never_money():
    css = (SOURCE_TEMPLATES / "report.css").read_text(encoding="utf-8")
    assert "p, li, dd, figcaption { overflow-wrap: anywhere; }" in css
    assert "td.reason, td.detail, td.source { font-size: 7pt; overflow-wrap: anywhere; }" in css
    assert "tbody.option tr.detail td { padding-top: 0; overflow-wrap: anywhere; }" in css
    assert "td.num { white-space: nowrap; }" in css


@pytest.mark.parametrize("width", (390, 1280))
def test_a_5000_character_reason_wraps_inside_the_page(demo_audit, source_templates, tmp_path, width):
    """Before: the reason cell was one unbroken run, its row ~25,000 px wide at both widths (at
    390 px inside a table that scrolls sideways, one more than the demo's own tables of numbers)."""
    found = {}
    for name, reason in (("demo", None), ("long", LONG)):
        audit = demo_audit if reason is None else planted(demo_audit, reason)
        page = tmp_path / f"{name}.html"
        page.write_text(render_html(build_model(audit)), encoding="utf-8")
        found[name] = measure(page, width, tmp_path / f"profile-{name}")
    long = found["long"]
    assert (long["viewport"], long["page_width"], long["count"]) == (width, width, 0), long["overflowing"]
    assert long["scrolling_tables"] == found["demo"]["scrolling_tables"]


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed")
def test_the_pdf_prints_a_long_reason_within_the_right_margin(demo_audit, source_templates, tmp_path):
    """Before: page 1's reason (cut to 500 characters) ran to x = 598 pt, past the A4 page (595 pt)."""
    PdfReporter().report(build_model(planted(demo_audit, LONG)), tmp_path / "report.pdf")
    boxes = subprocess.run(["pdftotext", "-bbox", "-f", "1", "-l", "2", str(tmp_path / "report.pdf"), "-"],
                           capture_output=True, text=True, check=True).stdout
    words = re.findall(r'xMax="([\d.]+)"[^>]*>([^<]*)</word>', boxes)
    assert any(w.startswith("PPPP") for _, w in words)
    assert [w[:20] for x, w in words if float(x) > RIGHT_EDGE_PT + 1] == []
