"""Options: payback bands and ranking (METHOD §7)."""
from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from audit.rank import _price, catalogue
from tests.builders import make_case

CASE = make_case()
SPEC = dict(catalogue()[0])


def price(base):
    return _price(SPEC, False, SPEC["acts_on"], base, Decimal(1), CASE, {SPEC["acts_on"]}, None)


@given(st.decimals(min_value=Decimal("1"), max_value=Decimal("1e7"), places=2),
       st.decimals(min_value=Decimal("0.01"), max_value=Decimal("1e6"), places=2))
def test_payback_never_rises_as_saving_grows(base, more):
    small, large = price(base), price(base + more)
    for band in ("low", "expected", "high"):
        assert large.payback[band] <= small.payback[band]
    assert small.payback["low"] <= small.payback["expected"] <= small.payback["high"]


def test_payback_formula():
    option = price(Decimal("1000"))
    recover = SPEC["recoverable"]
    hours = SPEC["effort_hours"]
    rate = CASE.loaded_rate
    assert option.saving["expected"] == Decimal("1000") * Decimal(str(recover["expected"]))
    assert option.payback["low"] == Decimal(str(hours["low"])) * rate / option.saving["high"]
    assert option.payback["high"] == Decimal(str(hours["high"])) * rate / option.saving["low"]


def test_an_option_on_a_part_credits_made_negative_saves_nothing():
    """Egress at -4.20 over the window (a credit above its charges): the catalogue's share of it was a
    negative saving, its high band below its low (-31.93 expected, -51.09 / -12.77 in the check); now
    no saving, with the reason, and never ranked."""
    spec = next(dict(s) for s in catalogue() if s["id"] == "cache_egress")
    option = _price(spec, False, spec["acts_on"], Decimal("-4.20"), Decimal(30), CASE, {spec["acts_on"]}, None)
    assert (option.status, option.saving, option.payback, option.part_monthly) == (
        "no_saving", None, None, Decimal("-126.00"))
    assert option.reason == ("no saving in this case: the part is -126.00 a month, negative after credits (they "
                             "exceed its charges: see fit): no saving is priced on a negative amount")


def test_unmeasured_part_is_never_priced():
    spec = dict(SPEC, acts_on="model_compute.prefill")
    option = _price(spec, False, "model_compute.prefill", None, Decimal(1), CASE, set(), None)
    assert option.status == "not_measured" and option.saving is None and option.payback is None


def test_without_a_serving_split_capacity_options_are_not_measured_not_zero(tmp_path):
    """METHOD §7: an option whose part was not measured is not measured, never priced. The demo
    without its kernel profile splits no service's idle, so capacity above demand and headroom are
    idle_not_separated (before: both "measured" at 0.00, and right-sizing and autoscaling were said
    to save nothing; with the profile right-sizing saves thousands a month)."""
    import re
    import shutil

    from audit.audit_json import to_dict
    from audit.case import load_case
    from audit.pipeline import run_audit
    from tests.paths import DEMO

    case = tmp_path / "demo"
    shutil.copytree(DEMO, case)
    text = (case / "case.toml").read_text(encoding="utf-8")
    (case / "case.toml").write_text(re.sub(r"\n\[\[profiles\]\]\n.*?(?=\n\[services)", "\n", text, flags=re.S),
                                    encoding="utf-8")
    options = {o["id"]: o for o in to_dict(run_audit(load_case(case)))["options"]}
    for option in ("right_size_replicas", "autoscaling_policy"):
        assert options[option]["status"] == "not_measured", options[option]
        assert "idle_not_separated" in options[option]["reason"]
        assert options[option]["monthly_saving"] is None


def _modelled_right_size(share_given: bool, **override):
    from audit.pricing import Modelled

    spec = dict(next(s for s in catalogue() if s["id"] == "right_size_replicas"), **override)
    model = Modelled({"low": Decimal("100"), "expected": Decimal("200"), "high": Decimal("300")},
                     (("replicas held", "21", "telemetry"),), "the replay at u ∓ 0.1",
                     by_service={"chat": {"low": Decimal("100"), "expected": Decimal("200"), "high": Decimal("300")}})
    return _price(spec, bool(override), spec["acts_on"], Decimal("1000"), Decimal(1), CASE, {spec["acts_on"]},
                  None, model, None, share_given)


def test_a_case_recoverable_on_a_modelled_option_scales_the_modelled_saving():
    """docs/case.md [[options]]: the case's recoverable on a modelled option is the share of the
    modelled saving one can recover (before: read and never used, the saving stayed the model's
    100 / 200 / 300 with nothing said)."""
    option = _modelled_right_size(True, recoverable={"low": 0.4, "expected": 0.6, "high": 0.8},
                                  reason="we already run KEDA; only the policy changes")
    assert option.saving == {"low": Decimal("40.0"), "expected": Decimal("120.0"), "high": Decimal("240.0")}
    assert option.by_service == {"chat": option.saving}
    assert option.assumptions[0] == ("recoverable share of the modelled saving 0.4 / 0.6 / 0.8 (case [[options]]): "
                                     "the model's saving × this share")
    assert "why: we already run KEDA; only the policy changes" in option.assumptions
    assert option.inputs[-1] == ("recoverable share of the modelled saving", "0.4 / 0.6 / 0.8", "case [[options]]")


def test_the_catalogue_recoverable_is_not_applied_to_a_model():
    option = _modelled_right_size(False)
    assert option.saving == {"low": Decimal("100"), "expected": Decimal("200"), "high": Decimal("300")}
    assert option.inputs == (("replicas held", "21", "telemetry"),)


def test_the_recoverable_share_is_credited_to_the_case_only_where_the_case_gave_it():
    """Before: an [[options]] entry giving only effort_hours (or run_cost_per_month) credited the
    catalogue's recoverable share 0.2 / 0.4 / 0.6 of log_sampling to "case [[options]]"."""
    spec = dict(next(s for s in catalogue() if s["id"] == "log_sampling"), effort_hours={"low": 0, "expected": 0,
                                                                                      "high": 0})

    def share_input(share_given):
        option = _price(spec, True, spec["acts_on"], Decimal(1000), Decimal(1), CASE, {spec["acts_on"]}, None,
                        None, None, share_given)
        return option.overridden, option.inputs[-1]
    assert share_input(False) == (True, ("recoverable share", "0.2 / 0.4 / 0.6", "catalogue: audit/data/options.toml"))
    assert share_input(True) == (True, ("recoverable share", "0.2 / 0.4 / 0.6", "case [[options]]"))


def _commitment_option():
    spec = next(dict(s) for s in catalogue() if s["id"] == "right_size_commitment")
    return _price(spec, False, spec["acts_on"], None, Decimal(1), CASE, set(), None)


def test_no_commitment_line_in_scope_is_no_saving_not_an_unmeasured_part():
    """A case without commitments (cloudgen eks seed 7301): before, right_size_commitment was
    not_measured ("part not measured: no measurement in this case produced it"); now no_saving,
    saying no commitment line is in scope."""
    import pandas as pd

    from audit.rank import uncommitted

    plain = pd.DataFrame({"commitment_discount_id": [None, ""], "resource_class": ["gpu_compute", "storage"]})
    option = uncommitted(_commitment_option(), plain)
    assert (option.status, option.part_monthly, option.saving) == ("no_saving", Decimal(0), None)
    assert option.reason == ("no saving in this case: no commitment line is in scope (no invoice line is billed "
                             "under a commitment discount or as unused commitment): there is no commitment to "
                             "right-size")
    committed = pd.DataFrame({"commitment_discount_id": ["sp-1"], "resource_class": ["gpu_compute"]})
    assert uncommitted(_commitment_option(), committed).status == "not_measured"


def test_a_billing_class_part_with_no_line_is_measured_zero_not_unmeasured():
    """The demo with its 90 DataTransfer-Out-Bytes lines deleted and no profiles: before, cache_egress was
    not_measured ("part not measured: no measurement in this case produced it") though the billing was
    read and holds no egress line; now no_saving on a part of 0.00 the billing measured."""
    import pandas as pd

    from audit.rank import unbilled

    spec = next(dict(s) for s in catalogue() if s["id"] == "cache_egress")
    unmeasured = _price(spec, False, spec["acts_on"], None, Decimal(1), CASE, set(), None)
    assert unmeasured.reason == "part not measured: no measurement in this case produced it"
    plain = pd.DataFrame({"commitment_discount_id": [None], "resource_class": ["gpu_compute"]})
    option = unbilled(unmeasured, plain)
    assert (option.status, option.part_monthly, option.saving) == ("no_saving", Decimal(0), None)
    assert option.reason == ("no saving in this case: the part is 0.00 a month: the billing was read and no invoice "
                             "line in scope is of class 'egress', the lines this part is made of")
    assert option.inputs == (("platform_overhead.egress a month", "0.00",
                              "billing: no invoice line in scope is of class egress"),)
    billed = pd.DataFrame({"commitment_discount_id": [None], "resource_class": ["egress"]})
    assert unbilled(unmeasured, billed).status == "not_measured"
    assert unbilled(_commitment_option(), plain).reason.startswith("no saving in this case: no commitment line")


def test_a_zero_saving_says_in_this_case_once():
    """Before: "no saving in this case: the saving is zero (or below the run cost) in this case"."""
    from audit.plan import PlanInput, plan

    spec = next(dict(s) for s in catalogue() if s["id"] == "cache_egress")
    option = _price(spec, False, spec["acts_on"], Decimal(0), Decimal(1), CASE, {spec["acts_on"]}, None)
    (priced,) = plan([option], PlanInput(part_monthly={}))
    assert (priced.status, priced.reason) == ("no_saving", "no saving in this case: the saving is zero (or below "
                                                           "the run cost)")


def test_a_high_band_above_a_zero_expected_saving_is_named_in_the_reason():
    """consolidate_models on the demo: low and expected 0.00, high 14,830.04 (every unallocated GPU
    released, as if nodes came one GPU at a time). Before: "the saving is zero (or below the run
    cost)", while audit.json, tables.xlsx and the CSV gave the high band 14830.04; now the reason
    names the high band and what it assumes, and why it is no saving."""
    from audit.plan import PlanInput, plan
    from audit.pricing import Modelled

    spec = dict(next(s for s in catalogue() if s["id"] == "consolidate_models"))
    model = Modelled({"low": Decimal(0), "expected": Decimal(0), "high": Decimal("14830.04")}, (),
                     "low: nodes free throughout the longest scale reaction either side; high: every unallocated "
                     "GPU released (as if nodes came one GPU at a time)")
    option = _price(spec, False, spec["acts_on"], Decimal("14830.04"), Decimal(1), CASE, {spec["acts_on"]},
                    None, model, None, False)
    (priced,) = plan([option], PlanInput(part_monthly={}))
    assert priced.status == "no_saving" and priced.saving["high"] == Decimal("14830.04")
    assert priced.reason == ("no saving in this case: the expected saving is 0.00 a month and the low 0.00; only "
                             "the high band saves, 14830.04 a month, on its most favourable assumption (every "
                             "unallocated GPU released (as if nodes came one GPU at a time)): not a saving to plan "
                             "on, and an option with no expected saving is not ranked")


def test_a_no_saving_reason_quotes_the_saving_after_the_committed_share_is_left_out():
    """The demo with autoscaling_policy at target 0.7: monthly_saving.high 281.02 (s₀: 616.80 less the
    committed 4022.14 / 7388.37, end unknown), but the reason said "only the high band saves, 616.80
    a month", the saving before the deferral. Now it quotes the figure shown, and the gross beside."""
    from audit.plan import Deferral, PlanInput, plan
    from audit.pricing import Modelled

    spec = dict(next(s for s in catalogue() if s["id"] == "autoscaling_policy"))
    model = Modelled({"low": Decimal(0), "expected": Decimal(0), "high": Decimal("616.80")}, (),
                     "low / high: the policy replayed at target utilisation 0.8 / 0.9")
    option = _price(spec, True, spec["acts_on"], Decimal("7388.37"), Decimal(1), CASE, {spec["acts_on"]},
                    None, model, None, False)
    share = Decimal("4022.14") / Decimal("7388.37")
    (priced,) = plan([option], PlanInput(part_monthly={}, deferrals={spec["id"]: Deferral(share, None)}))
    assert priced.status == "no_saving" and f"{priced.saving['high']:.2f}" == "281.02"
    assert priced.reason == ("no saving in this case: the expected saving is 0.00 a month and the low 0.00; only "
                             "the high band saves, 281.02 a month, on its most favourable assumption (the policy "
                             "replayed at target utilisation 0.8 / 0.9): not a saving to plan on, and an option "
                             "with no expected saving is not ranked (the saving available now, s₀; before the 54% on committed capacity whose end is not known was "
                             "left out: 0.00 / 0.00 / 616.80 a month, low / expected / high)")
