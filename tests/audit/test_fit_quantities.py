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
