"""Provider dialects of GPU billing: per-instance lines, machines billed in parts, scale-set lines."""
from __future__ import annotations

from decimal import Decimal

import pandas as pd

from audit.audit_json import to_dict
from audit.collected import Collected
from audit.pipeline import audit_collected
from tests.builders import activity, frame, line, lines_frame, make_case

HOUR = pd.Timestamp("2026-09-01T00:00:00Z")


def run(lines, acts, nodes):
    collected = Collected((frame("billing", "focus", {"lines": lines_frame(lines)}),
                           frame("telemetry", "openmetrics", {"gpu_activity": activity(acts),
                                                              "node_info": pd.DataFrame(nodes)})))
    return to_dict(audit_collected(make_case(accounts=()), collected))


def parts(doc, bucket):
    return {(p["name"], p["service"]): Decimal(p["amount"]) for p in doc["buckets"][bucket]["parts"]}


def test_azure_scale_set_line_is_spread_over_its_nodes():
    vmss = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachinescalesets/gpu"
    arm_case = "/subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/GPU"
    billed = line(1, provider="Microsoft", service_name="Virtual Machines", resource_id=arm_case,
                  charge_description="NC24ads A100 v4", pricing_unit="1 Hour", pricing_quantity=Decimal(3),
                  billed_cost=Decimal("300"), effective_cost=Decimal("300"), start=HOUR, end=HOUR + pd.Timedelta(hours=1),
                  extra='{"x_SkuMeterName":"NC24ads A100 v4"}')
    nodes = [{"node": f"aks-gpu-{i}", "provider_id": f"azure://{vmss}/virtualMachines/{i}", "resource_id": vmss,
              "instance_type": "Standard_NC24ads_A100_v4"} for i in range(3)]
    acts = [{"node": f"aks-gpu-{i}", "ts": HOUR, "busy_fraction": 0.5, "pod": "chat-1" if i < 2 else "",
             "namespace": "llm" if i < 2 else ""} for i in range(3)]
    doc = run([billed], acts, nodes)
    assert doc["coverage"]["paid_gpu_hours"] == "3.00" and doc["coverage"]["observed_gpu_hours"] == "3.00"
    assert parts(doc, "platform_overhead")[("unallocated", None)] == Decimal("100.00")
    assert parts(doc, "unattributed")[("no_kernel_profile", "chat")] == Decimal("100.00")


def test_gcp_machine_billed_in_parts_counts_gpus_from_the_gpu_sku():
    common = dict(provider="Google Cloud", service_name="Compute Engine", resource_id="a2-node-1",
                  start=HOUR, end=HOUR + pd.Timedelta(hours=1), pricing_unit="hour")
    lines = [
        line(1, charge_description="Nvidia Tesla A100 GPU running in Americas", pricing_quantity=Decimal(2),
             billed_cost=Decimal("6"), effective_cost=Decimal("6"), **common),
        line(2, charge_description="A2 Instance Core running in Americas", pricing_quantity=Decimal(24),
             billed_cost=Decimal("0.8"), effective_cost=Decimal("0.8"), **common),
        line(3, charge_description="A2 Instance Ram running in Americas", pricing_quantity=Decimal(170),
             billed_cost=Decimal("0.6"), effective_cost=Decimal("0.6"), **common),
        line(4, charge_description="Network Internet Egress from Americas to Americas", billed_cost=Decimal("0.4"),
             effective_cost=Decimal("0.4"), provider="Google Cloud", service_name="Compute Engine",
             resource_id="a2-node-1", pricing_unit="gibibyte"),
    ]
    nodes = [{"node": "gke-a2-1", "provider_id": "gce://proj/us-central1-a/a2-node-1", "resource_id": "a2-node-1",
              "instance_type": "a2-highgpu-2g"}]
    acts = [{"node": "gke-a2-1", "gpu": str(g), "ts": HOUR, "busy_fraction": 0.25, "pod": "", "namespace": ""}
            for g in range(2)]
    doc = run(lines, acts, nodes)
    classes = {c["class"]: c for c in doc["classes"]}
    assert classes["gpu_compute"]["lines"] == 3 and classes["egress"]["lines"] == 1
    assert doc["coverage"]["paid_gpu_hours"] == "2.00"
    assert parts(doc, "unattributed")[("allocation_unknown", None)] == Decimal("7.40")


def test_a_machine_billed_in_parts_counts_its_gpus_once_and_takes_its_type_from_telemetry():
    """The GPU SKU line, the core line and the RAM line of one GCP machine-hour bill the same two
    GPUs: the GPU split counts them once (the GPU meter's line), not once per part (the right-size
    replay divides money by them), and the machine's type, which GCP lines do not carry, is the
    node's label: the consolidation model is priced from the packing, not from an assumed share."""
    common = dict(provider="Google Cloud", service_name="Compute Engine", resource_id="a2-node-1",
                  start=HOUR, end=HOUR + pd.Timedelta(hours=1), pricing_unit="hour")
    lines = [line(1, charge_description="Nvidia Tesla A100 GPU running in Americas", pricing_quantity=Decimal(2),
                  billed_cost=Decimal("6"), effective_cost=Decimal("6"), **common),
             line(2, charge_description="A2 Instance Core running in Americas", pricing_quantity=Decimal(24),
                  billed_cost=Decimal("0.8"), effective_cost=Decimal("0.8"), **common),
             line(3, charge_description="A2 Instance Ram running in Americas", pricing_quantity=Decimal(170),
                  billed_cost=Decimal("0.6"), effective_cost=Decimal("0.6"), **common)]
    nodes = [{"node": "gke-a2-1", "provider_id": "gce://proj/us-central1-a/a2-node-1", "resource_id": "a2-node-1",
              "instance_type": "a2-highgpu-2g"}]
    acts = [{"node": "gke-a2-1", "gpu": "0", "ts": HOUR, "busy_fraction": 0.5, "pod": "chat-0", "namespace": "llm"},
            {"node": "gke-a2-1", "gpu": "1", "ts": HOUR, "busy_fraction": 0.0, "pod": "", "namespace": ""}]
    doc = run(lines, acts, nodes)
    assert {g["service"]: g["gpus"] for g in doc["gpu_split"]} == {"chat": 1}
    assert [(n["instance_type"], n["paid_gpu_hours"]) for n in doc["coverage"]["by_node"]] == [("a2-highgpu-2g", "2.00")]
    assert parts(doc, "platform_overhead")[("unallocated", None)] == Decimal("3.70")  # half the machine-hour
    consolidate = next(o for o in doc["options"] if o["id"] == "consolidate_models")
    inputs = {i["name"]: i["value"] for i in consolidate["inputs"]}
    assert consolidate["basis"] == "modelled" and inputs["GPUs per instance"] == "a2-highgpu-2g: 2"
    assert inputs["node-hours that could be released"] == "0.00"  # one GPU held keeps the machine


def test_data_transfer_of_a_gpu_node_is_not_gpu_compute():
    lines = [line(1, resource_id="i-gpu", charge_description="$98.32 per On Demand Linux p5.48xlarge Instance Hour",
                  pricing_unit="Hours", pricing_quantity=Decimal(1), billed_cost=Decimal("98.32"),
                  effective_cost=Decimal("98.32")),
             line(2, resource_id="i-gpu", charge_description="$0.09 per GB - data transfer out to the internet",
                  pricing_unit="GB", extra='{"x_UsageType":"DataTransfer-Out-Bytes"}')]
    nodes = [{"node": "n", "provider_id": "aws:///z/i-gpu", "resource_id": "i-gpu", "instance_type": "p5.48xlarge"}]
    doc = run(lines, [{"node": "n", "gpu": "0", "ts": HOUR, "busy_fraction": 0.1}], nodes)
    classes = {c["class"]: c["lines"] for c in doc["classes"]}
    assert classes == {"gpu_compute": 1, "egress": 1}
    assert parts(doc, "unattributed")[("no_activity_sample", None)] == Decimal("86.03")


def test_aws_instance_arn_matches_the_provider_id():
    arn = "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc"
    lines = [line(1, resource_id=arn, charge_description="$98.32 per On Demand Linux p5.48xlarge Instance Hour",
                  pricing_unit="Hours", pricing_quantity=Decimal(1), billed_cost=Decimal("80"),
                  effective_cost=Decimal("80"))]
    nodes = [{"node": "n", "provider_id": "aws:///us-east-1a/i-0abc", "resource_id": "i-0abc", "instance_type": ""}]
    acts = [{"node": "n", "gpu": str(g), "ts": HOUR, "busy_fraction": 0.5, "pod": "chat-0", "namespace": "llm"}
            for g in range(8)]
    doc = run(lines, acts, nodes)
    assert doc["coverage"]["observed_gpu_hours"] == "8.00"
    assert parts(doc, "unattributed")[("no_kernel_profile", "chat")] == Decimal("40.00")
