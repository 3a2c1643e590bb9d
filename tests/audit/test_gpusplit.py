"""The GPU split's walk over gpu_compute lines (METHOD §3), on in-memory tables.

The split reads the lines as column lists rather than a dict per line, works out each billing
period's intervals once, and what telemetry says of a node's GPUs in an interval once for every line
that bills it; these tests pin what that must leave unchanged: the values it reads, sums added to in
the lines' order (at 50 digits the order can move the last digit), and the holders and money of
lines that share a node and interval.

Each test runs on each walk: the lines walked here (``python``), and placed and summed by the
engine query of :mod:`audit.split_sql` in DuckDB, and in its BigQuery and Trino renderings run back
on DuckDB (sqlglot): the same groups and coverage every way.
"""
from __future__ import annotations

import decimal
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from audit.gpusplit import GpuLines, GpuSplitter, split_gpus, taken_in_turn
from audit.ledger import NO_GPU_TIME, NO_SAMPLE, NOT_IN_TELEMETRY, UNALLOCATED, UNDECLARED, UNKNOWN
from audit.lines import resource_key, vm_key
from audit.mismatches import label_mismatches
from audit.money import CONTEXT
from audit.normalised import ACTIVITY_COLUMNS, REQUEST_COLUMNS, NodeMap, Telemetry, empty_table, scheduled_spans
from audit.table_rows import column_values
from tests.builders import activity, gpu_line, lines_frame, make_case, misfits_of, rendered_on_duckdb

H0 = pd.Timestamp("2026-09-01T00:00:00Z")
HOUR = timedelta(hours=1)


WALKS = ("python", "duckdb", "bigquery", "trino")
WALK = {"name": "python"}


@pytest.fixture(autouse=True)
def _audit_context():
    with decimal.localcontext(CONTEXT):
        yield


@pytest.fixture(autouse=True, params=WALKS)
def walk(request):
    """Which walk :func:`split` takes."""
    WALK["name"] = request.param
    yield request.param
    WALK["name"] = "python"


def split(rows: list[dict], acts: list[dict] | None = None, nodes_of=None, requests: pd.DataFrame | None = None,
          node_types=None, scheduled: frozenset = frozenset()):
    case = make_case()
    splitter = GpuSplitter(case, case.services, activity(acts) if acts else empty_table(ACTIVITY_COLUMNS),
                           nodes_of or {}, empty_table(REQUEST_COLUMNS) if requests is None else requests, {}, 3600,
                           node_types=node_types, scheduled=scheduled)
    lines = GpuLines(lines_frame(rows))
    if WALK["name"] == "python":
        splitter.add_lines(lines)
    else:
        splitter.add_lines_in_engine(lines, rendered_on_duckdb(WALK["name"]))
    return splitter


def test_columns_hold_what_records_held():
    """Arrow strings with a missing value, Decimals with None, NA and a numpy float, ints, datetimes:
    each column list equals what to_dict("records") gave, type for type."""
    frame = lines_frame([gpu_line(1), gpu_line(2, resource_id=None, net=None), gpu_line(3, net=np.float64(2.5)),
                      gpu_line(4, net=pd.NA, gpus_per_instance=4)])
    records = frame.to_dict("records")
    assert isinstance(frame["resource_id"].dtype, pd.StringDtype)
    for column in frame.columns:
        got = column_values(frame[column])
        want = [r[column] for r in records]
        assert [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in want], column


def test_an_object_columns_numpy_scalars_are_boxed_as_records_box_them():
    """numpy integers, floats, booleans, datetime64 and timedelta64 (numpy's timedelta64 is a signed
    integer: it must come back a Timedelta, not an int) and NA in one object column."""
    values = [np.int64(3), np.uint8(7), np.float32(1.5), np.float64("nan"), np.bool_(True),
              np.datetime64("2025-01-01T02:00", "ns"), np.timedelta64(5, "s"), pd.NA, None, Decimal("1.20"), "x"]
    column = pd.Series(values, dtype=object, name="v")
    want = [r["v"] for r in column.to_frame().to_dict("records")]
    got = column_values(column)
    assert [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in want]


def test_lines_share_their_billing_periods():
    rows = [gpu_line(1), gpu_line(2, start=H0 + HOUR, end=H0 + 2 * HOUR), gpu_line(3), gpu_line(4)]
    lines = GpuLines(lines_frame(rows))
    assert len(lines.periods) == 2
    assert [lines.periods[p] for p in lines.period] == [(r["start"], r["end"]) for r in rows]


def test_a_billing_only_line_goes_to_gpus_telemetry_never_names():
    splitter = split([gpu_line(1), gpu_line(2, start=H0 + HOUR, end=H0 + 2 * HOUR, net=Decimal("90"))])
    assert list(splitter.groups) == [(NOT_IN_TELEMETRY, H0.to_pydatetime()),
                                     (NOT_IN_TELEMETRY, (H0 + HOUR).to_pydatetime())]
    first, second = splitter.groups.values()
    assert (first.gpus, first.paid, first.gross, first.paid_seconds, first.busy_seconds) == (
        8, Decimal("98.32"), Decimal("98.32"), Decimal(8 * 3600), 0)
    assert second.paid == Decimal("90") and second.gross == Decimal("98.32")
    cover = splitter.coverage["i-1"]
    assert (cover.paid_seconds, cover.observed_seconds, cover.instance_type) == (16 * 3600, 0, "p5.48xlarge")


def test_sums_are_added_to_in_the_lines_order():
    """Per-GPU amounts of 50 digits whose sum rounds: the group holds the left-to-right sum in line
    order, which another order would not give."""
    amounts = [Decimal("1E+20"), Decimal("1." + "3" * 49), Decimal("-1E+20"), Decimal("0." + "7" * 49)]
    rows = [gpu_line(n, resource_id=f"i-{n}", gpus_per_instance=1, net=a) for n, a in enumerate(amounts)]
    in_order = Decimal(0)
    for a in amounts:
        in_order += a
    reordered = Decimal(0)
    for a in sorted(amounts):
        reordered += a
    assert in_order != reordered  # the case is one where order shows
    group = split(rows).groups[(NOT_IN_TELEMETRY, H0.to_pydatetime())]
    assert group.paid == in_order and group.gpus == 4


def test_lines_billing_one_node_and_interval_share_its_holders():
    """A GCP machine billed in parts: the GPU meter counts the GPU time, the core line adds money to
    the same GPU-intervals and no time (nor GPUs: each GPU counts once); both go to the same holders,
    GPU by GPU."""
    meter = gpu_line(1, resource_id="a2-1", gpus_per_instance=0, pricing_quantity=Decimal(2),
                     consumed_quantity=Decimal(2), charge_description="Nvidia Tesla A100 GPU running in Americas",
                     net=Decimal("6"), pretax=Decimal("6"), priced=Decimal("6"))
    cores = gpu_line(2, resource_id="a2-1", gpus_per_instance=0, pricing_quantity=Decimal(24),
                     consumed_quantity=Decimal(24), charge_description="A2 Instance Core running in Americas",
                     net=Decimal("0.8"), pretax=Decimal("0.8"), priced=Decimal("0.8"))
    acts = [{"node": "gke-a2-1", "gpu": "0", "ts": H0, "busy_fraction": 0.25, "pod": "chat-0", "namespace": "llm"},
            {"node": "gke-a2-1", "gpu": "1", "ts": H0, "busy_fraction": 0.5, "pod": "", "namespace": ""}]
    splitter = split([meter, cores], acts, {"a2-1": ("gke-a2-1",)})
    ts = H0.to_pydatetime()
    chat, free = splitter.groups[("chat", ts)], splitter.groups[(UNALLOCATED, ts)]
    assert (chat.gpus, chat.paid, chat.paid_seconds, chat.busy_seconds) == (1, Decimal("3.4"), 3600, 900)
    assert chat.busy == Decimal("3.4") * Decimal("0.25") and chat.pods == {"chat-0"}
    assert (free.gpus, free.paid, free.paid_seconds, free.busy_seconds) == (1, Decimal("3.4"), 3600, 1800)
    assert set(splitter.groups) == {("chat", ts), (UNALLOCATED, ts)}
    cover = splitter.coverage["a2-1"]
    assert (cover.node, cover.paid_seconds, cover.observed_seconds) == ("gke-a2-1", 7200, 7200)


def test_a_line_over_part_intervals_spreads_by_overlap():
    rows = [gpu_line(1, start=H0 + HOUR / 2, end=H0 + 2 * HOUR, pricing_quantity=Decimal("1.5"),
                     consumed_quantity=Decimal("1.5"), net=Decimal("147.48"))]
    groups = split(rows).groups
    first, second = groups[(NOT_IN_TELEMETRY, H0.to_pydatetime())], groups[(NOT_IN_TELEMETRY, (H0 + HOUR).to_pydatetime())]
    assert (first.paid_seconds, second.paid_seconds) == (8 * 1800, 8 * 3600)
    assert abs(first.paid - Decimal("49.16")) < Decimal("1E-45") and abs(second.paid - Decimal("98.32")) < Decimal("1E-45")


def test_a_scale_set_line_spreads_over_its_instances_nodes():
    """Three instance-hours of a one-GPU scale set over one hour: three GPU-intervals, one per node
    (the third node unnamed), each a third of the line; a pod no service declares is undeclared."""
    rows = [gpu_line(1, resource_id="/subscriptions/S/vmss-1", gpus_per_instance=1, pricing_quantity=Decimal(3),
                     consumed_quantity=Decimal(3), net=Decimal("3.3"))]
    acts = [{"node": "vmss-0", "gpu": "0", "ts": H0, "busy_fraction": 0.5, "pod": "etl-0", "namespace": "batch"}]
    splitter = split(rows, acts, {"/subscriptions/s/vmss-1": ("vmss-0", "vmss-1")})
    ts = H0.to_pydatetime()
    undeclared, unseen = splitter.groups[(UNDECLARED, ts)], splitter.groups[(NOT_IN_TELEMETRY, ts)]
    assert (undeclared.gpus, undeclared.paid, undeclared.nodes) == (1, Decimal("1.1"), {"vmss-0"})
    assert (unseen.gpus, unseen.paid, unseen.nodes) == (2, Decimal("2.2"), {"vmss-1"})
    assert splitter.coverage["/subscriptions/s/vmss-1"].node == "vmss-0, vmss-1"


def test_a_scale_set_billed_a_row_per_vm_puts_each_row_on_a_node_of_its_own():
    """A cost details export bills a scale set one row per VM and day; a row that does not name its
    VM bills one instance of the set. Two such rows of a two-node set (an 8-GPU pod on one, nobody
    on the other) go one to each node, in turn, never both to the first: before, the idle node's
    money and time were counted on the busy one."""
    common = {"resource_id": "/subscriptions/S/vmss-1", "end": H0 + 24 * HOUR, "pricing_quantity": Decimal(24),
              "consumed_quantity": Decimal(24), "net": Decimal("2400"), "pretax": Decimal("2400"),
              "priced": Decimal("2400")}
    rows = [gpu_line(1, **common), gpu_line(2, **common)]
    acts = [{"node": "vmss-0", "gpu": str(g), "ts": H0 + h * HOUR, "busy_fraction": 0.5, "pod": "etl-0",
             "namespace": "batch"} for g in range(8) for h in range(24)]
    splitter = split(rows, acts, {"/subscriptions/s/vmss-1": ("vmss-0", "vmss-1")})
    ts = H0.to_pydatetime()
    undeclared, unseen = splitter.groups[(UNDECLARED, ts)], splitter.groups[(NOT_IN_TELEMETRY, ts)]
    assert (undeclared.gpus, undeclared.paid, undeclared.nodes) == (8, Decimal(100), {"vmss-0"})
    assert (unseen.gpus, unseen.paid, unseen.nodes) == (8, Decimal(100), {"vmss-1"})
    assert splitter.coverage["/subscriptions/s/vmss-1"].node == "vmss-0, vmss-1"


def test_taken_in_turn_walks_the_set_and_wraps():
    known = ("a", "b", "c")
    assert [taken_in_turn(known, 1, t) for t in range(4)] == [["a"], ["b"], ["c"], ["a"]]
    assert taken_in_turn(known, 2, 1) == ["c", "a"]
    assert taken_in_turn(known, 3, 5) == ["a", "b", "c"]  # a line of the whole set takes it whole
    assert taken_in_turn(known, 4, 0) == ["a", "b", "c", ""]  # more instances than nodes named
    assert taken_in_turn((), 1, 3) == [""]


def test_telemetry_naming_more_gpus_than_billed_is_noted_once():
    acts = [{"node": "n1", "gpu": str(g), "ts": H0, "busy_fraction": 0.5, "pod": "chat-0", "namespace": "llm"}
            for g in range(3)]
    rows = [gpu_line(1, gpus_per_instance=2), gpu_line(2, gpus_per_instance=2, net=Decimal("1"))]
    splitter = split(rows, acts, {"i-1": ("n1",)})
    assert splitter.extra_gpus == {"n1"}
    chat = splitter.groups[("chat", H0.to_pydatetime())]
    # the two lines bill 4 GPU-hours of the node's 2 GPUs in one hour: chat holds its 2 GPUs (not 4) and
    # half of each line's money; the other half is beyond the GPUs (audit/gpu_over.py), unallocated
    assert (chat.gpus, chat.paid) == (2, Decimal("49.66"))
    assert splitter.groups[(UNALLOCATED, H0.to_pydatetime())].paid == Decimal("49.66")


def test_an_hour_billed_twice_is_gpu_time_beyond_the_gpus_named_and_unallocated():
    """A CUR row appended again with another cost (11.11) and its usage moved to an hour already
    billed: 16 GPU-hours of an 8-GPU node in one hour. Before: chat held 16 GPUs that hour, its paid
    GPU-hours and the node's observed ones rose by 8 (24 and 24 of 24 paid), nothing said. Now: the
    node's 8 GPUs are observed once; half of each line's GPU time and money (the lines' mean) is
    beyond the GPUs, unallocated and unobserved, and the resource is named with its lines."""
    acts = [{"node": "n1", "gpu": str(g), "ts": H0 + h * HOUR, "busy_fraction": 0.5, "pod": "chat-0",
             "namespace": "llm"} for g in range(8) for h in range(2)]
    rows = [gpu_line(1), gpu_line(2, start=H0 + HOUR, end=H0 + 2 * HOUR),
            gpu_line(3, start=H0 + HOUR, end=H0 + 2 * HOUR, net=Decimal("11.11"))]
    splitter = split(rows, acts, {"i-1": ("n1",)})
    cover, hour = splitter.coverage["i-1"], (H0 + HOUR).to_pydatetime()
    assert (cover.paid_seconds / 3600, cover.observed_seconds / 3600) == (24, 16)
    chat, free = splitter.groups[("chat", hour)], splitter.groups[(UNALLOCATED, hour)]
    assert (chat.gpus, chat.paid, chat.paid_seconds / 3600) == (8, Decimal("54.715"), 8)
    assert (free.gpus, free.paid, free.paid_seconds / 3600, free.types, free.nodes) == (
        0, Decimal("54.715"), 8, {}, {"n1"})
    assert splitter.groups[("chat", H0.to_pydatetime())].paid == Decimal("98.32")
    [misfit] = misfits_of(splitter.misfits, "gpu_time_over_capacity")
    assert (misfit.nearest, misfit.message) == (("i-1",), (
        "1 GPU resource(s) bill more GPU time in an interval than their GPUs can give (8 GPU-hours, 54.72 USD "
        "beyond): i-1 (8 GPUs, node n1): 1 interval(s): 2026-09-01T01:00Z (16 GPU-hours billed, at most 8); "
        "8 GPU-hours and 54.72 USD beyond its GPUs; lines cur.csv:2 (2026-09-01T01:00Z–2026-09-01T02:00Z), "
        "cur.csv:3 (2026-09-01T01:00Z–2026-09-01T02:00Z). The GPU time beyond the GPUs is paid, not observed, "
        "and no workload held it: with its share of each line's money (every line of a full interval by the "
        "same share) it is platform overhead (unallocated), not the time of the GPUs' holders."))


def test_lines_that_share_an_interval_within_its_gpus_are_not_beyond_them():
    """Two half hours of one instance and a scale set's two VM rows of an hour on three nodes overlap
    in time but fit their GPUs: nothing is beyond them, and chat keeps every line's money."""
    acts = [{"node": node, "gpu": str(g), "ts": H0, "busy_fraction": 0.5, "pod": "chat-0", "namespace": "llm"}
            for node in ("n1", "vm-0", "vm-1") for g in range(8)]
    vmss = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachinescalesets/gpu"
    rows = [gpu_line(1, end=H0 + HOUR / 2, pricing_quantity=Decimal("0.5"), consumed_quantity=Decimal("0.5")),
            gpu_line(2, start=H0 + HOUR / 2, pricing_quantity=Decimal("0.5"), consumed_quantity=Decimal("0.5")),
            gpu_line(3, resource_id=vmss), gpu_line(4, resource_id=vmss)]
    splitter = split(rows, acts, {"i-1": ("n1",), vmss: ("vm-0", "vm-1", "vm-2")})
    assert not misfits_of(splitter.misfits, "gpu_time_over_capacity")
    assert splitter.groups[("chat", H0.to_pydatetime())].paid == 4 * Decimal("98.32")
    assert (UNALLOCATED, H0.to_pydatetime()) not in splitter.groups


def test_lines_that_bill_one_node_in_an_interval_count_its_gpus_once():
    """A node resized mid-hour: half an hour as a g6e.12xlarge (4 GPUs), half as a g6e.48xlarge (8),
    chat holding the same 4 GPUs throughout. Before: chat held 8 GPUs that hour (4 per line), 8 of
    the resource's type (its coverage's, the first line's). Now: 4, each counted once; its paid GPU
    time the two half hours (4 GPU-hours)."""
    acts = [{"node": "n1", "gpu": str(g), "ts": H0, "busy_fraction": 0.5, "pod": "chat-0", "namespace": "llm"}
            for g in range(4)]
    half = {"pricing_quantity": Decimal("0.5"), "consumed_quantity": Decimal("0.5")}
    rows = [gpu_line(1, end=H0 + HOUR / 2, instance_type="g6e.12xlarge", gpus_per_instance=4, **half),
            gpu_line(2, start=H0 + HOUR / 2, instance_type="g6e.48xlarge", gpus_per_instance=8, **half)]
    chat = split(rows, acts, {"i-1": ("n1",)}).groups[("chat", H0.to_pydatetime())]
    assert (chat.gpus, chat.types, chat.paid_seconds / 3600) == (4, {"g6e.12xlarge": 4}, 4)


def test_a_scale_sets_rows_beyond_its_vms_are_weighed_across_its_nodes():
    """Three hourly rows of an 8-GPU scale set that telemetry shows as two VMs (no VM
    named): 24 GPU-hours billed where 2 × 8 fit. Before: the warning weighed the one full node,
    "(16 GPU-hours billed, at most 8)", and headed the resource "(8 GPUs, node vm-0, vm-1)" with the
    money right. Now each interval is the resource's: 24 billed on its nodes, at most 16, the GPUs
    as per node × nodes, the 8 GPU-hours and 98.32 USD beyond unchanged."""
    acts = [{"node": node, "gpu": str(g), "ts": H0, "busy_fraction": 0.5, "pod": "chat-0", "namespace": "llm"}
            for node in ("vm-0", "vm-1") for g in range(8)]
    vmss = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachinescalesets/gpu"
    splitter = split([gpu_line(n, resource_id=vmss) for n in (1, 2, 3)], acts, {vmss: ("vm-0", "vm-1")})
    assert splitter.groups[(UNALLOCATED, H0.to_pydatetime())].paid == Decimal("98.32")
    [misfit] = misfits_of(splitter.misfits, "gpu_time_over_capacity")
    assert misfit.message == (
        "1 GPU resource(s) bill more GPU time in an interval than their GPUs can give (8 GPU-hours, 98.32 USD "
        "beyond): /subscriptions/s/resourc…compute/virtualmachinescalesets/gpu (16 GPUs: 8 a node "
        "× 2 nodes, nodes vm-0, vm-1): 1 interval(s): 2026-09-01T00:00Z (24 GPU-hours billed, at most 16); "
        "8 GPU-hours and 98.32 USD beyond its GPUs; lines cur.csv:1 (2026-09-01T00:00Z–2026-09-01T01:00Z), "
        "cur.csv:2 (2026-09-01T00:00Z–2026-09-01T01:00Z), cur.csv:3 (2026-09-01T00:00Z–2026-09-01T01:00Z). "
        "The GPU time beyond the GPUs is paid, not observed, and no workload held it: with its share of each "
        "line's money (every line of a full interval by the same share) it is platform overhead (unallocated), "
        "not the time of the GPUs' holders.")


def test_a_summed_line_billing_a_full_interval_says_it_is_summed():
    """A FOCUS reader's line summed of an instance's 24 hourly rows (line_count 24, the id of its first
    row, the run's day) and a row appended for 03:00 at 30.00. Before: the warning named
    "focus_aws.csv:1 (2026-09-01T00:00Z–2026-09-02T00:00Z)", as if one row billed the day. Now it
    says the line is a sum: "focus_aws.csv:1 and the 23 rows summed with it (…)"; the appended row
    is named by its own id and hour."""
    acts = [{"node": "n1", "gpu": str(g), "ts": H0 + h * HOUR, "busy_fraction": 0.5, "pod": "chat-0",
             "namespace": "llm"} for g in range(8) for h in range(24)]
    day = {"end": H0 + 24 * HOUR, "pricing_quantity": Decimal(24), "consumed_quantity": Decimal(24),
           "net": Decimal("2359.68"), "pretax": Decimal("2359.68"), "priced": Decimal("2359.68")}
    rows = [gpu_line(1, line_id="focus_aws.csv:1", line_count=24, **day),
            gpu_line(365, line_id="focus_aws.csv:365", line_count=1, start=H0 + 3 * HOUR, end=H0 + 4 * HOUR,
                     net=Decimal("30.00"), pretax=Decimal("30.00"), priced=Decimal("30.00"))]
    splitter = split(rows, acts, {"i-1": ("n1",)})
    [misfit] = misfits_of(splitter.misfits, "gpu_time_over_capacity")
    assert misfit.message == (
        "1 GPU resource(s) bill more GPU time in an interval than their GPUs can give (8 GPU-hours, 64.16 USD "
        "beyond): i-1 (8 GPUs, node n1): 1 interval(s): 2026-09-01T03:00Z (16 GPU-hours billed, at most 8); "
        "8 GPU-hours and 64.16 USD beyond its GPUs; lines focus_aws.csv:1 and the 23 rows summed with it "
        "(2026-09-01T00:00Z–2026-09-02T00:00Z), focus_aws.csv:365 (2026-09-01T03:00Z–2026-09-01T04:00Z). "
        "The GPU time beyond the GPUs is paid, not observed, and no workload held it: with its share of each "
        "line's money (every line of a full interval by the same share) it is platform overhead (unallocated), "
        "not the time of the GPUs' holders.")


def test_a_line_with_no_gpu_bills_no_gpu_interval_and_its_money_is_unattributed_by_name():
    """A Core line whose resource no line bills GPU time for (no meter, no machine type): before, its
    98.32 went to no group, and the run stopped on a broken conservation; now it is the
    gpu_time_not_billed holder's, with no GPU time, and the resource is named."""
    splitter = split([gpu_line(1, gpus_per_instance=0, charge_description="A2 Instance Core running in Americas")])
    [group] = splitter.groups.values()
    assert (group.holder, group.paid, group.gross, group.gpus, group.paid_seconds) == (
        NO_GPU_TIME, Decimal("98.32"), Decimal("98.32"), 0, 0)
    assert splitter.coverage["i-1"].paid_seconds == 0
    [misfit] = misfits_of(splitter.misfits, "gpu_time_not_billed")
    assert (misfit.nearest, misfit.message) == (("i-1",), (
        "1 GPU resource(s) have GPU lines but no line that bills GPU time (no GPU meter, no line naming an "
        "instance or machine type with GPUs in the shipped table): i-1 (machine p5.48xlarge): 1 line(s), 98.32 USD. How many GPUs "
        "their 98.32 USD paid for, and for how long, is not in the bill: it is unattributed "
        "(gpu_time_not_billed), in no GPU-interval. The GPU meter's lines, or the machine type (GCP machine_spec) "
        "on the lines, would place it."))


def g2_part(n: int, description: str, net: str, **over) -> dict:
    """An hour of a g2-standard-48 billed in parts (machine_spec g2-standard-48, 48 vCPU-hours of cores)."""
    return gpu_line(n, **{"resource_id": "g2-1", "instance_type": "", "machine_type": "g2-standard-48",
                          "gpus_per_instance": 0, "pricing_quantity": Decimal(48), "consumed_quantity": Decimal(48),
                          "charge_description": f"G2 Instance {description} running in Americas", "net": Decimal(net),
                          "pretax": Decimal(net), "priced": Decimal(net), **over})


def test_a_g2_core_line_with_no_gpu_meter_bills_its_machines_four_l4s():
    """A g2-standard-48 whose L4s are billed in its Core line (no GPU meter line): the Core line's 48
    vCPU-hours are one instance-hour, 4 GPU-hours; the Core and Ram money is the GPUs'. Before, the
    resource had no GPU count and both lines' money went nowhere."""
    acts = [{"node": "gke-g2-1", "gpu": str(g), "ts": H0, "busy_fraction": 0.5, "pod": "", "namespace": ""}
            for g in range(4)]
    splitter = split([g2_part(1, "Core", "6"), g2_part(2, "Ram", "2", pricing_quantity=Decimal(192),
                                                       consumed_quantity=Decimal(192))], acts, {"g2-1": ("gke-g2-1",)})
    [(key, group)] = splitter.groups.items()
    assert key == (UNKNOWN, H0.to_pydatetime())  # no pod label, no scheduler request
    assert (group.gpus, group.paid, group.paid_seconds, group.busy_seconds) == (4, Decimal(8), 4 * 3600, 2 * 3600)
    cover = splitter.coverage["g2-1"]
    assert (cover.gpus, cover.paid_seconds, cover.instance_type) == (4, 4 * 3600, "g2-standard-48")
    assert not misfits_of(splitter.misfits, "gpu_time_not_billed")


def test_a_machine_type_only_telemetry_reports_is_named_as_the_nearest():
    """A g2's Core line without its machine_spec label (no GPU meter): the node's telemetry label says
    g2-standard-48. Before: "(no instance or machine type with GPUs in the shipped table): g2-1
    (machine g2-standard-48, node gke-g2-1)", a type in the table. Now the bill is said to name none,
    and telemetry's type for the node is the nearest."""
    splitter = split([g2_part(1, "Core", "6", machine_type="")], None, {"g2-1": ("gke-g2-1",)},
                     node_types={"gke-g2-1": "g2-standard-48"})
    [misfit] = misfits_of(splitter.misfits, "gpu_time_not_billed")
    assert misfit.message.startswith(
        "1 GPU resource(s) have GPU lines but no line that bills GPU time (no GPU meter, no line naming an "
        "instance or machine type with GPUs in the shipped table): g2-1 (the bill names no machine type; "
        "telemetry reports node gke-g2-1 as g2-standard-48, the nearest): 1 line(s), 6.00 USD. ")


def test_a_g2_core_line_beside_its_gpu_meter_bills_no_gpu_time():
    """With the L4 meter line in the same hour, the meter bills the GPU time (4 GPU-hours) and the
    Core line only money, as before; a Core line of 24 vCPU-hours (half an hour) with no meter bills
    half the hour's GPU time."""
    meter = gpu_line(3, resource_id="g2-1", instance_type="", machine_type="g2-standard-48", gpus_per_instance=0,
                     pricing_quantity=Decimal(4), consumed_quantity=Decimal(4),
                     charge_description="Nvidia L4 GPU running in Americas", net=Decimal("2.24"),
                     pretax=Decimal("2.24"), priced=Decimal("2.24"))
    both = split([g2_part(1, "Core", "6"), meter], None, {"g2-1": ("gke-g2-1",)})
    assert both.coverage["g2-1"].paid_seconds == 4 * 3600
    assert [g.paid for g in both.groups.values()] == [Decimal("8.24")]
    half = split([g2_part(1, "Core", "3", pricing_quantity=Decimal(24), consumed_quantity=Decimal(24))], None,
                 {"g2-1": ("gke-g2-1",)})
    assert half.coverage["g2-1"].paid_seconds == 2 * 3600


def a3_part(n: int, description: str, quantity: int, net: str, hour: int, resource: str = "a3-1") -> dict:
    """An hour of an a3-highgpu-8g billed in parts (machine_spec a3-highgpu-8g): its Core (208 vCPU-hours),
    Ram or H100 meter (8 GPU-hours) line."""
    return gpu_line(n, resource_id=resource, instance_type="", machine_type="a3-highgpu-8g", gpus_per_instance=0,
                    start=H0 + hour * HOUR, end=H0 + (hour + 1) * HOUR, pricing_quantity=Decimal(quantity),
                    consumed_quantity=Decimal(quantity), charge_description=f"{description} running in Americas",
                    net=Decimal(net), pretax=Decimal(net), priced=Decimal(net))


def test_an_a3_core_line_in_an_hour_its_gpu_meter_misses_bills_no_gpu_time():
    """An a3-highgpu-8g whose H100s are billed on their own meter, the meter line missing in hour 1 (its
    Core and Ram lines there): the machine bills its GPUs apart, so hour 1's Core line is no GPU time.
    Before, the Core line was read as the machine's 8 GPUs for hour 1: 16 GPU-hours, not the 8 billed
    (the GKE seed 10401 bill with 3 meter hours removed: native 480 paid GPU-hours, its FOCUS twin 456)."""
    rows = [a3_part(1, "Nvidia H100 80GB GPU", 8, "80", 0), a3_part(2, "A3 Instance Core", 208, "10", 0),
            a3_part(3, "A3 Instance Ram", 1872, "5", 0), a3_part(4, "A3 Instance Core", 208, "10", 1),
            a3_part(5, "A3 Instance Ram", 1872, "5", 1)]
    splitter = split(rows, None, {"a3-1": ("gke-a3-1",)})
    cover = splitter.coverage["a3-1"]
    assert (cover.gpus, cover.paid_seconds) == (8, 8 * 3600)
    assert sum((g.paid for g in splitter.groups.values()), Decimal(0)) == Decimal(110)


def test_split_gpus_reads_only_gpu_compute_lines():
    rows = [gpu_line(1), gpu_line(2, resource_class="storage", net=Decimal("5"))]
    case = make_case()
    tele = Telemetry(empty_table(ACTIVITY_COLUMNS), empty_table(["node"]), empty_table(REQUEST_COLUMNS),
                     empty_table(["namespace", "pod", "model_name"]), empty_table([]), 3600)
    found = split_gpus(case, lines_frame(rows), tele, NodeMap({}, frozenset(), frozenset()))
    assert [g.paid for g in found.groups.values()] == [Decimal("98.32")]
    assert list(found.coverage) == ["i-1"] and found.extra_gpus == frozenset()


def test_a_scale_set_vm_is_keyed_by_its_arm_id_on_both_sides():
    """The node of ``azure://…/virtualMachines/3`` and a cost details row for VM 3 of the set meet."""
    arm = "/subscriptions/S/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-x-vmss"
    assert vm_key(f"azure://{arm}/virtualMachines/3") == resource_key(f"{arm}/virtualMachines/3") == (
        f"{arm}/virtualMachines/3".lower())
    assert vm_key(f"azure://{arm}") == vm_key("aws:///us-east-1a/i-0abc") == vm_key("") == ""


def test_unmeasured_gpus_take_the_scheduler_s_requests_in_turn():
    """GPUs no valid sample measures (an exporter's out-of-range values), then GPUs with no sample:
    each takes a GPU the scheduler's requests still place, and names its pod's declared service;
    an undeclared pod's, or one no request places, names none. Before, every unmeasured GPU was
    unattributed under no service, and chat's unit costs said they left out nothing."""
    from collections import namedtuple

    Req = namedtuple("Req", "namespace pod gpus")
    case = make_case()  # chat: namespace llm
    me = GpuSplitter(case, case.services, empty_table(ACTIVITY_COLUMNS), {}, empty_table(REQUEST_COLUMNS), {}, 3600)
    left = [Req("llm", "chat-0", 1), Req("llm", "chat-1", 2), Req("lab", "nb-0", 1)]
    first = me._unmeasured("__no_valid_sample__", 1, left)
    rest = me._unmeasured("__no_sample__", 5, left)
    assert [(h, n, pod, owner) for h, n, _, _, pod, owner in first] == [("__no_valid_sample__", 1, "chat-0", "chat")]
    assert [(h, n, pod, owner) for h, n, _, _, pod, owner in rest] == [
        ("__no_sample__", 2, "chat-1", "chat"), ("__no_sample__", 1, "nb-0", ""), ("__no_sample__", 2, "", "")]
    assert left == []


def test_a_line_that_bills_part_of_its_period_pays_for_that_part_of_the_gpu_time():
    """A g5 instance that ran 18 minutes of the hour is billed 0.3 instance-hours over a one-hour
    period (the FOCUS sample's partial hours): it paid 0.3 GPU-hours, not 1 (before: 1.00, and its
    GPU-second priced at 0.49 an hour), so its GPU-seconds are 0.3 × 3600 and the money stays whole.
    A GCP GPU meter of 0.5 GPU-hours in an hour bills one GPU for half of it (before: no GPU, so
    its money reached no GPU-interval)."""
    g5 = gpu_line(1, resource_id="i-g5", instance_type="g5.4xlarge", gpus_per_instance=1,
                  pricing_quantity=Decimal("0.3"), consumed_quantity=Decimal("0.3"), net=Decimal("0.4872"),
                  pretax=Decimal("0.4872"), priced=Decimal("0.4872"))
    meter = gpu_line(2, resource_id="g2-1", instance_type="", gpus_per_instance=0, pricing_quantity=Decimal("0.5"),
                     consumed_quantity=Decimal("0.5"), charge_description="Nvidia L4 GPU running in Americas",
                     net=Decimal("0.35"), pretax=Decimal("0.35"), priced=Decimal("0.35"))
    splitter = split([g5, meter])
    assert splitter.coverage["i-g5"].paid_seconds == Decimal("1080.0")
    assert splitter.coverage["g2-1"].paid_seconds == Decimal("1800.0")
    group = splitter.groups[(NOT_IN_TELEMETRY, H0.to_pydatetime())]
    assert (group.gpus, group.paid, group.paid_seconds) == (2, Decimal("0.8372"), Decimal("2880.0"))
    assert group.paid / group.paid_seconds * 3600 == Decimal("1.0465")  # (0.4872 + 0.35) / 0.8 GPU-hours


def test_a_vm_resized_in_the_window_spreads_each_line_over_the_gpus_it_bills():
    """An Azure VM resized mid-day: 12 h of NC24ads_A100_v4 (1 GPU, 26.4456) and 12 h of
    NC48ads_A100_v4 (2 GPUs, 88.152) on two daily rows of one VM. Before: both lines were spread over
    the 2 GPUs the larger gives (GPU 0 got 13.2228 + 44.076, GPU 1 as much, 48 GPU-hours paid). Now each
    line over its own GPUs: GPU 0 (chat's) gets 26.4456 + 88.152 / 2 = 70.5216, GPU 1 (no sample)
    44.076, and 12 × 1 + 12 × 2 = 36 GPU-hours are paid; nothing is beyond the VM's 2 GPUs."""
    day = {"end": H0 + 24 * HOUR, "pricing_quantity": Decimal(12), "consumed_quantity": Decimal(12)}
    rows = [gpu_line(1, resource_id="vm-2", instance_type="Standard_NC24ads_A100_v4", gpus_per_instance=1,
                     net=Decimal("26.4456"), **day),
            gpu_line(2, resource_id="vm-2", instance_type="Standard_NC48ads_A100_v4", gpus_per_instance=2,
                     net=Decimal("88.152"), **day)]
    acts = [{"node": "n2", "gpu": "0", "ts": H0 + h * HOUR, "busy_fraction": 0.5, "pod": "chat-0", "namespace": "llm"}
            for h in range(24)]
    splitter = split(rows, acts, {"vm-2": ("n2",)})
    chat = [g for (holder, _), g in splitter.groups.items() if holder == "chat"]
    unseen = [g for (holder, _), g in splitter.groups.items() if holder == NO_SAMPLE]
    assert (len(chat), len(unseen)) == (24, 24)
    assert sum(g.paid for g in chat) == Decimal("70.5216") and sum(g.paid for g in unseen) == Decimal("44.076")
    assert (sum(g.paid_seconds for g in chat) / 3600, sum(g.paid_seconds for g in unseen) / 3600) == (24, 12)
    cover = splitter.coverage["vm-2"]
    assert (cover.paid_seconds / 3600, cover.observed_seconds / 3600, cover.gpus) == (36, 24, 2)
    assert not misfits_of(splitter.misfits, "gpu_time_over_capacity")


def test_a_gpu_meter_billing_part_of_its_machines_hour_pays_for_that_part_of_each_gpu():
    """A GCP machine of 8 GPUs that started at 00:30 (or whose hour a negative usage row corrected
    to half): its GPU meter bills 4 GPU-hours in hour 00 and 8 in hour 01, its core line hour 00.
    Before: the meter's GPU count (4 GPU-hours ÷ 1 h) gave way to the machine's 8 for the whole hour:
    8 GPU-hours paid for 4 billed (16 in all). Now each of its 8 GPUs paid for half of hour 00, as a
    request that ran half an interval holds half a GPU-interval: 12 GPU-hours in all, the money
    whole and spread over the 8 GPUs."""
    meter = {"resource_id": "a3-1", "instance_type": "", "gpus_per_instance": 0,
             "charge_description": "Nvidia H100 80GB GPU running in Americas"}
    rows = [gpu_line(1, pricing_quantity=Decimal(4), consumed_quantity=Decimal(4), net=Decimal("39.186204"), **meter),
            gpu_line(2, **{**meter, "charge_description": "A3 Instance Core running in Americas"},
                     pricing_quantity=Decimal(104), consumed_quantity=Decimal(104), net=Decimal("2.5314925")),
            gpu_line(3, start=H0 + HOUR, end=H0 + 2 * HOUR, pricing_quantity=Decimal(8), consumed_quantity=Decimal(8),
                     net=Decimal("78.372408"), **meter)]
    acts = [{"node": "gke-a3-1", "gpu": str(g), "ts": H0 + h * HOUR, "busy_fraction": 0.5, "pod": "chat-0",
             "namespace": "llm"} for g in range(8) for h in range(2)]
    splitter = split(rows, acts, {"a3-1": ("gke-a3-1",)})
    first, second = splitter.groups[("chat", H0.to_pydatetime())], splitter.groups[("chat", (H0 + HOUR).to_pydatetime())]
    assert (first.gpus, first.paid, first.paid_seconds / 3600) == (8, Decimal("41.7176965"), 4)
    assert (second.gpus, second.paid, second.paid_seconds / 3600) == (8, Decimal("78.372408"), 8)
    cover = splitter.coverage["a3-1"]
    assert (cover.paid_seconds / 3600, cover.observed_seconds / 3600, cover.gpus) == (12, 12, 8)
    assert not splitter.misfits


def test_a_machine_billed_by_two_gpu_meters_in_an_hour_keeps_its_machine_s_gpus():
    """A g2-standard-48 (4 L4, its machine_spec) billed in hour 00 by two L4 meters: 1 GPU-hour on the
    Spot SKU (0.22) and 3 on the on-demand one (1.68012). Before: the GPU count came from the meters,
    the most one line gives (3 GPU-hours ÷ 1 h): the machine had 3 GPUs, the Spot hour spread over
    them as a third of each, and the 4th GPU (unlabelled: unallocated) paid for nothing. Now its 4 GPUs are the
    machine type's: the two lines' 4 GPU-hours are the hour of each, and their 1.90012 is spread over
    the same 4 GPUs, 0.47503 each: chat's 3 hold 1.42509, the unlabelled one 0.47503. Without the
    machine_spec (a FOCUS export), the period's meter SKUs add up to the same 4 GPUs; a row of one SKU
    billed twice does not (3 GPU-hours twice: 3 GPUs, and GPU time beyond them, named)."""
    meter = {"resource_id": "g2-1", "instance_type": "", "machine_type": "g2-standard-48", "gpus_per_instance": 0}
    rows = [gpu_line(1, **meter, pricing_quantity=Decimal(1), consumed_quantity=Decimal(1), net=Decimal("0.22"),
                     pretax=Decimal("0.22"), priced=Decimal("0.22"),
                     charge_description="Spot Preemptible Nvidia L4 GPU running in Americas"),
            gpu_line(2, **meter, pricing_quantity=Decimal(3), consumed_quantity=Decimal(3), net=Decimal("1.68012"),
                     pretax=Decimal("1.68012"), priced=Decimal("1.68012"),
                     charge_description="Nvidia L4 GPU running in Americas")]
    acts = [{"node": "gke-g2-1", "gpu": str(g), "ts": H0, "busy_fraction": 0.5, "pod": "chat-0" if g < 3 else "",
             "namespace": "llm" if g < 3 else ""} for g in range(4)]
    for spec in ("g2-standard-48", ""):
        splitter = split([{**row, "machine_type": spec} for row in rows], acts, {"g2-1": ("gke-g2-1",)})
        chat, unlabelled = (splitter.groups[("chat", H0.to_pydatetime())],
                             splitter.groups[(UNALLOCATED, H0.to_pydatetime())])
        assert (chat.gpus, chat.paid, chat.paid_seconds / 3600) == (3, Decimal("1.42509"), 3), spec
        assert (unlabelled.gpus, unlabelled.paid, unlabelled.paid_seconds / 3600) == (1, Decimal("0.47503"), 1), spec
        cover = splitter.coverage["g2-1"]
        assert (cover.gpus, cover.paid_seconds / 3600) == (4, 4), spec
        assert not splitter.misfits, spec
    twice = split([{**rows[1], "machine_type": ""}, {**rows[1], "line_id": "cur.csv:3", "machine_type": ""}], acts,
                  {"g2-1": ("gke-g2-1",)})  # one SKU's row billed twice adds no GPUs: it is beyond them
    assert twice.coverage["g2-1"].gpus == 3
    assert [m.nearest for m in twice.misfits if m.kind == "gpu_time_over_capacity"] == [("g2-1",)]


def test_a_line_billing_more_than_its_instances_whole_hours_pays_for_no_more_than_the_period():
    """Occupancy is at most 1: 1.2 instance-hours in an hour round to one instance, billed the hour.
    The cap is named (rule 5): before, the 0.2 instance-hours the period cannot hold went silently."""
    line = gpu_line(1, gpus_per_instance=1, pricing_quantity=Decimal("1.2"), consumed_quantity=Decimal("1.2"))
    splitter = split([line, gpu_line(2, start=H0 + HOUR, end=H0 + 2 * HOUR, gpus_per_instance=1,
                                     pricing_quantity=Decimal("1.20"), consumed_quantity=Decimal("1.2"))])
    assert splitter.coverage["i-1"].paid_seconds == 7200
    [capped] = splitter.misfits
    assert (capped.kind, capped.nearest) == ("quantity_over_period", ("i-1",))
    assert capped.message == (
        "2 GPU line(s) bill more GPU time than their period holds: i-1 (2 lines): 1.2 instance-hours, at most 1 "
        "(1 instance × 1 h). The paid GPU time was capped at the period (occupancy 1): the money is spread over "
        "the period as billed, and each GPU-second is priced at the line's cost over the period's GPU time.")


def test_a_gpu_meter_billing_more_than_its_gpus_hours_is_named_and_a_whole_one_is_not():
    """A GCP GPU meter of 2.6 GPU-hours in an hour bills 3 GPUs (rounded), at most 3 GPU-hours: in
    range; 1.4 GPU-hours bill one GPU for 1.4 hours of a one-hour period: named, by its description
    where the line names no resource."""
    meter = {"instance_type": "", "gpus_per_instance": 0, "charge_description": "Nvidia L4 GPU running in Americas"}
    rows = [gpu_line(1, resource_id="g2-1", pricing_quantity=Decimal("2.6"), consumed_quantity=Decimal("2.6"), **meter),
            gpu_line(2, resource_id="", pricing_quantity=Decimal("1.4"), consumed_quantity=Decimal("1.4"), **meter)]
    [capped] = split(rows).misfits
    assert capped.message.startswith(
        "1 GPU line(s) bill more GPU time than their period holds: Nvidia L4 GPU running in Americas (1 line): "
        "1.4 GPU-hours, at most 1 (1 GPU × 1 h). The paid GPU time was capped")


def test_a_pods_gpu_with_no_sample_keeps_its_request_and_the_unlabelled_gpu_stays_unallocated():
    """dcgm-exporter labels GPU 0 with chat-0 and GPU 1 with no pod; at 01:00 GPU 0 has no sample.
    chat-0's request (kube-state-metrics) is for its own missing GPU: that hour is chat's GPU with no
    activity sample, and GPU 1, which no pod held, stays unallocated (before: GPU 1 took chat-0's
    request, so chat paid for an idle GPU it never held and the pod's own hour went to nobody)."""
    from audit.ledger import NO_SAMPLE

    acts = [{"node": "n1", "gpu": "0", "ts": H0, "busy_fraction": 0.5, "pod": "chat-0", "namespace": "llm"}]
    acts += [{"node": "n1", "gpu": "1", "ts": H0 + h * HOUR, "busy_fraction": 0.0, "pod": "", "namespace": ""}
             for h in range(2)]
    requests = pd.DataFrame([{"ts": H0 + h * HOUR, "namespace": "llm", "pod": "chat-0", "node": "n1", "gpus": 1}
                             for h in range(2)])
    rows = [gpu_line(h, start=H0 + h * HOUR, end=H0 + (h + 1) * HOUR, gpus_per_instance=2, net=Decimal("8"))
            for h in range(2)]
    splitter = split(rows, acts, {"i-1": ("n1",)}, requests)
    later = (H0 + HOUR).to_pydatetime()
    assert (UNALLOCATED, later) in splitter.groups and ("chat", later) not in splitter.groups
    free, missing = splitter.groups[(UNALLOCATED, later)], splitter.groups[(NO_SAMPLE, later)]
    assert (free.gpus, free.paid, free.paid_seconds) == (1, Decimal("4"), 3600)
    assert (missing.owned_paid, missing.owned_seconds) == ({"chat": Decimal("4")}, {"chat": 3600})
    assert splitter.groups[("chat", H0.to_pydatetime())].paid == Decimal("4")



def half_labelled() -> tuple[list[dict], pd.DataFrame]:
    """GPU 0 of n1 labelled with chat-0, GPUs 1 to 3 of n1 and both of n2 with no pod label; the
    scheduler places chat-0, chat-1 and chat-2 (one GPU each) on n1 and chat-9 on n2."""
    busy = {("n1", "0"): 0.5, ("n1", "1"): 0.25, ("n1", "2"): 0.75, ("n1", "3"): 0.125,
            ("n2", "0"): 0.5, ("n2", "1"): 0.0}
    acts = [{"node": node, "gpu": gpu, "ts": H0, "busy_fraction": b, "pod": "chat-0" if (node, gpu) == ("n1", "0")
             else "", "namespace": "llm" if (node, gpu) == ("n1", "0") else ""} for (node, gpu), b in busy.items()]
    requests = pd.DataFrame([{"ts": H0, "namespace": "llm", "pod": pod, "node": node, "gpus": 1}
                             for node, pod in (("n1", "chat-0"), ("n1", "chat-1"), ("n1", "chat-2"), ("n2", "chat-9"))])
    return acts, requests


def test_unlabelled_gpus_beside_labelled_ones_take_the_requests_no_label_names():
    """chat-1 and chat-2, which no DCGM label names, hold two of n1's GPUs 1 to 3 (:func:`half_labelled`),
    chat-9 one of n2's: one GPU of each node, beyond every request, is unallocated (before: chat held
    GPU 0 of n1 alone, B 1.00 of 2.00 paid, and 5 GPUs, 10.00, were unallocated overhead). Which
    unlabelled GPU each pod held is not in the data: each takes the mean activity of its node's
    unlabelled GPUs (n1 0.375, n2 0.25), so B = 2 × 0.5 + 4 × 0.375 + 2 × 0.25 = 3.0 (before: GPUs
    in order, chat-1 and chat-2 on GPUs 1 and 2, chat-9 on GPU 0, B 4.0 and the unallocated 0.25)."""
    acts, requests = half_labelled()
    rows = [gpu_line(1, gpus_per_instance=4, net=Decimal("8")),
            gpu_line(2, resource_id="i-2", gpus_per_instance=2, net=Decimal("4"))]
    splitter = split(rows, acts, {"i-1": ("n1",), "i-2": ("n2",)}, requests)
    chat, free = splitter.groups[("chat", H0.to_pydatetime())], splitter.groups[(UNALLOCATED, H0.to_pydatetime())]
    assert (chat.gpus, chat.paid, chat.busy, chat.paid_seconds) == (4, Decimal("8"), Decimal("3.0"), 4 * 3600)
    assert chat.pods == {"chat-0", "chat-1", "chat-2", "chat-9"}
    assert (free.gpus, free.paid, free.busy, free.nodes) == (2, Decimal("4"), Decimal("1.25"), {"n1", "n2"})


def test_the_unlabelled_gpus_that_take_requests_are_named_among_the_label_mismatches():
    """The GPUs without a pod label on the nodes whose requests name pods no label names: all of
    n1's but GPU 0, and n2's (before: no note; only the pods chat-1, chat-2 and chat-9 were named)."""
    acts, requests = half_labelled()
    tele = Telemetry(activity(acts), empty_table(["node"]), requests, empty_table(["namespace", "pod", "model_name"]),
                     empty_table([]), 3600)
    found = {m["check"]: m for m in label_mismatches(tele)}
    assert found["dcgm_gpu_without_pod_label"] == {
        "check": "dcgm_gpu_without_pod_label", "source": "DCGM gpu / Hostname", "against": "DCGM pod labels",
        "label": "node/gpu", "values": ["n1/1", "n1/2", "n1/3", "n2/0", "n2/1"], "count": 5, "intervals": 1,
        "detail": "GPUs without a DCGM pod label on nodes where the scheduler places GPU pods that no pod label "
                  "names, while DCGM labels other GPUs with pods: those pods' GPU requests are placed on these "
                  "GPUs (METHOD §3)"}
    acts[1]["pod"], acts[1]["namespace"] = "chat-1", "llm"
    requests = requests.loc[requests["node"] == "n1"]
    assert [m for m in label_mismatches(replace(tele, activity=activity(acts), requests=requests))
            if m["check"] == "dcgm_gpu_without_pod_label"][0]["values"] == ["n1/2", "n1/3"]


def unlabelled(busy: list[float], requests: list[tuple[str, str, float]]) -> tuple[list[dict], pd.DataFrame]:
    """Node n1's GPUs, with no pod label, at ``busy``; the scheduler's (namespace, pod, GPUs) on n1."""
    acts = [{"node": "n1", "gpu": str(g), "ts": H0, "busy_fraction": b, "pod": "", "namespace": ""}
            for g, b in enumerate(busy)]
    return acts, pd.DataFrame([{"ts": H0, "namespace": ns, "pod": pod, "node": "n1", "gpus": gpus}
                               for ns, pod, gpus in requests])


def test_a_fractional_request_holds_its_fraction_of_a_gpu_interval():
    """A Slurm job that ended 184 s into the hour with 4 GPUs (0.2044 GPUs, as the sacct connector
    averages it) holds 0.2044 of a GPU-interval, its time, money and activity; a pod that ran half
    the hour holds 0.5; the rest of the two GPUs is unallocated, and the money adds up exactly
    (before: each took a whole GPU: chat paid 4.00 for 3600 s, the other pod 4.00, nothing unallocated)."""
    acts, requests = unlabelled([0.4, 0.4], [("llm", "chat-1", 4 * 184 / 3600), ("ml", "job-1", 0.5)])
    splitter = split([gpu_line(1, gpus_per_instance=2, net=Decimal("8"))], acts, {"i-1": ("n1",)}, requests)
    groups = {holder: splitter.groups[(holder, H0.to_pydatetime())] for holder in ("chat", UNDECLARED, UNALLOCATED)}
    cents, micro = Decimal("0.01"), Decimal("0.000001")
    assert [(g.gpus.quantize(micro), g.paid.quantize(cents), g.paid_seconds.quantize(micro), g.busy_seconds.quantize(micro))
            for g in groups.values()] == [
        (Decimal("0.204444"), Decimal("0.82"), Decimal("736.000000"), Decimal("294.400000")),
        (Decimal("0.5"), Decimal("2.00"), Decimal("1800"), Decimal("720")),
        (Decimal("1.295556"), Decimal("5.18"), Decimal("4664.000000"), Decimal("1865.600000"))]
    assert sum((g.paid for g in groups.values()), Decimal(0)) == Decimal("8")
    assert splitter.coverage["i-1"].paid_seconds == 2 * 3600


def test_gpus_no_job_held_where_the_scheduler_lists_every_job_are_unallocated():
    """A Slurm export lists every job of n1 over 00:00-01:00 (``scheduled_nodes``) and none ran there:
    its two unlabelled GPUs were held by no workload, unallocated (METHOD §3/§4); before, without a
    request row there, allocation unknown. Where no scheduler source lists the node over the whole
    interval (another node; n1 up to 00:59; as with Kubernetes requests: no request, no pod label)
    they stay allocation unknown."""
    acts, _ = unlabelled([0.4, 0.4], [])
    line = [gpu_line(1, gpus_per_instance=2, net=Decimal("8"))]

    def held(node: str, end: pd.Timestamp) -> list[tuple]:
        spans = scheduled_spans(pd.DataFrame({"node": [node], "start": [H0], "end": [end]}), 3600, make_case().end)
        splitter = split(line, acts, {"i-1": ("n1",)}, scheduled=spans)
        return [(key[0], g.gpus, g.paid, g.paid_seconds) for key, g in splitter.groups.items()]

    assert held("n1", H0 + HOUR) == [(UNALLOCATED, 2, Decimal("8"), 7200)]
    assert held("n2", H0 + HOUR) == held("n1", H0 + HOUR - timedelta(minutes=1)) == [(UNKNOWN, 2, Decimal("8"), 7200)]


def test_pods_sharing_unlabelled_gpus_take_their_mean_activity_and_are_named():
    """No label says which of n1's four GPUs (5, 15, 25, 35 % busy) chat-a (2 GPUs) and embed-t (1)
    held: each takes the mean, 20 %, so chat's B is 2 × 0.2 of 1.00 a GPU (before: the GPUs in the
    requests' order, chat on GPUs 0 and 1, B 0.20), and a warning names the node, the pods and the
    assumption (before: none)."""
    acts, requests = unlabelled([0.05, 0.15, 0.25, 0.35], [("llm", "chat-a", 2), ("embed", "embed-t", 1)])
    splitter = split([gpu_line(1, gpus_per_instance=4, net=Decimal("4"))], acts, {"i-1": ("n1",)}, requests)
    chat, free = splitter.groups[("chat", H0.to_pydatetime())], splitter.groups[(UNALLOCATED, H0.to_pydatetime())]
    assert (chat.gpus, chat.paid, chat.busy, chat.busy_seconds) == (2, Decimal("2"), Decimal("0.4"), Decimal("1440"))
    assert (free.gpus, free.busy) == (1, Decimal("0.2"))
    (misfit,) = splitter.placement_misfits()
    assert (misfit.kind, misfit.subject, misfit.nearest) == ("gpu_placement_assumed", "node n1",
                                                            ("embed/embed-t", "llm/chat-a"))
    assert misfit.message == (
        "node n1: no DCGM pod label says which of its GPUs the pods embed/embed-t, llm/chat-a held (the "
        "scheduler's requests give how many, not which): each pod's requested GPU time was taken at the mean "
        "activity of the node's unlabelled GPUs in each interval, and the GPU time no request took is "
        "unallocated at that mean")


def test_requests_beyond_the_unlabelled_gpus_are_scaled_to_them_and_named():
    """embed-a asks 3 GPUs and two chat pods 1 each of n1's four unlabelled GPUs (time-sliced, or
    over-reported): each request gets 4 ÷ 5 = 0.8 of what it asked, embed 2.4 GPUs and 4.80 of
    8.00, chat 1.6 and 3.20, every cent placed (before: embed took 3, chat-ts-aaaaa the fourth,
    chat-ts-bbbbb nothing and no warning named it), and a warning names the node, the interval,
    the pods and 5 requested of 4."""
    acts, requests = unlabelled([0.1, 0.2, 0.3, 0.4], [("embed", "embed-a", 3), ("llm", "chat-ts-aaaaa", 1),
                                                       ("llm", "chat-ts-bbbbb", 1)])
    splitter = split([gpu_line(1, gpus_per_instance=4, net=Decimal("8"))], acts, {"i-1": ("n1",)}, requests)
    ts = H0.to_pydatetime()
    embed, chat = splitter.groups[(UNDECLARED, ts)], splitter.groups[("chat", ts)]
    assert (embed.gpus, embed.paid, embed.busy_seconds) == (Decimal("2.4"), Decimal("4.8"), Decimal("2160"))
    assert (chat.gpus, chat.paid, chat.busy_seconds) == (Decimal("1.6"), Decimal("3.2"), Decimal("1440"))
    assert (UNALLOCATED, ts) not in splitter.groups and embed.paid + chat.paid == Decimal("8")
    assert chat.pods == {"chat-ts-aaaaa", "chat-ts-bbbbb"}
    (assumed,) = splitter.placement_misfits()
    assert assumed.nearest == ("embed/embed-a", "llm/chat-ts-aaaaa", "llm/chat-ts-bbbbb")
    (over,) = splitter.oversubscription_misfits()
    assert (over.kind, over.subject, over.nearest) == ("gpu_requests_exceed_gpus", "node n1", assumed.nearest)
    assert over.message == (
        "node n1: the scheduler's GPU requests of the pods embed/embed-a, llm/chat-ts-aaaaa, llm/chat-ts-bbbbb "
        "ask for more GPUs than the node's unlabelled GPUs hold in 1 interval (2026-09-01 00:00 – 2026-09-01 "
        "00:00 UTC): 5 GPUs requested of 4 (each request × 0.8) in 1 interval. The GPUs were time-sliced "
        "between the pods, or the requests over-report; nothing measures each pod's part, so each request's "
        "GPU time and money were scaled by available ÷ requested (split evenly, METHOD §3)")


def test_requests_beyond_the_gpus_scale_onto_the_unmeasured_one_too():
    """n1 bills two GPUs, one without a sample; chat-a and chat-b ask 2 each: each gets 2 × 2 ÷ 4 =
    1, chat-a the measured GPU, chat-b the unmeasured one, still its own (before: chat-a both)."""
    acts, requests = unlabelled([0.4], [("llm", "chat-a", 2), ("llm", "chat-b", 2)])
    splitter = split([gpu_line(1, gpus_per_instance=2, net=Decimal("2"))], acts, {"i-1": ("n1",)}, requests)
    chat, unmeasured = splitter.groups[("chat", H0.to_pydatetime())], splitter.groups[(NO_SAMPLE, H0.to_pydatetime())]
    assert (chat.gpus, chat.paid, chat.pods) == (1, Decimal("1"), {"chat-a"})
    assert (unmeasured.gpus, unmeasured.owned_paid, unmeasured.pods) == (1, {"chat": Decimal("1")}, {"chat-b"})
    (over,) = splitter.oversubscription_misfits()
    assert "4 GPUs requested of 2 (each request × 0.5)" in over.message


def test_one_pod_on_every_unlabelled_gpu_is_no_assumption():
    """A pod whose request takes all of the node's unlabelled GPUs held them: nothing is assumed."""
    acts, requests = unlabelled([0.05, 0.35], [("llm", "chat-a", 2)])
    splitter = split([gpu_line(1, gpus_per_instance=2, net=Decimal("2"))], acts, {"i-1": ("n1",)}, requests)
    chat = splitter.groups[("chat", H0.to_pydatetime())]
    assert (chat.gpus, chat.busy, splitter.placement_misfits()) == (2, Decimal("0.4"), [])


def test_a_fractional_request_left_over_owns_its_fraction_of_an_unmeasured_gpu():
    """chat asks 1.5 GPUs of n1's two, whose GPU 1 has no sample: it takes GPU 0 and half of GPU 1,
    unmeasured but its own; the other half has no owner (before: the walk never ended, a request
    of less than one GPU taking nothing of a missing GPU, forever)."""
    acts, requests = unlabelled([0.4], [("llm", "chat-a", 1.5)])
    splitter = split([gpu_line(1, gpus_per_instance=2, net=Decimal("2"))], acts, {"i-1": ("n1",)}, requests)
    chat, unmeasured = splitter.groups[("chat", H0.to_pydatetime())], splitter.groups[(NO_SAMPLE, H0.to_pydatetime())]
    assert (chat.gpus, chat.paid, chat.busy) == (1, Decimal("1"), Decimal("0.4"))
    assert (unmeasured.gpus, unmeasured.paid, unmeasured.owned_paid) == (1, Decimal("1"), {"chat": Decimal("0.5")})


def test_a_part_line_s_machine_names_the_coverage_not_the_node_s_label():
    """A GCP machine billed in parts names no instance type: the coverage took the node's kube label
    (g2-standard-48) although the bill's machine_spec (``machine_type``) says n1-standard-48; a table
    without machine_type (built in memory) still falls back to the label."""
    meter = gpu_line(1, resource_id="n1-1", instance_type="", gpus_per_instance=0, pricing_quantity=Decimal(4),
                     consumed_quantity=Decimal(4), charge_description="Nvidia Tesla T4 GPU running in Americas")
    kinds = {}
    for rows in ([{**meter, "machine_type": "n1-standard-48"}], [meter]):
        case = make_case()
        splitter = GpuSplitter(case, case.services, empty_table(ACTIVITY_COLUMNS), {"n1-1": ("gke-n1-1",)},
                               empty_table(REQUEST_COLUMNS), {}, 3600, node_types={"gke-n1-1": "g2-standard-48"})
        lines = GpuLines(lines_frame(rows))
        if WALK["name"] == "python":
            splitter.add_lines(lines)
        else:
            splitter.add_lines_in_engine(lines, rendered_on_duckdb(WALK["name"]))
        kinds["machine_type" in rows[0]] = splitter.coverage["n1-1"].instance_type
    assert kinds == {True: "n1-standard-48", False: "g2-standard-48"}


def test_placement_misfit_names_hostile_pods_cut_and_escaped_as_every_fit_value():
    """A pod name from the data with a right-to-left override and 100 more characters is cut to 60
    characters with the override escaped, in nearest as in the message (docs/audit-json.md); before,
    nearest held the raw 105-character name."""
    from audit.gpuunits import placement_misfit

    misfit = placement_misfit("n1", {"llm/\u202e" + "P" * 100, "llm/chat-a"})
    assert misfit.nearest == ("llm/chat-a", "llm/\\u202ePPPPPPPPPPPPPP…" + "P" * 35)
    assert "the pods llm/chat-a, llm/\\u202ePPPPPPPPPPPPPP…" in misfit.message


VMSS = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachinescalesets/h100"
ND96 = {"resource_id": VMSS, "instance_type": "ND96isr_H100_v5", "end": H0 + 24 * HOUR}


def _day_rows(*hours: int) -> list[dict]:
    """Daily rows of the ND96 scale set, one VM each (not named: taken in turn), of ``hours`` hours."""
    return [gpu_line(n, **ND96, pricing_quantity=Decimal(h), consumed_quantity=Decimal(h), net=Decimal("98.32") * h,
                     pretax=Decimal("98.32") * h, priced=Decimal("98.32") * h) for n, h in enumerate(hours, 1)]


def _idle(node: str, hours: range, pod: str = "") -> list[dict]:
    """DCGM samples of a node's 8 GPUs in ``hours``, idle, held by ``pod`` (chat's) or by none."""
    return [{"node": node, "gpu": str(g), "ts": H0 + h * HOUR, "busy_fraction": 0.0, "pod": pod,
             "namespace": "llm" if pod else ""} for g in range(8) for h in hours]


def test_a_line_of_half_its_day_is_placed_in_the_hours_its_node_was_seen():
    """A scale set grown by one VM at 12:00: its daily row bills 12 h (1179.84) and DCGM sees the node
    from 12:00 on, its 8 GPUs idle (no pod). Before: the 12 h were spread as occupancy 0.5 over the
    24 hours, so 00:00-12:00 (no node) took 589.92 and 48 GPU-hours with no activity sample and
    coverage read 48 of 96 GPU-hours observed. Now: 98.32 and 8 GPU-hours in each hour from 12:00,
    unallocated, 96 of 96 observed, the placement named; the 24 h row beside it, seen all day,
    keeps its even spread."""
    splitter = split(_day_rows(24, 12), _idle("vm-0", range(24), "chat-0") + _idle("vm-1", range(12, 24)),
                     {VMSS: ("vm-0", "vm-1")})
    by_holder: dict = {}
    for (holder, ts), group in splitter.groups.items():
        by_holder.setdefault(holder, []).append((ts.hour, group))
    assert set(by_holder) == {"chat", UNALLOCATED}
    assert [h for h, _ in by_holder[UNALLOCATED]] == list(range(12, 24))
    assert {(g.paid, g.paid_seconds, g.gpus, frozenset(g.nodes)) for _, g in by_holder[UNALLOCATED]} == {
        (Decimal("98.32"), 8 * 3600, 8, frozenset({"vm-1"}))}
    assert {frozenset(g.placed) for _, g in by_holder[UNALLOCATED]} == {
        frozenset({"placed by node presence in DCGM_FI_PROF_GR_ENGINE_ACTIVE (vm-1)"})}
    assert {(g.paid, g.paid_seconds, frozenset(g.placed)) for _, g in by_holder["chat"]} == {
        (Decimal("98.32"), 8 * 3600, frozenset())}
    cover = splitter.coverage[VMSS]
    assert (cover.paid_seconds / 3600, cover.observed_seconds / 3600) == (24 * 8 + 12 * 8, 24 * 8 + 12 * 8)
    assert not [m for m in splitter.misfits if m.kind == "gpu_time_over_capacity"]


def test_hours_billed_beyond_those_the_node_was_seen_are_spread_over_the_rest_of_the_period():
    """12 h billed, the node seen 6 h (18:00-24:00): those 6 hours hold their whole GPU time (98.32
    each), the 6 h left go evenly over the other 18 hours (a third of each, 32.77 3̅), unmeasured."""
    splitter = split(_day_rows(12), _idle("vm-0", range(18, 24)) + _idle("vm-9", range(1), "chat-0"),
                     {VMSS: ("vm-0",)})
    seen = [g for (holder, _), g in splitter.groups.items() if holder == UNALLOCATED]
    unseen = [g for (holder, _), g in splitter.groups.items() if holder == NO_SAMPLE]
    assert [g.ts.hour for g in seen] == list(range(18, 24)) and [g.ts.hour for g in unseen] == list(range(18))
    assert {(g.paid, g.paid_seconds) for g in seen} == {(Decimal("98.32"), 8 * 3600)}
    assert {(g.paid.quantize(Decimal("1E-40")), g.paid_seconds) for g in unseen} == {
        ((Decimal("98.32") / 3).quantize(Decimal("1E-40")), 8 * 1200)}
    assert abs(sum((g.paid for g in seen + unseen), Decimal(0)) - Decimal("1179.84")) < Decimal("1E-40")
    cover = splitter.coverage[VMSS]
    assert (cover.paid_seconds / 3600, cover.observed_seconds / 3600) == (96, 48)


def test_a_line_of_part_of_its_day_on_a_node_never_seen_keeps_the_even_spread():
    """No sample of the node: which hours it ran is not in the data; the 12 h stay 0.5 of each hour."""
    splitter = split(_day_rows(12), _idle("vm-9", range(1), "chat-0"), {VMSS: ("vm-0",)})
    unseen = [g for (holder, _), g in splitter.groups.items() if holder == NOT_IN_TELEMETRY]
    assert len(unseen) == 24
    assert {(g.paid, g.paid_seconds, frozenset(g.placed)) for g in unseen} == {(Decimal("49.16"), 8 * 1800, frozenset())}


def test_rows_naming_no_vm_go_to_the_nodes_whose_seen_hours_match_their_billed_hours():
    """A scale set's two daily rows name no VM; the first bills 8 h (its VM scaled in at 08:00), the
    second 24 h; DCGM sees vm-0 all day (chat's pod) and vm-1 until 08:00 (idle). Before: taken in
    file order, the 8 h row went to vm-0 and the 24 h one to vm-1: 64 + 64 of 256 GPU-hours
    observed, 128 GPU-hours (16 h of vm-1 × 8 GPUs, 1573.12) on GPU-intervals with no sample. Now
    the 8 h row is paired with vm-1 (seen 8 h), the 24 h one with vm-0: 256 of 256 observed, no
    interval without a sample, and vm-1's 786.56 unallocated in hours 0-7."""
    splitter = split(_day_rows(8, 24), _idle("vm-0", range(24), "chat-0") + _idle("vm-1", range(8)),
                     {VMSS: ("vm-0", "vm-1")})
    cover = splitter.coverage[VMSS]
    assert (cover.paid_seconds / 3600, cover.observed_seconds / 3600) == (256, 256)
    assert not [g for (holder, _), g in splitter.groups.items() if holder == NO_SAMPLE]
    idle = [g for (holder, _), g in splitter.groups.items() if holder == UNALLOCATED]
    assert [g.ts.hour for g in idle] == list(range(8))
    assert {(g.paid, g.paid_seconds, frozenset(g.nodes)) for g in idle} == {(Decimal("98.32"), 8 * 3600,
                                                                             frozenset({"vm-1"}))}
    chat = [g for (holder, _), g in splitter.groups.items() if holder == "chat"]
    assert sum((g.paid for g in chat), Decimal(0)) == Decimal("2359.68") and {frozenset(g.nodes) for g in chat} == {frozenset({"vm-0"})}


def test_rows_telemetry_cannot_tell_apart_keep_their_turn():
    """Both VMs seen all day: the 8 h row keeps its turn (vm-0), the 24 h row vm-1, as before."""
    splitter = split(_day_rows(8, 24), _idle("vm-0", range(24), "chat-0") + _idle("vm-1", range(24)),
                     {VMSS: ("vm-0", "vm-1")})
    chat = [g for (holder, _), g in splitter.groups.items() if holder == "chat"]
    assert sum((g.paid for g in chat), Decimal(0)).quantize(Decimal("0.01")) == Decimal("786.56")


SET = "/subscriptions/s/resourcegroups/mc/providers/microsoft.compute/virtualmachinescalesets/aks-h100-vmss"


def test_a_licence_billed_on_a_scale_set_whose_vms_are_billed_per_vm_follows_their_gpus():
    """A marketplace licence (NVAIE per GPU hour, 192.00, no machine type) on a scale set whose two
    8-GPU VMs each bill their own 24 h row: before, the set key had no GPU count and its 192.00 was
    unattributed (gpu_time_not_billed); now it is spread evenly over the set's nodes' GPUs and hours
    (METHOD §2), 192.00 / 384 GPU-hours = 0.50 per GPU-hour on each node, money only: the VM rows'
    384 GPU-hours stay the paid GPU time."""
    day = {"end": H0 + 24 * HOUR, "pricing_quantity": Decimal(24), "consumed_quantity": Decimal(24),
           "instance_type": "nd96isr_h100_v5", "net": Decimal("2359.68"), "pretax": Decimal("2359.68"),
           "priced": Decimal("2359.68")}
    rows = [gpu_line(1, resource_id=f"{SET}/virtualmachines/0", **day),
            gpu_line(2, resource_id=f"{SET}/virtualmachines/1", **day),
            gpu_line(3, resource_id=SET, end=H0 + 24 * HOUR, pricing_quantity=Decimal(192),
                     consumed_quantity=Decimal(192), gpus_per_instance=0, instance_type="",
                     charge_description="NVAIE per GPU hour", net=Decimal("192.00"), pretax=Decimal("192.00"),
                     priced=Decimal("0"))]
    nodes_of = {SET: ("vmss000000", "vmss000001"), f"{SET}/virtualmachines/0": ("vmss000000",),
                f"{SET}/virtualmachines/1": ("vmss000001",)}
    splitter = split(rows, [], nodes_of)
    assert not misfits_of(splitter.misfits, "gpu_time_not_billed")
    assert not any(holder == NO_GPU_TIME for holder, _ in splitter.groups)
    group = splitter.groups[(NOT_IN_TELEMETRY, H0.to_pydatetime())]
    assert (group.gpus, group.paid_seconds, group.nodes) == (16, 16 * 3600, {"vmss000000", "vmss000001"})
    assert abs(group.paid - (2 * Decimal("2359.68") + Decimal("192.00")) / 24) < Decimal("1E-40")
    assert sum((g.paid for g in splitter.groups.values()), Decimal(0)).quantize(Decimal("0.01")) == Decimal("4911.36")
    assert sum((g.paid_seconds for g in splitter.groups.values()), Decimal(0)) == 384 * 3600
    assert splitter.coverage[SET].paid_seconds == 0
