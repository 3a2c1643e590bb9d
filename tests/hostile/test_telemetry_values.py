"""Telemetry values that are wrong, not malformed: excluded, counted per source, never moving money.

Before: a DCGM ``GR_ENGINE_ACTIVE`` of 7.5 or -0.5 was clipped into the busy fraction and moved
model compute by about 28 %; NaN / +Inf samples were dropped without a count; dcgmi and nvidia-smi
refused a reading out of range while the other readers took it. Now every reader (OpenMetrics
files, query_range dumps, a real Prometheus, dcgmi, nvidia-smi) excludes kernel-activity samples
out of range or not finite and counter samples not finite or negative, counts them per source,
metric and reason (audit.json ``telemetry.excluded_samples``, page 1 of the report), takes an
interval's busy fraction from its valid samples and leaves an interval with none unattributed
(part ``no_valid_activity_sample``). A counter that drops to a value of 0 or more is a restart,
counted under ``telemetry.counter_resets``.
"""
from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from audit.audit_json import to_dict
from audit.case import load_case
from audit.pipeline import run_audit
from audit.render import render
from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.dcgmi import DcgmiConnector
from connectors.telemetry.nvidia_smi import NvidiaSmiConnector
from connectors.telemetry.openmetrics import OpenMetricsConnector
from connectors.telemetry.prometheus import PrometheusConnector
from tests.builders import CURRENT, gpu_events, host_events, query_range_dump, trace_doc, write_trace
from tests.connectors.telemetry.test_prometheus import assert_same_tables
from tests.servers.prometheus import PromServer, backfill

GR = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
REQUESTS = "vllm:request_success_total"
START = datetime(2024, 9, 1, tzinfo=timezone.utc)
T0 = int(START.timestamp())
GPU = 'Hostname="gpu-node-1",gpu="0",UUID="GPU-1",modelName="NVIDIA A10G",pod="s-0",namespace="x",container="vllm"'
VLLM = 'model_name="m",namespace="x",pod="s-0"'
FOCUS_HEADER = ("BillingAccountId,SubAccountId,ProviderName,ServiceName,ServiceCategory,ChargeCategory,"
                "ChargeDescription,ChargePeriodStart,ChargePeriodEnd,BilledCost,EffectiveCost,ListCost,"
                "BillingCurrency,PricingQuantity,PricingUnit,ResourceId,x_UsageType,Id\n")
BAD = [(300, "7.5"), (1200, "-0.5"), (2100, "NaN"), (3000, "+Inf")]


def om_line(name: str, labels: str, value: str, seconds: int, day: int = 0) -> str:
    return f"{name}{{{labels}}} {value} {T0 + day * 86400 + seconds}"


def metrics(bad: list[tuple[int, str]] = (), hour_two: str = "0.6",
            counters: list[tuple[int, str]] | None = None, day: int = 0, eof: bool = True) -> str:
    """Two hours of one A10G: GR_ENGINE_ACTIVE 0.6 every 15 minutes (hour 2's value given), the
    node's provider id, and a request counter; ``bad`` samples are added in hour 1. ``day``: days
    after START (the Prometheus data sets must not meet)."""
    lines = [om_line("kube_node_info", 'node="gpu-node-1",provider_id="aws:///us-east-1a/i-0abc"', "1", s, day)
             for s in (0, 3600)]
    lines += [om_line(GR, GPU, "0.6", s, day) for s in (0, 900, 1800, 2700)]
    lines += [om_line(GR, GPU, hour_two, s, day) for s in (3600, 4500, 5400, 6300)]
    lines += [om_line(GR, GPU, value, s, day) for s, value in bad]
    for s, value in counters or [(0, "0"), (1800, "40"), (3600, "80"), (5400, "120"), (7199, "160")]:
        lines.append(om_line(REQUESTS, VLLM, value, s, day))
    return "\n".join(in_order(lines)) + ("\n# EOF\n" if eof else "\n")


def in_order(lines: list[str]) -> list[str]:
    """Each series' samples in time order (promtool drops a sample older than its series' last)."""
    return sorted(lines, key=lambda text: (text.rsplit(" ", 2)[0], int(text.rsplit(" ", 1)[1])))


def focus_line(hour: int, row: int) -> str:
    start, end = START + timedelta(hours=hour), START + timedelta(hours=hour + 1)
    return (f"999,111,AWS,Amazon Elastic Compute Cloud,Compute,Usage,g5.xlarge instance hour,"
            f"{start:%Y-%m-%d %H:%M:%S},{end:%Y-%m-%d %H:%M:%S},1.006,1.006,1.006,USD,1,Hours,i-0abc,"
            f"USE1-BoxUsage:g5.xlarge,{row}\n")


def case(folder: Path, om: str, fmt: str = "openmetrics", source: str | None = None) -> Path:
    """A two-hour case: one g5.xlarge billed hourly, its telemetry, a kernel profile of service s."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bill.csv").write_text(FOCUS_HEADER + focus_line(0, 1) + focus_line(1, 2))
    (folder / "metrics.om").write_text(om)
    path = "metrics.om"
    if fmt == "prom_dump":
        path = query_range_dump(folder / "metrics.om", folder / "dump.json").name
    write_trace(folder, trace_doc(gpu_events(CURRENT) + host_events(CURRENT)), "trace.json")
    telemetry = source or f'format = "{fmt}"\npath = "{path}"\n'
    (folder / "case.toml").write_text(f'''[case]
name = "values"
window = ["2024-09-01T00:00:00Z", "2024-09-01T02:00:00Z"]
currency = "USD"
step = "1h"
loaded_rate = 150

[[billing]]
name = "bill"
format = "focus"
path = "bill.csv"

[[telemetry]]
name = "dcgm"
{telemetry}
[[profiles]]
name = "p"
format = "kineto"
path = "trace.json"
service = "s"
requests = 16

[services.s]
namespace = "x"
pod = "re:^s-"
''')
    return folder


def audit(folder: Path) -> dict:
    return to_dict(run_audit(load_case(folder)))


def part(document: dict, bucket: str, name: str) -> Decimal:
    return sum((Decimal(p["amount"]) for p in document["buckets"][bucket]["parts"] if p["name"] == name),
               Decimal(0))


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict:
    return audit(case(tmp_path_factory.mktemp("clean"), metrics()))


@pytest.fixture(scope="module")
def spoiled(tmp_path_factory) -> dict:
    return audit(case(tmp_path_factory.mktemp("spoiled"), metrics(BAD)))


def excluded(document: dict) -> dict[str, tuple]:
    return {e["reason"]: (e["source"], e["metric"], e["count"], e["expected"], e["example"])
            for e in document["telemetry"]["excluded_samples"]}


def test_bad_samples_are_excluded_counted_and_move_no_money(clean, spoiled):
    assert clean["telemetry"]["excluded_samples"] == []
    assert part(clean, "model_compute", "kernel_active") > 0
    for bucket in ("model_compute", "serving_path", "platform_overhead", "unattributed"):
        assert spoiled["buckets"][bucket] == clean["buckets"][bucket], bucket
    assert spoiled["gpu_split"] == clean["gpu_split"]
    assert excluded(spoiled) == {
        "out of range": ("dcgm (openmetrics)", GR, 2, "0 to 1", "7.5"),
        "not finite": ("dcgm (openmetrics)", GR, 2, "0 to 1", "NaN")}
    assert spoiled["telemetry"]["excluded_samples"][0]["first_at"] == "2024-09-01T00:35:00Z"


def test_page_one_says_what_was_excluded(spoiled, tmp_path):
    render(spoiled, tmp_path, ["html", "pdf"])
    html = (tmp_path / "report.html").read_text()
    assert "Telemetry samples excluded" in html
    page1 = subprocess.run(["pdftotext", "-f", "1", "-l", "1", str(tmp_path / "report.pdf"), "-"],
                           capture_output=True, text=True, check=True).stdout
    flat = " ".join(page1.split())
    assert f"2 {GR} samples from source dcgm (openmetrics) were out of range (expected 0 to 1, e.g. 7.5) " \
           "and excluded." in flat
    assert f"2 {GR} samples from source dcgm (openmetrics) were not finite (e.g. NaN) and excluded." in flat


def test_an_interval_whose_samples_are_all_bad_is_unattributed(clean, tmp_path):
    document = audit(case(tmp_path, metrics(hour_two="7.5")))
    lost = [p for p in document["buckets"]["unattributed"]["parts"] if p["name"] == "no_valid_activity_sample"]
    assert len(lost) == 1 and lost[0]["amount"] == "1.01" and lost[0]["gpu_hours"] == "1.00"
    assert "every kernel-activity sample was excluded" in lost[0]["reason"]
    assert GR in lost[0]["source"]
    assert excluded(document) == {"out of range": ("dcgm (openmetrics)", GR, 4, "0 to 1", "7.5")}
    assert part(document, "model_compute", "kernel_active") < part(clean, "model_compute", "kernel_active")
    assert Decimal(document["total"]) == Decimal(clean["total"])
    render(document, tmp_path / "out", ["html"])
    assert "No valid kernel-activity sample" in (tmp_path / "out" / "report.html").read_text()


def test_the_same_through_a_query_range_dump(spoiled, tmp_path):
    document = audit(case(tmp_path, metrics(BAD), fmt="prom_dump"))
    assert document["buckets"] == spoiled["buckets"]
    assert {r: (s.replace("prom_dump", "openmetrics"), *rest) for r, (s, *rest) in excluded(document).items()} \
        == excluded(spoiled)


def read_om(path: Path, cls=OpenMetricsConnector, **options):
    ctx = ReadContext(START, START + timedelta(hours=2), "USD", 3600)
    return cls(SourceSpec("t", "telemetry", cls.format_name, path, options), ctx).read()


def test_gpu_util_over_100_is_excluded(tmp_path):
    labels = GPU.replace('UUID="GPU-1"', 'UUID="GPU-2"')
    path = tmp_path / "util.om"
    path.write_text("\n".join([om_line(UTIL, labels, "40", 0), om_line(UTIL, labels, "150", 60),
                               om_line(UTIL, labels, "-Inf", 120)]) + "\n# EOF\n")
    frame = read_om(path)
    assert frame.tables["gpu_activity"]["busy_fraction"].tolist() == [0.4]
    table = frame.tables["excluded_samples"].set_index("reason")
    assert table.loc["out of range", ["metric", "count", "expected", "example"]].tolist() == [UTIL, 1, "0 to 100", "150.0"]
    assert table.loc["not finite", ["count", "example"]].tolist() == [1, "-Inf"]


def test_negative_counter_value_and_a_reset(tmp_path):
    # 0 → 40 → -3 (excluded) → 80 → reset to 5 → 45: increases 40 + 40 + 5 + 40 = 125
    counters = [(0, "0"), (1800, "40"), (2400, "-3"), (3600, "80"), (4000, "5"), (5400, "45"), (6000, "NaN")]
    document = audit(case(tmp_path, metrics(counters=counters)))
    assert document["services"]["s"]["requests"] == 125
    assert excluded(document) == {
        "negative counter value": ("dcgm (openmetrics)", "vllm:request_success", 1, "a finite value of 0 or more", "-3.0"),
        "not finite": ("dcgm (openmetrics)", "vllm:request_success", 1, "a finite value of 0 or more", "NaN")}
    assert document["telemetry"]["counter_resets"] == [
        {"source": "dcgm (openmetrics)", "metric": "vllm:request_success", "resets": 1}]
    render(document, tmp_path / "out", ["html"])
    html = (tmp_path / "out" / "report.html").read_text()
    assert "1 vllm:request_success sample from source dcgm (openmetrics) was a negative counter value" in html


DMON = """#Entity   GRACT   SMACT   GPUTL
ID
GPU 0     0.600   0.150   90
GPU 0     7.500   0.310   91
GPU 0     0.600   0.480   97
GPU 0     -0.500  0.480   97
GPU 0     nan     0.480   97
"""


def test_dcgmi_out_of_range_is_excluded_not_refused(tmp_path):
    path = tmp_path / "dmon.txt"
    path.write_text(DMON)
    frame = read_om(path, DcgmiConnector, start="2024-09-01T00:00:00Z", interval_ms=60000, node="gpu-node-1")
    assert frame.tables["gpu_activity"]["busy_fraction"].tolist() == [pytest.approx(0.6)]
    table = frame.tables["excluded_samples"].set_index("reason")
    assert table.loc["out of range", ["metric", "count", "example"]].tolist() == ["dcgmi GRACT", 2, "7.5"]
    assert table.loc["not finite", "count"] == 1


def test_dcgmi_in_a_case_leaves_the_money_where_valid_samples_put_it(tmp_path):
    good = case(tmp_path / "good", metrics(), source='format = "dcgmi"\npath = "dmon.txt"\n'
                'start = "2024-09-01T00:00:00Z"\ninterval_ms = 900000\nnode = "gpu-node-1"\n')
    polls = "".join(f"GPU 0     {v}   0.1   50\n" for v in ["0.600"] * 8)
    (good / "dmon.txt").write_text("#Entity   GRACT   SMACT   GPUTL\n" + polls)
    bad = case(tmp_path / "bad", metrics(), source='format = "dcgmi"\npath = "dmon.txt"\n'
               'start = "2024-09-01T00:00:00Z"\ninterval_ms = 450000\nnode = "gpu-node-1"\n')
    polls = "".join(f"GPU 0     {v}   0.1   50\n" for v in ["0.600", "7.500"] * 8)
    (bad / "dmon.txt").write_text("#Entity   GRACT   SMACT   GPUTL\n" + polls)
    clean_doc, spoiled_doc = audit(good), audit(bad)
    assert spoiled_doc["gpu_split"] == clean_doc["gpu_split"]
    assert excluded(spoiled_doc) == {"out of range": ("dcgm (dcgmi)", "dcgmi GRACT", 8, "0 to 1", "7.5")}


SMI = """timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], memory.used [MiB]
2024/09/01 00:00:10.000, NVIDIA A10G, 00000000:18:00.0, GPU-1, 0, 40 %, 100 MiB
2024/09/01 00:00:40.000, NVIDIA A10G, 00000000:18:00.0, GPU-1, 0, 150 %, 100 MiB
2024/09/01 00:01:10.000, NVIDIA A10G, 00000000:18:00.0, GPU-1, 0, [N/A], 100 MiB
2024/09/01 00:01:40.000, NVIDIA A10G, 00000000:18:00.0, GPU-1, 0, 60 %, 100 MiB
2024/09/01 01:00:10.000, NVIDIA A10G, 00000000:18:00.0, GPU-1, 0, 250 %, 100 MiB
"""


def test_nvidia_smi_over_100_is_excluded_not_refused(tmp_path):
    path = tmp_path / "smi.csv"
    path.write_text(SMI)
    frame = read_om(path, NvidiaSmiConnector, node="gpu-node-1")
    activity = frame.tables["gpu_activity"]
    assert activity["busy_fraction"].tolist() == [pytest.approx(0.5)]  # 40 and 60; [N/A] is no sample
    table = frame.tables["excluded_samples"]
    assert table[["metric", "reason", "count", "example"]].values.tolist() == [
        ["nvidia-smi utilization.gpu", "out of range", 2, "150.0"]]
    unmeasured = frame.tables["unmeasured_intervals"]
    assert unmeasured["ts"].tolist() == [START + timedelta(hours=1)]


def test_audit_json_stays_json(spoiled):
    text = json.dumps(spoiled, allow_nan=False)
    assert '"example": "NaN"' in text


# ---- the same through a real Prometheus (promtool-backfilled, on 127.0.0.1) ---------------------

COUNTERS = [(0, "0"), (1800, "40"), (2400, "-3"), (3600, "80"), (4000, "5"), (5400, "45"), (6000, "NaN")]
UTIL_LINES = [(0, "40"), (60, "150"), (120, "-Inf"), (3600, "250"), (3700, "NaN")]
# day 4: +Inf inside an hour whose minimum, last value and resets say nothing of it (only the sum
# does), then finite values whose sum overflows; day 5: a negative first sample, no reset (only the
# minimum shows it)
INF_COUNTERS = [(0, "0"), (1800, "40"), (3000, "+Inf"), (3600, "80"), (5400, "1e308"), (6000, "1.7e308")]
DAYS = {0: {"bad": BAD}, 1: {"hour_two": "7.5"}, 2: {"counters": COUNTERS}, 3: {"bad": [(5000, "-Inf")]},
        4: {"counters": INF_COUNTERS}, 5: {"counters": [(0, "-5"), (1800, "0"), (3600, "10"), (5400, "20")]}}


def day_metrics(day: int) -> str:
    text = metrics(day=day, eof=False, **DAYS[day])
    if day == 3:  # a GPU reporting only GPU_UTIL, on the same node
        labels = GPU.replace('gpu="0",UUID="GPU-1"', 'gpu="1",UUID="GPU-2"')
        text += "\n".join(om_line(UTIL, labels, v, s, day) for s, v in UTIL_LINES) + "\n"
    return text + "# EOF\n"


@pytest.fixture(scope="module")
def values_prom(tmp_path_factory):
    """A Prometheus of its own holding each day's samples (NaN, ±Inf and negatives included)."""
    folder = tmp_path_factory.mktemp("prom-values")
    files = []
    for day in DAYS:
        files.append(folder / f"day{day}.om")
        files[-1].write_text(day_metrics(day))
    backfill(files, folder / "tsdb", folder / "scratch")
    server = PromServer(folder / "tsdb", folder)
    server.start()
    yield server
    server.stop()


@pytest.mark.services
@pytest.mark.parametrize("day", list(DAYS))
def test_prometheus_excludes_and_counts_as_the_file_does(values_prom, tmp_path, day):
    start = START + timedelta(days=day)
    ctx = ReadContext(start, start + timedelta(hours=2), "USD", 3600)
    path = tmp_path / "m.om"
    path.write_text(day_metrics(day))
    expected = OpenMetricsConnector(SourceSpec("t", "telemetry", "openmetrics", path), ctx).read()
    got = PrometheusConnector(SourceSpec("t", "telemetry", "prometheus", None, {"url": values_prom.url}),
                              ctx).read()
    assert_same_tables(expected, got)
    assert len(expected.tables["excluded_samples"]) or len(expected.tables["counter_resets"])


@pytest.mark.services
def test_prometheus_case_gives_the_file_cases_audit(values_prom, spoiled, tmp_path):
    document = audit(case(tmp_path, metrics(BAD), source=f'format = "prometheus"\nurl = "{values_prom.url}"\n'))
    assert document["buckets"] == spoiled["buckets"]
    assert json.dumps(document["telemetry"]).replace("(prometheus)", "(openmetrics)") == \
        json.dumps(spoiled["telemetry"])
