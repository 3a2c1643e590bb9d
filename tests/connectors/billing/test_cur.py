"""CurConnector: the real legacy CURs, synthetic CUR 2.0, export folders, bad input, one whole audit."""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from audit.audit_json import to_dict
from audit.case import load_case
from audit.classify import classify
from audit.pipeline import run_audit
from connectors.billing.cur import CurConnector
from connectors.errors import InputError, InputErrors
from connectors.registry import resolve
from schemas.billing import line_total
from tests.builders import (
    LEGACY_HEADER,
    RI,
    SP,
    billing_case,
    cur2_rows,
    legacy_row,
    read_cur,
    read_cur_once,
    write_cur2,
    write_legacy,
    write_manifest,
)
from tests.paths import DATA

BILLING = DATA / "billing"
CUR1 = BILLING / "focus_converters" / "aws_cur1_anonymized_2023-11.csv"
LABS = BILLING / "aws_wa_labs"
STEP1 = LABS / "workload_efficiency_step1_cur_2019-11-26.csv.gz"
STEP5 = LABS / "workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz"
SIX = Decimal("0.000001")


def utc(*parts: int) -> datetime:
    """A tz-aware UTC datetime."""
    return datetime(*parts, tzinfo=timezone.utc)


def total(values) -> Decimal:
    """Exact Decimal sum."""
    return sum(values, Decimal(0))


def six(value: Decimal) -> Decimal:
    """Rounded to the 6 places PROVENANCE.md prints."""
    return value.quantize(SIX)


def line_type(lines, kind: str):
    """The lines of one CUR line item type (from the extra column)."""
    return lines[lines["extra"].str.contains(f'"x_LineItemType":"{kind}"', regex=False)]


def duck(query: str) -> Decimal:
    """One value of an independent DuckDB query over a raw file (the expected figure)."""
    return duckdb.sql(query).fetchall()[0][0]


def num(column: str) -> str:
    """SQL: a DOUBLE CUR column as the DECIMAL of its shortest text (as the connector reads it)."""
    return f"CAST(CAST(coalesce({column}, 0) AS VARCHAR) AS DECIMAL(38,12))"


def raises(path: Path, **kwargs) -> list[InputError]:
    """The InputErrors a read raises."""
    with pytest.raises((InputError, InputErrors)) as info:
        read_cur(path, **kwargs)
    return getattr(info.value, "errors", [info.value])


# --- real legacy CURs (totals from PROVENANCE.md) -------------------------------------------------

def test_registry_names_the_cur_connector():
    assert resolve("cur") is CurConnector


def test_legacy_csv_sample_loads_with_published_sums():
    frame = read_cur(CUR1, start=utc(2023, 11, 1), end=utc(2023, 12, 1))
    lines = frame.tables["lines"]
    assert frame.rows == 1281 and len(lines) == 1281
    assert six(total(lines.billed_cost)) == Decimal("1.682309")
    tax = lines[lines.charge_category == "Tax"]
    assert len(tax) == 12 and six(total(tax.billed_cost)) == Decimal("0.080000")
    assert total(lines.effective_cost) == total(lines.billed_cost)  # no commitments in this file
    assert lines.line_id.iloc[0] == "aws_cur1_anonymized_2023-11.csv:1"
    assert list(lines.row) == list(range(1, 1282))
    assert set(lines.currency) == {"USD"} and set(lines.provider) == {"AWS"}
    assert str(lines.start.dtype) == "datetime64[ns, UTC]"
    assert "split_summary" not in frame.tables  # no split rows


@pytest.mark.slow
@pytest.mark.parametrize("name, window, rows, billed", [
    ("Oct2018", (utc(2018, 10, 1), utc(2018, 11, 1)), 119307, "4064.483132"),
    ("Nov2018", (utc(2018, 11, 1), utc(2018, 12, 1)), 124340, "3505.326968"),
    ("Dec2018", (utc(2018, 12, 1), utc(2019, 1, 1)), 91264, "408.375992"),
])
def test_workshop_parquet_billed_and_amortised(name, window, rows, billed):
    path = LABS / f"{name}-WorkshopCUR-00001.snappy.parquet"
    frame = read_cur_once(path, *window)
    lines = frame.tables["lines"]
    assert frame.rows == rows
    assert six(total(lines.billed_cost)) == Decimal(billed)
    covered = line_type(lines[lines.commitment_discount_status == "Used"], "DiscountedUsage")
    assert len(covered) and set(covered.billed_cost) == {Decimal(0)}
    assert set(covered.commitment_discount_type) == {"Reservation"}
    src = f"read_parquet('{path}')"
    expected_ri = duck(f"SELECT sum({num('reservation_effective_cost')}) FROM {src} "
                       "WHERE line_item_line_item_type = 'DiscountedUsage'")
    assert total(covered.effective_cost) == expected_ri
    fees = lines[lines.charge_category == "Purchase"]
    assert len(fees) == 9 and (fees.commitment_discount_id.str.contains(":reserved-instances/")).all()
    assert set(fees.effective_cost) == {Decimal(0)}
    # Amortised total, as AWS computes it: usage unblended + RI effective cost + the RI fees' unused part.
    expected = duck(
        f"SELECT sum(CASE line_item_line_item_type WHEN 'Usage' THEN {num('line_item_unblended_cost')} "
        f"WHEN 'DiscountedUsage' THEN {num('reservation_effective_cost')} "
        f"ELSE {num('reservation_unused_amortized_upfront_fee_for_billing_period')} "
        f"+ {num('reservation_unused_recurring_fee')} END) FROM {src}")
    assert total(lines.effective_cost) == expected
    unused = lines[lines.commitment_discount_status == "Unused"]
    assert len(unused) and (unused.billed_cost == 0).all() and unused.line_id.str.endswith(":unused").all()


@pytest.mark.slow
def test_workshop_tags_lose_the_user_prefix():
    path = LABS / "Dec2018-WorkshopCUR-00001.snappy.parquet"
    lines = read_cur_once(path, utc(2018, 12, 1), utc(2019, 1, 1)).tables["lines"]
    tags = [json.loads(t) for t in lines.tags]
    assert any(t.get("cost_center") == "Cost001" for t in tags)
    assert not any(key.startswith("user_") for t in tags for key in t)


def test_athena_csv_step1_with_null_literals():
    frame = read_cur(STEP1, start=utc(2019, 11, 26), end=utc(2019, 11, 27))
    lines = frame.tables["lines"]
    assert frame.rows == 7850 and line_total(lines) == 7850
    assert len(lines) < 7850 / 5  # summed per day where no GPU is billed
    assert six(total(lines.billed_cost)) == Decimal("89.170633")
    assert {"application", "tier"} <= {k for t in lines.tags for k in json.loads(t)}


def test_step5_savings_plans_billed_and_amortised():
    lines = read_cur(STEP5, start=utc(2019, 11, 29), end=utc(2019, 12, 1)).tables["lines"]
    assert line_total(lines) == 5941  # the plan is fully used: no unused-commitment rows
    billed = total(lines.billed_cost)
    assert six(billed) == Decimal("70.269658")
    covered, negation = line_type(lines, "SavingsPlanCoveredUsage"), line_type(lines, "SavingsPlanNegation")
    fees = line_type(lines, "SavingsPlanRecurringFee")
    assert (line_total(covered), line_total(negation), line_total(fees)) == (360, 120, 48)
    # on the invoice covered usage (19.519065 unblended) and its negation net to zero: both carry 0
    assert total(covered.billed_cost) == 0 and total(negation.billed_cost) == 0
    assert negation.pricing_quantity.isna().all()  # money only: the covered lines carry the hours
    assert total(fees.billed_cost) == Decimal("12.696") and set(fees.charge_category) == {"Purchase"}
    plans = set(covered.commitment_discount_id)  # two EC2 Instance Savings Plans
    assert len(plans) == 2 and set(fees.commitment_discount_id) == plans
    sp_effective = total(covered.effective_cost)
    assert sp_effective == Decimal("12.696")
    # Amortised total = billed, less what the amortised view does not count (the negations, the
    # covered lines at their on-demand price, the fee itself), plus the covered lines at their Savings
    # Plan effective cost and the unused commitment (none here):
    #   70.269658 + 19.519065 - 19.519065 - 12.696 + 12.696 + 0 = 70.269658.
    # A fully used No Upfront plan costs the same on both bases; the two views differ in where the
    # money sits (covered lines at 0.054/h instead of a 12.696 fee line).
    expected = (billed - total(negation.billed_cost) - total(covered.billed_cost)
                - total(fees.billed_cost) + sp_effective)
    assert total(lines.effective_cost) == expected
    assert six(expected) == Decimal("70.269658")
    assert covered.contracted_unit_price.map(lambda p: p is not None and p > 0).all()


# --- synthetic CUR 2.0 -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cur2(tmp_path_factory):
    """The synthetic CUR 2.0 file, read over September 2026."""
    path = write_cur2(tmp_path_factory.mktemp("cur2") / "export-00001.snappy.parquet", cur2_rows())
    return read_cur(path, start=utc(2026, 9, 1), end=utc(2026, 10, 1))


def test_cur2_money_both_bases_and_unused_commitments(cur2):
    lines = cur2.tables["lines"]
    assert cur2.rows == 4 * 8 + 5
    hour = Decimal("55.04") - Decimal("55.04") + Decimal("55.04") + Decimal("10.49264") + Decimal("40.0")
    month = Decimal("28.4") + 100 + Decimal("12.34") - 5 - Decimal("2.5")  # RIFee, Fee, Tax, Credit, Edp
    assert total(lines.billed_cost) == 4 * hour + month
    hour_eff = Decimal("38.53") + Decimal("55.04") + Decimal("10.49264") + Decimal("7.1") + Decimal("1.47")
    assert total(lines.effective_cost) == 4 * hour_eff + Decimal("3.55") + Decimal("12.34") - 5 - Decimal("2.5")
    unused = lines[lines.commitment_discount_status == "Unused"]
    # the four hourly unused parts of the plan are one run of four hours; the RI's monthly one stays
    assert sorted(map(str, unused.effective_cost)) == ["3.55", "5.88"]
    assert sorted(unused.line_count) == [1, 4]
    assert set(unused.commitment_discount_id) == {SP, RI} and (unused.billed_cost == 0).all()
    categories = lines.groupby("charge_category").line_count.sum().to_dict()
    assert categories == {"Usage": 4 * 6 + 1, "Purchase": 6, "Tax": 1, "Credit": 2}
    purchases = lines[lines.charge_category == "Purchase"]
    assert set(purchases.effective_cost) == {Decimal(0)}
    assert set(purchases.commitment_discount_id) == {SP, RI}


def test_cur2_covered_usage_is_contracted_at_its_rate_before_the_commitment(cur2):
    """ContractedCost = quantity × ContractedUnitPrice on covered usage, as in AWS's FOCUS export.
    Before: a Savings Plan-covered p5 hour had ContractedUnitPrice 38.53 (the plan's rate) beside
    ContractedCost 55.04, and a reservation-covered hour 7.1 (its effective rate) beside its public
    on-demand cost 10.49264 (cloudgen eks 8705 on the contracted basis: does_not_reconcile, gap 0.169460);
    now both are priced at the rate of their ContractedCost."""
    lines = cur2.tables["lines"]
    covered = lines[lines.commitment_discount_status == "Used"].dropna(subset=["pricing_quantity"])
    rates = {kind: set(covered[covered.commitment_discount_type == kind].contracted_unit_price)
             for kind in ("Savings Plan", "Reservation")}
    assert rates == {"Savings Plan": {Decimal("55.04")}, "Reservation": {Decimal("10.49264")}}
    assert (covered.pricing_quantity * covered.contracted_unit_price == covered.contracted_cost).all()


def test_cur2_csv_export_with_json_map_columns(tmp_path, cur2):
    parquet = write_cur2(tmp_path / "x.parquet", cur2_rows())
    path = tmp_path / "export-00001.csv.gz"
    duckdb.sql(f"COPY (SELECT * REPLACE (to_json(product) AS product, to_json(resource_tags) AS resource_tags, "
               f"to_json(cost_category) AS cost_category, to_json(discount) AS discount) "
               f"FROM read_parquet('{parquet}')) TO '{path}' (HEADER, COMPRESSION gzip)")
    lines = read_cur(path, start=utc(2026, 9, 1), end=utc(2026, 10, 1)).tables["lines"]
    expected = cur2.tables["lines"]
    assert total(lines.billed_cost) == total(expected.billed_cost)
    assert total(lines.effective_cost) == total(expected.effective_cost)
    assert list(lines.tags) == list(expected.tags) and list(lines.extra) == list(expected.extra)


def test_cur2_parquet_with_json_text_map_columns(tmp_path, cur2):
    """A Parquet export whose MAP columns are VARCHAR JSON text is read as the CSV export's text is.
    Before: product and resource_tags were read as no MAP, every tag lost with no word (cloudgen eks
    10205: gateway 0.00 USD where the CSV export gives 14.372820)."""
    parquet = write_cur2(tmp_path / "x.parquet", cur2_rows())
    path = tmp_path / "export-00001.snappy.parquet"
    duckdb.sql(f"COPY (SELECT * REPLACE (CAST(to_json(product) AS VARCHAR) AS product, "
               f"CAST(to_json(resource_tags) AS VARCHAR) AS resource_tags) "
               f"FROM read_parquet('{parquet}')) TO '{path}' (FORMAT parquet)")
    lines = read_cur(path, start=utc(2026, 9, 1), end=utc(2026, 10, 1)).tables["lines"]
    expected = cur2.tables["lines"]
    assert total(lines.effective_cost) == total(expected.effective_cost)
    assert list(lines.tags) == list(expected.tags) and list(lines.extra) == list(expected.extra)
    p5 = lines[lines.resource_id == "i-0p5b"]
    assert json.loads(p5.tags.iloc[0]) == {"team": "ml", "service": "chat", "aws_eks_cluster_name": "inference-prod"}


def test_cur2_tags_and_instance_type_come_from_the_maps(cur2):
    lines = cur2.tables["lines"]
    p5 = lines[lines.resource_id == "i-0p5b"]
    assert json.loads(p5.tags.iloc[0]) == {"team": "ml", "service": "chat", "aws_eks_cluster_name": "inference-prod"}
    assert json.loads(p5.extra.iloc[0])["x_InstanceType"] == "p5.48xlarge"
    assert set(p5.service_name) == {"Amazon Elastic Compute Cloud"} and set(p5.region) == {"us-east-1"}


SPLIT_NOTE = ("8 split cost allocation rows (EKS pod / ECS task shares of an EC2 instance) read and kept apart "
              "from the lines: they share out their parent instance lines' cost, which the audit splits by "
              "telemetry instead (split cost 154.12 USD, unused cost 0.00 USD)")


def test_cur2_split_rows_are_kept_apart_and_named_in_the_notes(cur2):
    lines, split = cur2.tables["lines"], cur2.tables["split_summary"]
    assert not lines.resource_id.str.contains(":pod/").any()
    assert "split_rows" not in cur2.tables  # no table a row: one aggregate
    s = split.iloc[0]
    assert (s["rows"], s["money_rows"], s["money_at"]) == (8, 0, "")
    assert s["split_line_item_split_cost"] == 8 * Decimal("19.265")
    assert s["split_line_item_unused_cost"] == 0 and s["line_item_unblended_cost"] == 0
    notes = cur2.tables["notes"]
    split_notes = notes[notes.note.str.contains("split cost allocation")]
    assert list(split_notes.itertuples(index=False, name=None)) == [(6, "line_item_operation", SPLIT_NOTE)]


def split_rows_with_money() -> list[dict]:
    """The synthetic CUR 2.0 rows with each EKS split row billing 20.00 of its own."""
    return [dict(r, line_item_unblended_cost=20.0) if r["line_item_operation"] == "EKSPod-EC2" else r
            for r in cur2_rows()]


MONEY_NOTE = ("8 split cost allocation rows carry money of their own (export-00001.snappy.parquet:6, "
              "export-00001.snappy.parquet:7, export-00001.snappy.parquet:14 and 5 more): "
              "line_item_unblended_cost 160.00 USD, left out of the lines and the invoice total: a split row "
              "shares out its parent instance line's cost, which that line bills already (AWS writes 0 "
              "there), so counting it would bill the instance twice")


def test_split_rows_with_money_of_their_own_are_named_not_billed_twice(cur2, tmp_path):
    path = write_cur2(tmp_path / "export-00001.snappy.parquet", split_rows_with_money())
    frame = read_cur(path, start=utc(2026, 9, 1), end=utc(2026, 10, 1))
    lines = frame.tables["lines"]
    assert total(lines.billed_cost) == total(cur2.tables["lines"].billed_cost)  # the instances billed once
    s = frame.tables["split_summary"].iloc[0]
    assert (s["money_rows"], s["line_item_unblended_cost"]) == (8, Decimal("160"))
    notes = frame.tables["notes"]
    split_notes = notes[notes.note.str.contains("split cost allocation")]
    assert list(split_notes.note) == [SPLIT_NOTE, MONEY_NOTE]
    assert set(split_notes.row) == {6}


def test_a_line_that_is_its_own_split_parent_stays_money(tmp_path):
    row = dict(cur2_rows()[2], split_line_item_parent_resource_id="i-0p5b")  # the on-demand p5 hour
    lines = read_cur(write_cur2(tmp_path / "own.parquet", [row])).tables["lines"]
    assert list(lines.billed_cost) == [Decimal("55.04")]


def test_cur2_gpu_lines_classify_as_gpu_compute(cur2):
    classes = classify(cur2.tables["lines"], (), set(), set())
    p5 = classes[classes.extra.str.contains('"x_InstanceType":"p5.48xlarge"', regex=False)]
    assert line_total(p5) == 12 and set(p5.resource_class) == {"gpu_compute"}
    assert len(p5) == 3  # three charges (on demand, SP-covered, its negation), each a run of 4 hours
    assert set(p5.gpu_model) == {"H100 80GB"} and set(p5.gpus_per_instance) == {8}
    g6e = classes[classes.resource_id.str.startswith("i-0g6e")]
    assert set(g6e.resource_class) == {"gpu_compute"} and set(g6e.gpus_per_instance) == {4}
    assert set(classes[classes.commitment_discount_status == "Unused"].resource_class) == {"commitment_unused"}


# --- export folders and manifests ------------------------------------------------------------------

def legacy_export(root: Path, period_manifest: bool = True) -> Path:
    """``<prefix>/<report>/<period>/<assembly>/…`` with an old and a restated (newer) assembly."""
    period = root / "cur" / "gpu-report" / "20260901-20261001"
    old = [legacy_row(1, "1.00"), legacy_row(2, "1.00", 1)]
    new = [legacy_row(1, "1.10"), legacy_row(2, "1.10", 1), legacy_row(3, "2.00", 2)]
    for assembly, rows in (("a-old", old), ("b-new", new)):
        data = write_legacy(period / assembly / "gpu-report-00001.csv.gz", rows)
        key = f"cur/gpu-report/20260901-20261001/{assembly}/{data.name}"
        write_manifest(period / assembly / "gpu-report-Manifest.json", [key])
    os.utime(period / "a-old" / "gpu-report-Manifest.json", (1_700_000_000, 1_700_000_000))
    if period_manifest:
        write_manifest(period / "gpu-report-Manifest.json",
                       ["cur/gpu-report/20260901-20261001/b-new/gpu-report-00001.csv.gz"])
    return root


def test_legacy_folder_reads_only_the_newest_assembly(tmp_path):
    frame = read_cur(legacy_export(tmp_path), start=utc(2026, 9, 1), end=utc(2026, 10, 1))
    lines = frame.tables["lines"]
    assert frame.rows == 3 and total(lines.billed_cost) == Decimal("4.20")
    assert lines.line_id.iloc[0] == "cur/gpu-report/20260901-20261001/b-new/gpu-report-00001.csv.gz:1"
    assert json.loads(lines.tags.iloc[0]) == {"team": "ml"}


def test_without_period_manifest_the_newest_assembly_manifest_wins(tmp_path):
    root = legacy_export(tmp_path, period_manifest=False)
    assert total(read_cur(root).tables["lines"].billed_cost) == Decimal("4.20")
    period = root / "cur" / "gpu-report" / "20260901-20261001"
    os.utime(period / "a-old" / "gpu-report-Manifest.json", (1_900_000_000, 1_900_000_000))
    assert total(read_cur(root).tables["lines"].billed_cost) == Decimal("2.00")


def test_folder_without_manifest_reads_every_file(tmp_path):
    write_legacy(tmp_path / "a.csv", [legacy_row(1, "1.00")])
    write_legacy(tmp_path / "sub" / "b.csv.gz", [legacy_row(2, "2.00"), legacy_row(3, "3.00")])
    lines = read_cur(tmp_path).tables["lines"]
    assert list(lines.line_id) == ["a.csv:1", "sub/b.csv.gz:1", "sub/b.csv.gz:2"]
    assert total(lines.billed_cost) == Decimal("6.00")


def test_cur2_export_layout_uses_the_metadata_manifest(tmp_path):
    base = tmp_path / "src" / "exports" / "gpu-cur2"
    data = base / "data" / "BILLING_PERIOD=2026-09"
    rows = cur2_rows()
    write_cur2(data / "gpu-cur2-00001.snappy.parquet", rows[:20])
    write_cur2(data / "gpu-cur2-00002.snappy.parquet", rows[20:])
    stale = [dict(r, line_item_unblended_cost=1.0) for r in rows[:3]]  # an earlier delivery's file
    write_cur2(data / "gpu-cur2-stale.snappy.parquet", stale)
    listed = [f"s3://bucket/exports/gpu-cur2/data/BILLING_PERIOD=2026-09/gpu-cur2-0000{i}.snappy.parquet"
              for i in (1, 2)]
    write_manifest(base / "metadata" / "BILLING_PERIOD=2026-09" / "gpu-cur2-Manifest.json", listed, "dataFiles")
    frame = read_cur(tmp_path / "src", start=utc(2026, 9, 1), end=utc(2026, 10, 1))
    whole = write_cur2(tmp_path / "reference" / "whole.parquet", rows)
    expected = read_cur(whole, start=utc(2026, 9, 1), end=utc(2026, 10, 1)).tables["lines"]
    lines = frame.tables["lines"]
    assert frame.rows == len(rows)
    assert total(lines.billed_cost) == total(expected.billed_cost)
    assert total(lines.effective_cost) == total(expected.effective_cost)
    assert not lines.line_id.str.contains("stale").any()
    assert lines.line_id.iloc[0] == "exports/gpu-cur2/data/BILLING_PERIOD=2026-09/gpu-cur2-00001.snappy.parquet:1"


def test_manifest_naming_a_missing_file_is_an_input_error(tmp_path):
    write_legacy(tmp_path / "20260901-20261001" / "x" / "r-1.csv.gz", [legacy_row(1, "1")])
    write_manifest(tmp_path / "20260901-20261001" / "r-Manifest.json", ["p/r/20260901-20261001/y/r-1.csv.gz"])
    (error,) = raises(tmp_path)
    assert error.path.endswith("r-Manifest.json") and "y/r-1.csv.gz" in error.message


# --- bad input ------------------------------------------------------------------------------------

def test_missing_unblended_cost_names_file_and_column(tmp_path):
    header = [h for h in LEGACY_HEADER if h != "lineItem/UnblendedCost"]
    path = write_legacy(tmp_path / "bad.csv", [legacy_row(1, "1")[:13] + legacy_row(1, "1")[14:]], header)
    (error,) = raises(path)
    assert error.path == str(path) and error.column == "lineItem/UnblendedCost"


def test_unparseable_amount_names_file_row_and_column(tmp_path):
    write_legacy(tmp_path / "a.csv", [legacy_row(1, "1.00")])
    bad = write_legacy(tmp_path / "b.csv", [legacy_row(2, "2.00"), legacy_row(3, "1.00", **{"lineItem/UnblendedCost": "1.2.5"})])
    (error,) = raises(tmp_path)
    assert (error.path, error.row, error.column) == (str(bad), 2, "lineItem/UnblendedCost")
    assert "1.2.5" in str(error)


@pytest.mark.parametrize("value, shown", [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")])
def test_a_double_amount_that_is_not_a_number_is_named(tmp_path, value, shown):
    """A CUR 2.0 amount column is DOUBLE: checked as a number (no text made of it), named as before."""
    rows = cur2_rows()
    rows[2] = {**rows[2], "line_item_unblended_cost": value}
    rows[4] = {**rows[4], "pricing_public_on_demand_cost": value}
    path = write_cur2(tmp_path / "x.parquet", rows)
    errors = raises(path, start=utc(2026, 9, 1), end=utc(2026, 10, 1))
    assert [(e.row, e.column) for e in errors] == [(3, "line_item_unblended_cost"),
                                                   (5, "pricing_public_on_demand_cost")]
    assert all(f"unparseable amount '{shown}'" in str(e) for e in errors)


def test_a_missing_double_amount_is_named(tmp_path):
    rows = cur2_rows()
    rows[1] = {**rows[1], "line_item_unblended_cost": None}
    (error,) = raises(write_cur2(tmp_path / "x.parquet", rows), start=utc(2026, 9, 1), end=utc(2026, 10, 1))
    assert (error.row, error.column) == (2, "line_item_unblended_cost") and "missing amount" in str(error)


def test_unknown_line_item_type_and_bad_timestamp(tmp_path):
    path = write_legacy(tmp_path / "c.csv", [
        legacy_row(1, "1", **{"lineItem/LineItemType": "Mystery"}),
        legacy_row(2, "1", **{"lineItem/UsageStartDate": "2026-09-31T00:00:00Z"})])
    errors = raises(path)
    assert {(e.row, e.column) for e in errors} == {(1, "lineItem/LineItemType"), (2, "lineItem/UsageStartDate")}


def test_a_timestamp_past_2262_is_out_of_range(tmp_path):
    """9999-09-01T04:00:00Z was "unparseable timestamp"."""
    path = write_legacy(tmp_path / "c.csv", [legacy_row(1, "1", **{"lineItem/UsageStartDate": "9999-09-01T04:00:00Z"})])
    (error,) = raises(path)
    assert str(error) == (f"{path}: row 1, column lineItem/UsageStartDate: timestamp out of the supported range "
                          "'9999-09-01T04:00:00Z' (expected a timestamp from 1678-01-01 to before 2262-01-01 "
                          "(the span of pandas' datetime64[ns]))")


def test_focus_check_errors_are_retold_per_file(tmp_path):
    write_legacy(tmp_path / "a.csv", [legacy_row(1, "1.00")])
    bad = write_legacy(tmp_path / "b.csv", [legacy_row(1, "1.00"), legacy_row(
        5, "1.00", **{"lineItem/UsageStartDate": "2026-09-01T05:00:00Z",
                      "lineItem/UsageEndDate": "2026-09-01T04:00:00Z"})])
    errors = raises(tmp_path)
    by_row = {(e.path, e.row): e for e in errors}
    assert "duplicate line" in by_row[(str(bad), 1)].message
    assert "row 1 of a.csv" in by_row[(str(bad), 1)].message
    assert by_row[(str(bad), 2)].column == "lineItem/UsageEndDate"


# --- window, currency ------------------------------------------------------------------------------

def test_window_keeps_overlapping_lines_and_counts_every_row():
    frame = read_cur(STEP1, start=utc(2019, 11, 26), end=utc(2019, 11, 26, 12))
    lines = frame.tables["lines"]
    assert frame.rows == 7850 and 0 < len(lines) < 7850
    assert (lines.start < "2019-11-26T12:00:00Z").all()


def test_file_without_currency_takes_the_case_currency(tmp_path):
    header = [h for h in LEGACY_HEADER if h != "lineItem/CurrencyCode"]
    row = legacy_row(1, "1.00")
    path = write_legacy(tmp_path / "eur.csv", [row[:11] + row[12:]], header)
    assert set(read_cur(path, currency="EUR").tables["lines"].currency) == {"EUR"}


# --- a whole audit ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("basis", ["billed", "effective"])
def test_workshop_day_through_the_whole_audit(tmp_path, basis):
    path = LABS / "Dec2018-WorkshopCUR-00001.snappy.parquet"
    billing_case(tmp_path, "workshop-cur", ("2018-12-01", "2018-12-02"), basis, format="cur", path=path)
    result = run_audit(load_case(tmp_path))
    doc = to_dict(result)
    lines = result.lines
    expected = total(lines.billed_cost if basis == "billed" else lines.effective_cost)
    assert Decimal(doc["total"]) == expected.quantize(Decimal("0.01"))
    assert sum(Decimal(b["amount"]) for b in doc["buckets"].values()) == Decimal(doc["total"])
    assert Decimal(doc["bridge"]["other_billed_to_effective"]) == 0


def test_the_savings_plans_terms_are_the_commitments():
    """The lab's two Savings Plans carry their one-year term on every line (savings_plan_end_time):
    before, no reader took it, and a saving on committed capacity had no known end (t_c)."""
    frame = read_cur(STEP5, start=utc(2019, 11, 29), end=utc(2019, 12, 1))
    terms = frame.tables["commitments"]
    assert list(terms.commitment_id) == [
        "arn:aws:savingsplans::836060457634:savingsplan/8ef24dee-bd31-42d2-afe6-7e944568b9bd",
        "arn:aws:savingsplans::836060457634:savingsplan/b654b6aa-82eb-4161-848e-4440333ca6f7"]
    assert set(terms.commitment_type) == {"Savings Plan"} and set(terms.category) == {"Spend"}
    assert set(terms.end) == {datetime(2020, 11, 28, 21, 5, 39, tzinfo=timezone.utc)}
    assert set(terms.start) == {datetime(2019, 11, 29, 21, 5, 40, tzinfo=timezone.utc)}
    # the ids are the lines' CommitmentDiscountId: the plan links a saving to the terms by them
    lines = frame.tables["lines"]
    assert set(terms.commitment_id) <= set(lines.commitment_discount_id)


@pytest.mark.slow
def test_the_reserved_instances_terms_are_the_commitments():
    path = LABS / "Dec2018-WorkshopCUR-00001.snappy.parquet"
    terms = read_cur_once(path, utc(2018, 12, 1), utc(2019, 1, 1)).tables["commitments"]
    assert len(terms) and terms.commitment_id.str.contains(":reserved-instances/").all()
    assert set(terms.commitment_type) == {"Reserved Instance"} and set(terms.category) == {"Usage"}
    first = terms[terms.commitment_id.str.endswith("/3a2944f2-fbdc-4f9a-86f7-4b83dc6e058a")].iloc[0]
    assert (first.start, first.end) == (datetime(2018, 4, 24, 0, 34, 1, tzinfo=timezone.utc),
                                        datetime(2019, 4, 24, 0, 34, tzinfo=timezone.utc))


def test_a_legacy_csv_s_term_columns_are_read_and_a_line_without_an_end_leaves_it_out(tmp_path):
    """Legacy CSV spelling (savingsPlan/EndTime); an ARN whose lines give no end is not listed."""
    header = LEGACY_HEADER + ["savingsPlan/SavingsPlanARN", "savingsPlan/StartTime", "savingsPlan/EndTime"]
    rows = [legacy_row(1, "1.0") + [SP, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"],
            legacy_row(2, "1.0", hour=1) + [SP, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"],
            legacy_row(3, "1.0", hour=2) + ["arn:aws:savingsplans::9:savingsplan/no-end", "", ""]]
    path = write_legacy(tmp_path / "cur.csv", rows, header=header)
    terms = read_cur(path).tables["commitments"]
    assert list(terms.commitment_id) == [SP] and terms.end.iloc[0] == datetime(2027, 1, 1, tzinfo=timezone.utc)


def test_an_unreadable_commitment_date_is_the_reader_s_error_naming_its_row_and_column(tmp_path):
    """Before, a term's end that did not read as a timestamp left the commitment out with no word,
    and the plan said "end not known" of a commitment whose line gave one."""
    header = LEGACY_HEADER + ["savingsPlan/SavingsPlanARN", "savingsPlan/StartTime", "savingsPlan/EndTime"]
    rows = [legacy_row(1, "1.0") + [SP, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"],
            legacy_row(2, "1.0", hour=1) + [SP, "2026-01-01T00:00:00Z", "next year"]]
    path = write_legacy(tmp_path / "cur.csv", rows, header=header)
    with pytest.raises(InputError) as caught:
        read_cur(path)
    error = caught.value
    assert (error.row, error.column) == (2, "savingsPlan/EndTime")  # the second line
    assert "unparseable commitment date" in str(error) and "next year" in str(error)


@pytest.mark.parametrize("twice", ["line_item_unblended_cost", "resourceTags/user:team"])
def test_a_column_twice_is_the_reader_s_error(tmp_path, twice):
    """Before, a second spelling of a field (CUR 2.0's beside the legacy one) was read in its place
    with no word: every line's unblended cost 1000, billed 26.65 → 1,765,000.00 on the lab's export."""
    header = LEGACY_HEADER + [twice]
    path = write_legacy(tmp_path / "cur.csv", [legacy_row(1, "1.0") + ["1000"]], header=header)
    with pytest.raises(InputError) as caught:
        read_cur(path)
    assert caught.value.column == twice and "duplicate column" in str(caught.value)


def test_tag_columns_that_differ_in_case_are_two_tags(tmp_path):
    header = LEGACY_HEADER + ["resourceTags/user:Team"]
    lines = read_cur(write_legacy(tmp_path / "cur.csv", [legacy_row(1, "1.0") + ["ml"]], header=header)).tables["lines"]
    assert len(lines) == 1


def test_an_amount_out_of_range_is_one_error_in_the_cur_s_terms(tmp_path):
    """1e400 gave three errors, two naming EffectiveCost and ContractedCost, which a CUR has not."""
    rows = [legacy_row(1, "1.0"), legacy_row(2, "1e400", hour=1)]
    errors = raises(write_legacy(tmp_path / "cur.csv", rows))
    # the row gives its rate as its cost: one error a cell, each in the file's own column
    assert sorted((e.row, e.column) for e in errors) == [(2, "lineItem/UnblendedCost"), (2, "lineItem/UnblendedRate")]
    assert all("number out of range '1e400'" in str(e) for e in errors)


def test_a_second_currency_is_named_at_its_own_row_and_column(tmp_path):
    rows = [legacy_row(n, "1.0", hour=n) for n in range(1, 4)]
    rows[2][LEGACY_HEADER.index("lineItem/CurrencyCode")] = "EUR"
    (error,) = raises(write_legacy(tmp_path / "cur.csv", rows))
    assert (error.row, error.column) == (3, "lineItem/CurrencyCode")
    assert "'USD' (first on row 1), 'EUR' (first on row 3)" in str(error)


def test_an_empty_cur_is_named_in_the_cur_s_terms(tmp_path):
    """The message asked for "a FOCUS CSV header" of a CUR."""
    import gzip

    for name, data in (("empty.csv", b""), ("empty.csv.gz", gzip.compress(b""))):
        empty = tmp_path / name
        empty.write_bytes(data)
        (error,) = raises(empty)
        assert "is empty" in str(error) and "FOCUS" not in str(error), name


def test_a_header_alone_is_said_to_hold_no_line(tmp_path):
    """It was "column ChargePeriodStart: no billing line falls in the window", a column no CUR has."""
    import shutil
    import subprocess
    import sys

    from tests.paths import FIXTURES, ROOT

    case = tmp_path / "wa"
    shutil.copytree(FIXTURES / "wa_labs_efficiency", case)
    cur = next((case / "data").glob("*_cur_*.csv.gz"))
    import gzip
    cur.write_bytes(gzip.compress(gzip.decompress(cur.read_bytes()).split(b"\n", 1)[0] + b"\n"))
    done = subprocess.run([sys.executable, "-m", "audit", "validate", str(case)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no billing line falls in the window 2019-11-29 – 2019-12-01; ordering-cur: it holds no line at all" \
        in done.stderr and "ChargePeriodStart" not in done.stderr


def test_a_line_repeating_another_s_id_and_interval_with_other_usage_dates_is_noted(tmp_path):
    """Row 3 carries row 1's identity/LineItemId and identity/TimeInterval but bills 03:00-04:00 at
    11.11. Before: read as a line of its own, nothing said. Now: all are read as billed (4 lines,
    14.11) and a note names the two lines and their dates; row 4, row 2's id in the next interval
    (its own dates), is no such line."""
    header = LEGACY_HEADER + ["identity/TimeInterval"]
    interval = "2026-09-01T00:00:00Z/2026-09-01T01:00:00Z"
    rows = [legacy_row(1, "1.00") + [interval], legacy_row(2, "1.00") + [interval],
            legacy_row(1, "11.11", hour=3) + [interval],
            legacy_row(2, "1.00", hour=1) + ["2026-09-01T01:00:00Z/2026-09-01T02:00:00Z"]]
    frame = read_cur(write_legacy(tmp_path / "dup.csv", rows, header))
    lines = frame.tables["lines"]
    assert line_total(lines) == 4 and total(lines.billed_cost) == Decimal("14.11")
    notes = frame.tables["notes"]
    assert notes[["row", "column"]].values.tolist() == [[3, "identity/LineItemId"]]
    assert notes.note.tolist() == [
        "line dup.csv:3 repeats the identity/LineItemId and identity/TimeInterval of line dup.csv:1 with other "
        "usage dates (2026-09-01T03:00:00Z to 2026-09-01T04:00:00Z, not 2026-09-01T00:00:00Z to "
        "2026-09-01T01:00:00Z): both are read as billed"]


def test_cur2_tax_and_credits_list_at_their_cost_a_negotiated_discount_at_0(tmp_path):
    """FOCUS lists a credit at its BilledCost and a tax on the list cost of what it taxes (ListCost,
    where ListUnitPrice is null); AWS writes public on-demand cost 0 on these lines. Before: the tax
    12.34 and the credit −5 listed 0, so the list basis left them out while the contracted basis
    counted them. Now both list and contract at their cost; the EdpDiscount −2.5, the gap between list
    and contracted prices, lists 0 and is contracted at −2.5."""
    rows = [dict(r, pricing_public_on_demand_cost=0.0) if r["line_item_line_item_type"] in ("Tax", "Credit", "EdpDiscount")
            else r for r in cur2_rows()]
    lines = read_cur(write_cur2(tmp_path / "x.parquet", rows), start=utc(2026, 9, 1), end=utc(2026, 10, 1)).tables["lines"]
    got = {kind: (total(line_type(lines, kind).list_cost), total(line_type(lines, kind).contracted_cost))
           for kind in ("Tax", "Credit", "EdpDiscount")}
    assert got == {"Tax": (Decimal("12.34"), Decimal("12.34")), "Credit": (Decimal(-5), Decimal(-5)),
                   "EdpDiscount": (Decimal(0), Decimal("-2.5"))}
