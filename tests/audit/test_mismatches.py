"""Label mismatches between telemetry sources (audit/mismatches.py), from the tables the connectors
read: each finding names the source that holds the values (rule 5)."""
from __future__ import annotations

from datetime import timedelta

from audit.collected import Collected
from audit.normalise import telemetry
from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.families import KSM_V1_GPU_REQUESTS
from connectors.telemetry.openmetrics import OpenMetricsConnector
from connectors.telemetry.promqueries import planned, request_query
from connectors.telemetry.sacct import SacctConnector
from tests import paths
from tests.builders import activity, frame, make_case, window

START = window("2026-09-01", "2026-09-02")[0] + timedelta(hours=8)


def read(cls, path, hours: float = 4, name: str = "slurm"):
    """``path`` read by ``cls`` over ``hours`` from 08:00 on 2026-09-01, one-hour step."""
    ctx = ReadContext(START, START + timedelta(hours=hours), "USD", 3600)
    return cls(SourceSpec(name, "telemetry", cls.format_name, path, {}), ctx).read()


def checks(*frames) -> dict[str, dict]:
    """The label mismatches of the sources, by check."""
    tele = telemetry(make_case(), Collected(tuple(frames)))
    return {m["check"]: m for m in tele.label_mismatches}


def dcgm(*nodes: str):
    """A DCGM source with one GPU on each node over the first hour."""
    rows = [{"node": node, "ts": START} for node in nodes]
    return frame("telemetry", "openmetrics", {"gpu_activity": activity(rows)}, name="prom")


def test_a_node_of_sacct_requests_without_dcgm_names_sacct_as_its_source():
    """Before: the finding said its source was kube_pod_container_resource_requests, whatever had
    read the requests; now the sacct field and the source that read it."""
    slurm = read(SacctConnector, paths.FIXTURES / "offline_telemetry" / "sacct.txt")
    found = checks(slurm, dcgm("gpu01", "gpu02", "gpu03", "gpu07"))["gpu_request_node_not_in_dcgm"]
    assert found["source"] == "sacct AllocTRES gres/gpu (slurm (sacct))"
    assert (found["values"], found["count"], found["intervals"]) == (["gpu05", "gpu08"], 2, 3)


def om_file(tmp_path, requests: str) -> object:
    """An hour of 15-minute scrapes: one GPU of node n1 in DCGM without pod labels, vLLM counting
    pods llm/chat-a and llm/chat-b, and ``requests`` (a series name) giving chat-a 2 GPUs."""
    lines = []
    for i in range(5):
        t = int(START.timestamp()) + 900 * i
        lines += [f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-0",Hostname="n1"}} 50 {t}',
                  f'{requests}{{namespace="llm",pod="chat-a",container="c",node="n1"}} 2 {t}']
        lines += [f'vllm:request_success_total{{namespace="llm",pod="{pod}",model_name="m"}} {10 * i} {t}'
                  for pod in ("chat-a", "chat-b")]
    path = tmp_path / "m.om"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    return path


def test_kube_state_metrics_v1_gpu_requests_are_read(tmp_path):
    """Before: kube_pod_container_resource_requests_nvidia_gpu_devices (kube-state-metrics v1) was
    passed over: no GPU request, the GPU time unknown; now it is a pod's GPU request, named as read."""
    prom = read(OpenMetricsConnector, om_file(tmp_path, KSM_V1_GPU_REQUESTS), name="prom")
    requests = prom.tables["gpu_requests"]
    assert requests[["namespace", "pod", "node", "gpus"]].drop_duplicates().values.tolist() == [
        ["llm", "chat-a", "n1", 2.0]]
    found = checks(prom)["serving_pod_without_gpu"]
    assert (found["values"], found["against"]) == (
        ["llm/chat-b"], "kube_pod_container_resource_requests[_nvidia_gpu_devices] (prom (openmetrics))")


def test_serving_pods_without_any_gpu_request_series_name_the_nearest_series_held(tmp_path):
    """Before: with DCGM naming no pod and no GPU request read, the check did not run at all; now
    every serving pod is named, with the series the file holds nearest to the requests'."""
    prom = read(OpenMetricsConnector, om_file(tmp_path, "kube_pod_container_resource_limits"), name="prom")
    assert prom.tables["gpu_requests"].empty
    found = checks(prom)["serving_pod_without_gpu"]
    assert (found["values"], found["count"], found["against"]) == (["llm/chat-a", "llm/chat-b"], 2, "GPU requests")
    assert found["detail"] == (
        "pods that serve requests but neither DCGM nor the scheduler names as holding a GPU; no GPU request "
        "series was read (kube_pod_container_resource_requests{resource=nvidia.com/gpu}, "
        "kube_pod_container_resource_requests_nvidia_gpu_devices): the nearest series the sources hold is "
        "kube_pod_container_resource_limits (prom (openmetrics))")


def test_the_prometheus_connector_asks_for_the_v1_gpu_request_series_when_the_server_holds_it():
    assert planned([KSM_V1_GPU_REQUESTS]) == [request_query(f"{KSM_V1_GPU_REQUESTS}{{$M}}")]


def labelled_dcgm(tmp_path, counted: tuple[str, ...]) -> object:
    """An hour of 15-minute scrapes: pods llm/chat-a and llm/chat-b each hold one GPU of node n1
    (DCGM pod labels); vLLM counts the pods ``counted``."""
    lines = []
    for i in range(5):
        t = int(START.timestamp()) + 900 * i
        lines += [f'DCGM_FI_DEV_GPU_UTIL{{gpu="{g}",UUID="GPU-{g}",Hostname="n1",namespace="llm",pod="{pod}"}} 50 {t}'
                  for g, pod in enumerate(("chat-a", "chat-b"))]
        lines += [f'vllm:request_success_total{{namespace="llm",pod="{pod}",model_name="m"}} {10 * i} {t}'
                  for pod in counted]
    path = tmp_path / "m.om"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    return path


def test_a_pod_holding_gpu_time_that_its_services_counter_never_counts_is_named_with_its_gpu_hours(tmp_path):
    """Before: chat-b's GPU time went to chat and was divided by chat-a's requests, chat-b named
    nowhere; now the check names it, with its GPU-hours and the counter that misses it."""
    prom = read(OpenMetricsConnector, labelled_dcgm(tmp_path, ("chat-a",)), hours=1, name="prom")
    assert checks(prom)["gpu_pod_without_requests"] == {
        "check": "gpu_pod_without_requests", "source": "DCGM pod labels",
        "against": "prom (openmetrics): vllm:request_success_total", "label": "namespace/pod",
        "values": ["llm/chat-b"], "count": 1, "intervals": 1, "service": "chat", "gpu_hours": "1.00",
        "detail": "pods of service chat that hold 1.00 GPU-h but that its request counter never counts: its unit "
                  "costs divide their GPU cost by the requests of its other pods"}
    both = read(OpenMetricsConnector, labelled_dcgm(tmp_path, ("chat-a", "chat-b")), hours=1, name="prom")
    assert "gpu_pod_without_requests" not in checks(both)
