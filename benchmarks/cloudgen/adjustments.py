"""A case variant with credits and tax (``generate(..., adjustments=True)``), for GKE and EKS.

Credits ride on the charges they discount, as the providers write them: on GKE a sustained use
discount on each machine part's hourly line, its rate rising through the day (0 before 08:00, 10 %
to 16:00, 20 % after), on EKS a promotional credit of half of each EC2 instance-hour until noon
(then the credit is spent). Each is a line of its own in the FOCUS file (ChargeCategory Credit, the
charge's resource, SKU and hour); the GCP export carries it in its row's ``credits``, a CUR 2.0 as a
``Credit`` line item. Tax is one line per service and account a day, at that service's rate of the
service's charges before credits (different rates per service; some services untaxed).

The truth (METHOD §2): a credit is netted into the charge it rides on; tax is spread over the
charges of its account and service pro rata to their amount before credits, which gives each
charge exactly its service's rate of its own amount.
"""
from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from benchmarks.cloudgen.focus import ACCOUNT_COLUMNS, Line
from benchmarks.cloudgen.world import HOURS

MACHINE_CLASSES = ("gpu_compute", "serving_compute")
TAX_RATES = {
    "gke": {"Compute Engine": Decimal("0.0625"), "Networking": Decimal("0.05")},
    "eks": {"Amazon Elastic Compute Cloud": Decimal("0.08875"), "AmazonCloudWatch": Decimal("0.04"),
            "Elastic Load Balancing": Decimal("0.08875")},
}


def sud_rate(line: Line) -> Decimal:
    return Decimal(line.start_h // 8) / 10


def promo_rate(line: Line) -> Decimal:
    return Decimal("0.5") if line.start_h < 12 and line.columns.get("x_UsageType", "").startswith("BoxUsage:") \
        else Decimal(0)


CREDITS = {  # cloud -> (rate of a machine line, its FOCUS ChargeDescription, FOCUS x_ credit type)
    "gke": (sud_rate, "Sustained usage discount", "SUSTAINED_USAGE_DISCOUNT"),
    "eks": (promo_rate, "AWS Activate Founders credit", "Credit"),
}


def credit_lines(cloud: str, lines: list[Line]) -> list[Line]:
    rate_of, description, credit_type = CREDITS[cloud]
    out = []
    for line in lines:
        if line.kind != "charge" or line.cls not in MACHINE_CLASSES + ("outside",) or not line.quantity:
            continue
        rate = rate_of(line)
        if not rate:
            continue
        columns = {**line.columns, "ChargeCategory": "Credit", "ChargeDescription": description,
                   "x_CreditType": credit_type}
        out.append(replace(line, cls="outside" if line.cls == "outside" else "credit", columns=columns,
                           kind="credit", amount=-(line.cost * rate), applies_to=line, nodes=()))
    return out


def tax_lines(cloud: str, lines: list[Line]) -> list[Line]:
    """One tax line per (account, service) with a rate: the rate of the service's charges."""
    taxed: dict[tuple[str, str], list[Line]] = {}
    for line in lines:
        if line.kind == "charge" and line.columns.get("ServiceName") in TAX_RATES[cloud]:
            taxed.setdefault((line.columns["SubAccountId"], line.columns["ServiceName"]), []).append(line)
    out = []
    for (_account, service), charged in sorted(taxed.items()):
        first = charged[0]
        amount = sum((ln.cost for ln in charged), Decimal(0)) * TAX_RATES[cloud][service]
        keep = {k: v for k, v in first.columns.items() if k in TAX_KEEP}
        columns = {**keep, "ChargeCategory": "Tax", "ChargeDescription": f"Tax for {service}",
                   "ChargeFrequency": "Recurring", "SkuId": "", "SkuPriceId": "", "x_UsageType": "",
                   "x_Operation": "", "PricingUnit": "", "ConsumedUnit": ""}
        out.append(Line("outside" if first.cls == "outside" else "tax", 0, HOURS, Decimal(0), Decimal(0), columns,
                        kind="tax", amount=amount, taxes=service))
    return out


#: the columns a tax line shares with the charges it taxes (account, provider, region, service)
TAX_KEEP = ACCOUNT_COLUMNS | {"ServiceName", "ServiceCategory", "x_ServiceCode", "PricingCategory"}


def with_adjustments(cloud: str, lines: list[Line]) -> list[Line]:
    """``lines`` and their credits and tax lines (each credit right after the charge it discounts)."""
    if cloud not in CREDITS:
        raise ValueError(f"{cloud}: no credit and tax variant (gke, eks)")
    credits = {id(c.applies_to): c for c in credit_lines(cloud, lines)}
    out: list[Line] = []
    for line in lines:
        out.append(line)
        if id(line) in credits:
            out.append(credits[id(line)])
    return out + tax_lines(cloud, lines)
