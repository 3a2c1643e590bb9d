"""A Slurm cluster end to end: two p4d.24xlarge (8 GPUs each, 32.7726 an hour, 4.096575 a GPU-hour)
billed 2026-09-01 00:00-06:00, nvidia-smi logs of both nodes (no pod labels), and a ``sacct -P``
export of the jobs on them (METHOD §3/§4).

The export lists every job on gpu01 and gpu02 over the window: the GPU time of a GPU no job held is
unallocated platform overhead, not of unknown allocation. Before, gpu01 02:00-03:00 and gpu02
00:00-01:00 (no job ran) were ``allocation_unknown``: 16 GPU-hours, 65.55 unattributed.
"""
from __future__ import annotations

import csv
import gzip
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from audit.audit_json import to_dict
from audit.case import load_case
from audit.pipeline import run_audit
from tests.paths import DEMO

T0 = datetime(2026, 9, 1)
PRICE = "32.7726"
NODES = {"gpu01": "i-0aaaaaaaaaaaa0001", "gpu02": "i-0aaaaaaaaaaaa0002"}
SACCT = """JobID|JobName|User|Account|Partition|NodeList|AllocTRES|Elapsed|Start|End|State
1001|train|alice|teamA|gpu|gpu01|billing=16,cpu=32,gres/gpu=4,mem=200G,node=1|04:00:00|2026-08-31T22:00:00|2026-09-01T02:00:00|COMPLETED
1001.batch|batch||teamA||gpu01|cpu=32,gres/gpu=4,mem=200G,node=1|04:00:00|2026-08-31T22:00:00|2026-09-01T02:00:00|COMPLETED
1002_1|sweep|bob|teamB|gpu|gpu02|billing=8,cpu=16,gres/gpu:a100=2,gres/gpu=2,mem=100G,node=1|02:30:00|2026-09-01T01:00:00|2026-09-01T03:30:00|COMPLETED
1002_2|sweep|bob|teamB|gpu|gpu02|billing=8,cpu=16,gres/gpu:a100=2,gres/gpu=2,mem=100G,node=1|01:30:00|2026-09-01T03:30:00|2026-09-01T05:00:00|COMPLETED
1002_[3-5]|sweep|bob|teamB|gpu|None assigned||00:00:00|Unknown|Unknown|PENDING
1003|infer|carol|teamC|gpu|gpu01|billing=8,cpu=16,gres/gpu:a100=2,mem=100G,node=1|04:30:00|2026-09-01T03:00:00|Unknown|RUNNING
1004|big|dave|teamD|gpu|gpu[01-02]|billing=64,cpu=64,gres/gpu=8,mem=400G,node=2|03:00:00|2026-09-01T04:00:00|2026-09-01T07:00:00|COMPLETED
"""
CASE = """[case]
name = "slurm"
window = ["2026-09-01T00:00:00Z", "2026-09-01T06:00:00Z"]
currency = "USD"
step = "1h"
loaded_rate = 150

[[billing]]
name = "aws"
format = "focus"
path = "billing/focus.csv"

[[telemetry]]
name = "slurm"
format = "sacct"
path = "telemetry/sacct.txt"
""" + "".join(f"""
[[telemetry]]
name = "smi{n}"
format = "nvidia_smi"
path = "telemetry/smi_{node}.csv"
node = "{node}"
""" for n, node in enumerate(NODES, 1)) + "\n[nodes]\n" + "".join(f'"{node}" = "{vm}"\n' for node, vm in NODES.items()) + "".join(
    f'\n[services.{name}]\nnamespace = "gpu"\npod = "re:^[0-9_]+-{name}$"\n' for name in ("train", "sweep", "infer", "big"))


def focus_csv(path: Path) -> None:
    """Six on-demand hours of each node, from the demo's FOCUS export (a g6e line, re-priced)."""
    with gzip.open(DEMO / "billing" / "focus_2026-09.csv.gz", "rt") as src:
        rows = csv.reader(src)
        header = next(rows)
        template = next(row for row in rows if "g6e.12xlarge" in row[header.index("x_UsageType")])
    at = header.index
    with path.open("w", newline="") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_ALL)
        writer.writerow(header)
        for n, (hour, vm) in enumerate(((h, vm) for vm in NODES.values() for h in range(6)), 1):
            row = list(template)
            start = T0 + timedelta(hours=hour)
            row[at("ChargePeriodStart")], row[at("ChargePeriodEnd")] = (
                f"{t:%Y-%m-%d %H:%M:%S}" for t in (start, start + timedelta(hours=1)))
            for column in ("BilledCost", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "ListCost",
                           "ListUnitPrice"):
                row[at(column)] = PRICE
            row[at("ChargeDescription")] = f"${PRICE} per On Demand Linux p4d.24xlarge Instance Hour"
            row[at("x_UsageType")], row[at("ResourceId")], row[at("Id")] = "USE1-BoxUsage:p4d.24xlarge", vm, str(n)
            writer.writerow(["" if value == "NULL" else value for value in row])


def smi_csv(path: Path, node: str) -> None:
    """Eight GPUs polled every minute at 50 %."""
    lines = ["timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], memory.used [MiB], power.draw [W]"]
    for minute in range(6 * 60):
        t = T0 + timedelta(minutes=minute, seconds=10)
        lines += [f"{t:%Y/%m/%d %H:%M:%S}.000, NVIDIA A100-SXM4-40GB, 00000000:{g:02X}:00.0, GPU-{node}-{g:04d}, {g}, "
                  f"50 %, 1000 MiB, 300.00 W" for g in range(8)]
    path.write_text("\n".join(lines) + "\n")


def slurm_case(folder: Path, sacct: str) -> Path:
    """The case folder, its sacct export ``sacct``."""
    (folder / "billing").mkdir(parents=True)
    (folder / "telemetry").mkdir()
    focus_csv(folder / "billing" / "focus.csv")
    for node in NODES:
        smi_csv(folder / "telemetry" / f"smi_{node}.csv", node)
    (folder / "telemetry" / "sacct.txt").write_text(sacct)
    (folder / "case.toml").write_text(CASE)
    return folder


def without_elapsed(text: str) -> str:
    """The export without its Elapsed column."""
    return "".join("|".join(f for i, f in enumerate(line.split("|")) if i != 7) + "\n" for line in text.splitlines())


def parts(doc: dict) -> dict:
    """(bucket, part, service) -> (amount, GPU-hours)."""
    return {(bucket, p["name"], p["service"]): (p["amount"], p["gpu_hours"])
            for bucket, found in doc["buckets"].items() for p in found["parts"]}


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> dict:
    """audit.json of the case with the export as sacct writes it, and without its Elapsed column."""
    return {name: to_dict(run_audit(load_case(slurm_case(tmp_path_factory.mktemp(name), text))))
            for name, text in (("elapsed", SACCT), ("no_elapsed", without_elapsed(SACCT)))}


@pytest.mark.parametrize("export", ["elapsed", "no_elapsed"])
def test_gpus_no_job_held_on_nodes_the_export_lists_are_unallocated(audited, export):
    """58 GPU-hours no job held (16 of them before unknown) are unallocated: 237.60; platform overhead
    77 GPU-hours, 315.44 (before 249.89); unattributed 19 GPU-hours, 77.83 (before 143.38). Without
    Elapsed the running job 1003 still holds its 6 GPU-hours, to the window end."""
    doc = audited[export]
    found = parts(doc)
    assert found[("platform_overhead", "unallocated", None)] == ("237.60", "58.00")
    assert not [key for key in found if key[1] == "allocation_unknown"]
    assert found[("platform_overhead", "idle_not_separated", "infer")] == ("12.29", "3.00")
    assert found[("unattributed", "no_kernel_profile", "infer")] == ("12.29", "3.00")
    assert [(doc["buckets"][b]["amount"]) for b in ("platform_overhead", "unattributed")] == ["315.44", "77.83"]
    assert Decimal(doc["total"]) == Decimal("393.27")


def test_a_running_job_without_elapsed_is_counted_to_the_window_end_and_said_so(audited):
    """Before, its elapsed was 0: job 1003's 6 GPU-hours vanished (its GPUs' time unknown or
    unallocated) with nothing said."""
    slurm = next(s for s in audited["no_elapsed"]["sources"] if s["name"] == "slurm")
    assert slurm["notes"] == [{"row": 7, "column": "End", "note": (
        "job 1003 (RUNNING) has no End and no Elapsed: counted up to the window end 2026-09-01T06:00:00Z, "
        "6.00 GPU-hours (the export does not say when it was taken)")}]
    assert "notes" not in next(s for s in audited["elapsed"]["sources"] if s["name"] == "slurm")
