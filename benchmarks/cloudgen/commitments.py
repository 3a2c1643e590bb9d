"""A case variant with commitments (``generate(..., commitments=True)``), for AKS: reservations in an
amortised export.

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

from benchmarks.cloudgen.focus import Line

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
    if cloud != "aks":
        raise ValueError(f"{cloud}: no commitment variant (aks)")
    out: list[Line] = []
    covered: dict[str, int] = {}
    unused_of: dict[str, Line] = {}
    for line in lines:
        size = _size(line)
        if line.kind != "charge" or line.cls != "gpu_compute" or size not in ORDERS:
            out.append(line)
            continue
        quantity, which = ORDERS[size]
        vm = _vm_name(line)
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


def _size(line: Line) -> str:
    details = line.columns.get("SkuPriceDetails")
    return json.loads(details).get("ServiceType", "") if details else ""


def _vm_name(line: Line) -> str:
    details = line.columns.get("SkuPriceDetails")
    return json.loads(details).get("VMName", "") if details else ""
