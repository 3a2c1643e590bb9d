"""Billing lines normalised to FOCUS-named columns."""
from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas.fields import Money, OptionalDecimal

CHARGE_CATEGORIES = ["Usage", "Purchase", "Tax", "Credit", "Adjustment", "Refund"]
#: the resource classes a classification rule may set (METHOD §2); "unmatched" when none matched
RESOURCE_CLASSES = ["gpu_compute", "serving_compute", "serving_network", "egress", "observability",
                    "orchestration", "commitment_unused", "unmatched"]


class BillingLine(pa.DataFrameModel):
    """One invoice line (FOCUS subset); money as Decimal."""

    line_id: Series[str] = pa.Field(unique=True)
    row: Series[int] = pa.Field(ge=1)
    provider: Series[str]
    billing_account_id: Series[str]
    sub_account_id: Series[str]
    service_name: Series[str]
    service_category: Series[str]
    charge_category: Series[str] = pa.Field(isin=CHARGE_CATEGORIES)
    charge_class: Series[str]
    charge_description: Series[str]
    charge_frequency: Series[str]
    start: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    end: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    billed_cost: Series[object] = Money()
    effective_cost: Series[object] = Money()
    list_cost: Series[object] = OptionalDecimal()
    contracted_cost: Series[object] = OptionalDecimal()
    list_unit_price: Series[object] = OptionalDecimal()
    contracted_unit_price: Series[object] = OptionalDecimal()
    pricing_quantity: Series[object] = OptionalDecimal()
    consumed_quantity: Series[object] = OptionalDecimal()
    pricing_unit: Series[str]
    consumed_unit: Series[str]
    pricing_category: Series[str]
    commitment_discount_id: Series[str]
    commitment_discount_status: Series[str]
    commitment_discount_type: Series[str]
    resource_id: Series[str]
    resource_name: Series[str]
    resource_type: Series[str]
    region: Series[str]
    sku_id: Series[str]
    sku_price_id: Series[str]
    currency: Series[str]
    tags: Series[str]
    extra: Series[str]
    # FOCUS 1.1+ / 1.3 columns, "" (JSON: "{}" / "[]") where a file lacks them. Optional in tables built
    # in memory; every billing connector writes them.
    service_subcategory: Series[str] = pa.Field(required=False)
    host_provider: Series[str] = pa.Field(required=False)
    #: split cost allocation (FOCUS 1.3): the method, and the resource and tags the charge was split onto
    allocated_method_id: Series[str] = pa.Field(required=False)
    allocated_resource_id: Series[str] = pa.Field(required=False)
    allocated_resource_name: Series[str] = pa.Field(required=False)
    allocated_tags: Series[str] = pa.Field(required=False)
    #: the ContractCommitmentIds of ContractApplied, distinct and sorted, as a JSON array text
    contract_applied: Series[str] = pa.Field(required=False)

    class Config:
        strict = False
        coerce = False


class ContractCommitment(pa.DataFrameModel):
    """One row of a FOCUS 1.3 Contract Commitment dataset: one term of a contract (METHOD §7 reads
    its end for deferred savings). Times are UTC; amounts Decimal or None."""

    row: Series[int] = pa.Field(ge=1)
    commitment_id: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})
    commitment_type: Series[str]
    category: Series[str] = pa.Field(isin=["Spend", "Usage"])
    description: Series[str]
    cost: Series[object] = OptionalDecimal()
    quantity: Series[object] = OptionalDecimal()
    unit: Series[str]
    currency: Series[str]
    start: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    end: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    contract_id: Series[str]
    contract_start: Series[pd.DatetimeTZDtype] = pa.Field(nullable=True, dtype_kwargs={"unit": "ns", "tz": "UTC"})
    contract_end: Series[pd.DatetimeTZDtype] = pa.Field(nullable=True, dtype_kwargs={"unit": "ns", "tz": "UTC"})

    class Config:
        strict = False
        coerce = False


class ClassifiedLine(BillingLine):
    """A billing line with its resource class, the rule that set it, and the GPUs it bills.

    The audit's line table also carries ``line_count`` (invoice lines a row stands for) and, once
    its sources are concatenated, ``source`` / ``source_path`` (the case source that read it);
    tables built in memory may lack them. ``instance_type`` is "" when no instance type is named;
    ``machine_type`` is the instance type, else the machine a part line belongs to (GCP's machine
    spec), "" when neither is named (tables built in memory may lack it);
    ``gpus_per_instance`` 0 for an instance without GPUs (or a per-GPU meter), ``gpu_model`` "" when
    the line bills no GPU.
    """

    line_count: Series[int] = pa.Field(ge=1, required=False)
    source: Series[str] = pa.Field(required=False)
    source_path: Series[str] = pa.Field(required=False)
    resource_class: Series[str] = pa.Field(isin=RESOURCE_CLASSES)
    rule_reason: Series[str] = pa.Field(str_length={"min_value": 1})
    instance_type: Series[str]
    machine_type: Series[str] = pa.Field(required=False)
    gpus_per_instance: Series[int] = pa.Field(ge=0)
    gpu_model: Series[str]
    #: the declared service that owns the line ("" when none: a shared line) and why
    claimed_by: Series[str] = pa.Field(required=False)
    claim_reason: Series[str] = pa.Field(required=False)


def line_total(lines: pd.DataFrame) -> int:
    """How many invoice lines a table of lines stands for: connectors sum lines that no stage tells
    apart into one (column ``line_count``), so a row can stand for many."""
    if "line_count" in lines.columns:
        return int(lines["line_count"].sum())
    return int(len(lines))
