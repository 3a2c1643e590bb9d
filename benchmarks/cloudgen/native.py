"""The same invoice lines in each provider's own export format, beside its FOCUS CSV.

A case written with ``billing = "native"`` carries the lines the FOCUS writer would have written,
each with the same cost, in the format a team that never turned FOCUS on holds:

* GKE: the GCP Cloud Billing **detailed usage cost export**, as ``bq extract`` writes it to
  newline-delimited JSON (nested records, money and usage as JSON numbers, because the export's
  ``cost`` is FLOAT64; timestamps ``YYYY-MM-DD HH:MM:SS UTC``; ``resource.name`` the instance name,
  ``resource.global_name`` its ``//compute.googleapis.com/...`` URL; the ``machine_spec`` and
  ``cores`` system labels on machine rows; ``invoice.month`` in Pacific time).
* EKS: an AWS **CUR 2.0** data export, CSV gzip (snake_case columns, ``resource_tags`` as a JSON
  object of ``user_`` / ``aws_`` keys, ``product`` as JSON).
* AKS: an Azure **cost details** export, EA AmortizedCost, CSV (the column set of Microsoft's EA
  sample; dates ``MM/DD/YYYY``; tags as JSON members without braces; a scale set's VM meter one row
  per instance and day, ``VMName`` in AdditionalInfo). With no commitment in the case, amortised =
  actual.

Only the format changes: the truth of the case is the same, line for line.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal

from benchmarks.cloudgen.focus import Line, decimal_text

PACIFIC = timedelta(hours=-7)  # September: PDT


def _json_number(value) -> float | int:
    """A decimal as the JSON number a FLOAT64 column is exported as (shortest round-trip)."""
    number = float(value)
    return int(number) if number == int(number) and abs(number) < 2 ** 53 else number


def _bq_time(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class GcpIds:
    """What the detailed export carries that GCP's FOCUS columns do not."""

    service_ids: dict[str, str]       # service description -> service id
    project_numbers: dict[str, str]   # project id -> project number
    machine_of: dict[str, str]        # instance name -> machine type
    vcpus_of: dict[str, int]          # machine type -> vCPUs


def gcp_export_row(line: Line, ids: GcpIds) -> dict:
    """One detailed-export row for ``line`` (GCP FOCUS columns mapped back to the export schema)."""
    c = line.columns
    labels = json.loads(c["Tags"]) if c.get("Tags") else {}
    name = c.get("ResourceName") or ""
    machine = ids.machine_of.get(name)
    system = ([{"key": "compute.googleapis.com/machine_spec", "value": machine},
               {"key": "compute.googleapis.com/cores", "value": str(ids.vcpus_of[machine])}] if machine else [])
    number = ids.project_numbers[c["SubAccountId"]]
    zone = c.get("AvailabilityZone") or None
    resource = None
    if c.get("ResourceId"):
        resource = {"name": name or c["ResourceId"].rsplit("/", 1)[-1], "global_name": c["ResourceId"]}
    cost = _json_number(line.billed if line.kind == "cud_fee" else line.listed if line.kind == "cud_covered"
                        else line.cost)
    return {
        "billing_account_id": c["BillingAccountId"],
        "service": {"id": ids.service_ids[c["ServiceName"]], "description": c["ServiceName"]},
        "sku": {"id": c["SkuId"], "description": c["ChargeDescription"]},
        "usage_start_time": _bq_time(line.start()), "usage_end_time": _bq_time(line.end()),
        "project": {"id": c["SubAccountId"], "number": number, "name": c["SubAccountName"],
                    "labels": [], "ancestry_numbers": f"/518342964021/{number}/"},
        "labels": [{"key": k, "value": v} for k, v in labels.items()],
        "system_labels": system,
        "location": {"location": zone or c["RegionId"], "country": "US", "region": c["RegionId"], "zone": zone},
        "resource": resource,
        "tags": [],
        "export_time": _bq_time(line.end() + timedelta(hours=3, minutes=17)),
        "cost": cost,
        "currency": c["BillingCurrency"], "currency_conversion_rate": 1,
        "usage": {"amount": _json_number(c.get("ConsumedQuantity") or 0), "unit": c["ConsumedUnit"],
                  "amount_in_pricing_units": _json_number(line.quantity), "pricing_unit": c["PricingUnit"]},
        "credits": [],
        "invoice": {"month": (line.start() + PACIFIC).strftime("%Y%m")},
        "cost_type": "tax" if line.kind == "tax" else "regular",
        "adjustment_info": None,
        "cost_at_list": cost,
        "transaction_type": "GOOGLE",
        "seller_name": "Google",
        "price": {"effective_price": _json_number(line.unit_price), "tier_start_amount": 0,
                  "unit": c["PricingUnit"], "pricing_unit_quantity": 1},
    }


def gcp_export(lines: list[Line], ids: GcpIds) -> bytes:
    """The detailed export as newline-delimited JSON: a row per charge and tax line, each credit in
    the ``credits`` of the row it discounts."""
    rows, row_of = [], {}
    for line in lines:
        if line.kind != "credit" and line.only != "focus":
            rows.append(row_of.setdefault(id(line), gcp_export_row(line, ids)))
    for line in lines:
        if line.kind == "cud_covered" and (line.plan or {}).get("spend"):  # a spend-based commitment's (legacy model)
            row_of[id(line)]["credits"].append({
                "name": "Committed use discount - dollar based", "amount": -_json_number(line.listed),
                "full_name": "Committed use discount - dollar based: GCE Commitments",
                "id": "CommittedUsageDiscountDollarBase:gce-flex-1y", "type": "COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE"})
        elif line.kind == "cud_covered":  # the on-demand price of the covered hour, taken off again
            row_of[id(line)]["credits"].append({
                "name": "Committed use discount: GPU", "amount": -_json_number(line.listed),
                "full_name": "Committed use discount: GPU", "id": "CommittedUsageDiscount:h100-1y",
                "type": "COMMITTED_USAGE_DISCOUNT"})
        if line.kind == "credit":
            name = line.columns["ChargeDescription"]
            row_of[id(line.applies_to)]["credits"].append({
                "name": name, "amount": _json_number(line.cost), "full_name": name,
                "id": hashlib.sha256(name.encode()).hexdigest()[:12], "type": line.columns["x_CreditType"]})
    return "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows).encode()


def csv_bytes(header: list[str], rows: list[dict]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if row.get(k) is None else row[k] for k in header])
    return buf.getvalue().encode()




def gzip_bytes(data: bytes) -> bytes:
    """gzip with mtime 0 and no file name: same lines, same bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=6, mtime=0) as handle:
        handle.write(data)
    return buf.getvalue()


# ---- AWS CUR 2.0 (Data Exports, "Standard data export", CSV gzip) ----------------------------------

CUR2_COLUMNS = [
    "bill_bill_type", "bill_billing_entity", "bill_billing_period_end_date", "bill_billing_period_start_date",
    "bill_invoice_id", "bill_invoicing_entity", "bill_payer_account_id", "bill_payer_account_name",
    "cost_category", "discount", "identity_line_item_id", "identity_time_interval",
    "line_item_availability_zone", "line_item_blended_cost", "line_item_blended_rate", "line_item_currency_code",
    "line_item_legal_entity", "line_item_line_item_description", "line_item_line_item_type",
    "line_item_net_unblended_cost", "line_item_net_unblended_rate", "line_item_normalization_factor",
    "line_item_normalized_usage_amount", "line_item_operation", "line_item_product_code", "line_item_resource_id",
    "line_item_tax_type", "line_item_unblended_cost", "line_item_unblended_rate", "line_item_usage_account_id",
    "line_item_usage_account_name", "line_item_usage_amount", "line_item_usage_end_date",
    "line_item_usage_start_date", "line_item_usage_type", "pricing_currency", "pricing_lease_contract_length",
    "pricing_offering_class", "pricing_public_on_demand_cost", "pricing_public_on_demand_rate",
    "pricing_purchase_option", "pricing_rate_code", "pricing_rate_id", "pricing_term", "pricing_unit", "product",
    "product_comment", "product_fee_code", "product_fee_description", "product_from_location",
    "product_from_location_type", "product_from_region_code", "product_instance_family", "product_instance_type",
    "product_instancesku", "product_location", "product_location_type", "product_operation",
    "product_pricing_unit", "product_product_family", "product_region_code", "product_servicecode", "product_sku",
    "product_to_location", "product_to_location_type", "product_to_region_code", "product_usagetype",
    "reservation_amortized_upfront_cost_for_usage", "reservation_amortized_upfront_fee_for_billing_period",
    "reservation_effective_cost", "reservation_end_time", "reservation_modification_status",
    "reservation_net_effective_cost", "reservation_recurring_fee_for_usage", "reservation_reservation_a_r_n",
    "reservation_start_time", "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_quantity", "reservation_unused_recurring_fee", "reservation_upfront_value",
    "resource_tags", "savings_plan_amortized_upfront_commitment_for_billing_period",
    "savings_plan_end_time", "savings_plan_net_savings_plan_effective_cost", "savings_plan_offering_type",
    "savings_plan_payment_option", "savings_plan_purchase_term", "savings_plan_recurring_commitment_for_billing_period",
    "savings_plan_region", "savings_plan_savings_plan_a_r_n", "savings_plan_savings_plan_effective_cost",
    "savings_plan_savings_plan_rate", "savings_plan_start_time", "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
]
CUR_UNITS = {"Hours": "Hrs", "LCU-Hours": "LCU-Hrs"}
FAMILIES = {"Compute": "Compute Instance", "Networking": "NAT Gateway", "Management and Governance": "Storage Snapshot"}


def _cur_time(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cur_tag_key(key: str) -> str:
    """A resource tag as CUR 2.0's map names it: user-defined keys prefixed ``user_``."""
    return key if key.startswith("aws:") else f"user_{key}"


def cur2_row(line: Line, index: int) -> dict:
    c = line.columns
    cost, rate = decimal_text(line.cost), decimal_text(line.unit_price)
    usage_type = c.get("x_UsageType") or ""
    itype = usage_type.split(":", 1)[1] if usage_type.startswith("BoxUsage:") else ""
    product = {"product_name": c["ServiceName"], "region": c["RegionId"], "servicecode": c["x_ServiceCode"],
               "usagetype": usage_type,
               "location": c["RegionName"], **({"instance_type": itype, "vcpu": "", "gpu": ""} if itype else {})}
    tags = json.loads(c["Tags"]) if c.get("Tags") else {}
    return {
        "bill_bill_type": "Anniversary", "bill_billing_entity": "AWS",
        "bill_billing_period_start_date": "2026-09-01T00:00:00Z", "bill_billing_period_end_date": "2026-10-01T00:00:00Z",
        "bill_invoice_id": c.get("InvoiceId", ""), "bill_invoicing_entity": c["InvoiceIssuerName"],
        "bill_payer_account_id": c["BillingAccountId"], "bill_payer_account_name": c["BillingAccountName"],
        "cost_category": "{}", "discount": "{}",
        "identity_line_item_id": hashlib.sha256(f"{index}|{usage_type}|{c.get('ResourceId')}".encode())
        .hexdigest()[:52],
        "identity_time_interval": f"{_cur_time(line.start())}/{_cur_time(line.end())}",
        "line_item_availability_zone": c.get("AvailabilityZone") or "",
        "line_item_blended_cost": cost, "line_item_blended_rate": rate, "line_item_currency_code": "USD",
        "line_item_legal_entity": c["InvoiceIssuerName"], "line_item_line_item_description": c["ChargeDescription"],
        "line_item_line_item_type": "Usage", "line_item_normalization_factor": "0",
        "line_item_normalized_usage_amount": "0", "line_item_operation": c["x_Operation"],
        "line_item_product_code": c["x_ServiceCode"], "line_item_resource_id": c.get("ResourceId") or "",
        "line_item_unblended_cost": cost, "line_item_unblended_rate": rate,
        "line_item_usage_account_id": c["SubAccountId"], "line_item_usage_account_name": c["SubAccountName"],
        "line_item_usage_amount": decimal_text(line.quantity),
        "line_item_usage_start_date": _cur_time(line.start()), "line_item_usage_end_date": _cur_time(line.end()),
        "line_item_usage_type": usage_type, "pricing_currency": "USD",
        "pricing_public_on_demand_cost": cost, "pricing_public_on_demand_rate": rate,
        "pricing_rate_code": f"{c['SkuId']}.JRTCKXETXF.6YS6EN2CT7", "pricing_rate_id": str(3_000_000_000 + index),
        "pricing_term": "OnDemand", "pricing_unit": CUR_UNITS.get(c["PricingUnit"], c["PricingUnit"]),
        "product": json.dumps(product, separators=(",", ":")),
        "product_instance_type": itype, "product_instance_family": itype.split(".")[0] if itype else "",
        "product_location": c["RegionName"], "product_location_type": "AWS Region",
        "product_operation": c["x_Operation"], "product_product_family": FAMILIES.get(c["ServiceCategory"], ""),
        "product_region_code": c["RegionId"], "product_servicecode": c["x_ServiceCode"], "product_sku": c["SkuId"],
        "product_usagetype": usage_type,
        "resource_tags": json.dumps({_cur_tag_key(k): v for k, v in tags.items()}, separators=(",", ":")),
    }


def cur2_adjustment(row: dict, line: Line) -> dict:
    """A charge's row made its credit (line item type Credit, same resource and hour) or a tax row
    (type Tax: the taxed service's product code, no resource, no usage)."""
    row = {**row, "line_item_line_item_type": "Credit" if line.kind == "credit" else "Tax",
           "line_item_usage_amount": "0", "line_item_unblended_rate": "", "line_item_blended_rate": "",
           "pricing_public_on_demand_cost": "0", "pricing_public_on_demand_rate": "", "pricing_term": "",
           "pricing_unit": "", "pricing_rate_code": "", "pricing_rate_id": ""}
    if line.kind == "tax":
        row.update({"line_item_resource_id": "", "line_item_usage_type": "", "line_item_operation": "",
                    "line_item_tax_type": "Sales Tax", "line_item_availability_zone": "", "product_sku": "",
                    "product_usagetype": "", "product_operation": "", "product_instance_type": "",
                    "product_instance_family": "", "resource_tags": "{}"})
    return row


def cur2_plan(row: dict, line: Line) -> dict:
    """A Savings Plan's row: covered usage (billed and listed at on-demand, its effective cost beside),
    its negation, or the plan's hourly fee (its commitment and the part used)."""
    plan = line.plan or {}
    row = {**row, "savings_plan_savings_plan_a_r_n": plan["arn"], "savings_plan_offering_type": "ComputeSavingsPlans",
           "savings_plan_payment_option": "No Upfront", "savings_plan_purchase_term": "1yr",
           "savings_plan_region": row["product_region_code"], "pricing_term": "Savings Plan"}
    if line.kind == "sp_covered":
        row.update({"line_item_line_item_type": "SavingsPlanCoveredUsage",
                    "line_item_unblended_cost": decimal_text(line.listed), "line_item_blended_cost": decimal_text(line.listed),
                    "pricing_public_on_demand_cost": decimal_text(line.listed),
                    "savings_plan_savings_plan_effective_cost": decimal_text(line.cost),
                    "savings_plan_net_savings_plan_effective_cost": decimal_text(line.cost),
                    "savings_plan_savings_plan_rate": decimal_text(plan["rate"])})
    elif line.kind == "sp_negation":
        row.update({"line_item_line_item_type": "SavingsPlanNegation", "line_item_unblended_cost": decimal_text(line.billed),
                    "line_item_blended_cost": decimal_text(line.billed), "pricing_public_on_demand_cost": "0",
                    "line_item_line_item_description": "SavingsPlanNegation used by AccountId : "
                    f"{row['line_item_usage_account_id']} and UsageSku : {row['product_sku']}"})
    else:  # the fee
        row.update({"line_item_line_item_type": "SavingsPlanRecurringFee", "line_item_resource_id": plan["arn"],
                    "line_item_unblended_cost": decimal_text(line.billed), "line_item_blended_cost": decimal_text(line.billed),
                    "line_item_usage_type": "ComputeSP:1yrNoUpfront", "line_item_operation": "", "product_sku": "",
                    "line_item_product_code": "ComputeSavingsPlans", "product_servicecode": "ComputeSavingsPlans",
                    "line_item_line_item_description": "1 year No Upfront Compute Savings Plan",
                    "pricing_public_on_demand_cost": "0", "line_item_usage_amount": "1",
                    "savings_plan_total_commitment_to_date": decimal_text(plan["commitment"]),
                    "savings_plan_used_commitment": decimal_text(plan["used"]),
                    "savings_plan_recurring_commitment_for_billing_period": decimal_text(plan["commitment"]),
                    "product_instance_type": "", "product_instance_family": "", "resource_tags": "{}",
                    "line_item_availability_zone": ""})
    return row


def cur2_export(lines: list[Line]) -> bytes:
    """The CUR 2.0 CSV (gzip) of ``lines``."""
    rows = [cur2_plan(cur2_row(ln, i), ln) if ln.kind.startswith("sp_") else
            cur2_row(ln, i) if ln.kind == "charge" else cur2_adjustment(cur2_row(ln, i), ln)
            for i, ln in enumerate(lines) if ln.only != "focus"]
    return gzip_bytes(csv_bytes(CUR2_COLUMNS, rows))


# ---- Azure cost details (EA, AmortizedCost, CSV) ---------------------------------------------------

#: the header of Microsoft's EA AmortizedCost sample (FinOps toolkit, EA_AmortizedCost_Small.csv)
EA_COLUMNS = [
    "BillingAccountId", "BillingAccountName", "BillingPeriodStartDate", "BillingPeriodEndDate", "BillingProfileId",
    "BillingProfileName", "AccountOwnerId", "AccountName", "SubscriptionId", "SubscriptionName", "Date", "Product",
    "PartNumber", "MeterId", "ServiceFamily", "MeterCategory", "MeterSubCategory", "MeterRegion", "MeterName",
    "Quantity", "EffectivePrice", "Cost", "UnitPrice", "BillingCurrency", "ResourceLocation", "AvailabilityZone",
    "ConsumedService", "ResourceId", "ResourceName", "ServiceInfo1", "ServiceInfo2", "AdditionalInfo", "Tags",
    "InvoiceSectionId", "InvoiceSection", "CostCenter", "UnitOfMeasure", "ResourceGroup", "ReservationId",
    "ReservationName", "ProductOrderId", "ProductOrderName", "OfferId", "IsAzureCreditEligible", "Term",
    "PublisherName", "PlanName", "ChargeType", "Frequency", "PublisherType", "PayGPrice", "PricingModel",
    "CostAllocationRuleName", "benefitId", "benefitName",
]


def _ea_date(dt: datetime) -> str:
    return dt.strftime("%m/%d/%Y")


def _ea_tags(tags_json: str | None) -> str:
    """Tags as the EA export writes them: JSON members without the braces."""
    if not tags_json:
        return ""
    return ",".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in json.loads(tags_json).items())


def ea_rows(line: Line) -> list[dict]:
    """The export rows of ``line``: a scale set's VM meter is one row per instance and day (its VMName in
    AdditionalInfo), everything else one row."""
    c = line.columns
    arm_id = c["_arm_id"]
    sub = c["SubAccountId"].rsplit("/", 1)[-1]
    row = {
        "BillingAccountId": "8611537", "BillingAccountName": c["BillingAccountName"],
        "BillingPeriodStartDate": "09/01/2026", "BillingPeriodEndDate": "09/30/2026", "BillingProfileId": "8611537",
        "BillingProfileName": c["BillingAccountName"], "AccountOwnerId": "finops@contoso.com",
        "AccountName": "Inference", "SubscriptionId": sub, "SubscriptionName": c["SubAccountName"],
        "Date": _ea_date(line.start()), "Product": c["ChargeDescription"], "PartNumber": "",
        "MeterId": c["x_SkuMeterId"], "ServiceFamily": c["x_SkuServiceFamily"],
        "MeterCategory": c["x_SkuMeterCategory"], "MeterSubCategory": c["x_SkuMeterSubcategory"] or "",
        "MeterRegion": c["x_SkuRegion"], "MeterName": c["x_SkuMeterName"],
        "EffectivePrice": decimal_text(line.unit_price), "UnitPrice": decimal_text(line.unit_price),
        "BillingCurrency": c["BillingCurrency"], "ResourceLocation": "EastUS",
        "ConsumedService": c["_consumed_service"], "ResourceId": arm_id, "ResourceName": arm_id.rsplit("/", 1)[-1],
        "Tags": _ea_tags(c.get("Tags")), "InvoiceSectionId": "", "InvoiceSection": "", "CostCenter": "",
        "UnitOfMeasure": c["x_PricingUnitDescription"], "ResourceGroup": c["_resource_group"],
        "OfferId": "MS-AZR-0017P", "IsAzureCreditEligible": "True", "PublisherName": "Microsoft",
        "ChargeType": "Usage", "Frequency": "UsageBased", "PublisherType": "Azure",
        "PayGPrice": decimal_text(line.unit_price), "PricingModel": "OnDemand",
    }
    if c.get("CommitmentDiscountId"):  # reservation-covered usage, or the reservation's unused hours
        row.update({"PricingModel": "Reservation", "ReservationId": c["_reservation_guid"],
                    "ReservationName": c["CommitmentDiscountName"], "benefitId": c["CommitmentDiscountId"],
                    "benefitName": c["CommitmentDiscountName"],
                    "EffectivePrice": decimal_text(line.cost / line.quantity)})
        if c["CommitmentDiscountStatus"] == "Unused":
            row.update({"ChargeType": "UnusedReservation", "ResourceId": "", "ResourceName": "", "Tags": "",
                        "ResourceGroup": "", "UnitPrice": row["EffectivePrice"], "PayGPrice": ""})
    details = json.loads(c["SkuPriceDetails"]) if c.get("SkuPriceDetails") else None
    if not (details and c["x_SkuMeterCategory"] == "Virtual Machines"):
        return [{**row, "Quantity": decimal_text(line.quantity), "Cost": decimal_text(line.cost)}]
    span = line.end_h - line.start_h
    out = []
    names = [details["VMName"]] if "VMName" in details else [
        f"{row['ResourceName']}_{i}" for i in range(int(line.quantity) // span)]
    for name in names:
        info = {"UsageType": "ComputeHR", "ImageType": "Canonical", "ServiceType": details["ServiceType"],
                "VMName": name, "VMProperties": "Microsoft.AKS.Compute.AKS.Linux.Billing",
                "VCPUs": int(details["VCPUs"])}
        quantity = Decimal(span)
        out.append({**row, "Quantity": decimal_text(quantity), "Cost": decimal_text(line.cost * quantity / line.quantity),
                    "AdditionalInfo": json.dumps(info, separators=(",", ":"))})
    assert sum(Decimal(r["Cost"]) for r in out) == line.cost, "a scale set line splits into whole instances"
    return out


def ea_export(lines: list[Line]) -> bytes:
    """The EA AmortizedCost CSV of ``lines`` (UTF-8 with a byte order mark, as Cost Management writes it)."""
    rows = [r for ln in lines if ln.only != "focus" for r in ea_rows(ln)]
    return b"\xef\xbb\xbf" + csv_bytes(EA_COLUMNS, rows)
