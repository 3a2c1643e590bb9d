"""tables.xlsx and the CSVs carry what audit.json and the PDF do: the services' total cost, owned
lines, shared cost and key, unit costs over successful and over all requests, the request log's
classes and the prefill / decode split; the Plan and Sensitivity sheets (and plan.csv /
sensitivity.csv). Every figure a number equal to audit.json; a hostile name stays text."""
from __future__ import annotations

import copy
import csv
import json
from decimal import Decimal

import openpyxl
import pytest

from audit.reporters.csv import CsvReporter
from audit.reporters.xlsx import XlsxReporter
from tests.audit.test_xlsx import columns, money_cell, same

HOSTILE = '=HYPERLINK("http://evil.example/x","click")'
BANDS = ("low", "expected", "high")


@pytest.fixture(scope="module")
def audit(demo_audit) -> dict:
    return json.loads(json.dumps(demo_audit))


@pytest.fixture(scope="module")
def book(audit, tmp_path_factory):
    path = tmp_path_factory.mktemp("xlsx-plan") / "tables.xlsx"
    XlsxReporter().report(audit, path)
    workbook = openpyxl.load_workbook(path)
    yield workbook
    workbook.close()


def measured(audit: dict) -> dict:
    """The demo with a request log behind chat and a measured prefill / decode split (the demo's
    own profile holds prefill steps only), a hostile service name beside it."""
    doc = copy.deepcopy(audit)
    chat = doc["services"]["chat"]
    chat["request_counts"] = {"source": "alb (access_log)", "lines": 280958, "successful": 120728, "failed": 6253,
                              "health_checks": 153264, "unparseable": 93, "other_paths": 620}
    chat["cost_per_1k_all_requests"] = "0.238776"
    chat["requests_per_currency_unit"] = {"successful": "13964.729", "all": "4.188"}
    chat["phases"] = {
        "prefill": {"cost": "23390.36", "service_cost": "50840.54", "share": "0.757838", "source": "kernel profile p"},
        "decode": {"cost": "7474.34", "service_cost": "16245.64", "share": "0.242162", "source": "kernel profile p"},
        "cost_per_1m_prompt_tokens": "0.047010", "cost_per_1m_generated_tokens": "0.082146",
        "also": [{"source": "vllm timers", "prefill_share": "0.751000"}], "reason": None}
    doc["services"] = {**doc["services"], HOSTILE: copy.deepcopy(doc["services"]["embed"])}
    doc["options"][0]["title"] = HOSTILE
    return doc


def test_services_sheet_carries_totals_shares_and_keys(book, audit):
    sheet = book["Services - unit costs"]
    col = columns(sheet)
    for r, (name, s) in enumerate(audit["services"].items(), 2):
        assert sheet.cell(r, col["Service"]).value == name
        for head, key in (("Total Cost (Own + Shared)", "total_cost"), ("Owned Billing Lines", "owned_lines"),
                          ("Shared Cost", "shared_cost"), ("Unattributed", "unattributed")):
            money_cell(sheet.cell(r, col[head]), s[key])
        assert Decimal(s["cost"]) + Decimal(s["shared_cost"]) == Decimal(s["total_cost"])
        key = sheet.cell(r, col["Allocation Key"])
        assert key.data_type == "s" and key.value == s["allocation_key"]
        per_unit = sheet.cell(r, col["Requests per Currency Unit (Successful)"])
        assert same(per_unit, s["requests_per_currency_unit"]["successful"]) and "USD" not in per_unit.number_format
        assert s["requests_per_currency_unit"]["all"] is None  # the demo has no request log:
        assert sheet.cell(r, col["Requests per Currency Unit (All)"]).value is None  # empty, never a zero
        assert sheet.cell(r, col["Cost per 1,000 Requests (All Requests)"]).value is None
        assert sheet.cell(r, col["Request Log Lines"]).value is None
        reason = sheet.cell(r, col["Prefill / Decode Reason"])
        assert reason.data_type == "s" and reason.value == f"not measured: {s['phases']['reason']}"
        assert sheet.cell(r, col["Prefill Share"]).value is None


def test_request_classes_and_phases_are_numbers(audit, tmp_path):
    doc = measured(audit)
    XlsxReporter().report(doc, tmp_path / "t.xlsx")
    workbook = openpyxl.load_workbook(tmp_path / "t.xlsx")
    sheet = workbook["Services - unit costs"]
    col = columns(sheet)
    chat = doc["services"]["chat"]
    for k in ("lines", "successful", "failed", "health_checks", "unparseable", "other_paths"):
        cell = sheet.cell(2, col[f"Request Log {k.replace('_', ' ').title()}"])
        assert cell.data_type == "n" and cell.value == chat["request_counts"][k] and cell.number_format == "#,##0"
    assert sheet.cell(2, col["Request Log Source"]).value == "alb (access_log)"
    money_cell(sheet.cell(2, col["Cost per 1,000 Requests (All Requests)"]), chat["cost_per_1k_all_requests"])
    assert same(sheet.cell(2, col["Requests per Currency Unit (All)"]), "4.188")
    share = sheet.cell(2, col["Prefill Share"])
    assert same(share, "0.757838") and share.number_format == "0.0000%"
    for head, value in (("Prefill Cost", "23390.36"), ("Decode Service Cost", "16245.64"),
                        ("Cost per 1 M Prompt Tokens", "0.047010"), ("Cost per 1 M Generated Tokens", "0.082146")):
        money_cell(sheet.cell(2, col[head]), value)
    assert sheet.cell(2, col["Prefill / Decode Source"]).value == "kernel profile p"
    assert sheet.cell(2, col["Prefill / Decode Also Measured By"]).value == "vllm timers: prefill share 0.751000"
    assert sheet.cell(2, col["Prefill / Decode Reason"]).value is None
    hostile = sheet.cell(4, col["Service"])
    assert hostile.data_type == "s" and hostile.value == HOSTILE  # text, never a formula
    title = workbook["Sensitivity"].cell(2, columns(workbook["Sensitivity"])["Title"])
    assert title.data_type == "s" and title.value == HOSTILE
    workbook.close()


def test_plan_sheet_is_the_combined_saving_per_part_and_the_total(book, audit):
    sheet = book["Plan"]
    col = columns(sheet)
    parts = audit["plan"]["by_part"] + [audit["plan"]["total"]]
    assert parts[:-1] and sheet.max_row - 1 == len(parts)
    for r, p in enumerate(parts, 2):
        assert sheet.cell(r, col["Part"]).value == p["part"]
        assert sheet.cell(r, col["Options"]).value == " | ".join(p["options"])
        money_cell(sheet.cell(r, col["Part Monthly"]), p["part_monthly"])
        money_cell(sheet.cell(r, col["Run Cost Monthly"]), p["run_cost_monthly"])
        for band in BANDS:
            money_cell(sheet.cell(r, col[f"Gross Saving ({band.title()})"]), p["gross_saving"][band])
            money_cell(sheet.cell(r, col[f"Combined Saving ({band.title()})"]), p["combined_saving"][band])
    total = sum(Decimal(p["combined_saving"]["expected"]) for p in parts[:-1])
    assert total == Decimal(audit["plan"]["total"]["combined_saving"]["expected"])


def test_sensitivity_sheet_per_option_and_input(book, audit):
    sheet = book["Sensitivity"]
    col = columns(sheet)
    expected = [(o, s) for o in audit["options"] if o["rank"] is not None for s in o["sensitivity"]]
    assert expected and sheet.max_row - 1 == len(expected)
    empty = 0
    for r, (option, s) in enumerate(expected, 2):
        assert sheet.cell(r, col["Rank"]).value == option["rank"] and sheet.cell(r, col["Input"]).value == s["input"]
        low, high = sheet.cell(r, col["Input Low"]), sheet.cell(r, col["Input High"])
        assert same(low, s["low"]) and same(high, s["high"])
        money = s["input"].startswith(("saving", "loaded rate"))
        assert ('"USD"' in low.number_format) == money, (s["input"], low.number_format)
        for head, key in (("Payback at Low (Months)", "payback_at_low"), ("Payback at High (Months)", "payback_at_high")):
            cell = sheet.cell(r, col[head])
            if s[key] is None:  # no saving at that value: empty, never a zero
                assert cell.value is None
                empty += 1
            else:
                assert same(cell, s[key])
        assert same(sheet.cell(r, col["Payback Months (Expected)"]), option["payback_months"]["expected"])
    assert empty  # the demo's autoscaling_policy has no saving at its low


def test_csvs_per_table(audit, tmp_path):
    doc = measured(audit)
    CsvReporter().report(doc, tmp_path)

    def read(name: str) -> list[dict[str, str]]:
        with open(tmp_path / f"{name}.csv", newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))

    services = read("services")
    assert [s["service"] for s in services] == ["chat", "embed", "'" + HOSTILE]  # neutralised, never a formula
    chat = doc["services"]["chat"]
    assert services[0]["total_cost"] == chat["total_cost"] and services[0]["allocation_key"] == "gpu_cost"
    assert services[0]["request_log_health_checks"] == "153264" and services[0]["prefill_share"] == "0.757838"
    assert services[1]["requests_per_currency_unit_all"] == "" and services[1]["phases_reason"].startswith("not measured")
    plan = read("plan")
    assert [p["part"] for p in plan] == [p["part"] for p in doc["plan"]["by_part"]] + ["total"]
    assert plan[-1]["combined_saving_expected"] == doc["plan"]["total"]["combined_saving"]["expected"]
    sensitivity = read("sensitivity")
    ranked = [(o, s) for o in doc["options"] if o["rank"] is not None for s in o["sensitivity"]]
    assert len(sensitivity) == len(ranked)
    assert sensitivity[0]["title"] == "'" + HOSTILE
    for row, (option, s) in zip(sensitivity, ranked):
        assert (row["id"], row["input"], row["low"], row["high"]) == (option["id"], s["input"], s["low"], s["high"])
        assert row["payback_at_low"] == (s["payback_at_low"] or "")
