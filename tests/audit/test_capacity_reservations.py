"""Reserved capacity paid but not used: an On-Demand Capacity Reservation for a p5.48xlarge that no
instance ran in, on cloudgen's EKS day (seed 3), in AWS's FOCUS file (CapacityReservationStatus
``Unused``) and in the CUR 2.0 export (usage type ``USE1-UnusedBox:p5.48xlarge``, the reservation's ARN
as the resource).

METHOD §2: unused reserved capacity is commitment_unused, platform overhead. Before the shipped rules
named it, the line was instance-hours of a GPU instance type whose resource (the reservation) no
telemetry node carries: GPU not in telemetry, unattributed, with a warning that a ``[nodes]`` table
could join it.
"""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks.cloudgen_check import audit_document
from tests.builders import generated, rewritten_billing

ARN = "arn:aws:ec2:us-east-1:111111111111:capacity-reservation/cr-0a1b2c3d4e5f60718"
HOURLY = Decimal("55.04")
HOURS = 24


def part(document: dict, bucket: str, name: str) -> Decimal:
    return sum((Decimal(p["amount"]) for p in document["buckets"][bucket]["parts"] if p["name"] == name),
               Decimal(0))


def hours(hour: int) -> tuple[str, str]:
    return f"2026-09-01T{hour:02d}:00:00", f"2026-09-01T{hour + 1:02d}:00:00" if hour < 23 else "2026-09-02T00:00:00"


def unused_focus_rows(template: dict) -> list[dict]:
    """A day of one unused p5.48xlarge reservation, as AWS's FOCUS export writes it."""
    rows = []
    for hour in range(HOURS):
        start, end = hours(hour)
        rows.append({**template, "CapacityReservationId": ARN, "CapacityReservationStatus": "Unused",
                     "ResourceId": ARN, "ResourceName": "", "Tags": "", "x_UsageType": "USE1-UnusedBox:p5.48xlarge",
                     "ChargeDescription": "$55.04 per Unused Reservation Linux p5.48xlarge Instance Hour",
                     "ChargePeriodStart": f"{start}.000Z", "ChargePeriodEnd": f"{end}.000Z"})
    return rows


def unused_cur_rows(template: dict) -> list[dict]:
    """The same day in the CUR 2.0 export: no capacity reservation columns, the usage type says it."""
    rows = []
    for hour in range(HOURS):
        start, end = hours(hour)
        rows.append({**template, "line_item_resource_id": ARN, "line_item_usage_type": "USE1-UnusedBox:p5.48xlarge",
                     "line_item_line_item_description": "$55.04 per Unused Reservation Linux p5.48xlarge Instance Hour",
                     "identity_line_item_id": f"odcr{hour:04d}", "identity_time_interval": f"{start}Z/{end}Z",
                     "line_item_usage_start_date": f"{start}Z", "line_item_usage_end_date": f"{end}Z",
                     "resource_tags": "{}"})
    return rows


def used_focus_rows(template: dict) -> list[dict]:
    """The reservation's record of use that an instance ran in it all day: no cost of its own."""
    rows = unused_focus_rows(template)
    zero = {c: "0" for c in ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost") if c in template}
    return [{**r, **zero, "CapacityReservationStatus": "Used", "x_UsageType": "USE1-Reservation:p5.48xlarge",
             "ChargeDescription": "Linux/UNIX (Amazon VPC), p5.48xlarge Reservation"} for r in rows]


def used_cur_rows(template: dict) -> list[dict]:
    rows = unused_cur_rows(template)
    zero = {c: "0" for c in template if c.endswith(("_cost", "_rate")) and c.startswith(("line_item", "pricing_public"))}
    return [{**r, **zero, "line_item_usage_type": "USE1-Reservation:p5.48xlarge",
             "identity_line_item_id": r["identity_line_item_id"].replace("odcr", "used"),
             "line_item_line_item_description": "Linux/UNIX (Amazon VPC), p5.48xlarge Reservation"} for r in rows]


def with_rows(folder: Path, target: Path, make) -> Path:
    """A copy of the case with the reservation's rows appended to its billing file (``make`` builds
    them from the file's first p5.48xlarge line)."""
    def appended(rows: list[dict]) -> list[dict]:
        template = next(r for r in rows if "p5.48xlarge" in r.get("x_UsageType", r.get("line_item_usage_type", "")))
        return rows + make(template)
    return rewritten_billing(folder, target, appended)


@pytest.fixture(scope="module", params=["focus", "native"])
def eks(request, tmp_path_factory):
    """cloudgen's EKS day in AWS's FOCUS file or its CUR 2.0 export, and its audit."""
    folder = generated(tmp_path_factory, f"eks-{request.param}", "eks", 3, billing=request.param)
    makers = (unused_focus_rows, used_focus_rows) if request.param == "focus" else (unused_cur_rows, used_cur_rows)
    return folder, makers, audit_document(folder)


def test_an_unused_capacity_reservation_is_platform_overhead(eks, tmp_path):
    folder, (make, _), plain = eks
    document = audit_document(with_rows(folder, tmp_path / "case", make))
    unused = HOURLY * HOURS
    assert Decimal(document["total"]) == Decimal(plain["total"]) + unused
    assert part(document, "platform_overhead", "commitment_unused") == unused
    assert part(plain, "platform_overhead", "commitment_unused") == 0
    for bucket in ("model_compute", "serving_path", "unattributed"):
        assert document["buckets"][bucket]["amount"] == plain["buckets"][bucket]["amount"], bucket
    assert document["coverage"]["paid_gpu_hours"] == plain["coverage"]["paid_gpu_hours"]
    assert not [f for f in document["fit"] if f["kind"] == "gpu_resource_not_in_telemetry"], document["fit"]


def test_an_unused_capacity_reservation_is_a_saving_now_not_at_a_term_s_end(eks, tmp_path):
    """A capacity reservation is released when it is cancelled: the option on the unused part prices
    it as available now, where a commitment's unused part waits for the end of its term."""
    folder, (make, _), _ = eks
    document = audit_document(with_rows(folder, tmp_path / "case", make))
    option = next(o for o in document["options"] if o["id"] == "right_size_commitment")
    assert option["status"] == "priced", option["reason"]
    assert option["deferred"]["saving_now"] == option["monthly_saving"]
    assert Decimal(option["monthly_saving"]["expected"]) > 0 and option["payback_months"]["expected"] is not None


def test_a_reservation_s_record_of_use_adds_no_gpu_hours_and_no_machine(eks, tmp_path):
    """AWS writes a zero-cost line (usage type Reservation:…, the reservation as its resource) for each
    hour an instance runs in reserved capacity; the instance-hours are billed on the instance's own
    lines. Read as GPU instance-hours, it added 192 paid GPU-hours of a machine no telemetry knew."""
    folder, (_, make), plain = eks
    document = audit_document(with_rows(folder, tmp_path / "case", make))
    assert document["coverage"]["paid_gpu_hours"] == plain["coverage"]["paid_gpu_hours"] == "480.00"
    assert document["total"] == plain["total"]
    assert document["buckets"] == {**plain["buckets"], "unattributed": document["buckets"]["unattributed"]}
    assert part(document, "unattributed", "unmatched_line") == part(plain, "unattributed", "unmatched_line")
    assert not [f for f in document["fit"] if f["kind"] == "gpu_resource_not_in_telemetry"], document["fit"]
