"""Billing and telemetry that disagree on a node's GPU model are named (audit/fit_models.py), and the
coverage table names the machine the bill names (a GCP part line's machine_spec), not the node's label.

The case is cloudgen's GKE case of seed 1 with its native export, its g2 node billed as an N1 machine
with T4 GPUs (SKUs and machine_spec edited): the join by instance name still holds, the money is right,
and DCGM says NVIDIA L4. Before, no word; the coverage table called the node g2-standard-48.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from audit.fit_models import gpu_models_fit
from audit.normalised import ACTIVITY_COLUMNS, NODE_COLUMNS, NodeMap, empty_table
from tests.paths import ROOT

NODE = "gke-inference-g2-pool-beb55b6b-rtgg"
#: the g2 node's SKUs as an N1 machine with T4 GPUs would bill them
AS_N1 = {"G2 Instance Core running in Americas": "N1 Predefined Instance Core running in Americas",
         "G2 Instance Ram running in Americas": "N1 Predefined Instance Ram running in Americas",
         "Nvidia L4 GPU running in Americas": "Nvidia Tesla T4 GPU running in Americas"}


def costaudit(*args):
    return subprocess.run([sys.executable, "-m", "audit", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


def gke_case(out: Path) -> Path:
    """cloudgen's GKE case of seed 1 with its native billing export."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.cloudgen", "--cloud", "gke", "--seed", "1", "--out", str(out),
                           "--billing", "native"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def billed_as_n1_t4(case: Path) -> None:
    """Bill the g2 node as an n1-standard-48 with T4 GPUs: its SKUs and machine_spec edited."""
    (export,) = (case / "billing").glob("gcp_billing_export_resource_v1*.jsonl")
    rows = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if (row.get("resource") or {}).get("name") == NODE:
            row["sku"]["description"] = AS_N1.get(row["sku"]["description"], row["sku"]["description"])
            for label in row.get("system_labels") or []:
                if label["key"] == "compute.googleapis.com/machine_spec":
                    label["value"] = "n1-standard-48"
    export.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def model_warnings(stderr: str) -> list[str]:
    return [line.removeprefix("costaudit: warning: ") for line in stderr.splitlines()
            if line.startswith("costaudit: warning: node ")]


@pytest.fixture(scope="module")
def gke(tmp_path_factory) -> Path:
    return gke_case(tmp_path_factory.mktemp("gke") / "case")


def test_the_generated_gke_case_has_no_model_warning(gke):
    """L4 billed (the SKU "Nvidia L4 GPU", the catalogue's "L4") and "NVIDIA L4" in DCGM are one model; so are
    the H100 SKU and "NVIDIA H100 80GB HBM3"."""
    result = costaudit("validate", gke)
    assert result.returncode == 0, result.stderr
    assert model_warnings(result.stderr) == []


def test_a_node_billed_as_another_gpu_model_is_named(gke, tmp_path):
    case = tmp_path / "case"
    import shutil

    shutil.copytree(gke, case)
    billed_as_n1_t4(case)
    result = costaudit("run", case, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert model_warnings(result.stderr) == [
        f"node {NODE} is billed as T4 (n1-standard-48, 24 line(s) of resource {NODE}, the first "
        "gcp_billing_export_resource_v1.jsonl:16 \"Nvidia Tesla T4 GPU running in Americas\"), but telemetry reports "
        "NVIDIA L4 (DCGM modelName; instance type g2-standard-48 in its kube node label) on it: the bill's GPU-hours "
        "and money are split by another GPU model's activity, so the join of the resource to the node or the bill "
        "is wrong; [nodes] can join the resource to the node it is"]
    fit = json.loads((tmp_path / "out" / "audit.json").read_text(encoding="utf-8"))["fit"]
    assert [(m["kind"], m["subject"], m["nearest"]) for m in fit if m["kind"] == "billed_gpu_model"] == [
        ("billed_gpu_model", f"node {NODE}", ["NVIDIA L4"])]
    with (tmp_path / "out" / "tables" / "coverage.csv").open(encoding="utf-8") as table:
        kinds = {row["node"]: row["instance_type"] for row in csv.DictReader(table)}
    assert kinds[NODE] == "n1-standard-48"  # before: g2-standard-48, the node's kube label


def _lines(model: str, description: str, **over) -> pd.DataFrame:
    row = {"resource_id": "i-1", "gpu_model": model, "line_id": "cur.csv:2", "charge_description": description,
           "instance_type": "", "machine_type": "", "pricing_quantity": Decimal(1), **over}
    return pd.DataFrame([row])


def _telemetry(models: list[str], kind: str = ""):
    from types import SimpleNamespace

    activity = empty_table(ACTIVITY_COLUMNS)
    if models:
        activity = pd.DataFrame([{c: "" for c in ACTIVITY_COLUMNS} | {"node": "n-1", "model_name": m} for m in models])
    nodes = pd.DataFrame([{"node": "n-1", "provider_id": "", "resource_id": "i-1", "instance_type": kind}],
                         columns=NODE_COLUMNS)
    return SimpleNamespace(activity=activity, nodes=nodes)


JOINED = NodeMap({"i-1": ("n-1",)}, frozenset({"i-1"}), frozenset({"i-1"}))


@pytest.mark.parametrize(("billed", "reported"), [("H100 80GB", "NVIDIA H100 80GB HBM3"), ("L4", "NVIDIA L4"),
                                                  ("T4", "Tesla T4"), ("A10G", "NVIDIA A10G")])
def test_one_model_written_two_ways_is_no_misfit(billed, reported):
    assert gpu_models_fit(_lines(billed, "GPU"), _telemetry([reported]), JOINED) == []


def test_a_node_whose_gpus_report_no_model_is_read_by_its_instance_type():
    """Without DCGM's modelName, the catalogue's model of the node's instance type label is the telemetry's."""
    [misfit] = gpu_models_fit(_lines("A10G", "USE1-BoxUsage:g5.xlarge", instance_type="g5.xlarge",
                                     machine_type="g5.xlarge"), _telemetry([], "g6e.12xlarge"), JOINED)
    assert misfit.message == (
        "node n-1 is billed as A10G (g5.xlarge, 1 line(s) of resource i-1, the first cur.csv:2 "
        "\"USE1-BoxUsage:g5.xlarge\"), but telemetry reports L40S (the shipped catalogue's model of instance type "
        "g6e.12xlarge, its kube node label) on it: the bill's GPU-hours and money are split by another GPU model's "
        "activity, so the join of the resource to the node or the bill is wrong; [nodes] can join the resource to "
        "the node it is")
    assert misfit.nearest == ("L40S",)


def test_no_model_on_either_side_says_nothing():
    assert gpu_models_fit(_lines("", "A3 Instance Core running in Americas"), _telemetry(["NVIDIA L4"]), JOINED) == []
    assert gpu_models_fit(_lines("T4", "GPU"), _telemetry([]), JOINED) == []
