"""An EC2 Capacity Block for ML on cloudgen's EKS day (seed 3): one p5.48xlarge ran its day in a block,
its own instance-hours billed 0 and the block's fee, 24 × 55.04 = 1320.96, paid up front.

The fee as public sources show it (audit/capacity_blocks.py): usage type
``<region>-CapacityBlockFee:<instance type>`` (grafana/cloudcost-exporter, pkg/aws/client/billing.go;
us-east-1 may go without the prefix), charged up front and unamortised; the lines of an instance that
ran in a capacity reservation name it in CUR 2.0's ``capacity_reservation_capacity_reservation_arn``
(AWS Data Exports, "Capacity reservation columns") and in FOCUS's CapacityReservationId. A ``Fee`` line
(FOCUS Purchase) whose resource is the reservation is this test's reading, not a source's.

METHOD §2: the fee is gpu_compute of the instance that ran in the block. Before, no rule named it:
the fee was ``unmatched`` (unattributed) and the block's 192 GPU-hours were priced at 0.
"""
from __future__ import annotations

import json
from decimal import Decimal

import pytest

from audit.classify import classify
from audit.lines import basis_amount
from benchmarks.cloudgen_check import audit_document
from tests.audit.test_capacity_reservations import hours, part
from tests.builders import generated, line, lines_frame, rewritten_billing

RESERVATION = "cr-0a1b2c3d4e5f60718"
ARN = f"arn:aws:ec2:us-east-1:111111111111:capacity-reservation/{RESERVATION}"
FEE = Decimal("1320.96")  # 24 h of the p5.48xlarge at its on-demand 55.04: the buckets stay as they were
INSTANCE = "i-0f496c526d88e2588"


def in_block(start: str, ran: int) -> bool:
    """Whether an instance hour starting at ``start`` (an ISO time on the case's day) ran in the
    block, whose first ``ran`` hours the instance ran in (it ran the rest of the day on demand)."""
    return int(start[11:13]) < ran


def cur_block(rows: list[dict], tied: bool, ran: int = 24) -> list[dict]:
    """The CUR 2.0 export with the instance's first ``ran`` hours in a 24-hour block: its lines billed 0
    (naming the reservation where ``tied``: the export includes capacity reservation data) and the fee."""
    out = []
    for row in rows:
        row = {**row, "capacity_reservation_capacity_reservation_arn": ""}
        if row["line_item_resource_id"] == INSTANCE and in_block(row["line_item_usage_start_date"], ran):
            row.update({c: "0" for c in ("line_item_unblended_cost", "line_item_unblended_rate",
                                         "line_item_blended_cost", "line_item_blended_rate")})
            row["capacity_reservation_capacity_reservation_arn"] = ARN if tied else ""
        out.append(row)
    template = next(r for r in rows if r["line_item_resource_id"] == INSTANCE)
    start, end = hours(0)
    out.append({**template, "capacity_reservation_capacity_reservation_arn": "",
                "line_item_line_item_type": "Fee", "line_item_resource_id": RESERVATION,
                "line_item_usage_type": "CapacityBlockFee:p5.48xlarge",
                "line_item_operation": "RunInstances:CapacityBlock",
                "line_item_line_item_description": "EC2 Capacity Block p5.48xlarge upfront fee",
                "line_item_unblended_cost": str(FEE), "line_item_blended_cost": str(FEE),
                "line_item_unblended_rate": "55.04", "line_item_usage_amount": "24",
                "pricing_public_on_demand_cost": "0", "identity_line_item_id": "capblock0001",
                "line_item_usage_start_date": f"{start}Z", "line_item_usage_end_date": f"{end}Z",
                "identity_time_interval": f"{start}Z/{end}Z", "resource_tags": "{}"})
    return out


def focus_block(rows: list[dict], ran: int = 24) -> list[dict]:
    """AWS's FOCUS file with the same block: the instance's rows of its first ``ran`` hours billed 0,
    naming the reservation."""
    zero = ("BilledCost", "EffectiveCost", "ContractedCost", "ContractedUnitPrice")
    out = [{**r, **{c: "0" for c in zero}, "CapacityReservationId": ARN, "CapacityReservationStatus": "Used"}
           if r["ResourceId"] == INSTANCE and in_block(r["ChargePeriodStart"], ran) else r for r in rows]
    template = next(r for r in rows if r["ResourceId"] == INSTANCE)
    start, end = hours(0)
    out.append({**template, "ChargeCategory": "Purchase", "ChargeFrequency": "One-Time", "ResourceId": RESERVATION,
                "CapacityReservationId": ARN, "CapacityReservationStatus": "", "ResourceType": "",
                "x_UsageType": "USE1-CapacityBlock:p5.48xlarge", "x_Operation": "RunInstances:CapacityBlock",
                "ChargeDescription": "EC2 Capacity Block p5.48xlarge upfront fee", "PricingCategory": "",
                "BilledCost": str(FEE), "EffectiveCost": str(FEE), "ContractedCost": str(FEE), "ListCost": "0",
                "ContractedUnitPrice": "55.04", "ListUnitPrice": "", "PricingQuantity": "24",
                "ConsumedQuantity": "", "ConsumedUnit": "", "Tags": "",
                "ChargePeriodStart": f"{start}.000Z", "ChargePeriodEnd": f"{end}.000Z"})
    return out


@pytest.fixture(scope="module", params=["focus", "native"])
def eks(request, tmp_path_factory):
    """cloudgen's EKS day in AWS's FOCUS file or its CUR 2.0 export, and its audit."""
    folder = generated(tmp_path_factory, f"eks-{request.param}", "eks", 3, billing=request.param)
    return folder, request.param, audit_document(folder)


def test_a_capacity_block_s_fee_prices_the_instance_hours_that_ran_in_it(eks, tmp_path):
    """The fee moves onto the instance lines that name its reservation: the block's instance-hours
    cost what the block cost, and the audit is the one of the same day billed on demand."""
    folder, kind, plain = eks
    change = focus_block if kind == "focus" else (lambda rows: cur_block(rows, tied=True))
    document = audit_document(rewritten_billing(folder, tmp_path / "case", change))
    assert document["total"] == plain["total"]
    assert document["buckets"] == plain["buckets"]
    assert document["coverage"]["paid_gpu_hours"] == plain["coverage"]["paid_gpu_hours"] == "480.00"
    assert not [f for f in document["fit"] if RESERVATION in str(f)], document["fit"]
    # bottom-up, the block's instance-hours are priced at the fee spread onto them (their top-down),
    # not at their unit price, 0 (before: gap 0.47, does not reconcile); the price driver says so
    got, want = document["reconciliation"], plain["reconciliation"]
    assert (got["gap"], got["verdict"], got["bottom_up"]) == (want["gap"], want["verdict"], want["bottom_up"])
    price = next(d for d in got["drivers"] if d["name"] == "price" and d["subject"] == "gpu_compute")
    # the readers sum the instance's run of 24 hourly lines into one
    assert price["detail"] == ("cost 2893.75 vs quantity × unit price 2893.75; 1 line(s) of no commitment "
                               "priced at the purchase spread onto them ÷ quantity (an EC2 Capacity Block's "
                               "instance-hours, billed 0: the block's fee)")


def test_a_capacity_block_s_hours_no_instance_ran_are_unused_reserved_capacity(eks, tmp_path):
    """A 24-hour block the instance ran 10 hours in (it ran the day's other 14 on demand). By hand:
    the fee 1320.96 (24 × 55.04) × 10 ÷ 24 = 550.40 moves onto the instance's 10 hours, which cost what
    they cost on demand (the day's GPU figures are the plain day's); 1320.96 × 14 ÷ 24 = 770.56 is
    reserved capacity paid but not run: platform overhead (commitment_unused), named by its
    reservation and hours, never model compute (METHOD §2, §4). The total is the plain day's + 1320.96
    − the 10 on-demand hours (550.40) = + 770.56. Before: the whole fee went onto the 10 hours, the
    GPU buckets 770.56 higher and no overhead row."""
    folder, kind, plain = eks
    change = (lambda rows: focus_block(rows, ran=10)) if kind == "focus" else (
        lambda rows: cur_block(rows, tied=True, ran=10))
    document = audit_document(rewritten_billing(folder, tmp_path / "case", change))
    idle = Decimal("770.56")
    assert Decimal(document["total"]) == Decimal(plain["total"]) + idle
    assert part(document, "platform_overhead", "commitment_unused") == part(
        plain, "platform_overhead", "commitment_unused") + idle
    for bucket in ("model_compute", "serving_path", "unattributed"):
        assert document["buckets"][bucket]["amount"] == plain["buckets"][bucket]["amount"], bucket
    assert document["coverage"]["paid_gpu_hours"] == plain["coverage"]["paid_gpu_hours"] == "480.00"
    row = next(p for p in document["buckets"]["platform_overhead"]["parts"] if p["name"] == "commitment_unused")
    assert row["reason"] == (f"an EC2 Capacity Block paid but not run (unused reserved capacity): reservation "
                             f"{RESERVATION}, 24 instance-hours reserved (its fee's PricingQuantity), 10 run in "
                             "it (its instances' lines), 14 idle")
    # its 24 hours from the instance's first (00:00) end with the window: the block is all in it
    assert block_notes(document) == []
    assert document["reconciliation"]["verdict"] == plain["reconciliation"]["verdict"]


def test_a_capacity_block_no_line_ties_to_an_instance_is_gpu_compute_named(eks, tmp_path):
    """A CUR export without capacity reservation data: nothing ties the fee to the instance. It is
    still GPU compute (never unmatched), its money unattributed as a GPU no telemetry node names,
    the reservation named with the nodes that carry the billed GPU model."""
    folder, kind, plain = eks
    if kind == "focus":
        pytest.skip("AWS's FOCUS file names the reservation on the instance's rows")
    document = audit_document(rewritten_billing(folder, tmp_path / "case", lambda rows: cur_block(rows, tied=False)))
    assert document["total"] == plain["total"]
    assert part(document, "unattributed", "unmatched_line") == part(plain, "unattributed", "unmatched_line") == 0
    assert part(document, "unattributed", "gpu_not_in_telemetry") == part(plain, "unattributed",
                                                                          "gpu_not_in_telemetry") + FEE
    named = next(f for f in document["fit"] if f["kind"] == "gpu_resource_not_in_telemetry")
    assert named["subject"] == f"billed GPU resource {RESERVATION}"
    assert "(p5.48xlarge)" in named["message"] and "H100 80GB" in named["message"]


@pytest.mark.parametrize("usage", ["USE2-CapacityBlockFee:p5.48xlarge", "CapacityBlockFee:p5.48xlarge",
                                   "USE1-CapacityBlock:p5.48xlarge"])
def test_a_capacity_block_s_fee_is_gpu_compute_with_its_instance_type_s_gpus(usage):
    fee = line(1, charge_category="Purchase", charge_frequency="One-Time", pricing_unit="Hrs",
               charge_description="EC2 Capacity Block upfront fee", resource_id=RESERVATION,
               pricing_quantity=Decimal(24), extra=json.dumps({"x_UsageType": usage}))
    classified = classify(lines_frame([fee]), (), set(), set()).iloc[0]
    assert classified["resource_class"] == "gpu_compute"
    assert classified["rule_reason"].startswith("shipped rule: an EC2 Capacity Block for ML")
    assert (classified["instance_type"], classified["gpus_per_instance"], classified["gpu_model"]) == (
        "p5.48xlarge", 8, "H100 80GB")


PERIOD_KEYS = ("line_item_usage_start_date", "line_item_usage_end_date", "identity_time_interval",
               "ChargePeriodStart", "ChargePeriodEnd")


def next_day(row: dict) -> dict:
    """``row`` one day later (its period and, for a CUR line, its line item id)."""
    moved = {k: row[k].replace("2026-09-02", "2026-09-03").replace("2026-09-01", "2026-09-02")
             for k in PERIOD_KEYS if k in row}
    if "identity_line_item_id" in row:
        moved["identity_line_item_id"] = f"{row['identity_line_item_id']}-next"
    return {**row, **moved}


def block_beyond(kind: str, after: bool = True):
    """The block reserves 48 instance-hours (fee 48 × 55.04 = 2641.92): the instance ran its 24 of the
    window in it and, where ``after``, 24 the next day, outside the window (its lines there name the
    reservation; without them the file ends with the window)."""
    def change(rows: list[dict]) -> list[dict]:
        out = focus_block(rows) if kind == "focus" else cur_block(rows, tied=True)
        names = ("PricingQuantity", "BilledCost", "EffectiveCost", "ContractedCost") if kind == "focus" else (
            "line_item_usage_amount", "line_item_unblended_cost", "line_item_blended_cost")
        out[-1].update(dict(zip(names, ("48", *[str(FEE * 2)] * (len(names) - 1)))))
        key = "CapacityReservationId" if kind == "focus" else "capacity_reservation_capacity_reservation_arn"
        return out + [next_day(r) for r in out[:-1] if after and r.get(key) == ARN]
    return change


def test_a_capacity_block_s_hours_run_after_the_window_are_not_idle(eks, tmp_path):
    """By hand: 48 instance-hours reserved, 24 run in the window, 24 after it, none idle. The fee's
    share for the hours after the window, 2641.92 × 24 ÷ 48 = 1320.96, is for time outside the window
    and clipped off (METHOD §1), as a straddling line's time outside is; the 1320.96 left moves onto the
    24 hours in the window: the audit is the plain day's, with no commitment_unused row. Before: 1320.96
    "48 reserved, 24 run in it, 24 idle" (the lines after the window unread), the total 1320.96 high."""
    folder, kind, plain = eks
    document = audit_document(rewritten_billing(folder, tmp_path / "case", block_beyond(kind)))
    assert document["total"] == plain["total"]
    assert document["buckets"] == plain["buckets"]
    assert part(document, "platform_overhead", "commitment_unused") == 0
    if kind == "native":  # the bridge (the FOCUS file's ContractedCost of the block's rows is the file's own)
        assert_block_bridge(document, plain, FEE)
    notes = block_notes(document)
    first = "inference-prod:90" if kind == "native" else "focus_aws.csv:366"
    assert notes == [f"EC2 Capacity Block {RESERVATION}: 24 of its 48 reserved instance-hours ran outside the "
                     f"window (the lines naming it there, first {first}); 1,320.96 USD of its fee is for them "
                     "and left out (clipped pro rata by hours, as billing is clipped to the window)"]


def block_notes(document: dict) -> list[str]:
    """The sources' notes that name the block's reservation."""
    return [n["note"] for s in document["sources"] for n in s.get("notes", ()) if RESERVATION in n["note"]]


def test_a_capacity_block_s_hours_after_a_window_the_file_ends_with_are_not_idle(eks, tmp_path):
    """The same 48-hour block in a file that ends with the window: its 24 hours after it are not in
    the data. By hand: the fee for them, 2641.92 × (48 − 24) ÷ 48 = 1320.96, is left out as for time
    after the window, named, never idle; the audit is the plain day's. Before: 1320.96 commitment_unused
    "24 idle"."""
    folder, kind, plain = eks
    document = audit_document(rewritten_billing(folder, tmp_path / "case", block_beyond(kind, after=False)))
    assert document["total"] == plain["total"]
    assert document["buckets"] == plain["buckets"]
    assert part(document, "platform_overhead", "commitment_unused") == 0
    assert block_notes(document) == [
        f"EC2 Capacity Block {RESERVATION}: 24 of its 48 reserved instance-hours ran in the window and the file "
        "holds no line after its end (2026-09-02 00:00 UTC), so whether the other 24 ran after it is not in the "
        "data; 1,320.96 USD of its fee is for them and left out as for time after the window (not read as idle)"]


def assert_block_bridge(document: dict, plain: dict, fee: Decimal) -> None:
    """The bridge of a CUR whose block ran the instance's 24 hours of the window, its fee in the window
    ``fee``: the fee is a purchase of reserved capacity (listed at its cost, FOCUS ListCost, and out of
    the list and contracted totals), the block's hours covered usage contracted at their public on-demand
    price (1320.96) and billed 0: list, negotiated discounts and contracted are the plain day's;
    covered usage −1320.96 and purchases +fee. Before: the fee listed 0 and counted in the contracted
    total, negotiated discounts +1320.95 (the verifier's eks 10104)."""
    got, want = document["bridge"], plain["bridge"]
    for step in ("list", "negotiated_discounts", "contracted", "billed", "effective"):
        assert got[step] == want[step], step
    assert Decimal(got["covered_usage"]) == Decimal(want["covered_usage"]) - FEE
    assert Decimal(got["commitment_purchases"]) == Decimal(want["commitment_purchases"]) + fee


def test_a_capacity_block_s_fee_counts_0_before_commitments():
    """On the list and contracted bases the block's fee counts 0, as a commitment purchase does: its
    instance-hours carry their own public on-demand price there (the CUR reader contracts them at it),
    so counting the fee too would count the block twice. On the billed basis it counts its cost."""
    fee = line(1, charge_category="Purchase", charge_frequency="One-Time", resource_id=RESERVATION,
               billed_cost=FEE, effective_cost=FEE, list_cost=FEE, contracted_cost=FEE, pricing_quantity=Decimal(24),
               extra=json.dumps({"x_UsageType": "CapacityBlockFee:p5.48xlarge", "CapacityReservationId": ARN}))
    ran = line(2, resource_id=INSTANCE, billed_cost=Decimal(0), effective_cost=Decimal(0), list_cost=FEE,
               contracted_cost=FEE, pricing_quantity=Decimal(24), extra=json.dumps({"CapacityReservationId": ARN}))
    frame = lines_frame([fee, ran])
    assert basis_amount(frame, "contracted").tolist() == basis_amount(frame, "list").tolist() == [0, FEE]
    assert basis_amount(frame, "billed").tolist() == [FEE, 0]
