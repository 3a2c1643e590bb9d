"""The real FOCUS 1.0 sample (shared/data) goes through the whole audit with matching totals."""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from audit.audit_json import to_dict
from audit.case import load_case
from audit.pipeline import run_audit
from tests.builders import billing_case
from tests.paths import DATA

SAMPLE = DATA / "billing" / "focus_sample_data" / "focus_sample_1000.csv"


def write_case(folder: Path, basis: str) -> Path:
    return billing_case(folder, "focus-sample", ("2024-09-01", "2024-10-01"), basis, format="focus", path=SAMPLE)


@pytest.mark.parametrize("basis, total", [("billed", "20.52"), ("effective", "14.98")])
def test_real_sample_totals_match_provenance(tmp_path, basis, total):
    doc = to_dict(run_audit(load_case(write_case(tmp_path / basis, basis))))
    assert doc["total"] == total
    assert doc["invoice_total"] == "20.52"
    assert sum(Decimal(b["amount"]) for b in doc["buckets"].values()) == Decimal(total)
    # 2 Adjustment and 1 Credit line are netted into the charges they apply to
    assert sum(c["lines"] for c in doc["classes"]) == 997


def test_real_sample_gpu_rows_are_gpu_compute_and_unmeasured(tmp_path):
    doc = to_dict(run_audit(load_case(write_case(tmp_path / "b", "billed"))))
    gpu = {c["class"]: c for c in doc["classes"]}["gpu_compute"]
    assert gpu["lines"] == 10  # g5.4xlarge x8, g3.4xlarge x2 (PROVENANCE.md)
    assert Decimal(gpu["gross"]) == Decimal("12.13")
    parts = {p["name"] for p in doc["buckets"]["unattributed"]["parts"]}
    assert "gpu_not_in_telemetry" in parts
    assert doc["reconciliation"]["verdict"] == "not_measured"
    assert doc["coverage"]["observed_gpu_hours"] == "0.00"
