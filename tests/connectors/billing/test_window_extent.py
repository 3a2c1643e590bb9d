"""A window that no billing line falls in is named with where the lines do lie (rule 5).

The audit refused such a case with "no billing line falls in the window …" and nothing more: the user
was left to find out that the export covers another month. Every local billing reader now notes, for a
source with lines but none in the window, the first and last moment of its charge periods, and the
audit's refusal quotes it per source.
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.registry import resolve
from tests.audit.cli.test_cli import costaudit
from tests.connectors.billing.test_focus import SAMPLE
from tests.paths import DATA, FIXTURES
from tests.servers.gcp_export import row

FAR = (datetime(1990, 1, 1, tzinfo=timezone.utc), datetime(1990, 2, 1, tzinfo=timezone.utc))
SOURCES = {
    "focus": ("focus", SAMPLE),
    "cur-csv": ("cur", FIXTURES / "wa_labs_efficiency" / "data" / "workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz"),
    "cur-parquet": ("cur", DATA / "billing" / "aws_wa_labs" / "Dec2018-WorkshopCUR-00001.snappy.parquet"),
    "azure": ("azure", FIXTURES / "azure_synthetic" / "mca_amortized_gpu.csv"),
}


def tables(fmt: str, path: Path, window=FAR) -> dict:
    """The tables of ``path`` read as ``fmt`` over ``window``."""
    spec = SourceSpec(name="bill", kind="billing", format=fmt, path=path, options={})
    ctx = ReadContext(start=window[0], end=window[1], currency="USD")
    return resolve(fmt)(spec, ctx).read().tables


def extent(found: dict) -> list[str]:
    """The source's notes that say where its charge periods lie."""
    notes = found.get("notes")
    return [] if notes is None else [n for n in notes["note"] if n.startswith("no line in the window")]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_source_with_no_line_in_the_window_says_where_its_lines_lie(name):
    fmt, path = SOURCES[name]
    everything = tables(fmt, path, (datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(2200, 1, 1, tzinfo=timezone.utc)))
    assert len(everything["lines"]) and not extent(everything)  # a window with lines: no such note
    found = tables(fmt, path)
    assert found["lines"].empty
    (note,) = extent(found)
    first = everything["lines"]["start"].min()
    last = everything["lines"]["end"].max()
    assert note == (f"no line in the window: its charge periods run from {first:%Y-%m-%d %H:%M} "
                    f"to {last:%Y-%m-%d %H:%M} UTC")


def test_a_gcp_export_with_no_line_in_the_window_says_where_its_lines_lie(tmp_path):
    path = tmp_path / "export.jsonl"
    hours = [datetime(2026, 9, 1, h, tzinfo=timezone.utc) for h in (3, 7)]
    path.write_text("".join(json.dumps(dict(row(h, "Compute Engine", "N2 Instance Core", "1.5"), currency="USD")) + "\n"
                            for h in hours))
    assert extent(tables("gcp_billing", path)) == [
        "no line in the window: its charge periods run from 2026-09-01 03:00 to 2026-09-01 08:00 UTC"]


def test_the_audit_refusal_quotes_each_source(tmp_path):
    case = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", case)
    text = (case / "case.toml").read_text()
    (case / "case.toml").write_text(text.replace('window = ["2026-09-01", "2026-10-01"]',
                                                 'window = ["2026-11-01", "2026-12-01"]'))
    done = costaudit("validate", case)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert ("no billing line falls in the window 2026-11-01 – 2026-12-01; aws-focus: no line in the window: "
            "its charge periods run from 2026-09-01 00:00 to 2026-10-01 00:00 UTC") in done.stderr


def test_a_source_with_no_line_in_the_window_beside_one_with_lines_is_refused(tmp_path):
    """Before: a traceback (TypeError comparing the empty source's dates); without it the source's lines
    would have been dropped unnamed. Now the source is refused with where its lines lie."""
    case = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", case)
    toml = case / "case.toml"
    toml.write_text(toml.read_text() + f'\n[[billing]]\nname = "sample"\nformat = "focus"\npath = "{SAMPLE}"\n')
    done = costaudit("validate", case)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert (f"costaudit: error: {SAMPLE}: column ChargePeriodStart: no line of billing source 'sample' falls in the "
            "window 2026-09-01 – 2026-10-01; sample: no line in the window: its charge periods run from "
            "2024-09-01 00:00 to 2024-10-01 00:00 UTC (expected lines whose charge period overlaps the window, else "
            "the source left out of the case)") in " ".join(done.stderr.split())


# --- lines wholly outside the window, and charge periods outside their billing period ----------------

BILL = ("BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,BilledCost,"
        "EffectiveCost,BillingCurrency\n"
        "2026-09-01,2026-10-01,2026-09-01T00:00:00Z,2026-09-01T01:00:00Z,Usage,10.00,9.00,USD\n"
        "2026-08-01,2026-09-01,2026-08-31T23:00:00Z,2026-09-01T00:00:00Z,Usage,2.00,1.50,USD\n"
        "2026-09-01,2026-10-01,1970-01-01T00:00:00.000Z,1970-01-01T01:00:00.000Z,Usage,55.04,55.04,USD\n"
        "2026-09-01,2026-10-01,2099-12-31T00:00:00.000Z,2099-12-31T01:00:00.000Z,Usage,55.04,50.00,USD\n"
        "2026-09-01,2026-10-01,2026-09-01T01:00:00+05:30,2026-09-01T02:00:00+05:30,Usage,1.00,1.00,USD\n")
SEPTEMBER_1 = (datetime(2026, 9, 1, tzinfo=timezone.utc), datetime(2026, 9, 2, tzinfo=timezone.utc))


def outside(found: dict) -> list[str]:
    notes = found.get("notes")
    return [] if notes is None else [n for n in notes["note"] if "outside" in n]


def test_lines_wholly_outside_the_window_are_named_and_an_out_of_range_date_is_noted(tmp_path):
    """The verifier's repro (cloudgen eks 10931 with rows 3 and 4 dated 1970 and 2099, row 3 at +05:30):
    before, the lines left the audit with no note; now the source's notes say how many, their money,
    their periods and rows; a charge period outside the line's billing period has a note of its own
    (audit/fit_sources.py makes it a warning), a line of the month before (its own billing period) not."""
    path = tmp_path / "bill.csv"
    path.write_text(BILL, encoding="utf-8")
    found = tables("focus", path, SEPTEMBER_1)
    assert int(found["lines"]["line_count"].sum()) == 1
    assert outside(found) == [
        "4 lines wholly outside the window (2026-09-01 00:00 to 2026-09-02 00:00 UTC), left out: 113.08 USD billed, "
        "107.54 USD effective; charge periods from 1970-01-01 00:00 to 2099-12-31 01:00 UTC; rows bill.csv:2, "
        "bill.csv:3, bill.csv:4, …",
        "charge period outside its billing period: 2 lines (110.08 USD billed) charged from 1970-01-01 00:00 to "
        "2099-12-31 01:00 UTC, outside the billing period of the line: bill.csv:3 (1970-01-01 00:00 in 2026-09-01 "
        "to 2026-10-01), bill.csv:4 (2099-12-31 00:00 in 2026-09-01 to 2026-10-01)"]
    assert found["notes"].query("note.str.contains('outside')")["row"].tolist() == [2, 3]


def test_a_correction_of_an_earlier_period_is_no_out_of_range_date(tmp_path):
    """FOCUS bills a correction of a past period in the current billing period with the charge period of
    the line it corrects (the verifier's eks 11001 row 365: a refund of an August hour in the September bill
    was warned of as a date out of range). It is still a line outside the window, and said so."""
    bill = BILL.replace("ChargeCategory,", "ChargeCategory,ChargeClass,").replace(",Usage,", ",Usage,,")
    bill += "2026-09-01,2026-10-01,2026-08-20T00:00:00Z,2026-08-20T01:00:00Z,Usage,Correction,-55.04,-55.04,USD\n"
    path = tmp_path / "bill.csv"
    path.write_text(bill, encoding="utf-8")
    notes = outside(tables("focus", path, SEPTEMBER_1))
    assert notes[0].startswith("5 lines wholly outside the window") and "bill.csv:3 (1970-01-01" in notes[1]
    assert notes[1].startswith("charge period outside its billing period: 2 lines (110.08 USD billed)")


OUTSIDE_NOTES = {
    "azure": ((2024, 5, 2), (2024, 5, 3), 3,
              "3 lines wholly outside the window (2024-05-02 00:00 to 2024-05-03 00:00 UTC), left out: 652.73 USD "
              "billed, 2,572.73 USD effective; charge periods from 2024-05-01 00:00 to 2024-05-02 00:00 UTC; rows "
              "mca_amortized_gpu.csv:1, mca_amortized_gpu.csv:2, mca_amortized_gpu.csv:3"),
    "cur-csv": ((2019, 11, 30), (2019, 11, 30, 12), 2956,
                "2,985 lines wholly outside the window (2019-11-30 00:00 to 2019-11-30 12:00 UTC), left out: 36.11 USD "
                "billed, 36.11 USD effective; charge periods from 2019-11-29 20:00 to 2019-11-30 21:00 UTC; rows "
                "workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz:1, "
                "workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz:3, "
                "workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz:5, …"),
    "cur-parquet": ((2018, 12, 10), (2018, 12, 11), 2858,
                    "88,409 lines wholly outside the window (2018-12-10 00:00 to 2018-12-11 00:00 UTC), left out: "
                    "247.69 USD billed, 471.46 USD effective; charge periods from 2018-12-01 00:00 to 2019-01-01 00:00 "
                    "UTC; rows Dec2018-WorkshopCUR-00001.snappy.parquet:10, Dec2018-WorkshopCUR-00001.snappy.parquet:11, "
                    "Dec2018-WorkshopCUR-00001.snappy.parquet:12, …"),
    "focus": ((2024, 9, 10), (2024, 9, 11), 29,
              "971 lines wholly outside the window (2024-09-10 00:00 to 2024-09-11 00:00 UTC), left out: 20.16 USD "
              "billed, 14.98 USD effective; charge periods from 2024-09-01 00:00 to 2024-10-01 00:00 UTC; rows "
              "focus_sample_1000.csv:1, focus_sample_1000.csv:2, focus_sample_1000.csv:3, …"),
}


@pytest.mark.parametrize("name", sorted(OUTSIDE_NOTES))
def test_every_reader_names_the_lines_outside_the_window(name):
    """Every local reader (FOCUS, CUR CSV and Parquet, Azure) names the lines it leaves out as outside the
    window, by the file's own rows; the lines kept and those named make the file's lines. The FOCUS
    sample's line billed 2024-09-30 22:00 in October's billing period (2 h early, a provider's time zone) is no
    out-of-range date."""
    fmt, path = SOURCES[name]
    start, end, kept, note = OUTSIDE_NOTES[name]
    found = tables(fmt, path, (datetime(*start, tzinfo=timezone.utc), datetime(*end, tzinfo=timezone.utc)))
    assert int(found["lines"]["line_count"].sum()) == kept
    assert outside(found) == [note]


# --- the GCP export's rows wholly outside the window (its reader drops them in its own aggregate) ------------

GKE_EXPORT = "gcp_billing_export_resource_v1.jsonl"
CASE_DAY = (datetime(2026, 9, 1, tzinfo=timezone.utc), datetime(2026, 9, 2, tzinfo=timezone.utc))


@pytest.fixture(scope="module")
def gke_records(tmp_path_factory) -> list[dict]:
    """The export records of cloudgen's GKE case, seed 5 (505 rows over 2026-09-01, no credit)."""
    from benchmarks.cloudgen.generate import generate

    folder = tmp_path_factory.mktemp("gke") / "case"
    generate("gke", 5, folder, billing="native")
    return [json.loads(line) for line in (folder / "billing" / GKE_EXPORT).read_text().splitlines()]


def moved(record: dict, start: str, end: str, credit: str | None = None) -> dict:
    """``record`` at another usage period, with a credit of ``credit`` where given."""
    credits = [{"name": "Sustained use", "amount": float(credit), "full_name": "Sustained use", "id": "sud",
                "type": "SUSTAINED_USAGE_DISCOUNT"}] if credit else record["credits"]
    return {**record, "usage_start_time": start, "usage_end_time": end, "credits": credits}


def test_gcp_export_rows_dated_1970_and_2099_are_named_as_outside_the_window(tmp_path, gke_records):
    """cloudgen gke 5 with rows 3 and 4 moved to 1970 and 2099 (row 4 with a 0.50 credit): before, the rows
    vanished inside the GCP aggregate with no note (503 rows read of 505, total down 10.51); now the note the
    FOCUS readers write, in its words: billed = their cost (5.2572 each), effective = cost + credits."""
    records = list(gke_records)
    records[2] = moved(records[2], "1970-01-01 00:00:00 UTC", "1970-01-01 01:00:00 UTC")
    records[3] = moved(records[3], "2099-12-31 00:00:00 UTC", "2099-12-31 01:00:00 UTC", credit="-0.5")
    path = tmp_path / GKE_EXPORT
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    spec = SourceSpec(name="bill", kind="billing", format="gcp_billing", path=path, options={})
    frame = resolve("gcp_billing")(spec, ReadContext(start=CASE_DAY[0], end=CASE_DAY[1], currency="USD")).read()
    assert frame.rows == 503
    assert outside(frame.tables) == [
        "2 lines wholly outside the window (2026-09-01 00:00 to 2026-09-02 00:00 UTC), left out: 10.51 USD billed, "
        "10.01 USD effective; charge periods from 1970-01-01 00:00 to 2099-12-31 01:00 UTC; rows "
        f"{GKE_EXPORT}:3, {GKE_EXPORT}:4"]
    assert frame.tables["notes"].query("note.str.contains('outside')")["row"].tolist() == [3]


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_a_window_narrower_than_the_gcp_export_names_the_rest(tmp_path, gke_records, fmt):
    """The GKE day read over its first 12 hours: the 252 rows of the afternoon (rows 13 on; the one daily row
    that straddles noon is read and clipped) are a note, 2,230.466174151 USD of cost, 0.25 less effective
    for the credit put on row 13 (Parquet: FLOAT64 money, as the export stores it)."""
    from tests.servers.gcp_export import write_parquet

    records = list(gke_records)
    records[12] = moved(records[12], records[12]["usage_start_time"], records[12]["usage_end_time"], credit="-0.25")
    if fmt == "json":
        path = tmp_path / GKE_EXPORT
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
    else:
        path = write_parquet(records, tmp_path / "export.parquet")
    found = tables("gcp_billing", path, (CASE_DAY[0], datetime(2026, 9, 1, 12, tzinfo=timezone.utc)))
    assert outside(found) == [
        "252 lines wholly outside the window (2026-09-01 00:00 to 2026-09-01 12:00 UTC), left out: 2,230.47 USD "
        "billed, 2,230.22 USD effective; charge periods from 2026-09-01 12:00 to 2026-09-02 00:00 UTC; rows "
        f"{path.name}:13, {path.name}:14, {path.name}:15, …"]
