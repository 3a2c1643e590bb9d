"""Billing lines normalised to FOCUS-named columns."""
from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas.fields import Money, OptionalDecimal

CHARGE_CATEGORIES = ["Usage", "Purchase", "Tax", "Credit", "Adjustment", "Refund"]


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

    class Config:
        strict = False
        coerce = False


class ClassifiedLine(BillingLine):
    """A billing line with its resource class and the rule that set it."""

    resource_class: Series[str]
    rule_reason: Series[str]
    instance_type: Series[str]
    gpus_per_instance: Series[int] = pa.Field(ge=0)
    gpu_model: Series[str]


def line_total(lines: pd.DataFrame) -> int:
    """How many invoice lines a table of lines stands for: connectors sum lines that no stage tells
    apart into one (column ``line_count``), so a row can stand for many."""
    if "line_count" in lines.columns:
        return int(lines["line_count"].sum())
    return int(len(lines))
