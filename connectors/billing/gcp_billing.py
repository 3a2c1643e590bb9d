"""GCP Cloud Billing export → table ``lines`` (``BillingLine``), aggregated where the data lives.

Two modes, one query (``billing_sql.GCP_LINES``):

* ``table = "project.dataset.gcp_billing_export[_resource]_v1_XXXX"``: the query is rendered for
  BigQuery and runs there through google-cloud-bigquery with Application Default Credentials
  (a case never holds credentials); only the aggregates come back. A dry run first reports the
  bytes the query would scan (logged, and kept as ``connector.bytes_scanned``); above
  ``maximum_bytes_billed`` (case option, default 50 GiB) the query is refused before it runs, and
  the same limit is set on the real query so that BigQuery itself refuses a runaway one.
* ``path``: a local export (newline-delimited JSON as ``bq extract`` writes it, optionally
  gzipped, or Parquet; a file or a folder of them): the same query rendered for DuckDB.

The aggregates become FOCUS-named rows in DuckDB (:func:`focus_table`), then the FOCUS connector's
``load_focus_named`` + ``read_focus_table`` check, window and normalise them as for any FOCUS file:

* a charge row per group: cost_type regular → Usage, tax → Tax, adjustment and rounding_error →
  Adjustment; BilledCost = EffectiveCost = the summed cost (credits excluded); ListCost = the summed
  ``cost_at_list`` where every row of the group has one, else NULL (the list basis then refuses the
  line by name rather than count part of its list price);
* a Credit row per group and credit type with a non-zero sum (FOCUS keeps credits as lines of
  their own), carrying the group's project, resource and SKU so the engine nets it into what it
  applies to; credits of a type not in ``CREDIT_TYPES`` (or of no type) are summed as OTHER;
  ListCost = BilledCost, as FOCUS lists a credit (:data:`UNLISTED_CREDITS` list 0: a committed use
  discount, whose usage lists at its on-demand price before commitments, and a contractual discount,
  the gap between list and contracted prices, as the CUR's ``EdpDiscount`` lists at 0);
* ServiceName = service.description, ChargeDescription = sku.description, ResourceId = resource.name
  (detailed export), PricingQuantity / PricingUnit = usage.amount_in_pricing_units / pricing_unit,
  ConsumedQuantity / ConsumedUnit = usage.amount / unit, SubAccountId = project.id, Tags = labels;
  x_SkuId, x_ServiceId, x_CostType, x_CreditType, x_InvoiceMonth (Pacific time), x_MachineSpec
  (the ``compute.googleapis.com/machine_spec`` system label; deliberately not x_InstanceType, which
  would make the engine multiply vCPU- and GPU-part quantities by the machine's GPU count) and x_ExportRows go to ``extra``.

``rows``: the export rows aggregated (their usage period overlaps the window; the rest: gcp_outside).
A BigQuery table with FOCUS's columns instead (GCP's FOCUS export or view, a FOCUS export loaded
into BigQuery) is read as FOCUS: :mod:`connectors.billing.focus_remote`.
"""
from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import pandas as pd

from connectors.base import Connector
from connectors.billing import focus_aggregate as fagg
from connectors.billing import gcp_commitments as cud
from connectors.billing.bigquery_jobs import QueryTimeout, dry_run, guard, no_retry, run_query, table_extent
from connectors.billing.focus import load_focus_named, read_focus_table
from connectors.billing.focus_checks import extent_note, notes_table
from connectors.billing.focus_lines import canonical_object
from connectors.billing.focus_load import other_format_hint
from connectors.billing.focus_remote import bigquery_columns, focus_plan, read_focus_rows
from connectors.billing.gcp_files import (
    JSON_COLUMNS,
    PERIOD_COLUMNS,
    bad_values,
    missing_field,
    ndjson,
    parquet_nested,
    shared_rows,
)
from connectors.billing.gcp_outside import window_notes
from connectors.billing.gcp_sql import (
    CONVERSION_RATE,
    CREDIT_TYPES,
    GCP_KEYS,
    GCP_SUMS,
    GRAINS,
    LIST_COST,
    known_sum,
    render,
    split_table,
)
from connectors.bounds import EITHER
from connectors.duck import first_line, raise_all, session
from connectors.errors import FatalSourceError, InputError, InputErrors, RetriableSourceError, missing_library
from schemas.billing import BillingLine
from schemas.errors import UsageError
from schemas.secrets import mask_url, redact

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 50 * 1024 ** 3
DEFAULT_TIMEOUT_S = 600
ROLES = ("roles/bigquery.dataViewer on the dataset (or the table) and roles/bigquery.jobUser "
         "on the project that runs the query")
REQUIRED = ("billing_account_id", "service", "sku", "usage_start_time", "usage_end_time", "project",
            "labels", "system_labels", "location", "cost", "currency", "usage", "credits", "invoice",
            "cost_type")
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz")
PARQUET_SUFFIXES = (".parquet",)
TRANSIENT_REASONS = {"rateLimitExceeded", "backendError", "internalError"}
CREDIT_COLUMNS = [f"credit_{kind.lower()}" for kind in CREDIT_TYPES]
#: the credit columns that list at 0, not at their cost: commitment credits (the list basis prices the
#: usage they cover before commitments, at its cost_at_list, as a CUR lists a Savings Plan negation at 0)
#: and contractual discounts (negotiated: the gap between list and contracted, which FOCUS puts in
#: ContractedCost, never in ListCost)
UNLISTED_CREDITS = (cud.CUD_CREDIT, cud.SPEND_CREDIT, cud.OFFSET_CREDIT, "credit_discount")


class GcpBillingConnector(Connector):
    """Reads a GCP billing export (BigQuery table or local files) into the ``lines`` table."""

    format_name = "gcp_billing"
    accepts = EITHER
    kind = "billing"
    schemas = {"lines": BillingLine}

    def __init__(self, spec, ctx):
        super().__init__(spec, ctx)
        self.bytes_scanned: int | None = None
        self.bytes_billed: int | None = None
        self.table_extent: tuple | None = None
        self.focus: fagg.Plan | None = None  # the plan of a FOCUS table in BigQuery
        self.job_id = ""
        self._digest = ""

    @property
    def in_bigquery(self) -> bool:
        """Whether the source is a BigQuery table queried in place."""
        return self.spec.path is None and not self.spec.options.get("uri") and bool(
            self.spec.options.get("table"))

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Aggregate (in BigQuery or locally), map to FOCUS names, normalise as FOCUS."""
        where = Path(self.spec.where) if self.in_bigquery else self.path
        with session() as con:
            if self.in_bigquery:
                self._aggregate_bigquery(con)
                if self.focus is not None:  # a FOCUS table in BigQuery: its lines named as FOCUS's
                    self.read_as = "focus"
                    self._digest = result_digest(con, self.spec.where, "agg")
                    return read_focus_rows(con, self.focus.names, where, self.job_id, self.ctx, self.table_extent)
            else:
                aggregate_local(con, self.path, self.ctx, self.options())
            regroup_labels(con)
            notes = focus_table(con)
            export_rows = con.execute("SELECT coalesce(sum(export_rows), 0) FROM agg").fetchall()[0][0]
            if self.in_bigquery:
                self._digest = result_digest(con, self.spec.where)
            try:
                tables, _, covered = read_focus_table(con, load_focus_named(con, "gcp_focus", where), where, self.ctx)
            except (InputError, InputErrors) as exc:
                # a record with no cost or time fails as a FOCUS column; the export's own field and line say more
                raise (None if self.in_bigquery else missing_field(con, *export_files(self.path))) or exc from None
            if not self.in_bigquery and not len(tables["lines"]) and not export_rows:
                found = missing_field(con, *export_files(self.path))
                if found:
                    raise found
            notes += self._window_notes(con, len(tables["lines"]))
        if notes:
            tables["notes"] = pd.concat([tables["notes"], notes_table(notes)], ignore_index=True)
        return tables, int(export_rows), covered

    def _window_notes(self, con, lines: int) -> list[tuple[int, str, str]]:
        """The rows wholly outside the window (local files: gcp_outside); no line: where the rows lie."""
        if self.in_bigquery:
            return [] if lines or not self.table_extent else extent_note(*self.table_extent)
        return window_notes(con, export_files(self.path), self.ctx, lines)

    def fingerprint(self) -> str:
        """Files: their bytes (base class); a BigQuery table: the query and what it returned."""
        return self._digest if self.in_bigquery else super().fingerprint()

    def options(self) -> dict:
        """The case options this connector reads, with their defaults (bad values: InputError)."""
        opts = self.spec.options
        grain = str(opts.get("grain", "hour"))
        if grain not in GRAINS:
            raise InputError(self.spec.where, f"grain {grain!r}", column="grain",
                             expected="one of " + ", ".join(GRAINS))
        slack = opts.get("partition_slack_days")
        return {"grain": grain,
                "maximum_bytes_billed": self._number("maximum_bytes_billed", DEFAULT_MAX_BYTES, int),
                "partition_slack_days": None if slack is None else self._number(
                    "partition_slack_days", 0, int, low=0),
                "timeout_s": self._number("timeout_s", DEFAULT_TIMEOUT_S, float)}

    def _number(self, key: str, default, kind, low: float = 1e-9):
        """A number option of at least ``low``."""
        value = self.spec.options.get(key, default)
        try:
            number = kind(value)
        except (TypeError, ValueError):
            number = low - 1
        if isinstance(value, bool) or number < low:
            raise InputError(self.spec.where, f"{key} = {value!r}", column=key,
                             expected="a positive number" if low > 0 else "a number, 0 or more")
        return number

    # --- BigQuery -------------------------------------------------------------------------------

    def _aggregate_bigquery(self, con) -> None:
        """Dry run, guard, run; the aggregates land in DuckDB table ``agg``."""
        table, opts = str(self.spec.options["table"]), self.options()
        try:
            split_table(table, "bigquery")
        except UsageError as exc:
            raise InputError(table, str(exc), column="table",
                             expected="project.dataset.table of a Cloud Billing export") from None
        limit, client = opts["maximum_bytes_billed"], None
        try:
            client = make_client(self.spec.options, table)
            sql = self._bigquery_sql(client, table, opts)
            self.bytes_scanned = dry_run(client, sql, table)
            guard(table, self.bytes_scanned, limit)
            job, result = run_query(client, sql, limit, opts["timeout_s"])
            if not result.num_rows:  # no row in the window: where the table's rows lie (rule 5)
                period = tuple(c for _, c, _ in self.focus.period) if self.focus else PERIOD_COLUMNS
                self.table_extent = table_extent(client, table, period, limit, opts["timeout_s"])
        except Exception as exc:  # every client fault becomes one of our errors
            raise source_error(exc, table, limit) from None
        finally:
            if client is not None:
                client.close()
        self.bytes_billed, self.job_id = job.total_bytes_billed, str(job.job_id)
        con.register("agg_arrow", result)
        con.execute("CREATE TABLE agg AS SELECT * FROM agg_arrow")
        con.unregister("agg_arrow")

    def _bigquery_sql(self, client, table: str, opts: dict) -> str:
        """The BigQuery rendering, after checking the table has the export's columns."""
        schema = client.get_table(table, retry=no_retry()).schema
        names = {field.name for field in schema}
        missing = [name for name in REQUIRED if name not in names]
        if missing:  # a FOCUS table (or the error naming what the table lacks)
            self.focus = focus_plan(table, bigquery_columns(schema), "a Cloud Billing export", missing)
            return fagg.render(fagg.aggregate_query(self.focus, self.ctx.start, self.ctx.end), "bigquery", table)
        return render("gcp_lines", "bigquery", table=table, start=self.ctx.start, end=self.ctx.end,
                      grain=opts["grain"], partition_slack_days=opts["partition_slack_days"],
                      **optional_columns(names))


def make_client(options, table: str):
    """A BigQuery client: Application Default Credentials, or none for a loopback emulator.

    ``api_endpoint`` (case option) points the client elsewhere; a plain-http endpoint must be a
    loopback address and gets anonymous credentials, so no token ever travels in clear text.
    """
    try:
        from google.cloud import bigquery
    except ImportError as exc:
        raise missing_library(table, exc, "gcp") from None

    project = options.get("project") or split_table(table, "bigquery")[0]
    kwargs = {"project": project, "location": options.get("location")}
    endpoint = options.get("api_endpoint")
    if endpoint:
        from google.api_core.client_options import ClientOptions

        kwargs["client_options"] = ClientOptions(api_endpoint=str(endpoint))
        if urlparse(str(endpoint)).scheme == "http":
            if not is_loopback(str(endpoint)):
                raise InputError(table, f"api_endpoint {mask_url(endpoint)!r} is plain http off this machine",
                                 column="api_endpoint", expected="https, or http on a loopback address")
            from google.auth.credentials import AnonymousCredentials

            kwargs["credentials"] = AnonymousCredentials()
    return bigquery.Client(**kwargs)


def is_loopback(url: str) -> bool:
    """Whether the url's host is localhost or a loopback address."""
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def source_error(exc: Exception, table: str, limit: int) -> Exception:
    """Map a client or transport fault onto InputError / Retriable / FatalSourceError."""
    if isinstance(exc, (InputError, RetriableSourceError, FatalSourceError)):
        return exc
    import requests
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    reasons = {e.get("reason") for e in (getattr(exc, "errors", None) or []) if isinstance(e, dict)}
    message = redact(first_line(exc))   # a response body may quote a token or key
    if isinstance(exc, QueryTimeout):
        return FatalSourceError(f"{table}: {message}")
    if "bytesBilledLimitExceeded" in reasons:
        return InputError(table, f"BigQuery refused the query above maximum_bytes_billed = "
                          f"{limit:,} bytes ({message})", column="maximum_bytes_billed",
                          expected="a higher maximum_bytes_billed or a shorter window")
    transient = (gexc.TooManyRequests, gexc.InternalServerError, gexc.BadGateway,
                 gexc.ServiceUnavailable, gexc.GatewayTimeout, requests.ConnectionError,
                 requests.Timeout, TimeoutError)
    if isinstance(exc, transient) or reasons & TRANSIENT_REASONS:
        return RetriableSourceError(f"{table}: transient BigQuery fault: {message}")
    if isinstance(exc, auth_exc.DefaultCredentialsError):
        return FatalSourceError(f"{table}: no Application Default Credentials (run `gcloud auth "
                                "application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, "
                                "or run with an attached service account)")
    if isinstance(exc, (gexc.Unauthorized, auth_exc.RefreshError)):
        return FatalSourceError(f"{table}: BigQuery rejected the credentials: {message}")
    if isinstance(exc, gexc.Forbidden) or "accessDenied" in reasons:
        return FatalSourceError(f"{table}: permission denied; reading the export needs {ROLES} "
                                f"({message})")
    if isinstance(exc, gexc.NotFound):
        return FatalSourceError(f"{table}: not found (check the project, dataset and table names "
                                f"and the location): {message}")
    return FatalSourceError(f"{table}: BigQuery error: {message}")


# --- local files ----------------------------------------------------------------------------

def aggregate_local(con, path: Path, ctx, opts: dict) -> None:
    """Expose the export files as view ``billing_export`` and aggregate them into table ``agg``."""
    files, fmt = export_files(path)
    if fmt == "json":
        ndjson(files)
    names = export_view(con, files, fmt, path)
    sql = render("gcp_lines", "duckdb", table="billing_export", start=ctx.start, end=ctx.end,
                 grain=opts["grain"], **optional_columns(names))
    try:
        con.execute(f"CREATE TABLE agg AS {sql}")
    except duckdb.Error as exc:
        raise_all(bad_values(con, files, fmt, names))
        raise InputError(path, f"unreadable export: {first_line(exc)}",
                         expected="a Cloud Billing export (JSON or Parquet)") from None
    if len(files) > 1:  # once every record reads: the files that repeat each other's
        shared_rows(con, export_read(files, fmt, filename=True), path)


def export_files(path: Path) -> tuple[list[str], str]:
    """The export's files (one file, or every export file under a folder) and their format."""
    candidates = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    json_files = [str(p) for p in candidates if p.name.lower().endswith(JSON_SUFFIXES)]
    parquet_files = [str(p) for p in candidates if p.name.lower().endswith(PARQUET_SUFFIXES)]
    if json_files and parquet_files:
        raise InputError(path, "both JSON and Parquet export files", expected="one format")
    if not (json_files or parquet_files):
        raise InputError(path, "no export file (.json, .jsonl, .ndjson, .json.gz or .parquet)"
                         + other_format_hint(path, "gcp_billing"), expected="a Cloud Billing export: NDJSON or Parquet")
    return (json_files, "json") if json_files else (parquet_files, "parquet")


def export_read(files: list[str], fmt: str, filename: bool = False) -> str:
    """The DuckDB read of the export's files (``filename``: with the file each row came from)."""
    listed = "[" + ", ".join(quote(f) for f in files) + "]"
    named = ", filename=true" if filename else ""
    if fmt == "json":
        spec = "{" + ", ".join(f"{quote(k)}: {quote(v)}" for k, v in JSON_COLUMNS.items()) + "}"
        return f"read_json({listed}, format='newline_delimited', columns={spec}{named})"
    return f"read_parquet({listed}, union_by_name=true{named})"


def optional_columns(names) -> dict[str, bool]:
    """``render``'s flags for the optional columns among the export's column ``names``: ``resource``
    (a detailed export) and ``cost_at_list`` (rendered as NULL where absent)."""
    return {"detailed": "resource" in names, "list_cost": "cost_at_list" in names}


def export_view(con, files: list[str], fmt: str, path: Path) -> set[str]:
    """Create view ``billing_export`` (timestamps as TIMESTAMPTZ); return its column names (NDJSON:
    those of :data:`JSON_COLUMNS`, a missing key reading as NULL)."""
    source = export_read(files, fmt)
    if fmt == "json":
        names = set(JSON_COLUMNS)
    else:
        try:
            types = {row[0]: row[1] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
        except duckdb.Error as exc:
            raise InputError(path, f"not a readable Parquet file: {first_line(exc)}") from None
        raise_all(parquet_nested(path, types))
        names = set(types)
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        raise InputError(path, f"not a Cloud Billing export: no column(s) {', '.join(missing)}",
                         column=", ".join(missing), expected="the columns of a billing export")
    rate = "" if "currency_conversion_rate" in names else ", NULL::DOUBLE AS currency_conversion_rate"
    con.execute("CREATE VIEW billing_export AS SELECT * REPLACE ("
                "CAST(usage_start_time AS TIMESTAMPTZ) AS usage_start_time, "
                f"CAST(usage_end_time AS TIMESTAMPTZ) AS usage_end_time){rate} FROM {source}")
    return names


# --- aggregates → FOCUS-named rows ----------------------------------------------------------

def regroup_labels(con) -> None:
    """Rewrite ``agg`` with labels as canonical JSON, merging groups that then coincide.

    Engines escape JSON text slightly differently; canonical text makes the result, and its row
    order, the same whichever engine aggregated.
    """
    texts = [row[0] for row in con.execute("SELECT DISTINCT labels FROM agg").fetchall()]
    mapping = [(text, canonical_object(text) if text else "{}") for text in texts]
    bad = [text for text, canonical in mapping if canonical is None]
    if bad:
        raise InputError("labels", f"labels that are no JSON object: {bad[0]!r}")
    con.execute("CREATE TABLE label_map (labels VARCHAR, tags VARCHAR)")
    if mapping:
        con.executemany("INSERT INTO label_map VALUES (?, ?)", mapping)
    keys = [k for k in GCP_KEYS if k != "labels"]
    sums = ", ".join([f"sum({name}) AS {name}" for name in (*GCP_SUMS, *CREDIT_COLUMNS, "export_rows")]
                     + [f"max({CONVERSION_RATE}) AS {CONVERSION_RATE}", f"{known_sum(LIST_COST)} AS {LIST_COST}"])
    con.execute(f"CREATE TABLE agg_canonical AS SELECT {', '.join(keys)}, m.tags AS labels, "
                f"min(period_start) AS period_start, max(period_end) AS period_end, {sums} "
                f"FROM agg JOIN label_map AS m USING (labels) GROUP BY {', '.join(keys)}, m.tags")


def with_commitments(commitments: bool = True) -> str:
    """The WITH clause over ``agg_canonical``: ``a`` (with ``credit_other``) and the commitment CTEs
    that end in ``cud`` (:func:`connectors.billing.gcp_commitments.ctes`; without ``commitments``,
    a ``cud`` that names none)."""
    known = " + ".join(CREDIT_COLUMNS)
    return f"""
    WITH a AS (SELECT *, credit_total - ({known}) AS credit_other{", rowid AS cud_rid" * commitments}
               FROM agg_canonical),
    {cud.ctes("a") if commitments else cud.NONE}"""


def focus_table(con) -> list[tuple[int, str, str]]:
    """CREATE TABLE gcp_focus from ``agg_canonical`` (:func:`focus_sql`), and return the notes of its
    commitments (:func:`commitment_notes`). The commitment CTEs run once: ``cud`` becomes a
    temporary table that the notes and gcp_focus both read (a view where no fee row is present:
    then there is nothing to compute)."""
    commitments = cud.fees_present(con)
    kind = "TABLE" if commitments else "VIEW"
    con.execute(f"CREATE TEMP {kind} cud AS {with_commitments(commitments)} SELECT * FROM cud")
    try:
        notes = commitment_notes(con)
        con.execute(focus_sql(commitments))
    finally:
        con.execute(f"DROP {kind} cud")
    return notes


def focus_sql(commitments: bool = True) -> str:
    """CREATE TABLE gcp_focus from the ``cud`` rows (:func:`focus_table`): one charge row per group, one
    Credit row per non-zero credit type; per commitment pool a Purchase row and an Unused row for its
    fees (gcp_commitments.fee_ctes, fee_rows)."""
    common = """
      'Google Cloud' AS ProviderName, billing_account_id AS BillingAccountId,
      project_id AS SubAccountId, service_description AS ServiceName,
      sku_description AS ChargeDescription, period_start AS ChargePeriodStart,
      period_end AS ChargePeriodEnd, resource_name AS ResourceId, resource_name AS ResourceName,
      region AS RegionId, sku_id AS SkuId, currency AS BillingCurrency, labels AS Tags,
      sku_id AS x_SkuId, nullif(service_id, '') AS x_ServiceId, cost_type AS x_CostType,
      nullif(invoice_month, '') AS x_InvoiceMonth, nullif(machine_spec, '') AS x_MachineSpec"""
    credit_names = ", ".join([*CREDIT_COLUMNS, "credit_other"])
    return f"""
    CREATE TABLE gcp_focus AS
    WITH {cud.fee_ctes() + "," if commitments else ""}
    charges AS (
      SELECT {common}, {cud.charge_columns()}, {LIST_COST} AS ListCost,
        pricing_quantity AS PricingQuantity,
        nullif(pricing_unit, '') AS PricingUnit, usage_amount AS ConsumedQuantity,
        nullif(usage_unit, '') AS ConsumedUnit, NULL::VARCHAR AS x_CreditType,
        export_rows AS x_ExportRows, 0 AS part
      FROM cud WHERE NOT ((is_fee OR is_spend_fee) AND cud_id IS NOT NULL)),
    credits AS (
      SELECT {common}, 'Credit' AS ChargeCategory, amount AS BilledCost, amount AS EffectiveCost,
        CASE WHEN kind IN ({", ".join(f"'{c}'" for c in UNLISTED_CREDITS)}) THEN 0::DECIMAL(38, 9)
          ELSE amount END AS ListCost,
        NULL::DECIMAL(38, 9) AS PricingQuantity, NULL::VARCHAR AS PricingUnit,
        NULL::DECIMAL(38, 9) AS ConsumedQuantity, NULL::VARCHAR AS ConsumedUnit,
        upper(substr(kind, 8)) AS x_CreditType, NULL::BIGINT AS x_ExportRows, 1 AS part
      FROM (UNPIVOT cud ON {credit_names} INTO NAME kind VALUE amount)
      WHERE amount <> 0{cud.OFFSET_FOLDED * commitments}),
    fees AS ({cud.fee_rows() if commitments else "SELECT * FROM charges WHERE FALSE"})
    SELECT * EXCLUDE (part) FROM (SELECT * FROM charges UNION ALL BY NAME SELECT * FROM credits
                                  UNION ALL BY NAME SELECT * FROM fees)
    ORDER BY ChargePeriodStart, BillingAccountId, SubAccountId, ServiceName, x_ServiceId,
      ChargeDescription, SkuId, ResourceId, RegionId, x_CostType, BillingCurrency, x_InvoiceMonth,
      ConsumedUnit, PricingUnit, Tags, x_MachineSpec, part, x_CreditType, ChargePeriodEnd
    """


def commitment_notes(con) -> list[tuple[int, str, str]]:
    """The notes of committed use discount credits that meet no fee (gcp_commitments.unpaired_notes),
    from the ``cud`` rows (:func:`focus_table`); looked at only where there is such a credit at all."""
    if not con.execute(f"SELECT count(*) FROM agg_canonical WHERE {cud.CUD_CREDIT} <> 0 OR {cud.SPEND_CREDIT} <> 0 "
                       f"OR {cud.IS_SPEND_FEE}").fetchall()[0][0]:
        return []
    return cud.unpaired_notes(con)


def result_digest(con, table: str, rows: str = "gcp_focus") -> str:
    """sha256 of the table name and every aggregated row (the provenance of a BigQuery read)."""
    digest = hashlib.sha256(table.encode() + b"\0")
    for row in con.execute(f"SELECT * FROM {rows} ORDER BY rowid").fetchall():
        digest.update(json.dumps([str(v) for v in row]).encode() + b"\n")
    return digest.hexdigest()


def quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
