"""Prometheus connector against a real Prometheus (Debian 2.42) backfilled with promtool.

The session's one server (tests/connectors/conftest.py, ``prom``) holds the seeded scenarios,
fixtures/telemetry_small and the demo case's month.

The same samples read from a file (OpenMetrics connector) and from Prometheus give the same
tables, and the demo case gives the same audit.json, ``sources`` aside. Faults (a restart between
chunks, 5xx answers, query timeouts, refused queries) are retried or split; a source that keeps
failing is reported missing and the audit still conserves to the cent.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from audit.audit_json import to_dict
from audit.case import load_case
from audit.pipeline import run_audit
from connectors import registry
from connectors.base import ReadContext, SourceSpec
from connectors.errors import FatalSourceError, InputError
from connectors.telemetry.openmetrics import OpenMetricsConnector
from connectors.telemetry.prometheus import PrometheusConnector
from connectors.telemetry.promhttp import PARALLEL_QUERIES, PromClient, parallel_queries
from connectors.telemetry.promquery import MAX_POINTS, Puller, Window, chunks, probe_left_open
from tests.paths import DEMO
from tests.servers.prometheus import DEMO_METRICS, SEEDS, SMALL, FaultProxy, self_signed

pytestmark = pytest.mark.services
TOO_LARGE = json.dumps({"status": "error", "errorType": "execution", "error":
                        "query processing would load too many samples into memory"}).encode()
TIMEOUT = json.dumps({"status": "error", "errorType": "timeout",
                      "error": "query timed out in expression evaluation"}).encode()
UNAVAILABLE = json.dumps({"status": "error", "errorType": "unavailable", "error": "restarting"}).encode()
# what Prometheus answered a query that reached it while it was shutting down (CI, 5 December 2026)
CLOSING = json.dumps({"status": "error", "errorType": "execution", "error": "open querier for block "
                      "01M92A0B5T9ABHG2AGPKPTB0K8: open index reader: block is closing"}).encode()
CANCELED = json.dumps({"status": "error", "errorType": "canceled", "error": "context canceled"}).encode()


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """The format name resolves whether or not the registry lists it yet; backoffs are short."""
    monkeypatch.setitem(registry.CONNECTORS, "prometheus", "connectors.telemetry.prometheus:PrometheusConnector")
    monkeypatch.setattr(PromClient, "backoff_seconds", 0.05)


@pytest.fixture
def proxy(prom):
    """A fault-injecting proxy in front of the scenario server."""
    front = FaultProxy(prom.url)
    yield front
    front.close()


def context(start, end, step) -> ReadContext:
    """A read context in USD."""
    return ReadContext(start, end, "USD", step)


def from_file(path: Path, ctx: ReadContext):
    """The OpenMetrics connector's frame of a file."""
    return OpenMetricsConnector(SourceSpec("file", "telemetry", "openmetrics", path), ctx).read()


def connector(url: str, ctx: ReadContext, **options) -> PrometheusConnector:
    """A Prometheus connector on ``url``."""
    spec = SourceSpec("prom", "telemetry", "prometheus", None, {"url": url, **options})
    return PrometheusConnector(spec, ctx)


#: tables only the file connectors give: each series' pod and GPU labels (series_labels), which the
#: server's grid queries aggregate away (the server would need /api/v1/series)
FILE_ONLY = {"series_labels"}


def assert_same_tables(expected, got) -> None:
    """Every table equal: floats within 1e-9, everything else exactly."""
    assert set(expected.tables) - FILE_ONLY == set(got.tables) - FILE_ONLY
    for name, table in expected.tables.items():
        if name in FILE_ONLY and name not in got.tables:
            continue
        pd.testing.assert_frame_equal(table, got.tables[name], check_exact=False, rtol=0, atol=1e-9,
                                      obj=name)


# --------------------------------------------------------------------------------------------
# Same tables as the file connector
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_scenario_tables_equal_the_file_connectors(prom, seed):
    case = prom.scenarios[seed]
    ctx = context(case.start, case.end, case.step)
    got = connector(prom.url, ctx).read()
    assert_same_tables(from_file(case.path, ctx), got)
    assert len(got.tables["gpu_activity"]) and len(got.tables["traffic"])


def test_small_cluster_with_the_sources_own_step(prom):
    ctx = context(pd.Timestamp("2025-01-01T00:00Z"), pd.Timestamp("2025-01-01T01:00Z"), None)
    reader = connector(prom.url, ctx)
    got = reader.read()
    assert reader.step_seconds == 300
    assert_same_tables(from_file(SMALL, ctx), got)
    traffic = got.tables["traffic"].groupby("pod")["requests"].sum()
    assert traffic.to_dict() == {"vllm-0": 144.0, "vllm-1": 58.0}  # the reset counted as 3
    assert got.rows > 0 and len(got.sha256) == 64 and got.covered[0] == ctx.start


def test_a_window_without_series_is_an_input_error(prom):
    ctx = context(pd.Timestamp("2019-01-01T00:00Z"), pd.Timestamp("2019-01-02T00:00Z"), 3600)
    with pytest.raises(InputError, match="no series the audit reads") as caught:
        connector(prom.url, ctx).read()
    # the server holds them at other times: the refusal says which and when (rule 5)
    found = re.search(r"; the server holds (DCGM_FI_\w+, [^;(]*) between (\d{4}-\d\d-\d\d) and (\d{4}-\d\d-\d\d) "
                      r"\(UTC days\), outside the window", str(caught.value))
    assert found, str(caught.value)
    assert found.group(2) <= "2025-01-01" and found.group(3) >= "2026-09-30"  # telemetry_small's day, the demo's month


def test_a_server_without_the_series_at_any_time_says_nothing_more(prom):
    from connectors.telemetry.prom_span import held_elsewhere
    from connectors.telemetry.promhttp import PromClient

    client = PromClient(prom.url, {})
    assert held_elsewhere(client, ["no_such_metric_total"], (0, 3_600_000)) == ""
    client.close()


def test_window_boundaries_and_chunks():
    closed, left_open = Window(0, 10_000, 3000), Window(0, 10_000, 3000, left_open=True)
    assert [closed.at(k) for k in range(4)] == [2999, 5999, 8999, 9999]
    assert [closed.range_ms(k) for k in range(4)] == [2999, 2999, 2999, 999]
    assert left_open.range_ms(0) == 3000
    month = Window(0, 30 * 86400 * 1000, 30_000)
    plan = chunks(month)
    assert plan[0].k0 == 0 and plan[-1].k1 == month.intervals
    assert all(a.k1 == b.k0 for a, b in zip(plan, plan[1:]))
    assert max(c.k1 - c.k0 for c in plan) <= MAX_POINTS
    assert [(c.k0, c.k1) for c in chunks(closed)] == [(0, 3), (3, 4)]  # the short tail alone


def test_prometheus_2_ranges_are_closed_on_both_ends(prom):
    assert probe_left_open(PromClient(prom.url, {}), 1_700_000_000_000) is False


# --------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------

def test_5xx_and_query_timeouts_are_retried(prom, proxy):
    case = prom.scenarios[1]
    ctx = context(case.start, case.end, case.step)
    proxy.faults = [(500, b"internal"), (502, b"bad gateway"), (503, UNAVAILABLE),
                    (429, b"slow down"), (503, TIMEOUT)]
    got = connector(proxy.url, ctx).read()
    assert not proxy.faults
    assert_same_tables(from_file(case.path, ctx), got)


def test_a_server_closing_its_storage_is_retried(prom, proxy):
    """A query that reaches Prometheus while it shuts down gets HTTP 422 execution "block is closing"
    (or a canceled query): transient, retried, never a bad query. The restart test failed once on it."""
    case = prom.scenarios[1]
    ctx = context(case.start, case.end, case.step)
    proxy.faults = [(422, CLOSING), (499, CANCELED)]  # Prometheus answers a canceled query with 499
    got = connector(proxy.url, ctx).read()
    assert not proxy.faults
    assert_same_tables(from_file(case.path, ctx), got)


def test_a_refused_query_is_split_by_time_then_by_series(prom, proxy):
    ctx = context(pd.Timestamp("2025-01-01T00:00Z"), pd.Timestamp("2025-01-01T01:00Z"), 900)
    proxy.only = "/api/v1/query_range"
    proxy.faults = [(422, TOO_LARGE)] * 3  # 4 intervals, then 2, then 1: shard by label
    reader = connector(proxy.url, ctx)
    got = reader.read()
    assert not proxy.faults and reader.client.requests > 10
    assert_same_tables(from_file(SMALL, ctx), got)


def test_a_source_that_keeps_failing_gives_up(prom, proxy, monkeypatch):
    monkeypatch.setattr(PromClient, "retries", 1)
    monkeypatch.setattr(PrometheusConnector, "backoff_seconds", 0.0)
    proxy.always = (500, b"down")
    ctx = context(pd.Timestamp("2025-01-01T00:00Z"), pd.Timestamp("2025-01-01T01:00Z"), 900)
    with pytest.raises(Exception, match="HTTP 500"):
        connector(proxy.url, ctx).read()
    assert proxy.seen == 2 * (PrometheusConnector.retries + 1)


def test_a_redirect_is_not_followed(prom, proxy):
    proxy.always = (302, b"")
    ctx = context(pd.Timestamp("2025-01-01T00:00Z"), pd.Timestamp("2025-01-01T01:00Z"), 900)
    with pytest.raises(FatalSourceError, match="HTTP 302"):
        connector(proxy.url, ctx).read()


# --------------------------------------------------------------------------------------------
# Credentials and TLS
# --------------------------------------------------------------------------------------------

def test_bearer_token_from_the_named_variable(prom, proxy, monkeypatch):
    monkeypatch.setenv("MY_PROM_TOKEN", "s3cr3t-value")
    ctx = context(pd.Timestamp("2025-01-01T00:00Z"), pd.Timestamp("2025-01-01T01:00Z"), 900)
    reader = connector(proxy.url, ctx, token_env="MY_PROM_TOKEN")
    reader.read()
    assert set(proxy.auth) == {"Bearer s3cr3t-value"}
    assert "s3cr3t-value" not in repr(reader) + repr(reader.client)


def test_basic_auth_from_the_environment(prom, proxy, monkeypatch):
    monkeypatch.delenv("COSTAUDIT_PROMETHEUS_TOKEN", raising=False)
    monkeypatch.setenv("COSTAUDIT_PROMETHEUS_USER", "audit")
    monkeypatch.setenv("COSTAUDIT_PROMETHEUS_PASSWORD", "pw")
    ctx = context(pd.Timestamp("2025-01-01T00:00Z"), pd.Timestamp("2025-01-01T01:00Z"), 900)
    connector(proxy.url, ctx).read()
    assert set(proxy.auth) == {"Basic YXVkaXQ6cHc="}


def test_tls_is_verified(prom, tmp_path):
    cert, key = self_signed(tmp_path)
    front = FaultProxy(prom.url, tls=(cert, key))
    ctx = context(pd.Timestamp("2025-01-01T00:00Z"), pd.Timestamp("2025-01-01T01:00Z"), 900)
    try:
        with pytest.raises(FatalSourceError, match="certificate not trusted"):
            connector(front.url, ctx).read()
        expected = from_file(SMALL, ctx)
        assert_same_tables(expected, connector(front.url, ctx, ca_file=str(cert)).read())
        assert_same_tables(expected, connector(front.url, ctx, insecure_skip_verify=True).read())
    finally:
        front.close()


def test_progress_bar_on_a_terminal(prom, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    ctx = context(pd.Timestamp("2025-01-01T00:00Z"), pd.Timestamp("2025-01-01T01:00Z"), 900)
    assert connector(prom.url, ctx).read().rows > 0


# --------------------------------------------------------------------------------------------
# The demo case: same tables, same audit.json
# --------------------------------------------------------------------------------------------

def demo_case(folder: Path, url: str) -> Path:
    """A copy of the demo case whose telemetry comes from Prometheus at ``url``."""
    target = folder / "demo"
    shutil.copytree(DEMO, target, ignore=shutil.ignore_patterns("telemetry"))
    text = (target / "case.toml").read_text(encoding="utf-8")
    block = ('[[telemetry]]\nname = "prometheus-export"\nformat = "prometheus"\n'
             f'url = "{url}"\n')
    text, n = re.subn(r"\[\[telemetry\]\].*?(?=\n\[)", block, text, flags=re.S)
    assert n == 1
    (target / "case.toml").write_text(text, encoding="utf-8")
    return target


def audit(case_folder: Path) -> dict:
    """audit.json of a case, as a dict."""
    return to_dict(run_audit(load_case(case_folder)))


def without_sources(document: dict) -> dict:
    """The document without its ``sources`` list, source labels naming the format scrubbed.

    Traffic provenance reads "<source name> (<format>)", which differs by design.
    """
    rest = {k: v for k, v in document.items() if k != "sources"}
    text = json.dumps(rest, sort_keys=True).replace("prometheus-export (prometheus)",
                                                    "prometheus-export (openmetrics)")
    return json.loads(text)


@pytest.mark.slow
@pytest.mark.parametrize("step", [3600, None])
def test_demo_tables_equal_the_file_connectors(prom, step):
    ctx = context(pd.Timestamp("2026-09-01T00:00Z"), pd.Timestamp("2026-10-01T00:00Z"), step)
    reader = connector(prom.url, ctx)
    got = reader.read()
    expected = from_file(DEMO_METRICS, ctx)
    assert reader.step_seconds == (step or 900)
    assert_same_tables(expected, got)


@pytest.mark.slow
def test_demo_audit_json_equals_the_file_based_one(prom, demo_audit, tmp_path):
    document = audit(demo_case(tmp_path, prom.url))
    assert without_sources(document) == without_sources(demo_audit)
    telemetry = [s for s in document["sources"] if s["kind"] == "telemetry"]
    assert telemetry[0]["format"] == "prometheus" and telemetry[0]["status"] == "read"


@pytest.mark.slow
def test_prometheus_restarted_mid_audit(prom, demo_audit, tmp_path, monkeypatch):
    monkeypatch.setattr(PrometheusConnector, "chunk_seconds", 5 * 86400)
    state = {"queries": 0, "refused": 0, "thread": None}
    real_series, real_exchange = Puller._series, PromClient._exchange

    def series(self, result, chunk):
        """After the first chunk's answer: stop Prometheus, start it again 1.5 s later."""
        out = real_series(self, result, chunk)
        state["queries"] += 1
        if state["queries"] == 1:
            state["thread"] = prom.server.restart_later(1.5)
        return out

    def exchange(self, path, params, method):
        """Count the requests refused while the server is down (asked one by one or at once)."""
        try:
            return real_exchange(self, path, params, method)
        except Exception:
            state["refused"] += 1
            raise

    monkeypatch.setattr(Puller, "_series", series)
    monkeypatch.setattr(PromClient, "_exchange", exchange)
    document = audit(demo_case(tmp_path, prom.url))
    state["thread"].join(timeout=60)
    assert state["refused"] >= 1 and state["queries"] > 6
    assert without_sources(document) == without_sources(demo_audit)


@pytest.mark.slow
def test_failing_source_is_reported_missing_and_the_audit_conserves(
        prom, demo_audit, tmp_path, monkeypatch):
    monkeypatch.setattr(PromClient, "retries", 1)
    monkeypatch.setattr(PrometheusConnector, "backoff_seconds", 0.0)
    front = FaultProxy(prom.url)
    front.always = (503, UNAVAILABLE)
    try:
        document = audit(demo_case(tmp_path, front.url))
    finally:
        front.close()
    missing = [s for s in document["sources"] if s["status"] == "missing"]
    assert [s["name"] for s in missing] == ["prometheus-export"]
    assert "HTTP 503" in missing[0]["reason"]
    total = Decimal(document["total"])
    assert total == Decimal(demo_audit["total"])
    assert sum(Decimal(b["amount"]) for b in document["buckets"].values()) == total


# --------------------------------------------------------------------------------------------
# Chunks asked at once (PromClient.ask, gather)
# --------------------------------------------------------------------------------------------

DEMO_MONTH = (pd.Timestamp("2026-09-01T00:00Z"), pd.Timestamp("2026-10-01T00:00Z"))


@pytest.mark.slow
def test_chunks_asked_at_once_give_the_same_tables_and_fingerprint(prom, monkeypatch):
    """The demo month is five 7-day chunks: asked four at a time, the tables, the values counted
    and the sha256 of the answers are those of asking them one by one."""
    ctx = context(*DEMO_MONTH, 3600)
    one_by_one = connector(prom.url, ctx, parallel_queries=1)
    expected = one_by_one.read()
    state = {"in_flight": 0, "most": 0}
    real_exchange = PromClient._exchange

    def exchange(self, path, params, method):
        with lock:
            state["in_flight"] += 1
            state["most"] = max(state["most"], state["in_flight"])
        try:
            time.sleep(0.05)  # long enough for the next chunk's request to start
            return real_exchange(self, path, params, method)
        finally:
            with lock:
                state["in_flight"] -= 1

    lock = threading.Lock()
    monkeypatch.setattr(PromClient, "_exchange", exchange)
    at_once = connector(prom.url, ctx, parallel_queries=4)
    got = at_once.read()
    assert state["most"] >= 2
    assert_identical_tables(expected, got)
    assert got.rows == expected.rows and got.sha256 == expected.sha256
    assert at_once.client.requests == one_by_one.client.requests


@pytest.mark.slow
def test_each_planned_template_is_asked_in_order_while_the_one_before_is_read(prom, monkeypatch):
    """The puller starts the next planned template's chunks while one is made into rows: every
    planned template is asked, in the plan's order, and none is left started but unread."""
    asked = []
    real_grid = Puller.grid

    def grid(self, template, *args, **kwargs):
        asked.append((template, template in self.asked))
        return real_grid(self, template, *args, **kwargs)

    monkeypatch.setattr(Puller, "grid", grid)
    source = connector(prom.url, context(*DEMO_MONTH, 3600), parallel_queries=4)
    source.read()
    plan = source.puller.ahead
    assert len(plan) >= 4 and len(set(plan)) == len(plan)
    assert [t for t, _ in asked if t in plan] == plan
    assert all(started for t, started in asked if t in plan[1:])  # each started before it was asked
    assert source.puller.asked == {}


@pytest.mark.slow
def test_a_chunk_refused_among_chunks_asked_at_once_is_split(prom, proxy):
    ctx = context(*DEMO_MONTH, 3600)
    expected = connector(prom.url, ctx, parallel_queries=1).read()
    proxy.only = "/api/v1/query_range"
    proxy.faults = [(422, TOO_LARGE)] * 2
    got = connector(proxy.url, ctx, parallel_queries=4).read()
    assert not proxy.faults
    assert_identical_tables(expected, got)


def assert_identical_tables(expected, got) -> None:
    """Every table equal, to the bit."""
    assert set(expected.tables) == set(got.tables)
    for name, table in expected.tables.items():
        pd.testing.assert_frame_equal(table, got.tables[name], check_exact=True, obj=name)


@pytest.mark.parametrize("value", [0, 33, "4", True, 2.5, None])
def test_parallel_queries_must_be_a_whole_number_from_1_to_32(value):
    with pytest.raises(InputError) as caught:
        parallel_queries({"parallel_queries": value})
    assert caught.value.column == "parallel_queries" and "1 to 32" in str(caught.value)


def test_parallel_queries_default_and_range():
    assert parallel_queries({}) == PARALLEL_QUERIES
    assert [parallel_queries({"parallel_queries": n}) for n in (1, 32)] == [1, 32]
