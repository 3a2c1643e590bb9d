"""A serving gap that one stray kernel cannot move (METHOD §3, issue 16), through the audit: the
demo's profile with a kernel planted before or after its traffic splits a small one-day case's GPU
cost as the demo's own profile does (work outside the traffic excluded) or within the rule's bound
(work the rule keeps), and where g over the whole GPU window would move the serving path by more
than the case's tolerance the verdict's reason says so by name."""
from __future__ import annotations

import json
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest

from audit.audit_json import to_dict
from audit.collected import Collected
from audit.pipeline import audit_collected
from audit.reporters.view import build_model
from connectors.base import SourceSpec
from connectors.profiles.kineto import KinetoConnector
from tests.builders import activity, frame, line, lines_frame, make_case
from tests.connectors.profiles.test_gap_window import CTX, DEMO_G, DEMO_TRACE, STRAY_US, planted, threshold_us

HOURS = 24
GPU_HOUR = Decimal("12.290000")        # one GPU of a p5.48xlarge, per hour
BUSY = 0.3                             # the chat GPUs' kernel-active fraction


def billing_and_telemetry() -> list:
    """One GPU node of 8 GPUs for a day, all held by chat pods, 30 % kernel-active."""
    rows = []
    for hour in range(HOURS):
        start = pd.Timestamp("2026-09-01T00:00:00Z") + pd.Timedelta(hours=hour)
        amount = GPU_HOUR * 8
        rows.append(line(hour + 1, resource_id="i-gpu0", start=start, end=start + pd.Timedelta(hours=1),
                         charge_description="$98 per On Demand Linux p5.48xlarge Instance Hour",
                         pricing_unit="Hours", pricing_quantity=Decimal(1), contracted_unit_price=amount,
                         billed_cost=amount, effective_cost=amount))
    samples = [{"node": "n0", "gpu": str(g), "ts": pd.Timestamp("2026-09-01T00:00:00Z") + pd.Timedelta(hours=h),
                "busy_fraction": BUSY, "pod": f"chat-{g}", "namespace": "llm"} for h in range(HOURS) for g in range(8)]
    nodes = pd.DataFrame([{"node": "n0", "provider_id": "aws:///z/i-gpu0", "resource_id": "i-gpu0", "instance_type": ""}])
    return [frame("billing", "focus", {"lines": lines_frame(rows)}),
            frame("telemetry", "openmetrics", {"gpu_activity": activity(samples), "node_info": nodes})]


def audit_with(trace: Path) -> dict:
    """audit.json of the one-day case with ``trace`` as chat's profile (16 requests, as the demo)."""
    spec = SourceSpec("chat-profile", "profiles", "kineto", trace, {"service": "chat", "requests": 16})
    profile = KinetoConnector(spec, CTX).read()
    return json.loads(json.dumps(to_dict(audit_collected(make_case(), Collected(tuple(billing_and_telemetry() + [profile]))))))


@lru_cache(maxsize=1)
def baseline() -> dict:
    return audit_with(DEMO_TRACE)


def amounts(document: dict) -> dict[str, Decimal]:
    return {b: Decimal(v["amount"]) for b, v in document["buckets"].items()}


def test_demo_profile_reconciles_with_no_note():
    document = baseline()
    profile = document["profiles"][0]
    assert profile["gap_basis"] == "gpu_window" and Decimal(profile["gap_ratio"]) == Decimal(f"{DEMO_G:.6f}")
    assert profile["gap_sensitivity"]["full_window"] == profile["gap_ratio"]
    assert profile["gap_sensitivity"]["excluded_kernels"] == 0
    driver = next(d for d in document["reconciliation"]["drivers"] if d["name"] == "serving_gap")
    assert driver["subject"] == "chat" and Decimal(driver["gap"]) == 0
    assert "serving gap" not in document["reconciliation"]["reason"]


@pytest.mark.parametrize("side, distance_ms", [("after", 200), ("before", 2000), ("after", 1)])
def test_planted_kernel_moves_the_buckets_within_the_bound(tmp_path, side, distance_ms):
    """Bound: the serving path is min(g × B, P − B) per interval, so it moves by at most |Δg| × B,
    with |Δg| ≤ (T + d) ÷ kernel-active for a kernel the rule keeps (T the break threshold, d its
    duration) and 0 for one it excludes: to the cent here for 200 ms and 2 s, within 0.41 % of
    model compute for 1 ms."""
    base, document = baseline(), audit_with(planted(tmp_path, side, distance_ms * 1000.0))
    was, now = amounts(base), amounts(document)
    assert sum(now.values()) == sum(was.values())                      # conservation: the same bill
    bound = Decimal(repr((threshold_us(DEMO_TRACE) + STRAY_US) / float(base["profiles"][0]["kernel_active_ms"]) / 1000))
    assert abs(now["serving_path"] - was["serving_path"]) <= bound * was["model_compute"] + Decimal("0.01")
    assert now["model_compute"] == was["model_compute"]
    sensitivity = document["profiles"][0]["gap_sensitivity"]
    shift = next(d for d in document["reconciliation"]["drivers"] if d["name"] == "serving_gap")
    if distance_ms == 1:
        assert sensitivity["excluded_kernels"] == 0 and Decimal(shift["gap"]) == 0
        return
    assert now == was and sensitivity["excluded_kernels"] == 1
    assert Decimal(sensitivity["full_window"]) > Decimal(sensitivity["served_window"]) * 6
    # over the whole GPU window the serving path would take far more than the tolerance of the bill
    assert Decimal(shift["gap"]) > Decimal(document["reconciliation"]["tolerance"])
    reason = document["reconciliation"]["reason"]
    assert document["reconciliation"]["verdict"] == base["reconciliation"]["verdict"]
    assert f"serving gap g of chat over the whole GPU window would be {Decimal(sensitivity['full_window']):.4f}" in reason
    assert "more than the tolerance" in reason and f"{Decimal(shift['gap']):.2%}" in reason
    line = build_model(document).profiles[0].gap_sensitivity        # the report's kernel-profile facts
    assert line.startswith(f"{Decimal(sensitivity['full_window']):.2f} over the whole GPU window; left out of "
                           f"g's window: 1 kernel (0.005 ms kernel-active), {distance_ms + 0.005:,.1f} ms")
