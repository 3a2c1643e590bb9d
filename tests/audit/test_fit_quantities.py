"""Values outside their range on usage lines (audit/fit_quantities.py): a ListCost below the line's
ContractedCost is named (``list_below_contracted``)."""
from __future__ import annotations

from decimal import Decimal

from audit.fit_quantities import list_fit
from tests.builders import line, lines_frame

D = Decimal


def test_usage_listed_below_its_contracted_cost_is_named():
    """cloudgen eks 8705's CUR listed its Savings Plan-covered hours at the plan's effective cost
    (38.528) beside a contracted 55.04: the bridge's negotiated_discounts was +471.84, a discount that
    raised the cost, with no word. Now the lines are named, with the money on each side; a tax line
    (ListCost 0 in a CUR), a line listed at or above its contracted cost and one without ListCost are not."""
    lines = lines_frame([
        line(1, list_cost=D("924.672"), contracted_cost=D("1320.96"), line_count=24),
        line(2, list_cost=D("55.04"), contracted_cost=D("55.04")),
        line(3, list_cost=D("176.2784"), contracted_cost=D("251.8256"), line_count=24),
        line(4, charge_category="Tax", list_cost=D(0), contracted_cost=D("12.34")),
        line(5, list_cost=None, contracted_cost=D(3)),
        line(6, list_cost=D(4), contracted_cost=D(3)),
    ])
    (found,) = list_fit(lines)
    assert (found.kind, found.subject, found.nearest) == ("list_below_contracted", "billing ListCost", ("1320.96",))
    assert found.message == (
        "48 usage line(s) list below their ContractedCost (ListCost 1,100.95 against ContractedCost 1,572.79 USD, "
        "471.84 less; lines inline.csv:1, inline.csv:3; the first: ListCost 924.672 at ContractedCost 1320.96): "
        "a list price is before every discount, so the list basis and the bridge's negotiated_discounts step "
        "(list → contracted), which adds 471.84 instead of taking a discount off, rest on it")
    assert list_fit(lines.iloc[[1, 3, 4, 5]]) == []


def test_spot_usage_without_a_list_price_is_not_listed_below():
    """AWS gives Spot usage no public on-demand price (ListCost 0, no rate): the Oct 2018 workshop CUR's
    1,313 SpotUsage:m5.large lines were named list_below_contracted (ListCost 0.00 against 31.51).
    Now they are lines without a list price: not listed below; named on the list basis, which counts
    them 0 (one at ContractedCost 0 is not: the basis loses nothing on it)."""
    lines = lines_frame([
        line(1, list_cost=D(0), list_unit_price=None, contracted_cost=D("0.0304"), billed_cost=D("0.0304")),
        line(2, list_cost=D(0), list_unit_price=None, contracted_cost=D("0.0296"), billed_cost=D("0.0296")),
        line(3, list_cost=D(0), list_unit_price=None, contracted_cost=D(0), billed_cost=D(0)),
    ])
    assert list_fit(lines) == [] and list_fit(lines, "effective") == []
    (found,) = list_fit(lines, "list")
    assert (found.kind, found.subject, found.nearest) == ("list_price_missing", "billing ListCost", ("inline.csv:1",))
    assert found.message == (
        "2 usage line(s) carry no list price (ListCost 0, no ListUnitPrice; ContractedCost 0.06 USD, BilledCost "
        "0.06; lines inline.csv:1, inline.csv:2): the list basis counts them 0")


def test_reversal_lines_compare_magnitudes():
    """focus_sample_1000.csv's Microsoft Storage reversals (ListCost -4e-7 against ContractedCost -4e-11)
    were counted below their contracted cost: less money comes off at contracted than at list, so they
    are not; a reversal taking less off at list than at contracted is, and opposite signs are not compared."""
    lines = lines_frame([
        line(1, list_cost=D("-4E-7"), contracted_cost=D("-4E-11"), pricing_quantity=D("-0.001")),
        line(2, list_cost=D("-1"), contracted_cost=D("-2")),
        line(3, list_cost=D("-1"), contracted_cost=D("2")),
    ])
    (found,) = list_fit(lines)
    assert found.message.startswith("1 usage line(s) list below their ContractedCost (ListCost -1.00 against "
                                    "ContractedCost -2.00 USD, -1.00 less; lines inline.csv:2;")
