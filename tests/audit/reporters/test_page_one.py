"""Page 1 in plain words (audit.reporters.wording), and words never broken inside in the PDF.

Page 1 names each measurement by what it measures and the case's source name, options by title,
and says why the reconciliation's top-down figure differs from the total in scope; the metric
names go to the Evidence appendix table. Every figure is traceable to audit.json.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from audit.render import render
from audit.reporters import wording
from audit.reporters.formatting import money
from audit.reporters.view import build_model
from tests.paths import TEST_DATA

GPU_SOURCE = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE (prometheus-export) × GPU-interval cost of FOCUS lines "
              "(aws-focus)")
BOTH = ("DCGM_FI_DEV_GPU_UTIL/DCGM_FI_PROF_GR_ENGINE_ACTIVE (prometheus-export) × GPU-interval cost of "
        "FOCUS lines (aws-focus)")
SERVING = GPU_SOURCE + "; gap ratio g = 0.0929 from kernel profile chat-qwen-prefill (chat.json.gz)"
#: long service names of a real case; "ordering" was printed "orderin g" in the unit-cost table
SERVICES = ("ordering", "recommendations", "checkout-gateway")
RAW = re.compile(r"DCGM_FI_|vllm:|kube_pod|nv_inference|tgi_request|GPU-interval cost of FOCUS")


def sample() -> dict:
    with open(TEST_DATA / "sample_audit.json", encoding="utf-8") as fh:
        return json.load(fh)


def demo_shaped() -> dict:
    """The sample with parts, sources and reconciliation of the shape the engine writes."""
    audit = sample()
    audit["sources"] = [{"name": "aws-focus", "kind": "billing", "format": "focus"},
                        {"name": "prometheus-export", "kind": "telemetry", "format": "openmetrics"},
                        {"name": "chat-qwen-prefill", "kind": "profiles", "format": "kineto"}]
    buckets = audit["buckets"]
    for key, source in (("model_compute", GPU_SOURCE), ("serving_path", SERVING), ("platform_overhead", BOTH)):
        for part in buckets[key]["parts"]:
            part["source"] = source
    buckets["platform_overhead"]["parts"][-1]["source"] = "FOCUS lines (aws-focus), class observability"
    buckets["unattributed"]["parts"] = [
        {"name": "no_activity_sample", "amount": "1035.00", "gpu_hours": "138.00", "service": None,
         "source": "no kernel-activity sample (prometheus-export) × GPU-interval cost of FOCUS lines (aws-focus)",
         "reason": "GPU-intervals with no kernel-activity sample"},
        {"name": "unmatched_line", "amount": "1063.00", "gpu_hours": None, "service": None,
         "source": "FOCUS lines (aws-focus), class unmatched", "reason": "no rule matched"}]
    audit["reconciliation"]["top_down"] = str(Decimal(audit["total"]) - Decimal("1035.01"))
    return audit


# ---- words ------------------------------------------------------------------------------------

def test_a_gpu_part_reads_as_the_measurement_in_words_and_the_source_names():
    found = wording.measured(GPU_SOURCE, "effective")
    assert found.words == "GPU activity from DCGM (prometheus-export) × GPU cost from the invoice (aws-focus)"
    assert found.metrics == ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "FOCUS EffectiveCost")
    assert found.sources == ("prometheus-export", "aws-focus")
    assert wording.measured(BOTH, "billed").words == found.words  # utilisation and engine activity: one kind


def test_the_appendix_names_the_cost_columns_of_the_format_the_figure_was_measured_on():
    """Before: "EffectiveCost" for every input, a column a CUR does not have."""
    cur = GPU_SOURCE.replace("FOCUS lines", "CUR lines")
    assert wording.measured(cur, "billed").metrics == (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "CUR line_item_unblended_cost, Savings Plan covered usage and its negation 0")
    assert wording.measured("CUR lines (bill), class egress", "list").metrics == (
        "CUR pricing_public_on_demand_cost, tax, credits and refunds at line_item_unblended_cost",)
    assert wording.measured("FOCUS lines (aws-focus), class egress", "billed").metrics == ("FOCUS BilledCost",)
    assert wording.measured("GCP billing export line L7 (gcp)", "billed").metrics == (
        "GCP billing export cost + credits",)
    assert wording.measured("CUR / FOCUS lines (a, b), class egress", "billed").metrics == (
        "CUR line_item_unblended_cost, Savings Plan covered usage and its negation 0; FOCUS BilledCost",)


def test_the_serving_part_names_the_profile_and_its_ratio():
    found = wording.measured(SERVING, "effective")
    assert found.words.endswith("× idle-to-busy ratio 0.0929 from the kernel profile chat-qwen-prefill")
    assert "kernel timeline of chat.json.gz" in found.metrics and "chat-qwen-prefill" in found.sources


def test_invoice_classes_of_one_source_are_one_phrase():
    parts = [{"source": "FOCUS lines (aws-focus), class egress"},
             {"source": "FOCUS lines (aws-focus), class observability"}, {"source": GPU_SOURCE}]
    assert wording.bucket_sources(parts, "effective") == [
        "invoice lines (aws-focus): data transfer out, logging and monitoring",
        "GPU activity from DCGM (prometheus-export) × GPU cost from the invoice (aws-focus)"]


def test_an_unknown_source_shape_is_kept_with_its_metric_names_in_words():
    text = "vllm:num_batched_tokens vs CUDA-graph batch sizes (prometheus-vllm)"
    found = wording.measured(text, "effective")
    assert found.words == "serving figures from vLLM vs CUDA-graph batch sizes (prometheus-vllm)"
    assert found.metrics == ("vllm:num_batched_tokens",)


def test_options_are_named_by_the_part_they_act_on_in_words():
    assert wording.option_target("platform_overhead.unallocated") == "Platform overhead · Unallocated GPUs"
    assert wording.option_target("serving_path.in_flight_idle") == "Serving path · In-flight idle"


def test_the_top_down_line_gives_the_difference_and_its_reasons_from_audit_json():
    audit = demo_shaped()
    line = wording.top_down_line(audit)
    difference = Decimal(audit["total"]) - Decimal(audit["reconciliation"]["top_down"])
    assert f"Top-down is {money(difference, 'USD')} below the total in scope ({money(audit['total'], 'USD')})" in line
    assert "GPU time with no activity sample (138.00 of 14,400.00 paid GPU-hours: $1,035.00, unattributed" in line
    assert "1 cent apart by rounding" in line
    assert "no rule matched" not in line  # unmatched lines are in the top-down figure


def test_the_top_down_line_when_nothing_is_covered_or_everything_is():
    audit = demo_shaped()
    audit["reconciliation"].update(verdict="not_measured", top_down="1000.00", covered_hours="0.00")
    assert "holds only the non-GPU invoice lines" in wording.top_down_line(audit)
    # not measured for want of a profile's traffic, the GPU time covered: its top-down says what it leaves out
    audit = demo_shaped()
    audit["reconciliation"].update(verdict="not_measured", bottom_up=None, gap=None)
    line = wording.top_down_line(audit)
    assert "non-GPU invoice lines" not in line and "it leaves out GPU time with no activity sample" in line
    audit["reconciliation"].update(verdict="reconciles", top_down=audit["total"])
    assert "telemetry covers every paid GPU-hour" in wording.top_down_line(audit)


def test_a_difference_the_parts_do_not_explain_is_said_not_hidden():
    audit = demo_shaped()
    audit["reconciliation"]["top_down"] = str(Decimal(audit["total"]) - Decimal("1535.00"))
    assert "$500.00 this report cannot name" in wording.top_down_line(audit)


def test_the_glossary_explains_the_terms_page_one_uses_only():
    terms = dict(wording.glossary(wording.page_one_texts(demo_shaped())))
    assert {"top-down", "bottom-up", "tolerance", "DCGM", "idle-to-busy ratio", "payback"} <= set(terms)
    assert "vLLM" not in terms  # page 1 of this audit never says vLLM
    assert dict(wording.glossary(["nothing here"])) == {}


def test_the_appendix_table_carries_every_metric_name_with_its_source():
    rows = build_model(demo_shaped()).measurements
    model = next(r for r in rows if r["figure"].startswith("Model compute"))
    assert model["metrics"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE, FOCUS EffectiveCost"
    assert model["source"] == "prometheus-export (openmetrics), aws-focus (focus)"
    assert any(r["figure"] == "Requests (chat)" and r["metrics"] == "vllm:request_success_total" for r in rows)


# ---- the printed report ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> tuple[dict, Path]:
    """The demo-shaped sample with long service names, printed to PDF once for this module."""
    audit = demo_shaped()
    audit["services"] = {name: copy.deepcopy(s) for name, s in zip(SERVICES, audit["services"].values())}
    audit["services"]["checkout-gateway"] = copy.deepcopy(audit["services"]["ordering"])
    for service in audit["services"].values():  # wide figures squeeze the name column
        service.update(cost="1234567.89", shared_cost="1234567.89", unattributed="1234567.89",
                       cost_per_request="0.00000976", cost_per_1k_requests="0.009761",
                       cost_per_1m_tokens="0.004763")
    out = tmp_path_factory.mktemp("page-one") / "out"
    render(audit, out, ["pdf"])
    return audit, out / "report.pdf"


def pdf_text(path: Path, first: int | None = None, last: int | None = None) -> str:
    pages = (["-f", str(first)] if first else []) + (["-l", str(last)] if last else [])
    return subprocess.run(["pdftotext", "-layout", *pages, str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def test_page_one_speaks_in_words_and_the_appendix_in_metric_names(printed):
    audit, pdf = printed
    page1 = pdf_text(pdf, 1, 1)
    assert not RAW.findall(page1), RAW.findall(page1)
    assert "GPU activity from DCGM (prometheus-export)" in re.sub(r"\s+", " ", page1)
    assert "platform_overhead." not in page1 and "Platform overhead · Unallocated GPUs" in page1
    assert "Terms." in page1 and "Top-down is" in page1
    rest = pdf_text(pdf, 2)
    assert "Metric names behind each figure" in rest and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in rest


def broken_words(text: str, names) -> list[tuple[str, str]]:
    """(line start, word) where a line starts with a proper prefix (3 letters or more) of a word
    of ``names``: the rest of the word went to the next line. A prefix ending in "…" is a label
    shortened on purpose (a chart's service names, whose text the PDF now carries), not broken."""
    words = {w for name in names for w in re.findall(r"[a-z]+", name)}
    found = []
    for line in text.splitlines():
        first = re.match(r"\s*([A-Za-z]+)(?![A-Za-z…])", line)
        if first:
            found += [(first[1], w) for w in words if 3 <= len(first[1]) < len(w) and w.startswith(first[1])]
    return found


def test_no_service_name_is_broken_inside_a_word(printed):
    """Under ``overflow-wrap: anywhere`` these figures printed "recommendat ions" (and, in a real
    case, "orderin g") in the unit-cost table."""
    _, pdf = printed
    text = pdf_text(pdf)
    assert broken_words(text, SERVICES) == []
    assert broken_words("recommendat   $1.00\nions", SERVICES) == [("recommendat", "recommendations")]
    assert broken_words("recommendatio…   checkout-gat…", SERVICES) == []
    rows = [line for line in text.splitlines() if "$0.00000976" in line]  # the unit-cost table
    assert len(rows) == len(SERVICES) and all(line.rstrip().endswith("$1,234,567.89") for line in rows), rows


def test_page_one_shows_a_few_measurements_per_bucket_and_counts_the_rest():
    parts = [{"source": f"FOCUS lines (bill-{i}), class egress"} for i in range(5)]
    shown = wording.bucket_sources(parts, "effective")
    assert shown == ["invoice lines (bill-0): data transfer out", "invoice lines (bill-1): data transfer out",
                     "and 3 more measurements (Evidence appendix: bucket parts)"]
    assert len(wording.bucket_sources(parts[:3], "effective")) == 3



def test_a_bridge_note_the_row_above_gave_reads_as_above():
    """gke 9301: one missing column left six steps unmeasured, each printing the same three-line
    reason (with the billing file's path) on page 1."""
    from audit.reporters.bridge_view import bridge_rows

    why = "ContractedCost is missing on 579 in-scope line(s) of /data/billing/gcp_billing_export_resource_v1.jsonl"
    rows = bridge_rows({"list": "4469.52", "negotiated_discounts": None, "contracted": None, "billed": "3879.84",
                        "not_measured": f"negotiated_discounts, contracted: {why}"}, str)
    assert [note for _, _, note, _ in rows] == ["", why, "as above", ""]


def test_page_one_stays_one_page_when_its_notes_and_ids_are_long():
    """Before: gke 9301's bridge notes and aks 9302's subscription id in the invoice box ran the
    executive summary onto page 2 (the top options, or the Terms paragraph alone). Where it would,
    the PDF now sets page 1 tight; a page 1 that fits is printed as before."""
    from audit.reporters.pdf import fitted_html, page_one_pages, pdf_html

    audit = demo_shaped()
    assert page_one_pages(fitted_html(build_model(audit))) == 1 and "summary tight" not in fitted_html(
        build_model(audit))
    why = ("ContractedCost is missing on 579 in-scope line(s) of "
           "/tmp/s8/r3/in9301/billing/gcp_billing_export_resource_v1.jsonl")
    steps = ("negotiated_discounts", "adjustments_list_to_contracted", "contracted", "covered_usage",
             "unused_commitment_billed", "other_contracted_to_billed")
    audit["bridge"] = {"list": "4469.52", **dict.fromkeys(steps), "billed": "3879.84", "amortised_commitment":
                       "1047.94", "purchases_amortised": "-1047.94", "effective": "3879.84",
                       "not_measured": f"{', '.join(steps)}: {why}"}
    audit["outside_scope"]["reason"] = ("account not in [scope].accounts "
                                        "(/subscriptions/c406def1-5459-4735-8820-b258e9edfd17)")
    audit["buckets"]["unattributed"]["parts"] *= 3
    model = build_model(audit)
    assert page_one_pages(pdf_html(model)) == 2
    fitted = fitted_html(model)
    assert "summary tight" in fitted and page_one_pages(fitted) == 1


def _basis_of(fmt: str, basis: str) -> str:
    """Page 1's cost basis line of an audit read from one billing source of ``fmt``."""
    audit = {"cost_basis": basis, "sources": [{"name": "bill", "kind": "billing", "format": fmt},
                                              {"name": "prom", "kind": "telemetry", "format": "openmetrics"}]}
    return build_model(audit).cost_basis_words


def test_the_cost_basis_names_the_columns_of_the_format_read():
    """Before: every format read "(FOCUS EffectiveCost)", a column a CUR, Azure or GCP export lacks."""
    assert _basis_of("focus", "effective") == ("effective: what the usage cost once commitments are spread over "
                                               "the hours they cover (FOCUS EffectiveCost)")
    assert _basis_of("cur", "billed") == ("billed: as invoiced, commitments charged when bought (CUR "
                                          "line_item_unblended_cost, Savings Plan covered usage and its negation 0)")
    assert _basis_of("athena", "list") == (
        "list: at the provider's public prices, before any discount (CUR pricing_public_on_demand_cost, tax, "
        "credits and refunds at line_item_unblended_cost)")
    assert _basis_of("cur", "effective") == (
        "effective: what the usage cost once commitments are spread over the hours they cover (CUR "
        "line_item_unblended_cost, reservation-covered usage at reservation_effective_cost, Savings Plan covered "
        "usage at savings_plan_savings_plan_effective_cost, commitment fees 0 and their unused part as lines of "
        "its own)")
    assert _basis_of("gcp_billing", "billed") == ("billed: as invoiced, commitments charged when bought (GCP "
                                                  "billing export cost + credits)")
    assert _basis_of("azure", "effective") == (
        "effective: what the usage cost once commitments are spread over the hours they cover (Azure "
        "costInBillingCurrency (EA: CostInBillingCurrency or Cost), commitment purchases and refunds 0)")
    assert _basis_of("azure", "contracted") == ("contracted: at the negotiated prices, before commitments "
                                                "(Azure UnitPrice × Quantity, Unused* lines 0)")
    assert "EffectiveCost" not in _basis_of("gcp_billing", "effective")


def test_two_billing_formats_name_both_and_page_one_glossary_reads_the_same_words():
    audit = {"cost_basis": "billed", "sources": [{"name": "a", "kind": "billing", "format": "cur"},
                                                 {"name": "b", "kind": "billing", "format": "focus"}]}
    assert wording.cost_basis_words(audit) == (
        "billed: as invoiced, commitments charged when bought (CUR line_item_unblended_cost, Savings Plan "
        "covered usage and its negation 0; FOCUS BilledCost)")
    assert wording.cost_basis_words(audit) in wording.page_one_texts(audit)


# ---- the plan on page 1: a payback the low case never reaches, the month, committed shares ----------

NONE_TERM = ("none", "the low case saves nothing, so it never pays back")
WINDOW_LINE = "Savings are per month, scaled from the 30-day window (2026-09-01 – 2026-10-01, end exclusive)."
COMMITTED = "excludes 59 % on commitments without an end date"


def planned() -> dict:
    """The sample with option 2 saving nothing in its low case (no payback at the high end) and
    option 1 leaving out a committed share whose end date is not known (c10801's autoscaling and
    right-size)."""
    audit = demo_shaped()
    first, second = audit["options"][0], audit["options"][1]
    second["monthly_saving"]["low"] = "0.00"
    second["payback_months"]["high"] = None
    first["deferred"] = {"committed_share": "0.592618", "months_after_window": None, "saving_later": None,
                         "saving_now": dict(first["monthly_saving"])}
    return audit


def test_a_payback_the_low_case_never_reaches_reads_none_and_page_one_says_why():
    """Before: "0.1 – —", the dash unexplained (c10801's autoscaling: "1.6 – —")."""
    model = build_model(planned())
    assert model.top_options[1].payback.range == "0.1 – none"
    assert NONE_TERM in model.glossary
    assert NONE_TERM not in build_model(demo_shaped()).glossary  # only where a shown payback has none


def test_page_one_says_savings_are_per_month_from_the_window_and_what_an_option_leaves_out():
    """Before: nothing on page 1 said the monthly savings were scaled from the window (c10801:
    $4,919.75 a month from a 1-day window of $2,573.89), nor that right-size leaves out the 59 %
    of its part on commitments with no known end date (only its assumptions did)."""
    model = build_model(planned())
    assert model.plan_window == WINDOW_LINE
    assert [o.committed for o in model.top_options] == [COMMITTED, "", ""]
    audit = planned()
    audit["window"]["days"] = "1.00"
    assert build_model(audit).plan_window.startswith("Savings are per month, scaled from the 1-day window (")


def test_the_html_page_one_and_the_options_table_print_the_same_words():
    from audit.reporters.html import render_html

    page = render_html(build_model(planned()))
    summary = page[:page.index("Where the money goes</h2>")]
    assert '<span class="range">0.1 – none</span>' in summary
    assert '<span class="term">none</span>: the low case saves nothing, so it never pays back' in summary
    assert WINDOW_LINE in summary and COMMITTED in summary
    options = page[page.index("Options, ranked by payback</h2>"):]
    assert '<span class="range">0.1 – none</span>' in options and " – —" not in options
    assert 'A payback of "none" means the saving at that band is nothing, so it never pays back.' in options


def test_the_printed_page_one_carries_the_plan_lines_and_stays_one_page(tmp_path):
    from audit.reporters.pdf import fitted_html, page_one_pages

    audit = planned()
    assert page_one_pages(fitted_html(build_model(audit))) == 1
    render(audit, tmp_path, ["pdf"])
    page1 = re.sub(r"\s+", " ", pdf_text(tmp_path / "report.pdf", 1, 1))
    assert "0.1 – none" in page1 and "– —" not in page1
    assert "none: the low case saves nothing, so it never pays back" in page1
    assert WINDOW_LINE in page1 and COMMITTED in page1


@pytest.mark.parametrize("gap, tolerance, shown", [
    ("-0.000017", "0.00001", ("-0.002 %", "0.001 %")),   # was "0.00 %" and "0.0 %": "the gap exceeds the tolerance"
    ("0.02001", "0.02", ("2.001 %", "2.000 %")),          # was "2.00 %" against "2.0 %"
    ("-0.000017", "0.05", ("0.00 %", "5.0 %")),           # plain where the plain places tell them apart
    ("0.0301", "0.02", ("3.01 %", "2.0 %"))])
def test_the_gap_and_tolerance_show_the_places_that_tell_them_apart(gap, tolerance, shown):
    audit = sample()
    audit["reconciliation"].update(gap=gap, tolerance=tolerance)
    view = build_model(audit).reconciliation
    assert (view.gap, view.tolerance) == shown


def test_an_unattributed_part_of_no_service_beside_one_of_a_service_says_so():
    """The demo's page 1 read "No kernel-activity sample (chat) $840.05" then "No kernel-activity sample $504.03":
    whose was the second? GPUs no service held: "(no service)"."""
    from audit.reporters.html import render_html

    audit = demo_shaped()
    audit["buckets"]["unattributed"]["parts"].insert(0, {
        "name": "no_activity_sample", "amount": "2000.00", "gpu_hours": "200.00", "service": "chat",
        "source": "no kernel-activity sample", "reason": "GPU-intervals with no kernel-activity sample"})
    page = render_html(build_model(audit)).split("<h4>Unattributed, and why</h4>")[1].split("</table>")[0]
    assert "No kernel-activity sample (chat)" in page and "No kernel-activity sample (no service)" in page
    assert "Unmatched line (no service)" not in page  # no part of that name belongs to a service
