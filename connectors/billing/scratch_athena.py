"""Small tables put beside an Athena billing table for one audit's queries, then removed.

The GPU split's sums run where the bill lives when an ``athena`` source says ``split_in_place = true``
(:mod:`audit.split_remote`). Its inputs, a few small tables (the GPU lines the billing query returned,
their facts, the nodes telemetry saw), are written as Parquet to S3 and registered as external tables in
the Glue Data Catalog; the queries run in the source's workgroup as the connector's own do (polled with
backoff, stopped past ``timeout_s``, their failures named); the tables and their objects are deleted at the
end.

* ``scratch_location`` (option, ``s3://bucket/prefix/``): where the objects go; default
  ``<output_location>costaudit-scratch/``. One of the two is needed.
* ``scratch_database`` (option): the Glue database of the tables; default the source's database.
* Objects lie under ``<location><run>/<name>/``, tables are named ``costaudit_split_<run>_<name>``:
  ``<run>`` is random, so two audits never share one.
* Permissions, besides the reading ones: :data:`PERMISSIONS`.

Only the Glue Data Catalog (``AwsDataCatalog``) is supported: another catalog is an error naming it.
"""
from __future__ import annotations

import logging
import re
import secrets
from typing import Mapping

import pandas as pd

from connectors.billing import athena
from connectors.billing.athena_results import read_results
from connectors.billing.scratch import column_type, parquet_bytes
from connectors.errors import InputError

log = logging.getLogger("connectors.billing.athena")

DIALECT = "trino"

SCRATCH = "costaudit-scratch/"
GLUE_TYPES = {"int64": "bigint", "bool": "boolean", "object": "string", "str": "string", "string": "string",
              "float64": "double"}
PERMISSIONS = ("s3:PutObject, s3:GetObject and s3:DeleteObject on the scratch location, glue:CreateTable, "
               "glue:GetTable and glue:DeleteTable on the scratch database")
PARQUET = {"InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
           "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
           "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"}}


def scratch_place(options: Mapping, opts: athena.Options) -> tuple[str, str]:
    """(s3 prefix ending in /, Glue database) of the scratch tables, checked."""
    where = opts.name
    if opts.catalog != athena.DEFAULT_CATALOG:
        raise InputError(where, f"split_in_place needs the Glue Data Catalog, not catalog {opts.catalog!r}",
                         column="split_in_place", expected=f"catalog = {athena.DEFAULT_CATALOG!r}, or no split_in_place")
    location = options.get("scratch_location")
    if location is None:
        if not opts.output_location:
            raise InputError(where, "split_in_place needs an S3 prefix for its tables", column="scratch_location",
                             expected="scratch_location = s3://bucket/prefix/, or output_location")
        location = opts.output_location.rstrip("/") + "/" + SCRATCH
    if not isinstance(location, str) or not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?", location):
        raise InputError(where, f"scratch_location = {location!r}", column="scratch_location",
                         expected="an s3://bucket/prefix/ uri")
    database = str(options.get("scratch_database") or opts.database)
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]*", database):
        raise InputError(where, f"scratch_database {database!r} is not a Glue name", column="scratch_database",
                         expected="letters, digits, _ and -")
    return location.rstrip("/") + "/", database


class AthenaScratch:
    """``with AthenaScratch(opts, location, database) as scratch``: ``scratch.upload(frames)`` names each
    frame's table; ``scratch.query(sql)`` returns its rows as Athena's text; tables and objects go at the
    end. ``jobs`` lists the query executions (id, bytes scanned), for the record."""

    def __init__(self, opts: athena.Options, location: str, database: str):
        self.opts, self.database = opts, database
        self.run = secrets.token_hex(6)
        self.bucket, _, prefix = location[len("s3://"):].partition("/")
        self.prefix = f"{prefix}{self.run}/"
        self.tables: list[str] = []
        self.keys: list[str] = []
        self.jobs: list[tuple[str, int]] = []
        self.clients: dict = {}

    def __enter__(self) -> "AthenaScratch":
        for service in ("athena", "glue", "s3"):
            self.clients[service] = athena.make_client(service, self.opts)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._remove()
        finally:
            for client in self.clients.values():
                client.close()

    def _remove(self) -> None:
        glue, s3 = self.clients["glue"], self.clients["s3"]
        for table in self.tables:
            try:
                glue.delete_table(DatabaseName=self.database, Name=table)
            except Exception as error:  # noqa: BLE001 (say what is left behind, go on)
                log.warning("athena: scratch table %s.%s not deleted (%s)", self.database, table, type(error).__name__)
        if self.keys:
            try:
                s3.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in self.keys], "Quiet": True})
            except Exception as error:  # noqa: BLE001
                log.warning("athena: scratch objects under s3://%s/%s not deleted (%s)", self.bucket, self.prefix,
                            type(error).__name__)

    def upload(self, frames: Mapping[str, pd.DataFrame]) -> dict[str, str]:
        """Each frame as Parquet under the run's prefix and a Glue table over it; name → ``database.table``."""
        return {name: self._load(name, frame) for name, frame in frames.items()}

    def _load(self, name: str, frame: pd.DataFrame) -> str:
        table, key = f"costaudit_split_{self.run}_{name}", f"{self.prefix}{name}/part-0.parquet"
        columns = [{"Name": str(c), "Type": column_type(GLUE_TYPES, t, self.opts.name, str(c))}
                   for c, t in frame.dtypes.items()]
        self.clients["s3"].put_object(Bucket=self.bucket, Key=key, Body=parquet_bytes(frame))
        self.keys.append(key)
        self.clients["glue"].create_table(DatabaseName=self.database, TableInput={
            "Name": table, "TableType": "EXTERNAL_TABLE", "Parameters": {"classification": "parquet"},
            "StorageDescriptor": {"Columns": columns, "Location": f"s3://{self.bucket}/{self.prefix}{name}/", **PARQUET}})
        self.tables.append(table)
        log.info("athena: %d rows written to scratch table %s.%s", len(frame), self.database, table)
        return f"{self.database}.{table}"

    def query(self, sql: str) -> list[list[str | None]]:
        """The rows of ``sql`` as Athena's text cells (header row apart)."""
        client = self.clients["athena"]
        qid = client.start_query_execution(**athena.start_kwargs(sql, self.opts))["QueryExecutionId"]
        execution = athena.wait(client, qid, self.opts)
        if execution["Status"]["State"] != "SUCCEEDED":
            raise athena.query_failed(execution, self.opts)
        scanned = int((execution.get("Statistics") or {}).get("DataScannedInBytes") or 0)
        self.jobs.append((str(qid), scanned))
        log.info("athena: scratch query %s succeeded, %d bytes scanned", qid, scanned)
        return read_results(client, qid)[1]


def open_for(connector) -> AthenaScratch:
    """The scratch of an ``athena`` connector: its options, its prefix and database."""
    opts = connector.options()
    return AthenaScratch(opts, *scratch_place(connector.spec.options, opts))


def error_of(connector, exc: Exception) -> Exception:
    """A fault of the scratch's work as the connector names its own."""
    return athena.source_error(exc, connector.options())
