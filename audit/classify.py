"""Invoice lines -> resource classes by ordered rules (METHOD §2), with GPU model and count.

The output is checked against ``schemas.billing.ClassifiedLine`` before it is handed on.
"""
from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from importlib import resources
from typing import Collection, Iterable, Mapping

import numpy as np
import pandas as pd

from audit.case import Rule, Service
from audit.errors import AuditError
from audit.lines import gpu_sku_model, json_object, line_tags, resource_key
from audit.services import matches as value_matches
from connectors.billing.catalogue import (
    AZURE_RE,
    GCP_MACHINE_RE,
    HOUR_RE,
    INSTANCE_RE,
    category_class,
    gpu_instances,
    normalise_instance,
)
from schemas.billing import ClassifiedLine

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
    # FOCUS 1.1+ / 1.3 (ServiceProviderName is ProviderName's 1.3 name)
    "ServiceSubcategory": "service_subcategory", "ServiceProviderName": "provider",
    "HostProviderName": "host_provider", "AllocatedMethodId": "allocated_method_id",
    "AllocatedResourceId": "allocated_resource_id", "AllocatedResourceName": "allocated_resource_name",
}
PART_RE = re.compile(r"(?i)\b(core|cpu|ram|memory|gpu|local ssd)\b")
#: an Azure VM size as a meter name writes it, normalised ("d8ads_v5", "nd96isr_h100_v5", "b2s",
#: "d2_v3/d2s_v3"): a family and vCPU count, then words that each hold a digit (a version, an accelerator)
VM_SIZE_RE = re.compile(r"^[a-z]{1,4}\d+[a-z-]*(?:_[a-z]*\d+[a-z]*)*(?:/.*)?$")


@lru_cache(maxsize=1)
def shipped_rules() -> tuple[Rule, ...]:
    """The shipped default rules, in order."""
    raw = tomllib.loads(resources.files("audit").joinpath("data/rules.toml").read_text())
    return tuple(Rule(r["when"], r["class"], r["reason"], origin="shipped") for r in raw["rules"])


def instance_type_of(line: Mapping, extra: Mapping) -> str:
    """The instance type a line bills, from x_ columns, SkuPriceDetails or the description."""
    details = extra.get("SkuPriceDetails")
    details = json_object(details) if isinstance(details, str) else (details or {})
    for key in ("x_InstanceType", "InstanceType", "x_ArmSkuName", "x_SkuMeterName"):
        value = extra.get(key) or details.get(key)
        if value:
            return _sized(key, normalise_instance(str(value)))
    usage = str(extra.get("x_UsageType", ""))
    if ":" in usage and INSTANCE_RE.search(usage.split(":", 1)[1]):
        return normalise_instance(usage.split(":", 1)[1])
    text = " ".join(str(line.get(k, "")) for k in ("charge_description", "resource_name", "sku_id"))
    for pattern in (INSTANCE_RE, GCP_MACHINE_RE, AZURE_RE):
        found = pattern.search(text.lower() if pattern is not AZURE_RE else text)
        if found:
            return normalise_instance(found.group(1))
    return ""


def _sized(key: str, value: str) -> str:
    """``value``, unless it is a meter name (``x_SkuMeterName``) that names no VM size: Azure's meter
    name is the VM size on a Virtual Machines line only; another line's ("NVAIE per GPU hour", a
    marketplace licence) is no machine, and gives no instance type."""
    if key != "x_SkuMeterName" or value in gpu_instances() or VM_SIZE_RE.match(value):
        return value
    return ""


def machine_type_of(itype: str, extra: Mapping) -> str:
    """The machine a line bills: its instance type, else the machine a part line (vCPU, RAM, GPU SKU)
    belongs to (GCP's ``machine_spec`` system label, ``x_MachineSpec``), "" when it names none. Kept
    apart from the instance type, which multiplies a line's quantity by the machine's GPU count."""
    spec = extra.get("x_MachineSpec")
    return itype or (normalise_instance(str(spec)) if spec else "")


def is_hourly_usage(line: Mapping) -> bool:
    """Usage priced in hours (instance-hours)."""
    unit = f"{line.get('pricing_unit', '')} {line.get('consumed_unit', '')}"
    return line.get("charge_category") == "Usage" and bool(HOUR_RE.search(unit))


def derived_fields(line: Mapping, extra: Mapping, cluster_resources: Collection[str],
                   gpu_resources: Collection[str]) -> dict[str, str]:
    """The Derived.* fields rules may match. A vCPU / RAM / local-SSD line is a GPU machine's part
    where telemetry sees GPUs on its resource or where its machine (GCP ``machine_spec``) is a GPU
    machine type (g2, a2, a3 …: its GPUs may be billed in its Core line, audit/lines.py
    ``bundled_machines``), telemetry or not."""
    itype = instance_type_of(line, extra)
    hourly = is_hourly_usage(line)
    gpu_type = gpu_instances().get(itype)
    resource = resource_key(line.get("resource_id", ""))
    machine = gpu_instances().get(machine_type_of(itype, extra)) if not gpu_type else None
    gpu_part = (line.get("charge_category") == "Usage" and (
        bool(gpu_sku_model(line)) or ((resource in gpu_resources or machine is not None) and bool(PART_RE.search(
            str(line.get("charge_description", "")))) and hourly)))
    return {
        "Derived.InstanceType": itype,
        "Derived.GpuInstanceHour": str(bool(hourly and gpu_type)).lower(),
        "Derived.GpuMachinePart": str(bool(gpu_part and not gpu_type)).lower(),
        "Derived.ClusterInstanceHour": str(bool(hourly and itype and resource in cluster_resources)).lower(),
        "Derived.ClusterMachinePart": str(bool(
            line.get("charge_category") == "Usage" and hourly and not itype and resource in cluster_resources
            and resource not in gpu_resources and PART_RE.search(str(line.get("charge_description", ""))))).lower(),
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
    return all(value_matches(expected, values.get(key, "")) for key, expected in rule.when.items())


#: the columns classification adds, with their dtypes (schemas.billing.ClassifiedLine)
CLASS_COLUMNS = {"resource_class": "str", "rule_reason": "str", "instance_type": "str", "machine_type": "str",
                 "gpus_per_instance": "int64", "gpu_model": "str", "claimed_by": "str", "claim_reason": "str"}


def classify(lines: pd.DataFrame, rules: Iterable[Rule], cluster_resources: Collection[str],
             gpu_resources: Collection[str], services: Mapping[str, Service] | None = None) -> pd.DataFrame:
    """Add resource_class, rule_reason, instance_type, machine_type, gpus_per_instance, gpu_model, and the service
    that owns the line (``claimed_by``, "" when none, with ``claim_reason``) to billing lines.

    ``lines`` are ``schemas.billing.BillingLine`` rows (which their connector validated); the first
    line of each distinct combination, whose class every repeat of it shares, is checked against
    ``ClassifiedLine``. ``cluster_resources`` are the billed resources telemetry names as nodes,
    ``gpu_resources`` those among them on which it saw GPUs. A line is owned by the service its
    rule names, else by the first service (file order) whose ``tags`` or ``resource_ids`` claim it.
    """
    claimants = [s for s in (services or {}).values() if s.claims_lines]
    rules = tuple(rules) + shipped_rules()
    keys = sorted({k for r in rules for k in r.when})
    # The first rule that matches depends on nothing but the values its conditions read: lines of
    # many resources share them, so each set of values is matched once.
    first_match: dict[tuple[str, ...], Rule | None] = {}
    out: dict[str, list] = {column: [] for column in CLASS_COLUMNS}
    # A line's class depends only on its text columns (never on its period or amounts): classify
    # each distinct combination once; a month of hourly lines repeats a few thousand of them.
    by = [c for c in dict.fromkeys(list(FOCUS_COLUMNS.values()) + ["tags", "allocated_tags", "extra"])
          if c in lines.columns]
    numbered = lines.groupby(by, sort=False, dropna=False).ngroup().to_numpy() if len(lines) and by else range(len(lines))
    codes = pd.Series(numbered)  # by position
    # groups are numbered in order of first appearance, so the n-th first occurrence has code n
    first = codes.drop_duplicates().index
    # every field classification reads is one of the grouping columns: boxing the amounts and
    # periods of each distinct line into Python objects would be wasted
    distinct = (lines[by] if by else lines).iloc[first]
    for line in distinct.to_dict("records"):
        tags, extra = line_tags(line.get("tags"), line.get("allocated_tags")), json_object(line.get("extra"))
        derived = derived_fields(line, extra, cluster_resources, gpu_resources)
        values = {k: field_value(k, line, tags, extra, derived) for k in keys}
        signature = tuple(values[k] for k in keys)
        if signature not in first_match:
            first_match[signature] = next((r for r in rules if matches(r, values)), None)
        rule = first_match[signature] or category_rule(line)
        itype = derived["Derived.InstanceType"]
        gpu_type = gpu_instances().get(itype)
        out["resource_class"].append(rule.resource_class if rule else "unmatched")
        out["rule_reason"].append(rule_reason(rule) if rule else "no rule matched")
        out["instance_type"].append(itype)
        out["machine_type"].append(machine_type_of(itype, extra))
        out["gpus_per_instance"].append(gpu_type.gpus if gpu_type else 0)
        out["gpu_model"].append(gpu_type.gpu_model if gpu_type else gpu_sku_model(line))
        owner, why = claim_of(line, tags, rule, claimants)
        out["claimed_by"].append(owner)
        out["claim_reason"].append(why)
    result = lines.copy(deep=False)  # copy-on-write: the new columns do not reach the caller's frame
    positions = codes.to_numpy()
    for key, per_distinct in out.items():
        taken = np.asarray(per_distinct, dtype="int64" if CLASS_COLUMNS[key] == "int64" else object)
        result[key] = pd.Series(taken[positions] if len(positions) else taken[:0], index=result.index,
                                dtype=CLASS_COLUMNS[key])
    checked(result.iloc[first])  # every value classification chose: the other rows repeat these
    return result


def claim_of(line: Mapping, tags: Mapping, rule: Rule | None, claimants: Iterable[Service]) -> tuple[str, str]:
    """(service, reason) that owns a line: its rule's ``service``, else the first claiming service."""
    if rule is not None and rule.service:
        return rule.service, f"case rule names service {rule.service}"
    resource = str(line.get("resource_id", "") or "")
    for service in claimants:
        if service.tags and all(value_matches(pattern, str(tags.get(key, ""))) for key, pattern in service.tags.items()):
            shown = ", ".join(f"{k}={v}" for k, v in service.tags.items())
            return service.name, f"[services.{service.name}].tags claim it ({shown})"
        if resource and any(value_matches(pattern, resource) for pattern in service.resource_ids):
            return service.name, f"[services.{service.name}].resource_ids claim it ({resource})"
    return "", ""



def category_rule(line: Mapping) -> Rule | None:
    """METHOD §2's last resort: the class the line's FOCUS ServiceCategory and ServiceSubcategory name
    where they are unambiguous (``connectors/billing/data/service_categories.csv``), else None."""
    found = category_class(str(line.get("service_category", "")), str(line.get("service_subcategory", "")))
    if found is None:
        return None
    return Rule({"ServiceCategory": found.category, "ServiceSubcategory": found.subcategory},
                found.resource_class, found.reason, origin="category")


def rule_reason(rule: Rule) -> str:
    """The reason a line's class was chosen, naming the rule's origin (case, shipped, category)."""
    if rule.origin == "category":
        where = f"{rule.when['ServiceCategory']} / {rule.when['ServiceSubcategory']}"
        return f"no rule named the line; FOCUS ServiceCategory / ServiceSubcategory {where}: {rule.reason}"
    return f"{rule.origin} rule: {rule.reason}"


def checked(classified: pd.DataFrame) -> pd.DataFrame:
    """The classified lines, checked against ``schemas.billing.ClassifiedLine``.

    A mismatch is a fault of the audit (connectors validate what they read), raised as AuditError.
    """
    import pandera.errors as pa_errors

    try:
        return ClassifiedLine.validate(classified, lazy=True)
    except pa_errors.SchemaErrors as exc:
        cases = exc.failure_cases.head(5)
        found = "; ".join(f"column {r['column']}: check {r['check']} failed for {r['failure_case']!r}"
                          for _, r in cases.iterrows())
        raise AuditError(f"classified lines do not match schemas.billing.ClassifiedLine: {found}") from None


