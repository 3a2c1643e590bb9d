"""Offline telemetry sources: query_range dumps, nvidia-smi logs, dcgmi dmon, sacct, OpenCost."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.errors import InputError, InputErrors
from connectors.telemetry.dcgmi import DcgmiConnector
from connectors.telemetry.nvidia_smi import NvidiaSmiConnector
from connectors.telemetry.opencost import OpenCostConnector
from connectors.telemetry.openmetrics import OpenMetricsConnector
from connectors.telemetry.prom_dump import PromDumpConnector
from connectors.telemetry.sacct import SacctConnector, expand_nodelist
from tests import paths

FIXTURES = paths.FIXTURES / "offline_telemetry"
START = datetime(2026, 9, 1, 8, tzinfo=timezone.utc)
T0 = int(START.timestamp())
GR = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"


def read(cls, path: Path, step: int | None = 60, hours: float = 1, **options):
    """Read ``path`` with connector ``cls`` over a window starting at START."""
    ctx = ReadContext(START, START + timedelta(hours=hours), "USD", step)
    return cls(SourceSpec("s", "telemetry", cls.format_name, path, options), ctx).read()


def at(frame: pd.DataFrame, seconds: int) -> pd.DataFrame:
    """Rows whose interval starts ``seconds`` after START."""
    return frame.loc[frame["ts"] == pd.Timestamp(START) + pd.Timedelta(seconds=seconds)]


def fails(cls, path: Path, **kwargs) -> InputError:
    """The first InputError reading ``path`` raises."""
    with pytest.raises((InputError, InputErrors)) as caught:
        read(cls, path, **kwargs)
    exc = caught.value
    return exc.errors[0] if isinstance(exc, InputErrors) else exc


# --------------------------------------------------------------------------------------------
# prom_dump
# --------------------------------------------------------------------------------------------

def series(name: str, labels: dict[str, str], points: list[tuple[float, float]]) -> dict:
    """One matrix series; times are seconds after START."""
    return {"metric": {"__name__": name, **labels},
            "values": [[T0 + t, repr(float(v))] for t, v in points]}


def dump(path: Path, result: list[dict]) -> Path:
    """Write a query_range response."""
    body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    path.write_text(json.dumps(body))
    return path


GPU0 = {"gpu": "0", "UUID": "GPU-a-0", "Hostname": "node-a", "modelName": "NVIDIA H100",
        "pod": "train-0", "namespace": "ml", "container": "main"}
GPU1 = {"gpu": "1", "UUID": "GPU-a-1", "Hostname": "node-a", "modelName": "NVIDIA H100"}
VLLM = {"model_name": "llama", "namespace": "serve", "pod": "vllm-0"}


def dump_series() -> list[dict]:
    """DCGM, vLLM counters (with a reset) and kube-state-metrics series."""
    return [
        series(GR, GPU0, [(0, 0.2), (30, 0.4), (60, 0.9), (90, 0.7)]),
        series(UTIL, GPU0, [(0, 99), (30, 99)]),
        series(UTIL, GPU1, [(0, 50), (30, 30), (60, 10)]),
        series("vllm:request_success_total", VLLM, [(0, 10), (30, 20), (60, 5), (90, 15)]),
        series("vllm:num_requests_running", VLLM, [(0, 2), (30, 4)]),
        series("kube_pod_container_resource_requests",
               {"namespace": "ml", "pod": "train-0", "container": "main", "node": "node-a",
                "resource": "nvidia_com_gpu", "unit": "integer"}, [(0, 1), (60, 1)]),
        series("kube_node_info", {"node": "node-a", "provider_id": "aws:///us-east-1a/i-0abc"},
               [(0, 1)]),
        series("up", {"job": "dcgm"}, [(0, 1), (30, 1)]),
    ]


def test_prom_dump_bins_like_openmetrics(tmp_path):
    frame = read(PromDumpConnector, dump(tmp_path / "q.json", dump_series()))
    busy = frame.tables["gpu_activity"].set_index(["gpu", "ts"])["busy_fraction"]
    assert busy[("0", pd.Timestamp(START))] == pytest.approx(0.3)  # GR preferred over UTIL
    assert busy[("0", pd.Timestamp(START) + pd.Timedelta(minutes=1))] == pytest.approx(0.8)
    assert busy[("1", pd.Timestamp(START))] == pytest.approx(0.4)  # UTIL / 100
    sources = frame.tables["gpu_activity"].groupby("gpu")["source"].first()
    assert sources.to_dict() == {"0": GR, "1": UTIL}
    traffic = frame.tables["traffic"]
    assert at(traffic, 0)["requests"].item() == 15.0  # 10 then a reset to 5
    assert at(traffic, 60)["requests"].item() == 10.0
    assert at(frame.tables["queue"], 0)["running"].item() == 3.0
    assert frame.tables["gpu_requests"]["gpus"].tolist() == [1.0, 1.0]
    assert frame.tables["node_info"]["resource_id"].tolist() == ["i-0abc"]
    assert frame.rows == 20


def test_prom_dump_equals_openmetrics_text(tmp_path):
    result = dump_series()
    lines = []
    for s in result:
        labels = ",".join(f'{k}="{v}"' for k, v in s["metric"].items() if k != "__name__")
        lines += [f"{s['metric']['__name__']}{{{labels}}} {v} {t}" for t, v in s["values"]]
    text = tmp_path / "m.om"
    text.write_text("\n".join(lines + ["# EOF"]) + "\n")
    expected = read(OpenMetricsConnector, text).tables
    got = read(PromDumpConnector, dump(tmp_path / "q.json", result)).tables
    for name, table in expected.items():
        pd.testing.assert_frame_equal(got[name], table)


def test_prom_dump_folder_of_files(tmp_path):
    folder = tmp_path / "dumps"
    folder.mkdir()
    result = dump_series()
    dump(folder / "a.json", result[:3])
    dump(folder / "b.json", result[3:])
    whole = read(PromDumpConnector, dump(tmp_path / "q.json", result)).tables
    split = read(PromDumpConnector, folder).tables
    for name, table in whole.items():
        pd.testing.assert_frame_equal(split[name], table)


def test_prom_dump_overlapping_files_repeat_nothing(tmp_path):
    """Before: two dumps over overlapping windows averaged their shared samples twice over; now the
    repeats are dropped and counted, and a shared sample with another value is one error."""
    folder = tmp_path / "dumps"
    folder.mkdir()
    dump(folder / "a.json", [series(GR, GPU0, [(0, 0.2), (30, 0.4)])])
    dump(folder / "b.json", [series(GR, GPU0, [(30, 0.4), (60, 0.9)])])
    got = read(PromDumpConnector, folder).tables
    once = read(PromDumpConnector, dump(tmp_path / "q.json", [series(GR, GPU0, [(0, 0.2), (30, 0.4), (60, 0.9)])]))
    pd.testing.assert_frame_equal(got["gpu_activity"], once.tables["gpu_activity"])
    excluded = got["excluded_samples"]
    assert excluded[["metric", "count"]].to_dict("records") == [{"metric": GR, "count": 1}]
    assert excluded["example"].item() == f"0.4 ({folder / 'b.json'} row 1, a repeat of row 1 of {folder / 'a.json'})"
    dump(folder / "b.json", [series(GR, GPU0, [(30, 0.5)])])
    error = fails(PromDumpConnector, folder)
    assert (error.path, error.row) == (str(folder / "b.json"), 1)
    assert "has two samples at timestamp" in error.message and f"0.4 (row 1 of {folder / 'a.json'}) and 0.5 (row 1)" in error.message


def test_prom_dump_label_escapes(tmp_path):
    labels = {**GPU0, "pod": 'odd "pod" \\ name'}
    frame = read(PromDumpConnector, dump(tmp_path / "q.json", [series(GR, labels, [(0, 0.5)])]))
    assert frame.tables["gpu_activity"]["pod"].item() == 'odd "pod" \\ name'


@pytest.mark.parametrize("body, row, column", [
    ({"status": "error", "error": "timeout"}, None, "status"),
    ({"status": "success", "data": {"resultType": "vector", "result": []}}, None, "resultType"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": GR}, "values": [[T0, "0.1"]]},
        {"metric": {"__name__": GR}, "values": [[T0, "zero"]]}]}}, 2, "values"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": GR}, "values": [[T0 * 1000, "0.1"]]}]}}, 1, "values"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"gpu": "0"}, "values": []}]}}, 1, "metric"),
])
def test_prom_dump_bad_input(tmp_path, body, row, column):
    path = tmp_path / "q.json"
    path.write_text(json.dumps(body))
    error = fails(PromDumpConnector, path)
    assert (error.path, error.row, error.column) == (str(path), row, column)


def test_prom_dump_not_json(tmp_path):
    path = tmp_path / "q.json"
    path.write_text("{not json")
    assert "not valid JSON" in str(fails(PromDumpConnector, path))


# --------------------------------------------------------------------------------------------
# nvidia-smi
# --------------------------------------------------------------------------------------------

def test_nvidia_smi_log_local_time():
    frame = read(NvidiaSmiConnector, FIXTURES / "nvidia_smi.csv", node="gpu-node-1",
                 utc_offset="+02:00")
    table = frame.tables["gpu_activity"]
    busy = table.set_index(["gpu", "ts"])["busy_fraction"]
    minute = pd.Timedelta(minutes=1)
    assert busy[("0", pd.Timestamp(START))] == pytest.approx(0.5)
    assert busy[("0", pd.Timestamp(START) + minute)] == pytest.approx(1.0)  # [N/A] skipped
    assert busy[("1", pd.Timestamp(START))] == pytest.approx(0.05)
    assert busy[("1", pd.Timestamp(START) + minute)] == pytest.approx(0.25)
    assert set(table["source"]) == {"nvidia-smi utilization.gpu"}
    assert set(table["node"]) == {"gpu-node-1"}
    assert set(table["pod"]) == {""}
    assert table.loc[table["gpu"] == "1", "uuid"].iloc[0].endswith("0001")
    assert set(table["model_name"]) == {"NVIDIA H100 80GB HBM3"}
    assert frame.rows == 8


def test_nvidia_smi_defaults_to_utc_and_median_step():
    frame = read(NvidiaSmiConnector, FIXTURES / "nvidia_smi.csv", step=None, hours=3)
    table = frame.tables["gpu_activity"]
    assert set(table["step_seconds"]) == {30}  # the -l spacing
    first = table["ts"].min() - pd.Timestamp(START)
    assert first == pd.Timedelta(hours=2)  # 10:00 read as UTC



def test_nvidia_smi_one_timestamp_says_its_step_was_not_measured(tmp_path):
    """One poll has no spacing: with no case step, the reader averages over its 60 s default and
    says so in its notes (before: the default was used with no word); the fixture's 30 s polls
    need no note."""
    lines = (FIXTURES / "nvidia_smi.csv").read_text().splitlines()
    path = tmp_path / "smi.csv"
    path.write_text("\n".join(lines[:3]) + "\n")  # the header and the first poll of both GPUs
    frame = read(NvidiaSmiConnector, path, step=None, hours=3)
    assert set(frame.tables["gpu_activity"]["step_seconds"]) == {60}
    assert frame.tables["notes"].to_dict("records") == [{
        "row": 1, "column": "timestamp",
        "note": "step unknown (not measured): the case sets no step and the log's polls are not a second apart "
                "(2 timestamps); utilization was averaged over 60 s intervals, the reader's default"}]
    measured = read(NvidiaSmiConnector, FIXTURES / "nvidia_smi.csv", step=None, hours=3)
    assert "notes" not in measured.tables


def test_dcgmi_one_poll_takes_its_step_from_interval_ms(tmp_path):
    """dcgmi states its polling delay (interval_ms): one poll per GPU, with no case step, is averaged
    over that delay, not over a 60 s default with no word (before: 60 s whatever the delay)."""
    path = tmp_path / "dmon.txt"
    path.write_text("\n".join((FIXTURES / "dcgmi_dmon.txt").read_text().splitlines()[:4]) + "\n")
    table = read(DcgmiConnector, path, step=None, **DMON).tables["gpu_activity"]
    assert set(table["step_seconds"]) == {30}
    assert len(table) == 2 and table["busy_fraction"].round(6).tolist() == [0.2, 0.5]

def test_nvidia_smi_bad_value(tmp_path):
    """A reading out of range is excluded and counted (tests/hostile/test_telemetry_values.py);
    text that is no number is an error naming the row."""
    lines = (FIXTURES / "nvidia_smi.csv").read_text().splitlines()
    lines[3] = lines[3].replace("60 %", "sixty %")
    path = tmp_path / "smi.csv"
    path.write_text("\n".join(lines) + "\n")
    error = fails(NvidiaSmiConnector, path, utc_offset="+02:00")
    assert (error.path, error.row, error.column) == (str(path), 4, "utilization.gpu")


def test_nvidia_smi_bad_timestamp_and_offset(tmp_path):
    lines = (FIXTURES / "nvidia_smi.csv").read_text().splitlines()
    lines[2] = lines[2].replace("2026/09/01 10:00:10.125", "yesterday")
    path = tmp_path / "smi.csv"
    path.write_text("\n".join(lines) + "\n")
    error = fails(NvidiaSmiConnector, path)
    assert (error.row, error.column) == (3, "timestamp")
    error = fails(NvidiaSmiConnector, FIXTURES / "nvidia_smi.csv", utc_offset="CEST")
    assert error.column == "utc_offset"


def test_nvidia_smi_missing_column(tmp_path):
    path = tmp_path / "smi.csv"
    path.write_text("timestamp, name, uuid, index\n2026/09/01 08:00:00.000, H100, GPU-1, 0\n")
    error = fails(NvidiaSmiConnector, path)
    assert (error.row, error.column) == (1, "utilization.gpu")


def test_nvidia_smi_a_column_twice_is_an_error(tmp_path):
    """The later utilization.gpu was read in the first one's place, with no word."""
    lines = (FIXTURES / "nvidia_smi.csv").read_text().splitlines()
    path = tmp_path / "smi.csv"
    path.write_text("\n".join([lines[0] + ", utilization.gpu [%]"] + [f"{line}, 400 %" for line in lines[1:]]) + "\n")
    error = fails(NvidiaSmiConnector, path)
    assert (error.row, error.column) == (1, "utilization.gpu") and "duplicate column" in error.message


# --------------------------------------------------------------------------------------------
# dcgmi dmon
# --------------------------------------------------------------------------------------------

DMON = {"start": "2026-09-01T08:00:10Z", "interval_ms": 30000, "node": "gpu-node-1"}


def test_dcgmi_prefers_gract_else_gputl():
    table = read(DcgmiConnector, FIXTURES / "dcgmi_dmon.txt", **DMON).tables["gpu_activity"]
    busy = table.set_index(["gpu", "ts"])["busy_fraction"]
    minute = pd.Timedelta(minutes=1)
    assert busy[("0", pd.Timestamp(START))] == pytest.approx(0.3)  # GRACT, not GPUTL 90.5 %
    assert busy[("0", pd.Timestamp(START) + minute)] == pytest.approx(0.7)
    assert busy[("1", pd.Timestamp(START))] == pytest.approx(0.6)  # GRACT N/A: GPUTL / 100
    assert busy[("1", pd.Timestamp(START) + minute)] == pytest.approx(0.2)
    assert table.groupby("gpu")["source"].first().to_dict() == {"0": "dcgmi GRACT",
                                                               "1": "dcgmi GPUTL"}
    assert set(table["node"]) == {"gpu-node-1"}


def test_dcgmi_start_without_zone_is_utc_and_interval_places_polls():
    options = {**DMON, "start": "2026-09-01T08:00:50", "interval_ms": 60000}
    table = read(DcgmiConnector, FIXTURES / "dcgmi_dmon.txt", hours=1, **options)
    table = table.tables["gpu_activity"]
    gpu0 = table.loc[table["gpu"] == "0"].set_index("ts")["busy_fraction"]
    assert gpu0.round(6).tolist() == [0.2, 0.4, 0.6, 0.8]  # one poll per minute


def test_dcgmi_needs_start_and_interval():
    error = fails(DcgmiConnector, FIXTURES / "dcgmi_dmon.txt", node="x")
    assert "start" in error.column
    error = fails(DcgmiConnector, FIXTURES / "dcgmi_dmon.txt", start="2026-09-01T08:00:00Z",
                  interval_ms=0)
    assert error.column == "interval_ms"


def test_dcgmi_bad_value(tmp_path):
    """A reading out of range is excluded and counted (tests/hostile/test_telemetry_values.py);
    text that is no number is an error naming the row."""
    text = (FIXTURES / "dcgmi_dmon.txt").read_text().replace("0.400", "0.4x0")
    path = tmp_path / "dmon.txt"
    path.write_text(text)
    error = fails(DcgmiConnector, path, **DMON)
    assert (error.path, error.row, error.column) == (str(path), 5, "GRACT")


def test_dcgmi_a_column_twice_is_an_error(tmp_path):
    text = (FIXTURES / "dcgmi_dmon.txt").read_text().replace("#Entity   GRACT   SMACT", "#Entity   GRACT   GRACT", 1)
    path = tmp_path / "dmon.txt"
    path.write_text(text)
    error = fails(DcgmiConnector, path, **DMON)
    assert (error.row, error.column) == (1, "GRACT") and "duplicate column" in error.message


# --------------------------------------------------------------------------------------------
# sacct
# --------------------------------------------------------------------------------------------

def test_expand_nodelist():
    assert expand_nodelist("gpu[01-03,07]") == ["gpu01", "gpu02", "gpu03", "gpu07"]
    assert expand_nodelist("a[8-10],b7,rack[1-2]-n[1-2]") == [
        "a8", "a9", "a10", "b7", "rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
    assert expand_nodelist("None assigned") == []


def test_sacct_jobs_and_gpu_hours():
    frame = read(SacctConnector, FIXTURES / "sacct.txt", step=3600, hours=4)
    jobs = frame.tables["jobs"].set_index("job")
    assert list(jobs.index) == ["101", "102", "103", "104", "105"]  # steps dropped
    assert jobs.loc["101", "nodes"] == "gpu01,gpu02,gpu03,gpu07"
    assert jobs["gpus"].to_dict() == {"101": 16.0, "102": 2.0, "103": 0.0, "104": 8.0,
                                      "105": 0.0}
    assert jobs["gpu_hours"].to_dict() == {"101": 24.0, "102": 1.0, "103": 0.0, "104": 4.0,
                                           "105": 0.0}
    assert pd.isna(jobs.loc["104", "end"])


def test_sacct_gpu_requests_by_overlap():
    requests = read(SacctConnector, FIXTURES / "sacct.txt", step=3600, hours=4)
    requests = requests.tables["gpu_requests"]
    hour = 3600
    first = at(requests, 0)
    assert first["node"].tolist() == ["gpu01", "gpu02", "gpu03", "gpu07"]
    assert first["gpus"].tolist() == [2.0] * 4  # 4 GPUs per node for half the hour
    assert set(first["pod"]) == {"101-train"} and set(first["namespace"]) == {"gpu"}
    second = at(requests, hour).set_index(["pod", "node"])["gpus"]
    assert second[("102-eval", "gpu05")] == pytest.approx(0.5)  # 09:45-10:00, 2 GPUs
    assert second[("101-train", "gpu07")] == 4.0
    assert at(requests, 2 * hour)["gpus"].tolist() == [0.5]  # 102 crosses 10:00
    assert at(requests, 3 * hour)[["pod", "gpus"]].values.tolist() == [["104-serve", 4.0]]
    assert (requests["gpus"] * hour).sum() / hour == pytest.approx(24 + 1 + 4)


def test_sacct_local_time_offset(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|JobName|User|Partition|NodeList|AllocTRES|Elapsed|Start|End|State\n"
                    "7|x|u|p|n1|gres/gpu=1,node=1|00:30:00|2026-09-01T10:00:00|"
                    "2026-09-01T10:30:00|COMPLETED\n")
    requests = read(SacctConnector, path, step=3600, utc_offset="+02:00").tables["gpu_requests"]
    assert requests[["ts", "gpus"]].values.tolist() == [[pd.Timestamp(START), 0.5]]


def test_sacct_running_job_without_elapsed_counts_to_the_window_end_and_says_so(tmp_path):
    """An export without the Elapsed column: job 8 (2 GPUs, running since 09:30) is counted up to the
    window end, 12:00, 5 GPU-hours, and the source's notes name it; a finished job is counted from
    its End. Before, its elapsed was 0: no GPU request, 0 GPU-hours, nothing said."""
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|JobName|User|Partition|NodeList|AllocTRES|Start|End|State\n"
                    "7|x|u|p|n1|gres/gpu=1,node=1|2026-09-01T08:00:00|2026-09-01T08:30:00|COMPLETED\n"
                    "8|y|u|p|n2|gres/gpu=2,node=1|2026-09-01T09:30:00|Unknown|RUNNING\n")
    frame = read(SacctConnector, path, step=3600, hours=4)
    jobs = frame.tables["jobs"].set_index("job")
    assert jobs["gpu_hours"].to_dict() == {"7": 0.5, "8": 5.0}
    requests = frame.tables["gpu_requests"]
    assert requests.loc[requests["node"] == "n2", "gpus"].tolist() == [1.0, 2.0, 2.0]
    assert frame.tables["notes"].values.tolist() == [[3, "End", (
        "job 8 (RUNNING) has no End and no Elapsed: counted up to the window end 2026-09-01T12:00:00Z, "
        "5.00 GPU-hours (the export does not say when it was taken)")]]
    assert frame.covered[1] == START + timedelta(hours=4)


def test_sacct_scheduled_nodes_are_the_nodes_it_names_over_the_period_it_covers(tmp_path):
    """Jobs 08:30-10:15 on n1 and c1 (a CPU job's node too), one pending: the export lists every
    job of n1 and c1 over 08:30-10:15, its covered period."""
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|JobName|User|Partition|NodeList|AllocTRES|Elapsed|Start|End|State\n"
                    "7|x|u|p|n1|gres/gpu=1,node=1|00:30:00|2026-09-01T08:30:00|2026-09-01T09:00:00|COMPLETED\n"
                    "8|y|u|p|c1|cpu=4,node=1|01:00:00|2026-09-01T09:15:00|2026-09-01T10:15:00|COMPLETED\n"
                    "9|z|u|p|None assigned||00:00:00|Unknown|Unknown|PENDING\n")
    frame = read(SacctConnector, path, step=3600, hours=4)
    start, end = pd.Timestamp(START) + pd.Timedelta(minutes=30), pd.Timestamp(START) + pd.Timedelta(minutes=135)
    assert frame.tables["scheduled_nodes"].values.tolist() == [["c1", start, end], ["n1", start, end]]
    assert frame.covered == (start.to_pydatetime(), end.to_pydatetime())


@pytest.mark.parametrize("field, bad, column", [
    ("gpu[01-03,07]", "gpu[01-x]", "NodeList"),
    ("gres/gpu=2,", "gres/gpu=two,", "AllocTRES"),
    ("00:30:00", "half an hour", "Elapsed"),
    ("2026-09-01T10:15:00", "soon", "End"),
])
def test_sacct_bad_input(tmp_path, field, bad, column):
    text = (FIXTURES / "sacct.txt").read_text()
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines, 1) if field in line and line.startswith("10"))
    lines[row - 1] = lines[row - 1].replace(field, bad, 1)
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join(lines) + "\n")
    error = fails(SacctConnector, path, step=3600)
    assert (error.path, error.row, error.column) == (str(path), row, column)


def test_sacct_short_row(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|JobName|Partition|NodeList|AllocTRES|Start|End\n1|a|p|n1\n")
    error = fails(SacctConnector, path)
    assert error.row == 2


# --------------------------------------------------------------------------------------------
# OpenCost
# --------------------------------------------------------------------------------------------

def test_opencost_allocations_and_requests():
    frame = read(OpenCostConnector, FIXTURES / "opencost_allocation.json", step=3600, hours=2)
    allocations = frame.tables["allocations"]
    assert allocations["name"].tolist() == ["ml/trainer-0", "__idle__", "ml/trainer-0"]
    assert allocations["gpu_cost"].tolist() == [Decimal("5.92"), Decimal("17.7"),
                                                Decimal("2.95")]
    assert allocations["total_cost"].tolist() == [Decimal("6.22"), Decimal("18.1"),
                                                  Decimal("3.1")]
    assert all(isinstance(v, Decimal) for v in allocations["gpu_cost"])
    requests = frame.tables["gpu_requests"]
    assert requests[["namespace", "pod", "node"]].drop_duplicates().values.tolist() == [
        ["ml", "trainer-0", "gpu-node-1"]]
    assert requests["gpus"].tolist() == [2.0, 1.0]  # 2 GPUs, then 2 GPUs for half an hour
    assert frame.covered[0] == START


def test_opencost_finer_grid_keeps_gpu_hours():
    requests = read(OpenCostConnector, FIXTURES / "opencost_allocation.json", step=600, hours=2)
    requests = requests.tables["gpu_requests"]
    assert set(requests["gpus"]) == {2.0}
    assert requests["gpus"].sum() * 600 / 3600 == pytest.approx(3.0)


def test_opencost_bad_input(tmp_path):
    body = json.loads((FIXTURES / "opencost_allocation.json").read_text())
    body["data"][1]["ml/trainer-0"]["gpuHours"] = "lots"
    path = tmp_path / "a.json"
    path.write_text(json.dumps(body))
    error = fails(OpenCostConnector, path)
    assert (error.path, error.row, error.column) == (str(path), 3, "gpuHours")
    body["code"] = 500
    path.write_text(json.dumps(body))
    assert fails(OpenCostConnector, path).column == "code"


@pytest.mark.parametrize("cls, name, options", [
    (NvidiaSmiConnector, "nvidia_smi.csv", {}), (DcgmiConnector, "dcgmi_dmon.txt", DMON),
    (OpenCostConnector, "opencost_allocation.json", {})])
def test_a_log_whose_samples_all_lie_outside_the_window_is_named_with_where_they_lie(cls, name, options):
    """A year off: the source measured nothing, with no word (OpenMetrics files, Prometheus dumps and
    request logs were named already)."""
    from audit.collected import Collected
    from audit.normalise import _outside_window

    ctx = ReadContext(START + timedelta(days=365), START + timedelta(days=366), "USD", 60)
    frame = cls(SourceSpec("s", "telemetry", cls.format_name, FIXTURES / name, options), ctx).read()
    ((source, rows, first, last),) = _outside_window(Collected((frame,)))
    assert source == "s" and rows == frame.rows > 0
    assert first is not None and last is not None and first.year == last.year == 2026
    inside = read(cls, FIXTURES / name, step=60, hours=4, **options)
    assert _outside_window(Collected((inside,))) == ()
