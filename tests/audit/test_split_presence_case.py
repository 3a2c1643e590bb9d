"""A scale set grown by one VM at 12:00 (fixtures/aks_scale_out): the VM's daily row bills 12 h and
telemetry sees its node from 12:00 on, its 8 GPUs idle. The row's money goes to the hours the node
was seen (unallocated), not half of it to the hours before it existed (no activity sample), on the
Python walk and the engine's alike (METHOD §3; audit/gpu_presence.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.cloudgen_check import audit_document
from tests.builders import generated_over

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "aks_scale_out"
NODE = "aks-h100pool-14976468-vmss000002"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The AKS case of seed 9714 with the fixture's billing and telemetry over it."""
    return generated_over(tmp_path_factory, "aks-scale-out", "aks", 9714, FIXTURE)


def _figures(document: dict) -> dict:
    """The figures the placement moves: bucket amounts, the unallocated and no-sample parts, the node's coverage."""
    parts = {p["id"]: p for bucket in document["buckets"].values() for p in bucket["parts"]}
    node = next(n for n in document["coverage"]["by_node"] if n["node"] == NODE)
    unallocated = parts["platform_overhead.unallocated/-"]
    return {"buckets": {k: v["amount"] for k, v in document["buckets"].items()}, "total": document["total"],
            "unallocated": (unallocated["amount"], unallocated["gpu_hours"]),
            "no_activity_sample": parts["unattributed.no_activity_sample/-"]["amount"],
            "coverage": (node["observed_gpu_hours"], node["paid_gpu_hours"]),
            "placed": f"placed by node presence in DCGM_FI_PROF_GR_ENGINE_ACTIVE ({NODE})" in unallocated["source"]}


@pytest.mark.slow
@pytest.mark.parametrize("walk", ["python", "duckdb"])
def test_a_vm_added_at_noon_is_paid_in_the_hours_its_node_was_seen(folder, walk, monkeypatch):
    """Before: unallocated 1194.25 (114 GPU-h), no_activity_sample 700.53, platform overhead
    3040.70, unattributed 1225.54, the node 48 / 96 GPU-hours observed. Now 589.92 (48 GPU-hours)
    moves from the hours before 12:00 to those after: unallocated 1784.17 (162 GPU-h),
    no_activity_sample 110.61, overhead 3630.62 (3630.6163 unrounded), unattributed 635.62, 96 / 96;
    the buckets still add up to the total, 6238.02."""
    monkeypatch.setenv("COSTAUDIT_SPLIT", walk)
    assert _figures(audit_document(folder)) == {
        "buckets": {"model_compute": "1772.64", "platform_overhead": "3630.62", "serving_path": "199.14",
                    "unattributed": "635.62"},
        "total": "6238.02", "unallocated": ("1784.17", "162.00"), "no_activity_sample": "110.61",
        "coverage": ("96.00", "96.00"), "placed": True}
