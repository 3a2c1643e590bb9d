"""MIG and time-sliced GPUs read through a real Prometheus (and a query_range dump) give the
OpenMetrics reader's tables.

dcgm-exporter's MIG labels (``GPU_I_ID``, ``GPU_I_PROFILE``) are part of every group-by, so the
instances of one GPU stay apart; a GPU time-sliced between pods keeps one row per pod, as the
file reader does; GPU_UTIL on a MIG instance is excluded and counted by both readers.
"""
from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.openmetrics import OpenMetricsConnector
from connectors.telemetry.prom_dump import PromDumpConnector
from connectors.telemetry.prometheus import PrometheusConnector
from tests.audit.test_shared_gpus import MIG_REQUESTS, START, mig_metrics, shifted, sliced_metrics
from tests.builders import query_range_dump
from tests.connectors.telemetry.test_prometheus import assert_same_tables
from tests.servers.prometheus import PromServer, backfill

#: day -> exposition: MIG with profiling metrics, time-sliced (copied and per-pod values), MIG with
#: GPU_UTIL only on its instances, MIG instances asked for through the scheduler (mixed strategy)
DAYS = {0: lambda: mig_metrics(), 1: lambda: sliced_metrics(), 2: lambda: sliced_metrics(copied=False),
        3: lambda: mig_metrics(util_on_slices=True, profiling=False), 4: lambda: mig_metrics(requests=MIG_REQUESTS)}


def day_text(day: int) -> str:
    return shifted(DAYS[day](), day).replace("# EOF\n", "") + "# EOF\n"


@pytest.fixture(scope="module")
def shared_prom(tmp_path_factory):
    """A Prometheus of its own (promtool-backfilled, 127.0.0.1) holding each day's exposition."""
    folder = tmp_path_factory.mktemp("prom-shared")
    files = []
    for day in DAYS:
        files.append(folder / f"day{day}.om")
        files[-1].write_text(day_text(day))
    backfill(files, folder / "tsdb", folder / "scratch")
    server = PromServer(folder / "tsdb", folder)
    server.start()
    yield server
    server.stop()


def read_file(path, ctx):
    return OpenMetricsConnector(SourceSpec("t", "telemetry", "openmetrics", path), ctx).read()


@pytest.mark.services
@pytest.mark.parametrize("day", list(DAYS))
def test_prometheus_gives_the_file_tables(shared_prom, tmp_path, day):
    start = START + timedelta(days=day)
    ctx = ReadContext(start, start + timedelta(hours=2), "USD", 3600)
    path = tmp_path / "m.om"
    path.write_text(day_text(day))
    expected = read_file(path, ctx)
    got = PrometheusConnector(SourceSpec("t", "telemetry", "prometheus", None, {"url": shared_prom.url}),
                              ctx).read()
    assert_same_tables(expected, got)


def test_mig_instances_and_shared_pods_in_the_file_table(tmp_path):
    ctx = ReadContext(START, START + timedelta(hours=2), "USD", 3600)
    path = tmp_path / "m.om"
    path.write_text(day_text(0))
    activity = read_file(path, ctx).tables["gpu_activity"]
    first = activity.loc[(activity["gpu"] == "0") & (activity["ts"] == pd.Timestamp(START))]
    assert sorted(first["uuid"]) == [f"GPU-5a1c0f3e-0000-4000-8000-000000000000/{i}/{p}"
                                     for i, p in (("1", "3g.40gb"), ("2", "2g.20gb"), ("3", "1g.10gb"))]
    util_only = tmp_path / "u.om"
    util_only.write_text(shifted(mig_metrics(util_on_slices=True, profiling=False), 0))
    tables = read_file(util_only, ctx).tables
    excluded = tables["excluded_samples"]
    assert set(excluded["reason"]) == {"GPU_UTIL is not defined on a MIG instance (needs DCGM_FI_PROF_GR_ENGINE_ACTIVE)"}
    assert int(excluded["count"].sum()) == 3 * 8
    assert len(tables["unmeasured_intervals"]) == 3 * 2


def test_mig_requests_in_the_file_table(tmp_path):
    """kube-state-metrics' nvidia_com_mig_3g_40gb and the raw nvidia.com/mig-2g.20gb both read as the
    profile asked for; whole-GPU requests as "" (day 1's time-sliced pods)."""
    ctx = ReadContext(START, START + timedelta(hours=2), "USD", 3600)
    path = tmp_path / "m.om"
    path.write_text(shifted(mig_metrics(requests=MIG_REQUESTS), 0))
    requests = read_file(path, ctx).tables["gpu_requests"]
    assert sorted(zip(requests["pod"], requests["mig_profile"], requests["gpus"])) == [
        ("a-0", "3g.40gb", 1.0), ("a-0", "3g.40gb", 1.0), ("b-0", "2g.20gb", 1.0), ("b-0", "2g.20gb", 1.0),
        ("b-1", "1g.5gb", 1.0), ("b-1", "1g.5gb", 1.0)]
    path.write_text(shifted(sliced_metrics(), 0))
    assert set(read_file(path, ctx).tables["gpu_requests"]["mig_profile"]) == {""}


@pytest.mark.parametrize("day", list(DAYS))
def test_query_range_dump_gives_the_file_tables(tmp_path, day):
    start = START + timedelta(days=day)
    ctx = ReadContext(start, start + timedelta(hours=2), "USD", 3600)
    path = tmp_path / "m.om"
    path.write_text(day_text(day))
    dump = query_range_dump(path, tmp_path / "dump.json")
    expected = read_file(path, ctx)
    got = PromDumpConnector(SourceSpec("t", "telemetry", "prom_dump", dump), ctx).read()
    for name in ("gpu_activity", "excluded_samples", "unmeasured_intervals", "gpu_requests"):
        pd.testing.assert_frame_equal(expected.tables[name], got.tables[name], check_exact=False,
                                      rtol=0, atol=1e-9, obj=name)
