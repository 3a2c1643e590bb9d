"""A GCP export read at ``grain = "day"`` gives the audit of ``grain = "hour"``, to the cent.

The case is cloudgen's GKE day of seed 7201 with credits and tax (``python -m benchmarks.cloudgen
--cloud gke --seed 7201 --billing native --adjustments``): two a3-highgpu-8g and a g2-standard-48
billed in parts (GPU, core and RAM SKUs), sustained-use credits on some of their hours. Before,
grain day summed every row per UTC day: the GPU machines' cost and credits were spread evenly over
the day (money moved between buckets), and in a window not made of whole days the day's sum was
clipped pro rata as if its credits were even over the hours (a wrong total). Now the rows that may
bill GPU time keep their hours, and a row straddling an edge of the window is summed only with rows
of its own period.
"""
from __future__ import annotations

import shutil
import sys
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks.cloudgen.generate import generate
from tests.connectors.billing.test_gcp_billing import (  # noqa: F401 (fixtures)
    comparable,
    connector,
    loaded,
    pd_assert_equal,
    rows,
)
from tests.paths import ROOT
from tests.servers.bigquery import DATASET, PROJECT, load_table
from tests.servers.gcp_export import MAY, as_float_json, bq_schema, row, write_ndjson

sys.path.insert(0, str(ROOT / "benchmarks"))
from cloudgen_check import audit_document  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))

SOURCE_PATH = 'path = "billing/gcp_billing_export_resource_v1.jsonl"'
WHOLE_DAY = 'window = ["2026-09-01", "2026-09-02"]'


@pytest.fixture(scope="module")
def gke_7201(tmp_path_factory) -> Path:
    """cloudgen's GKE case of seed 7201, native export with credits and tax."""
    folder = tmp_path_factory.mktemp("gke-7201") / "case"
    generate("gke", 7201, folder, billing="native", adjustments=True)
    return folder


def audit_at(case: Path, target: Path, grain: str, window: str) -> dict:
    """audit.json of a copy of ``case`` whose export is read at ``grain`` over ``window`` (its toml line)."""
    shutil.copytree(case, target)
    toml = (target / "case.toml").read_text()
    assert SOURCE_PATH in toml and WHOLE_DAY in toml
    toml = toml.replace(SOURCE_PATH, f'{SOURCE_PATH}\ngrain = "{grain}"').replace(WHOLE_DAY, window)
    (target / "case.toml").write_text(toml)
    return audit_document(target)


def test_day_grain_keeps_the_gpu_hours_so_buckets_equal_the_hour_grains(gke_7201, tmp_path):
    """Whole day: before, grain day gave model_compute 1561.52 (truth and grain hour: 1530.43) and chat
    0.019733 per 1k requests (0.019682): the day's GPU cost and credits flattened over 24 hours."""
    hour = audit_at(gke_7201, tmp_path / "hour", "hour", WHOLE_DAY)
    day = audit_at(gke_7201, tmp_path / "day", "day", WHOLE_DAY)
    assert day["buckets"]["model_compute"]["amount"] == "1530.43"
    assert day["services"]["chat"]["cost_per_1k_requests"] == "0.019682"
    assert day["buckets"] == hour["buckets"] and day["services"] == hour["services"]
    assert (day["total"], day["invoice_total"]) == (hour["total"], hour["invoice_total"]) == ("4321.46", "4330.44")


def test_day_grain_clips_a_row_straddling_the_window_by_its_own_period(gke_7201, tmp_path):
    """Window 06:30-18:45: before, grain day clipped each 06:00-19:00 day group by 12.25/13 as if its
    money (sustained-use credits included) were even over the hours: total in scope 2179.42,
    invoice 2183.95. Now the straddling hours are clipped by their own period, as at grain hour."""
    window = 'window = ["2026-09-01T06:30:00Z", "2026-09-01T18:45:00Z"]'
    hour = audit_at(gke_7201, tmp_path / "hour", "hour", window)
    day = audit_at(gke_7201, tmp_path / "day", "day", window)
    assert (day["total"], day["invoice_total"]) == ("2183.25", "2187.78")
    assert day["buckets"] == hour["buckets"]


# ---- the query's grouping on a small export, on BigQuery (the emulator) and DuckDB ----

def two_days_of_machines() -> list[dict]:
    """48 hours of a GPU machine billed in parts (its GPU SKU with the machine_spec label, its core SKU
    without: the resource tells) and of a CPU VM; the CPU VM has sustained-use credits on two hours only."""
    records = []
    for h in range(48):
        t, varying = MAY + timedelta(hours=h), f"{20 + h % 3}.000000"  # no run of identical hours to merge
        records.append(row(t, "Compute Engine", "Nvidia Tesla A100 GPU running in Americas", varying,
                           resource="gpu-node", machine="a2-highgpu-8g", amount="28800", priced="8"))
        records.append(row(t, "Compute Engine", "A2 Instance Core running in Americas", varying, resource="gpu-node"))
        credit = (("Sustained usage discount", "-0.400000", "SUSTAINED_USAGE_DISCOUNT"),) if h in (6, 18) else ()
        records.append(row(t, "Compute Engine", "N2 Instance Core running in Americas", "0.500000",
                           resource="cpu-node", machine="n2-standard-8", credits=credit))
    return records


def day_and_hour_grain(client, emulator, tmp_path, records, **window) -> dict:
    """The lines of ``records`` read at grain day from BigQuery and locally (checked equal), and at grain hour."""
    table = f"{PROJECT}.{DATASET}.gcp_billing_export_resource_v1_grain"
    load_table(client, table, [as_float_json(r) for r in records], bq_schema())
    local = write_ndjson(records, tmp_path / "grain.json")
    remote = connector(table=table, endpoint=f"http://127.0.0.1:{emulator}", grain="day", **window).read()
    day = connector(path=local, grain="day", **window).read()
    pd_assert_equal(comparable(day.tables["lines"]), comparable(remote.tables["lines"]))
    return {"day": day.tables["lines"], "hour": connector(path=local, **window).read().tables["lines"]}


@pytest.mark.services
def test_day_grain_keeps_the_hours_of_the_rows_that_may_bill_gpu_time(loaded, emulator, tmp_path):  # noqa: F811
    """grain day on BigQuery and DuckDB: the GPU machine's rows (GPU SKU, and its core SKU by the
    resource) keep their hours, so its lines equal grain hour's; only the CPU VM's rows are summed
    per UTC day. Before, the GPU machine's 48 hours became 2 day lines of each SKU (its cost and
    credits flattened over 24 hours, METHOD §3 prices each GPU-interval at its own line)."""
    read = day_and_hour_grain(loaded, emulator, tmp_path, two_days_of_machines(), end=MAY + timedelta(days=2))
    gpu = {grain: comparable(lines[lines.resource_id == "gpu-node"]).drop(columns=["row"]) for grain, lines in read.items()}
    pd_assert_equal(gpu["day"], gpu["hour"])
    lines = read["day"][read["day"].charge_category == "Usage"]
    hours = (lines.end - lines.start).dt.total_seconds() // 3600
    assert sorted(zip(lines.charge_description, hours)) == sorted(
        [("Nvidia Tesla A100 GPU running in Americas", 1)] * 48 + [("A2 Instance Core running in Americas", 1)] * 48
        + [("N2 Instance Core running in Americas", h) for h in (7, 17, 24)])  # invoice month April to 07:00 UTC


@pytest.mark.services
def test_day_grain_on_bigquery_clips_a_straddling_row_by_its_own_period(loaded, emulator, tmp_path):  # noqa: F811
    """Window 06:30-18:45: the CPU VM's 06:00 and 18:00 rows (credited -0.40 each) straddle its edges.
    Before, grain day summed the 18:00 row with the other rows of 07:00-19:00 (those of the May invoice
    month) and clipped the sum by 11.75/12, as if its credit were even over the hours: credit -0.591667
    instead of -0.5 (-0.4 × 0.5 - 0.4 × 0.75)."""
    window = {"start": MAY + timedelta(hours=6, minutes=30), "end": MAY + timedelta(hours=18, minutes=45)}
    read = day_and_hour_grain(loaded, emulator, tmp_path, two_days_of_machines(), **window)
    for lines in read.values():
        cpu = lines[lines.resource_id == "cpu-node"]
        assert sum(cpu[cpu.charge_category == "Credit"].billed_cost) == Decimal("-0.5")
        assert sum(cpu.billed_cost) == Decimal("0.5") * Decimal("12.25") - Decimal("0.5")
    assert sum(read["day"].billed_cost) == sum(read["hour"].billed_cost)
