"""The two walks of the GPU split agree on any bill (hypothesis): lines of instances, scale sets and
machines billed in parts, over whole, partial and out-of-window periods, with 50-digit money of
either sign, and telemetry that names some nodes and not others. The Python walk and the engine
walk in DuckDB give the same groups (money to 1E-30, time and GPUs exactly) and the same coverage.

Money to 1E-30, not always to the cent of each group: the engine sums a key's lines and divides
once, the Python walk divides line by line, and at 50 digits the two can end on either side of a
half cent (0.005 against 0.0050…01, found here). The audit rounds once, at the end, the sums of
many groups (audit.money.largest_remainder), so such a tie moves no reported figure unless the
whole bucket's sum sits on it."""
from __future__ import annotations

import decimal
from datetime import timedelta
from decimal import Decimal

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.gpusplit import GpuLines, GpuSplitter
from audit.money import CONTEXT
from audit.normalised import REQUEST_COLUMNS, empty_table
from audit.split_sql import run_duckdb
from tests.builders import activity, assert_same_split, gpu_line, lines_frame, make_case

H0 = pd.Timestamp("2026-09-01T00:00:00Z")
HOUR = timedelta(hours=1)
VMSS = "/subscriptions/S/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/gpu"
RESOURCES = ("i-1", "i-2", VMSS, "projects/p/zones/z/instances/a2-1", "")
TEXTS = ("$98.32 per On Demand Linux p5.48xlarge Instance Hour", "Nvidia Tesla A100 GPU running in Americas",
         "A2 Instance Core running in Americas", "NC24ads A100 v4")
NODES = {"i-1": ("n1",), VMSS.lower(): ("vm-0", "vm-1", "vm-2"), "a2-1": ("gke-a2-1",)}
TELEMETRY_NODES = ("n1", "vm-0", "vm-2", "gke-a2-1")

money = st.decimals(min_value=-10 ** 6, max_value=10 ** 6, allow_nan=False, allow_infinity=False, places=2) | \
    st.builds(lambda a, b: a / b, st.integers(-10 ** 6, 10 ** 6).map(Decimal), st.integers(1, 97).map(Decimal))


@st.composite
def bills(draw):
    rows = []
    for n in range(draw(st.integers(1, 25))):
        start = H0 + draw(st.integers(-3, 25)) * HOUR + draw(st.sampled_from([0, 30])) * timedelta(minutes=1)
        length = draw(st.sampled_from([HOUR / 2, HOUR, 2 * HOUR, 24 * HOUR]))
        quantity = draw(st.sampled_from([Decimal(0), Decimal(1), Decimal("1.5"), Decimal(2), Decimal(3), Decimal(24)]))
        net = draw(money)
        rows.append(gpu_line(n, resource_id=draw(st.sampled_from(RESOURCES)), start=start, end=start + length,
                             pricing_quantity=quantity, consumed_quantity=quantity,
                             gpus_per_instance=draw(st.sampled_from([0, 1, 8])),
                             charge_description=draw(st.sampled_from(TEXTS)), net=net,
                             pretax=draw(money), priced=draw(money),
                             instance_type=draw(st.sampled_from(["p5.48xlarge", ""]))))  # never null (schemas)
    acts = [{"node": node, "gpu": str(g), "ts": H0 + h * HOUR, "busy_fraction": draw(st.floats(0, 1)),
             "pod": pod, "namespace": "llm" if pod else ""}
            for node in TELEMETRY_NODES for h in range(draw(st.integers(0, 3)))
            for g in range(draw(st.integers(1, 3))) for pod in [draw(st.sampled_from(["", "chat-0", "etl-1"]))]]
    return rows, acts


def walked(rows, acts, engine: bool) -> GpuSplitter:
    case = make_case()
    splitter = GpuSplitter(case, case.services, activity(acts) if acts else activity([{"node": "x", "ts": H0,
                                                                                         "busy_fraction": 0.0}]).iloc[:0],
                           NODES, empty_table(REQUEST_COLUMNS), {}, 3600)
    lines = GpuLines(lines_frame(rows))
    if engine:
        splitter.add_lines_in_engine(lines, run_duckdb)
    else:
        splitter.add_lines(lines)
    return splitter


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(bills())
def test_the_engine_walk_gives_the_python_walks_split(bill):
    rows, acts = bill
    with decimal.localcontext(CONTEXT):
        python, engine = walked(rows, acts, False), walked(rows, acts, True)
    assert_same_split(engine, python, within=Decimal("1E-30"), ordered=False)
