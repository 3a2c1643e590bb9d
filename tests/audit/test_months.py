"""A window over two or more calendar months: each month audited as a sub-window on one reading of
the sources, the quarter the sums of the rounded months, and the headline those sums (METHOD §10)."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from decimal import Decimal

import pandas as pd
import pytest

from audit.audit_json import to_dict
from audit.buckets import BUCKETS
from audit.collected import Collected
from audit.months import calendar_months, narrowed
from audit.pipeline import audit_collected, with_months
from tests.audit.test_audit_json_cents import broken_sums
from tests.audit.test_audit_json_review import billing_rows, profile_frame, telemetry_tables, two_day_case
from tests.builders import frame, line, lines_frame
from tests.paths import SHARED

UTC = timezone.utc
CROSSING = line(9999, service_name="AmazonCloudWatch", billed_cost=Decimal("7.777"), effective_cost=Decimal("7.777"),
                start=pd.Timestamp("2026-08-31T12:00:00Z"), end=pd.Timestamp("2026-09-01T12:00:00Z"))


def collected() -> Collected:
    return Collected((frame("billing", "focus", {"lines": lines_frame(billing_rows() + [CROSSING])}),
                      frame("telemetry", "openmetrics", telemetry_tables()), profile_frame()))


@pytest.fixture(scope="module")
def audited():
    said: list = []
    whole = audit_collected(two_day_case(), collected())
    result = with_months(whole, said.append)
    return whole, result, to_dict(result), said


def test_calendar_months():
    def at(*parts):
        return datetime(*parts, tzinfo=UTC)
    assert calendar_months(at(2026, 4, 1), at(2026, 7, 1)) == [
        (at(2026, 4, 1), at(2026, 5, 1)), (at(2026, 5, 1), at(2026, 6, 1)), (at(2026, 6, 1), at(2026, 7, 1))]
    assert calendar_months(at(2026, 12, 15), at(2027, 1, 10)) == [
        (at(2026, 12, 15), at(2027, 1, 1)), (at(2027, 1, 1), at(2027, 1, 10))]
    assert calendar_months(at(2026, 9, 1), at(2026, 10, 1)) == [(at(2026, 9, 1), at(2026, 10, 1))]


def test_each_month_is_audited_and_said(audited):
    _, result, doc, said = audited
    assert [m["month"] for m in doc["months"]["months"]] == ["2026-08", "2026-09"]
    assert doc["months"]["months"][0]["window"] == {"start": "2026-08-31T00:00:00Z", "end": "2026-09-01T00:00:00Z"}
    assert "auditing month 2026-08" in said and "auditing month 2026-09" in said
    assert doc["months"]["note"] == "the quarter's figures are the sums of the rounded months"


def test_quarter_is_the_sum_of_the_months_and_the_headline(audited):
    whole, result, doc, _ = audited
    months, quarter = doc["months"]["months"], doc["months"]["quarter"]
    total = sum((Decimal(m["total"]) for m in months), Decimal(0))
    assert Decimal(quarter["total"]) == total == Decimal(doc["total"]) == Decimal(doc["composition"]["total"])
    for b in BUCKETS:
        summed = sum((Decimal(m["buckets"][b]) for m in months), Decimal(0))
        assert Decimal(quarter["buckets"][b]) == summed == Decimal(doc["buckets"][b]["amount"])
        parts = sum((Decimal(p["amount"]) for p in doc["buckets"][b]["parts"]), Decimal(0))
        assert parts == summed
    for m in months:
        assert sum((Decimal(v) for v in m["buckets"].values()), Decimal(0)) == Decimal(m["total"])
    # the months partition what was read: the line that crosses the boundary is cut there, pro rata
    unrounded = sum((m.reconciliation.conservation.parts_total for m in result.months), Decimal(0))
    assert unrounded == whole.reconciliation.conservation.parts_total
    pieces = [m.lines.set_index("line_id").loc["inline.csv:9999"] for m in result.months]
    assert [p["effective_cost"] for p in pieces] == [Decimal("3.8885"), Decimal("3.8885")]
    assert [(p["start"], p["end"]) for p in pieces] == [
        (pd.Timestamp("2026-08-31T12:00:00Z"), pd.Timestamp("2026-09-01T00:00:00Z")),
        (pd.Timestamp("2026-09-01T00:00:00Z"), pd.Timestamp("2026-09-01T12:00:00Z"))]


def test_services_per_month_and_quarter(audited):
    whole, result, doc, _ = audited
    alone = to_dict(whole)
    # services' figures are the whole window's; their cents are sums of the parts, which follow the
    # months' bucket amounts (chat's by_bucket 48.33 / 383.79 here against 48.32 / 383.80 alone),
    # so that every documented sum holds on the headline (audit/audit_json_cents.py)
    def uncut(services):
        return {n: {k: v for k, v in e.items() if k != "by_bucket"} for n, e in services.items()}
    assert uncut(doc["services"]) == uncut(alone["services"])
    assert doc["services"]["chat"]["by_bucket"] == {"model_compute": "305.64", "serving_path": "48.33",
                                                    "platform_overhead": "383.79"}
    assert broken_sums(doc) == []
    quarter = doc["months"]["quarter"]["services"]
    for name, entry in quarter.items():
        per_month = [m["services"][name] for m in doc["months"]["months"]]
        assert entry["requests"] == sum(m["requests"] for m in per_month) == alone["services"][name]["requests"]
        assert Decimal(entry["total_cost"]) == sum((Decimal(m["total_cost"]) for m in per_month), Decimal(0))
        # the sum of the months beside the whole window's figure, the difference named
        assert entry["whole_window_cost"] == alone["services"][name]["total_cost"]
        assert Decimal(entry["difference"]) == Decimal(entry["total_cost"]) - Decimal(entry["whole_window_cost"])
        if Decimal(entry["difference"]):
            assert f"{name} {entry['total_cost']} against {entry['whole_window_cost']}" in doc["months"]["services_note"]
        for m in per_month:
            cost = Decimal(m["total_cost"])
            slack = Decimal("0.005") * 1000 / m["requests"]  # the cost is rounded, the unit cost is not
            assert abs(Decimal(m["cost_per_1k_requests"]) - cost * 1000 / m["requests"]) <= slack
    coverage = doc["months"]["months"][0]["coverage"]
    # two p5.48xlarge (8 GPUs each) billed for 24 h; telemetry names 6 of the 16 GPUs
    assert (coverage["gpu_hours_paid"], coverage["gpu_hours_observed"], coverage["share"],
            coverage["seen_unpaid_gpu_hours"]) == ("384.00", "144.00", "0.375000", "0.00")


def test_narrowed_keeps_only_the_month(audited):
    _, result, _, _ = audited
    start, end = result.months[1].case.start, result.months[1].case.end
    second = narrowed(result.collected, start, end, False, True)
    ts = second.table("telemetry", "gpu_activity")["ts"]
    assert ts.min() == pd.Timestamp(start) and ts.max() < pd.Timestamp(end)
    assert second.table("profiles", "profile") is not None


def test_the_months_pass_the_contract_checker(audited, tmp_path):
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(audited[2]))
    run = subprocess.run([sys.executable, str(SHARED / "tools" / "check_audit_json.py"), str(path)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_months_services_are_rounded_with_its_other_figures():
    """METHOD §4 on each month: its services, its unattributed bucket and the shared cost no service took
    add to its total to the cent, as the month audited alone gives them. Before, each month's service
    cost was rounded on its own (the verifier's L71 September: 2582.75 against a total of 2582.74); here,
    with a 13.333 line across the months' edge, the services summed 551.59 and 531.43 against 551.60
    and 531.44."""
    crossing = line(9999, service_name="AmazonCloudWatch", billed_cost=Decimal("13.333"),
                    effective_cost=Decimal("13.333"), start=pd.Timestamp("2026-08-31T12:00:00Z"),
                    end=pd.Timestamp("2026-09-01T12:00:00Z"))
    read = Collected((frame("billing", "focus", {"lines": lines_frame(billing_rows() + [crossing])}),
                      frame("telemetry", "openmetrics", telemetry_tables()), profile_frame()))
    result = with_months(audit_collected(two_day_case(), read), lambda *said: None)
    doc = to_dict(result)
    for entry, month in zip(doc["months"]["months"], result.months):
        alone = to_dict(month)
        assert {n: s["total_cost"] for n, s in entry["services"].items()} == \
            {n: s["total_cost"] for n, s in alone["services"].items()}
        unallocated = Decimal(alone["allocation"]["unallocated"]) if alone.get("allocation") else Decimal(0)
        assert sum((Decimal(s["total_cost"]) for s in entry["services"].values()), Decimal(0)) \
            + Decimal(entry["buckets"]["unattributed"]) + unallocated == Decimal(entry["total"])
