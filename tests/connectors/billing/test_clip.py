"""Billing lines straddling the audit window are clipped to their part inside it (METHOD §1:
"Billing and telemetry are clipped to W"), pro rata by time, and the money left out is named."""
from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pytest

from tests.connectors.billing.test_focus import read, total, utc

HEADER = ("ChargePeriodStart,ChargePeriodEnd,ChargeCategory,BilledCost,EffectiveCost,ListCost,ContractedCost,"
          "ResourceId,x_InstanceType,PricingQuantity,ConsumedQuantity,ListUnitPrice,BillingCurrency")
START, END = utc(2024, 1, 1, 6, 30), utc(2024, 1, 2)


def period(start: str, end: str) -> str:
    return f"2024-01-{start}Z,2024-01-{end}Z"


@pytest.fixture
def bill(tmp_path):
    """A p5.48xlarge billed 06:00–09:00 by the hour (the 06:00 hour straddles a window from 06:30),
    a volume's day 00:00–24:00 (straddles the start), a disk billed 12:00 to 12:00 the next day
    (straddles the end) and an hour of storage inside the window."""
    rows = [f"{period(f'01T{h:02d}:00:00', f'01T{h + 1:02d}:00:00')},Usage,55.04,55.04,98.32,60,i-gpu,p5.48xlarge,1,1,98.32"
            for h in (6, 7, 8)]
    rows += [f"{period('01T00:00:00', '02T00:00:00')},Usage,24.00,24.00,24.00,24.00,vol-1,,24,24,1",
             f"{period('01T12:00:00', '02T12:00:00')},Usage,4.80,4.80,4.80,4.80,vol-2,,24,24,0.2",
             f"{period('01T10:00:00', '01T11:00:00')},Usage,0.10,0.10,0.10,0.10,vol-3,,1,1,0.1"]
    path = tmp_path / "straddle.csv"
    path.write_text(HEADER + "\n" + "".join(row + ",USD\n" for row in rows), encoding="utf-8")
    return path


def by_resource(lines: pd.DataFrame, resource: str) -> pd.DataFrame:
    return lines[lines.resource_id == resource]


def test_a_straddling_gpu_hour_counts_its_half_at_its_own_price(bill):
    lines = read(bill, start=START, end=END).tables["lines"]
    gpu = by_resource(lines, "i-gpu")
    first = gpu.iloc[0]
    assert (first.start, first.end) == (pd.Timestamp("2024-01-01T06:30Z"), pd.Timestamp("2024-01-01T07:00Z"))
    assert [first.billed_cost, first.effective_cost, first.list_cost, first.contracted_cost] == [
        Decimal("27.52"), Decimal("27.52"), Decimal("49.16"), Decimal("30")]
    assert [first.pricing_quantity, first.consumed_quantity, first.list_unit_price] == [
        Decimal("0.5"), Decimal("0.5"), Decimal("98.32")]
    assert first.billed_cost / first.pricing_quantity == Decimal("55.04")  # the line's own price per hour
    # the hours inside the window are one run, unchanged
    assert gpu.iloc[1:].line_count.tolist() == [2] and gpu.iloc[1].billed_cost == Decimal("110.08")


def test_a_day_straddling_either_edge_counts_its_hours_inside(bill):
    lines = read(bill, start=START, end=END).tables["lines"]
    day, disk = by_resource(lines, "vol-1").iloc[0], by_resource(lines, "vol-2").iloc[0]
    assert (day.billed_cost, day.pricing_quantity, day.start) == (
        Decimal("17.5"), Decimal("17.5"), pd.Timestamp("2024-01-01T06:30Z"))  # 17.5 of 24 hours
    assert (disk.billed_cost, disk.list_cost, disk.end) == (
        Decimal("2.4"), Decimal("2.4"), pd.Timestamp("2024-01-02T00:00Z"))  # 12 of 24 hours


def test_a_line_inside_the_window_is_unchanged_and_the_money_left_out_is_named(bill):
    frame = read(bill, start=START, end=END)
    lines = frame.tables["lines"]
    inside = by_resource(lines, "vol-3").iloc[0]
    assert (inside.billed_cost, inside.pricing_quantity, inside.start) == (
        Decimal("0.10"), Decimal("1"), pd.Timestamp("2024-01-01T10:00Z"))
    assert total(lines.billed_cost) == Decimal("27.52") + Decimal("110.08") + Decimal("17.5") + Decimal("2.4") + Decimal("0.10")
    assert frame.tables["notes"].note.tolist() == [
        "2 lines straddle the window's start (2024-01-01 06:30 UTC): 34.02 USD of their 79.04 USD billed "
        "is for time before the window and left out (clipped pro rata by time)",
        "1 line straddles the window's end (2024-01-02 00:00 UTC): 2.40 USD of its 4.80 USD billed "
        "is for time after the window and left out (clipped pro rata by time)"]
    whole = read(bill, start=START, end=END, grain="line")
    assert total(whole.tables["lines"].billed_cost) == total(lines.billed_cost)


def test_a_window_on_the_line_edges_clips_nothing(bill):
    frame = read(bill, start=utc(2024, 1, 1), end=utc(2024, 1, 3))
    assert total(frame.tables["lines"].billed_cost) == Decimal("194.02")
    assert frame.tables["notes"].empty


def test_a_line_straddling_both_edges_is_named_at_each_with_that_side_s_money(bill):
    """A window 06:30–18:00 inside the volume's day (24.00 over 00:00–24:00): 6.50 of it lies before
    and 6.00 after. Before, the line was counted at the start alone, with all 12.50, and the end's
    count left it out: the end named the disk alone (3.60 after 18:00 of its 4.80)."""
    frame = read(bill, start=START, end=utc(2024, 1, 1, 18))
    volume = by_resource(frame.tables["lines"], "vol-1").iloc[0]
    assert volume.billed_cost == Decimal("11.5")
    start, end = frame.tables["notes"].note.tolist()
    assert start.startswith("2 lines straddle the window's start (2024-01-01 06:30 UTC): 34.02 USD of their 79.04 USD")
    assert end.startswith("2 lines straddle the window's end (2024-01-01 18:00 UTC): 9.60 USD of their 28.80 USD")
