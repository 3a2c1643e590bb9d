"""A pod's GPU request counts for the share of the interval's scrapes it was present in.

Before: every reader (OpenMetrics streamed and read whole, Prometheus) averaged a request series
over the samples it had in the interval, so a pod gone for half of kube-state-metrics' scrapes
still held all its GPUs for the whole interval (chat +24 GPU-h instead of +12 in a GKE case, and
an audit that did not reconcile). Now its mean is scaled by the most samples one of its series
has in the interval ÷ the most any GPU-request series has there (the exporter's scrapes), alike
in every reader; scrapes the exporter itself missed lower both, so they read as no 0 request.
"""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.prom_dump import PromDumpConnector
from connectors.telemetry.prometheus import PrometheusConnector
from tests.connectors.telemetry.test_om_counters import tables
from tests.connectors.telemetry.test_openmetrics import START, T0, line
from tests.servers.prometheus import PromServer, backfill

REQ, V1 = "kube_pod_container_resource_requests", "kube_pod_container_resource_requests_nvidia_gpu_devices"
#: kube-state-metrics scraped every 15 min; it was down for the second hour's last two scrapes
SCRAPES = [0, 900, 1800, 2700, 3600, 4500]
#: pod -> (GPUs, scrape times it was present at, series name)
PODS = {"long": (1, SCRAPES, REQ), "half": (1, [0, 900, 3600], REQ), "late": (2, [2700], REQ),
        "v1": (2, [900, 1800, 2700], V1)}
#: (interval start, pod, GPUs held) for one-hour intervals
EXPECTED = [(0, "half", 0.5), (0, "late", 0.5), (0, "long", 1.0), (0, "v1", 1.5),
            (3600, "half", 0.5), (3600, "long", 1.0)]


def exposition() -> str:
    """The request series of ``PODS`` on node n1, one family after the other."""
    lines = []
    for name in (REQ, V1):
        lines.append(f"# TYPE {name} gauge")
        for pod, (gpus, times, series) in PODS.items():
            labels = {"namespace": "llm", "pod": pod, "container": "vllm", "node": "n1"}
            labels |= {"resource": "nvidia_com_gpu"} if series == REQ else {}
            lines += [line(name, labels, gpus, t) for t in times if series == name]
    return "\n".join(lines + ["# EOF"]) + "\n"


def held(table) -> list[tuple]:
    """(interval start in seconds, pod, GPUs) of a gpu_requests table, in order."""
    rows = table.sort_values(["ts", "pod"])
    return [(int((ts - START).total_seconds()), pod, gpus)
            for ts, pod, gpus in zip(rows["ts"], rows["pod"], rows["gpus"])]


@pytest.mark.parametrize("streamed", [True, False])
def test_a_pod_present_for_part_of_the_scrapes_holds_that_share(tmp_path, monkeypatch, streamed):
    path = tmp_path / "r.om"
    path.write_text(exposition())
    table = tables(path, 3600, streamed, monkeypatch, T0)["gpu_requests"]
    assert held(table) == EXPECTED
    assert set(table["node"]) == {"n1"}


def test_a_prometheus_dump_gives_the_same_shares(tmp_path):
    result = []
    for pod, (gpus, times, name) in PODS.items():
        labels = {"__name__": name, "namespace": "llm", "pod": pod, "container": "vllm", "node": "n1"}
        labels |= {"resource": "nvidia_com_gpu"} if name == REQ else {}
        result.append({"metric": labels, "values": [[T0 + t, str(gpus)] for t in times]})
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))
    ctx = ReadContext(START, START + timedelta(hours=3), "USD", 3600)
    got = PromDumpConnector(SourceSpec("t", "telemetry", "prom_dump", path), ctx).read()
    assert held(got.tables["gpu_requests"]) == EXPECTED


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prom-request-share")
    (folder / "r.om").write_text(exposition())
    backfill([folder / "r.om"], folder / "tsdb", folder / "scratch")
    server = PromServer(folder / "tsdb", folder)
    server.start()
    yield server
    server.stop()


@pytest.mark.services
def test_prometheus_gives_the_same_shares(prom, tmp_path, monkeypatch):
    ctx = ReadContext(START, START + timedelta(hours=3), "USD", 3600)
    got = PrometheusConnector(SourceSpec("t", "telemetry", "prometheus", None, {"url": prom.url}), ctx).read()
    assert held(got.tables["gpu_requests"]) == EXPECTED
    path = tmp_path / "r.om"
    path.write_text(exposition())
    expected = tables(path, 3600, True, monkeypatch, T0)["gpu_requests"]
    assert got.tables["gpu_requests"].reset_index(drop=True).equals(expected.reset_index(drop=True))
