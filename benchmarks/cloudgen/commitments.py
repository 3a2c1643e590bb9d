"""A case variant with commitments (``generate(..., commitments=True)``): for AKS reservations in
an amortised export, for EKS a Compute Savings Plan, for GKE a resource-based committed use
discount on the H100s and a spend-based (Compute flexible) one on the CPU nodes (below).

One 1-year reservation of a Standard_ND96isr_H100_v5 covers the first H100 VM all day; one of four
Standard_NC24ads_A100_v4 covers the three A100 VMs and leaves one instance unused all day. Each
reservation costs 60 % of the pay-as-you-go price, amortised per hour. As the amortised exports write
it: a covered VM's line bills 0 (the reservation was invoiced when bought) and costs its amortised
share (EffectiveCost; the cost details export's Cost, PricingModel Reservation), listed at its
pay-as-you-go price; the unused instance-hours are a line of their own (FOCUS
CommitmentDiscountStatus Unused; cost details ChargeType UnusedReservation).

The truth (METHOD §1-2, effective basis): a covered GPU line costs its amortised share; the unused
reservation is platform overhead (commitment_unused), never model compute.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from decimal import Decimal

from benchmarks.cloudgen.focus import ACCOUNT_COLUMNS, Line

RATE = Decimal("0.6")
ORDERS = {  # VM size -> (instances reserved, VMs it covers by their VMName suffix: None = every VM)
    "Standard_ND96isr_H100_v5": (1, ("_0",)),
    "Standard_NC24ads_A100_v4": (4, None),
}


def _guid(text: str) -> str:
    d = hashlib.sha256(text.encode()).hexdigest()
    return f"{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:32]}"


def reservation(size: str) -> dict[str, str]:
    order, rid = _guid(f"order|{size}"), _guid(f"reservation|{size}")
    arm = f"/providers/Microsoft.Capacity/reservationOrders/{order}/reservations/{rid}"
    return {"CommitmentDiscountId": arm, "CommitmentDiscountName": f"{size.removeprefix('Standard_')}-1y",
            "CommitmentDiscountType": "Reservation", "CommitmentDiscountCategory": "Usage",
            "PricingCategory": "Committed", "_reservation_guid": rid}


def with_commitments(cloud: str, lines: list[Line]) -> list[Line]:
    if cloud == "eks":
        return with_savings_plan(lines)
    if cloud == "gke":
        return with_flexible_cud(with_cud(lines))
    if cloud != "aks":
        raise ValueError(f"{cloud}: no commitment variant (aks, eks, gke)")
    out: list[Line] = []
    covered: dict[str, int] = {}
    unused_of: dict[str, Line] = {}
    for line in lines:
        size = _details(line, "ServiceType")
        if line.kind != "charge" or line.cls != "gpu_compute" or size not in ORDERS:
            out.append(line)
            continue
        quantity, which = ORDERS[size]
        vm = _details(line, "VMName")
        if (which is not None and not vm.endswith(which)) or covered.get(size, 0) >= quantity:
            out.append(line)
            continue
        covered[size] = covered.get(size, 0) + 1
        columns = {**line.columns, **reservation(size), "CommitmentDiscountStatus": "Used"}
        out.append(replace(line, columns=columns, amount=line.cost * RATE, billed=Decimal(0), listed=line.cost))
        unused_of[size] = line
    for size, (quantity, _which) in ORDERS.items():
        left = quantity - covered.get(size, 0)
        if left > 0 and size in unused_of:
            template = unused_of[size]
            hours = Decimal(left * (template.end_h - template.start_h))
            columns = {**template.columns, **reservation(size), "CommitmentDiscountStatus": "Unused",
                       "ChargeDescription": f"Unused reservation: {template.columns['ChargeDescription']}",
                       "ResourceId": reservation(size)["CommitmentDiscountId"].lower(),
                       "ResourceName": reservation(size)["CommitmentDiscountName"], "Tags": None,
                       "SkuPriceDetails": None}
            out.append(Line("commitment_unused", template.start_h, template.end_h, hours, template.unit_price * RATE,
                            columns, (), billed=Decimal(0), listed=Decimal(0)))
    return out


def _details(line: Line, key: str) -> str:
    """A value of the line's SkuPriceDetails (Azure's AdditionalInfo): ServiceType, VMName."""
    details = line.columns.get("SkuPriceDetails")
    return json.loads(details).get(key, "") if details else ""


# ---- EKS: a Compute Savings Plan ----------------------------------------------------------------

SP_RATE = Decimal("0.7")
SP_COMMITMENT = Decimal("50")  # $ an hour
SP_NODES = (0, 2)  # the first p5.48xlarge and the g6e.12xlarge


def with_savings_plan(lines: list[Line]) -> list[Line]:
    """A 1-year Compute Savings Plan of $50 an hour covers the first p5 and the g6e at 70 % of
    on-demand (45.8731 an hour), leaving 4.1269 an hour unused. A CUR writes each covered hour
    (billed at on-demand, its effective cost beside), its negation and the plan's hourly fee (with
    its commitment and the part used); AWS's FOCUS export the covered hour (billed 0), the fee
    (a recurring purchase, effective 0) and the unused part as a row of its own."""
    arn = f"arn:aws:savingsplans::111111111111:savingsplan/{_guid('compute-sp')}"
    plan_columns = {"PricingCategory": "Committed", "CommitmentDiscountId": arn, "CommitmentDiscountType": "Savings Plan",
                    "CommitmentDiscountCategory": "Spend", "CommitmentDiscountName": "compute-sp-1yr"}
    out: list[Line] = []
    used: dict[int, Decimal] = {}
    template: Line | None = None
    for line in lines:
        if line.kind != "charge" or line.cls != "gpu_compute" or not set(line.nodes) & set(SP_NODES):
            out.append(line)
            continue
        effective = line.cost * SP_RATE
        used[line.start_h] = used.get(line.start_h, Decimal(0)) + effective
        plan = {"arn": arn, "rate": line.unit_price * SP_RATE}
        columns = {**line.columns, **plan_columns, "CommitmentDiscountStatus": "Used"}
        out.append(replace(line, columns=columns, kind="sp_covered", amount=effective, billed=Decimal(0),
                           listed=line.cost, plan=plan))
        out.append(replace(line, cls="sp_negation", columns=columns, kind="sp_negation", amount=Decimal(0),
                           billed=-line.cost, listed=Decimal(0), only="native", plan=plan, nodes=()))
        template = line
    assert template is not None
    base = {k: v for k, v in template.columns.items() if k in ACCOUNT_COLUMNS}
    for hour, spent in sorted(used.items()):
        fee = {**base, **plan_columns, "ChargeCategory": "Purchase", "ChargeFrequency": "Recurring",
               "ResourceId": arn, "ResourceType": "Savings Plan", "ServiceName": "Savings Plans for AWS Compute usage",
               "ServiceCategory": "Compute", "x_ServiceCode": "ComputeSavingsPlans", "x_UsageType": "ComputeSP:1yrNoUpfront",
               "x_Operation": "", "ChargeDescription": "1 year No Upfront Compute Savings Plan", "SkuId": "",
               "SkuPriceId": "", "PricingUnit": "", "ConsumedUnit": "", "Tags": None, "AvailabilityZone": None}
        plan = {"arn": arn, "commitment": SP_COMMITMENT, "used": spent}
        out.append(Line("sp_fee", hour, hour + 1, Decimal(1), SP_COMMITMENT, fee, kind="sp_fee", amount=Decimal(0),
                        billed=SP_COMMITMENT, listed=Decimal(0), plan=plan))
        unused = {**fee, "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based", "CommitmentDiscountStatus": "Unused",
                  "ChargeDescription": "Unused Compute Savings Plan commitment"}
        out.append(Line("commitment_unused", hour, hour + 1, Decimal(1), SP_COMMITMENT - spent, unused,
                        billed=Decimal(0), listed=Decimal(0), only="focus"))
    return out



# ---- GKE: a resource-based committed use discount -----------------------------------------------

CUD_GPUS = Decimal(10)
CUD_RATE = Decimal("0.55")
CUD_SKU = "Commitment v1: Nvidia H100 80GB GPU running in Americas for 1 Year"


def with_cud(lines: list[Line]) -> list[Line]:
    """A 1-year commitment of ten H100 GPUs in us-central1 at 55 % of on-demand covers the first
    H100 machine's eight GPUs every hour and leaves two unused. The detailed export writes the covered
    GPU hour at on-demand with a COMMITTED_USAGE_DISCOUNT credit of minus that, and the commitment's
    hourly fee (``Commitment v1: …``, ten GPU-hours, used or not) as a row of its own; a FOCUS file
    writes the covered hour billed 0 at its amortised cost, the fee as a recurring purchase
    (effective 0) and the unused GPUs as a row of their own. The truth: the covered GPU hours at the
    commitment's rate, the unused GPUs platform overhead (commitment_unused)."""
    covered = [ln for ln in lines if ln.kind == "charge" and ln.cls == "gpu_compute"
               and str(ln.columns.get("ChargeDescription", "")).startswith("Nvidia H100")]
    machine = covered[0].columns["ResourceName"]
    ids = {id(ln) for ln in covered if ln.columns["ResourceName"] == machine}
    cud = {"PricingCategory": "Committed", "CommitmentDiscountId": f"projects/{covered[0].columns['SubAccountId']}"
           "/regions/us-central1/commitments/h100-1y", "CommitmentDiscountType": "Committed Use Discount",
           "CommitmentDiscountCategory": "Usage", "CommitmentDiscountName": "h100-1y"}
    out: list[Line] = []
    for line in lines:
        if id(line) not in ids:
            out.append(line)
            continue
        rate = line.unit_price * CUD_RATE
        columns = {**line.columns, **cud, "CommitmentDiscountStatus": "Used"}
        out.append(replace(line, columns=columns, kind="cud_covered", amount=line.quantity * rate, billed=Decimal(0),
                           listed=line.cost))
        base = {k: v for k, v in line.columns.items() if k in ACCOUNT_COLUMNS or k in ("ServiceName", "ServiceCategory")}
        fee = {**base, **cud, "ChargeCategory": "Purchase", "ChargeFrequency": "Recurring", "ChargeDescription": CUD_SKU,
               "SkuId": "C0C0-1111-2222", "PricingUnit": "hour", "ConsumedUnit": "seconds",
               "ConsumedQuantity": CUD_GPUS * 3600, "ResourceId": None, "ResourceName": None, "Tags": None}
        out.append(Line("cud_fee", line.start_h, line.end_h, CUD_GPUS, rate, fee, kind="cud_fee", amount=Decimal(0),
                        billed=CUD_GPUS * rate, listed=Decimal(0)))
        unused = {**fee, "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based", "CommitmentDiscountStatus": "Unused",
                  "ChargeDescription": f"Unused: {CUD_SKU}"}
        out.append(Line("commitment_unused", line.start_h, line.end_h, CUD_GPUS - line.quantity, rate, unused,
                        billed=Decimal(0), listed=Decimal(0), only="focus"))
    return out


# ---- GKE: a spend-based (Compute flexible) committed use discount --------------------------------

FLEX_RATE = Decimal("0.72")  # a 1-year Compute flexible commitment: 28 % off on-demand
FLEX_HEADROOM = Decimal("1.25")  # committed on-demand spend over the CPU nodes' largest hour
FLEX_SKU = "Commitment - dollar based v1: GCE for 1 year"
FLEX_PREFIXES = ("N2 Instance Core", "N2 Instance Ram")


def with_flexible_cud(lines: list[Line]) -> list[Line]:
    """A 1-year Compute flexible commitment of a quarter more on-demand spend an hour than the
    inference project's CPU nodes ever use, at 72 % of on-demand, billed to that project. The
    detailed export (legacy data model) writes each covered N2 core and RAM hour at on-demand with a
    COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE credit of minus that, and the hourly fee (``Commitment -
    dollar based v1: GCE for 1 year``, priced per hundredth of a dollar committed) as a row of its
    own; a FOCUS file writes the covered hour billed 0 at 72 % of on-demand, the fee as a recurring
    purchase (effective 0) and the unused fifth as a row of its own. The truth: the CPU nodes at the
    commitment's rate (the gateway's unit cost with them), the unused part platform overhead."""
    covered = [ln for ln in lines if ln.kind == "charge" and ln.cls == "serving_compute"
               and str(ln.columns.get("ChargeDescription", "")).startswith(FLEX_PREFIXES)]
    spend: dict[int, Decimal] = {}
    for line in covered:
        assert line.end_h - line.start_h == 1, "hourly CPU lines"
        spend[line.start_h] = spend.get(line.start_h, Decimal(0)) + line.cost
    committed = (max(spend.values()) * FLEX_HEADROOM).quantize(Decimal("0.01"))
    cud = {"PricingCategory": "Committed", "CommitmentDiscountId": f"billingAccounts/{covered[0].columns['BillingAccountId']}"
           "/commitments/gce-flex-1y", "CommitmentDiscountType": "Committed Use Discount",
           "CommitmentDiscountCategory": "Spend", "CommitmentDiscountName": "gce-flex-1y"}
    ids = {id(ln) for ln in covered}
    out: list[Line] = []
    for line in lines:
        if id(line) not in ids:
            out.append(line)
            continue
        columns = {**line.columns, **cud, "CommitmentDiscountStatus": "Used"}
        out.append(replace(line, columns=columns, kind="cud_covered", amount=line.cost * FLEX_RATE, billed=Decimal(0),
                           listed=line.cost, plan={"spend": True}))
    base = {k: v for k, v in covered[0].columns.items() if k in ACCOUNT_COLUMNS or k in ("ServiceName", "ServiceCategory")}
    price = FLEX_RATE / 100  # per hundredth of a dollar of on-demand spend
    for hour, used in sorted(spend.items()):
        fee = {**base, **cud, "ChargeCategory": "Purchase", "ChargeFrequency": "Recurring", "ChargeDescription": FLEX_SKU,
               "SkuId": "F1B7-A4A5-8F0C", "PricingUnit": "hour", "ConsumedUnit": "seconds",
               "ConsumedQuantity": committed * 100 * 3600, "ResourceId": None, "ResourceName": None, "Tags": None,
               "AvailabilityZone": None}
        out.append(Line("cud_fee", hour, hour + 1, committed * 100, price, fee, kind="cud_fee", amount=Decimal(0),
                        billed=committed * FLEX_RATE, listed=Decimal(0), plan={"spend": True}))
        unused = {**fee, "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based", "CommitmentDiscountStatus": "Unused",
                  "ChargeDescription": f"Unused: {FLEX_SKU}"}
        out.append(Line("commitment_unused", hour, hour + 1, (committed - used) * 100, price, unused,
                        billed=Decimal(0), listed=Decimal(0), only="focus"))
    return out
