"""The billing readers' fast paths: runs of GPU lines, the exactness test before summing, the CUR
staging without a sort, a dialect's table taken over as ``src``, decimals parsed once per text."""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.billing import cur, cur_sql
from connectors.billing.focus import FocusConnector, load_focus_named
from connectors.billing.focus_lines import decimal_series
from connectors.duck import prepare
from connectors.errors import InputError

HEADER = "ChargePeriodStart,ChargePeriodEnd,ChargeCategory,BilledCost,EffectiveCost,ResourceId,x_InstanceType\n"


def utc(*parts: int) -> datetime:
    """A tz-aware UTC datetime."""
    return datetime(*parts, tzinfo=timezone.utc)


def read_lines(path: Path, **options) -> pd.DataFrame:
    """The ``lines`` table of a FOCUS file, read over all of 2024."""
    spec = SourceSpec(name="bill", kind="billing", format="focus", path=path, options=options)
    return FocusConnector(spec, ReadContext(utc(2024, 1, 1), utc(2025, 1, 1), "USD")).read().tables["lines"]


def hour(h: int) -> str:
    """``start,end`` of the h-th hour of 2024-01-01 (UTC)."""
    start = pd.Timestamp("2024-01-01T00:00:00Z") + pd.Timedelta(hours=h)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{start + pd.Timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}"


# --- runs of GPU lines ----------------------------------------------------------------------------

def test_runs_are_numbered_among_identical_gpu_lines_by_start_then_row(tmp_path):
    """A run is the lines whose start less (number among identical lines × length) agrees. Two
    identical GPU hours at 00:00 and one at 02:00 would give -1 h, -2 h, -1 h and join the first and
    the third over 00:00–03:00 (money on 01:00, which no line bills): a line repeated for the same
    hour is no part of a run, so each of the three keeps its own hour. The core part of the same
    machine (no instance type, same resource) keeps its hours too (00:00–02:00 one run, 03:00
    alone); the volume is summed per day."""
    rows = [f"{hour(0)},Usage,98.32,98.32,i-gpu,p5.48xlarge", f"{hour(0)},Usage,98.32,98.32,i-gpu,p5.48xlarge",
            f"{hour(2)},Usage,98.32,98.32,i-gpu,p5.48xlarge"]
    rows += [f"{hour(h)},Usage,0.5,0.5,i-gpu," for h in (0, 1, 3)]
    rows += [f"{hour(h)},Usage,0.01,0.01,vol-1," for h in (0, 1, 3)]
    path = tmp_path / "runs.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    lines = read_lines(path)
    gpu = lines[lines.resource_id == "i-gpu"]
    assert list(zip(gpu.row, gpu.line_count, gpu.start.dt.hour, gpu.end.dt.hour)) == [
        (1, 1, 0, 1), (2, 1, 0, 1), (3, 1, 2, 3), (4, 2, 0, 2), (6, 1, 3, 4)]
    assert list(gpu.billed_cost) == [Decimal("98.32")] * 3 + [Decimal("1"), Decimal("0.5")]
    volume = lines[lines.resource_id == "vol-1"]
    assert list(volume.line_count) == [3] and list(volume.billed_cost) == [Decimal("0.03")]


def test_a_repeated_hour_inside_a_run_leaves_the_run_whole(tmp_path):
    """00:00 twice, then 01:00 and 02:00: the repeats stay apart, 01:00–03:00 is one run of two."""
    rows = [f"{hour(h)},Usage,98.32,98.32,i-gpu,p5.48xlarge" for h in (0, 0, 1, 2)]
    path = tmp_path / "repeat.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    lines = read_lines(path)
    assert list(zip(lines.row, lines.line_count, lines.start.dt.hour, lines.end.dt.hour)) == [
        (1, 1, 0, 1), (2, 1, 0, 1), (3, 2, 1, 3)]
    assert sum(lines.billed_cost, Decimal(0)) == Decimal("393.28")


def test_a_gpu_line_without_a_resource_keeps_its_hours_alone(tmp_path):
    """A GPU instance line with no resource id is timed by its own columns; a non-GPU line with no
    resource id is not, even beside it."""
    rows = [f"{hour(h)},Usage,98.32,98.32,,p4d.24xlarge" for h in (0, 1, 2)]
    rows += [f"{hour(h)},Usage,1.5,1.5,," for h in (0, 1, 2)]
    path = tmp_path / "no_resource.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    lines = read_lines(path)
    assert list(zip(lines.line_count, lines.start.dt.hour, lines.end.dt.hour)) == [(3, 0, 3), (3, 0, 3)]
    timed = read_lines(path, grain="line")
    assert len(timed) == 6


# --- summing only what DECIMAL(38, 20) holds exactly -----------------------------------------------

@pytest.mark.parametrize(("amount", "summed"), [
    ("0.12345678901234567", True),            # 19 characters: measured, 17 places
    ("123456789012345678", True),             # 18 digits, no point: fits at a glance
    ("0.000000000000000000001", False),       # 21 places
    ("1e-21", False), ("1.5E-3", True),       # an exponent: places less the exponent
    ("0.00000000000000000001", True),         # 20 places exactly
])
def test_one_amount_that_does_not_fit_exactly_keeps_every_line_apart(tmp_path, amount, summed):
    rows = [f"{hour(h)},Usage,{amount if h == 1 else '0.25'},0.25,vol-1," for h in range(3)]
    path = tmp_path / "amounts.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    lines = read_lines(path)
    assert len(lines) == (1 if summed else 3)
    assert sum(lines.billed_cost, Decimal(0)) == Decimal("0.5") + Decimal(amount)


# --- CUR staging -----------------------------------------------------------------------------------

def raw_rows(con, order: list[int]) -> None:
    """Table ``raw`` with one usage line and one RI fee with an unused part per data row, inserted
    in the order ``order`` of their rows."""
    con.execute(cur_sql.create_raw_sql())
    names = ", ".join(cur_sql.FIELDS)
    for row in order:
        values = {name: None for name in cur_sql.FIELDS}
        values.update(line_item_line_item_type="RIFee" if row % 2 else "Usage", line_item_unblended_cost="1.5",
                      line_item_usage_start_date="2024-01-01 00:00:00",
                      line_item_usage_end_date="2024-01-01 01:00:00",
                      reservation_reservation_arn="arn:ri" if row % 2 else None,
                      reservation_unused_recurring_fee="0.25" if row % 2 else None,
                      line_item_resource_id=f"i-{row}")
        con.execute(f"INSERT INTO raw (_file, _row, _h, {names}, _tags) VALUES (0, ?, ?, "
                    f"{', '.join('?' for _ in cur_sql.FIELDS)}, '{{}}')", [row, row * 7, *values.values()])


def staged(order: list[int]) -> tuple[list, list]:
    """(mapped rows, origin rows) after :func:`cur.stage` over a raw filled in ``order``."""
    with duckdb.connect(":memory:") as con:
        prepare(con)
        raw_rows(con, order)
        cur.stage(con)
        return (con.execute("SELECT * FROM mapped").fetchall(),
                con.execute("SELECT * FROM origin").fetchall())


def sorted_staging(order: list[int]) -> tuple[list, list]:
    """The same through the sorting queries."""
    with duckdb.connect(":memory:") as con:
        prepare(con)
        raw_rows(con, order)
        con.execute(cur_sql.mapped_sql())
        con.execute(cur_sql.origin_sql())
        return (con.execute("SELECT * FROM mapped").fetchall(),
                con.execute("SELECT * FROM origin").fetchall())


@pytest.mark.parametrize("order", [[1, 2, 3, 4], [3, 1, 4, 2]])
def test_staging_without_a_sort_gives_the_sorted_rows(order):
    """Each fee's unused row follows it; a raw out of file order is sorted as before."""
    mapped, origin = staged(order)
    assert (mapped, origin) == sorted_staging(order)
    assert origin == [(0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 3, 0), (0, 3, 1), (0, 4, 0)]
    unused = [row for row in mapped if row[list(cur_sql.base_columns()).index("CommitmentDiscountStatus") + 1] == "Unused"]
    assert len(unused) == 2


def test_file_order_is_strictly_increasing_file_row_sub_row():
    order = cur.in_file_order
    assert order(np.array([0, 0, 0, 1]), np.array([1, 1, 2, 1]), np.array([0, 1, 0, 0]))
    assert not order(np.array([0, 0]), np.array([2, 1]), np.array([0, 0]))
    assert not order(np.array([0, 0]), np.array([1, 1]), np.array([0, 0]))
    assert not order(np.array([1, 0]), np.array([1, 2]), np.array([0, 0]))
    assert order(np.array([], dtype=int), np.array([], dtype=int), np.array([], dtype=int))


# --- a dialect's table as src ----------------------------------------------------------------------

def test_a_text_table_is_taken_over_and_a_typed_one_copied(tmp_path):
    with duckdb.connect(":memory:") as con:
        con.execute("CREATE TABLE mapped AS SELECT * FROM (VALUES ('1.5', 'Usage'), (NULL, 'Tax')) t(BilledCost, x_Kind)")
        columns = load_focus_named(con, "mapped", tmp_path / "x.csv", consume=True)
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'mapped'").fetchall() == [(0,)]
        assert con.execute("SELECT rowid, * FROM src").fetchall() == [(0, "1.5", "Usage"), (1, None, "Tax")]
        assert columns.focus == {"BilledCost": "c0"} and columns.extras == {"x_Kind": "c1"}
        con.execute("DROP TABLE src")
        con.execute("CREATE TABLE mapped AS SELECT * FROM (VALUES (DECIMAL '1.50', 'Usage')) t(BilledCost, x_Kind)")
        load_focus_named(con, "mapped", tmp_path / "x.csv", consume=True)
        assert con.execute("SELECT * FROM src").fetchall() == con.execute(
            "SELECT CAST(BilledCost AS VARCHAR), x_Kind FROM mapped").fetchall() == [("1.500", "Usage")]


def test_a_repeated_cur_line_is_still_found_after_the_take_over(tmp_path):
    """The mapped table becomes src without a copy; identical lines are still an error."""
    path = tmp_path / "cur.csv"
    header = "lineItem/LineItemType,lineItem/UnblendedCost,lineItem/UsageStartDate,lineItem/UsageEndDate\n"
    path.write_text(header + "Usage,1.5,2024-01-01T00:00:00Z,2024-01-01T01:00:00Z\n" * 2)
    spec = SourceSpec(name="cur", kind="billing", format="cur", path=path)
    with pytest.raises(InputError, match="identical in every column to row 1"):
        cur.CurConnector(spec, ReadContext(utc(2024, 1, 1), utc(2025, 1, 1), "USD")).read()


# --- decimals ---------------------------------------------------------------------------------------

def test_decimal_texts_parse_once_each_and_keep_their_spelling():
    texts = pa.chunked_array([["1.50", None, "1.50"], ["0", "-2E+3"]])
    values = decimal_series(texts)
    assert values.dtype == object and values.tolist() == [Decimal("1.50"), None, Decimal("1.50"), Decimal("0"),
                                                          Decimal("-2E+3")]
    assert [str(v) for v in values.dropna()] == ["1.50", "1.50", "0", "-2E+3"]
    assert values[0] is values[2]
    assert decimal_series(pa.chunked_array([], pa.string())).tolist() == []
    with pytest.raises(TypeError):
        decimal_series(pa.chunked_array([["1", None]]), nullable=False)
