"""Every registered connector passes the same contract (STYLE habit 14).

Each file connector, on a real or committed sample: its tables validate against their schemas
(the base class validates on read), the window is respected, a transient fault is retried, and
its repr carries no secret. Remote connectors add their own server tests (moto, Prometheus, the
BigQuery emulator) in their modules.
"""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from connectors import registry
from connectors.base import ReadContext, SourceSpec
from connectors.errors import RetriableSourceError
from tests.paths import DATA, ROOT

UTC = timezone.utc
SAMPLES = {
    "focus": ("billing", DATA / "billing" / "focus_sample_data" / "focus_sample_1000.csv",
              (datetime(2024, 9, 10, tzinfo=UTC), datetime(2024, 9, 20, tzinfo=UTC)), {}),
    "openmetrics": ("telemetry", ROOT / "fixtures" / "telemetry_small" / "cluster.om", None, {}),
    "kineto": ("profiles", DATA / "traces" / "tracelens" / "h100_bert-small-uncased.json.gz", None,
               {"service": "x"}),
    "cur": ("billing", DATA / "billing" / "focus_converters" / "aws_cur1_anonymized_2023-11.csv",
            (datetime(2023, 11, 5, tzinfo=UTC), datetime(2023, 11, 20, tzinfo=UTC)), {}),
    "nvidia_smi": ("telemetry", ROOT / "fixtures" / "offline_telemetry" / "nvidia_smi.csv", None, {"node": "n1"}),
    "dcgmi": ("telemetry", ROOT / "fixtures" / "offline_telemetry" / "dcgmi_dmon.txt", None,
              {"start": "2026-09-01T08:00:10Z", "interval_ms": 30000}),
    "sacct": ("telemetry", ROOT / "fixtures" / "offline_telemetry" / "sacct.txt", None, {}),
    "opencost": ("telemetry", ROOT / "fixtures" / "offline_telemetry" / "opencost_allocation.json", None, {}),
    "nsys": ("profiles", DATA / "traces" / "nsys-extrap" / "profile16.sqlite", None, {"service": "x"}),
    "azure": ("billing", DATA / "billing" / "msft_finops_toolkit" / "EA_AmortizedCost_Small.csv",
              (datetime(2023, 9, 4, tzinfo=UTC), datetime(2023, 9, 10, tzinfo=UTC)), {}),
    "access_log": ("telemetry", DATA / "billing" / "aws_wa_labs" / "workload_efficiency_step1_accesslog_2019-11-26.parquet",
                   (datetime(2019, 11, 26, 1, tzinfo=UTC), datetime(2019, 11, 26, 5, tzinfo=UTC)), {"service": "web"}),
}
WIDE = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))


def connector_for(name):
    kind, path, window, options = SAMPLES[name]
    start, end = window or WIDE
    spec = SourceSpec(f"{name}-sample", kind, name, path, {**options, "token": "s3cr3t-value"})
    return registry.resolve(name)(spec, ReadContext(start, end, "USD", None))


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_reads_and_validates(name):
    frame = connector_for(name).read()
    assert frame.rows > 0 and len(frame.sha256) == 64
    assert any(len(t) for t in frame.tables.values())


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_window_is_respected(name):
    connector = connector_for(name)
    frame = connector.read()
    lines = frame.tables.get("lines")
    if lines is not None:
        assert (lines["end"] > connector.ctx.start).all() and (lines["start"] < connector.ctx.end).all()
    for table in ("gpu_activity", "traffic"):
        found = frame.tables.get(table)
        if found is not None and len(found):
            assert (found["ts"] >= connector.ctx.start).all() and (found["ts"] < connector.ctx.end).all()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_transient_fault_is_retried(name, monkeypatch):
    connector = connector_for(name)
    monkeypatch.setattr(type(connector), "backoff_seconds", 0.0)
    calls = {"n": 0}
    real = connector.fetch

    def flaky():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RetriableSourceError("503 Slow Down")
        return real()
    monkeypatch.setattr(connector, "fetch", flaky)
    assert connector.read().rows > 0 and calls["n"] == 2


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_no_secret_in_repr(name):
    connector = connector_for(name)
    assert "s3cr3t-value" not in repr(connector) and "s3cr3t-value" not in str(connector)


def test_every_registered_connector_resolves_or_names_what_is_missing():
    for name in registry.names():
        try:
            cls = registry.resolve(name)
        except ImportError as exc:  # an optional dependency (boto3, google) not installed
            pytest.fail(f"{name}: {exc}")
        assert cls.format_name == name and cls.kind in ("billing", "telemetry", "profiles")
