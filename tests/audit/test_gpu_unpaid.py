"""Telemetry's GPU time beyond what a node's lines pay, and the driver naming it (audit/gpu_unpaid.py)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

from audit.gpu_presence import Presence
from audit.gpu_unpaid import add_unpaid, unpaid_drivers
from audit.ledger import NodeCoverage

H0 = datetime(2026, 9, 1, tzinfo=timezone.utc)
GRID = [(H0 + timedelta(hours=h), Decimal(3600)) for h in range(4)]
PERIOD = (H0, H0 + timedelta(hours=4))


def _covered() -> NodeCoverage:
    """n1, 2 GPUs billed 1 h of 4 and seen in hours 0-2: 2400 s of each seen hour unpaid; in each,
    chat holds one GPU at busy 0.5, an undeclared pod the other at 0.25."""
    presence = Presence.of([("n1", ts) for ts, _ in GRID[:3]], [("n1", "DCGM_FI_DEV_GPU_UTIL")])
    presence.spread("n1", PERIOD, GRID, [Decimal("0.25")] * 4, Decimal("0.25"))
    cover = NodeCoverage("vm/1", "n1", "a2", paid_seconds=Decimal(7200), observed_seconds=Decimal(7200), gpus=2)
    parts = (("chat", 1, Decimal("0.5"), "", "", ""), ("__undeclared__", 1, Decimal("0.25"), "", "", ""))
    add_unpaid(presence, {"vm/1": cover}, lambda node, ts, gpus: (2, parts))
    return cover


def test_the_seen_unpaid_time_is_measured_on_the_node_s_coverage():
    """2 h unpaid, 3 × 2400 s × 2 GPUs = 4 GPU-hours seen unpaid, chat 1200 s kernel-active a seen hour."""
    cover = _covered()
    assert (cover.unpaid_hours, cover.seen_unpaid_seconds / 3600) == (Decimal(2), Decimal(4))
    assert cover.unpaid_busy == {**{("chat", ts): Decimal(1200) for ts, _ in GRID[:3]},
                                 **{("__undeclared__", ts): Decimal(600) for ts, _ in GRID[:3]}}


def test_the_driver_prices_what_the_bottom_up_counts_of_it():
    """Chat's requests estimated in hours 0 and 1 only (priced 0.01 a GPU-second): 2400 s of its 3600 s
    unpaid kernel time are in the bottom-up, 24.00 of a 400.00 top-down: gap -0.06."""
    priced_at = {("chat", GRID[0][0]): Decimal("0.01"), ("chat", GRID[1][0]): Decimal("0.01")}
    [driver] = unpaid_drivers({"vm/1": _covered()}, priced_at, Decimal(400))
    assert (driver.name, driver.subject, driver.gap) == ("coverage", "n1", Decimal("-0.06"))
    assert driver.detail == (
        "2 h seen but not billed (4.0 GPU-h), kernel-active 5400 s outside paid time (chat 3600 s, other 1800 s): "
        "the bottom-up counts the requests served in it, 2400 s priced at 24.00, which no line of the top-down "
        "pays (fit telemetry_beyond_billed)")
    assert unpaid_drivers({"vm/1": NodeCoverage("vm/2", "n2", "a2")}, priced_at, Decimal(400)) == []
