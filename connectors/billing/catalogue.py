"""The GPU catalogue: which instance types and per-GPU meters bill GPU time, and how many GPUs.

Shipped as ``connectors/billing/data/gpu_instances.csv`` and ``gpu_skus.csv``. The billing readers
use it to keep the hours of lines that may bill GPU time (in DuckDB); the audit's classifier uses
it to give each line its GPU model and count.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

INSTANCE_RE = re.compile(r"\b((?:ml\.)?[a-z][a-z0-9-]*\d[a-z0-9-]*\.(?:\d*x?large|metal[\w-]*|medium|small|micro|nano))\b")
GCP_MACHINE_RE = re.compile(r"\b([acgmn]\d-(?:highgpu|megagpu|ultragpu|edgegpu|standard|highmem|highcpu)-\d+g?)\b")
AZURE_RE = re.compile(r"\b(?:standard_)?(n[cdv]\d+[a-z]*(?:_[a-z0-9]+)*_v\d)\b", re.I)
HOUR_RE = re.compile(r"(?i)\bh(ou)?rs?\b|hours?")


@dataclass(frozen=True)
class GpuType:
    """GPU model and count of an instance type."""

    gpu_model: str
    gpus: int


@lru_cache(maxsize=1)
def gpu_instances() -> dict[str, GpuType]:
    """The shipped instance-type table."""
    text = resources.files("connectors.billing").joinpath("data/gpu_instances.csv").read_text()
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return {r["instance_type"]: GpuType(r["gpu_model"], int(r["gpus"])) for r in rows}


@lru_cache(maxsize=1)
def gpu_skus() -> list[tuple[re.Pattern, str]]:
    """The shipped per-GPU meter patterns."""
    text = resources.files("connectors.billing").joinpath("data/gpu_skus.csv").read_text()
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return [(re.compile(r["pattern"], re.I), r["gpu_model"]) for r in rows]
