"""GcpBillingConnector and billing_sql: BigQuery (a local emulator) against DuckDB on the same rows.

The BigQuery tests run the connector's own code path, google-cloud-bigquery client included,
against the session's bqemulator on 127.0.0.1 (tests/servers/bigquery.py), through a
``FaultProxy`` that records requests and injects what the emulator lacks: 5xx faults, access
denied, a dry-run byte estimate and BigQuery's bytesBilledLimitExceeded refusal. The rows are the
synthetic May 2024 detailed export of tests/servers/gcp_export.py.
"""
from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot

import connectors.billing.gcp_billing as gcp
from connectors.base import ReadContext, SourceSpec
from connectors.billing.gcp_sql import CREDIT_TYPES, render
from connectors.errors import FatalSourceError, InputError, RetriableSourceError
from connectors.registry import resolve
from schemas.errors import UsageError
from tests.servers.bigquery import DATASET, PROJECT, FaultProxy, client_for, load_table
from tests.servers.gcp_export import (
    JUNE,
    MAY,
    as_float_json,
    bq_schema,
    export_rows,
    in_window,
    row,
    write_ndjson,
    write_parquet,
)

pytestmark = pytest.mark.services

DETAILED = f"{PROJECT}.{DATASET}.gcp_billing_export_resource_v1_0A1B2C_3D4E5F_6A7B8C"
STANDARD = f"{PROJECT}.{DATASET}.gcp_billing_export_v1_0A1B2C_3D4E5F_6A7B8C"


@pytest.fixture
def proxy(emulator):
    """A fresh FaultProxy in front of the session's emulator."""
    server = FaultProxy(emulator).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rows():
    """The synthetic export."""
    return export_rows()


@pytest.fixture(scope="module")
def loaded(emulator, rows):
    """The detailed export (FLOAT64 money, as GCP writes it) and a standard one (NUMERIC money)."""
    client = client_for(emulator)
    client.create_dataset(f"{PROJECT}.{DATASET}", exists_ok=True)
    load_table(client, DETAILED, [as_float_json(r) for r in rows], bq_schema())
    standard = [dict(r, resource=None) for r in rows if r["service"]["description"] != "Compute Engine"]
    load_table(client, STANDARD, standard, bq_schema(detailed=False, numeric=True))
    yield client
    client.close()


def connector(*, table: str | None = None, path: Path | None = None, endpoint: str | None = None,
              start=MAY, end=JUNE, **options):
    """A GcpBillingConnector over a table (through ``endpoint``) or a local path."""
    if table:
        options = {"table": table, "project": PROJECT, "api_endpoint": endpoint, **options}
    spec = SourceSpec(name="gcp", kind="billing", format="gcp_billing", path=path, options=options)
    return resolve("gcp_billing")(spec, ReadContext(start=start, end=end, currency="USD"))


# --- oracles ---------------------------------------------------------------------------------

CATEGORY = {"regular": "Usage", "tax": "Tax", "adjustment": "Adjustment", "rounding_error": "Adjustment"}


def dsum(values) -> Decimal:
    """Exact Decimal sum."""
    return sum((Decimal(v) for v in values), Decimal(0))


def expected_totals(rows: list[dict]) -> dict[str, Decimal]:
    """Per charge category and per credit type, straight from the export rows, each clipped to May
    pro rata by time (the tax of the Pacific invoice month runs 7 hours into June: 737 of its 744 hours)."""
    out: dict[str, Decimal] = {}
    for r in in_window(rows):
        key = CATEGORY[r["cost_type"]]
        inside, whole = seconds_in_may(r)
        out[key] = out.get(key, Decimal(0)) + Decimal(r["cost"]) * inside / whole
        for credit in r["credits"]:
            kind = credit["type"] if credit["type"] in CREDIT_TYPES else "OTHER"
            out[f"Credit:{kind}"] = out.get(f"Credit:{kind}", Decimal(0)) + Decimal(credit["amount"]) * inside / whole
    return out


def seconds_in_may(row: dict) -> tuple[int, int]:
    """The seconds of a row's usage period inside May (UTC), and all its seconds."""
    start, end = (pd.Timestamp(row[key].replace(" UTC", "Z")) for key in ("usage_start_time", "usage_end_time"))
    inside = min(end, pd.Timestamp(JUNE)) - max(start, pd.Timestamp(MAY))
    return inside // pd.Timedelta(seconds=1), (end - start) // pd.Timedelta(seconds=1)


def totals(lines) -> dict[str, Decimal]:
    """The same keys from a ``lines`` table."""
    out: dict[str, Decimal] = {}
    for line in lines.to_dict("records"):
        key = line["charge_category"]
        if key == "Credit":
            key = f"Credit:{json.loads(line['extra'])['x_CreditType']}"
        out[key] = out.get(key, Decimal(0)) + line["billed_cost"]
    return out


def comparable(lines):
    """A lines table without the line ids (they name the table or file read)."""
    return lines.drop(columns=["line_id"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def local_files(tmp_path_factory, rows):
    """The same rows as bq extract NDJSON and as Parquet."""
    folder = tmp_path_factory.mktemp("gcp_export")
    return {"json": write_ndjson(rows, folder / "export-000000000000.json"),
            "parquet": write_parquet(rows, folder / "export.parquet")}


@pytest.fixture(scope="module")
def from_bigquery(loaded, emulator):
    """The detailed export read through the connector from the emulator (no proxy)."""
    source = connector(table=DETAILED, endpoint=f"http://127.0.0.1:{emulator}")
    return source, source.read()


# --- BigQuery (emulator) and DuckDB on the same rows -----------------------------------------

def test_bigquery_totals_exact(from_bigquery, rows):
    """Every category and credit type matches the export to the last digit; window respected."""
    source, frame = from_bigquery
    lines = frame.tables["lines"]
    assert totals(lines) == expected_totals(rows)
    assert frame.rows == len(in_window(rows)) == len(rows) - 2
    assert lines["start"].min() >= MAY and lines["start"].max() < JUNE
    assert frame.covered == (MAY, JUNE)  # the tax's 7 hours of June are clipped off
    assert len(frame.sha256) == 64 and source.fingerprint() == frame.sha256
    assert source.bytes_scanned == 0  # bqemulator has no cost model: its dry run says 0 bytes


def test_bigquery_lines_carry_focus_fields(from_bigquery, rows):
    """GPU SKUs, machine parts, resource, project, labels, invoice month, Pacific time."""
    lines = from_bigquery[1].tables["lines"]
    a100 = lines[(lines.charge_description == "Nvidia Tesla A100 GPU running in Americas")
                 & (lines.charge_category == "Usage")]
    assert dsum(a100.pricing_quantity) == 8 * 240 and set(a100.pricing_unit) == {"hour"}
    assert set(a100.resource_id) == {"gke-inference-a2-pool-7f3a"}
    assert set(a100.sub_account_id) == {"ml-prod"}
    assert set(a100.tags) == {'{"goog-k8s-cluster-name":"inference","team":"ml"}'}
    extra = [json.loads(e) for e in a100.extra]
    assert {e["x_MachineSpec"] for e in extra} == {"a2-highgpu-8g"}
    # hours before 07:00 UTC on the 1st are April's invoice (Pacific time); runs of identical hours
    # are one line each, so April's run ends at 07:00 and May's starts there
    assert {e["x_InvoiceMonth"] for e, s in zip(extra, a100.end) if s.hour <= 7 and s.day == 1} == {"202404"}
    assert {e["x_InvoiceMonth"] for e, s in zip(extra, a100.end) if s.day > 1} == {"202405"}
    h100 = lines[lines.charge_description.str.startswith("Nvidia H100")]
    assert set(h100.tags) == set(a100.tags)  # labels in another export order: the same Tags
    credits = lines[lines.charge_category == "Credit"]
    assert credits.pricing_quantity.isna().all()  # a credit never adds usage (GPU-hours)
    assert set(lines.charge_category) == {"Usage", "Credit", "Tax", "Adjustment"}


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_same_sql_on_duckdb_gives_identical_lines(from_bigquery, local_files, fmt):
    """The DuckDB rendering over the same rows as a local export: every line, every digit."""
    local = connector(path=local_files[fmt]).read()
    assert local.rows == from_bigquery[1].rows
    pd_assert_equal(comparable(local.tables["lines"]), comparable(from_bigquery[1].tables["lines"]))


def pd_assert_equal(left, right) -> None:
    """Frames equal column by column, every Decimal to the last digit."""
    assert list(left.columns) == list(right.columns)
    assert len(left) == len(right)
    for column in left.columns:
        assert left[column].tolist() == right[column].tolist(), column


def test_duckdb_list_rewrite_equals_correlated_subqueries(local_files):
    """DuckDB's list-lambda rewrite gives what the correlated subqueries as written give."""
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        gcp.export_view(con, [str(local_files["json"])], "json", local_files["json"])
        results = []
        for lambdas in (True, False):
            sql = render("gcp_lines", "duckdb", table="billing_export", start=MAY, end=JUNE,
                         list_lambdas=lambdas)
            assert ("UNNEST" in sql) != lambdas
            results.append(sorted(con.execute(sql).fetchall(), key=repr))
    assert results[0] == results[1] and len(results[0]) > 1000


@pytest.mark.parametrize("grain", ["hour", "day"])
def test_credits_never_dropped_or_duplicated(loaded, emulator, tmp_path, rows, grain):
    """Rows with 0, 1 and 2 credits: each credit once, each charge once, on both engines."""
    start = MAY + timedelta(hours=5)
    picked = [r for r in rows if r["usage_start_time"] == start.strftime("%Y-%m-%d %H:%M:%S UTC")
              and r["resource"] and "a2" in r["resource"]["name"]]
    assert sorted(len(r["credits"]) for r in picked) == [0, 1, 2]
    table = f"{PROJECT}.{DATASET}.gcp_billing_export_resource_v1_credits"
    load_table(loaded, table, [as_float_json(r) for r in picked], bq_schema())
    remote = connector(table=table, endpoint=f"http://127.0.0.1:{emulator}", grain=grain).read()
    local = connector(path=write_ndjson(picked, tmp_path / "c.json"), grain=grain).read()
    for frame in (remote, local):
        lines = frame.tables["lines"]
        assert (lines.charge_category == "Usage").sum() == 3
        kinds = sorted(json.loads(e)["x_CreditType"] for e in lines[lines.charge_category == "Credit"].extra)
        assert kinds == ["COMMITTED_USAGE_DISCOUNT", "COMMITTED_USAGE_DISCOUNT", "PROMOTION"]
        assert totals(lines) == expected_totals(picked)
    pd_assert_equal(comparable(local.tables["lines"]), comparable(remote.tables["lines"]))


def test_standard_export_with_numeric_money(loaded, emulator, rows, tmp_path):
    """A standard export (no resource column; NUMERIC money here) reads with empty ResourceId."""
    frame = connector(table=STANDARD, endpoint=f"http://127.0.0.1:{emulator}").read()
    lines = frame.tables["lines"]
    subset = [r for r in rows if r["service"]["description"] != "Compute Engine"]
    assert set(lines.resource_id) == {""}
    assert totals(lines) == expected_totals(subset)
    local = connector(path=write_parquet(subset, tmp_path / "std.parquet", detailed=False)).read()
    pd_assert_equal(comparable(local.tables["lines"]), comparable(lines))


def test_a_table_with_no_row_in_the_window_says_where_its_rows_lie(loaded, emulator, rows):
    """Rule 5: the refusal of an empty window quotes the table's extent, asked of BigQuery only then
    (before: the note was written for local exports only)."""
    far = (datetime(1990, 1, 1, tzinfo=timezone.utc), datetime(1990, 2, 1, tzinfo=timezone.utc))
    frame = connector(table=DETAILED, endpoint=f"http://127.0.0.1:{emulator}", start=far[0], end=far[1]).read()
    assert frame.tables["lines"].empty
    first = min(datetime.strptime(r["usage_start_time"], "%Y-%m-%d %H:%M:%S UTC") for r in rows)
    (note,) = [n for n in frame.tables["notes"]["note"] if n.startswith("no line in the window")]
    last = max(datetime.strptime(r["usage_end_time"], "%Y-%m-%d %H:%M:%S UTC") for r in rows)
    assert note == f"no line in the window: its charge periods run from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC"
    inside = connector(table=DETAILED, endpoint=f"http://127.0.0.1:{emulator}").read()
    assert not [n for n in inside.tables["notes"]["note"] if n.startswith("no line in the window")]


def test_billing_totals_same_on_bigquery_and_duckdb(loaded, from_bigquery):
    """billing_totals over a FOCUS-named table: BigQuery rendering = DuckDB rendering = lines."""
    from google.cloud import bigquery

    lines = from_bigquery[1].tables["lines"]
    # NUMERIC holds 9 decimals: the tax clipped to May (737/744 of it) is written to 9 places
    nine = Decimal("1e-9")
    focus = [{"ChargeCategory": l["charge_category"], "ServiceName": l["service_name"],
              "BillingCurrency": l["currency"], "BilledCost": str(l["billed_cost"].quantize(nine)),
              "EffectiveCost": str(l["effective_cost"].quantize(nine)),
              "ChargePeriodStart": l["start"].strftime("%Y-%m-%d %H:%M:%S UTC"),
              "ChargePeriodEnd": l["end"].strftime("%Y-%m-%d %H:%M:%S UTC")}
             for l in lines.to_dict("records")]
    F = bigquery.SchemaField
    schema = [F(n, "STRING") for n in ("ChargeCategory", "ServiceName", "BillingCurrency")] + \
             [F("BilledCost", "NUMERIC"), F("EffectiveCost", "NUMERIC"),
              F("ChargePeriodStart", "TIMESTAMP"), F("ChargePeriodEnd", "TIMESTAMP")]
    table = f"{PROJECT}.{DATASET}.focus_view"
    load_table(loaded, table, focus, schema)
    remote = [tuple(r.values()) for r in loaded.query(render(
        "billing_totals", "bigquery", table=table, start=MAY, end=JUNE)).result()]
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("CREATE TABLE focus_view AS SELECT * FROM read_json(?, format='array', columns="
                    "{ChargeCategory: 'VARCHAR', ServiceName: 'VARCHAR', BillingCurrency: 'VARCHAR', "
                    "BilledCost: 'VARCHAR', EffectiveCost: 'VARCHAR', ChargePeriodStart: 'VARCHAR', "
                    "ChargePeriodEnd: 'VARCHAR'})", [str(write_json(focus))])
        local = con.execute(render("billing_totals", "duckdb", table="focus_view", start=MAY,
                                   end=JUNE)).fetchall()
    assert remote == local
    assert dsum(r[3] for r in local) == dsum(line["BilledCost"] for line in focus)
    assert {r[0] for r in local} == {"Usage", "Credit", "Tax", "Adjustment"}


def write_json(records: list[dict]) -> Path:
    """Records as one JSON array in a temporary file."""
    import tempfile

    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    with handle:
        json.dump(records, handle)
    return Path(handle.name)


# --- dry run, maximum_bytes_billed, faults (through the proxy) -------------------------------

def query_jobs(proxy: FaultProxy, *, dry: bool) -> list[dict]:
    """Query job requests the proxy saw (dry runs or real queries)."""
    return [body for method, path, body in proxy.requests
            if method == "POST" and "/jobs" in path and "query" in body.get("configuration", {})
            and bool(body["configuration"].get("dryRun")) == dry]


def test_dry_run_first_and_limit_sent(loaded, proxy, caplog):
    """A dry run precedes the query; its bytes are logged and kept; the limit goes with the query."""
    proxy.dry_run_bytes = 7_340_032
    source = connector(table=DETAILED, endpoint=proxy.url, maximum_bytes_billed=10**9)
    with caplog.at_level(logging.INFO, logger="connectors.billing.gcp_billing"):
        source.read()
    assert source.bytes_scanned == 7_340_032
    assert "would scan 7340032 bytes" in caplog.text and DETAILED in caplog.text
    dry, real = query_jobs(proxy, dry=True), query_jobs(proxy, dry=False)
    assert len(dry) == 1 and len(real) == 1
    assert real[0]["configuration"]["query"]["maximumBytesBilled"] == str(10**9)
    order = [i for i, (_, _, body) in enumerate(proxy.requests) if body in (dry[0], real[0])]
    assert proxy.requests[order[0]][2] is dry[0]


def test_dry_run_above_limit_refused_before_running(loaded, proxy):
    """An estimate above maximum_bytes_billed: InputError naming table and limit; nothing runs."""
    proxy.dry_run_bytes = 3 * 10**12
    source = connector(table=DETAILED, endpoint=proxy.url, maximum_bytes_billed=10**9)
    with pytest.raises(InputError) as caught:
        source.read()
    message = str(caught.value)
    assert DETAILED in message and "1,000,000,000" in message and "3,000,000,000,000" in message
    assert query_jobs(proxy, dry=False) == []


def test_bigquery_refusal_above_maximum_bytes_billed(loaded, proxy):
    """BigQuery's own bytesBilledLimitExceeded refusal becomes an InputError (not retried)."""
    proxy.billed_bytes = 10_485_760  # what BigQuery bills at least; the emulator never refuses
    source = connector(table=DETAILED, endpoint=proxy.url, maximum_bytes_billed=1000)
    with pytest.raises(InputError) as caught:
        source.read()
    message = str(caught.value)
    assert DETAILED in message and "maximum_bytes_billed = 1,000" in message
    assert "10485760 or higher required" in message
    assert len(query_jobs(proxy, dry=False)) == 1


@pytest.fixture
def quick_retries(monkeypatch):
    """Shorter backoff for the fault tests."""
    monkeypatch.setattr(gcp.GcpBillingConnector, "backoff_seconds", 0.01)


def test_transient_faults_are_retried(loaded, proxy, quick_retries, rows):
    """503 on the dry run and 429 on the table look-up: retried, then the same totals."""
    proxy.faults = [("GET", "/tables/", 429, "rateLimitExceeded"),
                    ("POST", "/jobs", 503, "backendError"),
                    ("POST", "/jobs", 500, "internalError")]
    frame = connector(table=DETAILED, endpoint=proxy.url).read()
    assert proxy.faults == []
    assert totals(frame.tables["lines"]) == expected_totals(rows)


def test_persistent_fault_is_retriable_error(loaded, proxy, quick_retries):
    """A fault that outlasts the retries surfaces as RetriableSourceError."""
    proxy.faults = [("GET", "/tables/", 503, "backendError")] * (gcp.GcpBillingConnector.retries + 1)
    with pytest.raises(RetriableSourceError, match="transient"):
        connector(table=DETAILED, endpoint=proxy.url).read()
    assert proxy.faults == []


def test_permission_denied_names_table_and_roles(loaded, proxy, quick_retries):
    """403 accessDenied: FatalSourceError with the table and the roles; never retried."""
    proxy.faults = [("GET", "/tables/", 403, "accessDenied")] * 2
    with pytest.raises(FatalSourceError) as caught:
        connector(table=DETAILED, endpoint=proxy.url).read()
    message = str(caught.value)
    assert DETAILED in message and "roles/bigquery.dataViewer" in message
    assert "roles/bigquery.jobUser" in message
    assert len(proxy.faults) == 1


def test_missing_table_and_non_export(loaded, emulator):
    """A missing table is fatal; a FOCUS view without the export's columns is read as FOCUS (before
    issue 18 it was refused as no export; tests/connectors/billing/test_focus_in_place.py)."""
    endpoint = f"http://127.0.0.1:{emulator}"
    with pytest.raises(FatalSourceError, match="not found"):
        connector(table=f"{PROJECT}.{DATASET}.no_such_table", endpoint=endpoint).read()
    assert connector(table=f"{PROJECT}.{DATASET}.focus_view", endpoint=endpoint).read().read_as == "focus"


def test_empty_window(loaded, emulator):
    """No export row in the window: no line, nothing covered, on BigQuery as locally."""
    frame = connector(table=DETAILED, endpoint=f"http://127.0.0.1:{emulator}",
                      start=datetime(2023, 1, 1, tzinfo=timezone.utc), end=MAY - timedelta(hours=1)).read()
    assert (frame.rows, len(frame.tables["lines"]), frame.covered) == (0, 0, (None, None))


@pytest.mark.parametrize("column, value", [("usage_end_time", -1e308), ("usage_start_time", "2026-13-45 00:00:00 UTC")])
def test_a_bad_usage_time_in_a_local_export_names_file_line_and_column(tmp_path, rows, column, value):
    """DuckDB's own cast error names no line nor field ("invalid timestamp field format")."""
    path = write_ndjson(rows, tmp_path / "export.json")
    lines = path.read_text().splitlines()
    record = json.loads(lines[41])
    record[column] = value
    lines[41] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    shown = "'-1e+308'" if value == -1e308 else repr(value)
    with pytest.raises(InputError, match=re.escape(f"{path}: row 42, column {column}: unreadable timestamp {shown} ")
                       + r"\(expected a timestamp such as 2026-09-01 00:00:00 UTC\)"):
        connector(path=path).read()


@pytest.mark.parametrize("line", [4, 10, 41])
@pytest.mark.parametrize("column, value, message", [
    ("cost", "NaN", "unparseable number 'NaN' (expected a decimal number)"),
    ("cost", "1,234.50", "unparseable number '1,234.50' (expected a decimal number)"),
    ("cost", [1, 2], "unparseable number '[1,2]' (expected a decimal number)"),
    ("cost", "1e400", "number out of range '1e400' (expected a decimal number of at most 29 integer digits "
                      "(DECIMAL(38, 9), BigQuery NUMERIC))"),
    ("labels", {"a": "b"}, """a JSON object, not an array: '{"a":"b"}' (expected a JSON array of {key, value} """
                           "objects)"),
    ("labels", '[{"key":"team"}]', """a JSON string, not an array: '[{"key":"team"}]' (expected a JSON array of """
                                   "{key, value} objects)"),
    ("sku", "A100", "a JSON string, not an object: 'A100' (expected a JSON object {id, description})"),
])
def test_a_bad_cell_in_a_local_export_names_its_own_line_and_column(tmp_path, rows, line, column, value, message):
    """An amount had no row ("Could not convert string "NaN" to DECIMAL(38,9) when casting from source
    column cost"); labels as an object named a line counted within DuckDB's buffer ("in line 2", "5",
    "21" for lines 4, 10, 41)."""
    path = write_ndjson(rows, tmp_path / "export.json")
    lines = path.read_text().splitlines()
    record = json.loads(lines[line - 1])
    record[column] = value
    lines[line - 1] = json.dumps(record, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as raised:
        connector(path=path).read()
    assert str(raised.value) == f"{path}: row {line}, column {column}: {message}"


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_a_bad_usage_time_deep_in_a_large_export_names_its_own_line(tmp_path, rows, fmt):
    """Two files of 200,000 rows: the line named is the bad value's own. Numbered with
    ``PARTITION BY filename`` over both files, the rows came out of order (line 357,878 or 96,221
    named for line 234,567 of a 400,000-line file, a different one each run)."""
    folder = tmp_path / "export"
    folder.mkdir()
    body = write_ndjson(rows, tmp_path / "one.json").read_text().splitlines()
    good = (body * (200_000 // len(body) + 1))[:200_000]
    bad = list(good)
    record = json.loads(bad[150_122])
    record["usage_start_time"] = "not a time"
    bad[150_122] = json.dumps(record)
    for name, lines in (("a", good), ("b", bad)):
        (folder / f"{name}.json").write_text("\n".join(lines) + "\n")
    if fmt == "parquet":
        with gcp.session() as con:
            for name in ("a", "b"):
                con.execute(f"COPY (SELECT * FROM read_json('{folder / name}.json', format='newline_delimited')) "
                            f"TO '{folder / name}.parquet' (FORMAT parquet, ROW_GROUP_SIZE 20000)")
                (folder / f"{name}.json").unlink()
    with pytest.raises(InputError, match=re.escape(f"b.{fmt}: row 150123, column usage_start_time: "
                                                   "unreadable timestamp 'not a time'")):
        connector(path=folder).read()


def test_case_errors_without_a_server():
    """A malformed table name, and plain http off this machine, are refused before any call."""
    with pytest.raises(InputError, match="project.dataset.table"):
        connector(table="just_a_table").read()
    with pytest.raises(InputError, match="plain http"):
        connector(table=DETAILED, endpoint="http://192.0.2.1:9050").read()


@pytest.mark.parametrize("error, expected", [
    ("ServiceUnavailable", RetriableSourceError), ("InternalServerError", RetriableSourceError),
    ("TooManyRequests", RetriableSourceError), ("BadGateway", RetriableSourceError),
    ("Forbidden", FatalSourceError), ("NotFound", FatalSourceError),
    ("Unauthorized", FatalSourceError), ("BadRequest", FatalSourceError)])
def test_error_mapping(error, expected):
    """google.api_core exceptions map onto our three error kinds."""
    from google.api_core import exceptions as gexc

    mapped = gcp.source_error(getattr(gexc, error)("boom"), DETAILED, 1000)
    assert isinstance(mapped, expected) and DETAILED in str(mapped)


def test_rate_limit_403_and_no_credentials():
    """A 403 with reason rateLimitExceeded is transient; missing ADC says how to log in."""
    from google.api_core import exceptions as gexc
    from google.auth.exceptions import DefaultCredentialsError

    limited = gexc.Forbidden("slow down", errors=[{"reason": "rateLimitExceeded"}])
    assert isinstance(gcp.source_error(limited, DETAILED, 1), RetriableSourceError)
    fatal = gcp.source_error(DefaultCredentialsError("none"), DETAILED, 1)
    assert isinstance(fatal, FatalSourceError) and "application-default login" in str(fatal)


# --- rendering and local files ---------------------------------------------------------------

@pytest.mark.parametrize("name", ["gcp_lines", "billing_totals"])
@pytest.mark.parametrize("dialect", ["duckdb", "bigquery", "trino"])
def test_renderings_parse(name, dialect):
    """Every definition renders and parses back in every dialect (trino: the Athena path)."""
    table = {"bigquery": "my-project.billing.t", "trino": "awsdatacatalog.cur.t"}.get(dialect, "t")
    sql = render(name, dialect, table=table, start=MAY, end=JUNE)
    assert sqlglot.parse_one(sql, read=dialect) is not None
    assert "DOUBLE" not in sql.upper() and "FLOAT" not in sql.upper()


def test_bigquery_rendering_details():
    """Correlated credit subqueries, exact NUMERIC, quoted table, UTC window, partition filter."""
    sql = render("gcp_lines", "bigquery", table="example.com:proj.billing.gcp_billing_export_v1_X",
                 start=MAY, end=JUNE, partition_slack_days=5)
    assert "FROM UNNEST(e.credits) AS c" in sql and "PARSE_NUMERIC(CAST(c.amount AS STRING))" in sql
    assert "NUMERIC(38" not in sql  # BigQuery takes type parameters on columns only
    assert "`example.com:proj`.`billing`.`gcp_billing_export_v1_X`" in sql
    assert "'2024-05-01 00:00:00 UTC'" in sql and "_PARTITIONTIME" in sql
    standard = render("gcp_lines", "bigquery", table="p.d.t", start=MAY, end=JUNE, detailed=False)
    assert "e.resource" not in standard and "resource_name" in standard
    with pytest.raises(UsageError, match="BigQuery export tables only"):
        render("gcp_lines", "duckdb", table="t", start=MAY, end=JUNE, partition_slack_days=5)
    with pytest.raises(UsageError, match="unknown grain"):
        render("gcp_lines", "duckdb", table="t", start=MAY, end=JUNE, grain="minute")


def test_local_folder_day_grain_and_bad_inputs(tmp_path, rows):
    """A folder of gzipped NDJSON parts at day grain; mixed or unknown files are InputErrors."""
    import gzip

    folder = tmp_path / "export"
    folder.mkdir()
    for i, part in enumerate((rows[:800], rows[800:])):
        with gzip.open(folder / f"part-{i}.json.gz", "wt") as handle:
            handle.writelines(json.dumps(as_float_json(r)) + "\n" for r in part)
    frame = connector(path=folder, grain="day").read()
    assert totals(frame.tables["lines"]) == expected_totals(rows)
    assert frame.rows == len(in_window(rows))
    write_parquet(rows[:5], folder / "extra.parquet")
    with pytest.raises(InputError, match="both JSON and Parquet"):
        connector(path=folder).read()
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(InputError, match="no export file"):
        connector(path=other).read()
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"cost": [1.0]}), bad)
    with pytest.raises(InputError, match="usage_start_time"):
        connector(path=bad).read()


def test_a_parquet_export_with_labels_as_text_names_the_column(tmp_path, rows):
    """Before: "unreadable export: Binder Error: Invalid LIST argument during lambda function binding!",
    naming no column."""
    good = write_parquet(rows[:20], tmp_path / "good.parquet")
    bad = tmp_path / "bad.parquet"
    table = pq.read_table(good)
    labels = pa.array([json.dumps(v) for v in table.column("labels").to_pylist()])
    pq.write_table(table.set_column(table.schema.get_field_index("labels"), "labels", labels), bad)
    with pytest.raises(InputError) as raised:
        connector(path=bad).read()
    assert str(raised.value) == f"{bad}: column labels: a VARCHAR column (expected a list of {{key, value}} structs)"


def test_a_row_that_starts_before_the_window_and_runs_into_it_is_read_and_clipped(tmp_path):
    """The April invoice month's tax (Pacific time: 1 April 07:00 to 1 May 07:00 UTC) runs 7 hours into
    May. Before, the export was read by usage_start_time alone, so that row was dropped without a word
    while May's own tax, running 7 hours into June, was clipped: the window kept one edge's share and
    not the other's. Now both are read where they overlap May, and clipped pro rata by time."""
    april = row(MAY - timedelta(days=30) + timedelta(hours=7), "Invoice", "Tax", "720.000000", cost_type="tax",
                amount="0", priced="0", pricing_unit="", hours=720)
    lines = connector(path=write_ndjson([april], tmp_path / "april.json")).read().tables["lines"]
    assert [(str(line["start"]), str(line["end"]), line["billed_cost"]) for line in lines.to_dict("records")] == [
        ("2024-05-01 00:00:00+00:00", "2024-05-01 07:00:00+00:00", Decimal("7.000000000"))]
