"""The hand-offs between stages: each trace parsed once, a frozen result, the classifier's output
checked against its model, and conservation checked by reconciliation."""
from __future__ import annotations

import dataclasses
from decimal import Decimal

import pandas as pd
import pytest

import audit.trace.findings
import connectors.profiles.events
from audit import classify, evidence, normalise, reconcile
from audit.case import CLASSES
from audit.collected import Collected
from audit.errors import AuditError
from audit.ledger import Ledger
from audit.pipeline import audit_collected
from audit.trace.analyse import analyse
from connectors.base import ReadContext, SourceSpec
from connectors.billing.catalogue import GpuType
from connectors.profiles.kineto import KinetoConnector
from schemas.billing import RESOURCE_CLASSES
from tests.builders import ALWAYS, activity, frame, line, lines_frame, make_case
from tests.paths import DEMO

TRACE = DEMO / "profiles" / "h100_qwen1.5-0.5b-chat.json.gz"


@pytest.fixture(scope="module")
def profile_frame():
    spec = SourceSpec("chat-profile", "profiles", "kineto", TRACE, {"service": "chat", "requests": 10})
    return KinetoConnector(spec, ReadContext(*ALWAYS, "USD")).read()


def test_the_profiles_connector_keeps_the_trace_it_parsed(profile_frame):
    assert isinstance(profile_frame.parsed, connectors.profiles.events.Trace)
    assert profile_frame.parsed.path == TRACE
    summary = normalise.profiles(Collected((profile_frame,)))["chat"]
    assert summary.trace is profile_frame.parsed


def test_evidence_analyses_the_parsed_trace_without_reading_it_again(profile_frame, monkeypatch):
    def refuse(path):
        raise AssertionError(f"{path} parsed a second time")
    monkeypatch.setattr(connectors.profiles.events, "read_trace", refuse)
    monkeypatch.setattr(audit.trace.findings, "load_profile", refuse)
    case = make_case()
    collected = Collected((profile_frame,))
    found = evidence.gather(case, normalise.telemetry(case, collected), normalise.profiles(collected), Ledger())
    monkeypatch.undo()
    document, _ = analyse([TRACE], None)  # what `costaudit trace` finds in the same file
    assert list(found.call_paths["chat"]) == [row for group in document["call_paths"] for row in group["top"]][:10]
    assert [f.finding for f in found.findings] == document["findings"]
    assert all(f.cost is None for f in found.findings)  # an empty ledger: no part to cost them on


def test_the_result_is_frozen():
    lines = [line(1, resource_id="i-gpu", charge_description="m", billed_cost=Decimal(2), effective_cost=Decimal(2))]
    acts = [{"node": "n0", "ts": "2026-09-01T00:00:00Z", "busy_fraction": 0.5, "pod": "chat-0", "namespace": "llm"}]
    collected = Collected((frame("billing", "focus", {"lines": lines_frame(lines)}),
                           frame("telemetry", "openmetrics", {"gpu_activity": activity(acts)})))
    result = audit_collected(make_case(), collected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.options = ()  # type: ignore[misc]
    assert isinstance(result.options, tuple) and isinstance(result.intervals, tuple)
    assert result.reconciliation.conservation.parts_total == result.ledger.total() == Decimal(2)


def test_classified_lines_are_checked_against_their_model():
    lines = lines_frame([line(1), line(2, charge_description="Load balancer hour")])
    classified = classify.classify(lines, (), set(), set())
    assert list(classified["gpus_per_instance"]) == [0, 0]
    with pytest.raises(AuditError, match="ClassifiedLine.*resource_class"):
        classify.checked(classified.assign(resource_class="gpu"))
    with pytest.raises(AuditError, match="ClassifiedLine.*gpus_per_instance"):
        classify.checked(classified.assign(gpus_per_instance=-1))


def test_the_model_knows_every_class_a_case_rule_may_set():
    assert set(RESOURCE_CLASSES) == CLASSES


def test_the_classifier_checks_what_it_hands_on(monkeypatch):
    monkeypatch.setattr(classify, "gpu_instances", lambda: {"p4d.24xlarge": GpuType("A100", -8)})
    lines = lines_frame([line(1, charge_description="On Demand Linux p4d.24xlarge Instance Hour",
                              pricing_unit="Hours")])
    with pytest.raises(AuditError, match="gpus_per_instance"):
        classify.classify(lines, (), set(), set())


def test_no_line_in_scope_still_classifies_to_the_model():
    empty = lines_frame([line(1)]).iloc[0:0]
    classified = classify.classify(empty, (), set(), set())
    assert classified.empty and str(classified["gpus_per_instance"].dtype) == "int64"


def test_reconciliation_refuses_a_ledger_that_does_not_sum_to_the_lines_in_scope():
    lines = lines_frame([line(1, effective_cost=Decimal("5")), line(2, effective_cost=Decimal("7"))])
    ledger = Ledger()
    ledger.add("unattributed", "unmatched_line", None, Decimal("5"), "test", "only the first line")
    given = reconcile.ReconcileInput(lines, pd.Series([True, True]), "effective", pd.DataFrame(), ledger, {}, (),
                                     {}, {}, {}, Decimal("0.02"))
    with pytest.raises(AuditError, match="conservation broken: parts sum to 5, lines in scope to 12"):
        reconcile.conserved(given)
    in_scope = dataclasses.replace(given, scope_mask=pd.Series([True, False]))
    assert reconcile.conserved(in_scope).in_scope_total == Decimal("5")
