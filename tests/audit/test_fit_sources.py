"""audit/fit_sources.py: split cost allocation rows that carry money of their own, named as a fit warning."""
from __future__ import annotations

import json
import re

from audit.collected import Collected
from audit.fit_sources import split_money_fit
from tests.audit.test_fit import edited, validated
from tests.builders import cur2_rows, read_cur, write_cur2
from tests.connectors.billing.test_cur import MONEY_NOTE, split_rows_with_money, utc


def read(tmp_path, rows):
    """The synthetic CUR 2.0 ``rows`` read over September 2026, as the collect stage hands them on."""
    path = write_cur2(tmp_path / "export-00001.snappy.parquet", rows)
    return Collected(frames=(read_cur(path, start=utc(2026, 9, 1), end=utc(2026, 10, 1)),))


def test_split_rows_with_money_are_a_warning_naming_rows_amount_and_why(tmp_path):
    [misfit] = split_money_fit(read(tmp_path, split_rows_with_money()))
    assert (misfit.kind, misfit.subject, misfit.severity) == ("split_rows_money", "billing source cur", "warning")
    assert misfit.message == f"billing source cur: {MONEY_NOTE}"
    assert misfit.nearest == ("export-00001.snappy.parquet:6", "export-00001.snappy.parquet:7",
                              "export-00001.snappy.parquet:14")


def test_split_rows_without_money_are_no_warning(tmp_path):
    assert split_money_fit(read(tmp_path, cur2_rows())) == []


def test_a_path_filter_matching_no_request_names_the_paths_the_log_holds(eks, tmp_path):
    """The gateway's access log with path_filter = "/nope" (a verifier's find on eks 8201, there 6,670 requests): before,
    validate and run said nothing, the gateway counted 0 requests and every one was outside the
    filter; now the filter is named with the log's paths, most frequent first."""
    case = edited(eks, tmp_path, 'health_path = "/healthz"', 'health_path = "/healthz"\npath_filter = "/nope"')
    assert validated(case) == [
        'telemetry source gateway-access: path_filter "/nope" matches no request: the 6,722 2xx / 3xx request(s) of '
        "the window are all outside it, so service gateway counts 0 requests from it; paths the log holds, most "
        "frequent first: /v1/chat/completions (4,015), /v1/embeddings (2,185), /v1/models (522)"]


def test_a_path_filter_whose_requests_all_failed_says_so(eks, tmp_path):
    """path_filter = "/v1/models" while every GET /v1/models of the log answered 503 (a verifier's find on
    eks 9201): before, the warning said the filter matched no request and listed the other paths, as if
    it were wrong; now it says the filter matches those requests, all failed, with their statuses."""
    case = edited(eks, tmp_path, 'health_path = "/healthz"', 'health_path = "/healthz"\npath_filter = "/v1/models"')
    log = case / "telemetry" / "gateway-access.log"
    log.write_text(re.sub(r'("GET /v1/models[^"]*") \d{3}', r"\1 503", log.read_text()))
    assert [w for w in validated(case) if "path_filter" in w] == [
        'telemetry source gateway-access: path_filter "/v1/models" matches 522 request(s) of the window, all failed '
        "(5xx / 4xx; statuses 503 (522)): service gateway counts 0 successful requests from it"]


def test_a_focus_file_naming_no_currency_is_a_warning_and_a_source_note(tmp_path):
    """The verifier's repro: init on the spec example (no BillingCurrency column), the case edited to EUR,
    run: before, "total in scope (effective): 3.50 EUR", exit 0, and nothing said the currency was the
    case's; now a warning and a note on the source in audit.json say so (the run goes on: the reader's
    documented fallback)."""
    from tests.audit.test_discover import NO_CURRENCY
    from tests.audit.test_fit import costaudit, warnings_of

    case = tmp_path / "nocur"
    assert costaudit("init", case, "--from", NO_CURRENCY).returncode == 0
    toml = case / "case.toml"
    toml.write_text(toml.read_text().replace('currency = "USD"', 'currency = "EUR"'))
    result = costaudit("run", case, "--out", tmp_path / "out", "--quiet", "--format", "json")
    assert result.returncode == 0, result.stderr
    said = "no BillingCurrency column: amounts read as EUR, the case's currency (assumed)"
    # a source name past 60 characters is cut in the middle, as every fit subject is (audit/misfit.py text)
    assert f"billing source zero_percent_utilization…out_commitment_discount_flexibility: {said}" in (
        warnings_of(result.stderr))
    doc = json.loads((tmp_path / "out" / "audit.json").read_text())
    [source] = doc["sources"]
    assert source["notes"] == [{"row": 0, "column": "BillingCurrency", "note": said}]
    assert [f["kind"] for f in doc["fit"] if "currency" in f["kind"]] == ["currency_assumed"]
    assert "3.50 EUR" in result.stdout


def test_billing_rows_dated_1970_and_2099_are_a_source_note_and_a_warning(eks, tmp_path):
    """The verifier's repro (eks 10931, here eks 1: rows 3 and 4 of the FOCUS bill dated 1970-01-01 and 2099-12-31):
    before, run exited 0 with the two lines gone and nothing in audit.json said so; now the source's notes
    name the lines outside the window and the fit warns of charge periods outside their billing period,
    naming the rows."""
    from tests.audit.test_fit import costaudit
    from tests.builders import rewritten_billing

    def dated(rows):
        for row, day in ((rows[2], "1970-01-01"), (rows[3], "2099-12-31")):
            row["ChargePeriodStart"], row["ChargePeriodEnd"] = f"{day}T00:00:00.000Z", f"{day}T01:00:00.000Z"
        return rows

    case = rewritten_billing(eks, tmp_path / "case", dated)
    result = costaudit("run", case, "--out", tmp_path / "out", "--quiet", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads((tmp_path / "out" / "audit.json").read_text())
    [source] = [s for s in doc["sources"] if s["kind"] == "billing"]
    assert (source["rows"], source["lines"]) == (364, 362)
    said = ("charge period outside its billing period: 2 lines (110.08 USD billed) charged from 1970-01-01 00:00 to "
            "2099-12-31 01:00 UTC, outside the billing period of the line: focus_aws.csv:3 (1970-01-01 00:00 in "
            "2026-09-01 to 2026-10-01), focus_aws.csv:4 (2099-12-31 00:00 in 2026-09-01 to 2026-10-01)")
    assert source["notes"] == [
        {"row": 3, "column": "ChargePeriodStart", "note": (
            "2 lines wholly outside the window (2026-09-01 00:00 to 2026-09-02 00:00 UTC), left out: 110.08 USD billed, "
            "110.08 USD effective; charge periods from 1970-01-01 00:00 to 2099-12-31 01:00 UTC; rows focus_aws.csv:3, "
            "focus_aws.csv:4")},
        {"row": 3, "column": "ChargePeriodStart", "note": said}]
    [warning] = [f for f in doc["fit"] if f["kind"] == "charge_period_outside_billing_period"]
    assert warning == {"kind": "charge_period_outside_billing_period", "subject": "billing source focus",
                       "severity": "warning", "message": f"billing source focus: {said}",
                       "nearest": ["focus_aws.csv:3", "focus_aws.csv:4"]}
