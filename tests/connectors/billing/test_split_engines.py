"""The GPU split's engine query (audit.split_sql) on BigQuery (bqemulator) and on Athena (moto),
against the lines walked in Python.

One scenario holds what the split's semantics turn on: a p5 billed hour by hour with 50-digit money
(a spread credit divides), a scale set billed one row per VM taking its three nodes in turn, a GCP
machine billed in parts (a per-GPU meter that counts the time, a core line that adds money only), a
line with no resource id, a period that starts mid-hour and one outside the window, MIG-free pods,
an unallocated GPU and a node telemetry never names. The BigQuery rendering runs on the emulator
over the prepared tables loaded there; moto's Athena does not run SQL, so the Trino text is sent
through the Athena client, the rows its DuckDB transpilation gives are what moto answers, and they
come back through the connector's result paging as text. Each way, the groups and coverage equal
the Python walk's, to the last of 50 digits where a key sums one line, and to the cent everywhere.
"""
from __future__ import annotations

import decimal
from datetime import timedelta
from decimal import Decimal

import pandas as pd
import pytest

from audit import split_sql
from audit.gpusplit import GpuLines, GpuSplitter, LinePlan
from audit.money import CONTEXT
from audit.normalised import REQUEST_COLUMNS, empty_table
from tests.builders import activity, assert_same_split, gpu_line, lines_frame, make_case
from tests.servers.athena import split_engine as athena_split
from tests.servers.bigquery import client_for
from tests.servers.bigquery import split_engine as bigquery_split

pytestmark = pytest.mark.services

H0 = pd.Timestamp("2026-09-01T00:00:00Z")
HOUR = timedelta(hours=1)
VMSS = "/subscriptions/S/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/gpu"


def scenario_rows() -> list[dict]:
    third = Decimal(1) / Decimal(3)
    rows = [gpu_line(h, start=H0 + h * HOUR, end=H0 + (h + 1) * HOUR, net=Decimal("98.32") - third * h,
                     commitment_discount_id="sp-1" if h == 1 else "") for h in range(3)]  # one hour committed
    vm = {"resource_id": VMSS, "instance_type": "Standard_NC24ads_A100_v4", "gpus_per_instance": 1,
          "charge_description": "NC24ads A100 v4"}
    rows += [gpu_line(10 + 2 * h + k, start=H0 + h * HOUR, end=H0 + (h + 1) * HOUR, net=Decimal("3.67") + k,
                  pretax=Decimal("3.67"), priced=Decimal("3.67"), commitment_discount_id="ri-1" if k == 0 else "", **vm)
             for h in range(2) for k in range(2)]
    gcp = {"resource_id": "projects/p/zones/z/instances/a2-1", "instance_type": "", "gpus_per_instance": 0}
    rows += [gpu_line(20, pricing_quantity=Decimal(2), consumed_quantity=Decimal(2), net=Decimal("6"), pretax=Decimal("6"),
                  priced=Decimal("6"), charge_description="Nvidia Tesla A100 GPU running in Americas", **gcp),
             gpu_line(21, pricing_quantity=Decimal(24), consumed_quantity=Decimal(24), net=Decimal("0.8"),
                  pretax=Decimal("0.8"), priced=Decimal("0.8"), charge_description="A2 Instance Core running in Americas",
                  **gcp)]
    rows += [gpu_line(30, resource_id="", start=H0 + HOUR / 2, end=H0 + 2 * HOUR, pricing_quantity=Decimal("1.5"),
                  consumed_quantity=Decimal("1.5"), net=Decimal("147.48")),
             gpu_line(31, resource_id="i-2", start=H0 - 2 * HOUR, end=H0 - HOUR)]  # before the window
    return rows


def scenario_acts() -> list[dict]:
    acts = [{"node": "n1", "gpu": str(g), "ts": H0 + h * HOUR, "busy_fraction": 0.1 * (g + 1),
             "pod": "chat-0" if g < 6 else "", "namespace": "llm" if g < 6 else ""} for g in range(8) for h in range(3)]
    acts += [{"node": "vm-0", "gpu": "0", "ts": H0 + h * HOUR, "busy_fraction": 0.75, "pod": "etl-0",
              "namespace": "batch"} for h in range(2)]
    acts += [{"node": "gke-a2-1", "gpu": str(g), "ts": H0, "busy_fraction": 0.25 * (g + 1),
              "pod": "chat-1" if g == 0 else "", "namespace": "llm" if g == 0 else ""} for g in range(2)]
    return acts


NODES = {"i-1": ("n1",), VMSS.lower(): ("vm-0", "vm-1", "vm-2"), "a2-1": ("gke-a2-1",)}


def splitter() -> GpuSplitter:
    case = make_case()
    return GpuSplitter(case, case.services, activity(scenario_acts()), NODES, empty_table(REQUEST_COLUMNS), {}, 3600)


@pytest.fixture(autouse=True)
def _audit_context():
    with decimal.localcontext(CONTEXT):
        yield


@pytest.fixture(scope="module")
def walked():
    """The Python walk, and the prepared tables with DuckDB's rows (coverage, sums)."""
    with decimal.localcontext(CONTEXT):
        python = splitter()
        python.add_lines(GpuLines(lines_frame(scenario_rows())))
        seen = {}

        def capture(prepared):
            seen["prepared"] = prepared
            seen["rows"] = split_sql.run_duckdb(prepared)
            return seen["rows"]

        splitter().add_lines_in_engine(GpuLines(lines_frame(scenario_rows())), capture)
    return python, seen["prepared"], seen["rows"]


def from_rows(cover: list, sums: list, prepared) -> GpuSplitter:
    """A split filled from an engine's (coverage, sums) rows."""
    out = splitter()
    lines = GpuLines(lines_frame(scenario_rows()))
    out.add_sums(LinePlan(lines, out._grid), cover, split_sql.key_sums(sums, prepared))
    return out


def same_split(got: GpuSplitter, want: GpuSplitter) -> None:
    assert_same_split(got, want, within=Decimal("1E-40"), to_the_cent=True)


def test_the_duckdb_walk_equals_the_python_walk(walked):
    python, prepared, (cover, sums) = walked
    same_split(from_rows(cover, sums, prepared), python)
    assert {g.holder for g in python.groups.values()} >= {"chat", "__unallocated__", "__undeclared__",
                                                          "__not_in_telemetry__"}
    assert prepared.limbs > 2  # the 50-digit amounts need several limbs
    # committed money where it was billed: sp-1's hour of i-1 (chat's and the free GPUs), ri-1's VM (etl, undeclared)
    hours = [(H0 + t * HOUR).to_pydatetime() for t in range(2)]
    assert sorted(k for k, g in python.groups.items() if g.committed) == sorted(
        [("chat", hours[1]), ("__unallocated__", hours[1]), ("__undeclared__", hours[0]), ("__undeclared__", hours[1])])
    assert len(cover) == 5 and len(sums) == 10  # i-1: 3 hours; the set: 4 rows on 3 nodes; a2-1: 2; one unnamed


# --- BigQuery (the emulator) ------------------------------------------------------------------

def test_bigquery_rendering_on_the_emulator_gives_the_same_rows(walked, emulator):
    python, prepared, (cover, sums) = walked
    client = client_for(emulator)
    try:
        got = bigquery_split(client)(prepared)
    finally:
        client.close()
    assert got[0] == cover and got[1] == sums
    same_split(from_rows(got[0], got[1], prepared), python)


def test_the_demo_audited_through_bigquery_gives_the_same_audit_json(emulator, demo_audit, monkeypatch):
    """The demo's gpu_compute lines placed and summed on the emulator: audit.json unchanged."""
    from audit.audit_json import to_dict
    from audit.case import load_case
    from audit.pipeline import run_audit
    from tests.paths import DEMO

    client = client_for(emulator)
    runs: list = []
    monkeypatch.setitem(split_sql.ENGINES, "bigquery", bigquery_split(client, runs))
    monkeypatch.setenv("COSTAUDIT_SPLIT", "bigquery")
    try:
        got = to_dict(run_audit(load_case(DEMO)))
    finally:
        client.close()
    assert runs == [4]  # the demo bills its GPUs in four runs of hours (FOCUS lines identical but the hour)
    assert {k: v for k, v in got.items() if k != "sources"} == {k: v for k, v in demo_audit.items() if k != "sources"}


# --- Athena (moto) ----------------------------------------------------------------------------

def test_athena_trino_text_through_moto_gives_the_same_split(walked, moto, aws_env):
    """moto runs no SQL: the Trino text goes out through the Athena client, and moto answers with
    the rows that text gives when DuckDB runs it (transpiled back by sqlglot)."""
    python, prepared, (cover, sums) = walked
    answers = athena_split(moto)(prepared)
    assert answers == (cover, sums)
    same_split(from_rows(answers[0], answers[1], prepared), python)
