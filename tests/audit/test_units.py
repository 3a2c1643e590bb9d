"""Unit costs and the denominator check: requests counted two ways."""
from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

import pandas as pd

from audit.case import Service
from audit.reconcile import _denominator_drivers, _no_estimate
from audit.unit_costs import traffic_by_service

SERVICES = {"chat": Service("chat", {"namespace": "llm"}, 1, 1, 3600)}
TS = pd.Timestamp("2026-09-01T00:00:00Z")


def traffic(rows):
    return pd.DataFrame([{"ts": TS, "model_name": "m", "namespace": "llm", "pod": "chat-0", "prompt_tokens": 0.0,
                          "generated_tokens": 0.0, **r} for r in rows])


def test_counters_are_the_denominator_and_logs_are_compared():
    frame = traffic([{"requests": 1000.0, "prompt_tokens": 5000.0, "source": "prom (openmetrics)"},
                     {"requests": 900.0, "source": "alb (access_log)"}])
    found = traffic_by_service(frame, SERVICES)["chat"]
    assert found.requests == Decimal(1000) and found.prompt_tokens == Decimal(5000)
    driver = _denominator_drivers({"chat": found}, Decimal("0.02"))[0]
    assert driver.gap == Decimal("0.1") and "more than the tolerance" in driver.detail


def test_one_source_is_said_so():
    found = traffic_by_service(traffic([{"requests": 10.0, "source": "prom (openmetrics)"}]), SERVICES)
    driver = _denominator_drivers(found, Decimal("0.02"))[0]
    assert driver.gap is None and "one source only" in driver.detail


def test_counts_from_other_namespaces_are_not_the_service():
    frame = traffic([{"requests": 10.0, "namespace": "other", "source": "p"}])
    assert traffic_by_service(frame, SERVICES) == {}


def test_the_representativeness_driver_says_why_a_service_has_no_kernel_estimate():
    """A profile whose window served no request (a collector bundle's requests = 0), one whose
    service no counter counts, and no profile at all are three different reasons, each named."""
    idle = _no_estimate(SimpleNamespace(name="bundle-1", requests=0))
    assert "profile bundle-1 served no request in its window (requests = 0)" in idle
    uncounted = _no_estimate(SimpleNamespace(name="chat-trace", requests=16))
    assert "profile chat-trace states its requests, but no request counter or log counts" in uncounted
    assert _no_estimate(None).startswith("no profile with stated traffic")
    assert _no_estimate(SimpleNamespace(name="x", requests=None)).startswith(  # before: "no profile with stated traffic"
        "profile x states no requests count: kernel-seconds per request unmeasured")


def test_the_sources_of_one_kind_of_count_are_added():
    """Two load balancers' logs of one service (or its logs of two halves of the month) count
    different requests. Before: the denominator took one of them (1,000 of 2,000 requests: every
    unit cost doubled) and the check compared the two as witnesses of the same requests."""
    frame = traffic([{"requests": 1000.0, "source": "alb-a (access_log)", "witness": "access_log", "pod": "chat"},
                     {"requests": 1000.0, "source": "alb-b (access_log)", "witness": "access_log", "pod": "chat",
                      "ts": TS + pd.Timedelta(days=15)},
                     {"requests": 1900.0, "prompt_tokens": 5000.0, "source": "prom (openmetrics): vllm:request_success_total",
                      "witness": "vllm:request_success_total"}])
    found = traffic_by_service(frame, SERVICES)["chat"]
    assert found.requests == Decimal(1900) and found.by_source == {
        "prom (openmetrics): vllm:request_success_total": Decimal(1900),
        "alb-a (access_log) + alb-b (access_log)": Decimal(2000)}
    logs_only = traffic_by_service(frame[frame["witness"] == "access_log"], SERVICES)["chat"]
    assert logs_only.requests == Decimal(2000)


def test_two_counter_sources_of_other_pods_are_the_denominator_together():
    frame = traffic([{"requests": 600.0, "prompt_tokens": 3000.0, "source": "east (prometheus): vllm:request_success_total",
                      "witness": "vllm:request_success_total"},
                     {"requests": 400.0, "prompt_tokens": 2000.0, "pod": "chat-1",
                      "source": "west (prometheus): vllm:request_success_total", "witness": "vllm:request_success_total"},
                     {"requests": 1000.0, "source": "alb (access_log)", "witness": "access_log", "pod": "chat"}])
    found = traffic_by_service(frame, SERVICES)["chat"]
    assert found.requests == Decimal(1000) and found.prompt_tokens == Decimal(5000)
    driver = _denominator_drivers({"chat": found}, Decimal("0.02"))[0]
    assert driver.gap == Decimal(0)
    assert driver.detail == ("east (prometheus): vllm:request_success_total + west (prometheus): "
                             "vllm:request_success_total: 1000 requests vs alb (access_log): 1000")


def test_the_classes_of_two_logs_are_added_in_audit_json():
    """'All requests' of a service counted by two load balancers' logs: before, one log's lines only
    (cost per 1,000 of all requests doubled)."""
    from audit.audit_json_units import denominator_counts

    frame = traffic([{"requests": 1000.0, "source": "alb-a (access_log)", "witness": "access_log", "pod": "chat"},
                     {"requests": 1000.0, "source": "alb-b (access_log)", "witness": "access_log", "pod": "chat"}])
    classes = pd.DataFrame([{"source": s, "pod": "chat", "lines": 1100, "successful": 1000, "failed": 50,
                             "health_checks": 40, "unparseable": 10, "other_paths": 0}
                            for s in ("alb-a (access_log)", "alb-b (access_log)")])
    found = traffic_by_service(frame, {"chat": Service("chat", {"pod": "chat"}, 1, 1, 3600)}, classes)["chat"]
    assert denominator_counts(found) == {"source": "alb-a (access_log) + alb-b (access_log)", "lines": 2200,
                                         "successful": 2000, "failed": 100, "health_checks": 80, "unparseable": 20,
                                         "other_paths": 0, "denominator": True}


def unit_entry(frame: pd.DataFrame, classes: pd.DataFrame, monkeypatch, own: Decimal = Decimal(1000),
               serving: pd.DataFrame | None = None, mismatches: tuple[dict, ...] = ()) -> dict:
    """audit.json's service entry for chat, costing ``own`` (1000.00) with the traffic of ``frame``, the
    serving_stats rows of ``serving`` (its prefill / decode split, which reads the whole result, left out)
    and the telemetry's label ``mismatches``."""
    from audit import audit_json_units
    from audit.audit_json_cents import ServiceCents
    from audit.audit_json_units import service_entry
    from audit.result import UnitCost

    monkeypatch.setattr(audit_json_units, "phases_entry", lambda result, uc, held: None)
    services = {"chat": Service("chat", {"pod": "re:^chat"}, 1, 1, 3600)}
    found = traffic_by_service(frame, services, classes, serving)["chat"]
    cost = UnitCost("chat", own, Decimal(0), Decimal(0), {}, found)
    held = ServiceCents({"model_compute": Decimal("1000.00"), "serving_path": Decimal("0.00"),
                         "platform_overhead": Decimal("0.00")})
    result = SimpleNamespace(intervals=(), telemetry=SimpleNamespace(label_mismatches=mismatches),
                             evidence=SimpleNamespace(serving={}), collected=SimpleNamespace(frames=()))
    return service_entry(result, cost, "gpu_cost", held)


def uncounted_entry(failed: dict, monkeypatch) -> dict:
    """audit.json's entry for a service no request counter or log counts, its serving evidence's
    ``failed_requests`` figure ``failed``."""
    from audit import audit_json_units
    from audit.audit_json_cents import ServiceCents
    from audit.result import UnitCost

    monkeypatch.setattr(audit_json_units, "phases_entry", lambda result, uc, held: None)
    held = ServiceCents({"model_compute": Decimal("1000.00"), "serving_path": Decimal("0.00"),
                         "platform_overhead": Decimal("0.00")})
    result = SimpleNamespace(intervals=(), telemetry=SimpleNamespace(label_mismatches=()),
                             evidence=SimpleNamespace(serving={"embed": {"failed_requests": failed}}))
    return audit_json_units.service_entry(result, UnitCost("embed", Decimal(1000), Decimal(0), Decimal(0), {}, None),
                                          "gpu_cost", held)


def test_a_service_only_a_failure_counter_counts_names_it_and_the_missing_success_counter(monkeypatch):
    """Triton pods exporting nv_inference_request_failure but no nv_inference_request_success:
    before, "no request counter or request log matched this service" while serving_evidence
    counted 29,510,240 failed requests; now the reason names that counter, its count and the
    successful-request counter missing."""
    failed = {"value": "29510240.000000", "source": "nv_inference_request_failure (prom (openmetrics))",
              "reason": None}
    entry = uncounted_entry(failed, monkeypatch)
    assert entry["requests"] is None and entry["cost_per_request"] is None
    assert entry["reason"] == (
        "its pods' failed requests are counted (nv_inference_request_failure (prom (openmetrics)): 29,510,240, "
        "serving_evidence.failed_requests), but no successful-request counter (nv_inference_request_success) or "
        "request log matched this service: unit costs unmeasured")
    none = {"value": None, "source": None, "reason": "no such family in the sources"}
    assert uncounted_entry(none, monkeypatch)["reason"] == (
        "no request counter or request log matched this service: unit costs unmeasured")


LOG_CLASSES = pd.DataFrame([{"source": "alb (access_log)", "pod": "chat", "lines": 2000, "successful": 1400,
                             "failed": 300, "health_checks": 200, "unparseable": 100, "other_paths": 0}])


def test_all_requests_come_from_the_denominator_s_own_source(monkeypatch):
    """A vLLM counter is the denominator (1,000,000 requests); the load balancer's 2,000 log lines beside
    it were the 'all requests' (cost per 1,000 of all requests 500.00 where per 1,000 successful was
    1.00: more all requests than successful ones cannot be)."""
    frame = traffic([{"requests": 1_000_000.0, "prompt_tokens": 5000.0, "pod": "chat-0",
                      "source": "prom (openmetrics): vllm:request_success_total", "witness": "vllm:request_success_total"},
                     {"requests": 1400.0, "pod": "chat", "source": "alb (access_log)", "witness": "access_log"}])
    entry = unit_entry(frame, LOG_CLASSES, monkeypatch)
    assert entry["cost_per_1k_requests"] == "1.000000" and entry["prompt_tokens"] == 5000
    assert entry["cost_per_1k_all_requests"] is None and entry["requests_per_currency_unit"]["all"] is None
    assert entry["request_counts"]["denominator"] is False and entry["request_counts"]["lines"] == 2000
    # the null says why (METHOD §9): before, the reason was null beside it
    assert entry["reason"] == ("cost per 1,000 of all requests not measured: the denominator (prom (openmetrics): "
                               "vllm:request_success_total) is read summed over finished_reason: its failed requests "
                               "are not told apart, and its server exports no counter of received requests; the "
                               "request log (alb (access_log)) counts another population than the denominator "
                               "(prom (openmetrics): vllm:request_success_total)")


def test_a_service_whose_counter_misses_a_gpu_pod_says_its_unit_costs_divide_that_time_by_other_pods_requests(
        monkeypatch):
    """Before: the unit cost divided the whole cost by chat-a's requests without a word of chat-b's
    GPU time (audit/mismatches.py gpu_pod_without_requests); now the reason says so."""
    frame = traffic([{"requests": 5950.0, "prompt_tokens": 5.0, "generated_tokens": 5.0, "pod": "chat-a",
                      "source": "prom (openmetrics): vllm:request_success_total",
                      "witness": "vllm:request_success_total"}])
    missed = {"check": "gpu_pod_without_requests", "service": "chat", "values": ["llm/chat-b"], "count": 1,
              "gpu_hours": "48.00", "against": "prom (openmetrics): vllm:request_success_total"}
    entry = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch, mismatches=(missed, {**missed, "service": "embed"}))
    assert entry["reason"] == (
        "part of its GPU time has no request count: 48.00 GPU-h of pods llm/chat-b that prom (openmetrics): "
        "vllm:request_success_total does not count (telemetry.label_mismatches): its unit costs divide that "
        "time's cost by its other pods' requests; cost per 1,000 of all requests not measured: the denominator "
        "(prom (openmetrics): vllm:request_success_total) is read summed over finished_reason: its failed "
        "requests are not told apart, and its server exports no counter of received requests")
    assert entry["cost_per_1k_requests"] == "168.067227"


def test_a_service_only_a_request_log_counts_has_no_tokens_measured(monkeypatch):
    """A log counts no tokens: they were 0 and 0 in the report, now null (not measured)."""
    frame = traffic([{"requests": 1400.0, "pod": "chat", "source": "alb (access_log)", "witness": "access_log"}])
    entry = unit_entry(frame, LOG_CLASSES, monkeypatch)
    assert entry["prompt_tokens"] is None and entry["generated_tokens"] is None and entry["cost_per_1m_tokens"] is None
    assert entry["cost_per_1k_all_requests"] == "500.000000" and entry["request_counts"]["denominator"] is True
    assert entry["reason"] == "cost per 1 M tokens not measured: a request log (alb (access_log)) counts no tokens"


def test_a_service_whose_credits_exceed_its_charges_has_no_unit_cost(monkeypatch):
    """A gateway whose -50 credit exceeds its 17.14 of instance-hours costs -32.864: its unit costs
    were negative prices (cost per 1,000 requests -2.579564 in the check), now null, and the reason says why."""
    frame = traffic([{"requests": 1400.0, "pod": "chat", "source": "alb (access_log)", "witness": "access_log"}])
    entry = unit_entry(frame, LOG_CLASSES, monkeypatch, own=Decimal("-32.864"))
    assert [entry[k] for k in ("cost_per_request", "cost_per_1k_requests", "cost_per_1k_all_requests",
                               "cost_per_1m_tokens")] == [None] * 4
    assert entry["requests_per_currency_unit"] == {"successful": None, "all": None}
    assert entry["reason"] == ("its cost is negative after credits (they exceed its charges: see fit): its unit "
                               "costs are not measured, a negative price being no unit cost")


def test_a_counter_alone_counts_no_all_requests_and_says_so(monkeypatch):
    frame = traffic([{"requests": 1000.0, "prompt_tokens": 5000.0, "generated_tokens": 500.0, "pod": "chat-0",
                      "source": "prom (openmetrics)", "witness": "vllm:request_success_total"}])
    entry = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch)
    assert entry["cost_per_1m_tokens"] == "181818.181818" and entry["cost_per_1k_all_requests"] is None
    assert entry["reason"] == ("cost per 1,000 of all requests not measured: the denominator (prom (openmetrics)) "
                               "is read summed over finished_reason: its failed requests are not told apart, and its "
                               "server exports no counter of received requests")


def test_a_log_that_counted_no_success_is_not_said_to_match_nothing(monkeypatch):
    """Before: "no request counter or request log matched this service" beside the log that matched
    and counted 0 successful requests."""
    frame = traffic([{"requests": 0.0, "pod": "chat", "source": "alb (access_log)", "witness": "access_log"}])
    entry = unit_entry(frame, LOG_CLASSES.assign(successful=0), monkeypatch)
    assert entry["requests"] == 0 and entry["cost_per_request"] is None
    assert entry["reason"] == ("its request source (alb (access_log)) counted no successful request in the window: "
                               "unit costs per request unmeasured")


NAN = float("nan")
VLLM = {"pod": "chat-0", "source": "prom (openmetrics): vllm:request_success_total",
        "witness": "vllm:request_success_total"}


def test_a_counter_without_token_series_has_tokens_not_measured(monkeypatch):
    """No vllm:prompt_tokens_total / vllm:generation_tokens_total beside the request counter: tokens
    were 0 and 0 with "counted no tokens in the window", now null with what was missing."""
    frame = traffic([{"requests": 1000.0, "prompt_tokens": NAN, "generated_tokens": NAN, **VLLM}])
    entry = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch)
    assert entry["prompt_tokens"] is None and entry["generated_tokens"] is None and entry["cost_per_1m_tokens"] is None
    assert entry["reason"].split("; ")[0] == (
        "cost per 1 M tokens not measured: no vllm:prompt_tokens_total or vllm:generation_tokens_total series "
        "beside prom (openmetrics): vllm:request_success_total")


def test_triton_counts_no_tokens(monkeypatch):
    frame = traffic([{"requests": 9.0, "prompt_tokens": NAN, "generated_tokens": NAN, "pod": "chat-0",
                      "source": "prom (openmetrics): nv_inference_request_success",
                      "witness": "nv_inference_request_success"}])
    entry = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch)
    assert entry["prompt_tokens"] is None and entry["cost_per_1m_tokens"] is None
    assert entry["reason"].split("; ")[0] == (
        "cost per 1 M tokens not measured: prom (openmetrics): nv_inference_request_success counts requests only: "
        "its server exports no token counter")


def test_token_series_that_counted_zero_are_zero_measured(monkeypatch):
    """Series present, counted 0: 0 tokens (not null), and no cost per token divided by zero."""
    frame = traffic([{"requests": 1000.0, "prompt_tokens": 0.0, "generated_tokens": 0.0, **VLLM}])
    entry = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch)
    assert entry["prompt_tokens"] == 0 and entry["generated_tokens"] == 0 and entry["cost_per_1m_tokens"] is None
    assert entry["reason"].split("; ")[0] == ("cost per 1 M tokens not measured: prom (openmetrics): "
                                              "vllm:request_success_total counted no tokens in the window")


def test_tokens_measured_in_only_some_intervals_are_not_measured(monkeypatch):
    """A pod-interval the token series missed: the total would leave its tokens out, so none is given."""
    later = TS + pd.Timedelta(minutes=5)
    frame = traffic([{"requests": 10.0, "prompt_tokens": 50.0, "generated_tokens": 70.0, **VLLM},
                     {"requests": 10.0, "prompt_tokens": NAN, "generated_tokens": 80.0, "ts": later, **VLLM}])
    found = traffic_by_service(frame, {"chat": Service("chat", {"pod": "re:^chat"}, 1, 1, 3600)})["chat"]
    assert found.prompt_tokens is None and found.generated_tokens == Decimal(150) and found.tokens is None
    assert found.tokens_unmeasured() == ("prom (openmetrics): vllm:request_success_total counted 2 pod-intervals, "
                                         "of which vllm:prompt_tokens_total measured 1")


def test_a_service_with_token_series_only_has_requests_not_measured(monkeypatch):
    """A vLLM export with token series and no request_success series: its traffic rows read 0
    requests, and the entry said "counted no successful request in the window" (0 requests); now
    requests are not measured (null), the per-request unit costs null with that reason, and the
    shared-cost key "requests" holds it as not measured (None), never 0 nor left out."""
    from audit.unit_costs import key_values

    frame = traffic([{"requests": NAN, "prompt_tokens": 4000.0, "generated_tokens": 1000.0, **VLLM}])
    found = traffic_by_service(frame, {"chat": Service("chat", {"pod": "re:^chat"}, 1, 1, 3600)})["chat"]
    assert (found.requests, found.tokens, found.by_source) == (None, Decimal(5000), {})
    assert key_values((), {"chat": found}, {}, SimpleNamespace(weights={}))["requests"] == {"chat": None}
    entry = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch)
    assert (entry["requests"], entry["cost_per_request"], entry["cost_per_1k_requests"]) == (None, None, None)
    assert entry["cost_per_1m_tokens"] == "200000.000000" and entry["requests_per_currency_unit"]["successful"] is None
    assert entry["reason"] == ("its traffic source (prom (openmetrics): vllm:request_success_total) has no request "
                               "series (token series only): requests not measured, unit costs per request unmeasured")


def test_rows_without_a_request_series_beside_measured_ones_add_nothing():
    """A request series that appears after the token series (its label set first seen at the first
    finished request): the rows before it add no request, and the total is the measured rows'."""
    later = TS + pd.Timedelta(minutes=5)
    frame = traffic([{"requests": NAN, "prompt_tokens": 50.0, **VLLM},
                     {"requests": 10.0, "prompt_tokens": 80.0, "ts": later, **VLLM}])
    found = traffic_by_service(frame, {"chat": Service("chat", {"pod": "re:^chat"}, 1, 1, 3600)})["chat"]
    assert found.requests == Decimal(10) and found.prompt_tokens == Decimal(130)
    assert found.by_source == {"prom (openmetrics): vllm:request_success_total": Decimal(10)}


TRITON = {"pod": "chat-0", "source": "prom (openmetrics): nv_inference_request_success",
          "witness": "nv_inference_request_success", "prompt_tokens": NAN, "generated_tokens": NAN}
TGI = {"pod": "chat-0", "source": "prom (openmetrics): tgi_request_success", "witness": "tgi_request_success"}


def serving_rows(family: str, rows: list[dict]) -> pd.DataFrame:
    """serving_stats rows of chat-0 as the prom source's, one per interval (5 minutes apart)."""
    return pd.DataFrame([{"ts": TS + pd.Timedelta(minutes=5 * i), "family": family, "model_name": "m",
                          "namespace": "llm", "pod": "chat-0", "source": "prom (openmetrics)", "failures": NAN,
                          "received": NAN, **r} for i, r in enumerate(rows)])


def test_triton_all_requests_are_its_successful_and_failed_requests(monkeypatch):
    """Triton's 4,800 successful requests and its 480 failed ones (nv_inference_request_failure): all
    requests were not measured ("counts successful requests only") beside failed_requests 480 in the
    serving evidence; now 5,280, the cost per 1,000 of them 1000 × 1000 / 5280."""
    frame = traffic([{"requests": 4800.0, **TRITON}])
    served = serving_rows("triton", [{"requests": 2400.0, "failures": 240.0}, {"requests": 2400.0, "failures": 240.0}])
    entry = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch, serving=served)
    assert (entry["requests"], entry["all_requests"]) == (4800, 5280)
    assert entry["all_requests_source"] == ("prom (openmetrics): nv_inference_request_success + "
                                            "nv_inference_request_failure")
    assert entry["cost_per_1k_requests"] == "208.333333" and entry["cost_per_1k_all_requests"] == "189.393939"
    assert entry["requests_per_currency_unit"] == {"successful": "4.800", "all": "5.280"}
    assert entry["reason"] == ("cost per 1 M tokens not measured: prom (openmetrics): nv_inference_request_success "
                               "counts requests only: its server exports no token counter")


def test_tgi_all_requests_are_its_received_requests(monkeypatch):
    """TGI's tgi_request_count (received requests) was read and not tabled; now it is all requests."""
    frame = traffic([{"requests": 1920.0, **TGI}])
    served = serving_rows("tgi", [{"requests": 1920.0, "failures": 400.0, "received": 2400.0}])
    entry = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch, serving=served)
    assert (entry["all_requests"], entry["all_requests_source"]) == (2400, "prom (openmetrics): tgi_request_count")
    assert entry["cost_per_1k_all_requests"] == "416.666667" and entry["requests_per_currency_unit"]["all"] == "2.400"


def test_all_requests_not_measured_name_the_missing_series(monkeypatch):
    """No failure series beside Triton's counter, or one that missed an interval: null, and what is missing."""
    frame = traffic([{"requests": 4800.0, **TRITON}])
    bare = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch, serving=serving_rows("triton", [{"requests": 4800.0}]))
    assert bare["all_requests"] is None and bare["cost_per_1k_all_requests"] is None
    assert bare["reason"].split("; ")[1] == (
        "cost per 1,000 of all requests not measured: the denominator (prom (openmetrics): "
        "nv_inference_request_success) counts successful requests only: no nv_inference_request_failure series "
        "beside it")
    some = serving_rows("triton", [{"requests": 2400.0, "failures": 240.0}, {"requests": 2400.0}])
    partial = unit_entry(frame, LOG_CLASSES.iloc[:0], monkeypatch, serving=some)
    assert partial["cost_per_1k_all_requests"] is None and partial["reason"].split("; ")[1] == (
        "cost per 1,000 of all requests not measured: nv_inference_request_failure measured 1 of the 2 "
        "pod-intervals the denominator (prom (openmetrics): nv_inference_request_success) counted")


def test_gpu_split_gpus_are_a_number_at_two_places_where_mig_slices_make_a_fraction():
    """A service holding 12 GPUs and three 1g.10gb MIG slices (1/7 of a GPU each) in one interval, 8
    whole GPUs in another. Before: gpus was the 50-digit string "12.428571428571…" (and "8" for
    whole Decimal GPUs); now the JSON number 12.43 (2 places, as the GPU-hours), and 8 an integer."""
    from audit.audit_json import _gpu_split

    def interval(service, gpus):
        return SimpleNamespace(service=service, paid_seconds=Decimal(3600), busy_seconds=Decimal(1800),
                               serving_seconds=None, gpus=gpus)

    result = SimpleNamespace(intervals=[interval("chat", Decimal(12) + Decimal(3) / Decimal(7)),
                                        interval("chat", 8), interval("embed", Decimal(8))],
                             profiles={}, groups={})
    assert [(row["service"], row["gpus"]) for row in _gpu_split(result)] == [("chat", 12.43), ("embed", 8)]
    assert [type(row["gpus"]) for row in _gpu_split(result)] == [float, int]
