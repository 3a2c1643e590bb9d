"""A credit larger than the charges it applies to: the class comes out negative, and the audit says
so (rule 5) instead of showing negative unit costs and negative savings without a word.

The read-only check's case: a -50 credit on a gateway node whose charges were 8.568 + 3.915; the
gateway's cost per 1,000 requests came out -2.579564 and an option on the negative part saved
-31.93 a month (high below low), with ``fit`` empty.
"""
from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pandas as pd

from audit.audit_json import to_dict
from audit.collected import Collected
from audit.pipeline import audit_collected
from tests.builders import frame, line, lines_frame, make_case

T0 = pd.Timestamp("2026-09-01T00:00:00Z")
LOGS = "AmazonCloudWatch"


def day(row: int, **over) -> dict:
    amount = over.pop("amount")
    return line(row, start=T0, end=T0 + pd.Timedelta(days=1), service_name=LOGS,
                billed_cost=Decimal(amount), effective_cost=Decimal(amount), **over)


def audited(rows: list[dict]) -> dict:
    billing = frame("billing", "focus", {"lines": lines_frame(rows)})
    return to_dict(audit_collected(replace(make_case(accounts=()), services={}), Collected((billing,))))


def test_a_class_credits_make_negative_is_a_fit_warning_naming_the_credit():
    doc = audited([day(1, resource_id="log-group", amount="3"), day(2, resource_id="log-group", amount="1.5"),
                   day(3, resource_id="log-group", charge_category="Credit", amount="-5")])
    assert [(c["class"], c["credits"], c["net"]) for c in doc["classes"]] == [("observability", "-5.00", "-0.50")]
    assert doc["fit"] == [{
        "kind": "credits_exceed_charges", "subject": "class observability", "severity": "warning", "nearest": [],
        "message": "credits exceed the charges of class observability (part platform_overhead.observability): it "
                   "nets -0.50 after -5.00 of credits on 4.50 of charges; credit line(s): AmazonCloudWatch: "
                   "log-group -5.00 (1 line). A negative cost is no unit cost and no saving: unit costs of a "
                   "service whose cost is negative are not priced, nor options acting on a negative part"}]
    option = next(o for o in doc["options"] if o["acts_on"] == "platform_overhead.observability")
    assert (option["status"], option["rank"], option["monthly_saving"]) == ("no_saving", None, None)
    assert option["reason"] == (f"no saving in this case: the part is {option['part_monthly']} a month, negative "
                                "after credits (they exceed its charges: see fit): no saving is priced on a "
                                "negative amount")
    assert doc["total"] == "-0.50"  # conservation: the credit is netted, not dropped


def test_a_credit_within_its_charges_warns_of_nothing():
    doc = audited([day(1, resource_id="log-group", amount="3"),
                   day(2, resource_id="log-group", charge_category="Credit", amount="-1")])
    assert doc["fit"] == []
