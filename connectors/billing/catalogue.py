"""The billing catalogue: which instance types and per-GPU meters bill GPU time, and how many GPUs;
which FOCUS service categories name a resource class.

Shipped as ``connectors/billing/data/gpu_instances.csv``, ``gpu_skus.csv`` and
``service_categories.csv``. The billing readers use the GPU tables to keep the hours of lines that
may bill GPU time (in DuckDB); the audit's classifier uses them to give each line its GPU model and
count, and the category table as its last resort (METHOD §2).
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

INSTANCE_RE = re.compile(r"\b((?:ml\.)?[a-z][a-z0-9-]*\d[a-z0-9-]*\.(?:\d*x?large|metal[\w-]*|medium|small|micro|nano))\b")
GCP_MACHINE_RE = re.compile(r"\b([acgmn]\d[a-z]?-(?:highgpu|megagpu|ultragpu|edgegpu|standard|highmem|highcpu)-\d+g?)\b")
AZURE_RE = re.compile(r"\b(?:standard_)?(n[cdv]c?\d+[a-z]*(?:_[a-z0-9]+)*_v\d)\b", re.I)
HOUR_RE = re.compile(r"(?i)\bh(ou)?rs?\b|hours?")


@dataclass(frozen=True)
class GpuType:
    """GPU model and count of an instance type; ``vcpus``: the vCPUs a GCP machine type's Core SKU
    bills per instance-hour (0 where the table gives none)."""

    gpu_model: str
    gpus: int
    vcpus: int = 0


def normalise_instance(name: str) -> str:
    """An instance type as the table spells it: lower case, spaces as ``_`` (Azure's meter names
    write ``Standard NC6s v3``), without the SageMaker / Azure prefixes."""
    name = name.strip().lower().replace(" ", "_")
    for prefix in ("ml.", "standard_"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


@lru_cache(maxsize=1)
def gpu_instances() -> dict[str, GpuType]:
    """The shipped instance-type table, read once (the classifier asks for it per distinct line kind)."""
    text = resources.files("connectors.billing").joinpath("data/gpu_instances.csv").read_text()
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return {r["instance_type"]: GpuType(r["gpu_model"], int(r["gpus"]), int(r.get("vcpus") or 0)) for r in rows}


CORE_RE = re.compile(r"(?i)\b(core|cpu)\b")


def bundling_machine(machine: str, text: str) -> GpuType | None:
    """The GPU machine type whose Core line this is (GCP: the ``machine_spec`` of a part line whose
    description names its cores), where the table gives its vCPUs: a line that can bill the
    machine's GPUs with its cores, should no GPU meter of their own bill them (METHOD §2)."""
    found = gpu_instances().get(machine) if machine else None
    return found if found is not None and found.vcpus > 0 and CORE_RE.search(text or "") else None


@lru_cache(maxsize=1)
def gpu_skus() -> list[tuple[re.Pattern, str]]:
    """The shipped per-GPU meter patterns."""
    text = resources.files("connectors.billing").joinpath("data/gpu_skus.csv").read_text()
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return [(re.compile(r["pattern"], re.I), r["gpu_model"]) for r in rows]


@dataclass(frozen=True)
class CategoryClass:
    """The resource class a FOCUS ServiceCategory / ServiceSubcategory pair names, and why."""

    category: str
    subcategory: str
    resource_class: str
    reason: str


@lru_cache(maxsize=1)
def service_categories() -> dict[tuple[str, str], CategoryClass]:
    """The shipped (category, subcategory) table, keyed in lower case."""
    text = resources.files("connectors.billing").joinpath("data/service_categories.csv").read_text()
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return {(r["category"].casefold(), r["subcategory"].casefold()):
            CategoryClass(r["category"], r["subcategory"], r["class"], r["reason"]) for r in rows}


def category_class(category: str, subcategory: str) -> CategoryClass | None:
    """The class a line's ServiceCategory and ServiceSubcategory name, where they are unambiguous."""
    return service_categories().get(((category or "").strip().casefold(), (subcategory or "").strip().casefold()))
