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
    assert _no_estimate(SimpleNamespace(name="x", requests=None)).startswith("no profile with stated traffic")


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
                                         "other_paths": 0}
