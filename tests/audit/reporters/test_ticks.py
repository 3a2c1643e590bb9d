"""Chart axes: ticks at nice steps (1, 2, 2.5, 5 × 10^k), labels with the decimals the step needs."""

from __future__ import annotations

import base64
import html
import re
from decimal import Decimal

import pytest

from audit.reporters.formatting import axis_money, nice_step, nice_ticks, step_places

NICE = {Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5)}


def mantissa(step: Decimal) -> Decimal:
    return (step / Decimal(1).scaleb(step.adjusted())).normalize()


@pytest.mark.parametrize("span", ["0.003", "0.07", "1", "7.5", "12.5", "99", "1234", "90745.49", "1e6", "3.3e9"])
def test_every_step_is_one_two_two_and_a_half_or_five_times_a_power_of_ten(span):
    step = nice_step(Decimal(span), 6)
    assert mantissa(step) in NICE, step
    assert Decimal(span) / step <= 6  # at most six steps cover the span
    assert Decimal(span) / step > 6 / Decimal("2.5") / 2  # and not needlessly few


@pytest.mark.parametrize("span, step", [("12.5", "2.5"), ("10", "2"), ("30", "5"), ("100000", "20000"),
                                        ("0.03", "0.005"), ("1", "0.2")])
def test_known_spans_get_the_expected_step(span, step):
    assert nice_step(Decimal(span), 6) == Decimal(step)


def test_ticks_start_at_a_multiple_of_the_step_and_stay_inside_the_range():
    ticks, step = nice_ticks(Decimal("-3"), Decimal(12), 6)
    assert step == Decimal("2.5")
    assert ticks == [Decimal(x) for x in ("-2.5", "0", "2.5", "5", "7.5", "10")]
    assert all(t % step == 0 for t in ticks)


@pytest.mark.parametrize("step, places", [("2.5", 1), ("0.25", 2), ("5", 0), ("20000", 0), ("0.005", 3), ("1E+3", 0)])
def test_decimals_follow_the_step(step, places):
    assert step_places(Decimal(step)) == places


def test_two_and_a_half_dollar_steps_are_labelled_exactly():
    ticks, step = nice_ticks(0, Decimal("12.5"), 6)
    labels = [axis_money(t, step, "USD") for t in ticks]
    assert labels == ["$0.0", "$2.5", "$5.0", "$7.5", "$10.0", "$12.5"]  # never $2 / $5 / $8


def test_large_steps_have_no_decimals_and_thousands_separators():
    ticks, step = nice_ticks(0, Decimal("125000"), 6)
    assert [axis_money(t, step, "EUR") for t in ticks] == ["€0", "€25,000", "€50,000", "€75,000", "€100,000",
                                                            "€125,000"]
    assert axis_money(Decimal("1500"), Decimal("500"), "CAD") == "CAD 1,500"


def chart_labels(uri: str) -> list[str]:
    """The text of an SVG chart: its labels are SVG ``<text>`` elements (audit/reporters/svg.py)."""
    svg = base64.b64decode(uri.split(",", 1)[1]).decode("utf-8")
    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def test_the_bucket_chart_axis_has_nice_money_ticks():
    from audit.reporters.charts import build_charts

    # the largest bar is 9.00, the axis runs to 9 × 1.38 = 12.42: a $2.5 step
    amounts = {"model_compute": "9.00", "serving_path": "1.50", "platform_overhead": "1.25", "unattributed": "0.25"}
    audit = {"currency": "USD", "total": "12.00",
             "buckets": {k: {"amount": v, "share": str(Decimal(v) / 12)} for k, v in amounts.items()}}
    labels = chart_labels(build_charts(audit)["buckets"])
    ticks = [x for x in labels if re.fullmatch(r"\$\d+(\.\d+)?", x)]
    assert ticks == ["$0.0", "$2.5", "$5.0", "$7.5", "$10.0"], labels


def test_a_share_that_rounds_to_zero_has_no_sign():
    from audit.reporters.formatting import percent

    assert percent("-0.000008", 2) == "0.00 %"
    assert percent("-0.0001", 2) == "-0.01 %"


@pytest.mark.parametrize("value, label", [(950.4, "$950"), (9_999.4, "$9,999"), (12_345, "$12.3k"),
                                          (297_861, "$298k"), (1_726_913, "$1.73M"), (-2_410_900, "-$2.41M"),
                                          (4.1e9, "$4.1B")])
def test_waterfall_bar_labels_are_short_enough_to_sit_over_their_bars(value, label):
    from audit.reporters.charts import _whole

    assert _whole(value, "USD") == label


def test_a_fleet_sized_waterfall_labels_its_bars_in_millions():
    from audit.reporters.charts import build_charts

    amounts = {"model_compute": "3184502.63", "serving_path": "297861.00", "platform_overhead": "4307634.37",
               "unattributed": "2035046.64"}
    audit = {"currency": "USD", "total": "9825044.64", "invoice_total": "8098132.77",
             "buckets": {k: {"amount": v} for k, v in amounts.items()}, "services": {}}
    labels = chart_labels(build_charts(audit)["waterfall"])
    assert {"$8.1M", "+$1.73M", "$9.83M", "$3.18M", "$298k", "$4.31M", "$2.04M"} <= set(labels), labels
