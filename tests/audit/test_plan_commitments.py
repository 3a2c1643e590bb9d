"""t_c of a saving on committed capacity (METHOD §7, deferred savings): the end of the commitment the
saving lies on, as the part's lines name it, never an unrelated commitment of the same contract."""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pandas as pd
import pytest

from audit.attribute import split_groups
from audit.gpusplit import GpuLines, GpuSplitter
from audit.ledger import Ledger
from audit.normalised import REQUEST_COLUMNS, empty_table
from audit.plan import Deferral, PlanInput, _deferral_notes, plan
from audit.plan_input import committed_ids, deferral, part_deferral
from audit.result import Commitment
from audit.split_sql import run_duckdb
from tests.audit.test_plan import option as plan_option
from tests.builders import activity, gpu_line, lines_frame, make_case

WINDOW_END = datetime(2026, 10, 1, tzinfo=timezone.utc)
H0 = pd.Timestamp("2026-09-01T00:00:00Z")
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


# Two GPU types, each GPU-capacity part on one: the A100 node (1 GPU, 40.00 an hour, reservation
# covered) held by no workload, the T4 node (1 GPU, 10.00 an hour, on demand) held by chat, busy 25 %.
A100 = gpu_line(1, resource_id="i-a100", instance_type="Standard_NC24ads_A100_v4", gpus_per_instance=1,
                net=Decimal(40), pretax=Decimal(40), priced=Decimal(40), commitment_discount_id="ri-1")
T4 = gpu_line(2, resource_id="i-t4", instance_type="Standard_NC4as_T4_v3", gpus_per_instance=1,
              net=Decimal(10), pretax=Decimal(10), priced=Decimal(10), commitment_discount_id="")
RI = commitment("ri-1", datetime(2026, 12, 1, tzinfo=timezone.utc), "Reservation")


@pytest.mark.parametrize("walk", ["python", "duckdb"])
def test_each_gpu_capacity_part_defers_by_the_commitment_share_of_its_own_lines(walk):
    """Before, both parts took the committed share of all GPU compute (40 of 50: 80 %), so releasing
    the reserved A100 saved 20 % now and the T4's capacity above demand waited 80 % for the
    reservation's end. Now the A100's unallocated part is 100 % committed (s₀ = 0, all of it from
    t_c) and the T4's capacity above demand 0 % (no deferral)."""
    case = make_case()
    acts = activity([{"node": "a100-0", "ts": H0, "gpu": "0", "busy_fraction": Decimal(0), "pod": ""},
                     {"node": "t4-0", "ts": H0, "gpu": "0", "busy_fraction": Decimal("0.25"), "pod": "chat-0",
                      "namespace": "llm", "container": "chat"}])
    splitter = GpuSplitter(case, case.services, acts, {"i-a100": ("a100-0",), "i-t4": ("t4-0",)},
                           empty_table(REQUEST_COLUMNS), {}, 3600)
    lines = GpuLines(lines_frame([A100, T4]))
    if walk == "python":
        splitter.add_lines(lines)
    else:
        splitter.add_lines_in_engine(lines, run_duckdb)
    ledger = Ledger()
    split_groups(ledger, splitter.groups, {"chat": (Decimal(0), "profile")}, Decimal("0.8"), lambda g, s: "test")
    assert ledger.parts[("platform_overhead", "unallocated", None)].committed == Decimal(40)
    above = ledger.parts[("platform_overhead", "capacity_above_demand", "chat")]
    assert (above.amount, above.committed) == (Decimal("6.875"), 0)  # 10 − 2.5 busy − 0.625 headroom
    lines_now = charges([("gpu_compute", "ri-1", "[]"), ("gpu_compute", "", "[]")])
    release = part_deferral("platform_overhead.unallocated", ledger, Decimal("0.8"), [RI], Decimal(1), lines_now)
    assert (release.share, release.months) == (Decimal(1), RI.months_after_window)
    assert _deferral_notes(release)[0].startswith(
        "100% (40.00 of the part's 40.00 over the window is on lines billed under a commitment discount) of the "
        "saving lies on committed capacity: it starts when the commitment ends, 2.0 months after the window")
    above_demand = part_deferral("platform_overhead.capacity_above_demand", ledger, Decimal("0.8"), [RI], Decimal(1),
                                 lines_now)
    assert above_demand == Deferral()
    options = [plan_option("release", Decimal(900), acts_on="platform_overhead.unallocated"),
               plan_option("above", Decimal(150), acts_on="platform_overhead.capacity_above_demand")]
    priced = {o.id: o for o in plan(options, PlanInput(
        part_monthly={"platform_overhead.unallocated": Decimal(1000),
                      "platform_overhead.capacity_above_demand": Decimal(1000)},
        loaded_rate=Decimal(100), deferrals={"release": release}))}
    assert priced["release"].saving_now["expected"] == 0 and priced["release"].saving_deferred["expected"] == 900
    assert priced["above"].saving_now["expected"] == 150 and priced["above"].saving_deferred is None


def test_a_gpu_capacity_part_with_no_money_falls_back_to_the_share_of_all_gpu_compute():
    found = part_deferral("platform_overhead.headroom", Ledger(), Decimal("0.4"), [], Decimal(1), charges([]))
    assert found == Deferral(Decimal("0.4"), None, share_source="the part has no money of its own: the "
                             "committed share of all GPU compute")
