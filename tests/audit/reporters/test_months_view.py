"""The quarter as months in the audit report (audit.json ``months``, METHOD §10, issue 15).

The sample audit (one month) is given a quarter's window and a ``months`` section after the
audit.json contract: three months whose rounded figures sum to the audit's own (the quarter is
the sum of the months, to the cent). Without ``months``, nothing of the report changes.
"""

from __future__ import annotations

import copy
import csv
import json
import shutil
import subprocess
from decimal import Decimal

import pytest

from audit.render import render
from audit.reporters.html import render_html
from audit.reporters.months_view import months_table, months_view
from audit.reporters.view import build_model
from tests.paths import TEST_DATA

HOSTILE = "<script>alert(1)</script>"
FORMULA = '=HYPERLINK("http://evil.example","x")'
BUCKETS = {"model_compute": ("7973.62", "8488.05", "9259.68"), "serving_path": ("4802.66", "5112.51", "5577.29"),
           "platform_overhead": ("19000.01", "20225.82", "22064.54"), "unattributed": ("650.38", "692.34", "755.28")}
SERVICES = {"chat": (("28873.28", "30736.08", "33530.27"), (13500000, 13950000, 14412310)),
            "embed": (("2903.01", "3090.30", "3371.24"), (31000000, 32100000, 33310775))}
COVERAGE = (("4760.00", "4300.50"), ("4920.00", "4500.25"), ("4720.00", "4400.00"))
WINDOWS = (("2026-07-01", "2026-08-01"), ("2026-08-01", "2026-09-01"), ("2026-09-01", "2026-10-01"))


@pytest.fixture(scope="module")
def sample() -> dict:
    return json.loads((TEST_DATA / "sample_audit.json").read_text(encoding="utf-8"))


def _q(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.000001")))


def with_months(audit: dict, rename: dict[str, str] | None = None) -> dict:
    """``audit`` over the quarter 2026-07-01..10-01 with its three months (services renamed as asked)."""
    audit = copy.deepcopy(audit)
    rename = rename or {}
    audit["window"] = {"start": "2026-07-01T00:00:00Z", "end": "2026-10-01T00:00:00Z", "days": "92"}
    months = []
    for i, (start, end) in enumerate(WINDOWS):
        buckets = {b: v[i] for b, v in BUCKETS.items()}
        total = sum(Decimal(v) for v in buckets.values())
        services = {}
        for name, (costs, requests) in SERVICES.items():
            cost = Decimal(costs[i])
            services[rename.get(name, name)] = {
                "total_cost": costs[i], "requests": requests[i],
                "cost_per_1k_requests": _q(cost * 1000 / requests[i]), "cost_per_1m_tokens": None}
        paid, seen = COVERAGE[i]
        months.append({"month": start[:7], "window": {"start": f"{start}T00:00:00Z", "end": f"{end}T00:00:00Z"},
                       "total": str(total), "buckets": buckets,
                       "shares": {b: _q(Decimal(v) / total) for b, v in buckets.items()}, "services": services,
                       "coverage": {"gpu_hours_paid": paid, "gpu_hours_observed": seen,
                                    "share": _q(Decimal(seen) / Decimal(paid))}})
    quarter = {"total": str(sum(Decimal(m["total"]) for m in months)),
               "buckets": {b: str(sum(Decimal(v) for v in vs)) for b, vs in BUCKETS.items()},
               "services": {rename.get(n, n): {"total_cost": str(sum(Decimal(c) for c in costs)), "requests": sum(reqs)}
                            for n, (costs, reqs) in SERVICES.items()}}
    audit["months"] = {"months": months, "quarter": quarter, "note": "the quarter's figures are the sums of the rounded months"}
    for old, new in rename.items():
        audit["services"][new] = audit["services"].pop(old)
    return audit


def test_the_quarter_is_the_sum_of_the_months_and_the_audit_total(sample):
    audit = with_months(sample)
    head, rows, kinds = months_table(audit)
    assert head == ["figure", "label", "2026-07", "2026-08", "2026-09", "quarter"]
    by_key = {r[0]: r for r in rows}
    assert by_key["total"][2:] == ["32426.67", "34518.72", "37656.79", "104602.18"] == by_key["total"][2:5] + [sample["total"]]
    for b in BUCKETS:
        assert sum(Decimal(v) for v in by_key[f"bucket:{b}"][2:5]) == Decimal(by_key[f"bucket:{b}"][5])
    assert by_key["service:chat:cost_per_1k_requests"][5] == "2.224904"  # 93,139.63 over 41,862,310 requests
    assert by_key["service:embed:requests"][5] == 96410775
    assert by_key["coverage:share"][5] == "0.916719"  # 13,200.75 of 14,400 GPU-hours
    assert by_key["service:chat:cost_per_1m_tokens"][5] == "3.135112"  # over the audit's prompt + generated tokens
    assert dict(zip((r[0] for r in rows), kinds))["share:unattributed"] == "pct"


def test_gpu_hours_seen_but_not_billed_are_a_row_only_where_a_month_has_them(sample):
    audit = with_months(sample)
    _, rows, _ = months_table(audit)
    assert "coverage:seen_unpaid_gpu_hours" not in {r[0] for r in rows}
    for month, unpaid in zip(audit["months"]["months"], ("0.00", "72.00", "0.00")):
        month["coverage"]["seen_unpaid_gpu_hours"] = unpaid
    _, rows, _ = months_table(audit)
    assert {r[0]: r for r in rows}["coverage:seen_unpaid_gpu_hours"][1:] == [
        "GPU-hours seen but not billed", "0.00", "72.00", "0.00", "72.00"]


def test_the_report_shows_month_by_month_with_a_chart(sample):
    model = build_model(with_months(sample))
    page = render_html(model)
    section = page.split("<h2>Month by month</h2>")[1].split("</section>")[0]
    for text in ("Jul 2026", "Aug 2026", "Sep 2026", "Quarter", "$32,426.67", "$104,602.18", "$2.138761",
                 "$2.224904", "24.6 %", "Coverage (observed / paid GPU-hours)", "91.7 %", "chat: cost (own + shared)",
                 "2026-07-01 – 2026-08-01"):
        assert text in section, text
    assert section.count("data:image/svg+xml;base64,") == 1


def test_without_months_nothing_changes(sample):
    assert months_table(sample) is None and months_view(sample) is None
    page = render_html(build_model(sample))
    assert "Month by month" not in page and "months-table" not in page.split("</style>")[1]


def test_the_months_sheet_is_numeric_and_the_csv_has_months(sample, tmp_path):
    from openpyxl import load_workbook

    out = tmp_path / "out"
    render(with_months(sample, {"chat": FORMULA}), out, ["xlsx", "csv"])
    sheet = load_workbook(out / "tables.xlsx")["Months"]
    assert [c.value for c in sheet[1]] == ["Figure", "Label", "2026-07", "2026-08", "2026-09", "Quarter"]
    total = sheet["F2"]
    assert total.data_type == "n" and Decimal(str(total.value)) == Decimal("104602.18") and '"USD"' in total.number_format
    labels = {sheet.cell(r, 2).value: r for r in range(2, sheet.max_row + 1)}
    hostile = sheet.cell(labels[f"{FORMULA}: cost (own + shared)"], 2)
    assert hostile.data_type == "s" and hostile.value.startswith("=HYPERLINK")
    share = sheet.cell(labels["Coverage (observed / paid GPU-hours)"], 6)
    assert share.data_type == "n" and share.number_format.endswith("%")
    with (out / "tables" / "months.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["figure", "label", "2026-07", "2026-08", "2026-09", "quarter"]
    assert rows[1] == ["total", "Total in scope", "32426.67", "34518.72", "37656.79", "104602.18"]
    assert any(r[1] == f"'{FORMULA}: requests" for r in rows)  # a formula-like label is neutralised


def test_without_months_no_months_csv_or_sheet(sample, tmp_path):
    from openpyxl import load_workbook

    render(sample, tmp_path / "out", ["xlsx", "csv"])
    assert not (tmp_path / "out" / "tables" / "months.csv").exists()
    assert "Months" not in load_workbook(tmp_path / "out" / "tables.xlsx").sheetnames


def test_a_hostile_service_name_is_escaped_in_the_months_section(sample):
    page = render_html(build_model(with_months(sample, {"embed": HOSTILE})))
    section = page.split("<h2>Month by month</h2>")[1].split("</section>")[0]
    assert "<script>" not in section and "&lt;script&gt;alert(1)&lt;/script&gt;: cost per 1,000 requests" in section


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed")
def test_the_pdf_has_the_months_and_page_one_unchanged(sample, tmp_path):
    out = tmp_path / "out"
    render(with_months(sample), out, ["pdf"])
    text = subprocess.run(["pdftotext", "-layout", str(out / "report.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    pages = text.split("\f")
    months = next(p for p in pages if "Month by month" in p)
    for figure in ("Jul 2026", "Quarter", "$32,426.67", "$37,656.79", "$104,602.18"):
        assert figure in months, figure
    assert "Month by month" not in pages[0]


@pytest.mark.parametrize("width", (375, 1280))
def test_the_report_with_months_has_no_horizontal_overflow(sample, tmp_path, width):
    """The Chromium width check of tests/audit/reporters/test_html_widths.py, with the months section."""
    from tests.audit.reporters.test_html_widths import measure

    out = tmp_path / "out"
    render(with_months(sample, {"embed": FORMULA}), out, ["html"])
    found = measure(out / "report.html", width, tmp_path / "profile")
    assert found["viewport"] == width and found["page_width"] <= width, found
    assert found["count"] == 0, json.dumps(found["overflowing"], indent=1)
