"""t_c of a saving on committed capacity (METHOD §7, deferred savings): the end of the commitment the
saving lies on, as the part's lines name it, never an unrelated commitment of the same contract."""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pandas as pd

from audit.plan import Deferral, _deferral_notes
from audit.plan_input import committed_ids, deferral
from audit.result import Commitment

WINDOW_END = datetime(2026, 10, 1, tzinfo=timezone.utc)
MONTH = Decimal("30.4375") * 86400


def commitment(cid: str, end: datetime, kind: str = "Savings Plan") -> Commitment:
    start = datetime(2025, 10, 1, tzinfo=timezone.utc)
    return Commitment(cid, kind, "Spend", start, end, Decimal(12), Decimal(int((end - WINDOW_END).total_seconds())) / MONTH,
                      "", None, None, "USD", "contract-1", None, "", "focus")


def charges(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """(resource_class, commitment_discount_id, contract_applied) per line."""
    return pd.DataFrame(rows, columns=["resource_class", "commitment_discount_id", "contract_applied"])


SP = commitment("arn:aws:savingsplans::1:savingsplan/sp-1", datetime(2026, 11, 1, tzinfo=timezone.utc))
FLOOR = commitment("floor-1", datetime(2028, 9, 1, tzinfo=timezone.utc), "Minimum Spend")
PART = "platform_overhead.capacity_above_demand"


def test_t_c_is_the_end_of_the_commitment_the_gpu_lines_name():
    """The spend floor ends 23.9 months after the window; the Savings Plan the GPU lines name, 1.0."""
    lines = charges([("gpu_compute", SP.id, "[]"), ("gpu_compute", "", "[]"), ("storage", "", '["floor-1"]')])
    found = deferral(PART, Decimal("0.4"), [SP, FLOOR], Decimal(1), lines)
    assert found.share == Decimal("0.4") and found.months == SP.months_after_window
    assert round(found.months, 2) == Decimal("1.02")
    assert found.source == f"the end of commitment {SP.id}, the latest of the 1 its gpu_compute lines name"
    assert f"({found.source})" in _deferral_notes(found)[0]


def test_contract_applied_names_a_commitment_too():
    lines = charges([("gpu_compute", "", '["floor-1"]')])
    assert committed_ids(lines, "gpu_compute") == {"floor-1"}
    assert deferral(PART, Decimal("0.4"), [SP, FLOOR], Decimal(1), lines).months == FLOOR.months_after_window


def test_no_line_naming_a_commitment_takes_the_latest_listed_and_says_so():
    lines = charges([("gpu_compute", "", "[]")])
    found = deferral(PART, Decimal("0.4"), [SP, FLOOR], Decimal(1), lines)
    assert found.months == FLOOR.months_after_window
    assert found.source == "the latest end of the 2 commitment(s) listed (floor-1): no gpu_compute line names one of them"


def test_the_unused_commitment_part_reads_the_unused_lines():
    lines = charges([("gpu_compute", "floor-1", "[]"), ("commitment_unused", SP.id, "[]")])
    found = deferral("platform_overhead.commitment_unused", Decimal("0.4"), [SP, FLOOR], Decimal(1), lines)
    assert found.months == SP.months_after_window and "commitment_unused lines" in found.source


def test_no_listed_commitment_leaves_t_c_unknown():
    assert deferral(PART, Decimal("0.4"), [], Decimal(1), charges([])) == Deferral(Decimal("0.4"), None)
