"""Which charges a credit or a tax line is spread over (METHOD §2): the narrowest set it names.

A credit naming a resource rides on the hours it discounts (a GCP export row's credits, a CUR
discount line: same resource, same charge period), so it is netted into those hours' charges, not
smeared over the resource's month (each hour's GPU time splits differently between the buckets);
a credit whose period holds none of the resource's charges goes to the whole resource. Tax and
credits share one rule: a line naming no resource goes to the charges of its account and the service
it names (CUR and AWS FOCUS tax and credit lines name the service; a GCP row's credit its row's SKU
and hour too), else to the whole account.
"""
from __future__ import annotations

from decimal import Decimal

import pandas as pd

from audit.adjust import spread
from tests.builders import line, lines_frame

H = pd.Timedelta(hours=1)
T0 = pd.Timestamp("2026-09-01T00:00:00Z")


def at(row: int, hour: int, hours: int = 1, **over) -> dict:
    return line(row, start=T0 + hour * H, end=T0 + (hour + hours) * H, **over)


def nets(rows: list[dict]) -> dict[str, tuple[Decimal, Decimal, Decimal]]:
    charges, leftovers = spread(lines_frame(rows), "effective")
    assert not leftovers
    return {lid: (c, t, n) for lid, c, t, n in zip(charges["line_id"], charges["credits"], charges["tax"], charges["net"])}


def money(text: str) -> dict:
    return {"billed_cost": Decimal(text), "effective_cost": Decimal(text)}


def test_a_credit_on_one_hour_of_a_resource_is_netted_into_that_hour():
    rows = [at(1, 0, resource_id="i-1", **money("10")), at(2, 1, resource_id="i-1", **money("30")),
            at(3, 1, resource_id="i-1", charge_category="Credit", **money("-3"))]
    got = nets(rows)
    assert got["inline.csv:1"][0] == 0 and got["inline.csv:2"][0] == Decimal(-3)
    assert got["inline.csv:2"][2] == Decimal(27)


def test_a_daily_credit_spreads_over_the_resource_s_hours_in_its_day():
    rows = [at(1, 0, resource_id="i-1", **money("10")), at(2, 5, resource_id="i-1", **money("30")),
            at(3, 30, resource_id="i-1", **money("60")),  # the next day
            at(4, 0, 24, resource_id="i-1", charge_category="Credit", **money("-4"))]
    got = nets(rows)
    assert [got[f"inline.csv:{r}"][0] for r in (1, 2, 3)] == [Decimal(-1), Decimal(-3), Decimal(0)]


def test_a_credit_whose_period_holds_no_charge_of_its_resource_goes_to_the_whole_resource():
    rows = [at(1, 0, resource_id="i-1", **money("10")), at(2, 1, resource_id="i-1", **money("30")),
            at(3, 7, resource_id="i-1", charge_category="Credit", **money("-4"))]
    got = nets(rows)
    assert [got[f"inline.csv:{r}"][0] for r in (1, 2)] == [Decimal(-1), Decimal(-3)]


def test_an_hour_s_credit_with_no_sku_nets_into_the_charges_that_hour_holds():
    """A gateway node's -0.20 credit for 00:00-01:00 names its resource, no SKU: it goes to the
    instance line of that hour (the charges its period holds), not to the day's data transfer line
    that only overlaps the hour. Before, it went pro rata to both (-0.017 and -0.183), or, with the
    hours summed into a day, over the whole resource (-0.14 and -0.06). Tax follows the same rule."""
    box, transfer = "BoxUsage:c7i.2xlarge", "DataTransfer-Out-Bytes"
    rows = [at(1, 0, resource_id="i-9", sku_id=box, **money("0.357")),
            at(2, 1, resource_id="i-9", sku_id=box, **money("0.357")),
            at(3, 0, 24, resource_id="i-9", sku_id=transfer, **money("3.91507272")),
            at(4, 0, resource_id="i-9", charge_category="Credit", **money("-0.20")),
            at(5, 0, resource_id="i-9", charge_category="Tax", **money("0.05"))]
    got = nets(rows)
    assert [got[f"inline.csv:{r}"][:2] for r in (1, 2, 3)] == [(Decimal("-0.20"), Decimal("0.05")), (0, 0), (0, 0)]


def test_a_credit_that_holds_no_whole_charge_goes_to_those_overlapping_its_period():
    rows = [at(1, 0, 24, resource_id="i-9", **money("3")), at(2, 30, resource_id="i-9", **money("1")),
            at(3, 5, resource_id="i-9", charge_category="Credit", **money("-0.30"))]
    got = nets(rows)
    assert [got[f"inline.csv:{r}"][0] for r in (1, 2)] == [Decimal("-0.30"), 0]


def test_tax_goes_to_the_service_it_names_else_to_the_account():
    ec2, logs = "Amazon Elastic Compute Cloud", "AmazonCloudWatch"
    rows = [at(1, 0, service_name=ec2, **money("100")), at(2, 0, service_name=logs, **money("50")),
            at(3, 0, 24, service_name=ec2, charge_category="Tax", **money("8")),
            at(4, 0, 24, service_name="Tax", charge_category="Tax", **money("3"))]
    got = nets(rows)
    assert got["inline.csv:1"][1] == Decimal(8) + Decimal(2) and got["inline.csv:2"][1] == Decimal(1)
    assert got["inline.csv:1"][2] + got["inline.csv:2"][2] == Decimal(161)


def test_a_credit_nets_into_its_own_sku_not_the_resource_s_other_charges():
    """A CPU node's promotional credit (summed per day with its usage: the node bills no GPU time)
    discounts its instance-hours, not the data transfer billed on the same instance id."""
    box, transfer = "BoxUsage:c7i.2xlarge", "DataTransfer-Out-Bytes"
    rows = [at(1, 0, 24, resource_id="i-9", sku_id=box, **money("8.568")),
            at(2, 0, 24, resource_id="i-9", sku_id=transfer, **money("3.6")),
            at(3, 0, 12, resource_id="i-9", sku_id=box, charge_category="Credit", **money("-2.142"))]
    got = nets(rows)
    assert got["inline.csv:1"][0] == Decimal("-2.142") and got["inline.csv:2"][0] == 0


def test_a_credit_naming_no_resource_nets_into_its_sku_s_charges_of_its_period():
    """A GCP export row with no resource (internet egress) keeps its nested credit: the credit line
    carries the row's service, SKU and hour. Before, it went to the project's usage pro rata (-0.06 of
    -1.00 on a 3.60 egress row; the rest on the GPU, CPU and cluster-fee lines)."""
    engine, egress = "Compute Engine", "SKU-EGRESS"
    rows = [at(1, 0, resource_id="gpu-node", service_name=engine, sku_id="SKU-GPU", **money("48.02")),
            at(2, 0, resource_id="cpu-node", service_name=engine, sku_id="SKU-CORE", **money("4.66")),
            at(3, 0, 24, service_name="Networking", sku_id=egress, **money("3.60")),
            at(4, 0, 24, service_name="Networking", sku_id=egress, charge_category="Credit", **money("-1.00"))]
    got = nets(rows)
    assert [got[f"inline.csv:{r}"][0] for r in (1, 2, 3)] == [0, 0, Decimal("-1.00")]
    assert got["inline.csv:3"][2] == Decimal("2.60")


def test_a_credit_naming_a_service_stays_with_that_service_as_tax_does():
    """One scoping rule for credits and tax (resource, else service in the sub-account, else the
    account): a FOCUS credit naming EC2 and no resource discounts the EC2 charges only. Before, it was
    spread over every service of the account (CloudWatch 3.00 -> 2.85, the ALB 0.54 -> 0.51)."""
    ec2, logs, elb = "Amazon Elastic Compute Cloud", "AmazonCloudWatch", "Elastic Load Balancing"
    rows = [at(1, 0, 24, service_name=ec2, resource_id="i-1", **money("9.216")),
            at(2, 0, 24, service_name=ec2, resource_id="i-2", **money("2.04")),
            at(3, 0, 24, service_name=logs, resource_id="log-group", **money("3")),
            at(4, 0, 24, service_name=elb, resource_id="alb", **money("0.54")),
            at(5, 0, 24, service_name=ec2, charge_category="Credit", **money("-1.00")),
            at(6, 0, 24, service_name=ec2, charge_category="Tax", **money("0.80"))]
    got = nets(rows)
    assert got["inline.csv:3"][2] == Decimal(3) and got["inline.csv:4"][2] == Decimal("0.54")
    assert got["inline.csv:1"][0] == Decimal("-1.00") * Decimal("9.216") / Decimal("11.256")
    assert got["inline.csv:1"][0] + got["inline.csv:2"][0] == Decimal("-1.00")
    assert got["inline.csv:1"][1] + got["inline.csv:2"][1] == Decimal("0.80")


def test_the_report_states_the_one_scoping_rule_and_the_format_whose_timestamps_it_read():
    from dataclasses import replace

    from audit.audit_json import to_dict
    from audit.collected import Collected
    from audit.lines import SCOPE_RULE
    from audit.pipeline import audit_collected
    from tests.builders import frame, make_case

    rows = [at(1, 0, 24, service_name="AmazonCloudWatch", resource_id="log-group", **money("3")),
            at(2, 0, 24, service_name="AmazonCloudWatch", charge_category="Credit", **money("-1"))]
    billing = frame("billing", "focus", {"lines": lines_frame(rows)})
    doc = to_dict(audit_collected(replace(make_case(accounts=()), services={}), Collected((billing,))))
    assert doc["notes"][:2] == ["FOCUS billing timestamps without an offset were read as UTC, as FOCUS defines.",
                                f"Tax and credits: {SCOPE_RULE}."]
    assert doc["notes"][2] == ("Lines in no class: 1 in-scope line(s) are in no class's line count (classes[].lines + "
                               "these + outside_scope.lines = the lines read): 1 Credit: netted into the credits of "
                               "the classes whose charges they apply to (unattributed where none).")
    assert SCOPE_RULE.startswith("tax and credits are netted into the narrowest charges each line names: its "
                                 "resource")
    assert [(c["class"], c["credits"], c["net"]) for c in doc["classes"]] == [("observability", "-1.00", "2.00")]


def test_a_credit_on_a_resource_whose_charges_cost_0_has_a_classes_row():
    """A capacity block bills its instance 0 an hour, and a credit names that instance (v2_capblock on
    the contracted basis: −330.24). Nothing to spread it over, it is unattributed; before, no classes[]
    row carried it (nets 3.00 against a total of 2.00; v2_capblock 2251.82 against 1921.58). Now a row
    unapplied_adjustment holds it: the rows' gross + credits + tax = the total, column by column."""
    from dataclasses import replace

    from audit.audit_json import to_dict
    from audit.collected import Collected
    from audit.pipeline import audit_collected
    from tests.builders import frame, make_case

    rows = [at(1, 0, 24, service_name="AmazonCloudWatch", resource_id="log-group", **money("3")),
            at(2, 0, 24, service_name="AmazonCloudWatch", resource_id="i-block", **money("0")),
            at(3, 0, 24, service_name="AmazonCloudWatch", resource_id="i-block", charge_category="Credit",
               **money("-1"))]
    billing = frame("billing", "focus", {"lines": lines_frame(rows)})
    doc = to_dict(audit_collected(replace(make_case(accounts=()), services={}), Collected((billing,))))
    got = [(c["class"], c["gross"], c["credits"], c["tax"], c["net"], c["lines"]) for c in doc["classes"]]
    assert got == [("observability", "3.00", "0.00", "0.00", "3.00", 2),
                   ("unapplied_adjustment", "0.00", "-1.00", "0.00", "-1.00", 0)]
    assert doc["total"] == "2.00"
    (part,) = [p for p in doc["buckets"]["unattributed"]["parts"] if p["name"] == "unapplied_adjustment"]
    assert part["amount"] == "-1.00"


def test_lines_no_class_counts_are_counted_and_named_by_their_charge_type():
    """The Oct 2018 workshop CUR read 119,310 lines, its classes counted 119,301: the 9 RIFee purchase
    lines (EffectiveCost 0) moved onto their reservations' usage and no class or note counted them."""
    from audit.lines import unclassed_note

    ri = "arn:aws:ec2:us-east-1:1:reserved-instances/r-1"
    rows = [at(1, 0, resource_id="i-1", commitment_discount_id=ri, commitment_discount_status="Used", **money("2")),
            at(2, 0, charge_category="Purchase", commitment_discount_id=ri, billed_cost=Decimal("22.32"),
               effective_cost=Decimal(0), extra='{"x_LineItemType":"RIFee"}'),
            at(3, 0, charge_category="Purchase", commitment_discount_id=ri, billed_cost=Decimal("1"),
               effective_cost=Decimal(0), extra='{"x_LineItemType":"RIFee"}'),
            at(4, 0, resource_id="i-1", charge_category="Credit", **money("-1")),
            at(5, 0, charge_category="Tax", **money("0.1"))]
    lines = lines_frame(rows)
    charges, _ = spread(lines, "effective")
    assert list(charges["line_id"]) == ["inline.csv:1"]
    assert unclassed_note(lines, charges) == (
        "4 in-scope line(s) are in no class's line count (classes[].lines + these + outside_scope.lines = the lines "
        "read): 1 Credit: netted into the credits of the classes whose charges they apply to (unattributed where "
        "none); 2 Purchase (RIFee): commitment purchases and fees, their amount moved onto the lines of their "
        "commitment (its commitment column) or, on the list and contracted bases, no part of the basis; 1 Tax: "
        "spread into the tax of the classes whose charges they tax (unattributed where none)")
    assert unclassed_note(lines.iloc[:1], charges) is None
