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


def test_a_node_seen_longer_than_its_line_bills_is_named_with_both_hours():
    """A scale-in billed short (rule 5: no silent misfit): 1 h of a 4 h period billed (occupancy
    0.25), the node seen in hours 0-2. Before, the paid hour was spread over the 3 seen hours and
    nothing said telemetry saw 2 h more than the bill pays; now ``telemetry_beyond_billed`` names the
    node, its billed and its seen hours. A node seen in every interval of a half-billed period is
    named too; one seen no longer than billed is not."""
    presence = Presence.of([("n1", ts) for ts, _ in GRID[:3]] + [("n2", ts) for ts, _ in GRID] +
                           [("n3", GRID[0][0])], [("n1", "DCGM_FI_DEV_GPU_UTIL")])
    presence.spread("n1", PERIOD, GRID, PARTS, Decimal("0.25"))
    presence.spread("n2", PERIOD, GRID, PARTS, Decimal("0.5"))
    presence.spread("n3", PERIOD, GRID, PARTS, Decimal("0.5"))
    [misfit] = presence.misfits()
    assert (misfit.kind, misfit.subject, misfit.nearest) == ("telemetry_beyond_billed", "coverage", ("n2", "n1"))
    assert misfit.message == (
        "2 GPU node(s) seen in telemetry for more hours than the bill pays for them: n2: billed 2 h, seen 4 h; "
        "n1: billed 1 h, seen 3 h. Telemetry saw these nodes for hours no line pays (a row missing or cut "
        "short, a scale-in billed shorter than the node ran): the paid GPU time is placed in the hours they "
        "were seen, and coverage's observed GPU-hours count only that paid time: the rest is its "
        "seen_unpaid_gpu_hours, in no bucket, and the reconciliation names its kernel activity as a coverage "
        "driver (the bottom-up counts the requests served in it, no line pays it).")


def test_the_seen_time_no_line_pays_is_kept_per_interval():
    """The hours behind ``telemetry_beyond_billed``, interval by interval: n1 (1 h paid, seen 3 h)
    leaves 2/3 of each seen hour unpaid (2400 s), n2 (2 h paid, seen all 4 h) half of each (1800 s);
    n3, seen no longer than billed, none. Before, coverage and reconciliation saw only the paid time."""
    presence = Presence.of([("n1", ts) for ts, _ in GRID[:3]] + [("n2", ts) for ts, _ in GRID] +
                           [("n3", GRID[0][0])], [("n1", "DCGM_FI_DEV_GPU_UTIL")])
    presence.spread("n1", PERIOD, GRID, PARTS, Decimal("0.25"))
    presence.spread("n2", PERIOD, GRID, PARTS, Decimal("0.5"))
    presence.spread("n3", PERIOD, GRID, PARTS, Decimal("0.5"))
    assert sorted(presence.unpaid_intervals()) == sorted(
        [("n1", ts, Decimal(2400)) for ts, _ in GRID[:3]] + [("n2", ts, Decimal(1800)) for ts, _ in GRID])
    assert presence.unpaid_hours() == {"n1": Decimal(2), "n2": Decimal(2)}
