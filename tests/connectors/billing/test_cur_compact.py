"""CUR lines summed before they are mapped (connectors/billing/cur_compact.py): the tables come out as
they did with every line mapped, on real CURs, synthetic CUR 2.0 and generated exports, in and out of
the window; what must stay a line of its own does."""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from audit.adjust import spread
from benchmarks.billing.generate import generate
from connectors.base import ReadContext, SourceSpec
from connectors.billing import cur
from connectors.billing.cur import CurConnector
from connectors.errors import InputError
from tests.builders import cur2_rows, instance_hour, legacy_row, write_cur2, write_legacy
from tests.paths import DATA

LABS = DATA / "billing" / "aws_wa_labs"
CUR1 = DATA / "billing" / "focus_converters" / "aws_cur1_anonymized_2023-11.csv"


def utc(*parts: int) -> datetime:
    """A tz-aware UTC datetime."""
    return datetime(*parts, tzinfo=timezone.utc)


def read(path: Path, start: datetime, end: datetime, summed: bool, monkeypatch, **options):
    """The connector's result for ``path`` over [start, end), with the summing stage on or off."""
    with monkeypatch.context() as patch:
        if not summed:
            patch.setattr(cur, "compact", lambda *args, **kwargs: False)
        spec = SourceSpec(name="cur", kind="billing", format="cur", path=path, options=options)
        return CurConnector(spec, ReadContext(start, end, "USD")).read()


def assert_same(path: Path, start: datetime, end: datetime, monkeypatch, **options) -> pd.DataFrame:
    """Both paths give the same tables, column by column and row by row; returns the lines."""
    summed = read(path, start, end, True, monkeypatch, **options)
    plain = read(path, start, end, False, monkeypatch, **options)
    assert summed.rows == plain.rows
    assert set(summed.tables) == set(plain.tables)
    for name in ("lines", "split_summary", "notes"):
        left, right = (frame.tables.get(name, pd.DataFrame()) for frame in (summed, plain))
        assert list(left.columns) == list(right.columns), name
        assert len(left) == len(right), name
        for column in left.columns:
            assert left[column].astype(str).tolist() == right[column].astype(str).tolist(), (name, column)
    return summed.tables["lines"]


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """A generated CUR 2.0 export over three days: 40,000 lines in two files, 3 GPU instances."""
    return generate(tmp_path_factory.mktemp("bench"), 40_000, rows_per_file=25_000, threads=2, fleet=3, hours=72)


@pytest.mark.parametrize("window", [
    (utc(2025, 1, 1), utc(2025, 2, 1)),                  # the month
    (utc(2025, 1, 1, 7, 30), utc(2025, 1, 3, 5)),         # cuts through days and hours
    (utc(2025, 1, 2), utc(2025, 1, 2, 12)),               # half a day
])
def test_a_generated_export_gives_the_tables_of_every_line_mapped(export, window, monkeypatch):
    lines = assert_same(export, *window, monkeypatch)
    assert lines["line_count"].sum() > len(lines)        # lines were summed


def test_the_summed_raw_is_far_smaller_and_counts_every_line(export):
    """The stage itself: fewer rows than lines, ``_n`` adding up to the lines, GPU hours kept apart."""
    files = cur.discover(export)
    with cur.session() as con:
        layouts = [cur.describe(con, path, label) for path, label in files]
        con.execute(cur.HASHES_TABLE)
        for index in range(len(layouts)):
            cur.load_file(con, layouts, index)
        con.execute(cur.sql.raw_view_sql(layouts))
        lines = con.execute("SELECT count(*) FROM raw").fetchall()[0][0]
        assert cur.compact(con, layouts, (utc(2025, 1, 1), utc(2025, 2, 1)))
        rows, counted = con.execute("SELECT count(*), sum(_n) FROM raw").fetchall()[0]
        gpu = con.execute("SELECT count(*), max(_n) FROM raw WHERE product_instance_type = 'p5.48xlarge'").fetchall()[0]
    assert counted == lines == 40_000
    assert rows < 0.7 * lines
    assert gpu == (3 * 72, 1)


@pytest.mark.parametrize(("name", "window"), [
    ("workload_efficiency_step1_cur_2019-11-26.csv.gz", (utc(2019, 11, 1), utc(2019, 12, 1))),
    ("workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz", (utc(2019, 11, 1), utc(2019, 12, 1))),
    ("Dec2018-WorkshopCUR-00001.snappy.parquet", (utc(2018, 12, 1), utc(2019, 1, 1))),
    ("Nov2018-WorkshopCUR-00001.snappy.parquet", (utc(2018, 11, 3, 12), utc(2018, 11, 20))),
])
def test_the_workshop_curs_give_the_tables_of_every_line_mapped(name, window, monkeypatch):
    assert_same(LABS / name, *window, monkeypatch)


def test_the_anonymised_cur1_gives_the_tables_of_every_line_mapped(monkeypatch):
    assert_same(CUR1, utc(2023, 11, 1), utc(2023, 12, 1), monkeypatch)
    assert_same(CUR1, utc(2023, 11, 3, 6), utc(2023, 11, 20, 18), monkeypatch)


def test_synthetic_cur2_with_fees_splits_and_commitments(tmp_path, monkeypatch):
    path = write_cur2(tmp_path / "export-00001.snappy.parquet", cur2_rows())
    assert_same(path, utc(2026, 9, 1), utc(2026, 10, 1), monkeypatch)


def legacy_file(path: Path, rows: list[list[str]]) -> Path:
    """A legacy CUR CSV of ``rows``."""
    return write_legacy(path, rows)


VOLUME = {"lineItem/UsageType": "EBS:VolumeUsage.gp3", "lineItem/ResourceId": "vol-1", "product/instanceType": "",
          "lineItem/LineItemDescription": "gp3 GB-month", "product/ProductName": "Amazon Elastic Compute Cloud"}
GPU = {"lineItem/UsageType": "USE1-BoxUsage:p5.48xlarge", "lineItem/ResourceId": "i-gpu",
       "product/instanceType": "p5.48xlarge", "lineItem/LineItemDescription": "p5.48xlarge hour"}
_ids = iter(range(1, 10**6))


def line(start: pd.Timestamp, end: pd.Timestamp, cost: str, fields: dict) -> list[str]:
    """One legacy CUR record over [start, end) with ``fields`` and its own line item id."""
    return legacy_row(next(_ids), cost, **{**fields, "lineItem/UsageStartDate": f"{start:%Y-%m-%dT%H:%M:%SZ}",
                                           "lineItem/UsageEndDate": f"{end:%Y-%m-%dT%H:%M:%SZ}"})


def hours(first: int, count: int, cost: str, fields: dict) -> list[list[str]]:
    """``count`` hourly records from hour ``first`` of 2026-09-01."""
    day = pd.Timestamp("2026-09-01T00:00:00Z")
    return [line(day + pd.Timedelta(hours=h), day + pd.Timedelta(hours=h + 1), cost, fields)
            for h in range(first, first + count)]


SEPTEMBER = (utc(2026, 9, 1), utc(2026, 10, 1))


def test_a_day_of_volume_lines_is_one_line_and_gpu_hours_stay_hours(tmp_path, monkeypatch):
    rows = hours(0, 24, "0.01", VOLUME) + hours(0, 5, "98.32", GPU)
    path = legacy_file(tmp_path / "cur.csv", rows)
    lines = assert_same(path, *SEPTEMBER, monkeypatch)
    volume = lines[lines.resource_id == "vol-1"]
    assert list(volume.line_count) == [24] and str(volume.billed_cost.iloc[0]) == "0.24"
    gpu = lines[lines.resource_id == "i-gpu"]
    assert gpu.line_count.sum() == 5


def cpu_day(resource: str) -> list[dict]:
    """A CPU node billed hour by hour over 2026-09-01 (CUR 2.0 rows)."""
    return [instance_hour(0, "Usage", "c7i.2xlarge", "0.357", resource,
                          line_item_usage_start_date=datetime(2026, 9, 1) + h * pd.Timedelta(hours=1),
                          line_item_usage_end_date=datetime(2026, 9, 1) + (h + 1) * pd.Timedelta(hours=1))
            for h in range(24)]


@pytest.mark.parametrize("kind", ["Credit", "Refund"])
def test_the_hours_of_a_credited_cpu_node_stay_hours_for_its_credit(tmp_path, monkeypatch, kind):
    """A -0.20 credit on a CPU node for 00:00-01:00 with no SKU nets into that hour's instance line,
    not the day's data transfer line. Before, the summing stage made the node's 24 hours one 8.568
    line over the day, as long as its transfer's, and the credit went pro rata to both (-0.137 and
    -0.063). A node without a credit is still one line per day."""
    day = {"line_item_usage_start_date": datetime(2026, 9, 1), "line_item_usage_end_date": datetime(2026, 9, 2)}
    transfer = instance_hour(0, "Usage", "", "3.91507272", "i-cpu", line_item_usage_type="USE1-DataTransfer-Out-Bytes",
                             line_item_line_item_description="data transfer out", product_sku="XFER", **day)
    credit = instance_hour(0, kind, "", "-0.20", "i-cpu", line_item_usage_type="", product_sku="",
                           line_item_line_item_description="credit")
    path = write_cur2(tmp_path / "export-00001.snappy.parquet",
                      cpu_day("i-cpu") + [transfer, credit] + cpu_day("i-other"))
    lines = assert_same(path, *SEPTEMBER, monkeypatch)
    assert list(lines[lines.resource_id == "i-other"].line_count) == [24]
    charges, leftovers = spread(lines, "effective")
    credits = dict(zip(charges.line_id, charges.credits))
    assert not leftovers and credits["export-00001.snappy.parquet:1"] == Decimal("-0.20")
    assert credits["export-00001.snappy.parquet:25"] == 0  # the data transfer
    assert sum(credits.values()) == Decimal("-0.20")


def test_a_line_straddling_the_window_start_is_not_summed_with_the_day(tmp_path, monkeypatch):
    """A volume's day (00:00–24:00) beside its own hours 06:00–23:00 in a window from 06:30: the day
    stays a line of its own and is clipped by its own period (17.5 of 24 hours: 1.75 of 2.40), the
    straddling 06:00 hour to its half; summed with the hours, the day would have been clipped by
    the group's period or counted whole."""
    day = pd.Timestamp("2026-09-01T00:00:00Z")
    rows = hours(6, 18, "0.01", VOLUME) + [line(day, day + pd.Timedelta(days=1), "2.40", VOLUME)]
    path = legacy_file(tmp_path / "cur.csv", rows)
    lines = assert_same(path, utc(2026, 9, 1, 6, 30), utc(2026, 9, 2), monkeypatch)
    assert sorted(str(c) for c in lines.billed_cost) == ["0.005", "0.17", "1.75"]
    assert sum(lines.billed_cost) == Decimal("1.925")
    # what was clipped off is named, at the file's own row (before: the CUR reader dropped the note)
    notes = read(path, utc(2026, 9, 1, 6, 30), utc(2026, 9, 2), True, monkeypatch).tables["notes"]
    assert notes.to_dict("records") == [{
        "row": 1, "column": "ChargePeriodStart",
        "note": "2 lines straddle the window's start (2026-09-01 06:30 UTC): 0.66 USD of their 2.41 USD billed is "
                "for time before the window and left out (clipped pro rata by time)"}]


def test_a_period_that_ends_before_it_starts_is_named_by_its_own_row(tmp_path):
    rows = hours(0, 6, "0.01", VOLUME)
    day = pd.Timestamp("2026-09-01T00:00:00Z")
    rows.insert(3, line(day + pd.Timedelta(hours=5), day + pd.Timedelta(hours=4), "0.01", VOLUME))
    path = legacy_file(tmp_path / "cur.csv", rows)
    spec = SourceSpec(name="cur", kind="billing", format="cur", path=path)
    with pytest.raises(InputError) as caught:
        CurConnector(spec, ReadContext(*SEPTEMBER, "USD")).read()
    assert caught.value.row == 4 and "before it starts" in caught.value.message


def test_an_amount_past_decimal_38_20_keeps_every_line_apart(tmp_path, monkeypatch):
    rows = hours(0, 4, "0.01", VOLUME) + hours(5, 1, "1e-25", {**VOLUME, "lineItem/ResourceId": "vol-2"})
    path = legacy_file(tmp_path / "cur.csv", rows)
    lines = assert_same(path, *SEPTEMBER, monkeypatch)
    assert len(lines) == 5


def test_grain_line_sums_nothing(tmp_path, monkeypatch):
    path = legacy_file(tmp_path / "cur.csv", hours(0, 6, "0.01", VOLUME))
    lines = assert_same(path, *SEPTEMBER, monkeypatch, grain="line")
    assert len(lines) == 6


def test_two_files_of_one_export_are_summed_each_and_joined_by_the_reader(tmp_path, monkeypatch):
    folder = tmp_path / "export"
    legacy_file(folder / "a.csv", hours(0, 12, "0.01", VOLUME))
    legacy_file(folder / "b.csv", hours(12, 12, "0.01", VOLUME))
    lines = assert_same(folder, *SEPTEMBER, monkeypatch)
    assert list(lines.line_count) == [24] and list(lines.line_id) == ["a.csv:1"]


def test_lines_repeated_whole_are_still_an_error(tmp_path):
    record = hours(0, 1, "0.01", VOLUME)[0]
    path = legacy_file(tmp_path / "cur.csv", hours(1, 4, "0.01", VOLUME) + [record, record])
    spec = SourceSpec(name="cur", kind="billing", format="cur", path=path)
    with pytest.raises(InputError, match="identical in every column to row 5"):
        CurConnector(spec, ReadContext(*SEPTEMBER, "USD")).read()


def test_repeated_hashes_are_found_in_every_pass(monkeypatch):
    """The check counts disjoint ranges of the hash in turn; a repeat in any range is found."""
    from connectors.billing import cur_compact
    monkeypatch.setattr(cur_compact, "HASHES_PER_PASS", 3)
    with cur.session() as con:
        con.execute("CREATE TEMP TABLE _hashes AS SELECT range::UBIGINT AS h FROM range(20)")
        assert not cur_compact.repeated_hash(con)
        for value in (0, 6, 19):
            con.execute(f"INSERT INTO _hashes VALUES ({value})")
            assert cur_compact.repeated_hash(con)
            con.execute("DELETE FROM _hashes WHERE rowid = (SELECT max(rowid) FROM _hashes)")
        con.execute("INSERT INTO _hashes VALUES (0), (19)")  # every repeated value, over every pass
        assert cur_compact.repeated_values(con, "h").tolist() == [0, 19]


def test_tag_keys_one_prefix_apart_keep_their_spelling(tmp_path, monkeypatch):
    """``user:team`` and ``user_team`` in one tag MAP would both become ``team``: that MAP keeps
    its keys as spelled (the file is read, no value lost); a MAP without such a pair loses the prefix."""
    rows = cur2_rows()[:3]
    rows[0] = {**rows[0], "resource_tags": {"user:team": "a", "user_team": "b"}}
    rows[1] = {**rows[1], "resource_tags": {"user:team": "a", "user_app": None}}
    path = write_cur2(tmp_path / "export-00001.snappy.parquet", rows)
    lines = assert_same(path, utc(2026, 9, 1), utc(2026, 10, 1), monkeypatch)
    tags = dict(zip(lines.row, lines.tags))
    assert tags[1] == '{"user:team":"a","user_team":"b"}' and tags[2] == '{"team":"a"}'


def test_typed_text_is_the_same_text_without_the_null_literal_test():
    """A Parquet number's, moment's or truth value's text is only cast; it equals the tested form."""
    from connectors.billing.focus_load import text_or_null

    assert text_or_null("x", "DOUBLE") == "CAST(x AS VARCHAR)"
    assert text_or_null("x").startswith("CASE WHEN trim(CAST(x AS VARCHAR)) IN (")
    con = duckdb.connect()
    for dtype, value in (("DOUBLE", "-0.5"), ("BIGINT", "7"), ("TIMESTAMP", "'2025-01-01 00:00:00'"),
                         ("DECIMAL(18,3)", "1.250"), ("BOOLEAN", "true"), ("DOUBLE", "'nan'"), ("DOUBLE", "NULL")):
        expr = f"CAST({value} AS {dtype})"
        plain, tested = con.execute(f"SELECT {text_or_null(expr, dtype)}, {text_or_null(expr)}").fetchone()
        assert plain == tested, dtype


# --- a DOUBLE amount read as a DECIMAL without its text (cur_compact.fast_decimal) -----------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from connectors.billing import cur_compact  # noqa: E402

EDGES = [0.0, -0.0, 0.1, 0.4608, 98.32, 1e-10, 1.5e-10, 1.2345678901, 0.12345678901, 262143.9999999999,
         262144.0, 262144.5, -262143.5, 123456.7890123456, 2.415e-05, 5e-324, 1e300, 9007199254740993.0]


def fast_and_text(values: list[float]) -> list[tuple]:
    """(fast decimal, the decimal of DuckDB's text of the double) of each value."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (i INTEGER, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
    return con.execute(f"SELECT {cur_compact.fast_decimal('x')}, CAST(x AS VARCHAR) FROM t ORDER BY i").fetchall()


def test_the_fast_decimal_is_the_value_of_the_shortest_text_or_nothing():
    rows = fast_and_text(EDGES)
    for value, (fast, text) in zip(EDGES, rows):
        if fast is not None:
            assert Decimal(fast) == Decimal(text), (value, fast, text)
    taken = {value for value, (fast, _) in zip(EDGES, rows) if fast is not None}
    assert {0.1, 0.4608, 98.32, 1e-10, 1.2345678901, 2.415e-05} <= taken
    assert not taken & {0.12345678901, 262144.0, 262144.5, 5e-324, 1e300, 1.5e-10}  # the text is read there


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                          st.floats(-300000, 300000, allow_nan=False),
                          st.tuples(st.integers(-10**12, 10**12), st.integers(0, 14)).map(
                              lambda pair: pair[0] / 10 ** pair[1])),
                min_size=1, max_size=50))
def test_every_double_read_fast_is_the_decimal_of_its_text(values):
    for value, (fast, text) in zip(values, fast_and_text(values)):
        if fast is not None:
            assert Decimal(fast) == Decimal(text), (value, fast, text)


def test_a_parquet_export_of_doubles_sums_fast_and_slow_amounts_alike(tmp_path, monkeypatch):
    """Amounts the fast path reads and ones whose text it reads (more than 10 places, |x| ≥ 2^18),
    one line each and summed, give the tables of every line mapped."""
    rows = []
    for hour, amount in enumerate([0.4608, 0.12345678901, 300000.25, 1.2345678901, 262144.0, 0.1, 0.2]):
        for row in cur2_rows()[:3]:
            row = dict(row)
            row["line_item_unblended_cost"] = amount
            row["line_item_usage_start_date"] += pd.Timedelta(hours=hour)
            row["line_item_usage_end_date"] += pd.Timedelta(hours=hour)
            rows.append(row)
    path = write_cur2(tmp_path / "export-00001.snappy.parquet", rows)
    assert_same(path, utc(2024, 1, 1), utc(2026, 1, 1), monkeypatch)


@pytest.mark.parametrize("grain", ["auto", "line"])
def test_a_tag_set_that_cannot_be_made_json_names_its_file(tmp_path, monkeypatch, grain):
    """The summing stage makes each file's tag sets JSON (no pass of its own); without it
    (grain line) each file's distinct tag sets are made JSON apart: the error names the file."""
    folder = tmp_path / "export"
    write_cur2(folder / "a.parquet", cur2_rows()[:6])
    poisoned = [{**row, "resource_tags": {**(row.get("resource_tags") or {}), "user:poison": "in b"}}
                for row in cur2_rows()[6:]]
    bad = write_cur2(folder / "b.parquet", poisoned)
    real = cur.sql.map_tags

    def failing(ref: str) -> str:  # a tag set whose JSON DuckDB cannot make (an error of the query)
        poison = f"element_at({ref}, 'user:poison')[1]"
        return f"CASE WHEN {poison} IS NOT NULL THEN error('no JSON for the tag set ' || {poison}) ELSE {real(ref)} END"
    monkeypatch.setattr(cur.sql, "map_tags", failing)
    with pytest.raises(InputError) as info:
        read(folder, *SEPTEMBER, True, monkeypatch, grain=grain)
    assert info.value.path == str(bad) and "no JSON for the tag set in b" in info.value.message


def test_lines_equal_but_for_a_map_are_candidates_read_alike(tmp_path, monkeypatch):
    """The repeat hash reads a MAP column by its size: two lines equal but for their tag values are
    candidates for a line repeated whole, so nothing is summed, and the lines are read as they are
    (no duplicate: they differ); lines with tag sets of different sizes are not candidates."""
    rows = cur2_rows()
    assert rows[0]["resource_tags"]
    twin = {**rows[0], "resource_tags": {k: v + "-other" for k, v in rows[0]["resource_tags"].items()}}
    path = write_cur2(tmp_path / "x.parquet", [*rows, twin])
    calls = []
    real = cur_compact.repeated_hash
    monkeypatch.setattr(cur_compact, "repeated_hash", lambda con: calls.append(real(con)) or calls[-1])
    lines = assert_same(path, *SEPTEMBER, monkeypatch)
    assert calls == [True, True]  # a candidate, and the whole rows share a hash too: nothing summed
    assert len(lines) == len(read(path, *SEPTEMBER, False, monkeypatch).tables["lines"])
    sized = [*rows, {**twin, "resource_tags": {**twin["resource_tags"], "user:extra": "x"}}]
    calls.clear()
    assert_same(write_cur2(tmp_path / "y.parquet", sized), *SEPTEMBER, monkeypatch)
    assert calls == [True, False]  # a candidate pair, told apart by the whole rows: summed


@pytest.mark.parametrize("kind", ["TIMESTAMPTZ", "VARCHAR"])
def test_a_period_of_another_type_is_summed_as_its_text_would_be(export, tmp_path, kind, monkeypatch):
    """The summing stage reads a TIMESTAMP period directly (cur_compact.period_of); a TIMESTAMPTZ or
    text period gives the tables of every line mapped too, on windows that cut through days."""
    files = sorted(export.rglob("*.parquet"))
    out = tmp_path / "export"
    out.mkdir()
    with cur.session() as con:
        for path in files:
            con.execute(f"COPY (SELECT * REPLACE (CAST(line_item_usage_start_date AS {kind}) AS "
                        f"line_item_usage_start_date, CAST(line_item_usage_end_date AS {kind}) AS "
                        f"line_item_usage_end_date) FROM read_parquet('{path}')) TO '{out / path.name}' "
                        "(FORMAT parquet)")
        assert con.execute(f"SELECT typeof(line_item_usage_start_date) FROM read_parquet('{out / files[0].name}') "
                           "LIMIT 1").fetchall()[0][0] == ("TIMESTAMP WITH TIME ZONE" if kind == "TIMESTAMPTZ" else kind)
    lines = assert_same(out, utc(2025, 1, 1, 7, 30), utc(2025, 1, 3, 5), monkeypatch)
    assert lines["line_count"].sum() > len(lines)


def test_a_sound_export_is_not_scanned_again_for_its_checks(export, monkeypatch):
    """The hash pass flags every line failing a check (cur_checks.hash_rows_sql): with none flagged,
    check_raw does not build its scan (a flagged one still is: test_cur names NaN and inf amounts)."""
    from connectors.billing import cur_checks

    def no_scan(layouts):
        raise AssertionError("a sound export was scanned again")

    with monkeypatch.context() as patch:
        patch.setattr(cur_checks, "checked_sql", no_scan)
        assert len(read(export, utc(2025, 1, 1), utc(2025, 1, 2), True, monkeypatch).tables["lines"])


def corrupt_column(path: Path, column: str) -> None:
    """Overwrite the first page header of ``column``'s chunk in Parquet file ``path``: the footer
    and every other column stay readable."""
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    chunk = meta.row_group(0).column(names.index(column))
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset:chunk.data_page_offset + 12] = b"\xff" * 12
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("column", ["line_item_line_item_description", "pricing_term"])
@pytest.mark.parametrize("grain", ["auto", "line"])
def test_a_column_the_hash_pass_does_not_read_still_names_its_file(tmp_path, monkeypatch, grain, column):
    """The hash pass reads a few columns (cur_sql.Layout.candidate_key); a column it does not read
    that cannot be read is named by the summing stage, or where nothing is summed by the pass that
    reads every value (cur_compact.read_whole), never by a later query over the files."""
    folder = tmp_path / "export"
    write_cur2(folder / "a.parquet", cur2_rows()[:6])
    bad = write_cur2(folder / "b.parquet", cur2_rows()[6:])
    corrupt_column(bad, column)
    con = duckdb.connect()
    con.execute(f"SELECT hash(line_item_resource_id, line_item_unblended_cost) FROM '{bad}'").fetchall()
    with pytest.raises(duckdb.Error):
        con.execute(f"SELECT {column} FROM '{bad}'").fetchall()
    with pytest.raises(InputError) as info:
        read(folder, *SEPTEMBER, True, monkeypatch, grain=grain)
    assert info.value.path == str(bad) and "not a readable Parquet file" in info.value.message


def test_doubles_are_summed_once_fast_and_a_run_with_an_unread_amount_again(export, tmp_path, monkeypatch):
    """The parts of an export are summed in one query, each DOUBLE amount as its fast decimal
    alone; where some amount was not read so (more than 10 places) they are summed again from the text."""
    from connectors.billing import cur_compact

    calls = []
    real = cur_compact.group_sql

    def recorded(own, run, window, fast=False):
        if window[0] != cur_compact.EPOCH:  # not the comparison of alike_runs
            calls.append((list(run), fast))
        return real(own, run, window, fast=fast)

    monkeypatch.setattr(cur_compact, "group_sql", recorded)
    read(export, utc(2025, 1, 1), utc(2025, 2, 1), True, monkeypatch)
    assert len(calls) == 1 and len(calls[0][0]) > 1 and calls[0][1]  # every file at once, every amount fast

    folder = tmp_path / "export"
    rows = cur2_rows()[:3]
    write_cur2(folder / "a.parquet", rows)
    write_cur2(folder / "b.parquet", [{**row, "line_item_unblended_cost": 0.12345678901} for row in rows])
    calls.clear()
    assert_same(folder, utc(2024, 1, 1), utc(2026, 1, 1), monkeypatch)
    assert calls == [([0, 1], True), ([0, 1], False)]


@pytest.mark.parametrize("limit", [1, 30_000])
def test_a_run_of_parts_stops_at_its_line_limit_and_the_tables_stay_the_same(export, monkeypatch, limit):
    """One query sums at most RUN_LINES lines (a file alone where it has more): the runs split
    there, and the tables are still those of every line mapped."""
    from connectors.billing import cur_compact

    runs = []
    real = cur_compact.sum_files

    def recorded(con, layouts, run, window):
        runs.append([pq.ParquetFile(layouts[index].path).metadata.num_rows for index in run])
        return real(con, layouts, run, window)

    monkeypatch.setattr(cur_compact, "RUN_LINES", limit)
    monkeypatch.setattr(cur_compact, "sum_files", recorded)
    assert_same(export, utc(2025, 1, 1), utc(2025, 2, 1), monkeypatch)
    assert len(runs) > 1 and all(len(run) == 1 or sum(run) <= limit for run in runs)
    assert sum(map(sum, runs)) == 40_000
