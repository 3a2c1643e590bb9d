"""Athena on moto: a Glue table with the columns of the Dec 2018 workshop CUR, and seeded results.

moto's Athena does not run SQL: it answers each query with results seeded through its control
api (``seed``). The rows to seed are those of the DuckDB rendering of the connector's aggregate
query over the real Parquet (``local_rows``), so that what comes back through Athena is what the
query would give. ``create_table`` puts the table into moto's Glue catalogue.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from functools import lru_cache

import boto3
import duckdb

from connectors.base import ReadContext, SourceSpec
from connectors.billing import cur_aggregate as agg
from connectors.duck import prepare
from connectors.registry import resolve
from tests.paths import DATA
from tests.servers.moto import ProxyHandler

DEC2018 = DATA / "billing" / "aws_wa_labs" / "Dec2018-WorkshopCUR-00001.snappy.parquet"
MONTH = (datetime(2018, 12, 1, tzinfo=timezone.utc), datetime(2019, 1, 1, tzinfo=timezone.utc))
HOUR = (datetime(2018, 12, 1, 6, tzinfo=timezone.utc), datetime(2018, 12, 1, 7, tzinfo=timezone.utc))
DATABASE, TABLE = "cur_db", "workshop"
OUTPUT = "s3://athena-results-bucket/costaudit/"
GLUE_TYPES = {"VARCHAR": "string", "DOUBLE": "double", "TIMESTAMP": "timestamp", "BIGINT": "bigint"}


@lru_cache(maxsize=None)
def parquet_columns() -> tuple[tuple[str, str], ...]:
    with duckdb.connect() as con:
        return tuple((n, t) for n, t, *_ in con.execute(
            f"DESCRIBE SELECT * FROM read_parquet('{DEC2018}')").fetchall())


def duck(query: str) -> list[tuple]:
    """Run ``query`` in DuckDB over view ``cur`` (the Parquet)."""
    with duckdb.connect() as con:
        prepare(con)
        con.execute(f"CREATE VIEW cur AS SELECT * FROM read_parquet('{DEC2018}')")
        return con.execute(query).fetchall()


@lru_cache(maxsize=None)
def local_rows(window: tuple[datetime, datetime]) -> tuple[list[str], list[tuple]]:
    """Column names and rows of the DuckDB rendering of the aggregate over the Parquet."""
    tree = agg.aggregate_query(agg.plan(list(parquet_columns())), *window)
    return [e.alias_or_name for e in tree.expressions], duck(agg.render(tree, "duckdb", "cur"))


def seed(moto, names: list[str], rows: list[tuple], times: int = 1) -> None:
    """Queue ``rows`` (a header row first, as Athena sends) as the next query results."""
    cells = [{"Data": [{"VarCharValue": n} for n in names]}]
    cells += [{"Data": [{} if v is None else {"VarCharValue": v} for v in row]} for row in rows]
    info = [{"Name": n, "Label": n, "Type": "varchar"} for n in names]
    body = {"account_id": "123456789012", "region": "us-east-1",
            "results": [{"rows": cells, "column_info": info}] * times}
    moto.post("/moto-api/static/athena/query-results", json.dumps(body).encode())


def create_table(moto) -> None:
    """The Glue database and table (the Parquet's columns as Glue types) in moto, if not there yet."""
    client = boto3.client("glue", endpoint_url=moto.url, region_name="us-east-1")
    try:
        try:
            client.create_database(DatabaseInput={"Name": DATABASE})
        except client.exceptions.AlreadyExistsException:
            pass
        columns = [{"Name": n, "Type": GLUE_TYPES[t]} for n, t in parquet_columns()]
        try:
            client.create_table(DatabaseName=DATABASE, TableInput={
                "Name": TABLE, "StorageDescriptor": {"Columns": columns}, "TableType": "EXTERNAL_TABLE"})
        except client.exceptions.AlreadyExistsException:
            pass
    finally:
        client.close()


def create_bucket(moto, location: str) -> None:
    """The bucket of an s3:// location in moto (where moto writes a query's result file), if not there yet."""
    client = boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1")
    try:
        client.create_bucket(Bucket=location[len("s3://"):].partition("/")[0])
    except (client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists):
        pass
    finally:
        client.close()


def options(endpoint: str, **extra) -> dict:
    """The options of an Athena source over the workshop table, talking to ``endpoint``."""
    return {"table": f"{DATABASE}.{TABLE}", "workgroup": "primary", "output_location": OUTPUT,
            "region": "us-east-1", "endpoint_url": endpoint, **extra}


SPLIT_DATABASE = "costaudit_split"


def split_engine(moto, runs: list | None = None):
    """An engine for audit.split_sql.ENGINES through moto's Athena: the query's Trino rendering goes
    out through the Athena client as the connector sends queries; moto runs no SQL, so its answer
    is seeded with the rows that text gives when DuckDB runs it over the prepared tables (read back
    by sqlglot), and comes back as text through the connector's result paging."""
    import sqlglot

    import connectors.billing.athena as athena
    from audit import split_sql

    names = {t: f"{SPLIT_DATABASE}.{t}" for t in split_sql.TABLES}
    options = athena.Options("AwsDataCatalog", SPLIT_DATABASE, "split_lines", "primary", OUTPUT, "us-east-1", None,
                             moto.url, 60)

    def on_duckdb(text: str, prepared) -> list[tuple]:
        with duckdb.connect() as con:
            con.execute(f"CREATE SCHEMA {SPLIT_DATABASE}")
            for name, frame in prepared.frames.items():
                con.register(f"frame_{name}", frame)
                con.execute(f"CREATE TABLE {names[name]} AS SELECT * FROM frame_{name}")
            return con.execute(sqlglot.transpile(text, read="trino", write="duckdb")[0]).fetchall()

    def run(prepared):
        if runs is not None:
            runs.append(len(prepared.frames["split_lines"]))
        client = boto3.client("athena", endpoint_url=moto.url, region_name="us-east-1")
        answers = []
        try:
            for query, texts in ((split_sql.COVERAGE, 3), (split_sql.SUMS, 2)):
                text = split_sql.render(query, "trino", names, limbs=prepared.limbs)
                rows = on_duckdb(text, prepared)
                width = len(rows[0]) if rows else 0
                seed(moto, [f"c{c}" for c in range(width)], [[_as_text(v) for v in row] for row in rows])
                qid = client.start_query_execution(QueryString=text, WorkGroup="primary", ResultConfiguration={
                    "OutputLocation": OUTPUT})["QueryExecutionId"]
                execution = athena.wait(client, qid, options)
                assert execution["Status"]["State"] == "SUCCEEDED" and execution["Query"] == text
                answers.append([_typed(row, texts) for row in athena.read_results(client, qid)[1]])
        finally:
            client.close()
        return answers[0], answers[1]

    return run


def _as_text(value) -> str | None:
    """A value as Athena's result set spells it (VarCharValue)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _typed(row: list, texts: int) -> tuple:
    """Athena's text cells back to the engine's values: the first ``texts`` columns text, then
    booleans and integers."""
    out: list = list(row[:texts])
    for cell in row[texts:]:
        out.append(cell == "true" if cell in ("true", "false") else None if cell is None else int(cell))
    return tuple(out)


# --- a proxy in front of moto's Athena and Glue -------------------------------------------------

JSON_FAULTS = {
    "throttle": (400, "ThrottlingException", "Rate exceeded"),
    "unavailable": (503, "ServiceUnavailableException", "Service Unavailable"),
    "internal": (500, "InternalServerException", "We encountered an internal error"),
    "denied": (400, "AccessDeniedException", "User: arn:aws:iam::123456789012:user/ci is not "
               "authorized to perform: athena:StartQueryExecution on resource: workgroup/primary"),
}
FAILED = {
    "failed_sql": {"State": "FAILED", "StateChangeReason": "COLUMN_NOT_FOUND: line 3:5: Column "
                   "'line_item_usage_type' cannot be resolved",
                   "AthenaError": {"ErrorCategory": 2, "ErrorType": 1006, "Retryable": False}},
    "failed_transient": {"State": "FAILED", "StateChangeReason": "ThrottlingException: Rate exceeded",
                         "AthenaError": {"ErrorCategory": 1, "ErrorType": 1001, "Retryable": True}},
    "failed_s3": {"State": "FAILED", "StateChangeReason": "Access denied when writing output to url: "
                  f"{OUTPUT}. Please ensure you are allowed to access the S3 bucket.",
                  "AthenaError": {"ErrorCategory": 2, "ErrorType": 1801, "Retryable": False}},
    "running": {"State": "RUNNING"},
}


class JsonProxyHandler(ProxyHandler):
    """Faults for the JSON protocol (Athena, Glue): the kind is the X-Amz-Target operation."""

    page_rows = 1000
    results: dict  # query execution id → moto's answer (set per proxy)
    starts: tuple = ()  # callables told each StartQueryExecution's text before moto hears it (seeders)

    def handle_any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        kind = (self.headers.get("X-Amz-Target") or "").rpartition(".")[2] or "other"
        if kind == "StartQueryExecution":
            for hear in self.starts:
                hear(json.loads(body or b"{}").get("QueryString", ""))
        fault = self.proxy.take(kind)
        if fault in JSON_FAULTS:
            status, code, message = JSON_FAULTS[fault]
            return self.send(status, json.dumps({"__type": code, "message": message}).encode(),
                             [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-ErrorType", code)])
        status, headers, payload = self.forward(body)
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        if fault in FAILED and status == 200:
            doc = json.loads(payload)
            doc["QueryExecution"]["Status"] = {**doc["QueryExecution"]["Status"], **FAILED[fault]}
            payload = json.dumps(doc).encode()
        if kind == "GetQueryResults" and status == 200:
            request = json.loads(body or b"{}")
            with self.proxy.lock:  # moto sends every row each time: keep the first answer
                doc = self.results.get(request.get("QueryExecutionId"))
                if doc is None:
                    doc = self.results[request.get("QueryExecutionId")] = json.loads(payload)
            payload = self.page(request, doc)
        self.send(status, payload, headers)

    def page(self, request: dict, doc: dict) -> bytes:
        """moto answers every row at once: cut the answer into pages with NextToken, as Athena."""
        rows = doc["ResultSet"]["Rows"]
        start = int(request.get("NextToken") or 0)
        size = min(int(request.get("MaxResults") or 1000), self.page_rows)
        page = {**doc, "ResultSet": {**doc["ResultSet"], "Rows": rows[start:start + size]}}
        if start + size < len(rows):
            page["NextToken"] = str(start + size)
        return json.dumps(page).encode()

    def send(self, status: int, payload: bytes, headers) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def connector(proxy, window=HOUR, **extra):
    """An Athena source over the workshop table, talking to moto through ``proxy``, for ``window``."""
    spec = SourceSpec("athena-cur", "billing", "athena", None, options(proxy.url, **extra))
    return resolve("athena")(spec, ReadContext(window[0], window[1], "USD"))


SCRATCH_TABLE = re.compile(r'"?([A-Za-z0-9_-]+)"?\."?(costaudit_split_[0-9a-f]+_[a-z_]+)"?')


def scratch_seeder(moto):
    """A ``starts`` hearer for the split run in place (audit/split_remote.py): a query over the scratch
    tables is run by DuckDB over the Parquet objects the audit wrote to moto's S3, at the locations its
    Glue tables name, and its rows are seeded as the answer moto gives (moto runs no SQL). ``heard``
    lists the scratch queries, ``tables`` the scratch tables seen."""
    import io

    import pyarrow.parquet as pq
    import sqlglot

    heard: list[str] = []
    tables: set[tuple[str, str]] = set()

    def hear(text: str) -> None:
        found = set(SCRATCH_TABLE.findall(text))
        if not found:
            return
        heard.append(text)
        tables.update(found)
        glue = boto3.client("glue", endpoint_url=moto.url, region_name="us-east-1")
        s3 = boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1")
        try:
            with duckdb.connect() as con:
                for database, table in found:
                    location = glue.get_table(DatabaseName=database, Name=table)["Table"]["StorageDescriptor"]["Location"]
                    bucket, _, prefix = location[len("s3://"):].partition("/")
                    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]
                    frame = pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=keys[0])["Body"].read())).to_pandas()
                    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{database}"')
                    con.register("frame", frame)
                    con.execute(f'CREATE TABLE "{database}"."{table}" AS SELECT * FROM frame')
                    con.unregister("frame")
                rows = con.execute(sqlglot.transpile(text, read="trino", write="duckdb")[0]).fetchall()
        finally:
            glue.close()
            s3.close()
        width = len(rows[0]) if rows else 1
        seed(moto, [f"c{c}" for c in range(width)], [[_as_text(v) for v in row] for row in rows])

    hear.heard, hear.tables = heard, tables  # type: ignore[attr-defined]
    return hear
