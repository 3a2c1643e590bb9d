"""Label mismatches between telemetry sources (audit/mismatches.py), from the tables the connectors
read: each finding names the source that holds the values (rule 5)."""
from __future__ import annotations

from datetime import timedelta

from audit.collected import Collected
from audit.normalise import telemetry
from connectors.base import ReadContext, SourceSpec
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
