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

