"""Property: buckets + unattributed = the cost-basis total in scope, to the cent, for any line set."""
from __future__ import annotations

from decimal import Decimal

import pandas as pd
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from audit.audit_json import to_dict
from audit.collected import Collected
from audit.pipeline import audit_collected
from tests.builders import activity, frame, line, lines_frame, make_case, window

START, END = window("2026-09-01", "2026-09-02")
KINDS = ["gpu", "cpu_node", "lb", "logs", "unknown", "tax", "credit", "other_account", "unused", "purchase",
         "committed_gpu"]
money = st.decimals(min_value=Decimal("0.000001"), max_value=Decimal("5000"), places=6)


def build_line(i: int, kind: str, amount: Decimal, hour: int) -> dict:
    start = pd.Timestamp("2026-09-01T00:00:00Z") + pd.Timedelta(hours=hour)
    common = dict(start=start, end=start + pd.Timedelta(hours=1), billed_cost=amount, effective_cost=amount)
    if kind == "gpu":
        return line(i, resource_id=f"i-gpu{i % 2}", charge_description="$98 per On Demand Linux p5.48xlarge Instance Hour",
                    pricing_unit="Hours", pricing_quantity=Decimal(1), contracted_unit_price=amount, **common)
    if kind == "cpu_node":
        return line(i, resource_id="i-cpu", charge_description="On Demand Linux c7i.2xlarge Instance Hour",
                    pricing_unit="Hours", pricing_quantity=Decimal(1), **common)
    if kind == "lb":
        return line(i, service_name="Elastic Load Balancing", **common)
    if kind == "logs":
        return line(i, service_name="AmazonCloudWatch", **common)
    if kind == "unknown":
        return line(i, service_name="Acme Marketplace", **common)
    if kind == "tax":
        return line(i, charge_category="Tax", service_name="Tax", **common)
    if kind == "credit":
        return line(i, charge_category="Credit", billed_cost=-amount, effective_cost=-amount,
                    start=common["start"], end=common["end"])
    if kind == "unused":
        return line(i, commitment_discount_status="Unused", billed_cost=Decimal(0), effective_cost=amount,
                    commitment_discount_id="sp-1", start=common["start"], end=common["end"])
    if kind == "purchase":
        return line(i, charge_category="Purchase", charge_frequency="Recurring", commitment_discount_id="sp-1",
                    service_name="Savings Plans for AWS Compute usage", billed_cost=amount,
                    effective_cost=Decimal(0), start=common["start"], end=common["end"])
    if kind == "committed_gpu":
        return line(i, resource_id="i-gpu0", charge_description="Savings Plan covered p5.48xlarge Instance Hour",
                    pricing_unit="Hours", pricing_quantity=Decimal(1), contracted_unit_price=amount,
                    commitment_discount_id="sp-1", commitment_discount_status="Used", billed_cost=Decimal(0),
                    effective_cost=amount, start=common["start"], end=common["end"])
    return line(i, sub_account_id="222", **common)


def telemetry_frame() -> pd.DataFrame:
    rows = []
    for hour in range(24):
        ts = pd.Timestamp("2026-09-01T00:00:00Z") + pd.Timedelta(hours=hour)
        for gpu in range(8):
            if hour % 7 == 3 and gpu == 2:
                continue  # a missing sample
            pod = f"chat-{gpu}" if gpu < 5 else ("" if gpu < 7 else "rogue-1")
            rows.append({"node": "n0", "gpu": str(gpu), "ts": ts, "busy_fraction": (gpu * 0.11 + hour * 0.01) % 1,
                         "pod": pod, "namespace": "llm" if pod.startswith("chat") else ("x" if pod else "")})
    return activity(rows)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example([("gpu", Decimal("2.015761"), 0), ("gpu", Decimal("4984.866891"), 0), ("tax", Decimal("4.192348"), 0)],
         False, "effective")  # an exact half cent in scope (4991.075): the total is its own rounding
@given(st.lists(st.tuples(st.sampled_from(KINDS), money, st.integers(0, 23)), min_size=1, max_size=25),
       st.booleans(), st.sampled_from(["effective", "billed"]))
def test_buckets_sum_to_total_to_the_cent(items, with_profile, basis):
    rows = [build_line(i + 1, k, a, h) for i, (k, a, h) in enumerate(items)]
    if all(r["sub_account_id"] == "222" for r in rows):
        rows.append(build_line(len(rows) + 1, "lb", Decimal("1"), 0))
    frames = [frame("billing", "focus", {"lines": lines_frame(rows)})]
    nodes = pd.DataFrame([{"node": "n0", "provider_id": "aws:///z/i-gpu0", "resource_id": "i-gpu0", "instance_type": ""},
                          {"node": "c0", "provider_id": "aws:///z/i-cpu", "resource_id": "i-cpu", "instance_type": ""}])
    frames.append(frame("telemetry", "openmetrics", {"gpu_activity": telemetry_frame(), "node_info": nodes}))
    if with_profile:
        profile = pd.DataFrame([{"trace": "t", "device": "H100", "gpu_window_us": 110.0, "kernel_active_us": 100.0,
                                 "busy_us": 100.0, "idle_us": 10.0, "gap_ratio": 0.1, "gap_basis": "gpu_window",
                                 "kernels": 3, "sync_us": 0.0}])
        frames.append(frame("profiles", "kineto", {"profile": profile, "kernels": pd.DataFrame(),
                                                   "categories": pd.DataFrame()},
                            service="chat", requests=10))
    document = to_dict(audit_collected(make_case(basis=basis), Collected(tuple(frames))))
    buckets = document["buckets"]
    total = Decimal(document["total"])
    key = "effective_cost" if basis == "effective" else "billed_cost"
    in_scope = sum((r[key] for r in rows if r["sub_account_id"] != "222"), Decimal(0))
    outside = sum((r[key] for r in rows if r["sub_account_id"] == "222"), Decimal(0))
    # in scope and outside rounded once, together (METHOD §1, §5): each within a cent, adding up
    assert total + Decimal(document["outside_scope"]["amount"]) == (in_scope + outside).quantize(Decimal("0.01"))
    assert abs(total - in_scope) < Decimal("0.01")
    assert abs(Decimal(document["outside_scope"]["amount"]) - outside) < Decimal("0.01")
    assert sum(Decimal(b["amount"]) for b in buckets.values()) == total
    for b in buckets.values():
        assert sum((Decimal(p["amount"]) for p in b["parts"]), Decimal(0)) == Decimal(b["amount"])


def test_gpu_lines_of_a_resource_billing_no_gpu_time_are_unattributed_by_name():
    """A GPU node's Core line (telemetry sees its GPUs) with no GPU meter and no machine type: before,
    its 30.00 went to no part and the run stopped (``conservation broken: parts sum to 1, lines in
    scope to 31``); now it is unattributed (gpu_time_not_billed) and the fit names the resource."""
    core = line(1, resource_id="i-gpu0", charge_description="Instance Core running in Americas", pricing_unit="Hours",
                pricing_quantity=Decimal(8), billed_cost=Decimal(30), effective_cost=Decimal(30))
    rows = [core, build_line(2, "lb", Decimal("1"), 0)]
    nodes = pd.DataFrame([{"node": "n0", "provider_id": "aws:///z/i-gpu0", "resource_id": "i-gpu0", "instance_type": ""}])
    frames = (frame("billing", "focus", {"lines": lines_frame(rows)}),
              frame("telemetry", "openmetrics", {"gpu_activity": telemetry_frame(), "node_info": nodes}))
    document = to_dict(audit_collected(make_case(), Collected(frames)))
    assert document["total"] == "31.00"
    [part] = [p for p in document["buckets"]["unattributed"]["parts"] if p["name"] == "gpu_time_not_billed"]
    assert (part["amount"], part["gpu_hours"]) == ("30.00", "0.00")
    assert part["source"] == "GPU lines of FOCUS lines (billing-inline) with no GPU time (nodes n0)"
    [fit] = [m for m in document["fit"] if m["kind"] == "gpu_time_not_billed"]
    assert fit["nearest"] == ["i-gpu0"]
