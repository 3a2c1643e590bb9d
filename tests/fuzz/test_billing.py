"""Fuzz the billing readers: FOCUS, CUR and Azure exports, CSV (plain and gzipped) and Parquet."""
from __future__ import annotations

import gzip
from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from tests.builders import LEGACY_HEADER, legacy_row
from tests.fuzz.harness import FUZZ, check, mutated, mutated_cells, read_csv_seed, read_source, scratch
from tests.fuzz.tables import parquet_file
from tests.hostile.harness import HEADER, focus_row
from tests.paths import FIXTURES

WIDE = (FIXTURES / "focus_dialects" / "focus12_dialect.csv").read_bytes()
NARROW = (HEADER + focus_row() + focus_row(row=2, tags="") + focus_row(row=3, effective="-0.25")).encode()
FOCUS_HEADER, FOCUS_ROWS = read_csv_seed(FIXTURES / "focus_dialects" / "focus12_dialect.csv")
AZURE_HEADER, AZURE_ROWS = read_csv_seed(FIXTURES / "azure_synthetic" / "mca_amortized_gpu.csv")
CUR_ROWS = [legacy_row(n, cost, hour=n) for n, cost in enumerate(("1.5", "0", "-2.25", "3"))]
CUR_TEXT = "\n".join([",".join(LEGACY_HEADER)] + [",".join(r) for r in CUR_ROWS]).encode()
UTC = timezone.utc
CUR_WINDOW = (datetime(2026, 9, 1, tzinfo=UTC), datetime(2026, 9, 2, tzinfo=UTC))
AZURE_WINDOW = (datetime(2024, 5, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC))


@FUZZ
@given(data=st.one_of(mutated(WIDE), mutated(NARROW), mutated_cells(FOCUS_HEADER, FOCUS_ROWS)),
       gz=st.booleans())
def test_focus_csv(data, gz):
    with scratch() as folder:
        path = folder / ("bill.csv.gz" if gz else "bill.csv")
        path.write_bytes(gzip.compress(data) if gz else data)
        check(lambda: read_source("focus", path), path)


@FUZZ
@given(st.data())
def test_focus_parquet(data):
    with scratch() as folder:
        path = data.draw(parquet_file(FOCUS_HEADER, FOCUS_ROWS, folder / "bill.parquet"))
        check(lambda: read_source("focus", path), path)


@FUZZ
@given(data=st.one_of(mutated_cells(LEGACY_HEADER, CUR_ROWS), mutated(CUR_TEXT)), gz=st.booleans())
def test_cur_csv(data, gz):
    with scratch() as folder:
        path = folder / ("cur.csv.gz" if gz else "cur.csv")
        path.write_bytes(gzip.compress(data) if gz else data)
        check(lambda: read_source("cur", path, window=CUR_WINDOW), path)


@FUZZ
@given(st.data())
def test_cur_parquet(data):
    with scratch() as folder:
        path = data.draw(parquet_file(LEGACY_HEADER, CUR_ROWS, folder / "cur.parquet"))
        check(lambda: read_source("cur", path, window=CUR_WINDOW), path)


@FUZZ
@given(data=st.one_of(mutated_cells(AZURE_HEADER, AZURE_ROWS[:4]),
                      mutated((FIXTURES / "azure_synthetic" / "mca_amortized_gpu.csv").read_bytes())))
def test_azure_csv(data):
    with scratch() as folder:
        path = folder / "azure.csv"
        path.write_bytes(data)
        check(lambda: read_source("azure", path, window=AZURE_WINDOW), path)


@FUZZ
@given(st.data())
def test_azure_parquet(data):
    with scratch() as folder:
        path = data.draw(parquet_file(AZURE_HEADER, AZURE_ROWS[:4], folder / "azure.parquet"))
        check(lambda: read_source("azure", path, window=AZURE_WINDOW), path)



# --- CUR 2.0 with MAP columns: the summing stage (connectors/billing/cur_compact.py) changes nothing --------

TAG_KEYS = ("user:team", "user_team", "team", "aws:createdBy", "resourceTags/user:app", "", "é中😀", "=1+1")
TAG_VALUES = (None, "", "NULL", "a", "b", "=HYPERLINK(\"x\")", "\\N", "x" * 300)
AMOUNTS = (0.0, 1.5, -2.25, 0.1, 3.0, 98.32, 1e-10, 0.12345678901, 262144.5, -0.0)
HOSTILE_AMOUNTS = (1e-25, 1e20, 123456789.123456789)


@st.composite
def cur2_file(draw, path):
    """The CUR 2.0 seed rows repeated over hours, with drawn tags, product MAP entries, amounts and
    periods (some rows repeated whole, some ending before they start)."""
    from datetime import timedelta

    from tests.builders import cur2_rows, write_cur2
    seed = cur2_rows()
    rows = []
    for _ in range(draw(st.integers(1, 30))):
        row = dict(draw(st.sampled_from(seed)))
        shift = timedelta(hours=draw(st.integers(-30, 40)))
        row["line_item_usage_start_date"] = row["line_item_usage_start_date"] + shift
        reversed_ = draw(st.integers(0, 39)) == 0
        row["line_item_usage_end_date"] = row["line_item_usage_end_date"] + (-shift if reversed_ else shift)
        if draw(st.booleans()):
            row["resource_tags"] = draw(st.dictionaries(st.sampled_from(TAG_KEYS), st.sampled_from(TAG_VALUES),
                                                        max_size=3))
        if draw(st.booleans()):
            row["product"] = {**(row.get("product") or {}),
                              draw(st.sampled_from(("instance_type", "sku", "region", "product_name"))):
                              draw(st.sampled_from(("p5.48xlarge", "", "m5.large", "é", None)))}
        if draw(st.booleans()):
            hostile = draw(st.integers(0, 19)) == 0
            row["line_item_unblended_cost"] = draw(st.sampled_from(HOSTILE_AMOUNTS if hostile else AMOUNTS))
        rows.append(row)
        if draw(st.integers(0, 39)) == 0:
            rows.append(dict(row))
    return write_cur2(path, rows)


def outcome(path, summed: bool):
    """The connector's tables as text, or the text of the errors it raised, with the summing stage
    on or off."""
    from connectors.billing import cur
    from connectors.errors import InputError, InputErrors
    kept = cur.compact
    if not summed:
        cur.compact = lambda *args, **kwargs: False
    try:
        result = read_source("cur", path, window=CUR2_WINDOW)
    except (InputError, InputErrors) as exc:
        return str(exc)
    finally:
        cur.compact = kept
    return {name: table.astype(str).to_dict("list") for name, table in result.tables.items()
            if name in ("lines", "split_summary", "notes")}


CUR2_WINDOW = (datetime(2026, 9, 1, 2, tzinfo=UTC), datetime(2026, 9, 2, 7, tzinfo=UTC))


@FUZZ
@given(st.data())
def test_cur2_maps_summed_and_unsummed_agree(data):
    with scratch() as folder:
        path = data.draw(cur2_file(folder / "export-00001.snappy.parquet"))
        check(lambda: read_source("cur", path, window=CUR2_WINDOW), path)
        assert outcome(path, summed=True) == outcome(path, summed=False)
