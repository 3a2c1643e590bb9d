"""A GCP GPU machine's vCPU and RAM lines are its GPU machine parts (gpu_compute, METHOD §2) whether
or not telemetry sees GPUs on it: its ``machine_spec`` names a GPU machine type. Before, only a node
telemetry saw with GPUs made them parts, so `costaudit init --from` (which classifies without
telemetry) counted a g2-standard-48 billed without an L4 meter as an instance without GPUs, and
proposed that a CPU tier claim its node pool's tag."""
from __future__ import annotations

import json
from decimal import Decimal

from audit.classify import classify
from tests.builders import line, lines_frame


def part(row: int, description: str, machine: str) -> dict:
    return line(row, provider="Google Cloud", service_name="Compute Engine", charge_description=description,
                resource_id=f"projects/p/zones/z/instances/{machine}-node", pricing_unit="Hours",
                pricing_quantity=Decimal(48), extra=json.dumps({"x_MachineSpec": machine}))


def test_the_cores_and_ram_of_a_gpu_machine_type_are_gpu_parts_without_telemetry():
    lines = lines_frame([part(1, "G2 Instance Core running in Americas", "g2-standard-48"),
                         part(2, "G2 Instance Ram running in Americas", "g2-standard-48"),
                         part(3, "N2 Instance Core running in Americas", "n2-standard-48")])
    classes = classify(lines, (), set(), set())["resource_class"].tolist()
    assert classes[:2] == ["gpu_compute", "gpu_compute"]
    assert classes[2] != "gpu_compute"


def test_an_azure_meter_name_that_is_no_vm_size_is_no_instance_type():
    """x_SkuMeterName names the VM size of a Virtual Machines line ("D8ads v5", "ND96isr H100 v5") and
    the meter of any other ("NVAIE per GPU hour", "Standard Uptime SLA"). Before, every meter name was
    read as an instance type: a marketplace licence on a GPU scale set showed as machine
    nvaie_per_gpu_hour; now a meter name that is no VM size gives none."""
    def azure(row: int, meter: str) -> dict:
        return line(row, provider="Microsoft", service_name="NVIDIA AI Enterprise", charge_description=meter,
                    pricing_unit="1 Hour", pricing_quantity=Decimal(24), extra=json.dumps({"x_SkuMeterName": meter}))

    meters = ["NVAIE per GPU hour", "Standard Uptime SLA", "P10 LRS Disk", "D8ads v5", "ND96isr H100 v5", "B2s",
              "D2 v3/D2s v3"]
    classified = classify(lines_frame([azure(n, m) for n, m in enumerate(meters, 1)]), (), set(), set())
    assert classified["instance_type"].tolist() == ["", "", "", "d8ads_v5", "nd96isr_h100_v5", "b2s",
                                                    "d2_v3/d2s_v3"]
