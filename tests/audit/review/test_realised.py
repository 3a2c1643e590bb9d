"""Realised savings of a shipped option (METHOD §10): per request before and after the ship date,
at the later unit price and the later demand; ahead / on track / behind against the projection;
the part that grew with demand said so; what cannot be measured named."""
from __future__ import annotations

from datetime import date, timedelta

import pytest

from audit.review import review
from audit.review.load import checked
from tests.audit.review.documents import audit, component

PART = "platform_overhead.capacity_above_demand"
LATER = ("2026-07-01", "2026-10-01")  # the later audit's window (the earlier's: documents.audit's Q2)


def days(before: tuple[int, int, str], after: tuple[int, int, str], start=date(2026, 8, 10), n=5) -> list[dict]:
    """n days before 2026-08-15 and n from it: (requests, GPU-seconds, cost) of the part per day."""
    out = []
    for i in range(2 * n):
        requests, seconds, cost = before if i < n else after
        out.append({"day": (start + timedelta(days=i)).isoformat(), "requests": str(requests),
                    "parts": {PART: {"cost": cost, "gpu_seconds": str(seconds)},
                              "model_compute.kernel_active": {"cost": "1", "gpu_seconds": "1"}}})
    return out


def option(low, expected, high, by_service=True) -> dict:
    bands = {"low": low, "expected": expected, "high": high}
    return {"id": "right_size_replicas", "acts_on": PART, "monthly_saving": {"low": "1", "expected": "2", "high": "3"},
            "by_service": {"chat": bands} if by_service else None}


def pair(daily, options, shipped=None):
    chat = {"requests": 10, "components": {"gpu_busy": component("10", "5")}}
    earlier = audit("q2", {"chat": chat}, options=options)
    later = audit("q3", {"chat": {**chat, "daily": daily}}, window=LATER,
                  shipped=shipped if shipped is not None else
                  [{"option": "right_size_replicas", "service": "chat", "date": "2026-08-15", "note": None}])
    return review([checked(earlier, "q2/audit.json"), checked(later, "q3/audit.json")])["pairs"][0]["realised"]


STEADY = days((1000, 100, "200"), (1200, 90, "135"))  # x 0.1 → 0.075 s per request; p_after 1.5; Q 36,525 a month


@pytest.mark.parametrize("bands, verdict", [(("500", "800", "1000"), "ahead"),
                                            (("1000", "1300", "2000"), "on track"),
                                            (("2000", "2500", "3000"), "behind")])
def test_realised_saving_against_the_projection(bands, verdict):
    (found,) = pair(STEADY, [option(*bands)])
    # (0.1 − 0.075) × 1.5 × (6,000 × 30.4375 / 5) = 1,369.6875
    assert found["realised"] == "1369.69" and found["verdict"] == verdict
    assert found["projection"] == dict(zip(("low", "expected", "high"), bands))
    assert found["part"] == PART and found["shipped"] == "2026-08-15"
    evidence = found["evidence"]
    assert evidence["days_before"] == 5 and evidence["days_after"] == 5
    assert evidence["per_request_before"] == "0.100000000000" and evidence["per_request_after"] == "0.075000000000"
    assert evidence["unit_price_after"] == "1.500000000000" and evidence["monthly_requests_after"] == "36525.00"
    assert "q3/audit.json: services.chat.daily" in evidence["source"]
    assert evidence["projection_source"] == "q2/audit.json: options[right_size_replicas].by_service.chat"
    assert found["note"] is None


def test_the_whole_option_saving_is_the_projection_without_a_per_service_one():
    (found,) = pair(STEADY, [option("1", "2", "3", by_service=False)])
    assert found["projection"] == {"low": "1", "expected": "2", "high": "3"} and found["verdict"] == "ahead"


def test_a_part_that_grew_with_demand_says_so():
    grown = days((1000, 100, "200"), (2000, 110, "165"))   # x 0.1 → 0.055, but 100 → 110 s a day
    (found,) = pair(grown, [option("1000", "2000", "3000")])
    # (0.1 − 0.055) × 1.5 × 2,000 × 30.4375 = 4,109.0625
    assert found["realised"] == "4109.06"
    assert found["note"] == "the part grew with demand (+10.0 % a day), the saving is measured per request"


def test_a_shipped_time_inside_a_day_leaves_that_day_out():
    (found,) = pair(STEADY, [option("1", "2", "3")],
                    [{"option": "right_size_replicas", "service": "chat", "date": "2026-08-14T12:00:00Z"}])
    assert found["evidence"]["days_before"] == 4 and found["evidence"]["days_after"] == 5
    assert found["evidence"]["days_left_out"] == 1


def test_an_option_the_earlier_audit_did_not_propose_is_not_measured():
    (found,) = pair(STEADY, [], [{"option": "fuse_kernels", "service": "chat", "date": "2026-08-15"}])
    assert found["verdict"] == "not measured" and found["realised"] is None
    assert "option fuse_kernels is in neither audit" in found["note"]


def test_no_day_after_the_ship_date_is_not_measured():
    (found,) = pair(STEADY, [option("1", "2", "3")],
                    [{"option": "right_size_replicas", "service": "chat", "date": "2026-09-30"}])
    assert found["verdict"] == "not measured" and "no day of the later audit's window lies from" in found["note"]


def test_a_verdict_off_the_band_says_where_the_unit_price_moved():
    chat = {"requests": 10, "components": {"gpu_busy": component("10", "5")}}
    earlier = audit("q2", {"chat": {**chat, "daily": days((1000, 100, "200"), (1000, 100, "200"),
                                                          start=date(2026, 5, 10))}},
                    options=[option("2000", "2500", "3000")])
    later = audit("q3", {"chat": {**chat, "daily": STEADY}}, window=LATER,
                  shipped=[{"option": "right_size_replicas", "service": "chat", "date": "2026-08-15"}])
    (found,) = review([checked(earlier, "q2/audit.json"), checked(later, "q3/audit.json")])["pairs"][0]["realised"]
    assert found["verdict"] == "behind"
    assert found["note"] == ("the part's unit price moved −25.0 % since the earlier audit, whose projection is at "
                             "its own price: the realised saving is at the later one")


def two_audits(earlier_kw: dict, later_kw: dict, shipped: str = "2026-08-15") -> dict:
    """The steady pair of :data:`STEADY`, each audit with its own ``documents.audit`` settings."""
    chat = {"requests": 10, "components": {"gpu_busy": component("10", "5")}}
    earlier = audit("q2", {"chat": chat}, options=[option("500", "800", "1000")], **earlier_kw)
    later = audit("q3", {"chat": {**chat, "daily": STEADY}},
                  shipped=[{"option": "right_size_replicas", "service": "chat", "date": shipped}],
                  **{"window": LATER, **later_kw})
    (found,) = review([checked(earlier, "q2/audit.json"), checked(later, "q3/audit.json")])["pairs"][0]["realised"]
    return found


def test_audits_that_cannot_be_bridged_give_the_realised_saving_without_a_verdict():
    """A projection on the effective basis is not set against a saving on the billed one (it was 'ahead')."""
    found = two_audits({}, {"basis": "billed"})
    assert found["realised"] == "1369.69" and found["verdict"] == "not measured"
    assert found["note"].startswith("no verdict: the audits cannot be compared (cost bases differ: effective")


def test_an_option_shipped_inside_the_earlier_window_gets_no_verdict():
    """The earlier audit ran to 2026-09-01, after the ship date: its projection already saw the change
    (an audit reviewed against itself was 'ahead' of its own post-ship projection)."""
    found = two_audits({"window": ("2026-06-01", "2026-09-01")}, {"window": ("2026-08-10", "2026-08-20")})
    assert found["realised"] == "1369.69" and found["verdict"] == "not measured"
    assert found["note"] == ("no verdict: shipped 2026-08-15, before the earlier audit's window ended "
                             "(2026-06-01 – 2026-09-01): its projection already saw the change")


def test_an_option_shipped_as_the_earlier_window_ends_keeps_its_verdict():
    found = two_audits({"window": ("2026-05-15", "2026-08-15")}, {"window": ("2026-08-10", "2026-08-20")})
    assert found["verdict"] == "ahead" and found["note"] is None


def test_a_part_the_service_never_had_is_not_measured():
    """Before: log_sampling shipped on a service without observability cost was 'behind' at 0.00."""
    (found,) = pair(STEADY, [{"id": "log_sampling", "acts_on": "platform_overhead.observability",
                              "monthly_saving": {"low": "1", "expected": "2", "high": "3"}}],
                    [{"option": "log_sampling", "service": "chat", "date": "2026-08-15"}])
    assert found["verdict"] == "not measured" and found["realised"] is None
    assert found["note"] == ("chat had no platform_overhead.observability in the later audit (services.chat."
                             f"daily[].parts holds model_compute.kernel_active, {PART}): nothing it could save "
                             "was measured")


def test_an_option_projected_per_service_but_not_for_this_one_has_no_projection():
    """Before: the whole option's saving (projected for other services) stood as this service's."""
    other = {**option("1", "2", "3"), "by_service": {"embed": {"low": "1", "expected": "2", "high": "3"}}}
    (found,) = pair(STEADY, [other])
    assert found["projection"] is None and found["realised"] == "1369.69" and found["verdict"] == "not measured"
    assert found["note"] == "no projection: the earlier audit (q2/audit.json) has no priced option " \
                            "right_size_replicas for service chat"


def committed(months=None, share="0.250000") -> dict:
    """The earlier audit's option priced on s₀ alone: ``share`` (a quarter) of its saving on committed
    capacity with no known end (``months``: the commitment's end known, s₁ priced and in the projection)."""
    proposal = option("1100", "1300", "1500")
    proposal["deferred"] = {"saving_now": None, "saving_later": None if months is None else {"expected": "1"},
                            "months_after_window": months, "committed_share": share}
    return proposal


def test_the_saving_on_committed_capacity_is_shown_apart_and_the_rest_set_against_s0():
    """METHOD §7 / §10 like with like: the projection left out the committed share (s₀ alone), so the
    realised saving does too (before: the whole 1,369.69, GPU time released on committed capacity
    included, was on track against the s₀ projection 1,100 – 1,500; now 1,027.27, behind, and
    342.42 released on committed capacity, not saved until the commitment ends)."""
    (found,) = pair(STEADY, [committed()])
    assert (found["realised"], found["released_on_committed"], found["verdict"]) == ("1027.27", "342.42", "behind")
    assert found["note"] == ("released on committed capacity: not saved until the commitment ends (342.42 a month, "
                             "25.0 % of the realised 1,369.69, the earlier audit's committed share); the rest, "
                             "1,027.27, is set against the projection, which is on the saving available now (s₀)")
    assert found["evidence"]["realised_whole"] == "1369.69"
    assert found["evidence"]["committed_share"] == (
        "0.250000 (q2/audit.json: options[right_size_replicas].deferred.committed_share)")


def test_the_committed_share_is_split_from_the_exact_saving_by_largest_remainder():
    """1,369.6875 × 0.380929 = 521.7536896875 released, 847.9338103125 the rest: by largest remainder
    521.75 and 847.94 (1,369.69). Before, the rest was rounded alone and the released part taken as
    the whole less it: 847.93 and 521.76, the cent on the smaller remainder."""
    (found,) = pair(STEADY, [committed(share="0.380929")])
    assert (found["realised"], found["released_on_committed"], found["evidence"]["realised_whole"]) == (
        "847.94", "521.75", "1369.69")


def test_a_projection_with_the_commitments_end_known_takes_the_whole_realised_saving():
    (found,) = pair(STEADY, [committed(months="4.00")])
    assert (found["realised"], found["released_on_committed"], found["verdict"]) == ("1369.69", None, "on track")
