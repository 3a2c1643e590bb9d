"""BigQuery jobs of the ``gcp_billing`` connector: the dry run and its guard, the query run under
``maximum_bytes_billed`` and ``timeout_s``, and the extent of a table whose window holds no row.

No call here is retried by google-api-core (:func:`no_retry`): the base connector retries
transient faults with backoff, and a query that outran its time is not rerun (it would bill its
scan again).
"""
from __future__ import annotations

import logging
from datetime import datetime

from connectors.billing.gcp_sql import split_table
from connectors.errors import InputError

log = logging.getLogger("connectors.billing.gcp_billing")  # the connector's log: its jobs are logged as its own


def no_retry():
    """A google-api-core Retry that retries nothing: the base connector retries with backoff."""
    from google.api_core.retry import Retry

    return Retry(predicate=lambda exc: False)


def dry_run(client, sql: str, table: str) -> int:
    """Bytes the query would scan, from a dry run (logged)."""
    from google.cloud import bigquery

    config = bigquery.QueryJobConfig(dry_run=True, use_query_cache=False)
    job = client.query(sql, job_config=config, retry=no_retry(), job_retry=None)
    scanned = int(job.total_bytes_processed or 0)
    log.info("gcp_billing: the query over %s would scan %d bytes (dry run)", table, scanned)
    return scanned


def guard(table: str, scanned: int, limit: int) -> None:
    """Refuse, before it runs, a query whose dry run exceeds maximum_bytes_billed."""
    if scanned > limit:
        raise InputError(table, f"the query would scan {scanned:,} bytes, more than "
                         f"maximum_bytes_billed = {limit:,}", column="maximum_bytes_billed",
                         expected="a higher maximum_bytes_billed, a shorter window or "
                                  "partition_slack_days")


def run_query(client, sql: str, limit: int, timeout_s: float):
    """Run the query with maximum_bytes_billed set; return (job, Arrow table of the aggregates)."""
    from google.cloud import bigquery

    config = bigquery.QueryJobConfig(maximum_bytes_billed=limit)
    job = client.query(sql, job_config=config, retry=no_retry(), job_retry=None)
    try:
        rows = job.result(timeout=timeout_s, retry=no_retry())
    except TimeoutError:
        job.cancel()
        raise QueryTimeout(f"the query did not finish within timeout_s = {timeout_s:g} s "
                           f"(job {job.job_id}, cancelled)") from None
    return job, rows.to_arrow(create_bqstorage_client=False)


class QueryTimeout(Exception):
    """The query outran timeout_s: not retried, as a rerun would bill the scan again."""


def table_extent(client, table: str, columns: tuple[str, ...], limit: int,
                 timeout_s: float) -> tuple[datetime, datetime] | None:
    """The earliest of ``columns[0]`` and the latest of ``columns[1]`` over the whole table, for a
    window that holds no row (rule 5: say where the data lies). Asked only then, under the same
    dry-run guard and ``maximum_bytes_billed``; None where the table holds no row, or where the
    query would scan more or fails (the refusal stands, without the extent)."""
    start, end = columns
    name = ".".join(f"`{part}`" for part in split_table(table, "bigquery"))
    sql = f"SELECT MIN({start}) AS first, MAX({end}) AS last FROM {name}"
    try:
        if dry_run(client, sql, table) > limit:
            log.info("gcp_billing: the extent of %s would scan more than maximum_bytes_billed; not asked", table)
            return None
        _, result = run_query(client, sql, limit, timeout_s)
        first, last = (result.column(column)[0].as_py() for column in ("first", "last"))
    except Exception as exc:  # noqa: BLE001 (best effort: the error it would explain is raised anyway)
        log.info("gcp_billing: the extent of %s could not be read: %s", table, type(exc).__name__)
        return None
    return (first, last) if first is not None and last is not None else None
