"""A window that starts inside a billing line's charge period (METHOD §1: billing is clipped to W):
the cloudgen EKS day (seed 4107) audited from 06:30. Its 06:00 hourly lines and whole-day lines
count only their time inside the window; the GPU split prices a clipped GPU hour at its own price."""
from __future__ import annotations

from decimal import Decimal

import pytest

from audit.audit_json import to_dict
from audit.case import load_case
from audit.pipeline import run_audit


@pytest.fixture(scope="module")
def from_half_past_six(tmp_path_factory) -> dict:
    from benchmarks.cloudgen.generate import generate

    folder = tmp_path_factory.mktemp("midhour") / "case"
    generate("eks", 4107, folder)
    toml = folder / "case.toml"
    day = 'window = ["2026-09-01", "2026-09-02"]'
    assert day in toml.read_text()
    toml.write_text(toml.read_text().replace(day, 'window = ["2026-09-01T06:30:00Z", "2026-09-02T00:00:00Z"]'))
    return to_dict(run_audit(load_case(folder)))


def test_the_total_counts_only_the_time_inside_the_window(from_half_past_six):
    doc = from_half_past_six
    assert doc["total"] == "2157.20"  # 2225.95 with the straddling lines counted whole
    assert Decimal(doc["total"]) + Decimal(doc["outside_scope"]["amount"]) == Decimal(doc["invoice_total"])
    [note, outside] = doc["sources"][0]["notes"]
    assert note["note"] == ("19 lines straddle the window's start (2026-09-01 06:30 UTC): 68.84 USD of their "
                            "150.73 USD billed is for time before the window and left out (clipped pro rata by time)")
    # the lines of 00:00-06:00 are left out whole, and said so (364 rows = 274 lines kept + 90 outside)
    assert outside == {"row": 1, "column": "ChargePeriodStart", "note": (
        "90 lines wholly outside the window (2026-09-01 06:30 to 2026-09-02 00:00 UTC), left out: 733.45 USD billed, "
        "733.45 USD effective; charge periods from 2026-09-01 00:00 to 2026-09-01 06:00 UTC; rows focus_aws.csv:1, "
        "focus_aws.csv:2, focus_aws.csv:3, …")}
    assert (doc["sources"][0]["rows"], doc["sources"][0]["lines"]) == (364, 274)


def test_a_clipped_gpu_hour_is_priced_at_its_own_price(from_half_past_six):
    [day] = from_half_past_six["services"]["chat"]["daily"]
    assert (day["gpu_cost"], day["paid_gpu_seconds"]) == ("1496.400000000000", "783000.000000")
    assert Decimal(day["gpu_cost"]) / Decimal(day["paid_gpu_seconds"]) * 3600 == Decimal("6.88")  # not 7.0766
