"""Triton, TGI, vLLM extras, DCGM evidence and kube-state replicas: the same tables from an
OpenMetrics file, a query_range dump and a real Prometheus; evidence figures in audit.json and the
report; label mismatches; money unchanged by evidence.

Real samples: shared/data/metrics/datadog-integrations-core/*.prom (single scrapes without
timestamps, stamped here as the existing snapshot tests do). Counter-derived figures come from
fixtures/telemetry_serving/serving.om (built from those names and labels; provenance in
make_serving.py beside it).
"""
from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from audit.audit_json import to_dict
from audit.case import Case, Service
from audit.collected import Collected
from audit.pipeline import audit_collected
from audit.render import render
from connectors import registry
from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.openmetrics import OpenMetricsConnector
from connectors.telemetry.prom_dump import PromDumpConnector
from tests.builders import frame, line, lines_frame, query_range_dump
from tests.connectors.telemetry.test_prometheus import assert_same_tables
from tests.paths import DATA
from tests.servers.prometheus import SERVING, SERVING_SHIFT

REAL = DATA / "metrics" / "datadog-integrations-core"
START = datetime(2025, 1, 1, tzinfo=UTC)
END = START + timedelta(hours=1)
T0 = int(START.timestamp())
TRITON, TGI = "triton-densenet-7c9f8-abcde", "tgi-llama-5d8b6-xyz12"
VLLM, VLLM0 = "vllm-opt-6f7d9-qwert", "vllm-v0-5c4b3-asdfg"
NEW_TABLES = ("serving_stats", "gpu_evidence", "replicas")


def ctx(step: int | None = 300) -> ReadContext:
    return ReadContext(START, END, "USD", step)


def read_file(path: Path, step: int | None = 300):
    return OpenMetricsConnector(SourceSpec("serving", "telemetry", "openmetrics", path), ctx(step)).read()


def stamped(tmp_path: Path, name: str, times=(0, 60)) -> Path:
    """A real single scrape given scrape times (seconds after the window start)."""
    scrape = [t for t in (REAL / name).read_text().splitlines() if t and t[0] != "#"]
    path = tmp_path / (name + ".om")
    path.write_text("\n".join(f"{s} {T0 + t}" for t in times for s in scrape) + "\n# EOF\n")
    return path


@pytest.fixture(scope="module")
def serving():
    return read_file(SERVING)


def one(frame: pd.DataFrame, **where) -> pd.DataFrame:
    for key, value in where.items():
        frame = frame.loc[frame[key] == value]
    return frame


# --------------------------------------------------------------------------------------------
# Real scrapes: the families are recognised, gauges present, counters give no increase
# --------------------------------------------------------------------------------------------

def test_real_triton_scrape(tmp_path):
    tables = read_file(stamped(tmp_path, "triton_metrics_excerpt.prom")).tables
    stats = tables["serving_stats"]
    assert set(stats["family"]) == {"triton"}
    assert set(stats["model_name"]) == {"densenet_onnx", "simple"}
    dense = one(stats, model_name="densenet_onnx")
    assert dense["waiting"].tolist() == [0.0]            # nv_inference_pending_request_count
    assert dense["requests"].tolist() == [0.0]           # one scrape pair, no increase
    assert dense["batch_steps"].tolist() == [0.0]
    assert dense["queue_seconds_per_request"].isna().all()  # 0 requests: not measured, not 0
    assert dense["batch_size"].isna().all()
    traffic = tables["traffic"]
    assert set(traffic["family"]) == {"triton"} and traffic["requests"].sum() == 0
    # Triton counts no tokens: not measured (NaN), where they were 0.0
    assert traffic[["prompt_tokens", "generated_tokens"]].isna().all().all()


def test_real_tgi_scrape(tmp_path):
    tables = read_file(stamped(tmp_path, "tgi_metrics_excerpt.prom")).tables
    stats = tables["serving_stats"]
    assert stats["family"].tolist() == ["tgi"]
    row = stats.iloc[0]
    assert row["waiting"] == 0.0 and row["running"] == 0.0 and row["batch_size"] == 0.0
    assert row["requests"] == 0.0 and row["failures"] == 0.0 and row["batch_steps"] == 0.0
    assert math.isnan(row["queue_seconds"])  # the excerpt has no tgi_request_queue_duration
    assert tables["traffic"]["family"].tolist() == ["tgi"]
    # no tgi_request_input_length / tgi_request_generated_tokens in the excerpt: NaN, where they were 0.0
    assert tables["traffic"][["prompt_tokens", "generated_tokens"]].isna().all().all()


def tgi_scrapes(tmp_path: Path, tokens: bool) -> Path:
    """Two scrapes of a TGI server: its request counter, with or without its token histograms' sums."""
    series = [("tgi_request_success", "counter", (5, 8))]
    if tokens:
        series += [("tgi_request_input_length", "histogram", (0, 0)),
                   ("tgi_request_generated_tokens", "histogram", (0, 0))]
    text = []
    for name, kind, values in series:
        text.append(f"# TYPE {name} {kind}")
        sample = f"{name}_sum" if kind == "histogram" else f"{name}_total"
        text += [f'{sample}{{pod="tgi-0"}} {v} {T0 + 60 * i}' for i, v in enumerate(values)]
    path = tmp_path / "tgi.om"
    path.write_text("\n".join(text) + "\n# EOF\n")
    return path


def test_tgi_tokens_counted_zero_are_kept_apart_from_tokens_not_measured(tmp_path):
    measured = read_file(tgi_scrapes(tmp_path, tokens=True)).tables["traffic"]
    assert measured[["requests", "prompt_tokens", "generated_tokens"]].values.tolist() == [[3.0, 0.0, 0.0]]
    unmeasured = read_file(tgi_scrapes(tmp_path, tokens=False)).tables["traffic"]
    assert unmeasured["requests"].tolist() == [3.0]
    assert unmeasured[["prompt_tokens", "generated_tokens"]].isna().all().all()


def test_real_tgi_counters_grow_when_scraped_twice(tmp_path):
    """The real TGI label sets with counters that grew between two scrapes."""
    scrape = [t for t in (REAL / "tgi_metrics_excerpt.prom").read_text().splitlines()
              if t and t[0] != "#"]
    later = []
    for text in scrape:
        name_labels, value = text.rsplit(" ", 1)
        grow = name_labels.startswith(("tgi_request_success", "tgi_request_count",
                                       "tgi_batch_inference_count", "tgi_request_failure"))
        later.append(f"{name_labels} {float(value) + (10 if grow else 0)} {T0 + 60}")
    path = tmp_path / "tgi2.om"
    path.write_text("\n".join([f"{s} {T0}" for s in scrape] + later) + "\n# EOF\n")
    row = read_file(path).tables["serving_stats"].iloc[0]
    assert row["requests"] == 10 and row["failures"] == 10 and row["batch_steps"] == 20
    assert row["received"] == 10  # tgi_request_count: read, and not tabled before


def test_real_vllm_scrape(tmp_path):
    tables = read_file(stamped(tmp_path, "vllm_metrics_excerpt.prom")).tables
    stats = tables["serving_stats"]
    assert stats["family"].tolist() == ["vllm"]
    row = stats.iloc[0]
    assert row["kv_cache_usage"] == 0.0 and row["running"] == 0.0 and row["waiting"] == 0.0
    assert row["prefix_queries"] == 0.0 and row["queue_requests"] == 0.0 and row["batch_steps"] == 0
    assert math.isnan(row["prefix_hit_rate"]) and math.isnan(row["tokens_per_step"])


def test_real_dcgm_evidence_families(tmp_path):
    tables = read_file(stamped(tmp_path, "dcgm_exporter_excerpt.prom")).tables
    evidence = tables["gpu_evidence"].set_index("uuid")
    t4 = evidence.loc["GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"]
    assert t4["power_watts"] == pytest.approx(8.969) and t4["fb_used_mib"] == 0.0
    assert math.isnan(t4["sm_active"])  # the excerpt's SM_ACTIVE has no GPU labels
    assert evidence.loc["GPU-abc", "dram_active"] == pytest.approx(3e-6)
    busy = tables["gpu_activity"]
    assert busy["source"].tolist() == ["DCGM_FI_DEV_GPU_UTIL"]  # evidence never feeds busy


# --------------------------------------------------------------------------------------------
# Counter-derived figures of the multi-scrape fixture
# --------------------------------------------------------------------------------------------

def test_triton_figures(serving):
    stats = one(serving.tables["serving_stats"], family="triton")
    assert stats["pod"].unique().tolist() == [TRITON]
    assert stats["requests"].sum() == 295  # 59 scrape pairs of 5, the restart counted once
    assert stats["batch_size"].round(9).unique().tolist() == [5.0]
    assert (stats["queue_seconds_per_request"] - 0.0012).abs().max() < 1e-12
    per_request = stats["compute_infer_seconds"].sum() / stats["requests"].sum()
    assert per_request == pytest.approx(0.442277)
    assert stats["compute_input_seconds"].sum() / 295 == pytest.approx(208e-6)
    assert stats["failures"].sum() > 0 and stats["waiting"].notna().all()
    traffic = one(serving.tables["traffic"], family="triton")
    assert traffic["requests"].sum() == 295 and traffic["prompt_tokens"].isna().all()


def test_tgi_figures(serving):
    stats = one(serving.tables["serving_stats"], family="tgi")
    assert stats["requests"].sum() == 177 and stats["failures"].sum() == 10
    assert stats["queue_seconds_per_request"].round(9).unique().tolist() == [0.5]
    assert stats["batch_size"].equals(stats["running"]) and stats["running"].notna().all()
    assert stats["waiting"].iloc[0] == pytest.approx(1.2)  # tgi_queue_size 0,1,2,3,0
    traffic = one(serving.tables["traffic"], family="tgi")
    assert traffic["prompt_tokens"].sum() == 177 * 120 and traffic["generated_tokens"].sum() == 177 * 40


def test_vllm_v1_and_v0_figures(serving):
    stats = serving.tables["serving_stats"]
    v1 = one(stats, pod=VLLM)
    assert v1["tokens_per_step"].round(9).unique().tolist() == [8.0]
    assert v1["prefix_hit_rate"].round(9).unique().tolist() == [0.4]
    assert v1["queue_seconds_per_request"].round(9).unique().tolist() == [0.025]
    assert v1["running"].notna().all() and v1["kv_cache_usage"].between(0.25, 0.3).all()
    v0 = one(stats, pod=VLLM0)
    assert v0["queue_seconds_per_request"].round(9).unique().tolist() == [0.2]
    assert v0["prefix_hit_rate"].unique().tolist() == [0.3]
    assert v0["kv_cache_usage"].unique().tolist() == [0.5]


def test_dcgm_evidence_and_replicas(serving):
    evidence = serving.tables["gpu_evidence"]
    assert len(evidence) == 36 and evidence[["sm_active", "tensor_active", "dram_active",
                                             "fb_used_mib", "power_watts"]].notna().all().all()
    first = one(evidence, node="gpu-node-1", gpu="0").iloc[0]
    assert first["fb_used_mib"] == 1002 and first["power_watts"] == pytest.approx(30.4)
    replicas = serving.tables["replicas"]
    triton = one(replicas, kind="deployment", name="triton-densenet")
    assert triton["spec_replicas"].unique().tolist() == [2.0]
    assert triton["available_replicas"].tolist() == [2.0] * 6 + [1.0] * 6
    old = one(replicas, kind="hpa", name="tgi-llama")  # kube_hpa_* (ksm < 2.0)
    assert old["desired_replicas"].unique().tolist() == [1.0]
    assert old["max_replicas"].unique().tolist() == [2.0] and old["min_replicas"].isna().all()


def test_evidence_families_do_not_change_the_busy_fraction(serving, tmp_path):
    kept = [t for t in SERVING.read_text().splitlines()
            if not t.startswith(("DCGM_FI_PROF_SM", "DCGM_FI_PROF_PIPE", "DCGM_FI_PROF_DRAM",
                                 "DCGM_FI_DEV_FB", "DCGM_FI_DEV_POWER"))]
    path = tmp_path / "busy.om"
    path.write_text("\n".join(kept) + "\n")
    without = read_file(path)
    pd.testing.assert_frame_equal(without.tables["gpu_activity"], serving.tables["gpu_activity"])
    assert without.tables["gpu_evidence"].empty


def test_query_range_dump_gives_the_same_tables(serving, tmp_path):
    path = query_range_dump(SERVING, tmp_path / "dump.json")
    got = PromDumpConnector(SourceSpec("dump", "telemetry", "prom_dump", path), ctx()).read()
    assert_same_tables(serving, got)


# --------------------------------------------------------------------------------------------
# A real Prometheus, backfilled with promtool: the session's server holds serving.om a day later
# (SERVING_SHIFT, so that it does not meet telemetry_small); both sides read that shifted copy
# --------------------------------------------------------------------------------------------

@pytest.mark.services
@pytest.mark.parametrize("step", [300, 900, None])
def test_prometheus_gives_the_same_tables(prom, monkeypatch, step):
    from connectors.telemetry.prometheus import PrometheusConnector
    monkeypatch.setitem(registry.CONNECTORS, "prometheus",
                        "connectors.telemetry.prometheus:PrometheusConnector")
    spec = SourceSpec("prom", "telemetry", "prometheus", None, {"url": prom.url})
    later = ReadContext(START + SERVING_SHIFT, END + SERVING_SHIFT, "USD", step)
    got = PrometheusConnector(spec, later).read()
    expected = OpenMetricsConnector(SourceSpec("serving", "telemetry", "openmetrics", prom.serving), later).read()
    assert_same_tables(expected, got)
    for name in NEW_TABLES:
        assert len(got.tables[name]), name
    assert set(got.tables["traffic"]["family"]) == {"vllm", "triton", "tgi"}


# --------------------------------------------------------------------------------------------
# The audit: evidence per service, label mismatches, money unchanged
# --------------------------------------------------------------------------------------------

def make_case() -> Case:
    services = {"triton": Service("triton", {"namespace": "serve", "pod": "re:^triton-densenet-"}),
                "tgi": Service("tgi", {"namespace": "serve", "pod": "re:^tgi-llama-"}),
                "opt": Service("opt", {"namespace": "serve", "pod": "re:^vllm-opt-"})}
    return Case(path=Path("/nonexistent/case.toml"), name="serving", start=START, end=END,
                currency="USD", cost_basis="effective", tolerance=Decimal("0.02"), step_seconds=300,
                target_utilisation=Decimal("0.8"), loaded_rate=Decimal(100), sources=(),
                services=services, scope={"accounts": ["111"], "services": [], "tags": {}},
                rules=(), nodes={}, option_overrides={})


def collected(tables: dict) -> Collected:
    gpu = line(1, resource_id="i-0aaa1111", charge_description="On Demand Linux g4dn.12xlarge Instance Hour",
               pricing_unit="Hours", pricing_quantity=Decimal(1), contracted_unit_price=Decimal("3.912"),
               billed_cost=Decimal("3.912"), effective_cost=Decimal("3.912"),
               start=pd.Timestamp(START), end=pd.Timestamp(END))
    return Collected((frame("billing", "focus", {"lines": lines_frame([gpu])}),
                      frame("telemetry", "openmetrics", tables, name="serving")))


@pytest.fixture(scope="module")
def document(serving):
    return to_dict(audit_collected(make_case(), collected(dict(serving.tables))))


def test_evidence_only_money_does_not_move(serving, document):
    bare = {k: v for k, v in serving.tables.items() if k not in NEW_TABLES}
    without = to_dict(audit_collected(make_case(), collected(bare)))
    for key in ("buckets", "total", "gpu_split", "reconciliation"):
        assert without[key] == document[key], key
    # the serving counters' failed and received requests count all requests (METHOD §4): only the figures
    # over all requests, and the reason that says why they are null, move
    over_all = ("all_requests", "all_requests_source", "cost_per_1k_all_requests", "requests_per_currency_unit",
                "reason")

    def unit_costs(doc):
        return {n: {k: v for k, v in s.items() if k not in over_all} for n, s in doc["services"].items()}
    assert unit_costs(without) == unit_costs(document)

    def priced(options):  # the options' figures, without the evidence shown beside them
        return [{k: v for k, v in o.items() if k != "evidence"} for o in options]
    assert priced(without["options"]) == priced(document["options"])
    assert all(f["value"] is None for s in without["serving_evidence"].values()
               for k, f in s.items() if k not in ("mean_running", "mean_waiting"))


def test_serving_evidence_per_service(document):
    evidence = document["serving_evidence"]
    triton, tgi, opt = evidence["triton"], evidence["tgi"], evidence["opt"]
    assert triton["batch_size"]["value"] == "5.000000"
    assert triton["queue_seconds_per_request"]["value"] == "0.001200"
    assert "nv_inference_queue_duration_us" in triton["queue_seconds_per_request"]["source"]
    assert "serving (openmetrics)" in triton["queue_seconds_per_request"]["source"]
    assert triton["compute_infer_seconds_per_request"]["value"] == "0.442277"
    assert tgi["queue_seconds_per_request"]["value"] == "0.500000"
    assert opt["tokens_per_step"]["value"] == "8.000000"
    assert opt["prefix_cache_hit_rate"]["value"] == "0.400000"
    assert triton["replicas_spec"]["value"] == "2.000000"
    assert triton["replicas_available"]["value"] == "1.500000"
    assert triton["hpa_desired"]["value"] == "1.500000" and tgi["hpa_max"]["value"] == "2.000000"
    assert triton["sm_active"]["value"] is not None and "DCGM_FI_PROF_SM_ACTIVE" in triton["sm_active"]["source"]
    # not measured: null with the reason, never zero
    assert opt["sm_active"]["value"] is None and "matched this service" in opt["sm_active"]["reason"]
    assert triton["prefix_cache_hit_rate"]["value"] is None
    assert tgi["tokens_per_step"]["reason"].startswith("no series of")


def test_triton_and_tgi_count_requests_for_unit_costs(document):
    services = document["services"]
    assert services["triton"]["requests"] == 295
    assert services["triton"]["traffic_source"] == "serving (openmetrics): nv_inference_request_success"
    assert services["tgi"]["requests"] == 177 and services["tgi"]["prompt_tokens"] == 177 * 120
    assert services["tgi"]["traffic_source"].endswith("tgi_request_success")
    assert services["opt"]["traffic_source"].endswith("vllm:request_success_total")
    # all requests: Triton's successful + failed, TGI's received (they were null: "counts successful requests only")
    assert (services["triton"]["all_requests"], services["triton"]["cost_per_1k_all_requests"]) == (309, "2.057282")
    assert services["triton"]["all_requests_source"] == ("serving (openmetrics): nv_inference_request_success + "
                                                         "nv_inference_request_failure")
    assert (services["tgi"]["all_requests"], services["tgi"]["cost_per_1k_all_requests"]) == (187, "2.876471")
    assert services["tgi"]["all_requests_source"] == "serving (openmetrics): tgi_request_count"


def test_label_mismatches_are_reported_by_name(document):
    found = {m["check"]: m for m in document["telemetry"]["label_mismatches"]}
    assert found["serving_pod_not_in_dcgm"]["values"] == [f"serve/{VLLM}", f"serve/{VLLM0}"]
    assert found["serving_pod_not_in_dcgm"]["intervals"] == 12
    assert found["dcgm_node_not_in_node_info"]["values"] == ["gpu-node-2"]
    assert found["gpu_request_pod_not_in_dcgm"]["values"] == ["serve/orphan-0"]
    assert found["deployment_without_service"]["values"] == ["serve/batch-etl"]
    assert found["deployment_without_service"]["count"] == 1
    assert "gpu_request_node_not_in_dcgm" not in found


@pytest.mark.filterwarnings("ignore:Attempting to set identical:UserWarning")  # a one-hour case
def test_report_shows_the_evidence_and_escapes_untrusted_labels(document, tmp_path):
    audit = json.loads(json.dumps(document))
    audit["telemetry"]["label_mismatches"][0]["values"] = ["<script>alert(1)</script>"]
    render(audit, tmp_path, ["html"])
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Serving-path evidence" in html and "Label mismatches" in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "not measured" in html and "nv_inference_queue_duration_us" in html


@pytest.mark.filterwarnings("ignore:Attempting to set identical:UserWarning")  # a one-hour case
def test_options_carry_the_evidence_that_bears_on_them(document, tmp_path):
    options = {o["id"]: o for o in document["options"]}
    batching = {(e["service"], e["figure"]): e["value"] for e in options["batching_limits"]["evidence"]}
    assert batching[("triton", "batch_size")] == "5.000000"
    assert batching[("opt", "tokens_per_step")] == "8.000000"
    prefix = {(e["service"], e["figure"]): e for e in options["prefix_kv_cache"]["evidence"]}
    assert prefix[("opt", "prefix_cache_hit_rate")]["value"] == "0.400000"
    assert "prefix_cache" in prefix[("opt", "prefix_cache_hit_rate")]["source"]
    assert all(e["value"] is not None for o in document["options"] for e in o["evidence"])  # measured only
    render(json.loads(json.dumps(document)), tmp_path, ["html"])
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Evidence: " in html and "opt: prefix cache hit rate 0.4" in html


def test_a_pod_with_token_series_and_no_request_series_has_requests_not_measured(tmp_path):
    """vLLM token counters without vllm:request_success_total: the pod's traffic rows read 0
    requests (a stand-in 0, summed as "counted no successful request"); now NaN, not measured.
    A pod with its request series keeps its counted requests."""
    rows = ["# TYPE vllm:prompt_tokens counter", "# TYPE vllm:request_success counter"]
    for t, (tokens, served) in zip((0, 60), ((100, 3), (160, 5))):
        for pod in ("tokens-only", "both"):
            rows.append(f'vllm:prompt_tokens_total{{model_name="m",namespace="llm",pod="{pod}"}} {tokens} {T0 + t}')
        rows.append(f'vllm:request_success_total{{model_name="m",namespace="llm",pod="both",finished_reason="stop"}} '
                    f'{served} {T0 + t}')
    path = tmp_path / "tokens.om"
    path.write_text("\n".join(rows) + "\n# EOF\n")
    traffic = read_file(path).tables["traffic"].set_index("pod")
    assert math.isnan(traffic.loc["tokens-only", "requests"]) and traffic.loc["tokens-only", "prompt_tokens"] == 60
    assert (traffic.loc["both", "requests"], traffic.loc["both", "prompt_tokens"]) == (2, 60)
