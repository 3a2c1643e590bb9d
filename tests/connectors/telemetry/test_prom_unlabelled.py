"""DCGM kernel-activity series without a GPU label, read through a real Prometheus (127.0.0.1).

dcgm-exporter without its gpu / UUID labels: before, the Prometheus connector dropped the series
in its aggregates without a word (the file reader had been mended to count them, eb93f11) while
busy_fraction quietly came from GPU_UTIL. Now both readers give the same excluded_samples row:
the samples counted, the earliest one as the example, and the fallback named. The DCGM evidence
gauges (DCGM_FI_PROF_SM_ACTIVE …) without a GPU label were still dropped by the Prometheus
connector while the file reader counted them (``EvidenceCells``); now they are counted alike.
"""
from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.openmetrics import OpenMetricsConnector
from connectors.telemetry.prometheus import PrometheusConnector
from tests.connectors.telemetry.test_openmetrics import GR, START, T0, UTIL, gpu, line
from tests.servers.prometheus import PromServer, backfill

pytestmark = pytest.mark.services
SM = "DCGM_FI_PROF_SM_ACTIVE"


def exposition() -> str:
    """GPU 0 with GPU_UTIL only, and GR_ENGINE_ACTIVE and SM_ACTIVE from series with no gpu or UUID
    label."""
    lines = [f"# TYPE {UTIL} gauge"] + [line(UTIL, gpu(0), 40, t) for t in range(0, 3600, 60)]
    lines += [f"# TYPE {GR} gauge"] + [f'{GR}{{Hostname="node-a"}} {0.25 + t / 36000} {T0 + t}'
                                       for t in range(30, 3600, 60)]
    lines += [f"# TYPE {SM} gauge"] + [f'{SM}{{Hostname="node-a"}} 0.5 {T0 + t}' for t in range(15, 1800, 60)]
    return "\n".join(lines + ["# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prom-unlabelled")
    (folder / "m.om").write_text(exposition())
    backfill([folder / "m.om"], folder / "tsdb", folder / "scratch")
    server = PromServer(folder / "tsdb", folder)
    server.start()
    yield server
    server.stop()


def test_unlabelled_activity_series_are_counted_as_the_file_reader_counts_them(prom, tmp_path):
    ctx = ReadContext(START, START + timedelta(hours=1), "USD", 600)
    (tmp_path / "m.om").write_text(exposition())
    expected = OpenMetricsConnector(SourceSpec("t", "telemetry", "openmetrics", tmp_path / "m.om"), ctx).read()
    got = PrometheusConnector(SourceSpec("t", "telemetry", "prometheus", None, {"url": prom.url}), ctx).read()
    table = got.tables["excluded_samples"]
    assert table[["metric", "reason", "count", "expected", "example"]].values.tolist() == [
        [GR, "no GPU label (gpu, UUID): placed on no GPU; busy_fraction fell back to DCGM_FI_DEV_GPU_UTIL", 60,
         "a gpu or UUID label", "0.25083333333333335"],
        [SM, "no GPU label (gpu, UUID): placed on no GPU", 30, "a gpu or UUID label", "0.5"]]
    assert table["first_ts"].tolist() == [pd.Timestamp(START) + timedelta(seconds=s) for s in (30, 15)]
    pd.testing.assert_frame_equal(table, expected.tables["excluded_samples"], obj="excluded_samples")
    assert set(got.tables["gpu_activity"]["source"]) == {UTIL}
