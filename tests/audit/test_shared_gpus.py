"""Shared GPUs (METHOD §3): MIG instances and time-sliced GPUs split, never counted twice.

Fixtures are built from dcgm-exporter's own label set (its exposition template: ``gpu``, ``UUID``,
``pci_bus_id``, ``device``, ``modelName``, then ``GPU_I_PROFILE`` / ``GPU_I_ID`` on a MIG instance,
``Hostname``, and the pod labels of its Kubernetes mapping; UUID is the parent GPU's):
- MIG: one p5.48xlarge (8 × H100 80GB) whose GPU 0 is split into 3g.40gb (service a),
  2g.20gb and 1g.10gb (service b), one compute slice held by no instance; GPUs 1-7 whole, pod a-1.
- time-sliced: one g5.xlarge (1 × A10G) shared by three pods of service s through the device
  plugin's time-slicing ``replicas`` (requests sum to 3 on a 1-GPU node); the exporter copies the
  device's value to every pod.
Both are read from OpenMetrics files, and through a real local Prometheus, to the same tables.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from audit.audit_json import to_dict
from audit.case import load_case
from audit.gpumig import whole_gpu_units
from audit.gpuunits import Unit, UnitIds
from audit.ledger import NO_SAMPLE, NO_VALID_SAMPLE, UNALLOCATED
from audit.pipeline import run_audit
from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.openmetrics import OpenMetricsConnector
from tests.builders import misfits_of

GR = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
START = datetime(2024, 9, 1, tzinfo=timezone.utc)
T0 = int(START.timestamp())
HOURS = 2
FOCUS_HEADER = ("BillingAccountId,SubAccountId,ProviderName,ServiceName,ServiceCategory,ChargeCategory,"
                "ChargeDescription,ChargePeriodStart,ChargePeriodEnd,BilledCost,EffectiveCost,ListCost,"
                "BillingCurrency,PricingQuantity,PricingUnit,ResourceId,x_UsageType,Id\n")
H100 = "NVIDIA H100 80GB HBM3"
P5_HOUR = Decimal("98.3200")
G5_HOUR = Decimal("1.0060")
#: GPU 0's MIG instances: (GPU_I_ID, GPU_I_PROFILE, pod, GR_ENGINE_ACTIVE)
MIG = [("1", "3g.40gb", "a-0", "0.8"), ("2", "2g.20gb", "b-0", "0.5"), ("3", "1g.10gb", "b-1", "0.2")]
SHARED_PODS = ["s-0", "s-1", "s-2"]


def sample(name: str, labels: str, value: str, seconds: int) -> str:
    return f"{name}{{{labels}}} {value} {T0 + seconds}"


def shifted(text: str, days: int) -> str:
    """The exposition ``days`` later (a Prometheus holding several data sets keeps them apart)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("#"):
            lines.append(line)
        else:
            head, t = line.rsplit(" ", 1)
            lines.append(f"{head} {int(t) + days * 86400}")
    return "\n".join(lines) + "\n"


def dcgm_labels(node: str, gpu: int, uuid: str, model: str, pod: str, namespace: str = "ml",
                mig: tuple[str, str] | None = None) -> str:
    """dcgm-exporter's label set, in its order, with the pod mapping."""
    text = f'gpu="{gpu}",UUID="{uuid}",pci_bus_id="00000000:{gpu + 16:02X}:00.0",device="nvidia{gpu}",modelName="{model}"'
    if mig:  # a profile of None: dcgm-exporter's series without GPU_I_PROFILE
        text += (f',GPU_I_PROFILE="{mig[1]}"' if mig[1] is not None else "") + f',GPU_I_ID="{mig[0]}"'
    text += f',Hostname="{node}"'
    if pod:
        text += f',container="main",namespace="{namespace}",pod="{pod}"'
    return text


def every_15_minutes():
    return range(0, HOURS * 3600, 900)


def in_order(lines: list[str]) -> list[str]:
    return sorted(lines, key=lambda text: (text.rsplit(" ", 2)[0], int(text.rsplit(" ", 1)[1])))


def mig_metrics(util_on_slices: bool = False, profiling: bool = True, profiles: bool = True,
                requests: dict[str, str] | None = None) -> str:
    """p5.48xlarge node mig-node: GPU 0 as three MIG instances, GPUs 1-7 whole (pod a-1, 0.6).
    ``profiles`` False: the instances carry no GPU_I_PROFILE. ``requests`` (pod -> resource): the
    instances carry no pod label and those pods ask the scheduler for MIG instances (mixed strategy)."""
    lines = [sample("kube_node_info", 'node="mig-node",provider_id="aws:///us-east-1a/i-0mig"', "1", s)
             for s in (0, 3600)]
    for s in every_15_minutes():
        for pod, resource in (requests or {}).items():
            req = f'namespace="ml",pod="{pod}",container="main",node="mig-node",resource="{resource}",unit="integer"'
            lines.append(sample("kube_pod_container_resource_requests", req, "1", s))
        for instance, profile, pod, value in MIG:
            labels = dcgm_labels("mig-node", 0, "GPU-5a1c0f3e-0000-4000-8000-000000000000", H100,
                                 "" if requests else pod, mig=(instance, profile if profiles else None))
            if profiling:
                lines.append(sample(GR, labels, value, s))
            if util_on_slices:
                lines.append(sample(UTIL, labels, "90", s))
        for gpu in range(1, 8):
            uuid = f"GPU-5a1c0f3e-0000-4000-8000-00000000000{gpu}"
            lines.append(sample(GR, dcgm_labels("mig-node", gpu, uuid, H100, "a-1"), "0.6", s))
    return "\n".join(in_order(lines)) + "\n# EOF\n"


def sliced_metrics(copied: bool = True) -> str:
    """g5.xlarge node ts-node: GPU 0 time-sliced between three pods; the exporter copies one value
    to every pod (``copied``) or reports each pod's own (0.1, 0.2, 0.3)."""
    lines = [sample("kube_node_info", 'node="ts-node",provider_id="aws:///us-east-1a/i-0ts"', "1", s)
             for s in (0, 3600)]
    for s in every_15_minutes():
        for i, pod in enumerate(SHARED_PODS):
            value = "0.6" if copied else f"0.{i + 1}"
            lines.append(sample(GR, dcgm_labels("ts-node", 0, "GPU-a10g-0", "NVIDIA A10G", pod, "x"), value, s))
            req = (f'namespace="x",pod="{pod}",container="main",node="ts-node",resource="nvidia_com_gpu",'
                   f'unit="integer"')
            lines.append(sample("kube_pod_container_resource_requests", req, "1", s))
    return "\n".join(in_order(lines)) + "\n# EOF\n"


def focus(instance_type: str, resource: str, hourly: Decimal) -> str:
    rows = []
    for hour in range(HOURS):
        start, end = START + timedelta(hours=hour), START + timedelta(hours=hour + 1)
        rows.append(f"999,111,AWS,Amazon Elastic Compute Cloud,Compute,Usage,{instance_type} instance hour,"
                    f"{start:%Y-%m-%d %H:%M:%S},{end:%Y-%m-%d %H:%M:%S},{hourly},{hourly},{hourly},USD,1,Hours,"
                    f"{resource},USE1-BoxUsage:{instance_type},{hour + 1}\n")
    return FOCUS_HEADER + "".join(rows)


def write_case(folder: Path, metrics: str, bill: str, services: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bill.csv").write_text(bill)
    (folder / "metrics.om").write_text(metrics)
    (folder / "case.toml").write_text(f'''[case]
name = "shared"
window = ["2024-09-01T00:00:00Z", "2024-09-01T0{HOURS}:00:00Z"]
currency = "USD"
step = "1h"
loaded_rate = 150

[[billing]]
name = "bill"
format = "focus"
path = "bill.csv"

[[telemetry]]
name = "dcgm"
format = "openmetrics"
path = "metrics.om"

{services}''')
    return folder


MIG_SERVICES = '[services.a]\nnamespace = "ml"\npod = "re:^a-"\n\n[services.b]\nnamespace = "ml"\npod = "re:^b-"\n'
SLICED_SERVICES = '[services.s]\nnamespace = "x"\npod = "re:^s-"\n'


def mig_case(folder: Path, services: str = MIG_SERVICES, **kw) -> Path:
    return write_case(folder, mig_metrics(**kw), focus("p5.48xlarge", "i-0mig", P5_HOUR), services)


def sliced_case(folder: Path, **kw) -> Path:
    return write_case(folder, sliced_metrics(**kw), focus("g5.xlarge", "i-0ts", G5_HOUR), SLICED_SERVICES)


def by_holder(result, field: str = "paid") -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for (holder, _), group in result.groups.items():
        out[holder] = out.get(holder, Decimal(0)) + getattr(group, field)
    return out


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"))


@pytest.fixture(scope="module")
def mig(tmp_path_factory):
    return run_audit(load_case(mig_case(tmp_path_factory.mktemp("mig"))))


@pytest.fixture(scope="module")
def sliced(tmp_path_factory):
    return run_audit(load_case(sliced_case(tmp_path_factory.mktemp("sliced"))))


# ---- MIG -------------------------------------------------------------------------------------

def test_mig_conserves_to_the_cent(mig):
    paid = by_holder(mig)
    assert abs(sum(paid.values(), Decimal(0)) - P5_HOUR * HOURS) < Decimal("1e-20")
    assert cents(sum(paid.values(), Decimal(0))) == cents(P5_HOUR * HOURS)


def test_each_slice_costs_its_compute_slices(mig):
    per_gpu = P5_HOUR * HOURS / 8
    paid = by_holder(mig)
    # a: 3/7 of GPU 0 and GPUs 1-7 whole; b: 2/7 + 1/7; the free slice: 1/7, unallocated
    assert cents(paid["a"]) == cents(per_gpu * 7 + per_gpu * 3 / 7)
    assert cents(paid["b"]) == cents(per_gpu * 3 / 7)
    assert cents(paid[UNALLOCATED]) == cents(per_gpu / 7)
    assert mig.extra_gpu_nodes == frozenset()


def test_each_slice_has_its_own_activity(mig):
    per_gpu = P5_HOUR * HOURS / 8
    busy = by_holder(mig, "busy")
    assert cents(busy["a"]) == cents(per_gpu * 7 * Decimal("0.6") + per_gpu * 3 / 7 * Decimal("0.8"))
    assert cents(busy["b"]) == cents(per_gpu * (2 * Decimal("0.5") + Decimal("0.2")) / 7)
    assert busy[UNALLOCATED] == 0


def test_mig_slices_stay_apart_in_the_activity_table(tmp_path):
    table = read_openmetrics(mig_case(tmp_path / "case"))["gpu_activity"]
    gpu0 = table.loc[(table["gpu"] == "0") & (table["ts"] == pd.Timestamp(START))]
    assert sorted(gpu0["uuid"].str.rsplit("/", n=2).str[-1]) == ["1g.10gb", "2g.20gb", "3g.40gb"]
    assert sorted(gpu0["pod"]) == ["a-0", "b-0", "b-1"]


def test_gpu_util_is_not_read_on_a_mig_slice(tmp_path):
    """MIG on, profiling metrics missing: GPU 0 is unmeasured (unattributed), never GPU_UTIL."""
    only_a = MIG_SERVICES.split("\n\n")[0] + "\n"  # b's pods are seen only on the excluded samples
    result = run_audit(load_case(mig_case(tmp_path / "case", only_a, util_on_slices=True, profiling=False)))
    paid = by_holder(result)
    per_gpu = P5_HOUR * HOURS / 8
    assert cents(paid[NO_VALID_SAMPLE]) == cents(per_gpu)
    assert "b" not in paid
    assert cents(sum(paid.values(), Decimal(0))) == cents(P5_HOUR * HOURS)


#: the MIG instances asked for through the scheduler, both spellings; b-1's 1g.5gb is on no instance
MIG_REQUESTS = {"a-0": "nvidia_com_mig_3g_40gb", "b-0": "nvidia.com/mig-2g.20gb", "b-1": "nvidia_com_mig_1g_5gb"}


def unplaced_message(requests: str, unlabelled: str, sampled: str) -> str:
    """mig_request_unplaced's message on node mig-node: the ``requests`` left unplaced (profile by pod
    in which intervals), the node's ``unlabelled`` MIG instances then and its instances of those
    profiles ``sampled`` in the window."""
    return (f"node mig-node: the scheduler's MIG requests ({requests}) find no MIG instance of their profile "
            f"without a DCGM pod label on the node (its unlabelled MIG instances then: {unlabelled}; its instances "
            f"of those profiles sampled in the window: {sampled}): they hold none of its GPU time, which stays "
            "with the pod labels, the other requests and unallocated")


def test_mig_requests_hold_the_instances_of_their_profile(tmp_path):
    """No pod label on GPU 0's instances: a-0's request for a 3g.40gb holds the 3g.40gb instance (3/7),
    b-0's nvidia.com/mig-2g.20gb the 2g.20gb (2/7); the 1g.10gb no request asks for and the free slice
    are unallocated; b-1's 1g.5gb is on no instance of the node: it holds nothing and is named."""
    result = run_audit(load_case(mig_case(tmp_path / "case", requests=MIG_REQUESTS)))
    per_gpu = P5_HOUR * HOURS / 8
    paid, busy = by_holder(result), by_holder(result, "busy")
    assert paid["a"] == per_gpu * 7 + per_gpu * 3 / 7
    assert (cents(paid["b"]), cents(paid[UNALLOCATED])) == (cents(per_gpu * 2 / 7), cents(per_gpu * 2 / 7))
    assert cents(busy["b"]) == cents(per_gpu * 2 / 7 * Decimal("0.5"))
    assert cents(sum(paid.values(), Decimal(0))) == cents(P5_HOUR * HOURS)
    (unplaced,) = misfits_of(result.fit.misfits, "mig_request_unplaced")
    assert unplaced.message == unplaced_message(
        "1g.5gb by ml/b-1 in 2 intervals (2024-09-01 00:00 – 2024-09-01 02:00 UTC)", "1g.10gb", "none")
    assert unplaced.nearest == ("1g.10gb",)
    assert not misfits_of(result.fit.misfits, "gpu_placement_assumed")
    assert [n for n in to_dict(result)["notes"] if "requested through the scheduler" in n] == [
        "MIG instances requested through the scheduler on node mig-node (1g.5gb by ml/b-1; 2g.20gb by ml/b-0; "
        "3g.40gb by ml/a-0): each request holds an instance of its profile without a DCGM pod label on the "
        "node, that instance's compute slices of the GPU (where none does: fit mig_request_unplaced)."]


def test_a_whole_gpu_request_holds_no_leftover_mig_instance(tmp_path):
    """Mixed strategy: a-0 asks for a 3g.40gb (nvidia_com_mig_3g_40gb), b-0 for a whole GPU
    (nvidia_com_gpu); GPUs 1-7, the node's whole GPUs, are pod a-1's by label, so no whole GPU is left
    for b-0. Before: b-0's request was pooled over the leftover 2g.20gb and 1g.10gb instances (3/7 of
    GPU 0's 24.58: 10.53) and named as exceeding them, only the free slice unallocated (3.51). Now a
    whole-GPU request holds only GPUs not in MIG mode: b-0 holds none of them, and the 2g.20gb, the
    1g.10gb and the free slice (4/7 of GPU 0: 14.05) are unallocated, and its request is named."""
    result = run_audit(load_case(mig_case(tmp_path / "case", requests={"a-0": "nvidia_com_mig_3g_40gb",
                                                                       "b-0": "nvidia_com_gpu"})))
    per_gpu = P5_HOUR * HOURS / 8
    paid = by_holder(result)
    assert paid["a"] == per_gpu * 7 + per_gpu * 3 / 7
    assert "b" not in paid
    assert cents(paid[UNALLOCATED]) == cents(per_gpu * 4 / 7) == Decimal("14.05")
    assert cents(sum(paid.values(), Decimal(0))) == cents(P5_HOUR * HOURS)
    assert not [m for m in result.fit.misfits if m.kind == "gpu_requests_exceed_gpus"]
    (unplaced,) = [m for m in result.fit.misfits if m.kind == "whole_gpu_request_unplaced"]
    assert unplaced.message == (
        "node mig-node: the scheduler's whole-GPU requests (nvidia.com/gpu) by ml/b-0 in 2 intervals (2024-09-01 "
        "00:00 – 2024-09-01 02:00 UTC) find no GPU outside MIG mode without a DCGM pod label on the node (its "
        "unlabelled MIG instances then: 1g.10gb, 2g.20gb, which only a request for their profile holds under the "
        "mixed strategy: unallocated): they hold none of its observed GPU time, only its GPUs billed without a "
        "sample where it has them")
    assert unplaced.nearest == ("1g.10gb", "2g.20gb")


def test_whole_gpu_requests_hold_mig_instances_only_under_the_single_strategy():
    """Every GPU of a node in MIG mode and no profile asked for (the single strategy: nvidia.com/gpu
    is a MIG instance): a whole-GPU request may hold the instances, as before. A whole GPU beside them,
    or a request for a profile (the mixed strategy): only the whole GPU; the instances stay unallocated."""
    slice_1, slice_2 = (Unit(UnitIds("0", f"GPU-0/{i}/3g.40gb"), Decimal(3) / 7, Decimal(0)) for i in (1, 2))
    whole = Unit(UnitIds("1", "GPU-1"), 1, Decimal(0))
    gpu, mig = SimpleNamespace(mig_profile=""), SimpleNamespace(mig_profile="3g.40gb")
    assert whole_gpu_units([slice_1, slice_2], [slice_1, slice_2], [gpu]) == ([slice_1, slice_2], set())
    assert whole_gpu_units([slice_2], [slice_1, slice_2], [gpu, mig]) == ([], {id(slice_2)})
    assert whole_gpu_units([slice_2, whole], [slice_1, slice_2, whole], [gpu]) == ([whole], {id(slice_2)})
    assert whole_gpu_units([slice_2, whole], [slice_1, slice_2, whole], None) == ([], {id(slice_2), id(whole)})


#: every request on an instance GPU 0 has
MIG_PLACED = {"a-0": "nvidia_com_mig_3g_40gb", "b-0": "nvidia.com/mig-2g.20gb", "b-1": "nvidia_com_mig_1g_10gb"}


def without_gpu0_samples(folder: Path, instance: str) -> Path:
    """The MIG case with ``MIG_PLACED`` whose GPU 0 instances matching ``instance`` (GPU_I_ID="1", or
    GPU_I_ID for all) have no sample in the second hour (the exporter silent on them)."""
    case = mig_case(folder, requests=MIG_PLACED)
    metrics = case / "metrics.om"
    metrics.write_text("\n".join(line for line in metrics.read_text().splitlines()
                                 if instance not in line or int(line.rsplit(" ", 1)[1]) < T0 + 3600) + "\n")
    return case


def test_mig_requests_are_not_unplaced_where_no_mig_instance_was_sampled(tmp_path):
    """GPU 0's instances unsampled in the second hour: that hour of GPU 0 is unmeasured (no activity
    sample), and the requests are not named unplaced (before: mig_request_unplaced named all three in
    "1 interval (2024-09-01 01:00 – 2024-09-01 01:00 UTC)", its unlabelled MIG instances "none")."""
    result = run_audit(load_case(without_gpu0_samples(tmp_path / "case", "GPU_I_ID")))
    assert not misfits_of(result.fit.misfits, "mig_request_unplaced")
    assert by_holder(result)[NO_SAMPLE] == P5_HOUR / 8


def test_mig_request_unplaced_names_the_instances_of_its_profile_sampled_elsewhere(tmp_path):
    """The 3g.40gb instance unsampled in the second hour (the others sampled): a-0's request is
    unplaced then, and the warning names that instance, sampled in the first hour, as the nearest."""
    result = run_audit(load_case(without_gpu0_samples(tmp_path / "case", 'GPU_I_ID="1"')))
    (unplaced,) = misfits_of(result.fit.misfits, "mig_request_unplaced")
    assert unplaced.message == unplaced_message(
        "3g.40gb by ml/a-0 in 1 interval (2024-09-01 01:00 – 2024-09-01 02:00 UTC)", "1g.10gb, 2g.20gb",
        "GPU 0 instance 1 (3g.40gb) in 1 interval (2024-09-01 00:00 – 2024-09-01 01:00 UTC)")
    assert unplaced.nearest == ("GPU 0 instance 1 (3g.40gb)",)


def test_mig_instances_of_unknown_profile_share_the_gpu_equally(tmp_path):
    """No GPU_I_PROFILE on GPU 0's instances: their slices are unknown, so the three share the GPU
    equally (assumed, warned of), and none of it becomes "no workload held"."""
    result = run_audit(load_case(mig_case(tmp_path / "case", profiles=False)))
    per_gpu = P5_HOUR * HOURS / 8
    paid = by_holder(result)
    assert (cents(paid["a"]), cents(paid["b"])) == (cents(per_gpu * 7 + per_gpu / 3), cents(per_gpu * 2 / 3))
    assert UNALLOCATED not in paid
    (unknown,) = misfits_of(result.fit.misfits, "mig_profile_unknown")
    assert unknown.message == (
        "node mig-node GPU 0: the MIG instances (GPU_I_ID) 1, 2, 3 carry no readable GPU_I_PROFILE in 2 "
        "intervals (2024-09-01 00:00 – 2024-09-01 02:00 UTC), so their compute slices are unknown: the slices "
        "the instances of known profile leave were split equally among them (assumed, no slice free; METHOD §3 "
        "splits a shared GPU evenly where nothing measures each part), held by the pods a-0, b-0, b-1")
    assert unknown.nearest == ("a-0", "b-0", "b-1")


def test_mig_note(mig):
    notes = [n for n in to_dict(mig)["notes"] if "MIG" in n]
    assert notes and "GPU 0 on node mig-node" in notes[0] and "free slice" in notes[0]


# ---- time-slicing ----------------------------------------------------------------------------

def test_time_sliced_gpu_conserves_and_counts_busy_once(sliced):
    paid, busy = by_holder(sliced), by_holder(sliced, "busy")
    assert cents(sum(paid.values(), Decimal(0))) == cents(G5_HOUR * HOURS)
    assert cents(paid["s"]) == cents(G5_HOUR * HOURS)
    assert cents(busy["s"]) == cents(G5_HOUR * HOURS * Decimal("0.6"))  # once, not 3 × 0.6
    assert sliced.extra_gpu_nodes == frozenset()


def test_time_sliced_split_evenly_per_pod(sliced):
    rows = sliced.telemetry.activity
    first = rows.loc[rows["ts"] == pd.Timestamp(START)]
    assert sorted(first["pod"]) == SHARED_PODS
    groups = [g for (holder, ts), g in sliced.groups.items() if holder == "s"]
    assert all(g.pods == set(SHARED_PODS) for g in groups)
    assert all(g.gpus == 1 for g in groups)


def test_time_sliced_note(sliced):
    notes = [n for n in to_dict(sliced)["notes"] if "time-sliced" in n]
    assert notes == ["GPU 0 on node ts-node time-sliced between 3 pods (s-0, s-1, s-2): "
                     "split evenly (the exporter reports one value per device)"]


def test_time_sliced_measured_per_pod_splits_by_activity(tmp_path):
    result = run_audit(load_case(sliced_case(tmp_path / "case", copied=False)))
    busy = by_holder(result, "busy")
    assert cents(busy["s"]) == cents(G5_HOUR * HOURS * Decimal("0.6"))  # 0.1 + 0.2 + 0.3
    notes = [n for n in to_dict(result)["notes"] if "time-sliced" in n]
    assert notes and "share of the GPU's activity" in notes[0]


# ---- helpers ---------------------------------------------------------------------------------

def read_openmetrics(folder: Path) -> dict[str, pd.DataFrame]:
    ctx = ReadContext(START, START + timedelta(hours=HOURS), "USD", 3600)
    spec = SourceSpec("t", "telemetry", "openmetrics", folder / "metrics.om", {})
    return OpenMetricsConnector(spec, ctx).read().tables


# ---- the stored fixtures are the builder's output --------------------------------------------

DATA = Path(__file__).resolve().parents[1] / "data" / "shared_gpus"


def stored_fixtures(folder: Path) -> None:
    """Write both cases (what tests/data/shared_gpus holds): ``python -m tests.audit.test_shared_gpus``."""
    mig_case(folder / "mig")
    sliced_case(folder / "time_sliced")


@pytest.mark.parametrize("name", ["mig", "time_sliced"])
def test_stored_fixtures_are_the_builders(tmp_path, name):
    stored_fixtures(tmp_path)
    for file in ("case.toml", "bill.csv", "metrics.om"):
        assert (DATA / name / file).read_text() == (tmp_path / name / file).read_text(), file


def test_stored_fixtures_run(tmp_path):
    for name, total in (("mig", P5_HOUR), ("time_sliced", G5_HOUR)):
        result = run_audit(load_case(DATA / name))
        assert cents(sum(by_holder(result).values(), Decimal(0))) == cents(total * HOURS)


if __name__ == "__main__":
    stored_fixtures(DATA)


def test_an_a30_has_four_compute_slices():
    from types import SimpleNamespace

    from audit.gpuunits import _mig_units
    from connectors.telemetry.families import mig_compute_slices

    assert mig_compute_slices(["3g.40gb", "1g.10gb"]) == 7 and mig_compute_slices(["2g.12gb", "1g.6gb"]) == 4
    rows = [SimpleNamespace(uuid=f"GPU-a30/{i}/{p}", busy_fraction=0.5, pod=f"p{i}", node="n", gpu=0)
            for i, p in ((1, "2g.12gb"), (2, "1g.6gb"))]
    units, sharing = _mig_units(rows)
    assert [u.weight for u in units] == [Decimal(2) / 4, Decimal(1) / 4, Decimal(1) / 4]
    assert "of 4" in sharing.method and "1 free slice" in sharing.method
