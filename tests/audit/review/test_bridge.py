"""The bridge of two audits: steps from the earlier total to the later one to the cent (random
audits, hypothesis), new / vanished / no-request services as one step each, and no bridge (with the
reason named) where the audits differ in method, cost basis, scope or currency, or come newest first."""
from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.review import review
from audit.review.load import checked
from connectors.errors import InputError
from tests.audit.review.documents import audit, component


def two(earlier: dict, later: dict) -> dict:
    return review([checked(earlier, "q2/audit.json"), checked(later, "q3/audit.json")])


def steps(document: dict) -> dict[str, Decimal]:
    return {s["id"]: Decimal(s["amount"]) for s in document["pairs"][-1]["bridge"]["steps"]}


CHAT_Q2 = {"requests": 1000, "components": {"gpu_busy": component("100", "50"), "line:egress": component("20")}}
CHAT_Q3 = {"requests": 1200, "components": {"gpu_busy": component("97.2", "54"), "line:egress": component("30")}}


def test_hand_computed_bridge_with_a_new_and_a_vanished_service():
    earlier = audit("q2", {"chat": CHAT_Q2, "old": {"requests": 10, "components": {"line:x": component("5.55")}}},
                    unattributed="3.00", unallocated="1.00")
    later = audit("q3", {"chat": CHAT_Q3, "search": {"requests": 0, "components": {"line:y": component("12.34")}}},
                  unattributed="4.50", unallocated="0.25")
    document = two(earlier, later)
    assert document["comparable"] and document["reasons"] == []
    found = steps(document)
    assert found == {"chat/volume": Decimal("24.00"), "chat/price": Decimal("-12.00"),
                     "chat/efficiency": Decimal("-10.80"), "chat/overhead": Decimal("6.00"),
                     "old/service": Decimal("-5.55"), "search/service": Decimal("12.34"),
                     "unattributed": Decimal("1.50"), "unallocated": Decimal("-0.75")}
    bridge = document["pairs"][0]["bridge"]
    assert sum(found.values()) == Decimal(bridge["to_total"]) - Decimal(bridge["from_total"])
    rows = {r["service"]: r for r in document["pairs"][0]["services"]}
    assert rows["old"]["status"] == "vanished" and rows["search"]["status"] == "new"
    assert rows["chat"]["status"] == "both" and rows["chat"]["effects"]["price"] == "-12.00"
    assert rows["chat"]["driver"].startswith("volume +20.0 %")
    kinds = {s["id"]: s["kind"] for s in bridge["steps"]}
    assert kinds["old/service"] == "service" and kinds["chat/price"] == "price" and "rounding" not in kinds


def test_a_component_with_a_cost_and_no_quantity_is_named_in_the_notes():
    """effects.split reads a component billed with no quantity as currency and says so; before, the
    note was made and dropped (review.json's notes held the bridge's words alone)."""
    later = audit("q3", {"chat": {**CHAT_Q3, "components": {**CHAT_Q3["components"],
                                                            "gpu_busy": component("97.2", "0")}}})
    document = two(audit("q2", {"chat": CHAT_Q2}), later)
    note = "chat: component gpu_busy has a cost but no quantity: read as currency (no price effect)"
    assert document["pairs"][0]["notes"] == [note]
    assert document["notes"][1:] == [note]
    three = review([checked(audit("q1", {"chat": CHAT_Q2}), "q1/audit.json"),
                    checked(audit("q2", {"chat": CHAT_Q2}), "q2/audit.json"), checked(later, "q3/audit.json")])
    assert three["notes"][2:] == [f"audits 2 → 3: {note}"]


def test_a_service_without_requests_in_one_audit_is_one_step():
    earlier = audit("q2", {"chat": {**CHAT_Q2, "requests": None}})
    later = audit("q3", {"chat": CHAT_Q3})
    document = two(earlier, later)
    assert steps(document)["chat/service"] == Decimal("7.20")
    row = document["pairs"][0]["services"][0]
    assert row["status"] == "no_requests" and row["effects"] is None and "earlier audit" in row["driver"]


def test_a_composition_that_does_not_foot_is_a_named_rounding_step():
    earlier, later = audit("q2", {"chat": CHAT_Q2}), audit("q3", {"chat": CHAT_Q3})
    later["total"] = str(Decimal(later["total"]) + Decimal("0.01"))
    found = steps(two(earlier, later))
    assert found["rounding"] == Decimal("0.01")
    assert sum(found.values()) == Decimal(later["total"]) - Decimal(earlier["total"])


@pytest.mark.parametrize("change, words", [
    ({"basis": "billed"}, "cost bases differ: effective in q2/audit.json, billed in q3/audit.json"),
    ({"method": "2027-01"}, "method versions differ: 2026-12 in q2/audit.json, 2027-01 in q3/audit.json"),
    ({"method": None}, "no method version in q3/audit.json"),
    ({"scope": {"accounts": ["222222222222"], "tags": None, "services": None, "declared_services": ["chat"]}},
     "scope accounts differ: 111111111111 in q2/audit.json, 222222222222 in q3/audit.json"),
    ({"currency": "EUR"}, "currencies differ: USD in q2/audit.json, EUR in q3/audit.json"),
    # given newest first: a bridge would call what appeared vanished
    ({"window": ("2026-01-01", "2026-04-01")}, "the audits are not oldest first: q3/audit.json covers 2026-01-01 – "
     "2026-04-01, before q2/audit.json (2026-04-01 – 2026-07-01); give them in the order of their windows"),
])
def test_incomparable_audits_have_no_bridge_and_say_why(change, words):
    document = two(audit("q2", {"chat": CHAT_Q2}), audit("q3", {"chat": CHAT_Q3}, **change))
    head = document["pairs"][0]
    assert document["comparable"] is False and head["comparable"] is False and head["bridge"] is None
    assert any(r.startswith(words) for r in document["reasons"]), document["reasons"]
    assert all(row["effects"] is None for row in head["services"])
    if "currency" in change:
        assert head["services"][0]["change"] is None and head["buckets"][0]["change"] is None
    else:
        assert head["services"][0]["change"] == "7.20"


def test_coverage_is_shown_beside_the_bridge():
    document = two(audit("q2", {"chat": CHAT_Q2}, coverage=("100", "98")),
                   audit("q3", {"chat": CHAT_Q3}, coverage=("100", "90")))
    head = document["pairs"][0]
    assert head["comparable"] and head["coverage"]["change"] == "-0.080000"
    assert "98.0 %" in head["coverage"]["note"] and "less measured time" in head["coverage"]["note"]


def test_three_audits_make_two_pairs_and_the_last_is_the_headline():
    q1 = audit("q1", {"chat": CHAT_Q2})
    q2 = audit("q2", {"chat": CHAT_Q3})
    q3 = audit("q3", {"chat": CHAT_Q3}, basis="billed")
    document = review([checked(q1, "a"), checked(q2, "b"), checked(q3, "c")])
    assert [(p["from"], p["to"]) for p in document["pairs"]] == [(0, 1), (1, 2)]
    assert document["pairs"][0]["comparable"] and not document["pairs"][1]["comparable"]
    assert document["reasons"][0].startswith("cost bases differ")


def test_components_that_do_not_sum_to_the_composition_are_an_input_error():
    later = audit("q3", {"chat": CHAT_Q3})
    later["services"]["chat"]["components"]["line:egress"]["cost"] = "31"
    with pytest.raises(InputError, match=r"q3/audit.json: services.chat.components sum to 128.20"):
        two(audit("q2", {"chat": CHAT_Q2}), later)


def test_a_bad_figure_names_the_file_and_key():
    later = audit("q3", {"chat": CHAT_Q3})
    later["services"]["chat"]["components"]["gpu_busy"]["quantity"] = "lots"
    with pytest.raises(InputError, match=r"q3/audit.json: services.chat.components.gpu_busy.quantity is 'lots'"):
        two(audit("q2", {"chat": CHAT_Q2}), later)


# ---- conservation on random audits ---------------------------------------------------------------

amount = st.decimals(min_value=Decimal("-50"), max_value=Decimal("50000"), places=9, allow_nan=False,
                     allow_infinity=False)
positive = st.decimals(min_value=Decimal("0.001"), max_value=Decimal("900000"), places=6, allow_nan=False,
                       allow_infinity=False)


@st.composite
def service(draw):
    parts = {}
    if draw(st.booleans()):
        parts["gpu_busy"] = component(abs(draw(amount)), draw(positive))
    if draw(st.booleans()):
        parts["gpu_idle"] = component(abs(draw(amount)), draw(positive))
    for name in draw(st.sets(st.sampled_from(["line:egress", "shared:orchestration", "shared:observability"]))):
        parts[name] = component(draw(amount))
    return {"requests": draw(st.one_of(st.none(), st.integers(0, 10**9))), "components": parts}


@st.composite
def random_audit(draw, case):
    names = draw(st.sets(st.sampled_from(["chat", "embed", "search", "rerank"]), max_size=4))
    return audit(case, {n: draw(service()) for n in sorted(names)}, unattributed=str(draw(amount)),
                 unallocated=str(abs(draw(amount))))


@settings(max_examples=150, deadline=None)
@given(random_audit("q2"), random_audit("q3"))
def test_steps_run_from_the_earlier_total_to_the_later_to_the_cent(earlier, later):
    document = two(earlier, later)
    bridge = document["pairs"][0]["bridge"]
    total = sum(Decimal(s["amount"]) for s in bridge["steps"])
    assert total == Decimal(later["total"]) - Decimal(earlier["total"])
    for row in document["pairs"][0]["services"]:
        if row["effects"] is not None:
            assert sum(Decimal(v) for v in row["effects"].values()) == Decimal(row["change"])


def test_each_audit_entry_names_its_billing_sources_formats():
    """The review report names the cost basis's columns from them (before: not in review.json, so FOCUS's)."""
    services = {"chat": {"requests": 10, "components": {"gpu": component("100.00")}}}
    earlier, later = audit("q2", services), audit("q3", services)
    earlier["sources"] = [{"name": "bill", "kind": "billing", "format": "cur"},
                          {"name": "prom", "kind": "telemetry", "format": "openmetrics"}]
    later["sources"] = [{"name": "bill", "kind": "billing", "format": "focus"}]
    entries = two(earlier, later)["audits"]
    assert [e["billing_formats"] for e in entries] == [["cur"], ["focus"]]
