"""The HTML report is readable on a phone (375 px) and a desktop (1280 px): rendered in headless
Chromium (Debian package ``chromium``, installed by ``make test``), nothing may stick out of the
page sideways. A wide table may scroll inside its own box (``overflow-x: auto``); the page may not.

Headless Chromium keeps a window at least 500 px wide, so the page is loaded into an ``iframe`` of
the width under test (``srcdoc``: same origin as the page holding it; its media queries see the
frame's width). A small script injected into the report measures, once it has loaded, the page's
scroll width and every element whose box crosses the viewport's edge outside a scrolling box, and
writes them into the holding page, which ``--dump-dom`` prints. A missing Chromium fails the test
(never a skip): CI must run it.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from audit.render import render

INSTALL = "apt-get install -y --no-install-recommends chromium"
WIDTHS = (375, 1280)
PROBE = """<script>
window.addEventListener("load", function () {
  var vw = document.documentElement.clientWidth, bad = [];
  function clipped(el) {
    for (var a = el.parentElement; a; a = a.parentElement) {
      var o = getComputedStyle(a).overflowX;
      if (o === "auto" || o === "scroll" || o === "hidden") return true;
    }
    return false;
  }
  document.body.querySelectorAll("*").forEach(function (el) {
    var r = el.getBoundingClientRect();
    if ((r.width || r.height) && (r.right > vw + 1 || r.left < -1) && !clipped(el))
      bad.push({tag: el.tagName, cls: String(el.className), left: Math.round(r.left),
                right: Math.round(r.right), text: (el.textContent || "").trim().slice(0, 60)});
  });
  var scrolling = Array.prototype.filter.call(document.querySelectorAll("table.data"), function (t) {
    return t.scrollWidth > t.clientWidth + 1; });
  var cut = Array.prototype.filter.call(document.querySelectorAll(".sub-note, tr.detail td"), function (el) {
    var r = el.getBoundingClientRect(); return r.width && r.right > vw + 1; }).length;
  var charts = Array.prototype.map.call(document.querySelectorAll("img.chart"), function (i) {
    return Math.round(i.getBoundingClientRect().width); });
  var out = parent.document.createElement("pre");
  out.id = "overflow-report";
  out.textContent = JSON.stringify({viewport: vw, page_width: document.documentElement.scrollWidth,
                                    overflowing: bad.slice(0, 40), count: bad.length, scrolling_tables: scrolling.length,
                                    scrolling: scrolling.map(function (t) { return String(t.className); }),
                                    notes_cut: cut, chart_widths: charts});
  parent.document.body.appendChild(out);
});
</script>"""


def chromium() -> str:
    """Path of Chromium; a clear failure (never a skip) when it is missing."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail(f"Chromium is not installed: run `{INSTALL}` (make test does)")
    return found


def measure(page: Path, width: int, profile: Path) -> dict:
    """Load ``page`` (with :data:`PROBE` injected) at ``width`` px; the probe's findings."""
    report = page.read_text(encoding="utf-8").replace("</body>", PROBE + "\n</body>")
    holder = profile.parent / f"holder-{width}.html"
    holder.write_text(f'<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;width:{width}px;'
                      f'height:2000px" srcdoc="{html.escape(report, quote=True)}"></iframe></body></html>',
                      encoding="utf-8")
    done = subprocess.run([chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                           "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
                           f"--window-size={max(width, 500) + 40},2000", "--virtual-time-budget=10000",
                           "--dump-dom", holder.as_uri()], capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="overflow-report">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium printed no probe result (exit {done.returncode}): {done.stderr[-1500:]}"
    return json.loads(html.unescape(found[1]))


@pytest.fixture(scope="module")
def demo_page(demo_audit, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html-widths") / "out"
    render(demo_audit, out, ["html"])
    return out / "report.html"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_demo_report_has_no_horizontal_overflow(demo_page, tmp_path, width):
    found = measure(demo_page, width, tmp_path / "profile")
    assert found["viewport"] == width, found
    assert found["page_width"] <= width, found
    assert found["count"] == 0, json.dumps(found["overflowing"], indent=1)


def test_on_a_phone_the_options_and_notes_read_without_sideways_scrolling(demo_page, tmp_path):
    """Before, at 390 px: the options table was 534 px wide in a 367 px scroll box (payback, effort
    and marginal saving off-screen, each detail line cut at the right edge), a service's reason under
    the unit costs spanned the 566 px table, and the charts' labels were about 5 px tall. Now each
    option is a card (figures under their names, detail wrapped to the screen), a row's note wraps
    to the screen, and a chart keeps its 720 px (labels about 11 px) and scrolls inside its figure."""
    found = measure(demo_page, 375, tmp_path / "profile")
    assert not [c for c in found["scrolling"] if "options" in c], found["scrolling"]
    assert found["notes_cut"] == 0 and found["count"] == 0, found
    assert found["chart_widths"] and set(found["chart_widths"]) == {720}, found["chart_widths"]
    desktop = measure(demo_page, 1280, tmp_path / "profile-desktop")
    assert desktop["scrolling_tables"] == 0 and set(desktop["chart_widths"]) == {756}, desktop  # 200 mm, as before


def test_the_probe_finds_an_element_wider_than_a_phone(tmp_path):
    """The check itself: a 900 px box outside any scrolling box is reported at 375 px."""
    page = tmp_path / "wide.html"
    page.write_text('<!DOCTYPE html><html><body><div style="width:900px">wide</div>'
                    '<div style="overflow-x:auto"><div style="width:900px">scrolls inside</div></div></body></html>',
                    encoding="utf-8")
    found = measure(page, 375, tmp_path / "profile")
    assert found["page_width"] > 375 and found["count"] == 1, found
    assert found["overflowing"][0]["text"] == "wide"


#: each card table's cells' names (data-label) in a row, as its header names the columns
CARD_LABELS = [
    ["Options, in rank order", "Part a month", "Combined saving a month: expected (low – high)", "Run cost a month"],
    ["Input", "Low", "High", "Payback at low", "Payback at high", "Expected"],
    ["Own cost", "Shared cost", "Own + shared", "Per request", "Per 1,000 requests", "Per 1 M tokens", "Requests per USD",
     "Unattributed (left out)"],
    ["Requests", "Prompt tokens", "Generated tokens", "GPU-hours", "Requests counted from"],
    ["Prefill share", "Prefill cost", "Decode share", "Decode cost", "Per 1 M prompt tokens", "Per 1 M generated tokens",
     "Measured by"],
    ["GPUs", "Paid GPU-h", "Kernel-active GPU-h", "In-flight idle GPU-h", "Overhead GPU-h", "Mean busy", "Gap ratio g",
     "Busy fraction from"],
    ["Resource id", "Instance type", "Paid GPU-h", "Observed GPU-h", "Observed"],
    ["Kind / format", "Path", "Rows", "Covered", "sha256", "Status"],
]


def test_on_a_phone_the_tables_of_figures_are_cards(demo_page, tmp_path):
    """Before, at 390 px: the plan (416 px), its sensitivity (452 px) and the GPU split (472 px) scrolled
    sideways in a 352 px box, and after them the unit-cost, traffic, prefill / decode and GPU-hour
    coverage tables still did (a sources row was 7 columns in 352 px, its sha256 broken every few
    letters). Now each row of these is a card, its figures under their names, and no table scrolls."""
    found = measure(demo_page, 390, tmp_path / "profile")
    assert found["count"] == 0, found
    assert found["scrolling"] == [], found["scrolling"]
    page = demo_page.read_text(encoding="utf-8")
    tables = re.findall(r'<table class="data [^"]*cards">(.*?)</table>', page, re.S)
    rows = [re.search(r"<tbody>\s*<tr[^>]*>(.*?)</tr>", t, re.S)[1] for t in tables]
    assert [re.findall(r'data-label="([^"]*)"', r) for r in rows] == CARD_LABELS
    # every figure named: the cells without a name are the card's heading (part; rank and option; service;
    # node; source)
    assert [r.count("<td") - len(labels) for r, labels in zip(rows, CARD_LABELS)] == [1, 2, 1, 1, 1, 1, 1, 1]
    desktop = measure(demo_page, 1280, tmp_path / "profile-desktop")
    assert desktop["scrolling_tables"] == 0 and desktop["count"] == 0, desktop
