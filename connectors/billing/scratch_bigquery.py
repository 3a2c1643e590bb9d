"""Small tables put beside a BigQuery billing table for one audit's queries, then removed.

The GPU split's sums run where the bill lives when a ``gcp_billing`` source over a BigQuery table says
``split_in_place = true`` (:mod:`audit.split_remote`). Its inputs, a few small tables (the GPU lines the
billing query returned, their facts, the nodes telemetry saw), are loaded into a scratch dataset as
Parquet load jobs (free in BigQuery, unlike streaming inserts), the queries run there under the source's
dry-run guard, ``maximum_bytes_billed`` and ``timeout_s``, and the tables are deleted at the end (each also
expires after a day, should the run die first).

* ``scratch_dataset`` (option, ``project.dataset`` or ``dataset``): where the tables go; default
  ``costaudit_scratch`` in the source's project, created (in the source's ``location``) when missing.
* Tables are named ``split_<run>_<name>``: ``<run>`` is random, so two audits never share one.
* Permissions: ``roles/bigquery.dataEditor`` on the scratch dataset (``bigquery.datasets.create`` on the
  project where it does not exist yet), besides the reading roles.

Faults map as the connector's do (:func:`connectors.billing.gcp_billing.source_error`); a transient one
is retried with backoff by :func:`connectors.base.with_retries`.
"""
from __future__ import annotations

import io
import logging
import secrets
from datetime import datetime, timedelta, timezone
from typing import Mapping

import pandas as pd

from connectors.billing.bigquery_jobs import dry_run, guard, no_retry, run_query
from connectors.billing.gcp_sql import split_table
from connectors.billing.scratch import column_type, parquet_bytes
from connectors.errors import InputError

log = logging.getLogger("connectors.billing.gcp_billing")

DIALECT = "bigquery"

DEFAULT_DATASET = "costaudit_scratch"
EXPIRY = timedelta(days=1)
TYPES = {"int64": "INT64", "bool": "BOOL", "object": "STRING", "str": "STRING", "string": "STRING",
         "float64": "FLOAT64"}
PERMISSIONS = ("roles/bigquery.dataEditor on the scratch dataset (bigquery.datasets.create on the project "
               "where it does not exist yet) and roles/bigquery.jobUser on the project")


def scratch_dataset(options: Mapping, table: str) -> str:
    """``project.dataset`` of the scratch tables: option ``scratch_dataset``, else ``costaudit_scratch``
    in the billing table's project (or option ``project``)."""
    project = str(options.get("project") or split_table(table, "bigquery")[0])
    named = options.get("scratch_dataset")
    if named is None:
        return f"{project}.{DEFAULT_DATASET}"
    parts = str(named).strip().split(".")
    if not isinstance(named, str) or not all(p.replace("_", "a").isalnum() for p in parts) or len(parts) > 2:
        raise InputError(table, f"scratch_dataset = {named!r}", column="scratch_dataset",
                         expected="a BigQuery dataset: dataset or project.dataset (letters, digits, _)")
    return ".".join(parts) if len(parts) == 2 else f"{project}.{parts[0]}"


class BigQueryScratch:
    """``with BigQueryScratch(client, dataset, limit, timeout_s) as scratch``: ``scratch.upload(frames)``
    names each frame's table; ``scratch.query(sql)`` returns its rows (tuples); the tables go at the end.
    ``jobs`` lists the query jobs (id, bytes processed), for the record."""

    def __init__(self, client, dataset: str, limit: int, timeout_s: float, location: str | None = None):
        self.client, self.dataset, self.limit, self.timeout_s = client, dataset, limit, timeout_s
        self.location = location
        self.run = secrets.token_hex(6)
        self.tables: list[str] = []
        self.jobs: list[tuple[str, int]] = []

    def __enter__(self) -> "BigQueryScratch":
        from google.cloud import bigquery

        dataset = bigquery.Dataset(self.dataset)
        if self.location:
            dataset.location = self.location
        self.client.create_dataset(dataset, exists_ok=True, retry=no_retry())
        return self

    def __exit__(self, *exc) -> None:
        try:
            for table in self.tables:
                try:
                    self.client.delete_table(table, not_found_ok=True, retry=no_retry())
                except Exception as error:  # noqa: BLE001 (each table expires anyway: say so, go on)
                    log.warning("gcp_billing: scratch table %s not deleted (%s); it expires in a day", table,
                                type(error).__name__)
        finally:
            self.client.close()

    def upload(self, frames: Mapping[str, pd.DataFrame]) -> dict[str, str]:
        """Each frame as a scratch table (created with its schema and expiry, then a Parquet load
        job); name → ``project.dataset.table``."""
        return {name: self._load(name, frame) for name, frame in frames.items()}

    def _load(self, name: str, frame: pd.DataFrame) -> str:
        from google.cloud import bigquery

        table = f"{self.dataset}.split_{self.run}_{name}"
        schema = [bigquery.SchemaField(str(c), column_type(TYPES, t, table, str(c))) for c, t in frame.dtypes.items()]
        made = bigquery.Table(table, schema=schema)
        made.expires = datetime.now(timezone.utc) + EXPIRY
        self.client.create_table(made, retry=no_retry())
        self.tables.append(table)
        buffer = io.BytesIO(parquet_bytes(frame))
        config = bigquery.LoadJobConfig(source_format="PARQUET", write_disposition="WRITE_TRUNCATE", schema=schema)
        job = self.client.load_table_from_file(buffer, table, job_config=config)
        job.result(timeout=self.timeout_s, retry=no_retry())
        log.info("gcp_billing: %d rows loaded into scratch table %s (job %s)", len(frame), table, job.job_id)
        return table

    def query(self, sql: str) -> list[tuple]:
        """The rows of ``sql``, after the dry run and its guard, under ``maximum_bytes_billed``."""
        scanned = dry_run(self.client, sql, self.dataset)
        guard(self.dataset, scanned, self.limit)
        job, result = run_query(self.client, sql, self.limit, self.timeout_s)
        self.jobs.append((str(job.job_id), int(job.total_bytes_processed or scanned)))
        columns = [result.column(i).to_pylist() for i in range(result.num_columns)]
        return list(zip(*columns)) if columns else []


def open_for(connector) -> BigQueryScratch:
    """The scratch of a ``gcp_billing`` connector over a BigQuery table: its client, limits and location."""
    from connectors.billing.gcp_billing import make_client

    table, opts = str(connector.spec.options.get("table") or ""), connector.options()
    dataset = scratch_dataset(connector.spec.options, table)
    return BigQueryScratch(make_client(connector.spec.options, table), dataset, opts["maximum_bytes_billed"],
                           opts["timeout_s"], connector.spec.options.get("location"))


def error_of(connector, exc: Exception) -> Exception:
    """A fault of the scratch's work as the connector names its own."""
    from connectors.billing.gcp_billing import source_error

    return source_error(exc, str(connector.spec.options.get("table") or ""), connector.options()["maximum_bytes_billed"])
