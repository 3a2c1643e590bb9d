"""Invoice lines and the FOCUS CSV writer each provider's dialect shares.

A :class:`Line` holds what the truth needs (its class, its cost, the GPU nodes it bills, the hours
it covers) beside the FOCUS columns the provider writes. A charge is on-demand usage: billed =
effective = list = contracted = quantity x unit price, exactly (no rounding anywhere). A case with
adjustments (adjustments.py) adds credit and tax lines: billed = effective = list = contracted = their
amount, as FOCUS has it where a line has no unit price (ListCost, ContractedCost): a credit at its
BilledCost, a tax at its rate of the list and contracted cost of what it taxes (here its billed cost).
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Callable

from benchmarks.cloudgen.world import START

MONEY_COLUMNS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")
#: the columns of who is billed, by whom and where: what a line the provider adds (a tax line, a
#: commitment's fee) shares with the usage it belongs to
ACCOUNT_COLUMNS = frozenset({
    "BillingAccountId", "BillingAccountName", "BillingAccountType", "BillingCurrency", "PricingCurrency",
    "InvoiceIssuerName", "ProviderName", "PublisherName", "RegionId", "RegionName", "SubAccountId",
    "SubAccountName", "SubAccountType", "InvoiceId"})


@dataclass
class Line:
    """One invoice line."""

    cls: str                      # truth class (METHOD section 2), or "outside" for lines out of scope
    start_h: int                  # hours after the window start
    end_h: int
    quantity: Decimal
    unit_price: Decimal
    columns: dict[str, object]    # the provider's other FOCUS / x_ columns
    #: node indices of the GPU machines this line bills (gpu_compute): its cost is spread evenly over
    #: them and over its hours (a scale set's line covers several nodes, a daily line 24 hours)
    nodes: tuple[int, ...] = ()
    #: "charge" (usage, quantity x unit price), "credit" or "tax" (amount only)
    kind: str = "charge"
    amount: Decimal | None = None
    #: a credit: the line it discounts (same resource and hour), by identity; None: its account's usage
    applies_to: Line | None = None
    #: a tax line: the ServiceName of the charges it taxes ("" for its whole account)
    taxes: str = ""
    #: commitment-covered usage and unused commitments (commitments.py): what was invoiced on this
    #: line (BilledCost) and what it lists at (ListCost, ContractedCost), when not its cost
    billed: Decimal | None = None
    listed: Decimal | None = None
    #: "focus" or "native": a line only that format writes (a CUR's Savings Plan negation; FOCUS's
    #: unused-commitment row, which a CUR reader derives from the plan's fee line)
    only: str = ""
    #: a Savings Plan's covered usage or fee: the plan's ARN, effective rate, commitment and use
    plan: dict | None = None

    @property
    def cost(self) -> Decimal:
        return self.amount if self.amount is not None else self.quantity * self.unit_price

    def start(self) -> datetime:
        return START + timedelta(hours=self.start_h)

    def end(self) -> datetime:
        return START + timedelta(hours=self.end_h)


def decimal_text(value: Decimal) -> str:
    """A decimal without exponent or trailing zeros beyond what it holds."""
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


def tags(**kv: str) -> str:
    return json.dumps(dict(sorted(kv.items())), separators=(",", ":"))


def write_csv(lines: list[Line], columns: list[str], stamp: Callable[[datetime], str],
              period_columns: dict[str, str], null: str = "") -> bytes:
    """The FOCUS CSV: header, then one record per line (money as exact decimals, RFC 4180 quoting)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(columns)
    for line in lines:
        if line.only == "native":
            continue
        cost = decimal_text(line.cost)
        values = dict(line.columns)
        values.setdefault("ConsumedQuantity", line.quantity)
        values.update({c: cost for c in MONEY_COLUMNS})
        values.update({
            "ChargePeriodStart": stamp(line.start()), "ChargePeriodEnd": stamp(line.end()),
            "PricingQuantity": decimal_text(line.quantity), "ListUnitPrice": decimal_text(line.unit_price),
            "ContractedUnitPrice": decimal_text(line.unit_price),
        })
        if line.billed is not None:
            values["BilledCost"] = decimal_text(line.billed)
        if line.listed is not None:
            values["ListCost"] = values["ContractedCost"] = decimal_text(line.listed)
        if line.kind in ("credit", "tax", "sp_fee", "cud_fee"):  # money only, no quantity or unit price
            values.update({"PricingQuantity": None, "ListUnitPrice": None, "ContractedUnitPrice": None,
                           "ConsumedQuantity": None, "PricingUnit": None, "ConsumedUnit": None})
        if line.kind in ("sp_fee", "cud_fee"):  # a commitment's fee lists no usage
            values.update({"ListCost": "0", "ContractedCost": "0"})
        for column, source in period_columns.items():
            values[column] = stamp(START if source == "start" else START + timedelta(days=30))
        row = []
        for column in columns:
            value = values.get(column)
            row.append(null if value is None else (decimal_text(value) if isinstance(value, Decimal) else str(value)))
        writer.writerow(row)
    return buf.getvalue().encode()


#: FOCUS 1.2 columns (the Cost and Usage dataset), as Microsoft's FocusCost 1.2 metadata lists them
FOCUS_12 = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingAccountType", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "CapacityReservationId", "CapacityReservationStatus",
    "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd",
    "ChargePeriodStart", "CommitmentDiscountCategory", "CommitmentDiscountId", "CommitmentDiscountName",
    "CommitmentDiscountQuantity", "CommitmentDiscountStatus", "CommitmentDiscountType",
    "CommitmentDiscountUnit", "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice",
    "EffectiveCost", "InvoiceId", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory",
    "PricingCurrency", "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "RegionId",
    "RegionName", "ResourceId", "ResourceName", "ResourceType", "ServiceCategory", "ServiceName",
    "ServiceSubcategory", "SkuId", "SkuMeter", "SkuPriceDetails", "SkuPriceId", "SubAccountId",
    "SubAccountName", "SubAccountType", "Tags",
]
#: FOCUS 1.0 columns (the columns a 1.0 export such as GCP's carries)
FOCUS_10 = [c for c in FOCUS_12 if c not in (
    "BillingAccountType", "CapacityReservationId", "CapacityReservationStatus", "CommitmentDiscountQuantity",
    "CommitmentDiscountUnit", "InvoiceId", "PricingCurrency", "ServiceSubcategory", "SkuMeter",
    "SkuPriceDetails", "SubAccountType")] + ["AvailabilityZone"]
