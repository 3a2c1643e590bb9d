"""Athena on moto: a Glue table with the columns of the Dec 2018 workshop CUR, and seeded results.

moto's Athena does not run SQL: it answers each query with results seeded through its control
api (``seed``). The rows to seed are those of the DuckDB rendering of the connector's aggregate
query over the real Parquet (``local_rows``), so that what comes back through Athena is what the
query would give. ``create_table`` puts the table into moto's Glue catalogue.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from functools import lru_cache

import boto3
import duckdb

from connectors.billing import cur_aggregate as agg
from connectors.duck import prepare
from tests.paths import DATA

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


def options(endpoint: str, **extra) -> dict:
    """The options of an Athena source over the workshop table, talking to ``endpoint``."""
    return {"table": f"{DATABASE}.{TABLE}", "workgroup": "primary", "output_location": OUTPUT,
            "region": "us-east-1", "endpoint_url": endpoint, **extra}
