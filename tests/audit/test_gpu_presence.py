"""Where a line that bills part of its period is placed (audit/gpu_presence.py)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

from audit.gpu_presence import Presence

H0 = datetime(2026, 9, 1, tzinfo=timezone.utc)
GRID = [(H0 + timedelta(hours=h), Decimal(3600)) for h in range(4)]
PARTS = [Decimal("0.25")] * 4
PERIOD = (H0, H0 + timedelta(hours=4))


def test_a_node_seen_in_every_interval_or_none_keeps_the_even_spread():
    presence = Presence.of([("n1", ts) for ts, _ in GRID], [("n1", "DCGM_FI_DEV_GPU_UTIL")])
    even = [(ts, overlap, Decimal("0.25"), Decimal("0.5")) for ts, overlap in GRID]
    assert presence.spread("n1", PERIOD, GRID, PARTS, Decimal("0.5")) == (even, "")
    assert presence.spread("n2", PERIOD, GRID, PARTS, Decimal("0.5")) == (even, "")
    assert presence.spread("", PERIOD, GRID, PARTS, Decimal("0.5")) == (even, "")


def test_the_paid_time_goes_to_the_intervals_seen_and_what_is_left_to_the_others():
    """Half of 4 h billed (2 h), the node seen in hour 3 only: hour 3 holds 1 h (half the money),
    the other hour goes a third to each of hours 0-2; a line of the whole period is not placed."""
    presence = Presence.of([("n1", GRID[3][0])], [("n1", "DCGM_FI_DEV_GPU_UTIL")])
    spread, note = presence.spread("n1", PERIOD, GRID, PARTS, Decimal("0.5"))
    third = Decimal(1) / 3
    assert spread == [(ts, overlap, overlap * third / 7200, third) for ts, overlap in GRID[:3]] + [
        (GRID[3][0], Decimal(3600), Decimal("0.5"), Decimal(1))]
    assert note == "placed by node presence in DCGM_FI_DEV_GPU_UTIL (n1)"
    assert presence.spread("n1", PERIOD, GRID, PARTS, Decimal(1))[1] == ""
