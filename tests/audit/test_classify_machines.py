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
