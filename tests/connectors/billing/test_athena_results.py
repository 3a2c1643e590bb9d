"""Where an Athena query's rows are read from (connectors/billing/athena_results.py): the pages of
GetQueryResults or the CSV file Athena writes at the output location, against moto on 127.0.0.1.

moto writes a query's seeded rows to the output location as the query's CSV file, quoted as Athena
quotes them (tests/servers/moto_main.py); the proxy in front of moto cuts its answers into pages of
1,000 rows with NextToken, as Athena sends them. Either way the lines, the money and the digest
must be the same.
"""
from __future__ import annotations

import hashlib
from decimal import Decimal

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.billing import athena_results
from connectors.duck import prepare
from connectors.errors import FatalSourceError, InputError
from tests.servers.athena import MONTH, OUTPUT, connector, local_rows, seed

pytestmark = pytest.mark.services


def read(proxy, moto, window=MONTH, **extra):
    """Seed the window's rows, read them through the connector; (frame, connector)."""
    seed(moto, *local_rows(window))
    source = connector(proxy, window, **extra)
    return source.read(), source


def money(lines) -> tuple:
    return (sum(lines.billed_cost, Decimal(0)), sum(lines.effective_cost, Decimal(0)),
            sum(lines.pricing_quantity.dropna(), Decimal(0)), int(lines.line_count.sum()))


def same_lines(a, b) -> bool:
    """The same lines, their ids apart (``<query execution id>:<result row>``)."""
    def strip(lines):
        out = lines.copy()
        out["line_id"] = out.line_id.str.partition(":")[2]
        return out.reset_index(drop=True)
    return strip(a).equals(strip(b))


def test_a_result_of_many_pages_is_read_from_its_file_as_the_pages_give_it(moto, glue, proxy):
    """Before: every result was paged, 1,000 rows a request (the workshop month: 10 requests;
    a fleet's month, hundreds of thousands of rows, one request per thousand, as Python strings)."""
    from_file, source = read(proxy, moto)
    assert proxy.count("GetQueryResults") == 1
    proxy.reset()
    paged, other = read(proxy, moto, results="pages")
    assert proxy.count("GetQueryResults") == -(-(len(local_rows(MONTH)[1]) + 1) // 1000) > 1
    assert paged.tables["notes"].note[0].endswith("paged through GetQueryResults")
    assert same_lines(from_file.tables["lines"], paged.tables["lines"])
    assert money(from_file.tables["lines"]) == money(paged.tables["lines"])
    assert from_file.rows == paged.rows == 91264
    # the digest is the result as Athena's CSV, whichever way it was read
    assert source.fingerprint() == other.fingerprint()


def test_results_s3_reads_the_file_even_for_one_page(moto, glue, proxy):
    from datetime import datetime, timezone
    hour = (datetime(2018, 12, 1, 6, tzinfo=timezone.utc), datetime(2018, 12, 1, 7, tzinfo=timezone.utc))
    frame, source = read(proxy, moto, hour, results="s3")
    assert frame.tables["notes"].note[0].endswith(f"read from its result file {OUTPUT}{source.query_execution_id}.csv")
    proxy.reset()
    paged, _ = read(proxy, moto, hour)  # auto: one page is read from the page
    assert paged.tables["notes"].note[0].endswith("paged through GetQueryResults")
    assert same_lines(frame.tables["lines"], paged.tables["lines"])


def test_auto_pages_a_result_whose_file_cannot_be_read_and_says_so(moto, glue, proxy):
    frame, _ = read(proxy, moto, output_location="s3://no-such-results-bucket/costaudit/")
    note = frame.tables["notes"].note[0]
    assert "paged through GetQueryResults (its result file could not be read: S3 answered NoSuchBucket" in note
    assert proxy.count("GetQueryResults") > 1 and frame.rows == 91264


def test_results_s3_names_a_file_it_cannot_read(moto, glue, proxy):
    with pytest.raises(InputError) as error:
        read(proxy, moto, output_location="s3://no-such-results-bucket/costaudit/", results="s3")
    text = str(error.value)
    assert "the result file of Athena query" in text and "NoSuchBucket" in text
    assert error.value.column == "results" and 'results = "pages"' in (error.value.expected or "")


def test_an_unknown_results_option_is_an_input_error(moto, glue, proxy):
    with pytest.raises(InputError) as error:
        connector(proxy, MONTH, results="file").options()
    assert error.value.column == "results" and '"auto" or "s3" or "pages"' in error.value.expected


# --- the file's form, on files written here ----------------------------------------------------

def csv_of(names, rows) -> bytes:
    return b"".join(athena_results.csv_line(row) for row in [names, *rows])


def file_rows(tmp_path, data: bytes, width: int) -> list[tuple]:
    path = tmp_path / "result.csv"
    path.write_bytes(data)
    with duckdb.connect() as con:
        prepare(con)
        athena_results.read_csv(con, path, width, "s3://bucket/q.csv")
        return con.execute(f"SELECT * FROM {athena_results.TABLE} ORDER BY rowid").fetchall()


def test_quotes_commas_newlines_empty_and_null_values_keep_their_text(tmp_path):
    rows = [['{"team":"a, b"}', "", None], ['line\nbreak "quoted"', "x", "0.000000000000000001"]]
    assert file_rows(tmp_path, csv_of(["a", "b", "c"], rows), 3) == [tuple(r) for r in rows]


def test_a_file_that_is_not_the_querys_csv_is_named(tmp_path):
    path = tmp_path / "result.csv"
    path.write_bytes(csv_of(["a", "b"], [["1", "2"]]))
    with pytest.raises(FatalSourceError, match="does not name the query's columns"):
        athena_results.check_header(path, ["a", "c"], "s3://bucket/q.csv")
    with pytest.raises(FatalSourceError, match=r"s3://bucket/q.csv: not Athena's CSV of the query's 2 columns"):
        file_rows(tmp_path, b'"a","b"\n"1","2","3"\n', 2)


TEXT = st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(TEXT, min_size=3, max_size=3), max_size=8))
def test_fuzz_any_values_round_trip_through_the_file_and_the_digest(tmp_path_factory, rows):
    """Whatever the values, the file gives back the rows the pages would, and the digest of the
    pages written out is the digest of the file's bytes."""
    data = csv_of(["a", "b", "c"], rows)
    folder = tmp_path_factory.mktemp("fuzz")
    assert file_rows(folder, data, 3) == [tuple(r) for r in rows]
    paged = hashlib.sha256(b"".join(athena_results.csv_line(r) for r in [["a", "b", "c"], *rows]))
    assert paged.hexdigest() == hashlib.sha256(data).hexdigest()
