"""The plan (audit/plan.py, METHOD §7): combined not added, deferred payback, no empty option ranked,
sensitivity, who acts."""
from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.money import cents
from audit.plan import (
    Deferral,
    PlanInput,
    combined,
    deferred_payback,
    marginals,
    owners_by_part,
    payback_of,
    plan,
)
from audit.result import Option

PART = "serving_path.in_flight_idle"
BANDS = ("low", "expected", "high")
money = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("1e6"), places=2)
fraction = st.decimals(min_value=Decimal(0), max_value=Decimal(1), places=4)


def option(oid: str, saving: Decimal, part_monthly: Decimal = Decimal(1000), hours: Decimal = Decimal(10),
           acts_on: str = PART, spread: Decimal = Decimal("0.5")) -> Option:
    bands = {"low": saving * spread, "expected": saving, "high": saving * (2 - spread)}
    effort = {"low": hours / 2, "expected": hours, "high": hours * 2}
    return Option(oid, oid.title(), acts_on, "priced", part_monthly, bands,
                  {b: effort[b] * 100 for b in BANDS}, None, effort)


def given_plan(**kw) -> PlanInput:
    return PlanInput(part_monthly={PART: Decimal(1000)}, loaded_rate=Decimal(100), **kw)


@given(st.lists(fraction, min_size=1, max_size=8), money)
def test_marginals_add_up_to_the_combined_saving_to_the_cent(fs, part):
    shares, total = marginals(part, fs, [f"o{i}" for i in range(len(fs))])
    left = Decimal(1)
    for f in fs:
        left *= 1 - f
    assert total == cents(part * (1 - left))
    assert sum(shares.values()) == total
    assert all(v == cents(v) for v in shares.values())


@given(st.lists(fraction, min_size=1, max_size=8), money)
def test_the_first_option_on_a_part_keeps_its_own_cents(fs, part):
    shares, _ = marginals(part, fs, [f"o{i}" for i in range(len(fs))])
    assert shares["o0"] == cents(part * fs[0])


def test_o10803_quantise_marginal_is_its_gross_saving():
    """o10803's model_compute.kernel_active is 41,687.42 a month; quantise (first on it) saves 25 %:
    41,687.42 × 0.25 = 10,421.855 → 10,421.86, fuse_kernels_compile 12 % of what is left:
    41,687.42 × 0.12 × 0.75 = 3,751.8678; combined 14,173.7228 → 14,173.72. Largest remainder over
    both gave the leftover cent to fuse (remainder .0078 > .005): quantise's marginal 10,421.85 beside
    its saving 10,421.86. Now quantise keeps 10,421.86 and fuse takes 14,173.72 − 10,421.86 = 3,751.86."""
    shares, total = marginals(Decimal("41687.42"), [Decimal("0.25"), Decimal("0.12")], ["quantise", "fuse"])
    assert (shares, total) == ({"quantise": Decimal("10421.86"), "fuse": Decimal("3751.86")}, Decimal("14173.72"))


@given(st.lists(st.decimals(min_value=Decimal(1), max_value=Decimal(900), places=2), min_size=1, max_size=5))
def test_plan_combines_options_on_one_part(savings):
    options = plan([option(f"o{i}", s) for i, s in enumerate(savings)], given_plan())
    parts, total = combined(options)
    assert [p.part for p in parts] == [PART]
    for band in BANDS:
        assert sum(o.marginal_saving[band] for o in options) == parts[0].saving[band] == total.saving[band]
        # combined, not added: never more than the part, never more than the sum
        assert parts[0].saving[band] <= Decimal(1000)
        assert parts[0].saving[band] <= cents(sum(o.saving[band] for o in options)) + Decimal("0.01")


@given(money, money, money)
def test_payback_never_rises_as_a_saving_grows(cost, saving, more):
    for deferral in (Deferral(), Deferral(Decimal("0.4"), None), Deferral(Decimal("0.4"), Decimal(7))):
        small = payback_of(cost, saving, Decimal(0), deferral)
        large = payback_of(cost, saving + more, Decimal(0), deferral)
        assert large is not None and small is not None and large <= small


@given(money, money, money, st.decimals(min_value=Decimal(0), max_value=Decimal(60), places=2))
def test_a_deferred_saving_never_pays_back_sooner(cost, now, later, months):
    deferred = deferred_payback(cost, now, later, months)
    at_once = deferred_payback(cost, now + later, Decimal(0), None)
    assert deferred is not None and at_once is not None and deferred >= at_once


def test_deferred_payback_formula():
    # C = 1000, s0 = 100 for 4 months (400), then 100 + 150 a month: 4 + 600 / 250 = 6.4
    assert deferred_payback(Decimal(1000), Decimal(100), Decimal(150), Decimal(4)) == Decimal("6.4")
    assert deferred_payback(Decimal(300), Decimal(100), Decimal(150), Decimal(4)) == Decimal(3)
    assert deferred_payback(Decimal(300), Decimal(0), Decimal(150), Decimal(4)) == Decimal(6)
    assert deferred_payback(Decimal(300), Decimal(0), Decimal(150), None) is None   # s1 not measured


def test_an_empty_option_is_never_ranked():
    tiny = option("tiny", Decimal("0.0001"))
    zero_part = option("zero_part", Decimal(5), part_monthly=Decimal("0.001"))
    real = option("real", Decimal(100))
    out = plan([tiny, zero_part, real], given_plan())
    assert [(o.id, o.rank) for o in out] == [("real", 1), ("tiny", None), ("zero_part", None)]
    assert all(o.status == "no_saving" and o.payback is None for o in out[1:])
    assert all(o.reason.startswith("no saving in this case") for o in out[1:])


def test_payback_high_is_null_where_the_low_saving_is_not_positive():
    out = plan([option("thin", Decimal(100), spread=Decimal(-1))], given_plan())[0]
    assert out.rank == 1 and out.status == "priced"
    assert out.payback["high"] is None and out.payback["expected"] == Decimal(1000) / Decimal(100)


def test_wholly_deferred_saving_without_an_end_date_is_not_ranked():
    deferral = {"c": Deferral(Decimal(1), None)}
    out = plan([option("c", Decimal(100))], given_plan(deferrals=deferral))[0]
    assert out.rank is None and "end date is not known" in out.reason
    dated = plan([option("c", Decimal(100))], given_plan(deferrals={"c": Deferral(Decimal(1), Decimal(3))}))[0]
    assert dated.rank == 1 and dated.payback["expected"] == Decimal(3) + Decimal(1000) / Decimal(100)


def test_sensitivity_and_break_even():
    out = plan([option("o", Decimal(200))], given_plan(horizon_months=Decimal(10)))[0]
    rows = {s.input: s for s in out.sensitivity}
    assert out.break_even == Decimal(100)   # 1000 over 10 months
    rate = rows["loaded rate (per hour)"]
    assert (rate.low, rate.high) == ("75.00", "125.00")
    assert rate.payback_at_low == Decimal("3.75") and rate.payback_at_high == Decimal("6.25")
    effort = rows["effort (hours)"]
    assert effort.payback_at_low == Decimal("2.5") and effort.payback_at_high == Decimal(10)
    assert "target utilisation" not in rows   # not an input of this option
    scaled = plan([option("o", Decimal(200))], given_plan(target_scale={"o": (Decimal(2), Decimal("0.5"))}))[0]
    target = {s.input: s for s in scaled.sensitivity}["target utilisation"]
    assert (target.low, target.high) == ("0.7", "0.9")
    assert target.payback_at_low == Decimal("2.5") and target.payback_at_high == Decimal(10)


def test_owners_services_first_then_the_owner_tag():
    parts = [(PART, "chat", Decimal(10)), (PART, "embed", Decimal(30)), (PART, None, Decimal(5))]
    owners = owners_by_part(parts, {"chat": "team-chat", "embed": "team-search"},
                            {PART: {"ml-platform": Decimal(3), "team-chat": Decimal(9)}})
    assert owners[PART] == ("team-search", "team-chat", "ml-platform")


@pytest.fixture(scope="module")
def wa_labs(tmp_path_factory) -> dict:
    from audit.audit_json import to_dict
    from audit.case import load_case
    from audit.pipeline import run_audit
    case = load_case(Path(__file__).parents[2] / "fixtures" / "wa_labs_efficiency")
    return json.loads(json.dumps(to_dict(run_audit(case))))


def test_wa_labs_ranks_no_empty_option(wa_labs):
    for o in wa_labs["options"]:
        assert o["rank"] is None, o["id"]
        assert o["payback_months"] is None
    assert wa_labs["plan"]["by_part"] == []
    assert wa_labs["plan"]["total"]["combined_saving"] == {"low": "0.00", "expected": "0.00", "high": "0.00"}


def test_the_report_shows_the_plan(wa_labs):
    from audit.audit_json import _option, _plan
    from audit.reporters import plan_view
    from audit.reporters.charts import build_charts
    from audit.reporters.formatting import money
    from audit.reporters.view import _option as option_view

    options = plan([option("real", Decimal(100)), option("tiny", Decimal("0.0001"))],
                   given_plan(owners={PART: ("team-chat",)}, next_steps={"real": "try it"}))

    class Result:  # what _option / _plan read of an AuditResult
        class evidence:
            for_options: dict = {}
    Result.options = options
    audit = {"currency": "USD", "options": [_option(o, Result) for o in options], "plan": _plan(Result)}
    audit = json.loads(json.dumps(audit))
    views = [option_view(o, lambda v: f"${v}") for o in audit["options"]]
    assert [(v.rank, v.status, v.payback.expected) for v in views] == [
        ("1", "priced", "10.0"), ("—", "no saving in this case", "—")]
    assert views[1].saving.expected == "none"  # measured: nothing now, not "not measured"
    assert views[0].who["owners"] == "team-chat" and views[0].who["next_step"] == "try it"
    assert views[1].marginal == "—" and views[1].break_even == "$83.33 a month within 12 months"
    rows = plan_view.plan_rows(audit, lambda v: f"${v}")
    # the part in the options' words (wording.option_target); before: "Serving path · in flight idle"
    assert [r["part"] for r in rows] == ["Serving path · In-flight idle", "Whole plan"]
    assert rows[-1]["expected"] == "$100.00"
    sensitivity = plan_view.sensitivity_rows(audit, lambda v: money(v, "USD"))
    # before: the money inputs' low and high bare ("2474.39"), effort without its unit
    assert [(r["input"], r["low"], r["high"]) for r in sensitivity] == [
        ("saving (recoverable share or model inputs)", "$50.00", "$150.00"), ("effort (hours)", "5 h", "20 h"),
        ("loaded rate (per hour)", "$75.00", "$125.00")]
    from audit.reporters.charts import tornado_chart
    assert tornado_chart(audit).startswith("data:image/svg+xml;base64,")
    assert tornado_chart({"options": audit["options"][1:]}) is None
    assert build_charts(wa_labs)["tornado"] is None


def test_the_billing_commitment_end_gives_t_c():
    from dataclasses import replace
    from datetime import datetime, timezone
    end = datetime(2026, 10, 1, tzinfo=timezone.utc)
    dated = replace(option("c", Decimal(100)), commitment_end=datetime(2027, 1, 1, tzinfo=timezone.utc))
    out = plan([dated], given_plan(deferrals={"c": Deferral(Decimal(1), None)}, window_end=end))[0]
    months = Decimal(92 * 86400) / (Decimal("30.4375") * 86400)
    assert out.rank == 1 and out.deferred_months == months
    assert out.payback["expected"] == months + Decimal(1000) / Decimal(100)


def test_case_keys_of_the_plan():
    from audit.case import load_case
    from audit.errors import ConfigError
    folder = Path(__file__).parents[2] / "fixtures" / "wa_labs_efficiency"

    def keys(**extra):
        def edit(raw):
            raw["case"].update(extra)
            for service in raw.get("services", {}).values():
                service["owner"] = "team-a"
        return edit
    case = load_case(folder, keys(horizon_months=6, loaded_rate_range=[100, 200],
                                  target_utilisation_range=[0.6, 0.9], owner_tag="team"))
    assert case.horizon_months == 6 and case.loaded_rate_range == (Decimal(100), Decimal(200))
    assert case.target_utilisation_range == (Decimal("0.6"), Decimal("0.9")) and case.owner_tag == "team"
    assert all(s.owner == "team-a" for s in case.services.values())
    with pytest.raises(ConfigError) as bad:
        load_case(folder, keys(loaded_rate_range=[200, 100], target_utilisation_range=[0.5], owner_tag=3))
    text = str(bad.value)
    assert "loaded_rate_range" in text and "target_utilisation_range" in text and "owner_tag" in text


def test_option_figures_out_of_range_or_order_are_refused_by_the_case():
    """Before: `run` and `validate` took recoverable.high = 1.5 (a saving 1.5 times its part, payback.low
    from it) and effort bands 10 / 5 / 20 (payback.low above the expected); `whatif` refused the first."""
    from audit.case import load_case
    from audit.errors import ConfigError
    folder = Path(__file__).parents[2] / "fixtures" / "wa_labs_efficiency"

    def options(*entries):
        def edit(raw):
            raw["options"] = list(entries)
        return edit
    good = {"id": "quantise", "recoverable": {"low": 0.1, "expected": 0.2, "high": 0.3},
            "effort_hours": {"low": 10, "expected": 20, "high": 40}, "run_cost_per_month": 5}
    assert load_case(folder, options(good)).option_overrides["quantise"]["recoverable"]["high"] == 0.3
    bad = [{"id": "quantise", "recoverable": {"low": 0.5, "expected": 0.9, "high": 1.5}},
           {"id": "fuse_kernels_compile", "effort_hours": {"low": 10, "expected": 5, "high": 20}},
           {"id": "log_sampling", "recoverable": 0.5, "run_cost_per_month": -3, "title": 7}]
    with pytest.raises(ConfigError) as refused:
        load_case(folder, options(*bad))
    text = str(refused.value)
    assert "#1.recoverable (option 'quantise'): expected { low, expected, high } of numbers from 0 to 1" in text
    assert "#2.effort_hours" in text and "low ≤ expected ≤ high, got" in text
    assert "#3.recoverable" in text and "#3.run_cost_per_month" in text and "#3.title" in text


def test_a_reversed_hit_rate_band_is_a_case_error_naming_the_option():
    """Before: hit_rate = { low = 0.7, expected = 0.5, high = 0.3 } on prefix_kv_cache validated (exit 0):
    hit_rate was checked for 0–1 only, recoverable and effort_hours for order too. Now every
    band-valued key has the one check, and the error names the option."""
    from audit.case import load_case
    from audit.errors import ConfigError
    folder = Path(__file__).parents[2] / "fixtures" / "wa_labs_efficiency"

    def options(value):
        return lambda raw: raw.update(options=[{"id": "prefix_kv_cache", "hit_rate": value}])
    assert load_case(folder, options(0.6)).option_overrides["prefix_kv_cache"]["hit_rate"] == 0.6
    with pytest.raises(ConfigError) as refused:
        load_case(folder, options({"low": 0.7, "expected": 0.5, "high": 0.3}))
    assert refused.value.problems == [
        "[[options]] #1.hit_rate (option 'prefix_kv_cache'): expected a number from 0 to 1, or { low, expected, "
        "high } of them, low ≤ expected ≤ high, got {'low': 0.7, 'expected': 0.5, 'high': 0.3}"]


def test_an_option_id_given_twice_is_a_case_error_naming_both_entries():
    """Before: two entries for log_sampling (recoverable 0.1, then 0.9) validated and the run priced
    0.9, the last silently winning; now a case error naming both positions."""
    from audit.case import load_case
    from audit.errors import ConfigError
    folder = Path(__file__).parents[2] / "fixtures" / "wa_labs_efficiency"
    share = [{"id": "log_sampling", "recoverable": {"low": v, "expected": v, "high": v}} for v in (0.1, 0.9)]

    def edit(raw):
        raw["options"] = [share[0], {"id": "quantise", "run_cost_per_month": 5}, share[1]]
    with pytest.raises(ConfigError) as refused:
        load_case(folder, edit)
    assert refused.value.problems == ["[[options]] #3: id 'log_sampling' is also [[options]] #1; give each "
                                      "option once (which entry's figures hold is not known)"]


def test_a_target_range_must_contain_the_target():
    """Before: target_utilisation_range = [0.9, 0.95] around a target of 0.8 was taken and the right-size
    low band (the replay at 0.9) was silently clamped to the expected; now a case error."""
    from audit.case import load_case
    from audit.errors import ConfigError
    folder = Path(__file__).parents[2] / "fixtures" / "wa_labs_efficiency"

    def edit(target_range):
        return lambda raw: raw["case"].update(target_utilisation=0.8, target_utilisation_range=target_range)
    with pytest.raises(ConfigError) as refused:
        load_case(folder, edit([0.9, 0.95]))
    assert refused.value.problems == ["[case].target_utilisation_range: [0.9, 0.95] must contain target_utilisation "
                                      "(0.8): its ends are the low / high tried either side of the expected"]
    assert load_case(folder, edit([0.8, 0.95])).target_utilisation_range == (Decimal("0.8"), Decimal("0.95"))


def test_a_saving_whose_commitment_end_is_unknown_is_priced_on_s0_alone():
    """METHOD §7: where no end date is known, s₁ is not measured and the option is priced on s₀
    alone: its saving, its per-service split and the plan leave s₁ out (a check found 11,905.76 a
    month shown, and added to the plan, beside a payback on s₀ = 6,493.64)."""
    undated = replace(option("c", Decimal(100)), by_service={"chat": {"low": Decimal(50), "expected": Decimal(100),
                                                                      "high": Decimal(150)}})
    out = plan([undated], given_plan(deferrals={"c": Deferral(Decimal("0.4"), None)}))[0]
    assert out.saving == out.saving_now == {"low": Decimal(30), "expected": Decimal(60), "high": Decimal(90)}
    assert out.by_service == {"chat": {"low": Decimal(30), "expected": Decimal(60), "high": Decimal(90)}}
    assert out.payback["expected"] == Decimal(1000) / Decimal(60)
    assert {s.input: (s.low, s.high) for s in out.sensitivity}["saving (recoverable share or model inputs)"] == \
        ("30.00", "90.00")
    parts, total = combined([out])
    assert parts[0].saving == total.saving == {"low": Decimal("30.00"), "expected": Decimal("60.00"),
                                               "high": Decimal("90.00")}
    dated = plan([undated], given_plan(deferrals={"c": Deferral(Decimal("0.4"), Decimal(3))}))[0]
    assert dated.saving["expected"] == Decimal(100) and dated.saving_now["expected"] == Decimal(60)
    # wholly committed: nothing now, so no saving, and its saving shows none (before: 100 a month)
    wholly = plan([undated], given_plan(deferrals={"c": Deferral(Decimal(1), None)}))[0]
    assert wholly.status == "no_saving" and wholly.saving == {b: Decimal(0) for b in BANDS}
    assert wholly.reason == ("no saving in this case yet: the saving (100.00 a month, expected) lies on committed "
                             "capacity whose end date is not known (s₁ not measured), and nothing of it is "
                             "available now")


def test_o10803_marginal_bands_out_of_order_carry_a_plain_note():
    """o10803's remove_sync_points (second on serving_path.in_flight_idle, after batching_limits):
    marginal low / expected / high 1.78 / 17.07 / 11.38. Right (in the high band batching takes more
    of the part first) but read as an error under low/expected/high headers: audit.json says why."""
    from audit.plan import marginal_note

    bands = {"low": Decimal("1.78"), "expected": Decimal("17.07"), "high": Decimal("11.38")}
    note = marginal_note(bands, PART)
    assert note.startswith("marginal saving high 11.38 < expected 17.07: not an error. Each band is its own case")
    assert PART in note
    assert marginal_note({"low": Decimal(1), "expected": Decimal(2), "high": Decimal(3)}, PART) is None
    assert marginal_note(None, PART) is None
