"""Reporters: audit.json dict → json / html / pdf / xlsx / csv, written atomically."""

from __future__ import annotations

import copy
import csv
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from audit.errors import ReportError
from audit.render import FORMATS, render
from audit.reporters import REPORTERS, resolve
from audit.reporters.view import build_model, money, percent
from tests.paths import ROOT, TEST_DATA

SAMPLE = TEST_DATA / "sample_audit.json"
XSS = "<script>alert(1)</script>"
XSS_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
BUCKETS = ("model_compute", "serving_path", "platform_overhead", "unattributed")


def load_sample() -> dict:
    with open(SAMPLE, encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def sample() -> dict:
    return load_sample()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, sample) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp("report")
    return out, render(sample, out, list(FORMATS))


# ---- the sample itself ----------------------------------------------------------------------

def test_sample_is_internally_consistent(sample):
    buckets = sample["buckets"]
    assert sum(Decimal(buckets[k]["amount"]) for k in BUCKETS) == Decimal(sample["total"])
    for key in BUCKETS:
        assert sum(Decimal(p["amount"]) for p in buckets[key]["parts"]) == Decimal(buckets[key]["amount"])
    assert sample["reconciliation"]["verdict"] == "reconciles"
    assert sum(o["status"] == "not_measured" for o in sample["options"]) >= 1
    assert len(sample["options"]) >= 6
    assert set(sample["services"]) == {"chat", "embed"}
    assert len({u["date"] for u in sample["utilisation"]}) >= 30


# ---- formatting -------------------------------------------------------------------------

def test_money_and_shares_are_formatted_from_exact_decimals():
    assert money("123456.78", "USD") == "$123,456.78"
    assert money("1234.5", "EUR") == "€1,234.50"
    assert money("0.000123", "GBP") == "£0.000123"
    assert money("-29800.00", "USD") == "-$29,800.00"
    assert money("1234567.89", "CHF") == "CHF 1,234,567.89"
    assert money("99999999999999.99", "USD") == "$99,999,999,999,999.99"  # no float rounding
    assert money(None, "USD") == "not measured"
    assert percent("0.412345") == "41.2 %"
    assert percent("0.011837", 2) == "1.18 %"
    assert percent(None) == "not measured"


def test_model_shows_unmeasured_figures_with_their_reason(sample):
    model = build_model(sample)
    unpriced = [o for o in model.options if not o.priced]
    status = {o["id"]: o["status"] for o in sample["options"]}
    unmeasured = [o for o in unpriced if status[o.id] == "not_measured"]
    assert unmeasured and all(o.saving.expected == "not measured" and o.reason for o in unmeasured)
    assert all(o.payback.expected == "not measured" for o in unmeasured)
    # no saving in this case: measured, nothing now; never shown as "not measured"
    measured = copy.deepcopy(sample)
    option = next(o for o in measured["options"] if o["status"] == "not_measured")
    option.update(status="no_saving", monthly_saving={"low": "0.00", "expected": "0.00", "high": "120.00"},
                  reason="no saving in this case: the saving is zero (or below the run cost)")
    shown = next(o for o in build_model(measured).options if o.id == option["id"])
    # its bands, as audit.json and tables.xlsx give them (before: "none" and "—" with no figure)
    cost = option["one_off_cost"]
    assert (shown.saving.expected, shown.saving.range, shown.payback.expected) == ("none", "$0.00 – $120.00", "—")
    assert (shown.one_off.expected, shown.one_off.range) == (f"${float(cost['expected']):,.2f}",
                                                             f"${float(cost['low']):,.2f} – ${float(cost['high']):,.2f}")
    # without bands (a part made negative by credits): "none" and a dash, as before
    option.update(monthly_saving=None, one_off_cost=None)
    shown = next(o for o in build_model(measured).options if o.id == option["id"])
    assert (shown.saving.expected, shown.one_off.expected, shown.payback.expected) == ("none", "—", "—")
    assert not shown.priced and shown.reason
    assert all(o.priced for o in model.top_options) and len(model.top_options) <= 3
    assert [b.key for b in model.buckets] == list(BUCKETS)


def test_the_cost_per_1000_of_all_requests_is_shown_beside_the_unit_costs(sample):
    """audit.json services.*.cost_per_1k_all_requests (a gateway's request log: failures and health
    checks too; 1.543349 on cloudgen gke 9301) was in tables.xlsx and the CSV, not in the report."""
    from audit.reporters.html import render_html

    audit = copy.deepcopy(sample)
    name, service = next(iter(audit["services"].items()))
    service["cost_per_1k_all_requests"] = "1.543349"
    shown = next(s for s in build_model(audit).services if s.name == name)
    assert shown.per_1k_all == "$1.543349"
    assert '<br><span class="small muted">all: $1.543349</span></td>' in render_html(build_model(audit))
    service["cost_per_1k_all_requests"] = None
    assert next(s for s in build_model(audit).services if s.name == name).per_1k_all == "—"


# ---- registry and API -------------------------------------------------------------------------

def test_unknown_format_is_refused_naming_the_valid_ones(tmp_path, sample):
    with pytest.raises(ReportError, match="valid formats: json, html, pdf, xlsx, csv"):
        render(sample, tmp_path, ["json", "docx"])
    with pytest.raises(ReportError, match="docx"):
        resolve("docx")
    assert list(tmp_path.iterdir()) == []


def test_every_registered_reporter_resolves():
    for name in REPORTERS:
        cls = resolve(name)
        assert cls.report_type == name and callable(cls.report)


def test_importing_render_loads_no_heavy_library():
    code = ("import sys, audit.render, audit.reporters.pdf, audit.reporters.charts; "
            "print(sorted(m for m in ('weasyprint', 'matplotlib', 'openpyxl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "[]"


# ---- outputs ------------------------------------------------------------------------------

def test_all_formats_are_written(rendered):
    out, written = rendered
    names = {p.relative_to(out).as_posix() for p in written}
    assert {"audit.json", "report.html", "report.pdf", "tables.xlsx"} <= names
    for table in ("buckets", "services", "options", "plan", "sensitivity", "reconciliation", "coverage", "gpu_split",
                  "sources"):
        assert f"tables/{table}.csv" in names
    assert all(p.is_file() for p in written)
    assert not [p for p in out.rglob("*") if p.name.startswith(".") or p.name.endswith(".tmp")]


def test_audit_json_is_byte_identical_across_renders(rendered, sample, tmp_path):
    out, _ = rendered
    render(copy.deepcopy(sample), tmp_path, ["json"])
    first, second = (out / "audit.json").read_bytes(), (tmp_path / "audit.json").read_bytes()
    assert first == second
    assert first.endswith(b"}\n") and json.loads(first) == sample
    expected = json.dumps(sample, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert first == expected.encode("utf-8")


def test_pdf_page_one_carries_total_buckets_and_verdict(rendered, sample):
    out, _ = rendered
    page1 = subprocess.run(["pdftotext", "-f", "1", "-l", "1", str(out / "report.pdf"), "-"],
                           capture_output=True, text=True, check=True).stdout
    cur = sample["currency"]
    assert money(sample["total"], cur) in page1
    assert "$104,602.18" in page1  # the sample's total, formatted independently of the code
    for key in BUCKETS:
        assert money(sample["buckets"][key]["amount"], cur) in page1, key
    assert sample["reconciliation"]["verdict"] in page1
    assert "Reconciles" in page1
    assert money(sample["invoice_total"], cur) in page1
    assert money(sample["outside_scope"]["amount"], cur) in page1
    top = [o for o in sample["options"] if o["status"] == "priced"][:3]
    for option in top:
        assert money(option["monthly_saving"]["expected"], cur) in page1
    info = subprocess.run(["pdfinfo", str(out / "report.pdf")], capture_output=True, text=True).stdout
    assert int(info.split("Pages:")[1].split()[0]) >= 5


def test_csv_numbers_are_the_exact_decimal_strings(rendered, sample):
    out, _ = rendered
    with open(out / "tables" / "buckets.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    parts = [p for k in BUCKETS for p in sample["buckets"][k]["parts"]]
    assert [r["amount"] for r in rows] == [p["amount"] for p in parts]
    assert sum(Decimal(r["amount"]) for r in rows) == Decimal(sample["total"])
    with open(out / "tables" / "options.csv", newline="", encoding="utf-8") as fh:
        options = list(csv.DictReader(fh))
    unpriced = [o for o in options if o["status"] == "not_measured"]
    assert unpriced and all(o["monthly_saving_expected"] == "" and o["reason"] for o in unpriced)


def test_xlsx_has_one_sheet_per_table_with_numeric_amounts(rendered, sample):
    from openpyxl import load_workbook

    book = load_workbook(rendered[0] / "tables.xlsx")
    for sheet in ("Summary", "Buckets and parts", "Services - unit costs", "Options", "Findings",
                  "Reconciliation", "Coverage by node", "GPU split", "Sources", "Classes"):
        assert sheet in book.sheetnames
    sheet = book["Buckets and parts"]
    header = [c.value for c in sheet[1]]
    amount = sheet.cell(2, header.index("Amount") + 1)
    assert Decimal(repr(amount.value)) == Decimal(sample["buckets"]["model_compute"]["parts"][0]["amount"])
    assert amount.data_type == "n" and amount.number_format == '#,##0.00 "USD"'
    book.close()


def test_html_is_one_self_contained_file(rendered):
    html = (rendered[0] / "report.html").read_text(encoding="utf-8")
    assert html.count("data:image/svg+xml;base64,") == 3
    assert "http://" not in html and "https://" not in html and "file:" not in html
    assert "<script" not in html


def test_resource_classes_are_shown_by_name_with_their_id_small(sample, rendered):
    """Before: the Resource classes table's rows were the raw ids (commitment_unused, gpu_compute, …)."""
    assert [c["label"] for c in build_model(sample).classes] == [
        "GPU instances", "CPU nodes on the request path", "Load balancers and NAT", "Data transfer out",
        "Logging and monitoring", "Cluster control plane and registry", "Unused commitment", "Lines no rule matched"]
    html = (rendered[0] / "report.html").read_text(encoding="utf-8")
    assert '<tr><td>Unused commitment<br><code class="muted">commitment_unused</code></td>' in html


def test_charts_are_deterministic(sample):
    from audit.reporters.charts import build_charts

    first, second = build_charts(sample), build_charts(copy.deepcopy(sample))
    # the tornado needs options[].sensitivity (audit/plan.py), which the stored sample predates
    assert first == second and all(v for k, v in first.items() if k != "tornado")


# ---- escaping -------------------------------------------------------------------------------

def test_untrusted_strings_are_escaped(tmp_path, sample):
    audit = copy.deepcopy(sample)
    audit["services"][XSS] = audit["services"].pop("embed")
    audit["buckets"]["serving_path"]["parts"][0]["reason"] = XSS
    audit["profiles"][0]["top_kernels"][0]["name"] = XSS
    for row in audit["utilisation"]:
        if row["service"] == "embed":
            row["service"] = XSS
    render(audit, tmp_path, ["html"])
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert XSS not in html and "<script" not in html
    assert html.count(XSS_ESCAPED) >= 4  # two service tables, the part, the kernel


# ---- PDF fetcher ----------------------------------------------------------------------------

def test_fetcher_refuses_everything_outside_templates(tmp_path):
    from audit.reporters.html import TEMPLATES
    from audit.reporters.pdf import RefusedURL, make_fetcher, resolve_url

    fetcher = make_fetcher()
    refused = ["file:///etc/passwd", "http://127.0.0.1:9/x.png", "https://example.com/x.png",
               "ftp://example.com/x", f"{TEMPLATES.as_uri()}/../pyproject.toml",
               f"{TEMPLATES.as_uri()}/%2e%2e/pyproject.toml", "file://otherhost/etc/passwd",
               "data:text/html,<b>x</b>", f"{TEMPLATES.as_uri()}/"]
    for url in refused:
        with pytest.raises(RefusedURL):
            fetcher(url)
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    root = tmp_path / "templates"
    root.mkdir()
    (root / "link.css").symlink_to(outside)
    with pytest.raises(RefusedURL):
        resolve_url((root / "link.css").as_uri(), root)
    body, mime = resolve_url(f"{TEMPLATES.as_uri()}/report.css")
    assert mime == "text/css" and b"@page" in body
    response = fetcher("data:image/svg+xml;base64,PHN2Zy8+")
    assert response.read() == b"<svg/>"


def test_pdf_render_asks_the_fetcher_and_is_refused(tmp_path):
    from audit.reporters.pdf import RefusedURL, fetcher_class, write_pdf

    calls: list[tuple[str, str]] = []

    class Recording(fetcher_class()):
        def fetch(self, url, headers=None):
            try:
                response = super().fetch(url, headers)
            except RefusedURL:
                calls.append((url, "refused"))
                raise
            calls.append((url, "served"))
            return response

    html = ('<html><body><p>probe</p><img src="file:///etc/passwd">'
            '<img src="http://127.0.0.1:9/x.png">'
            '<img src="../pyproject.toml">'
            '<link rel="stylesheet" href="file:///etc/passwd"></body></html>')
    write_pdf(html, tmp_path / "probe.pdf", fetcher=Recording())
    assert ("file:///etc/passwd", "refused") in calls
    assert ("http://127.0.0.1:9/x.png", "refused") in calls
    assert any(url.endswith("/pyproject.toml") for url, _ in calls)  # relative escape, refused too
    assert all(outcome == "refused" for _, outcome in calls)
    assert (tmp_path / "probe.pdf").read_bytes().startswith(b"%PDF")


# ---- atomicity ------------------------------------------------------------------------------

def test_a_failing_reporter_leaves_no_new_file(tmp_path, sample, monkeypatch):
    from audit.reporters.pdf import PdfReporter

    def boom(self, model, path):
        Path(path).write_bytes(b"half a pdf")
        raise RuntimeError("printer on fire")

    monkeypatch.setattr(PdfReporter, "report", boom)
    (tmp_path / "report.html").write_text("old report", encoding="utf-8")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(RuntimeError, match="printer on fire"):
        render(sample, tmp_path, ["json", "html", "csv", "pdf", "xlsx"])
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "report.html").read_text(encoding="utf-8") == "old report"

    fresh = tmp_path / "new" / "out"
    with pytest.raises(RuntimeError):
        render(sample, fresh, ["json", "pdf"])
    assert not fresh.exists()


def test_a_sparse_audit_renders_with_not_measured_figures(tmp_path, sample):
    audit = copy.deepcopy(sample)
    audit["reconciliation"].update(bottom_up=None, gap=None, verdict="not_measured",
                                   reason="no kernel profile: kernel-seconds per request unmeasured",
                                   drivers=[])
    for service in audit["services"].values():
        service.update(requests=None, cost_per_request=None, cost_per_1k_requests=None,
                       cost_per_1m_tokens=None, reason="no request counter matched")
    for key in ("profiles", "utilisation", "queue", "gpu_split", "classes"):
        audit[key] = []
    audit["options"] = [o for o in audit["options"] if o["status"] == "not_measured"]
    audit["coverage"] = {}
    audit.pop("bridge")
    written = render(audit, tmp_path, list(FORMATS))
    assert len(written) == 4 + 9  # audit.json, report.html, report.pdf, tables.xlsx; tables/*.csv (CSV_TABLES)
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "not_measured" in html and "no request counter matched" in html
    assert "No option could be priced." in html
