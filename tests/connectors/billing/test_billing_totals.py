"""Billing totals pushed down to DuckDB: the same numbers as the connectors, without their lines."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from decimal import Decimal, localcontext
from pathlib import Path

import duckdb
import pytest

from audit.billing_summary import summarise
from audit.classify import classify
from audit.lines import gpu_hours_of
from benchmarks.billing.generate import generate
from connectors.base import ReadContext, SourceSpec
from connectors.billing.totals import read_totals
from connectors.errors import InputError, InputErrors
from connectors.registry import resolve
from schemas.billing import line_total
from tests.builders import LEGACY_HEADER, cur2_rows, instance_hour, legacy_row, write_cur2, write_legacy, write_manifest
from tests.paths import DATA, DEMO

BILLING = DATA / "billing"
LABS = BILLING / "aws_wa_labs"
FOCUS_SAMPLE = BILLING / "focus_sample_data" / "focus_sample_1000.csv"
DEMO_FOCUS = DEMO / "billing" / "focus_2026-09.csv.gz"
ALWAYS = (datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(2200, 1, 1, tzinfo=timezone.utc))
SEPTEMBER = (datetime(2026, 9, 1, tzinfo=timezone.utc), datetime(2026, 10, 1, tzinfo=timezone.utc))


def by_key(table: dict) -> dict:
    """{name: (billed, effective)} to 10^-20, trailing zeros dropped. A line clipped to the window
    counts a share that need not terminate (an hour of a month: 1/720), and the pushdown divides a
    group's sum where the connector divides each line: the 28th digit may differ, never the 20th."""
    return {name: (places(b), places(e)) for name, (b, e) in table.items()}


def places(value) -> Decimal:
    """``value`` rounded to 10^-20, trailing zeros dropped."""
    with localcontext() as context:
        context.prec = 60
        return Decimal(value).quantize(Decimal("1e-20")).normalize()


def pushdown(path: Path, fmt: str, window=ALWAYS) -> dict:
    """Exact totals through the DuckDB pushdown."""
    totals = read_totals(path, fmt, window, "USD")
    return {"category": by_key(totals.by_category), "service": by_key(totals.by_service),
            "currency": by_key(totals.by_currency), "rows": totals.rows, "lines": totals.lines,
            "gpu": {k: v.normalize() for k, v in totals.gpu_hours.items()}}


def connector(path: Path, fmt: str, window=ALWAYS) -> dict:
    """Exact totals through the connector and the classifier, line by line (the reference)."""
    frame = resolve(fmt)(SourceSpec(path.name, "billing", fmt, path, {}), ReadContext(*window, "USD")).read()
    lines = classify(frame.tables["lines"], (), set(), set())
    out = {key: defaultdict(lambda: [Decimal(0), Decimal(0)]) for key in ("category", "service", "currency")}
    gpu: dict[str, Decimal] = defaultdict(Decimal)
    for line in lines.to_dict("records"):
        for key, name in (("category", line["charge_category"]), ("service", line["service_name"]),
                          ("currency", line["currency"])):
            out[key][name][0] += line["billed_cost"]
            out[key][name][1] += line["effective_cost"]
        if line["resource_class"] == "gpu_compute":
            gpu[line["instance_type"] or line["gpu_model"] or "(unknown)"] += gpu_hours_of(line)
    result = {key: by_key(table) for key, table in out.items()}
    result.update(rows=frame.rows, lines=line_total(lines), gpu={k: v.normalize() for k, v in gpu.items()})
    return result


def cur2_export(root: Path, rows: list[dict]) -> Path:
    """A CUR 2.0 export folder: two current files, a stale one, the metadata manifest."""
    base = root / "exports" / "gpu-cur2"
    data = base / "data" / "BILLING_PERIOD=2026-09"
    write_cur2(data / "gpu-cur2-00001.snappy.parquet", rows[:20])
    write_cur2(data / "gpu-cur2-00002.snappy.parquet", rows[20:])
    write_cur2(data / "gpu-cur2-stale.snappy.parquet", [dict(r, line_item_unblended_cost=1.0) for r in rows[:3]])
    listed = [f"s3://bucket/exports/gpu-cur2/data/BILLING_PERIOD=2026-09/gpu-cur2-0000{i}.snappy.parquet"
              for i in (1, 2)]
    write_manifest(base / "metadata" / "BILLING_PERIOD=2026-09" / "gpu-cur2-Manifest.json", listed, "dataFiles")
    return root


# --- the same numbers as the connectors ------------------------------------------------------

def test_focus_sample_matches_the_connector():
    totals = pushdown(FOCUS_SAMPLE, "focus")
    assert totals == connector(FOCUS_SAMPLE, "focus")
    assert totals["currency"] == {"USD": (Decimal("20.52022672899"), Decimal("14.97651418586"))}
    assert set(totals["gpu"]) == {"g5.4xlarge", "g3.4xlarge"}


def test_focus_parquet_with_double_amounts_matches_the_csv(tmp_path):
    path = tmp_path / "focus.parquet"
    doubles = ", ".join(f"CAST(nullif({c}, 'NULL') AS DOUBLE) AS {c}"
                        for c in ("BilledCost", "EffectiveCost", "PricingQuantity", "ConsumedQuantity"))
    duckdb.execute(f"COPY (SELECT * REPLACE ({doubles}) FROM read_csv('{DEMO_FOCUS}', all_varchar = true)) "
                   f"TO '{path}' (FORMAT parquet)")
    assert pushdown(path, "focus") == connector(path, "focus")
    assert pushdown(path, "focus")["currency"] == pushdown(DEMO_FOCUS, "focus")["currency"]


# The connector's exact totals of the two larger workshop CURs (about 20 s each to recompute);
# December is compared with the connector live below.
WORKSHOP = {
    "Oct2018": (119307, 119310, {"Usage": ("3914.7077525379", "4195.9571093179"), "Purchase": ("149.775379", "0")},
                ("4064.4831315379", "4195.9571093179")),
    "Nov2018": (124340, 124341, {"Usage": ("3357.9429681268", "3632.5598464968"), "Purchase": ("147.384", "0")},
                ("3505.3269681268", "3632.5598464968")),
}


@pytest.mark.parametrize("month", sorted(WORKSHOP))
def test_workshop_cur_parquet_totals_are_the_connectors(month):
    rows, lines, categories, usd = WORKSHOP[month]
    totals = pushdown(LABS / f"{month}-WorkshopCUR-00001.snappy.parquet", "cur")
    assert (totals["rows"], totals["lines"]) == (rows, lines)
    assert totals["category"] == {k: (Decimal(b), Decimal(e)) for k, (b, e) in categories.items()}
    assert totals["currency"] == {"USD": (Decimal(usd[0]), Decimal(usd[1]))}


@pytest.mark.slow
def test_workshop_december_matches_the_connector():
    path = LABS / "Dec2018-WorkshopCUR-00001.snappy.parquet"
    assert pushdown(path, "cur") == connector(path, "cur")


@pytest.mark.parametrize("path", [BILLING / "focus_converters" / "aws_cur1_anonymized_2023-11.csv",
                                  LABS / "workload_efficiency_step1_cur_2019-11-26.csv.gz",
                                  LABS / "workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz"],
                         ids=["legacy-csv", "athena-csv-nulls", "savings-plans"])
def test_csv_curs_match_the_connector(path):
    assert pushdown(path, "cur") == connector(path, "cur")


def test_cur2_folder_with_map_columns_matches_the_connector(tmp_path):
    root = cur2_export(tmp_path, cur2_rows())
    totals = pushdown(root, "cur", SEPTEMBER)
    assert totals == connector(root, "cur", SEPTEMBER)
    assert totals["rows"] == len(cur2_rows())  # the stale file is not read; split rows are rows
    unused = Decimal("1.47") * 4 + Decimal("3.55")
    assert totals["category"]["Usage"][1] == 4 * (Decimal("38.53") + Decimal("55.04") + Decimal("10.49264")
                                                  + Decimal("7.1")) + unused


def test_amounts_with_more_than_ten_decimals_are_read_from_their_text(tmp_path):
    rows = [instance_hour(h, "Usage", "g6e.xlarge", "1.861", f"i-{h}") for h in range(3)]
    rows[1]["line_item_unblended_cost"] = 0.12345678901234567
    rows[2]["line_item_unblended_cost"] = 123456789.5
    path = write_cur2(tmp_path / "x.parquet", rows)
    totals = pushdown(path, "cur")
    assert totals == connector(path, "cur")
    expected = Decimal("1.861") + Decimal(repr(0.12345678901234567)) + Decimal("123456789.5")
    assert totals["currency"]["USD"][0] == expected


# --- GPU-hours and the window ----------------------------------------------------------------

def test_gpu_hours_by_instance_type_on_cur2(tmp_path):
    totals = pushdown(write_cur2(tmp_path / "gpu.parquet", cur2_rows()), "cur", SEPTEMBER)
    # p5.48xlarge: 4 h covered by the plan + 4 h on demand (negations and pod rows add none), 8 GPUs;
    # g6e.12xlarge: 4 h on demand + 4 h under the reservation, 4 GPUs.
    assert totals["gpu"] == {"p5.48xlarge": Decimal(8 * 8), "g6e.12xlarge": Decimal(8 * 4)}


def test_window_keeps_the_overlapping_lines(tmp_path):
    path = write_cur2(tmp_path / "gpu.parquet", cur2_rows())
    window = (datetime(2026, 9, 1, 1, tzinfo=timezone.utc), datetime(2026, 9, 1, 3, tzinfo=timezone.utc))
    totals = pushdown(path, "cur", window)
    assert totals == connector(path, "cur", window)
    assert totals["gpu"] == {"p5.48xlarge": Decimal(2 * 2 * 8), "g6e.12xlarge": Decimal(2 * 2 * 4)}
    day = (datetime(2026, 9, 1, tzinfo=timezone.utc), datetime(2026, 9, 2, tzinfo=timezone.utc))
    assert pushdown(DEMO_FOCUS, "focus", day) == connector(DEMO_FOCUS, "focus", day)
    later = (datetime(2027, 1, 1, tzinfo=timezone.utc), datetime(2027, 2, 1, tzinfo=timezone.utc))
    empty = pushdown(path, "cur", later)
    assert (empty["lines"], empty["category"], empty["gpu"], empty["rows"]) == (0, {}, {}, len(cur2_rows()))


# --- no line reaches pandas ------------------------------------------------------------------

def test_a_generated_cur2_export_is_summarised_without_a_frame_of_lines(tmp_path, monkeypatch):
    export = generate(tmp_path, 50_000, rows_per_file=20_000)

    def refuse(*args, **kwargs):
        raise AssertionError("a pandas frame of lines was built")

    monkeypatch.setattr("connectors.billing.focus.build_lines", refuse)
    summary = summarise([str(export)], None, None)
    assert summary["sources"] == [{"source": str(export), "format": "cur", "rows": 50_000,
                                   "lines": summary["sources"][0]["lines"]}]
    assert summary["sources"][0]["lines"] >= 50_000  # plus one row per unused commitment
    assert {row["name"] for row in summary["by_charge_category"]} == {"Usage", "Purchase", "Tax", "Credit", "Refund"}
    hours = {row["instance_type"]: Decimal(row["gpu_hours"]) for row in summary["gpu_hours_by_instance_type"]}
    assert {"p5.48xlarge", "g6e.12xlarge", "g5.xlarge"} <= set(hours) and all(h > 0 for h in hours.values())
    assert "m5.large" not in hours and "db.r6g.large" not in hours


# --- bad input -------------------------------------------------------------------------------

def errors_of(path: Path, fmt: str) -> list[InputError]:
    """The InputErrors the pushdown raises."""
    with pytest.raises((InputError, InputErrors)) as info:
        read_totals(path, fmt, ALWAYS, "USD")
    return getattr(info.value, "errors", [info.value])


def test_missing_column_names_the_file(tmp_path):
    header = [h for h in LEGACY_HEADER if h != "lineItem/UnblendedCost"]
    row = legacy_row(1, "1")
    path = write_legacy(tmp_path / "bad.csv", [row[:13] + row[14:]], header)
    (error,) = errors_of(path, "cur")
    assert error.path == str(path) and error.column == "lineItem/UnblendedCost"
    focus = tmp_path / "f.csv"
    focus.write_text("BilledCost,ChargeCategory\n1,Usage\n")
    (error,) = errors_of(focus, "focus")
    assert error.path == str(focus) and "EffectiveCost" in error.message


def test_unreadable_parquet_names_the_file(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    (error,) = errors_of(path, "cur")
    assert error.path == str(path) and "not a readable Parquet file" in error.message


def test_bad_values_get_the_connectors_errors(tmp_path):
    write_legacy(tmp_path / "a.csv", [legacy_row(1, "1.00")])
    bad = write_legacy(tmp_path / "b.csv", [legacy_row(2, "2.00"),
                                            legacy_row(3, "1.00", **{"lineItem/UnblendedCost": "1.2.5"})])
    (error,) = errors_of(tmp_path, "cur")
    assert (error.path, error.row, error.column) == (str(bad), 2, "lineItem/UnblendedCost")
    mystery = write_legacy(tmp_path / "m" / "c.csv", [legacy_row(1, "1", **{"lineItem/LineItemType": "Mystery"})])
    (error,) = errors_of(mystery, "cur")
    assert (error.row, error.column) == (1, "lineItem/LineItemType")


def test_mixed_currencies_are_an_error(tmp_path):
    path = write_legacy(tmp_path / "two.csv", [legacy_row(1, "1.00"),
                                               legacy_row(2, "1.00", **{"lineItem/CurrencyCode": "EUR"})])
    (error,) = errors_of(path, "cur")
    assert error.path == str(path) and "mixed currencies" in error.message


def test_lines_straddling_the_window_are_clipped_as_the_connector_clips_them(tmp_path):
    """A window from 01:30 to 03:30: the 01:00 and 03:00 hours count their half, billed, effective
    and GPU-hours, as an audit counts them (connectors.billing.clip)."""
    path = write_cur2(tmp_path / "gpu.parquet", cur2_rows())
    window = (datetime(2026, 9, 1, 1, 30, tzinfo=timezone.utc), datetime(2026, 9, 1, 3, 30, tzinfo=timezone.utc))
    totals = pushdown(path, "cur", window)
    assert totals == connector(path, "cur", window)
    assert totals["gpu"] == {"p5.48xlarge": Decimal(2 * 2 * 8), "g6e.12xlarge": Decimal(2 * 2 * 4)}
    noon = (datetime(2026, 9, 1, 6, 30, tzinfo=timezone.utc), datetime(2026, 9, 2, tzinfo=timezone.utc))
    assert pushdown(DEMO_FOCUS, "focus", noon) == connector(DEMO_FOCUS, "focus", noon)
