"""The PDF prints a bounded page whatever the case holds, and says by name what it left out.

A document with 5,000 rows in each long table (benchmarks/report/run.py ``large_audit``) prints
in bounded time and within a page budget: each such table shows its top ``PDF_ROWS`` rows and the
line "8 of 5,000 rows shown; all rows in tables.xlsx (sheet …) and report.html". The other cuts of
audit/reporters/print_view.py (page 1's unattributed parts, options not ranked, list-valued inputs,
long strings, kernel profiles, serving-evidence columns, per-service charts) each say what was cut
and where the rest is. The HTML keeps everything; a case with short tables and every option ranked
prints the same page as the HTML.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import time
from decimal import Decimal

import pytest

from audit.reporters.charts import CHART_SERVICES, chart_services, services_words
from audit.reporters.html import charts_of, render_html
from audit.reporters.pdf import PdfReporter, pdf_html
from audit.reporters.print_view import (
    PAGE_ONE_ROWS,
    PDF_CHARS,
    PDF_COLUMNS,
    PDF_ITEMS,
    PDF_KERNEL_CHARS,
    PDF_KERNELS,
    PDF_OPTIONS,
    PDF_PROFILES,
    PDF_ROWS,
    clip,
)
from audit.reporters.view import build_model
from audit.reporters.xlsx import SHEETS
from benchmarks.report.run import large_audit
from tests.paths import TEST_DATA

ROWS = 5000
#: a generous bound for a loaded 2-core machine: about 1.7 s idle (benchmarks/report/run.py), several
#: times that with other test runs beside it; printed whole, 500 rows a table took 38 s
BOUND_S = 30.0
#: the 5,000-row document prints 13 pages (20 with the 25-row cut, 2,000+ whole)
PAGE_BUDGET = 16


def sample() -> dict:
    return json.loads((TEST_DATA / "sample_audit.json").read_text(encoding="utf-8"))


def flat(html: str) -> str:
    """The page's words: tags dropped, entities of the escaped data kept as they are."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture(scope="module")
def large():
    model = build_model(large_audit(ROWS))
    charts_of(model)  # drawn once, as in a run where the HTML is written first
    return model


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed")
def test_pdf_of_5000_rows_prints_in_bounded_time_and_pages_and_says_where_the_rest_is(large, tmp_path):
    start = time.perf_counter()
    PdfReporter().report(large, tmp_path / "report.pdf")
    elapsed = time.perf_counter() - start
    assert elapsed < BOUND_S, f"the PDF of {ROWS} rows a table took {elapsed:.1f} s"
    info = subprocess.run(["pdfinfo", str(tmp_path / "report.pdf")], capture_output=True, text=True,
                          check=True).stdout
    pages = int(re.search(r"Pages:\s+(\d+)", info)[1])
    assert pages <= PAGE_BUDGET, pages
    text = subprocess.run(["pdftotext", str(tmp_path / "report.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    words = re.sub(r"\s+", " ", text)
    raw = sample()
    counts = {"classes": ROWS, "gpu_split": ROWS, "coverage": ROWS, "sources": ROWS, "findings": ROWS,
              "reconciliation": ROWS, "buckets": len(raw["buckets"]["platform_overhead"]["parts"]) + ROWS}
    for sheet, count in counts.items():
        line = f"{PDF_ROWS} of {count:,} rows shown; all rows in tables.xlsx (sheet {SHEETS[sheet]}) and report.html"
        assert line in words, line
    options = len(raw["options"]) + ROWS // 10
    assert f"{PDF_OPTIONS} of {options:,} rows shown; all rows in tables.xlsx (sheet {SHEETS['options']})" in words
    assert f"{PDF_ROWS} of 5,000 rows shown; all rows in report.html and audit.json (queue)" in words
    # classes and the drivers (which name classes) print their top rows only
    assert len(set(re.findall(r"class_\d{5}", words))) <= 2 * PDF_ROWS
    # page 1 keeps what a reviewer needs: the total, the buckets, the verdict, the ranked options
    page1 = re.sub(r"\s+", " ", subprocess.run(["pdftotext", "-f", "1", "-l", "1", str(tmp_path / "report.pdf"), "-"],
                                               capture_output=True, text=True, check=True).stdout)
    for needed in (large.total, "Where the money in scope goes", "RECONCILIATION VERDICT",
                   large.reconciliation.verdict_title, "Top options, ranked by expected payback",
                   large.top_options[0].saving.expected):
        assert needed in page1, needed


def test_the_cut_table_shows_the_largest_amounts(large):
    html = pdf_html(large)
    classes = large.audit["classes"]
    largest = sorted(classes, key=lambda c: -abs(Decimal(c["net"])))[:PDF_ROWS]
    table = html.split("Resource classes: gross, tax, credits, net", 1)[1].split("</table>", 1)[0]
    shown = re.findall(r'<code class="muted">(class_\d{5})</code>', table)
    assert shown == [c["class"] for c in largest]


def test_html_keeps_every_row(large):
    html = render_html(large)
    assert "rows shown" not in html and "more characters in report.html" not in html
    for name in ("class_", "gpu-node-", "billing-", "Finding "):
        assert len(set(re.findall(re.escape(name) + r"\d+", html))) >= ROWS, name


def ranked_only() -> dict:
    audit = sample()
    audit["options"] = [o for o in audit["options"] if o.get("rank") is not None]
    return audit


def test_a_case_with_short_tables_and_every_option_ranked_prints_as_the_html():
    """Under every limit (here: a row limit above every table's length), nothing is cut."""
    audit = ranked_only()
    for profile in audit["profiles"]:
        profile["top_kernels"] = [{**k, "name": k["name"][:PDF_KERNEL_CHARS]} for k in profile["top_kernels"][:PDF_KERNELS]]
    model = build_model(audit)
    assert pdf_html(model, limit=100) == render_html(model)
    assert pdf_html(model) != render_html(model)  # the sample's appendix tables are longer than PDF_ROWS


def test_options_not_ranked_print_their_reason_and_basis_and_the_line_says_so():
    audit = sample()
    for o in audit["options"]:
        o["basis"], o["basis_note"] = "assumed", f"the detail of the basis of {o['id']}"
    model = build_model(audit)
    unranked = [o for o in model.audit["options"] if o.get("rank") is None]
    printed, page = flat(pdf_html(model)), flat(render_html(model))
    assert f"The {len(unranked)} options not ranked show their reason and basis only; the basis's detail, " \
           f"their inputs, assumptions and next step are in report.html, the assumptions and next step also " \
           f"in tables.xlsx (sheet {SHEETS['options']})." in printed
    for o in unranked:
        assert o["reason"] in printed and o["reason"] in page
        assert o["basis_note"] in page and o["basis_note"] not in printed
        for assumption in o["assumptions"]:
            assert assumption in page and assumption not in printed
    ranked = next(o for o in model.audit["options"] if o.get("rank") is not None)
    assert all(a in printed for a in ranked["assumptions"]) and ranked["basis_note"] in printed


def test_a_list_valued_input_prints_its_first_items_and_counts_the_rest():
    audit = ranked_only()
    ids = [f"arn:aws:ec2:ap-northeast-1:999999999999:reserved-instances/ri-{i:04d}" for i in range(200)]
    audit["options"][0]["basis"] = "modelled"
    audit["options"][0]["inputs"] = [{"name": "commitments", "value": ", ".join(ids), "source": "billing lines"},
                                     {"name": "hours in the window", "value": "744", "source": "case: window"}]
    model = build_model(audit)
    printed, page = flat(pdf_html(model)), flat(render_html(model))
    assert f"commitments {', '.join(ids[:PDF_ITEMS])} and {200 - PDF_ITEMS:,} more (report.html, audit.json) " \
           f"(billing lines)" in printed
    assert ids[PDF_ITEMS] not in printed and "hours in the window 744 (case: window)" in printed
    assert all(i in page for i in ids)


def test_a_long_data_string_ends_with_how_much_more_there_is_and_stays_escaped():
    audit = ranked_only()
    reason = "<script>alert(1)</script> " + "; ".join(f"node-{i:04d}: no telemetry" for i in range(300))
    audit["reconciliation"]["drivers"][0]["detail"] = reason
    model = build_model(audit)
    html = pdf_html(model)
    shown = clip(reason)
    assert len(shown) < PDF_CHARS + 60 and shown.endswith("more characters in report.html)")
    assert shown.split(" … (")[0].endswith("no telemetry")  # cut between two items
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert f"({len(reason) - len(shown.split(' … (')[0]):,} more characters in report.html)" in html
    assert "node-0299" in render_html(model) and "node-0299" not in html
    assert clip("short") == "short"


def test_page_one_prints_the_largest_unattributed_parts_and_names_where_the_rest_are():
    audit = ranked_only()
    part = audit["buckets"]["unattributed"]["parts"][0]
    audit["buckets"]["unattributed"]["parts"] = [
        {**part, "name": f"unmatched_{i:02d}", "amount": f"{100 + i}.00", "reason": f"reason {i:02d}"} for i in range(20)]
    model = build_model(audit)
    html = pdf_html(model)
    page_one = html.split("Unattributed, and why", 1)[1].split("Reconciliation, and why", 1)[0]
    assert re.findall(r"reason (\d\d)", page_one) == [f"{i}" for i in range(19, 19 - PAGE_ONE_ROWS, -1)]
    assert f"The {PAGE_ONE_ROWS} largest of 20 parts shown; the rest under Bucket parts (Evidence appendix), " \
           f"in tables.xlsx (sheet {SHEETS['buckets']}) and report.html." in flat(page_one)
    assert len(re.findall(r"reason \d\d", render_html(model).split("Unattributed, and why", 1)[1]
                          .split("Reconciliation, and why", 1)[0])) == 20


def test_kernel_profiles_and_serving_evidence_columns_are_cut_with_a_line():
    audit = ranked_only()
    profile = audit["profiles"][0]
    audit["profiles"] = [{**copy.deepcopy(profile), "name": f"profile-{i}"} for i in range(PDF_PROFILES + 2)]
    figures = {"batch_size": {"value": "4.0", "source": "vllm"}}
    audit["serving_evidence"] = {f"svc-{i:02d}": figures for i in range(PDF_COLUMNS + 4)}
    model = build_model(audit)
    printed = flat(pdf_html(model))
    assert f"{PDF_PROFILES} of {PDF_PROFILES + 2} kernel profiles shown; all of them in report.html" in printed
    assert f"profile-{PDF_PROFILES - 1}" in printed and f"profile-{PDF_PROFILES}" not in printed
    assert f"{PDF_COLUMNS} of {PDF_COLUMNS + 4} services shown; every service in report.html" in printed
    assert f"svc-{PDF_COLUMNS - 1:02d}" in printed and f"svc-{PDF_COLUMNS:02d}" not in printed
    page = flat(render_html(model))
    assert f"profile-{PDF_PROFILES + 1}" in page and f"svc-{PDF_COLUMNS + 3:02d}" in page
    assert "kernel profiles shown" not in page and "services shown" not in page


def test_a_chart_draws_the_costliest_services_and_says_so():
    audit = sample()
    one = next(iter(audit["services"].values()))
    audit["services"] = {f"svc-{i:02d}": {**one, "cost": f"{i}.00", "shared_cost": "1.00"} for i in range(20)}
    drawn = chart_services(audit)
    assert drawn == [f"svc-{i:02d}" for i in range(20 - CHART_SERVICES, 20)]
    assert services_words(audit) == f" (the {CHART_SERVICES} costliest of 20 services)"
    assert chart_services(sample()) == list(sample()["services"]) and services_words(sample()) == ""


def test_the_months_table_prints_the_costliest_services_and_says_so():
    from tests.audit.reporters.test_months_view import with_months

    audit = with_months(ranked_only())
    one = next(iter(audit["services"].values()))
    entry = next(iter(audit["months"]["months"][0]["services"].values()))
    names = [f"team-{i:02d}" for i in range(CHART_SERVICES + 4)]
    for i, name in enumerate(names):
        audit["services"][name] = {**one, "cost": f"{i}.00", "shared_cost": "0.00"}
        for month in audit["months"]["months"]:
            month["services"][name] = dict(entry)
    model = build_model(audit)
    total = len(audit["services"])
    drawn = chart_services(audit)
    printed, page = flat(pdf_html(model)), flat(render_html(model))
    assert f"Services: the rows of the {CHART_SERVICES} costliest of {total} shown; every service in " \
           f"tables.xlsx (sheet {SHEETS['months']}) and report.html." in printed
    month_table = printed.split("Month by month", 1)[1].split("Months (UTC", 1)[0]
    for name in audit["services"]:
        assert (f"{name}: cost (own + shared)" in month_table) == (name in drawn), name
        assert f"{name}: cost (own + shared)" in page
    assert "costliest of" not in page.split("Month by month", 1)[1].split("Months (UTC", 1)[0]


def test_a_kernel_profile_prints_its_first_rows_of_each_table_and_says_where_the_rest_are():
    audit = ranked_only()
    profile = audit["profiles"][0]
    kernel = profile["top_kernels"][0]
    profile["top_kernels"] = [{**kernel, "name": f"kernel_{i:02d}"} for i in range(PDF_KERNELS + 3)]
    model = build_model(audit)
    printed, page = flat(pdf_html(model)), flat(render_html(model))
    assert f"kernel_{PDF_KERNELS - 1:02d}" in printed and f"kernel_{PDF_KERNELS:02d}" not in printed
    assert f"{PDF_KERNELS} of {PDF_KERNELS + 3} rows shown; all rows in report.html and audit.json (profiles)." \
        in printed
    assert f"kernel_{PDF_KERNELS + 2:02d}" in page and "rows shown" not in page
    profile["top_kernels"][0]["name"] = "void <flash_fwd>" + "k" * 300
    model = build_model(audit)
    html = pdf_html(model)
    assert "void &lt;flash_fwd&gt;" + "k" * (PDF_KERNEL_CHARS - 17) + "…" in html and "k" * 200 not in html
    assert "Long kernel names and call paths are shortened (…); report.html and audit.json (profiles) " \
           "have them whole." in flat(html)
    assert "k" * 200 in render_html(model)


def test_figures_no_service_has_are_named_in_one_line_and_the_html_keeps_their_reasons():
    audit = ranked_only()
    measured = {"value": "4.0", "source": "vllm:num_requests_running (prometheus)"}
    missing = {"reason": "no such family in the sources (vllm:<batch>)"}
    audit["serving_evidence"] = {
        "chat": {"batch_size": measured, "kv_cache_usage": missing, "power_watts": missing},
        **{f"svc-{i:02d}": {"batch_size": missing, "kv_cache_usage": missing,
                            "power_watts": measured if i == PDF_COLUMNS + 1 else missing}
           for i in range(PDF_COLUMNS + 2)}}
    model = build_model(audit)
    html = pdf_html(model)
    printed, page = flat(html), flat(render_html(model))
    table = html.split("Serving-path evidence", 1)[1].split("</table>", 1)[0]
    # a figure only a service the PDF leaves out has is still a row (its column is cut, not its figure)
    assert "Mean batch size" in table and "Power (W)" in table and "KV-cache usage" not in table
    assert "Not measured for any service: Queue time per request (s); Mean batch size" not in printed
    assert "for any service: Queue time per request (s); Tokens per engine step;" in printed
    assert "KV-cache usage;" in printed and "Why, with the metric names each needs: report.html" in printed
    assert "no such family in the sources (vllm:&lt;batch&gt;)" in page and "for any service" not in page
    none = build_model(ranked_only())  # the sample: no service has serving-path figures
    for html in (pdf_html(none), render_html(none)):
        assert "No service has serving-path figures in audit.json (serving_evidence)." in html
        assert "Mean batch size" not in html.split("Serving-path evidence", 1)[1].split("</div>", 1)[0]


def test_a_finding_prints_the_start_of_its_kernel_and_the_end_of_its_call_path_and_says_so():
    audit = ranked_only()
    kernel = "void <b>kernel</b>" + "x" * 400
    path = "a ← " * 100 + "model.py(12): forward"
    audit["findings"] = [{"id": "f1", "title": "Long names", "service": "chat", "kernel": kernel,
                          "call_path": path, "share": "0.01", "bucket": "model_compute", "part": "kernel_active",
                          "cost": "12.50", "fix": "fuse"},
                         {"id": "f2", "title": "Short names", "service": "chat", "kernel": "gemm",
                          "call_path": "b ← c", "share": "0.02", "bucket": "model_compute",
                          "part": "kernel_active", "cost": "10.00", "fix": "fuse"}]
    model = build_model(audit)
    html = pdf_html(model)
    assert "void &lt;b&gt;kernel&lt;/b&gt;" in html and "<b>" not in html
    assert "x" * (PDF_KERNEL_CHARS - 20) + "…" in html and "x" * PDF_KERNEL_CHARS not in html
    assert "model.py(12): forward" in html and "a ← " * 60 not in html
    assert "Long kernel names and call paths are shortened (…); report.html and audit.json (findings) " \
           "have them whole." in flat(html)
    assert "x" * 400 in render_html(model) and "are shortened" not in render_html(model)
    audit["findings"] = audit["findings"][1:]
    assert "(findings) have them whole" not in pdf_html(build_model(audit))


def test_a_cut_table_with_a_total_sums_the_rows_it_leaves_out_so_the_total_adds_up():
    audit = ranked_only()
    bucket = audit["buckets"]["platform_overhead"]
    part = bucket["parts"][0]
    amounts = [Decimal(100 + i) + Decimal("0.25") for i in range(PDF_ROWS + 3)]
    bucket["parts"] = [{**part, "name": f"part_{i:02d}", "amount": str(a), "gpu_hours": "2.50"}
                       for i, a in enumerate(amounts)]
    bucket["amount"] = str(sum(amounts))
    node = audit["coverage"]["by_node"][0]
    audit["coverage"]["by_node"] = [{**node, "node": f"node-{i:02d}", "paid_gpu_hours": f"{10 + i}.00",
                                     "observed_gpu_hours": f"{5 + i}.00"} for i in range(PDF_ROWS + 2)]
    model = build_model(audit)
    html = pdf_html(model)
    table = html.split('<span class="sw c-platform_overhead"></span>Platform overhead:', 1)[1].split("</table>", 1)[0]
    shown = [Decimal(x.replace(",", "")) for x in re.findall(r'<td class="num">\$([\d,]+\.\d\d)</td><td class="num">2\.50',
                                                             table)]
    rest = sorted(amounts)[:3]  # the three smallest are left out
    assert len(shown) == PDF_ROWS and sum(shown) + sum(rest) == sum(amounts)
    assert f"The other 3 parts</td><td class=\"num\">${sum(rest):,.2f}</td><td class=\"num\">7.50</td>" in table
    assert f"each in tables.xlsx (sheet {SHEETS['buckets']}) and report.html" in table
    nodes = html.split("GPU-hour coverage by node", 1)[1].split("</table>", 1)[0]
    assert "The other 2 nodes (each in tables.xlsx, sheet" in nodes and "<td class=\"num\">21.00</td>" in nodes
    assert "The other" not in render_html(model)


def test_a_findings_part_reads_in_words_that_break_between_words_and_stays_escaped():
    """The Part column is narrow: "model_compute.kernel_active" broke mid-word ("model_compute.k" /
    "ernel_active"), a <wbr> after the dot being overridden by code's overflow-wrap: anywhere. The
    part now reads as the report labels it elsewhere, each word kept whole ("In-flight" does not
    break at its hyphen), breaking at the spaces between; a part name the labels do not know is still
    shown (in words) and escaped."""
    audit = ranked_only()
    finding = {"id": "f1", "title": "Chains", "service": "chat", "kernel": "gemm", "call_path": "a ← b",
               "share": "0.01", "bucket": "model_compute", "part": "kernel_active", "cost": "1.00", "fix": "fuse"}
    audit["findings"] = [finding, {**finding, "id": "f2", "bucket": "serving_path", "part": "in_flight_idle<i>"}]
    for html in (pdf_html(build_model(audit)), render_html(build_model(audit))):
        assert ('<td><span class="nowrap">Model</span> <span class="nowrap">compute</span> <span class="nowrap">·'
                '</span> <span class="nowrap">Kernel-active</span> <span class="nowrap">time</span></td>') in html
        assert '<span class="nowrap">idle&lt;i&gt;</span></td>' in html
        assert "model_compute.<wbr>" not in html
