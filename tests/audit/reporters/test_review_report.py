"""The review report (METHOD §10, issue 15): review.json → review.json / .html / .pdf / .xlsx.

The documents are built here after the review.json contract (two quarters of the demo deployment:
traffic grows, a price falls, right-sizing the chat replicas shipped on 2026-08-15, a service
appears); the bridge steps add up, to the cent, from the earlier total to the later one.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from decimal import Decimal

import pytest

from audit.errors import ReportError
from audit.reporters.review_chart import axis_floor, bridge_bars
from audit.reporters.review_render import check_review_target, render_review, review_html
from audit.reporters.review_view import build_review_model

HOSTILE = "<script>alert(1)</script>"
FORMULA = '=HYPERLINK("http://evil.example","x")'


def _steps() -> list[dict]:
    rows = [("chat", "volume", "21250.40"), ("chat", "price", "-3120.75"), ("chat", "efficiency", "-6480.12"),
            ("chat", "overhead", "1042.09"), ("embed", "volume", "812.30"), ("embed", "price", "-140.02"),
            ("embed", "efficiency", "0.00"), ("embed", "overhead", "55.61")]
    steps = [{"id": f"{s}/{k}", "kind": k, "service": s, "label": f"{s}: {k}", "amount": a} for s, k, a in rows]
    steps += [{"id": "rerank/service", "kind": "service", "service": "rerank", "label": "rerank: new service",
               "amount": "4310.55"},
              {"id": "unattributed", "kind": "unattributed", "service": None, "label": "Unattributed", "amount": "-402.17"},
              {"id": "unallocated", "kind": "unallocated", "service": None, "label": "Unallocated shared cost",
               "amount": "-1210.00"}]
    return steps


def review_document() -> dict:
    """A comparable two-quarter review as H3's engine writes it (contract §C)."""
    steps = _steps()
    start = Decimal("104602.18")
    end = start + sum(Decimal(s["amount"]) for s in steps)
    audit = {"currency": "USD", "cost_basis": "effective", "method": "2026-12",
             "scope": {"accounts": None, "tags": None, "services": None, "declared_services": ["chat", "embed"]}}
    return {
        "meta": {"format": 1, "tool": "costaudit", "version": "0.9.0", "method": "2026-12"},
        "audits": [{**audit, "case": "demo-q2", "window": {"start": "2026-04-01T00:00:00Z", "end": "2026-07-01T00:00:00Z"},
                    "total": str(start), "coverage_share": "0.912345", "path": "fixtures/history/q2"},
                   {**audit, "case": "demo-q3", "window": {"start": "2026-07-01T00:00:00Z", "end": "2026-10-01T00:00:00Z"},
                    "total": str(end), "coverage_share": "0.934001", "path": "fixtures/history/q3"}],
        "comparable": True, "reasons": [],
        "pairs": [{
            "from": 0, "to": 1, "comparable": True, "reasons": [],
            "bridge": {"from_total": str(start), "to_total": str(end), "steps": steps},
            "services": [
                {"service": "chat", "status": "both", "cost_from": "88210.44", "cost_to": "100902.06", "change": "12691.62",
                 "requests_from": 41200000, "requests_to": 52300000, "unit_cost_from": "2.141030", "unit_cost_to": "1.929294",
                 "effects": {"volume": "21250.40", "price": "-3120.75", "efficiency": "-6480.12", "overhead": "1042.09"},
                 "driver": "volume: 27 % more requests; busy GPU-seconds per request fell 12 % after right-sizing"},
                {"service": "embed", "status": "both", "cost_from": "12080.74", "cost_to": "12808.63", "change": "727.89",
                 "requests_from": 9100000, "requests_to": 9712000, "unit_cost_from": "1.327554", "unit_cost_to": "1.318846",
                 "effects": {"volume": "812.30", "price": "-140.02", "efficiency": "0.00", "overhead": "55.61"},
                 "driver": "volume: 6.7 % more requests"},
                {"service": "rerank", "status": "new", "cost_from": "0.00", "cost_to": "4310.55", "change": "4310.55",
                 "requests_from": None, "requests_to": 2050000, "unit_cost_from": None, "unit_cost_to": "2.102707",
                 "effects": None, "driver": "new service: first seen 2026-08-03"}],
            "buckets": [
                {"bucket": "model_compute", "amount_from": "25721.35", "amount_to": "30102.77", "share_from": "0.245897",
                 "share_to": "0.252030", "change": "4381.42", "driver": "more requests on chat"},
                {"bucket": "serving_path", "amount_from": "15492.46", "amount_to": "17011.93", "share_from": "0.148108",
                 "share_to": "0.142431", "change": "1519.47", "driver": "rerank's serving nodes"},
                {"bucket": "platform_overhead", "amount_from": "61290.37", "amount_to": "70616.32", "share_from": "0.585938",
                 "share_to": "0.591236", "change": "9325.95", "driver": "idle chat replicas before right-sizing"},
                {"bucket": "unattributed", "amount_from": "2098.00", "amount_to": "1695.83", "share_from": "0.020057",
                 "share_to": "0.014198", "change": "-402.17", "driver": "fewer unmatched invoice lines"}],
            "coverage": {"from": "0.912345", "to": "0.934001", "change": "0.021656",
                         "note": "more of the paid GPU-hours seen by telemetry; the bridge is not adjusted for it"},
            "lines": {"threshold": "500.00",
                      "appeared": [{"kind": "service", "id": "rerank", "amount": "4310.55"},
                                   {"kind": "sku", "id": "AmazonEC2|g6e.xlarge", "amount": "3120.00"}],
                      "vanished": [{"kind": "account", "id": "210987654321", "amount": "812.40"}]},
            "realised": [{"option": "right_size_replicas", "service": "chat", "shipped": "2026-08-15",
                          "part": "platform_overhead.capacity_above_demand",
                          "projection": {"low": "1800.00", "expected": "2600.00", "high": "3400.00"},
                          "realised": "2712.48", "verdict": "on track",
                          "evidence": {"x_before": {"value": "0.0411", "source": "q3 services.chat.daily, 2026-07-01..08-14"},
                                       "x_after": {"value": "0.0262", "source": "q3 services.chat.daily, 2026-08-15..09-30"},
                                       "p_after": {"value": "0.000281", "source": "cost / GPU-seconds after"},
                                       "q_after_monthly": {"value": "17825400", "source": "requests after × 30.4375 / 47"}},
                          "note": "the part grew with demand (+18 %), the saving is measured per request"}],
        }],
        "notes": ["Coverage rose 2.2 pts; the bridge is not adjusted for it."],
    }


def hostile_document() -> dict:
    doc = review_document()
    pair = doc["pairs"][0]
    pair["services"][0]["service"] = HOSTILE
    pair["services"][1]["service"] = FORMULA
    pair["bridge"]["steps"][0]["label"] = f"{HOSTILE}: volume"
    pair["lines"]["appeared"][1]["id"] = FORMULA
    doc["audits"][0]["case"] = f"q2 {HOSTILE}"
    return doc


def not_comparable_document() -> dict:
    doc = review_document()
    doc["audits"][1]["cost_basis"] = "billed"
    reason = "the cost basis differs: demo-q2 is effective, demo-q3 is billed"
    doc["comparable"], doc["reasons"] = False, [reason]
    pair = doc["pairs"][0]
    pair.update(comparable=False, reasons=[reason], bridge=None)
    for s in pair["services"]:
        s["effects"] = None
    return doc


def test_the_bridge_runs_from_the_earlier_total_to_the_later_to_the_cent():
    doc = review_document()
    bars = bridge_bars(doc["pairs"][0]["bridge"])
    assert bars[0][2] == Decimal("104602.18") and bars[-1][2] == Decimal(doc["audits"][1]["total"])
    assert bars[-2][2] == bars[-1][2]  # the last step lands on the later total
    assert "embed: efficiency" not in [b[0] for b in bars]  # a zero step is not drawn
    assert Decimal(0) < axis_floor(bars) < min(b[2] for b in bars[1:-1])


def test_many_steps_fold_their_smallest_into_one_bar_and_still_add_up():
    steps = [{"label": f"s{i}: volume", "kind": "volume", "amount": f"{i}.01"} for i in range(1, 31)]
    bridge = {"from_total": "1000.00", "to_total": str(Decimal("1000.00") + sum(Decimal(s["amount"]) for s in steps)),
              "steps": steps}
    bars = bridge_bars(bridge)
    assert len(bars) == 16 + 2 and bars[-2][0] == "15 smaller steps"
    assert bars[-2][2] == bars[-1][2] == Decimal(bridge["to_total"])
    assert [b[0] for b in bars[1:16]] == [f"s{i}: volume" for i in range(16, 31)]


def test_the_review_set_is_written_and_the_html_holds_the_figures(tmp_path):
    out = tmp_path / "review"
    paths = render_review(review_document(), out, ["json", "html", "xlsx"])
    assert [p.name for p in paths] == ["review.json", "review.html", "review.xlsx"]
    assert json.loads((out / "review.json").read_text())["pairs"][0]["bridge"]["from_total"] == "104602.18"
    page = (out / "review.html").read_text(encoding="utf-8")
    for figure in ("$104,602.18 → $120,720.07", "+$16,117.89 (+15.4 %)", "+$21,250.40", "−$6,480.12",
                   "$2,712.48", "$1,800.00", "$3,400.00", "on track", "91.2 % → 93.4 %", "+2.2 pts",
                   "AmazonEC2|g6e.xlarge", "$2.141030", "the part grew with demand", "x_before",
                   "q3 services.chat.daily, 2026-07-01..08-14", "17,825,400 (requests after × 30.4375 / 47)", "Q after monthly"):
        assert figure in page, figure
    assert page.count("data:image/svg+xml;base64,") == 1


def test_a_review_that_is_not_comparable_has_no_bridge_and_its_reasons_on_page_one(tmp_path):
    page = review_html(not_comparable_document())
    first = page.split('<section class="major">')[0]
    assert "No bridge: the audits are not comparable." in first
    assert "the cost basis differs: demo-q2 is effective, demo-q3 is billed" in first
    assert "data:image/svg+xml" not in page and "Bridge: " not in page
    assert "$104,602.18 → $120,720.07" in first  # the two totals, each the audit's own


def test_hostile_strings_are_escaped_and_never_formulas(tmp_path):
    from openpyxl import load_workbook

    out = tmp_path / "review"
    render_review(hostile_document(), out, ["html", "xlsx"])
    page = (out / "review.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    book = load_workbook(out / "review.xlsx")
    services = book["Services"]
    cells = {c.coordinate: c for row in services.iter_rows() for c in row}
    names = [services.cell(r, 1) for r in range(2, services.max_row + 1)]
    assert [c.value for c in names][:2] == [HOSTILE, FORMULA]
    assert all(c.data_type == "s" for c in names)
    lines = book["Lines"]
    assert lines.cell(3, 3).value == FORMULA and lines.cell(3, 3).data_type == "s"
    assert cells  # the sheet was read


def test_money_in_the_workbook_is_numeric_with_a_currency_format(tmp_path):
    from openpyxl import load_workbook

    out = tmp_path / "review"
    render_review(review_document(), out, ["xlsx"])
    book = load_workbook(out / "review.xlsx")
    assert book.sheetnames[:6] == ["Audits", "Bridge", "Services", "Buckets", "Lines", "Realised savings"]
    bridge = book["Bridge"]
    first, last = bridge.cell(2, 4), bridge.cell(bridge.max_row, 4)
    assert first.data_type == "n" and Decimal(str(first.value)) == Decimal("104602.18")
    assert Decimal(str(last.value)) == Decimal("120720.07") and '"USD"' in first.number_format
    steps = [Decimal(str(bridge.cell(r, 4).value)) for r in range(3, bridge.max_row)]
    assert sum(steps) == Decimal("120720.07") - Decimal("104602.18")
    realised = book["Realised savings"]
    assert [realised.cell(1, c).value for c in (5, 8)] == ["Projection Low", "Realised Monthly"]
    assert realised.cell(2, 8).data_type == "n" and Decimal(str(realised.cell(2, 8).value)) == Decimal("2712.48")
    assert book["Services"].cell(4, 3).data_type == "n"  # rerank's cost from: 0.00, a number


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed")
def test_the_pdf_shows_the_headline_figures_on_page_one(tmp_path):
    out = tmp_path / "review"
    render_review(review_document(), out, ["pdf"])
    text = subprocess.run(["pdftotext", "-layout", "-f", "1", "-l", "1", str(out / "review.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    for figure in ("demo-q2", "demo-q3", "$104,602.18", "$120,720.07", "+$16,117.89", "+15.4 %", "ON TRACK",
                   "$2,712.48"):
        assert figure in text, figure


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed")
def test_the_cost_basis_is_shown_in_words_with_its_cost_column_on_page_one(tmp_path):
    """The audits table's basis key ("effective") with its words and the export's cost column under
    it, once for the audits that share it (before: the key alone; AuditView.basis_words unrendered),
    and page 1 still holds the headline down to the realised saving."""
    words = ("Cost basis effective: what the usage cost once commitments are spread over the hours they cover "
             "(FOCUS EffectiveCost)")
    head = review_html(review_document()).split('<section class="major">')[0]
    assert head.count(words) == 1
    out = tmp_path / "review"
    render_review(review_document(), out, ["pdf"])
    text = subprocess.run(["pdftotext", "-f", "1", "-l", "1", str(out / "review.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    flat = " ".join(text.split())
    assert words in flat and "$2,712.48" in flat


def test_an_unknown_format_and_a_foreign_folder_are_refused(tmp_path):
    with pytest.raises(ReportError, match="unknown review format.*'csv'"):
        render_review(review_document(), tmp_path / "a", ["html", "csv"])
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "case.toml").write_text("x")
    with pytest.raises(ReportError, match="case.toml"):
        check_review_target(tmp_path / "b")
    with pytest.raises(ReportError, match="case.toml"):
        render_review(review_document(), tmp_path / "b", "json")
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["case.toml"]


def test_a_second_review_replaces_the_first_whole(tmp_path):
    out = tmp_path / "review"
    render_review(review_document(), out, "json,html")
    doc = copy.deepcopy(review_document())
    doc["notes"] = ["second run"]
    render_review(doc, out, ["json"])
    assert sorted(p.name for p in out.iterdir()) == ["review.json"]
    assert json.loads((out / "review.json").read_text())["notes"] == ["second run"]


@pytest.mark.parametrize("width", (375, 1280))
def test_the_review_page_has_no_horizontal_overflow(tmp_path, width):
    """The audit report's Chromium check (tests/audit/reporters/test_html_widths.py) on the review."""
    from tests.audit.reporters.test_html_widths import measure

    out = tmp_path / "review"
    render_review(hostile_document(), out, ["html"])
    found = measure(out / "review.html", width, tmp_path / "profile")
    assert found["viewport"] == width and found["page_width"] <= width, found
    assert found["count"] == 0, json.dumps(found["overflowing"], indent=1)


def test_three_audits_give_two_pairs_and_the_last_is_the_headline(tmp_path):
    from openpyxl import load_workbook

    doc = review_document()
    q1 = {**doc["audits"][0], "case": "demo-q1", "total": "98000.00",
          "window": {"start": "2026-01-01T00:00:00Z", "end": "2026-04-01T00:00:00Z"}}
    first = copy.deepcopy(doc["pairs"][0])
    first.update({"from": 0, "to": 1, "comparable": False, "reasons": ["the scopes differ: demo-q1 has no tags"],
                  "bridge": None, "realised": []})
    doc["audits"].insert(0, q1)
    doc["pairs"][0].update({"from": 1, "to": 2})
    doc["pairs"].insert(0, first)
    out = tmp_path / "review"
    render_review(doc, out, ["html", "xlsx"])
    page = (out / "review.html").read_text(encoding="utf-8")
    head, details = page.split('<section class="major">', 1)
    assert "demo-q2 → demo-q3" in head and "$104,602.18 → $120,720.07" in head and "No bridge" not in head
    assert details.index("demo-q1 → demo-q2: the change in detail") < details.index("demo-q2 → demo-q3: the change")
    assert "the scopes differ: demo-q1 has no tags" in details
    names = load_workbook(out / "review.xlsx").sheetnames
    assert {"Bridge 1", "Bridge 2", "Realised savings 2"} <= set(names)


def test_the_gpu_time_released_on_committed_capacity_is_shown_apart(tmp_path):
    """review.json's released_on_committed (METHOD §7 / §10: not saved until the commitment ends) is
    in the page's sentence and its own workbook column (before: neither existed)."""
    from openpyxl import load_workbook

    from audit.reporters.review_view import build_review_model

    doc = review_document()
    doc["pairs"][0]["realised"][0]["released_on_committed"] = "912.30"
    (view,) = build_review_model(doc).pairs[0].realised
    assert view.sentence == ("right_size_replicas on chat: $2,712.48 a month realised ($912.30 more released on "
                             "committed capacity, not saved until the commitment ends) against $2,600.00 expected "
                             "($1,800.00 – $3,400.00): on track.")
    render_review(doc, tmp_path / "review", ["xlsx"])
    sheet = load_workbook(tmp_path / "review" / "review.xlsx")["Realised savings"]
    assert sheet.cell(1, 9).value == "Released on Committed Monthly" and Decimal(str(sheet.cell(2, 9).value)) == Decimal("912.30")


def test_each_audits_cost_basis_names_the_columns_of_its_billing_format():
    """Before: "(FOCUS EffectiveCost)" for every audit, a column a CUR does not have."""
    doc = review_document()
    doc["audits"][0]["billing_formats"] = ["cur"]
    doc["audits"][1]["billing_formats"] = ["focus"]
    cur, focus = build_review_model(doc).audits
    assert cur.basis_words == (
        "effective: what the usage cost once commitments are spread over the hours they cover (CUR "
        "line_item_unblended_cost, reservation-covered usage at reservation_effective_cost, Savings Plan covered "
        "usage at savings_plan_savings_plan_effective_cost, commitment fees 0 and their unused part as lines of "
        "its own)")
    assert focus.basis_words == ("effective: what the usage cost once commitments are spread over the hours they "
                                 "cover (FOCUS EffectiveCost)")
