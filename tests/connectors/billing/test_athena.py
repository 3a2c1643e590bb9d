"""AthenaConnector + cur_aggregate: the aggregate query, against moto in server mode on 127.0.0.1.

moto's Athena does not run SQL: it answers a query with the results seeded through its control
api. So the test runs the DuckDB rendering of the very query on a real CUR file (the Dec 2018
workshop Parquet, legacy CUR Athena names), seeds moto with exactly those rows, and reads them
through the connector's own boto3 code path (Glue for the table's columns, Athena for the
query, paged results), through a fault-injecting proxy. The lines must carry the money the local
``format = "cur"`` connector finds in the same file, to the last decimal; the Trino text the
connector sent, transpiled back to DuckDB, must give the same rows.
"""
from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from decimal import Decimal

import boto3
import duckdb
import pytest
import sqlglot
from sqlglot import exp

from connectors.base import ReadContext, SourceSpec
from connectors.billing import cur_aggregate as agg
from connectors.duck import prepare
from connectors.errors import FatalSourceError, InputError
from connectors.registry import resolve
from tests.builders import read_cur_once
from tests.servers.athena import (
    DATABASE,
    DEC2018,
    HOUR,
    MONTH,
    OUTPUT,
    TABLE,
    connector,
    duck,
    local_rows,
    parquet_columns,
    seed,
)
from tests.servers.moto import FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN

pytestmark = pytest.mark.services


# --------------------------------------------------------------------------------------------
# the query run locally (DuckDB) on the Parquet


def trino_on_duckdb(query: str, plan: agg.Plan) -> str:
    """Athena's SQL transpiled to DuckDB, with Trino's DOUBLE → DECIMAL cast (through the
    shortest text of the double, as Trino's BigDecimal.valueOf) and the table as view ``cur``."""
    tree = sqlglot.parse_one(query, read="trino")
    doubles = {name for name, kind in plan.columns if kind == "double"}
    for node in list(tree.find_all(exp.Cast)):
        if (node.to.is_type(exp.DataType.Type.DECIMAL) and isinstance(node.this, exp.Column)
                and node.this.name in doubles):
            node.this.replace(exp.cast(node.this.copy(), "VARCHAR"))
    for table in tree.find_all(exp.Table):
        if table.name == TABLE:
            table.replace(exp.to_table("cur"))
    return tree.sql(dialect="duckdb")


# --------------------------------------------------------------------------------------------
# moto: Glue table, seeded results; a proxy for the JSON protocol


def by_category(lines) -> dict[str, tuple[Decimal, Decimal]]:
    out: dict[str, tuple[Decimal, Decimal]] = {}
    for category, billed, effective in zip(lines.charge_category, lines.billed_cost, lines.effective_cost):
        b, e = out.get(category, (Decimal(0), Decimal(0)))
        out[category] = (b + billed, e + effective)
    return out


def athena_client(moto):
    return boto3.client("athena", endpoint_url=moto.url, region_name="us-east-1")


# --------------------------------------------------------------------------------------------
# (a) same money as the local CUR connector; (b) the Trino text gives the same rows


def test_month_through_athena_equals_the_local_cur_connector(moto, glue, proxy):
    names, rows = local_rows(MONTH)
    seed(moto, names, rows)
    source = connector(proxy, MONTH)
    frame = source.read()
    lines = frame.tables["lines"]
    local = read_cur_once(DEC2018, *MONTH)  # the local CUR connector (cached for test_cur.py too)
    expected = local.tables["lines"]
    assert frame.rows == local.rows == 91264 == sum(int(r[-1]) for r in rows)
    # each line counts the CUR lines its result row summed, as the local connector's lines do
    used = lines.commitment_discount_status != "Unused"
    assert lines[used].line_count.sum() == expected[expected.commitment_discount_status != "Unused"].line_count.sum()
    assert by_category(lines) == by_category(expected)
    assert sum(lines.billed_cost, Decimal(0)).quantize(Decimal("0.000001")) == Decimal("408.375992")
    assert sum(lines.billed_cost, Decimal(0)) == sum(expected.billed_cost, Decimal(0))
    assert sum(lines.effective_cost, Decimal(0)) == sum(expected.effective_cost, Decimal(0))
    assert sum(lines.pricing_quantity.dropna(), Decimal(0)) == sum(expected.pricing_quantity.dropna(), Decimal(0))
    qid = source.query_execution_id
    assert qid and lines.line_id.str.startswith(f"{qid}:").all()
    assert set(lines[lines.commitment_discount_status == "Unused"].line_id.str.endswith(":unused")) == {True}
    # more than a page: the first page for the column names, the rows from the result file
    assert proxy.count("GetQueryResults") == 1 < len(rows) // 1000
    assert len(frame.sha256) == 64 and source.bytes_scanned == 0
    assert frame.tables["notes"].note[0].startswith(f"Athena query {qid}")
    assert frame.tables["notes"].note[0].endswith(f"read from its result file {OUTPUT}{qid}.csv")

    # (b) what Athena was sent: Trino that sqlglot parses; back in DuckDB it gives the same rows
    client = athena_client(moto)
    sent = client.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Query"]
    client.close()
    assert sent == source.query and "DOUBLE" not in sent.upper().replace("DOUBLE)", "")
    plan = agg.plan(list(parquet_columns()))
    assert duck(trino_on_duckdb(sent, plan)) == rows


def test_a_window_with_no_line_says_where_the_tables_lines_lie(moto, glue, proxy):
    """Rule 5: the aggregate of an empty window is followed by one query for the table's extent,
    sent as Trino (seeded with its own rendering run back in DuckDB); the note names it (before:
    nothing said where the lines lie)."""
    far = (datetime(1990, 1, 1, tzinfo=timezone.utc), datetime(1990, 2, 1, tzinfo=timezone.utc))
    names, rows = local_rows(far)
    assert rows == []
    plan = agg.plan(list(parquet_columns()))
    extent_sql = agg.render(agg.extent_query(plan), "trino", f"{DATABASE}.{TABLE}")
    seed(moto, names, rows)
    seed(moto, ["first", "last"], duck(trino_on_duckdb(extent_sql, plan)))
    frame = connector(proxy, far).read()
    assert frame.tables["lines"].empty and proxy.count("StartQueryExecution") == 2
    first, last = duck("SELECT min(line_item_usage_start_date), max(line_item_usage_end_date) FROM cur")[0]
    assert list(frame.tables["notes"].note[1:]) == [
        f"no line in the window: its charge periods run from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC"]
    client = athena_client(moto)
    executions = client.list_query_executions()["QueryExecutionIds"]
    sent = [client.get_query_execution(QueryExecutionId=q)["QueryExecution"]["Query"] for q in executions]
    client.close()
    assert extent_sql in sent


def test_a_window_with_lines_asks_no_extent(moto, glue, proxy):
    seed(moto, *local_rows(HOUR))
    frame = connector(proxy).read()
    assert len(frame.tables["lines"]) and proxy.count("StartQueryExecution") == 1
    assert not [n for n in frame.tables["notes"].note if n.startswith("no line in the window")]


# --------------------------------------------------------------------------------------------
# the definition itself


def test_gpu_lines_keep_their_hours_and_others_are_summed_per_day():
    with duckdb.connect() as con:
        prepare(con)
        con.execute("""CREATE TABLE cur AS SELECT * FROM (VALUES
          ('Usage', '2024-05-01T00:00:00Z', '2024-05-01T01:00:00Z', 'p4d.24xlarge', 'USE1-BoxUsage:p4d.24xlarge', 'i-1', '32.77', '1'),
          ('Usage', '2024-05-01T01:00:00Z', '2024-05-01T02:00:00Z', 'p4d.24xlarge', 'USE1-BoxUsage:p4d.24xlarge', 'i-1', '32.77', '1'),
          ('Usage', '2024-05-01T01:00:00Z', '2024-05-01T02:00:00Z', NULL, 'USE1-DataTransfer-Out-Bytes', 'i-1', '0.01', '0.1'),
          ('Usage', '2024-05-01T00:00:00Z', '2024-05-01T01:00:00Z', 'm5.large', 'USE1-BoxUsage:m5.large', 'i-2', '0.096', '1'),
          ('Usage', '2024-05-01T05:00:00Z', '2024-05-01T06:00:00Z', 'm5.large', 'USE1-BoxUsage:m5.large', 'i-2', '0.096', '1'),
          ('Usage', '2024-05-02T05:00:00Z', '2024-05-02T06:00:00Z', 'm5.large', 'USE1-BoxUsage:m5.large', 'i-2', '0.096', '1'),
          ('Usage', '2024-05-03T05:00:00Z', '2024-05-03T06:00:00Z', 'm5.large', 'USE1-BoxUsage:m5.large', 'i-2', '1e-7', '1')
        ) AS t(line_item_line_item_type, line_item_usage_start_date, line_item_usage_end_date,
               product_instance_type, line_item_usage_type, line_item_resource_id,
               line_item_unblended_cost, line_item_usage_amount)""")
        columns = [(n, t) for n, t, *_ in con.execute("DESCRIBE cur").fetchall()]
        tree = agg.aggregate_query(agg.plan(columns), datetime(2024, 5, 1, tzinfo=timezone.utc),
                                   datetime(2024, 5, 3, tzinfo=timezone.utc))
        rows = con.execute(agg.render(tree, "duckdb", "cur")).fetchall()
    names = [e.alias_or_name for e in tree.expressions]
    got = [dict(zip(names, r)) for r in rows]
    periods = sorted(((g["product_instance_type"], g["line_item_usage_start_date"],
                       g["line_item_usage_end_date"], g["line_item_unblended_cost"], g["_lines"]) for g in got),
                     key=lambda t: tuple(v or "" for v in t))
    assert periods == [
        (None, "2024-05-01T01:00:00Z", "2024-05-01T02:00:00Z", "0.010000000000000000", "1"),  # shares i-1
        ("m5.large", "2024-05-01T00:00:00Z", "2024-05-01T06:00:00Z", "0.192000000000000000", "2"),
        ("m5.large", "2024-05-02T05:00:00Z", "2024-05-02T06:00:00Z", "0.096000000000000000", "1"),
        ("p4d.24xlarge", "2024-05-01T00:00:00Z", "2024-05-01T01:00:00Z", "32.770000000000000000", "1"),
        ("p4d.24xlarge", "2024-05-01T01:00:00Z", "2024-05-01T02:00:00Z", "32.770000000000000000", "1"),
    ]  # the 3 May line lies outside the window


def test_the_hours_of_a_credited_resource_keep_their_periods_in_every_rendering():
    """A CPU node with a credit for 00:00-01:00 (no SKU, periods as a Parquet export types them) keeps its hours, so that the credit nets into
    that hour's line, not into the day's data transfer line (audit.adjust); a node without a credit
    is summed per day. Before, i-cpu's three hours became one 0.288 line from 00:00 to 03:00, over
    which the credit was spread with the transfer's. The Trino text, read back, gives the same rows."""
    with duckdb.connect() as con:
        prepare(con)
        con.execute("""CREATE TABLE cur AS SELECT * FROM (VALUES
          ('Usage', '2024-05-01T00:00:00Z', '2024-05-01T01:00:00Z', 'USE1-BoxUsage:c7i.2xlarge', 'i-cpu', '0.096'),
          ('Usage', '2024-05-01T01:00:00Z', '2024-05-01T02:00:00Z', 'USE1-BoxUsage:c7i.2xlarge', 'i-cpu', '0.096'),
          ('Usage', '2024-05-01T02:00:00Z', '2024-05-01T03:00:00Z', 'USE1-BoxUsage:c7i.2xlarge', 'i-cpu', '0.096'),
          ('Usage', '2024-05-01T00:00:00Z', '2024-05-02T00:00:00Z', 'USE1-DataTransfer-Out-Bytes', 'i-cpu', '3.9'),
          ('Credit', '2024-05-01T00:00:00Z', '2024-05-01T01:00:00Z', NULL, 'i-cpu', '-0.2'),
          ('Usage', '2024-05-01T00:00:00Z', '2024-05-01T01:00:00Z', 'USE1-BoxUsage:c7i.2xlarge', 'i-other', '0.096'),
          ('Usage', '2024-05-01T01:00:00Z', '2024-05-01T02:00:00Z', 'USE1-BoxUsage:c7i.2xlarge', 'i-other', '0.096')
        ) AS t(line_item_line_item_type, s, e, line_item_usage_type, line_item_resource_id, line_item_unblended_cost)""")
        con.execute("""CREATE OR REPLACE TABLE cur AS SELECT * EXCLUDE (s, e), CAST(s AS TIMESTAMPTZ)::TIMESTAMP AS
          line_item_usage_start_date, CAST(e AS TIMESTAMPTZ)::TIMESTAMP AS line_item_usage_end_date FROM cur""")
        columns = [(n, t) for n, t, *_ in con.execute("DESCRIBE cur").fetchall()]
        plan = agg.plan(columns)
        tree = agg.aggregate_query(plan, datetime(2024, 5, 1, tzinfo=timezone.utc), datetime(2024, 5, 2, tzinfo=timezone.utc))
        rows = con.execute(agg.render(tree, "duckdb", "cur")).fetchall()
        assert con.execute(trino_on_duckdb(agg.render(tree, "trino", TABLE), plan)).fetchall() == rows
    names = [e.alias_or_name for e in tree.expressions]
    got = sorted((g["line_item_resource_id"], g["line_item_usage_start_date"], g["line_item_usage_end_date"],
                  g["line_item_unblended_cost"], g["_lines"]) for g in (dict(zip(names, r)) for r in rows))
    assert got == [
        ("i-cpu", "2024-05-01T00:00:00Z", "2024-05-01T01:00:00Z", "-0.200000000000000000", "1"),
        ("i-cpu", "2024-05-01T00:00:00Z", "2024-05-01T01:00:00Z", "0.096000000000000000", "1"),
        ("i-cpu", "2024-05-01T00:00:00Z", "2024-05-02T00:00:00Z", "3.900000000000000000", "1"),
        ("i-cpu", "2024-05-01T01:00:00Z", "2024-05-01T02:00:00Z", "0.096000000000000000", "1"),
        ("i-cpu", "2024-05-01T02:00:00Z", "2024-05-01T03:00:00Z", "0.096000000000000000", "1"),
        ("i-other", "2024-05-01T00:00:00Z", "2024-05-01T02:00:00Z", "0.192000000000000000", "2"),
    ]


def test_cur2_maps_and_partitions_render_for_trino_and_duckdb():
    columns = [("line_item_line_item_type", "string"), ("line_item_unblended_cost", "double"),
               ("line_item_usage_start_date", "timestamp"), ("line_item_usage_end_date", "timestamp"),
               ("line_item_usage_type", "string"), ("product", "map<string,string>"),
               ("resource_tags", "map<string,string>"), ("savings_plan_savings_plan_rate", "double"),
               ("pricing_public_on_demand_rate", "decimal(38,10)"), ("billing_period", "string")]
    plan = agg.plan(columns)
    assert plan.partitions == "billing_period" and plan.tag_map == "resource_tags" and not plan.missing
    tree = agg.aggregate_query(plan, datetime(2024, 11, 15, tzinfo=timezone.utc), datetime(2025, 1, 1, tzinfo=timezone.utc))
    trino = agg.render(tree, "trino", "db.cur2")
    parsed = sqlglot.parse_one(trino, read="trino")
    assert [t.sql("trino") for t in parsed.find_all(exp.Table) if t.name == "cur2"] == ['"db"."cur2" AS c']
    assert "\"billing_period\" BETWEEN '2024-11' AND '2024-12'" in trino
    assert "ELEMENT_AT(\"product\", 'instance_type')" in trino and "JSON_FORMAT(CAST(\"resource_tags\" AS JSON))" in trino
    assert "DECIMAL(38, 18)" in trino and "AS DOUBLE" not in trino
    legacy = agg.plan([*columns[:5], ("year", "string"), ("month", "string")])
    text = agg.render(agg.aggregate_query(legacy, datetime(2024, 12, 20, tzinfo=timezone.utc),
                                          datetime(2025, 1, 10, tzinfo=timezone.utc)), "trino", "db.cur")
    assert "((\"year\" = '2024' AND \"month\" IN ('12', '12')) OR (\"year\" = '2025' AND \"month\" IN ('1', '01')))" in text
    with duckdb.connect() as con:  # the DuckDB rendering runs on a CUR 2.0 shaped table
        prepare(con)
        con.execute("""CREATE TABLE cur2 AS SELECT 'Usage' AS line_item_line_item_type,
          0.1::DOUBLE AS line_item_unblended_cost, TIMESTAMP '2024-11-20 00:00:00' AS line_item_usage_start_date,
          TIMESTAMP '2024-11-20 01:00:00' AS line_item_usage_end_date, 'BoxUsage:g5.xlarge' AS line_item_usage_type,
          MAP {'instance_type': 'g5.xlarge'} AS product, MAP {'user_team': 'ml'} AS resource_tags,
          NULL::DOUBLE AS savings_plan_savings_plan_rate, 1.006::DECIMAL(38,10) AS pricing_public_on_demand_rate,
          '2024-11' AS billing_period""")
        described = [(n, t) for n, t, *_ in con.execute("DESCRIBE cur2").fetchall()]
        rows = con.execute(agg.render(agg.aggregate_query(agg.plan(described), *(
            datetime(2024, 11, 15, tzinfo=timezone.utc), datetime(2025, 1, 1, tzinfo=timezone.utc))),
            "duckdb", "cur2")).fetchall()
    names = [e.alias_or_name for e in tree.expressions]
    row = dict(zip(names, rows[0]))
    assert row["product_instance_type"] == "g5.xlarge" and json.loads(row["resource_tags"]) == {"user_team": "ml"}
    assert row["line_item_unblended_cost"] == "0.100000000000000000"
    assert row["pricing_public_on_demand_rate"] == "1.006000000000000000"


# --------------------------------------------------------------------------------------------
# (c) faults


def test_throttling_and_5xx_are_retried(moto, glue, proxy):
    names, rows = local_rows(HOUR)
    seed(moto, names, rows)
    proxy.fail("GetTable", "internal", 1)
    proxy.fail("StartQueryExecution", "throttle", 2)
    proxy.fail("GetQueryResults", "unavailable", 1)
    frame = connector(proxy).read()
    assert frame.rows > 0
    assert proxy.count("StartQueryExecution", "throttle") == 2
    assert proxy.count("StartQueryExecution", "forwarded") == 1
    assert proxy.count("GetQueryResults", "unavailable") == 1 and proxy.count("GetTable", "internal") == 1


def test_a_fault_botocore_gives_up_on_is_retried_by_the_connector_without_rerunning(moto, glue, proxy):
    names, rows = local_rows(HOUR)
    seed(moto, names, rows)
    proxy.fail("GetQueryResults", "throttle", 3)  # botocore's three tries (MAX_RETRIES = 2)
    source = connector(proxy)
    frame = source.read()
    assert frame.rows > 0 and proxy.count("GetQueryResults", "throttle") == 3
    assert proxy.count("StartQueryExecution") == 1  # the finished query was read again, not rerun


def test_a_query_failed_for_a_transient_reason_is_run_again(moto, glue, proxy):
    names, rows = local_rows(HOUR)
    seed(moto, names, rows, times=2)  # moto hands a result to each query at its start
    proxy.fail("GetQueryExecution", "failed_transient", 1)
    frame = connector(proxy).read()
    assert frame.rows > 0 and proxy.count("StartQueryExecution") == 2


def test_failed_query_is_an_input_error_with_athenas_message(moto, glue, proxy):
    seed(moto, *local_rows(HOUR))
    proxy.fail("GetQueryExecution", "failed_sql", None)
    source = connector(proxy)
    with pytest.raises(InputError) as caught:
        source.read()
    text = str(caught.value)
    assert f"{DATABASE}.{TABLE}" in text and source.query_execution_id in text
    assert "COLUMN_NOT_FOUND" in text and "cannot be resolved" in text
    assert proxy.count("StartQueryExecution") == 1  # a SQL error is not retried


def expect_access_denied(text: str) -> None:
    for needed in (f"{DATABASE}.{TABLE}", "'primary'", OUTPUT, "athena:StartQueryExecution",
                   "athena:GetQueryExecution", "athena:GetQueryResults", "glue:GetTable",
                   "glue:GetPartitions", "s3:GetObject", "s3:ListBucket", "s3:PutObject"):
        assert needed in text, needed
    for secret in (FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN):
        assert secret not in text


@pytest.mark.parametrize("operation", ["StartQueryExecution", "GetTable"])
def test_access_denied_names_table_workgroup_output_and_permissions(moto, glue, proxy, operation):
    proxy.fail(operation, "denied", None)
    with pytest.raises(FatalSourceError) as caught:
        connector(proxy).read()
    expect_access_denied(str(caught.value))
    assert operation in str(caught.value)
    assert proxy.count(operation, "denied") == 1  # not retried


def test_query_denied_on_the_output_location(moto, glue, proxy):
    seed(moto, *local_rows(HOUR))
    proxy.fail("GetQueryExecution", "failed_s3", None)
    with pytest.raises(FatalSourceError) as caught:
        connector(proxy).read()
    expect_access_denied(str(caught.value))
    assert "Access denied when writing output" in str(caught.value)


def test_a_query_past_timeout_s_is_stopped(moto, glue, proxy):
    seed(moto, *local_rows(HOUR))
    proxy.fail("GetQueryExecution", "running", None)
    with pytest.raises(FatalSourceError, match="timeout_s = 0.05 s"):
        connector(proxy, timeout_s=0.05).read()
    assert proxy.count("StopQueryExecution") == 1 and proxy.count("StartQueryExecution") == 1


def test_no_credential_in_logs_or_errors(moto, glue, proxy, caplog):
    caplog.set_level(logging.DEBUG)
    proxy.fail("StartQueryExecution", "denied", None)
    with pytest.raises(FatalSourceError) as caught:
        connector(proxy).read()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "athena" in logged.lower()
    for secret in (FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN):
        assert secret not in logged and secret not in str(caught.value)


def test_bad_options_are_input_errors():
    ctx = ReadContext(*HOUR, "USD")
    for options, column in (({"table": "just_a_table"}, "table"), ({"table": "db.t", "output_location": "/tmp"},
                                                                  "output_location"),
                            ({"table": "db.t", "timeout_s": 0}, "timeout_s"),
                            ({"table": "db.t", "aws_secret_access_key": "xyz-secret"}, "aws_secret_access_key")):
        with pytest.raises(InputError) as caught:
            resolve("athena")(SourceSpec("a", "billing", "athena", None, options), ctx).read()
        assert caught.value.column == column and "xyz-secret" not in str(caught.value)
