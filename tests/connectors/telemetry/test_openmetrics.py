"""OpenMetrics connector: binning, source choice, counters, scheduler joins, real files, errors."""
from __future__ import annotations

import gzip
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors import registry
from connectors.base import ReadContext, SourceSpec
from connectors.errors import InputError
from connectors.telemetry.openmetrics import OpenMetricsConnector
from connectors.telemetry.tables import resource_id
from tests.paths import DATA, FIXTURES

REAL = DATA / "metrics" / "datadog-integrations-core"
SMALL = FIXTURES / "telemetry_small" / "cluster.om"
START = datetime(2025, 1, 1, tzinfo=timezone.utc)
T0 = int(START.timestamp())
GR = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"


def line(name: str, labels: dict[str, str], value, t: float | None = None) -> str:
    """One exposition sample line; ``t`` is seconds after the window start."""
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    stamp = "" if t is None else f" {T0 + t}"
    return f"{name}{{{body}}} {value}{stamp}"


def gpu(n: int = 0, host: str = "node-a", **extra: str) -> dict[str, str]:
    """DCGM labels of one GPU."""
    return {"gpu": str(n), "UUID": f"GPU-{host}-{n}", "modelName": "NVIDIA H100 80GB HBM3",
            "Hostname": host, **extra}


def connector(path: Path, step: int | None = 60, hours: float = 1) -> OpenMetricsConnector:
    """A connector over a one-hour UTC window."""
    ctx = ReadContext(START, START + timedelta(hours=hours), "USD", step)
    return OpenMetricsConnector(SourceSpec("telemetry", "telemetry", "openmetrics", path), ctx)


def read(tmp_path: Path, lines: list[str], step: int | None = 60, gz: bool = False,
         hours: float = 1):
    """Write ``lines`` (plus # EOF) to a file and read it."""
    text = "\n".join(lines + ["# EOF"]) + "\n"
    path = tmp_path / ("m.om.gz" if gz else "m.om")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return connector(path, step, hours).read()


def at(frame: pd.DataFrame, seconds: int) -> pd.DataFrame:
    """Rows whose interval starts ``seconds`` after the window start."""
    return frame.loc[frame["ts"] == pd.Timestamp(START) + pd.Timedelta(seconds=seconds)]


# ------------------------------------------------------------------------------ GPU activity

def test_binning_means_and_window(tmp_path):
    lines = ["# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge",
             line(GR, gpu(), 0.9, -10),  # before the window: dropped
             line(GR, gpu(), 0.2, 0), line(GR, gpu(), 0.4, 30),
             line(GR, gpu(), 0.6, 60), line(GR, gpu(), 1.0, 150.5),
             line(GR, gpu(), 0.7, 3600)]  # at the window end: dropped (gauges end-exclusive)
    frame = read(tmp_path, lines).tables["gpu_activity"]
    assert list(frame.columns) == ["node", "gpu", "uuid", "model_name", "pod", "namespace",
                                   "container", "ts", "step_seconds", "busy_fraction", "source"]
    assert str(frame["ts"].dtype) == "datetime64[ns, UTC]"
    assert frame["ts"].tolist() == [pd.Timestamp(START) + pd.Timedelta(seconds=s)
                                    for s in (0, 60, 120)]  # no row for the empty intervals
    assert frame["busy_fraction"].tolist() == pytest.approx([0.3, 0.6, 1.0])
    assert set(frame["step_seconds"]) == {60} and set(frame["source"]) == {GR}
    row = frame.iloc[0]
    assert (row["node"], row["gpu"], row["uuid"], row["model_name"], row["pod"]) == (
        "node-a", "0", "GPU-node-a-0", "NVIDIA H100 80GB HBM3", "")


def test_engine_active_preferred_util_fallback_and_out_of_range_excluded(tmp_path):
    lines = [line(GR, gpu(0), 0.5, 0), line(UTIL, gpu(0), 90, 0),
             line(UTIL, gpu(1), 45, 0), line(UTIL, gpu(1), 150, 60),
             line(GR, gpu(2), -0.1, 0)]
    source = read(tmp_path, lines)
    frame = source.tables["gpu_activity"].set_index(["gpu", "ts"])
    start = pd.Timestamp(START)
    assert frame.loc[("0", start), ["busy_fraction", "source"]].tolist() == [0.5, GR]
    assert frame.loc[("1", start), ["busy_fraction", "source"]].tolist() == [0.45, UTIL]
    assert len(frame) == 2  # GPU_UTIL 150 and GR -0.1 are excluded, never clipped
    excluded = source.tables["excluded_samples"].set_index("metric")
    assert excluded.loc[UTIL, ["reason", "count", "expected", "example"]].tolist() == [
        "out of range", 1, "0 to 100", "150.0"]
    assert excluded.loc[GR, ["reason", "count", "example"]].tolist() == ["out of range", 1, "-0.1"]
    unmeasured = source.tables["unmeasured_intervals"]
    assert sorted(zip(unmeasured["gpu"], unmeasured["ts"] - start)) == [
        ("1", pd.Timedelta(seconds=60)), ("2", pd.Timedelta(0))]


def test_pod_label_follows_the_gpu_not_the_series(tmp_path):
    pod_a = gpu(pod="vllm-a", namespace="serving", container="vllm")
    pod_b = gpu(pod="vllm-b", namespace="batch", container="worker")
    renamed = gpu(pod="dcgm-exporter-x", exported_pod="vllm-c", exported_namespace="prod")
    lines = [line(GR, pod_a, 0.2, 0), line(GR, pod_a, 0.4, 10), line(GR, pod_b, 0.9, 20),
             line(GR, gpu(), 0.1, 30), line(GR, gpu(), 0.1, 40),  # unlabelled: never chosen
             line(GR, pod_b, 0.5, 60), line(GR, pod_b, 0.5, 70), line(GR, pod_a, 0.5, 80),
             line(GR, gpu(), 0.0, 120),
             line(GR, renamed, 0.3, 180)]
    frame = read(tmp_path, lines).tables["gpu_activity"]
    assert len(frame) == 4  # one GPU: series of the same UUID are grouped
    first, second = at(frame, 0).iloc[0], at(frame, 60).iloc[0]
    assert (first["pod"], first["namespace"], first["container"]) == ("vllm-a", "serving", "vllm")
    assert first["busy_fraction"] == pytest.approx((0.2 + 0.4 + 0.9 + 0.1 + 0.1) / 5)
    assert (second["pod"], second["namespace"], second["container"]) == (
        "vllm-b", "batch", "worker")
    assert at(frame, 120).iloc[0][["pod", "namespace", "container"]].tolist() == ["", "", ""]
    assert at(frame, 180).iloc[0][["pod", "namespace"]].tolist() == ["vllm-c", "prod"]


def test_gpus_are_keyed_by_host_gpu_and_uuid(tmp_path):
    lines = [line(GR, gpu(0, "node-a"), 0.2, 0), line(GR, gpu(0, "node-b"), 0.8, 0),
             "DCGM_FI_PROF_GR_ENGINE_ACTIVE 0.5 " + str(T0)]  # no GPU identity: dropped
    frame = read(tmp_path, lines).tables["gpu_activity"]
    assert sorted(zip(frame["node"], frame["busy_fraction"])) == [("node-a", 0.2),
                                                                   ("node-b", 0.8)]


def test_step_from_median_spacing_when_case_has_none(tmp_path):
    lines = [line(GR, gpu(), 0.1 * i, 30 * i) for i in range(6)] + [line(GR, gpu(), 1.0, 400)]
    source = read(tmp_path, lines, step=None)
    frame = source.tables["gpu_activity"]
    assert set(frame["step_seconds"]) == {30}
    assert len(frame) == 7
    assert source.covered == (START, START + timedelta(seconds=400))


def test_label_escapes_and_openmetrics_extras(tmp_path):
    lines = ["# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio \\n of time",
             "# UNIT DCGM_FI_PROF_GR_ENGINE_ACTIVE ratio",
             f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="0",UUID="u",Hostname="h",pod="a\\"b\\\\c\\nd",}}'
             f" 0.25 {T0}.5 # {{trace_id=\"x\"}} 1",
             "", f"{GR}{{ gpu = \"1\" , UUID=\"v\" }} 1e0 {T0}", f"{GR}{{gpu=\"2\"}} NaN {T0}",
             f"{GR}{{gpu=\"3\"}} +Inf {T0}"]
    source = read(tmp_path, lines)
    frame = source.tables["gpu_activity"].set_index("gpu")
    assert frame.loc["0", "pod"] == 'a"b\\c\nd'
    assert frame.loc["0", "busy_fraction"] == 0.25
    assert frame.loc["1", "busy_fraction"] == 1.0
    assert "2" not in frame.index and "3" not in frame.index  # NaN, +Inf: no measurement
    excluded = source.tables["excluded_samples"]
    assert excluded[["reason", "count"]].values.tolist() == [["not finite", 2]]  # counted, not lost


# ------------------------------------------------------------------------------ serving

def vllm(extra: dict[str, str] | None = None, pod: str = "vllm-0") -> dict[str, str]:
    """Labels of a vLLM series scraped by Prometheus."""
    return {"model_name": "llama", "namespace": "serving", "pod": pod, **(extra or {})}


def test_counter_reset_is_a_restart_from_zero(tmp_path):
    name = "vllm:request_success_total"
    lines = [line(name, vllm({"finished_reason": "stop"}), v, t)
             for v, t in ((100, 0), (150, 60), (20, 120), (70, 180))]
    frame = read(tmp_path, lines).tables["traffic"]
    assert frame["requests"].tolist() == [50.0, 20.0, 50.0]
    assert frame["ts"].tolist() == [pd.Timestamp(START) + pd.Timedelta(seconds=s)
                                    for s in (0, 60, 120)]
    hourly = read(tmp_path, lines, step=3600).tables["traffic"]
    assert hourly["requests"].tolist() == [120.0]


def test_counters_summed_over_finished_reason_and_engine(tmp_path):
    lines = ["# TYPE vllm:request_success counter"]
    for reason, engine, values in (("stop", "0", (10, 30, 60)), ("length", "0", (1, 2, 3)),
                                   ("stop", "1", (5, 5, 9))):
        labels = vllm({"finished_reason": reason, "engine": engine})
        lines += [line("vllm:request_success_total", labels, v, 60 * i)
                  for i, v in enumerate(values)]
        lines.append(line("vllm:request_success_created", labels, T0 - 999, 0))
    lines += [line("vllm:prompt_tokens_total", vllm(), v, t) for v, t in ((0, 60), (400, 3600))]
    lines += [line("vllm:generation_tokens_total", vllm(pod="vllm-1"), v, t)
              for v, t in ((7, 0), (9, 30))]
    frame = read(tmp_path, lines).tables["traffic"].set_index(["pod", "ts"])
    start = pd.Timestamp(START)
    first = frame.loc[("vllm-0", start)]
    # no token series of vllm-0 has a pair in the first interval: not measured (NaN), not 0
    assert first["requests"] == 21.0 and first[["prompt_tokens", "generated_tokens"]].isna().all()
    second = frame.loc[("vllm-0", start + pd.Timedelta(seconds=60))]
    assert second[["requests", "prompt_tokens"]].tolist() == [35.0, 400.0]  # end is inclusive
    assert frame.loc[("vllm-1", start), "generated_tokens"] == 2.0
    # vllm-1 has a token series and no request series: its requests are not measured (NaN), not 0
    assert math.isnan(frame.loc[("vllm-1", start), "requests"])
    assert len(frame) == 3


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), min_size=2, max_size=30))
def test_counter_total_does_not_depend_on_step(tmp_path_factory, steps):
    """Whatever the step, the increases add up to the same total, resets included."""
    values, expected = [], 0
    for delta, reset in steps:
        if values and reset and values[-1] > 0:  # a visible restart: the new value is lower
            values.append(delta % values[-1])
            expected += values[-1]
        else:
            expected += delta if values else 0
            values.append((values[-1] if values else 0) + delta)
    lines = [line("vllm:prompt_tokens_total", vllm(), v, 97 * i) for i, v in enumerate(values)]
    tmp_path = tmp_path_factory.mktemp("counter")
    for step in (60, 300, 3600):
        frame = read(tmp_path, lines, step=step).tables["traffic"]
        assert frame["prompt_tokens"].sum() == pytest.approx(expected)


def test_queue_interval_means_summed_over_engines(tmp_path):
    running, waiting = "vllm:num_requests_running", "vllm:num_requests_waiting"
    lines = [line(running, vllm({"engine": "0"}), 2, 0), line(running, vllm({"engine": "0"}), 4, 30),
             line(running, vllm({"engine": "1"}), 1, 10), line(waiting, vllm(), 3, 0),
             line(running, vllm(), 5, 60)]
    frame = read(tmp_path, lines).tables["queue"]
    assert at(frame, 0)[["running", "waiting"]].values.tolist() == [[4.0, 3.0]]
    assert at(frame, 60)[["running", "waiting"]].values.tolist() == [[5.0, 0.0]]


# ------------------------------------------------------------------------------ scheduler

@pytest.mark.parametrize(("provider_id", "expected"), [
    ("aws:///us-east-1a/i-0abc", "i-0abc"),
    ("gce://my-project/us-central1-a/gke-pool-1-abcd", "gke-pool-1-abcd"),
    ("azure:///subscriptions/S1/resourceGroups/MC_rg/providers/Microsoft.Compute/"
     "virtualMachineScaleSets/aks-gpu-123/virtualMachines/3",
     "/subscriptions/s1/resourcegroups/mc_rg/providers/microsoft.compute/"
     "virtualmachinescalesets/aks-gpu-123"),
    ("azure:///subscriptions/S1/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/VM1",
     "/subscriptions/s1/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm1"),
    ("kind://docker/kind/kind-control-plane", "kind://docker/kind/kind-control-plane"),
    ("", ""),
])
def test_resource_id_from_provider_id(provider_id, expected):
    assert resource_id(provider_id) == expected


def test_node_info_one_row_per_node(tmp_path):
    lines = [line("kube_node_info", {"node": "n1", "provider_id": "aws:///us-east-1a/i-1",
                                     "kubelet_version": "v1.29"}, 1, 0),
             line("kube_node_info", {"node": "n1", "provider_id": "aws:///us-east-1a/i-1",
                                     "kubelet_version": "v1.30"}, 1, 60),
             line("kube_node_info", {"node": "n2", "provider_id": "gce://p/z/n2",
                                     "label_node_kubernetes_io_instance_type": "a2-highgpu-1g"}, 1),
             line("kube_node_labels", {"node": "n1",
                                       "label_beta_kubernetes_io_instance_type": "p4d.24xlarge"}, 1)]
    frame = read(tmp_path, lines).tables["node_info"]
    assert frame.values.tolist() == [["n1", "aws:///us-east-1a/i-1", "i-1", "p4d.24xlarge"],
                                     ["n2", "gce://p/z/n2", "n2", "a2-highgpu-1g"]]


def test_gpu_requests_joined_to_node_via_pod_info(tmp_path):
    req = "kube_pod_container_resource_requests"
    base = {"namespace": "serving", "pod": "vllm-0"}
    lines = [line("kube_pod_info", {**base, "node": "n1", "host_ip": "10.0.0.1"}, 1, 0),
             line(req, {**base, "container": "a", "resource": "nvidia_com_gpu"}, 1, 0),
             line(req, {**base, "container": "a", "resource": "nvidia_com_gpu"}, 1, 30),
             line(req, {**base, "container": "b", "resource": "nvidia.com/gpu"}, 2, 10),
             line(req, {**base, "container": "a", "resource": "cpu"}, 16, 0),
             line(req, {"namespace": "x", "pod": "p", "container": "c", "node": "n9",
                        "resource": "nvidia_com_gpu"}, 4, 70)]
    frame = read(tmp_path, lines).tables["gpu_requests"]
    assert list(frame.columns) == ["ts", "namespace", "pod", "node", "gpus", "mig_profile"]
    # container b has 1 sample of the interval's 2 scrapes (a has 2): its 2 GPUs count half
    assert at(frame, 0)[["pod", "node", "gpus"]].values.tolist() == [["vllm-0", "n1", 2.0]]
    assert at(frame, 60)[["pod", "node", "gpus"]].values.tolist() == [["p", "n9", 4.0]]
    assert len(frame) == 2


def test_a_negative_gpu_request_is_one_error_naming_its_pod(tmp_path):
    """Before: "row 10, column gpus: … check greater_than_or_equal_to(0) failed for value -1.0", row 10
    being a row of the reader's own table, and one such error per interval."""
    from connectors.errors import InputErrors

    req = "kube_pod_container_resource_requests"
    base = {"namespace": "serving", "pod": "vllm-0", "node": "n1", "container": "a", "resource": "nvidia_com_gpu"}
    lines = [line(req, base, -1, t) for t in (0, 60, 120)]
    with pytest.raises((InputError, InputErrors)) as caught:
        read(tmp_path, lines, hours=0.05)
    errors = getattr(caught.value, "errors", [caught.value])
    assert len(errors) == 1 and errors[0].row is None and errors[0].column == "gpus"
    assert "table gpu_requests (node 'n1', namespace 'serving', pod 'vllm-0', ts '2025-01-01 00:00:00 UTC'): " \
           "value -1.0 fails greater_than_or_equal_to(0) (3 rows)" in str(errors[0])
    assert errors[0].expected == "a value ≥ 0"


# ------------------------------------------------------------------------------ files

def test_gzip_input_reads_like_plain(tmp_path):
    lines = [line(GR, gpu(), 0.5, 0), line("vllm:prompt_tokens_total", vllm(), 1, 0),
             line("vllm:prompt_tokens_total", vllm(), 11, 60)]
    plain = read(tmp_path, lines).tables
    zipped = read(tmp_path, lines, gz=True).tables
    for name, table in plain.items():
        pd.testing.assert_frame_equal(table, zipped[name])
    assert len(zipped["gpu_activity"]) == 1 and zipped["traffic"]["prompt_tokens"].sum() == 10


@pytest.mark.parametrize("name", ["dcgm_exporter_excerpt.prom", "tgi_metrics_excerpt.prom",
                                  "triton_metrics_excerpt.prom", "vllm_metrics_excerpt.prom"])
def test_real_snapshot_files_load(name):
    path = REAL / name
    samples = sum(1 for text in path.read_text().splitlines() if text and text[0] != "#")
    reader = connector(path)
    source = reader.read()
    assert source.rows == samples > 0
    assert reader.untimestamped == samples  # a single scrape: no timestamps
    assert source.covered == (None, None)
    # the label sets are named, as in any file (series_labels: not in time); no sample makes a row
    assert all(table.empty for key, table in source.tables.items() if key != "series_labels")
    assert len(source.sha256) == 64


def test_real_dcgm_scrape_with_timestamps_added(tmp_path):
    """The real dcgm-exporter label sets, given two scrape times, make GPU_UTIL rows."""
    path = REAL / "dcgm_exporter_excerpt.prom"
    scrape = [text for text in path.read_text().splitlines() if text and text[0] != "#"]
    stamped = [f"{text} {T0 + t}" for t in (0, 60) for text in scrape]
    frame = read(tmp_path, stamped).tables["gpu_activity"]
    assert len(frame) == 2
    assert set(frame["uuid"]) == {"GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"}
    assert set(frame["source"]) == {UTIL} and set(frame["model_name"]) == {"Tesla T4"}


def test_small_cluster_fixture():
    source = connector(SMALL, step=None).read()
    tables = source.tables
    assert source.covered == (START, START + timedelta(hours=1))
    activity = tables["gpu_activity"]
    assert len(activity) == 48 and set(activity["step_seconds"]) == {300}
    held = activity.groupby("gpu")["pod"].agg(set).to_dict()
    assert held == {"0": {"vllm-0"}, "1": {"vllm-0"}, "2": {"vllm-1"}, "3": {""}}
    assert tables["node_info"].values.tolist() == [
        ["gpu-node-1", "aws:///us-east-1a/i-0123456789abcdef0", "i-0123456789abcdef0",
         "g5.12xlarge"]]
    requests = tables["gpu_requests"].groupby("pod").agg(gpus=("gpus", "max"), node=("node", "first"))
    assert requests.values.tolist() == [[2.0, "gpu-node-1"], [1.0, "gpu-node-1"]]
    totals = tables["traffic"].groupby("pod")[["requests", "prompt_tokens"]].sum()
    assert totals.loc["vllm-0"].tolist() == [144.0, 72000.0]
    assert totals.loc["vllm-1", "requests"] == 58.0
    assert tables["queue"][["running", "waiting"]].drop_duplicates().values.tolist() == [[4.0, 1.0]]


def test_registry_resolves_the_connector():
    assert registry.resolve("openmetrics") is OpenMetricsConnector


# ------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize(("text", "pattern"), [
    ('vllm:prompt_tokens_total{model_name="m" 1', r"row 3.*bad label set"),
    ('vllm:prompt_tokens_total{model_name=m} 1', r"row 3.*bad label set"),
    ("vllm:prompt_tokens_total{} abc", r"row 3.*sample value 'abc' is not a number"),
    ("other_metric 1 12:00", r"row 3.*timestamp '12:00' is not a number"),
    ("3bad 1", r"row 3.*no metric name"),
    (f"vllm:prompt_tokens_total 1 {T0 * 1000}",
     r"row 3: timestamp in milliseconds; expected seconds \(the form promtool reads\)"),
    # the year 9999 in seconds was "timestamp in milliseconds"
    ("vllm:prompt_tokens_total 1 253402300799",
     r"row 3: timestamp '253402300799' out of the supported range \(expected a Unix timestamp in seconds of "
     r"at most 100,000,000,000 \(the year 5138\)\)$"),
    ("x 1 2 3", r"row 3.*3 fields after the name"),
    ("x", r"row 3.*no value after the metric name"),
])
def test_bad_lines_name_file_and_row(tmp_path, text, pattern):
    path = tmp_path / "bad.om"
    path.write_text(f"# TYPE x gauge\nx 1 {T0}\n{text}\n# EOF\n")
    with pytest.raises(InputError, match=pattern) as caught:
        connector(path).read()
    assert caught.value.row == 3 and caught.value.path == str(path)
    assert str(caught.value).startswith(f"{path}: row 3")


def test_truncated_gzip(tmp_path):
    text = "".join(line(GR, gpu(), 0.5, i) + "\n" for i in range(5000)).encode()
    path = tmp_path / "cut.om.gz"
    path.write_bytes(gzip.compress(text)[:-200])
    with pytest.raises(InputError, match=r"cut\.om\.gz: row \d+: gzip stream is truncated"):
        connector(path).read()


def test_empty_and_sample_free_files(tmp_path):
    empty = tmp_path / "empty.om"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.om: file is empty"):
        connector(empty).read()
    comments = tmp_path / "comments.om"
    comments.write_text("# TYPE x gauge\n# EOF\n")
    with pytest.raises(InputError, match=r"comments\.om: no samples"):
        connector(comments).read()


def test_content_after_eof_and_check_collects(tmp_path):
    path = tmp_path / "late.om"
    path.write_text(f"x 1 {T0}\n# EOF\n\nx 2 {T0}\n")
    problems = connector(path).check()
    assert len(problems) == 1 and problems[0].row == 4
    assert "content after '# EOF'" in str(problems[0])


@pytest.mark.parametrize("step", [300, None])  # reduced while read / read whole
def test_dcgm_samples_without_a_gpu_label_are_counted_and_named(tmp_path, step):
    """dcgm-exporter without gpu / UUID labels on its profiling metrics: the samples were dropped
    without a word (excluded_samples empty) while busy_fraction quietly came from GPU_UTIL."""
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    lines += [line("DCGM_FI_DEV_GPU_UTIL", gpu(0), 40, t) for t in (0, 60)]
    for name in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE"):
        lines += [f"# TYPE {name} gauge"] + [f"{name} 0.5 {T0 + t}" for t in (0, 60, 120)]
    tables = read(tmp_path, lines, step=step).tables
    activity = tables["gpu_activity"]
    assert set(activity["source"]) == {"DCGM_FI_DEV_GPU_UTIL"} and set(activity["busy_fraction"]) == {0.4}
    excluded = tables["excluded_samples"]
    assert excluded[["metric", "reason", "count", "expected"]].values.tolist() == [
        ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "no GPU label (gpu, UUID): placed on no GPU; busy_fraction fell back to "
         "DCGM_FI_DEV_GPU_UTIL", 3, "a gpu or UUID label"],
        ["DCGM_FI_PROF_SM_ACTIVE", "no GPU label (gpu, UUID): placed on no GPU", 3, "a gpu or UUID label"]]
    assert excluded["first_ts"].tolist() == [pd.Timestamp(START)] * 2
    assert tables["unmeasured_intervals"].empty  # no GPU-interval is left without its samples


def repeated(tmp_path: Path, second: str, gz: bool = False):
    """A GR_ENGINE_ACTIVE series with its sample at minute 1 written twice (rows 2 and 3), the
    second time with value ``second``."""
    labels = gpu()
    lines = [line(GR, labels, 0.5, 0), line(GR, labels, 0.25, 60),
             line(GR, labels, second, 60), line(GR, labels, 0.75, 120)]
    return read(tmp_path, lines, gz=gz)


def once(tmp_path: Path):
    """The same series without the repeat."""
    (tmp_path / "once").mkdir()
    return read(tmp_path / "once", [line(GR, gpu(), v, 60 * i) for i, v in enumerate([0.5, 0.25, 0.75])])


@pytest.mark.parametrize("gz", [False, True])
def test_an_identical_repeat_is_dropped_and_counted(tmp_path, gz):
    """Before: the repeat was averaged in (its minute weighed twice); now it changes no figure and
    is named in excluded_samples with its file and row."""
    frame = repeated(tmp_path, "0.25", gz)
    pd.testing.assert_frame_equal(frame.tables["gpu_activity"], once(tmp_path).tables["gpu_activity"])
    excluded = frame.tables["excluded_samples"]
    assert excluded[["metric", "reason", "count", "expected"]].to_dict("records") == [
        {"metric": GR, "reason": "repeated sample (same series, timestamp and value)", "count": 1,
         "expected": "one sample per series and timestamp"}]
    name = "m.om.gz" if gz else "m.om"
    assert excluded["example"].iloc[0] == f"0.25 ({tmp_path / name} row 3, a repeat of row 2)"
    assert excluded["first_ts"].iloc[0] == pd.Timestamp(START) + pd.Timedelta(seconds=60)


def test_a_conflicting_repeat_is_one_error_naming_both_values(tmp_path):
    """Before: 0.25 and 0.999 at one timestamp were averaged, no word; now one error."""
    with pytest.raises(InputError) as raised:
        repeated(tmp_path, "0.999")
    assert str(raised.value) == (
        f'{tmp_path / "m.om"}: row 3: series {GR}{{gpu="0",UUID="GPU-node-a-0",modelName="NVIDIA H100 80GB HBM3",'
        f'Hostname="node-a"}} has two samples at timestamp {float(T0 + 60)!r}: 0.25 (row 2) and 0.999 (row 3) '
        "(expected one sample per series and timestamp)")


def test_a_repeat_out_of_order_is_found(tmp_path):
    """A file written twice over (two overlapping scrapes): the repeats are not adjacent."""
    rows = [line(GR, gpu(), v, 60 * i) for i, v in enumerate([0.5, 0.25, 0.75])]
    frame = read(tmp_path, rows + rows[1:])
    pd.testing.assert_frame_equal(frame.tables["gpu_activity"], once(tmp_path).tables["gpu_activity"])
    assert frame.tables["excluded_samples"]["count"].tolist() == [2]
