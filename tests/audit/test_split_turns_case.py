"""A scale set scaled in by one VM at 08:00 (fixtures/aks_scale_in): VM 1's daily row bills 8 h and
telemetry sees its node until 08:00. Where the row names its VM (SkuPriceDetails' VMName) it is
keyed by the VM and lands on its node; where the rows name no VM they are taken in turn, paired
with the nodes whose seen hours match their billed hours best (audit/gpu_turns.py), on the Python
walk and the engine's alike: either way 192 / 192 GPU-hours on VM 0, 64 / 64 on VM 1."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from benchmarks.cloudgen_check import audit_document
from tests.builders import generated_over

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "aks_scale_in"
H100 = "aks-h100pool-76659146-vmss"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The AKS case of seed 10103 with the fixture's billing and telemetry over it."""
    return generated_over(tmp_path_factory, "aks-scale-in", "aks", 10103, FIXTURE)


def _without_vm_names(path: Path) -> None:
    """The export's rows with no VMName in SkuPriceDetails (a row that names no VM of its set)."""
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    column = rows[0].index("SkuPriceDetails")
    for row in rows[1:]:
        if row[column]:
            details = {k: v for k, v in json.loads(row[column]).items() if k != "VMName"}
            row[column] = json.dumps(details, separators=(",", ":"))
    with path.open("w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def _figures(document: dict) -> dict:
    """The figures the pairing moves: buckets, the no-sample part, the H100 coverage, the reconciliation."""
    parts = {p["id"]: p["amount"] for bucket in document["buckets"].values() for p in bucket["parts"]}
    h100 = [(n["node"], n["paid_gpu_hours"], n["observed_gpu_hours"]) for n in document["coverage"]["by_node"]
            if H100 in n["node"]]
    return {"buckets": {k: v["amount"] for k, v in document["buckets"].items()}, "total": document["total"],
            "no_activity_sample": parts.get("unattributed.no_activity_sample/-"), "h100": h100,
            "reconciliation": (document["reconciliation"]["verdict"], document["reconciliation"]["gap"])}


BUCKETS = {"model_compute": "1299.04", "platform_overhead": "1853.83", "serving_path": "147.55",
           "unattributed": "180.51"}


@pytest.mark.slow
@pytest.mark.parametrize("walk", ["python", "duckdb"])
def test_a_row_naming_its_vm_is_paid_on_that_vm(folder, walk, monkeypatch):
    """VM 1's 8 h row (VMName ``…vmss_1``, the export's first row) on VM 1's node, VM 0's 24 h row on
    VM 0's: 192 / 192 and 64 / 64, nothing on GPU-intervals without a sample, 3146.24 of H100 time
    (256 GPU-h × 12.29) in the buckets; the buckets add up to 3480.93 and reconcile."""
    monkeypatch.setenv("COSTAUDIT_SPLIT", walk)
    assert _figures(audit_document(folder)) == {
        "buckets": BUCKETS, "total": "3480.93", "no_activity_sample": None,
        "h100": [(f"{H100}000000", "192.00", "192.00"), (f"{H100}000001", "64.00", "64.00")],
        "reconciliation": ("reconciles", "0.000884")}


@pytest.mark.slow
@pytest.mark.parametrize("walk", ["python", "duckdb"])
def test_rows_naming_no_vm_are_paired_with_the_vms_seen_as_long_as_they_bill(folder, tmp_path, walk, monkeypatch):
    """The same export with no VMName: before, the rows were taken in file order, the 8 h row on VM 0
    (seen 24 h) and the 24 h row on VM 1 (seen 8 h): 256 GPU-hours paid, 128 observed, 1573.12
    (128 GPU-h × 12.29) with no activity sample, model compute 552.51, unattributed 1753.63,
    does_not_reconcile (gap -0.389684). Now the 8 h row is paired with VM 1 and the audit reads as
    with the names: 256 / 256 on the set, the buckets above, reconciles."""
    case = tmp_path / "case"
    shutil.copytree(folder, case)
    _without_vm_names(case / "billing" / "focus_azure.csv")
    monkeypatch.setenv("COSTAUDIT_SPLIT", walk)
    figures = _figures(audit_document(case))
    assert figures["h100"] == [(f"{H100}000000, {H100}000001", "256.00", "256.00")]
    assert {k: v for k, v in figures.items() if k != "h100"} == {
        "buckets": BUCKETS, "total": "3480.93", "no_activity_sample": None,
        "reconciliation": ("reconciles", "0.000884")}
