"""Phase timers and token histograms of vLLM and TGI, read from an OpenMetrics file and from a real
Prometheus backfilled with the same samples (connectors.telemetry.phase_families)."""
from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.openmetrics import OpenMetricsConnector
from connectors.telemetry.phase_families import distribution
from connectors.telemetry.promhttp import PromClient
from tests.connectors.telemetry.vllm_phases import EDGES, write
from tests.paths import DATA
from tests.servers.prometheus import PromServer, backfill

START = datetime(2025, 3, 1, tzinfo=UTC)
END = START + timedelta(hours=1)
T0 = int(START.timestamp())
TGI = DATA / "metrics" / "datadog-integrations-core" / "tgi_metrics_excerpt.prom"


def read(path, step=300):
    return OpenMetricsConnector(SourceSpec("vllm", "telemetry", "openmetrics", path),
                                ReadContext(START, END, "USD", step)).read()


@pytest.fixture(scope="module")
def hour(tmp_path_factory):
    path = tmp_path_factory.mktemp("phases") / "vllm.om"
    return path, write(path, T0)


def test_vllm_phase_timers_land_in_serving_stats(hour):
    path, truth = hour
    stats = read(path).tables["serving_stats"]
    assert stats["prefill_seconds"].sum() == pytest.approx(truth["prefill_s"], rel=1e-12)
    assert stats["decode_seconds"].sum() == pytest.approx(truth["decode_s"], rel=1e-12)
    assert stats["request_tpot_seconds"].sum() == pytest.approx(truth["tpot_s"], rel=1e-12)
    assert stats["prefill_requests"].sum() == stats["decode_requests"].sum() == truth["requests"]
    assert stats["generated_tokens"].sum() == truth["generated"]
    assert stats["tpot_seconds"].isna().all() and stats["itl_seconds"].isna().all()  # not exposed: not 0


def test_token_histograms_per_bucket(hour):
    path, truth = hour
    table = read(path).tables["token_histograms"]
    assert set(table["histogram"]) == {"prompt_tokens", "generation_tokens"}  # the time buckets are not kept
    edges, counts = distribution(table, "generation_tokens")
    assert edges.tolist() == [*map(float, EDGES), math.inf]
    lows = [0, *EDGES]
    expected = [sum(1 for n in truth["generated_per_request"] if lo < n <= hi) for lo, hi in zip(lows, EDGES)]
    expected.append(sum(1 for n in truth["generated_per_request"] if n > EDGES[-1]))
    assert counts.tolist() == expected
    assert counts.sum() == truth["requests"]


def test_tgi_forward_time_by_method(tmp_path):
    """The real TGI scrape plus its forward-duration histogram (TGI's name and ``method`` label; the
    excerpt has none), grown per method between two scrapes."""
    scrape = [t for t in TGI.read_text().splitlines() if t and t[0] != "#"]
    forward = {"prefill": (10.0, 3.5), "decode": (40.0, 12.25)}
    lines = [f"{s} {T0 + t}" for t in (0, 60) for s in scrape]
    for method, (first, grown) in forward.items():
        lines += [f'tgi_batch_forward_duration_sum{{method="{method}"}} {first} {T0}',
                  f'tgi_batch_forward_duration_sum{{method="{method}"}} {first + grown} {T0 + 60}',
                  f'tgi_batch_forward_duration_count{{method="{method}"}} 5 {T0}']
    path = tmp_path / "tgi.om"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    row = read(path).tables["serving_stats"].iloc[0]
    assert row["family"] == "tgi"
    assert row["prefill_seconds"] == pytest.approx(3.5) and row["decode_seconds"] == pytest.approx(12.25)


def test_real_vllm_excerpt_names_the_phase_timers(tmp_path):
    """vLLM's own exposition (datadog-integrations-core fixture) holds the timers the split reads."""
    scrape = [t for t in (TGI.parent / "vllm_metrics_excerpt.prom").read_text().splitlines() if t and t[0] != "#"]
    path = tmp_path / "vllm.om"
    path.write_text("\n".join(f"{s} {T0 + t}" for t in (0, 60) for s in scrape) + "\n# EOF\n")
    tables = read(path).tables
    row = tables["serving_stats"].iloc[0]
    assert row["prefill_seconds"] == 0 and row["decode_seconds"] == 0  # two equal scrapes: measured, no increase
    assert row["prefill_requests"] == 0


@pytest.fixture(scope="module")
def prom(hour, tmp_path_factory):
    path, _ = hour
    folder = tmp_path_factory.mktemp("prom")
    backfill([path], folder / "tsdb", folder / "scratch")
    server = PromServer(folder / "tsdb", folder)
    server.start()
    yield server
    server.stop()


@pytest.mark.services
def test_prometheus_reads_the_same_phase_tables(hour, prom, monkeypatch):
    from connectors.telemetry.prometheus import PrometheusConnector
    monkeypatch.setattr(PromClient, "backoff_seconds", 0.05)
    path, truth = hour
    spec = SourceSpec("prom", "telemetry", "prometheus", None, {"url": prom.url})
    got = PrometheusConnector(spec, ReadContext(START, END, "USD", 300)).read().tables
    expected = read(path).tables
    pd.testing.assert_frame_equal(expected["token_histograms"], got["token_histograms"], check_exact=False, atol=1e-9)
    columns = ["prefill_seconds", "decode_seconds", "request_tpot_seconds", "generated_tokens", "prefix_hits"]
    pd.testing.assert_frame_equal(expected["serving_stats"][columns], got["serving_stats"][columns],
                                  check_exact=False, atol=1e-9)
    assert float(np.nansum(got["serving_stats"]["decode_seconds"])) == pytest.approx(truth["decode_s"], rel=1e-12)


def test_a_restart_names_the_histogram_once(tmp_path):
    """A server restart resets every bucket series: the data-quality table names the histogram, not
    each edge, and vLLM's own counters keep their names."""
    labels = 'model_name="m",namespace="serve",pod="vllm-a"'
    lines = []
    for t, (low, total, prompt) in enumerate([(5, 9, 900), (7, 12, 1200), (1, 2, 150)]):
        lines += [f'vllm:request_generation_tokens_bucket{{{labels},le="10.0"}} {low} {T0 + 60 * t}',
                  f'vllm:request_generation_tokens_bucket{{{labels},le="+Inf"}} {total} {T0 + 60 * t}',
                  f'vllm:prompt_tokens_total{{{labels}}} {prompt} {T0 + 60 * t}']
    path = tmp_path / "restart.om"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    tables = read(path).tables
    resets = dict(zip(tables["counter_resets"]["metric"], tables["counter_resets"]["resets"]))
    assert resets == {"vllm:request_generation_tokens_bucket": 2, "vllm:prompt_tokens": 1}
    edges, counts = distribution(tables["token_histograms"], "generation_tokens")
    assert counts.tolist() == [2 + 1, (3 - 2) + 1]   # increases, the restart counted from 0
