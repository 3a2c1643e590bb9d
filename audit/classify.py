"""Invoice lines -> resource classes by ordered rules (METHOD §2), with GPU model and count."""
from __future__ import annotations

import csv
import json
import re
import tomllib
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from importlib import resources
from typing import Iterable, Mapping

import pandas as pd

from audit.case import Rule
from connectors.billing.catalogue import (AZURE_RE, GCP_MACHINE_RE, HOUR_RE, INSTANCE_RE,  # noqa: F401
                                          GpuType, gpu_instances, gpu_skus)

# FOCUS column name -> BillingLine column, for rule conditions.
FOCUS_COLUMNS = {
    "ProviderName": "provider", "BillingAccountId": "billing_account_id", "SubAccountId": "sub_account_id",
    "ServiceName": "service_name", "ServiceCategory": "service_category", "ChargeCategory": "charge_category",
    "ChargeClass": "charge_class", "ChargeDescription": "charge_description",
    "ChargeFrequency": "charge_frequency", "PricingUnit": "pricing_unit", "ConsumedUnit": "consumed_unit",
    "PricingCategory": "pricing_category", "CommitmentDiscountId": "commitment_discount_id",
    "CommitmentDiscountStatus": "commitment_discount_status",
    "CommitmentDiscountType": "commitment_discount_type", "ResourceId": "resource_id",
    "ResourceName": "resource_name", "ResourceType": "resource_type", "RegionId": "region",
    "SkuId": "sku_id", "SkuPriceId": "sku_price_id", "BillingCurrency": "currency",
}
PART_RE = re.compile(r"(?i)\b(core|cpu|ram|memory|gpu|local ssd)\b")


@lru_cache(maxsize=1)
def shipped_rules() -> tuple[Rule, ...]:
    """The shipped default rules, in order."""
    raw = tomllib.loads(resources.files("audit").joinpath("data/rules.toml").read_text())
    return tuple(Rule(r["when"], r["class"], r["reason"], origin="shipped") for r in raw["rules"])


def resource_key(resource_id: str) -> str:
    """A billing resource id and a scheduler provider id reduced to the same key.

    AWS ARNs of instances -> the instance id; GCP full resource names -> the instance name; Azure ARM
    ids are case-insensitive -> lower case.
    """
    rid = (resource_id or "").strip()
    if rid.startswith("arn:aws:ec2:") and ":instance/" in rid:
        return rid.rsplit("/", 1)[-1]
    if "/instances/" in rid and ("compute.googleapis.com" in rid or rid.startswith("projects/")):
        return rid.rsplit("/", 1)[-1]
    if rid.lower().startswith("/subscriptions/"):
        return rid.lower()
    return rid


def normalise_instance(name: str) -> str:
    """Lower case without the SageMaker / Azure prefixes."""
    name = name.strip().lower()
    for prefix in ("ml.", "standard_"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name.replace(" ", "_")


def instance_type_of(line: Mapping, extra: Mapping) -> str:
    """The instance type a line bills, from x_ columns, SkuPriceDetails or the description."""
    details = extra.get("SkuPriceDetails")
    details = _json(details) if isinstance(details, str) else (details or {})
    for key in ("x_InstanceType", "InstanceType", "x_ArmSkuName", "x_SkuMeterName"):
        value = extra.get(key) or details.get(key)
        if value:
            return normalise_instance(str(value))
    usage = str(extra.get("x_UsageType", ""))
    if ":" in usage and INSTANCE_RE.search(usage.split(":", 1)[1]):
        return normalise_instance(usage.split(":", 1)[1])
    text = " ".join(str(line.get(k, "")) for k in ("charge_description", "resource_name", "sku_id"))
    for pattern in (INSTANCE_RE, GCP_MACHINE_RE, AZURE_RE):
        found = pattern.search(text.lower() if pattern is not AZURE_RE else text)
        if found:
            return normalise_instance(found.group(1))
    return ""


def gpu_sku_model(line: Mapping) -> str:
    """The GPU model when the line is a per-GPU meter (GCP), else ""."""
    text = str(line.get("charge_description", ""))
    for pattern, model in gpu_skus():
        if pattern.search(text):
            return model
    return ""


def is_hourly_usage(line: Mapping) -> bool:
    """Usage priced in hours (instance-hours)."""
    unit = f"{line.get('pricing_unit', '')} {line.get('consumed_unit', '')}"
    return line.get("charge_category") == "Usage" and bool(HOUR_RE.search(unit))


def derived_fields(line: Mapping, extra: Mapping, cluster_resources: set[str],
                   gpu_resources: set[str]) -> dict[str, str]:
    """The Derived.* fields rules may match."""
    itype = instance_type_of(line, extra)
    hourly = is_hourly_usage(line)
    gpu_type = gpu_instances().get(itype)
    resource = resource_key(line.get("resource_id", ""))
    gpu_part = (line.get("charge_category") == "Usage" and (
        bool(gpu_sku_model(line)) or (resource in gpu_resources and bool(PART_RE.search(
            str(line.get("charge_description", "")))) and hourly)))
    return {
        "Derived.InstanceType": itype,
        "Derived.GpuInstanceHour": str(bool(hourly and gpu_type)).lower(),
        "Derived.GpuMachinePart": str(bool(gpu_part and not gpu_type)).lower(),
        "Derived.ClusterInstanceHour": str(bool(hourly and itype and resource in cluster_resources)).lower(),
    }


def field_value(key: str, line: Mapping, tags: Mapping, extra: Mapping, derived: Mapping) -> str:
    """The text a rule condition compares against."""
    if key.startswith("Derived."):
        return derived.get(key, "")
    if key.startswith("Tags."):
        return str(tags.get(key[5:], ""))
    if key in FOCUS_COLUMNS:
        return str(line.get(FOCUS_COLUMNS[key], ""))
    return str(extra.get(key, ""))


def matches(rule: Rule, values: Mapping[str, str]) -> bool:
    """All of a rule's conditions hold."""
    for key, expected in rule.when.items():
        actual = values.get(key, "")
        if expected.startswith("re:"):
            if not re.search(expected[3:], actual):
                return False
        elif actual != expected:
            return False
    return True


def classify(lines: pd.DataFrame, rules: Iterable[Rule], cluster_resources: set[str],
             gpu_resources: set[str]) -> pd.DataFrame:
    """Add resource_class, rule_reason, instance_type, gpus_per_instance, gpu_model to billing lines."""
    rules = tuple(rules) + shipped_rules()
    keys = {k for r in rules for k in r.when}
    out = {"resource_class": [], "rule_reason": [], "instance_type": [], "gpus_per_instance": [], "gpu_model": []}
    # A line's class depends only on its text columns (never on its period or amounts): classify
    # each distinct combination once; a month of hourly lines repeats a few thousand of them.
    by = [c for c in list(FOCUS_COLUMNS.values()) + ["tags", "extra"] if c in lines.columns]
    numbered = lines.groupby(by, sort=False, dropna=False).ngroup().to_numpy() if len(lines) and by else range(len(lines))
    codes = pd.Series(numbered)  # by position
    # groups are numbered in order of first appearance, so the n-th first occurrence has code n
    distinct = lines.iloc[codes.drop_duplicates().index]
    for line in distinct.to_dict("records"):
        tags, extra = _json(line.get("tags")), _json(line.get("extra"))
        derived = derived_fields(line, extra, cluster_resources, gpu_resources)
        values = {k: field_value(k, line, tags, extra, derived) for k in keys}
        rule = next((r for r in rules if matches(r, values)), None)
        itype = derived["Derived.InstanceType"]
        gpu_type = gpu_instances().get(itype)
        out["resource_class"].append(rule.resource_class if rule else "unmatched")
        out["rule_reason"].append(f"{rule.origin} rule: {rule.reason}" if rule else "no rule matched")
        out["instance_type"].append(itype)
        out["gpus_per_instance"].append(gpu_type.gpus if gpu_type else 0)
        out["gpu_model"].append(gpu_type.gpu_model if gpu_type else gpu_sku_model(line))
    result = lines.copy()
    for key, values in out.items():
        result[key] = [values[c] for c in codes]
    return result


def _json(text) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def gpu_hours_of(line: Mapping) -> Decimal:
    """GPU-hours a gpu_compute line bills: GPU meter quantity, or instance-hours × GPUs."""
    quantity = line.get("pricing_quantity") or line.get("consumed_quantity") or Decimal(0)
    if line.get("gpus_per_instance"):
        return quantity * line["gpus_per_instance"]
    if gpu_sku_model(line):
        return quantity
    return Decimal(0)
