"""AWS CUR and FOCUS tables in Athena → table ``lines`` (``BillingLine``), aggregated where the data lives.

A source such as ``format = "athena"``, ``table = "cur_db.cur_table"`` (or ``database`` +
``table``), ``workgroup`` (default ``primary``), ``output_location`` (``s3://…`` for the query
results; optional when the workgroup sets one), ``catalog`` (default ``AwsDataCatalog``),
``region``, ``profile``, ``timeout_s`` (default 600), ``results`` (default ``auto``) and ``endpoint_url`` (an Athena-compatible
endpoint, for tests) is read in three steps:

1. The table's columns come from the Glue Data Catalog (``glue:GetTable``; another catalog:
   ``athena:GetTableMetadata``) and are resolved to CUR fields: legacy CUR through Athena
   (``line_item_unblended_cost``, flat ``resource_tags_user_*``) or CUR 2.0 (``product`` and
   ``resource_tags`` MAPs). A table with FOCUS's columns instead (AWS Data Exports' FOCUS export
   in Glue, lower-case names, ``tags`` a MAP) is read as FOCUS (:mod:`connectors.billing.focus_remote`):
   the query of :mod:`connectors.billing.focus_aggregate`, its rows through the FOCUS connector.
   Any other table is one error naming the columns expected and the nearest found.
2. One query (``connectors/billing/cur_aggregate.py``, rendered for Trino / Athena engine v3) sums the
   lines of the window by every key the CUR mapping reads, hour by hour for lines that may bill GPU
   time and day by day for the others, money as DECIMAL(38, 18). It is started in the workgroup,
   polled with backoff until it ends. Its rows land in DuckDB (:mod:`connectors.billing.athena_results`):
   a result of one page from GetQueryResults, a longer one from the CSV file Athena wrote at the
   output location (option ``results``: ``auto``, ``s3`` or ``pages``). The
   query execution id and the bytes Athena scanned are logged and kept (``query_execution_id``,
   ``bytes_scanned``, and a row of table ``notes``, which says where the rows were read from).
3. The rows become table ``raw`` of the CUR connector, which maps, checks, windows and normalises
   them as it does the lines of a file (:func:`connectors.billing.cur.read_raw`). A line's ``line_id`` is
   ``<query execution id>:<result row>``; ``rows`` is the number of CUR lines summed.

Credentials come from boto3's standard chain (environment, ``profile``, SSO, web identity, container
and instance roles), never from the case file. Faults: throttling and 5xx are retried by botocore
(standard mode) and then, as ``RetriableSourceError``, by the base connector with backoff; a query
that FAILED for a transient reason (``Retryable`` in its AthenaError, throttling, an internal
error) is run again. Access denied names the table, the workgroup, the output location and the
permissions needed (see docs/access.md); a query that FAILED on its SQL or the table is an
``InputError`` carrying Athena's message. No credential appears in any message or log line.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd

from connectors.base import Connector
from connectors.billing import athena_results as results
from connectors.billing import cur_aggregate as agg
from connectors.billing import cur_sql as sql
from connectors.billing import focus_aggregate as fagg
from connectors.billing.athena_results import read_results
from connectors.billing.cur import read_raw
from connectors.billing.focus_checks import extent_note, notes_table
from connectors.billing.focus_remote import focus_plan, read_rows
from connectors.duck import first_line, session
from connectors.errors import (
    FatalSourceError,
    InputError,
    RetriableSourceError,
    SourceError,
    missing_library,
)
from connectors.objectstore import refuse_credentials
from connectors.objectstore_faults import THROTTLING, guard_logs
from schemas.billing import BillingLine, ContractCommitment
from schemas.secrets import redact

log = logging.getLogger(__name__)

DEFAULT_WORKGROUP = "primary"
DEFAULT_CATALOG = "AwsDataCatalog"
DEFAULT_TIMEOUT_S = 600.0
MAX_RETRIES = 4            # botocore retries per request after the first try (standard mode)
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 60
POLL_FIRST_S = 0.2         # first wait between GetQueryExecution calls
POLL_MAX_S = 5.0           # longest wait between them
PERMISSIONS = ("athena:StartQueryExecution, athena:GetQueryExecution, athena:GetQueryResults and "
               "athena:StopQueryExecution on the workgroup; glue:GetDatabase, glue:GetTable and "
               "glue:GetPartitions on the database and table; s3:GetObject and s3:ListBucket on the "
               "CUR data; s3:GetBucketLocation, s3:PutObject, s3:GetObject and s3:ListBucket on the "
               "output location")
ACCESS_CODES = {"AccessDeniedException", "AccessDenied", "UnauthorizedOperation",
                "UnauthorizedException", "403"}
REJECTED = {"UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException",
            "InvalidClientTokenId", "IncompleteSignature", "MissingAuthenticationToken"}
TRANSIENT = re.compile(r"throttl|rate exceeded|slow ?down|too many (queries|requests)|internal (service )?error|"
                       r"service unavailable|temporar|try again|timed? ?out", re.I)
ACCESS = re.compile(r"access denied|permission denied|not authorized|insufficient (lake formation )?"
                    r"permission|accessdenied|forbidden", re.I)


@dataclass(frozen=True)
class Options:
    """The case options this connector reads."""

    catalog: str
    database: str
    table: str
    workgroup: str
    output_location: str | None
    region: str | None
    profile: str | None
    endpoint_url: str | None
    timeout_s: float
    results: str = "auto"

    @property
    def name(self) -> str:
        """database.table, as messages name it."""
        return f"{self.database}.{self.table}"

    @property
    def output(self) -> str:
        return self.output_location or f"the output location of workgroup {self.workgroup!r}"


class AthenaConnector(Connector):
    """Reads a CUR table through Athena (aggregated there) into the ``lines`` table."""

    format_name = "athena"
    kind = "billing"
    schemas = {"lines": BillingLine, "commitments": ContractCommitment}

    def __init__(self, spec, ctx):
        super().__init__(spec, ctx)
        self.query_execution_id: str | None = None
        self.bytes_scanned: int | None = None
        self.query: str | None = None
        self._succeeded: str | None = None
        self._digest = ""

    def locate(self):
        """Queried in place: nothing is downloaded."""
        return None

    def fingerprint(self) -> str:
        """sha256 of the table, the query and every row it returned."""
        return self._digest

    def options(self) -> Options:
        """The options, checked (bad values: InputError naming the option)."""
        opts, where = self.spec.options, self.spec.where
        refuse_credentials(where, opts)
        table = str(opts.get("table") or "").strip()
        database = str(opts.get("database") or "").strip()
        parts = [p.strip().strip('"') for p in table.split(".")] if table else []
        if len(parts) == 2 and not database:
            database, table = parts
        elif len(parts) == 3 and not database and not opts.get("catalog"):
            catalog, database, table = parts
            opts = {**opts, "catalog": catalog}
        elif len(parts) != 1 or not database:
            raise InputError(where, f"table = {table!r}" + (f", database = {database!r}" if database else ""),
                             column="table", expected='table = "database.table" (or database + table)')
        else:
            table = parts[0]
        for name, value in (("database", database), ("table", table)):
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]*", value or ""):
                raise InputError(where, f"{name} {value!r} is not a Glue name", column=name,
                                 expected="letters, digits, _ and -")
        output = opts.get("output_location")
        if output is not None and not str(output).startswith("s3://"):
            raise InputError(where, f"output_location {output!r} is not an s3:// uri",
                             column="output_location", expected="s3://bucket/prefix/ for the query results")
        try:
            timeout = float(opts.get("timeout_s", DEFAULT_TIMEOUT_S))
        except (TypeError, ValueError):
            timeout = -1.0
        if isinstance(opts.get("timeout_s"), bool) or timeout <= 0:
            raise InputError(where, f"timeout_s = {opts.get('timeout_s')!r}", column="timeout_s",
                             expected="a positive number of seconds")
        mode = opts.get("results", "auto")
        if mode not in results.MODES:
            raise InputError(where, f"results = {mode!r}", column="results",
                             expected=" or ".join(f'"{m}"' for m in results.MODES))
        return Options(str(opts.get("catalog") or DEFAULT_CATALOG), database, table,
                       str(opts.get("workgroup") or DEFAULT_WORKGROUP),
                       str(output) if output else None, opts.get("region") or None,
                       opts.get("profile") or None, opts.get("endpoint_url") or None, timeout, mode)

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Resolve the table, run the aggregate in Athena, land its rows in DuckDB
        (:mod:`connectors.billing.athena_results`), map them as CUR lines."""
        opts = self.options()
        clients = []
        with session() as con:
            try:
                athena = make_client("athena", opts)
                clients.append(athena)
                columns = table_columns(opts, athena, clients)
                plan = agg.plan(columns)
                focus = plan.missing and focus_plan(opts.name, columns, "a CUR table (legacy or 2.0)", plan.missing)
                tree = (fagg.aggregate_query(focus, self.ctx.start, self.ctx.end) if focus else
                        agg.aggregate_query(plan, self.ctx.start, self.ctx.end))
                self.query = (fagg if focus else agg).render(tree, "trino", opts.name)
                execution = self._run(athena, opts)
                landed = results.land(con, athena, execution, opts.results, opts.name, self.query,
                                      {"region": opts.region, "profile": opts.profile,
                                       "endpoint_url": opts.endpoint_url})
                extent = None if landed.rows else table_extent(
                    athena, fagg.render(fagg.extent_query(focus), "trino", opts.name) if focus else
                    agg.render(agg.extent_query(plan), "trino", opts.name), opts)
            except Exception as exc:  # every client fault becomes one of our errors
                raise source_error(exc, opts) from None
            finally:
                for client in clients:
                    client.close()
            expected = focus.names if focus else [e.alias_or_name for e in tree.expressions]
            if landed.names and [n.lower() for n in landed.names] != [n.lower() for n in expected]:
                raise FatalSourceError(f"{opts.name}: Athena query {self.query_execution_id} returned "
                                       f"columns {landed.names[:5]}…, not those of the query")
            self._digest = landed.digest
            if focus:
                self.read_as = "focus"
                tables, lines, covered = read_rows(con, results.TABLE, expected, Path(opts.name),
                                                   str(self.query_execution_id), self.ctx)
            else:
                layout, lines = load_rows(con, plan, expected, Path(opts.name), str(self.query_execution_id))
                tables, _, covered = read_raw(con, [layout], Path(opts.name), self.ctx, rows=lines, weighted=True)
        notes = [(0, "", f"Athena query {self.query_execution_id} in workgroup {opts.workgroup} scanned "
                         f"{self.bytes_scanned} bytes of {opts.name}; {landed.rows} result rows summing {lines} "
                         f"{'FOCUS' if focus else 'CUR'} lines, {landed.how}")] + (extent_note(*extent) if extent else [])
        tables["notes"] = pd.concat([tables["notes"], notes_table(notes)], ignore_index=True) if focus else notes_table(notes)
        return tables, lines, covered

    def _run(self, client, opts: Options) -> dict:
        """Start the query (or resume the one that already succeeded) and wait for its end."""
        execution = None
        if self._succeeded is not None:  # a retried fetch: read the finished query again
            self.query_execution_id = self._succeeded
            execution = wait(client, self._succeeded, opts)
        if execution is None or execution["Status"]["State"] != "SUCCEEDED":
            self.query_execution_id = None
            self.query_execution_id = client.start_query_execution(**start_kwargs(str(self.query), opts))["QueryExecutionId"]
            log.info("athena: query %s started in workgroup %s over %s", self.query_execution_id,
                     opts.workgroup, opts.name)
            execution = wait(client, self.query_execution_id, opts)
            if execution["Status"]["State"] != "SUCCEEDED":
                raise query_failed(execution, opts)
        self._succeeded = self.query_execution_id
        stats = execution.get("Statistics") or {}
        self.bytes_scanned = int(stats.get("DataScannedInBytes") or 0)
        log.info("athena: query %s succeeded, %d bytes scanned", self.query_execution_id, self.bytes_scanned)
        return execution


# --- AWS calls ---------------------------------------------------------------------------------

def start_kwargs(query: str, opts: Options) -> dict:
    """StartQueryExecution's arguments for ``query`` in the source's workgroup, catalog and database."""
    kwargs = {"QueryString": query, "WorkGroup": opts.workgroup,
              "QueryExecutionContext": {"Catalog": opts.catalog, "Database": opts.database}}
    if opts.output_location:
        kwargs["ResultConfiguration"] = {"OutputLocation": opts.output_location}
    return kwargs


def table_extent(client, query: str, opts: Options) -> tuple[datetime, datetime] | None:
    """The first usage start and the last usage end of the whole table (``query``: the extent query
    of its format), for a window that holds no line (rule 5: say where the lines lie): one more
    query, asked only then. None where it fails, or the table holds no line: the refusal stands,
    without the extent."""
    try:
        qid = client.start_query_execution(**start_kwargs(query, opts))["QueryExecutionId"]
        if wait(client, qid, opts)["Status"]["State"] != "SUCCEEDED":
            return None
        _, rows = read_results(client, qid)
        first, last = (datetime.strptime(str(text), agg.PERIOD_FORMAT) for text in rows[0][:2])
    except Exception as exc:  # noqa: BLE001 (best effort: the error it would explain is raised anyway)
        log.info("athena: the extent of %s could not be read: %s", opts.name, type(exc).__name__)
        return None
    log.info("athena: query %s read the extent of %s", qid, opts.name)
    return first, last


def make_client(service: str, opts: Options):
    """A boto3 client of the standard credential chain, standard-mode retries and timeouts."""
    try:
        import boto3
    except ImportError as exc:
        raise missing_library(opts.name, exc, "aws") from None
    from botocore.config import Config
    from botocore.exceptions import ProfileNotFound

    try:
        session = boto3.session.Session(profile_name=opts.profile, region_name=opts.region)
    except ProfileNotFound:
        raise InputError(opts.name, f"AWS profile {opts.profile!r} not found", column="profile",
                         expected="a profile in ~/.aws/config or ~/.aws/credentials") from None
    config = Config(retries={"max_attempts": MAX_RETRIES, "mode": "standard"},
                    connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
                    user_agent_extra="costaudit")
    client = session.client(service, endpoint_url=opts.endpoint_url, config=config)
    guard_logs()
    return client


def table_columns(opts: Options, athena, clients: list) -> list[tuple[str, str]]:
    """(name, type) of every column and partition key of the table."""
    if opts.catalog == DEFAULT_CATALOG:
        glue = make_client("glue", opts)
        clients.append(glue)
        table = glue.get_table(DatabaseName=opts.database, Name=opts.table)["Table"]
        columns = (table.get("StorageDescriptor") or {}).get("Columns") or []
        columns = columns + (table.get("PartitionKeys") or [])
    else:
        meta = athena.get_table_metadata(CatalogName=opts.catalog, DatabaseName=opts.database,
                                         TableName=opts.table)["TableMetadata"]
        columns = (meta.get("Columns") or []) + (meta.get("PartitionKeys") or [])
    return [(c["Name"], c.get("Type") or "string") for c in columns]


def wait(client, qid: str, opts: Options) -> dict:
    """Poll GetQueryExecution with backoff until the query ends; past timeout_s stop it."""
    deadline = time.monotonic() + opts.timeout_s
    delay = POLL_FIRST_S
    while True:
        execution = client.get_query_execution(QueryExecutionId=qid)["QueryExecution"]
        if execution["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return execution
        if time.monotonic() + delay > deadline:
            client.stop_query_execution(QueryExecutionId=qid)
            raise QueryTimeout(f"the query did not finish within timeout_s = {opts.timeout_s:g} s "
                               f"(query execution {qid}, stopped)")
        time.sleep(delay)
        delay = min(delay * 1.5, POLL_MAX_S)


class QueryTimeout(Exception):
    """The query outran timeout_s: not retried, as a rerun would scan (and bill) again."""


# --- errors ------------------------------------------------------------------------------------

def access_denied(opts: Options, action: str, detail: str = "") -> str:
    """The message for a refusal: table, workgroup, output location, permissions."""
    text = (f"access denied {action} Athena table {opts.catalog}.{opts.name} in workgroup "
            f"{opts.workgroup!r} with results to {opts.output}: the credentials need {PERMISSIONS} "
            "(see docs/access.md)")
    return text + (f"; AWS said: {redact(detail)}" if detail else "")


def query_failed(execution: dict, opts: Options) -> SourceError:
    """The error for a query that ended FAILED or CANCELLED."""
    status = execution.get("Status") or {}
    qid = execution.get("QueryExecutionId")
    error = status.get("AthenaError") or {}
    reason = redact(str(status.get("StateChangeReason") or error.get("ErrorMessage") or "no reason given"))
    if status.get("State") == "CANCELLED":
        return FatalSourceError(f"{opts.name}: Athena query {qid} was cancelled ({reason})")
    if ACCESS.search(reason):
        return FatalSourceError(access_denied(opts, f"(query {qid} failed) running a query on", reason))
    if error.get("Retryable") or error.get("ErrorCategory") == 1 or TRANSIENT.search(reason):
        return RetriableSourceError(f"{opts.name}: Athena query {qid} failed for a transient reason: {reason}")
    return InputError(opts.name, f"Athena query {qid} failed: {reason}",
                      expected="a CUR table the query can read (check the table and its columns)")


def _code(exc) -> str:
    return str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))


def _status(exc) -> int:
    return int((getattr(exc, "response", None) or {}).get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def source_error(exc: Exception, opts: Options) -> SourceError:
    """Map a client or transport fault onto InputError / RetriableSourceError / FatalSourceError."""
    if isinstance(exc, SourceError):
        return exc
    if isinstance(exc, QueryTimeout):
        return FatalSourceError(f"{opts.name}: {exc}")
    from botocore import exceptions as bx

    if isinstance(exc, bx.ClientError):
        code, status = _code(exc), _status(exc)
        operation = getattr(exc, "operation_name", "") or "a request"
        message = redact(str((exc.response.get("Error") or {}).get("Message") or ""))
        if code in THROTTLING or code in ("ThrottlingException", "TooManyRequestsException",
                                          "InternalServerException", "InternalServiceException",
                                          "ServiceUnavailableException") or status == 429 or status >= 500:
            return RetriableSourceError(f"{opts.name}: Athena answered {code or status} to {operation} "
                                        f"after {MAX_RETRIES + 1} attempts (throttled or unavailable)")
        if code in ACCESS_CODES or status == 403:
            return FatalSourceError(access_denied(opts, f"({operation}) on", message))
        if code in REJECTED:
            return FatalSourceError(f"{opts.name}: the AWS credentials were rejected ({code}); check "
                                    "the profile or environment that the AWS credential chain found")
        if code == "EntityNotFoundException" or (code == "MetadataException" and "not found" in message.lower()):
            return InputError(opts.name, f"no such table in catalog {opts.catalog} ({message})",
                              column="table", expected="an existing Glue database and table")
        if code == "InvalidRequestException":
            lowered = message.lower()
            if "output location" in lowered:
                return InputError(opts.name, f"Athena refused the query: {message}", column="output_location",
                                  expected="output_location = s3://bucket/prefix/, or a workgroup that sets one")
            if "workgroup" in lowered:
                return InputError(opts.name, f"Athena refused workgroup {opts.workgroup!r}: {message}",
                                  column="workgroup", expected="an existing, enabled workgroup")
            return InputError(opts.name, f"Athena refused {operation}: {message}")
        return FatalSourceError(f"{opts.name}: Athena answered {code or status} to {operation}: {message}")
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError,
                        bx.TokenRetrievalError, bx.SSOError)):
        return FatalSourceError(f"{opts.name}: no usable AWS credentials ({type(exc).__name__}); costaudit "
                                "uses the AWS credential chain: environment, profile, SSO or role")
    if isinstance(exc, bx.NoRegionError):
        return InputError(opts.name, "no AWS region configured", column="region",
                          expected="region in the source table, AWS_REGION or a profile with one")
    if isinstance(exc, (bx.ParamValidationError, bx.InvalidRegionError)):
        return InputError(opts.name, f"invalid request: {redact(str(exc))}")
    if isinstance(exc, ValueError):
        return InputError(opts.name, str(exc))
    if isinstance(exc, (bx.BotoCoreError, ConnectionError, TimeoutError, OSError)):
        return RetriableSourceError(f"{opts.name}: Athena request failed after {MAX_RETRIES + 1} attempts: "
                                    f"{type(exc).__name__}: {redact(first_line(exc))}")
    raise exc


# --- result rows → table raw -------------------------------------------------------------------

def load_rows(con, plan: agg.Plan, names: list[str], where: Path, qid: str) -> tuple[sql.Layout, int]:
    """The query's rows (table ``athena_rows``, in result order: :func:`athena_results.land`) as
    table ``raw`` (file 0 = the query, row = result row, ``_n`` = the CUR lines the row sums, so
    each line's ``line_count`` counts CUR lines); returns the layout and the number of CUR lines summed."""
    parts = []
    for i, name in enumerate(names):
        value = f"v{i}"
        if name == plan.tag_map:
            value = f"TRY_CAST(TRY_CAST(v{i} AS JSON) AS MAP(VARCHAR, VARCHAR))"
        parts.append(f"{value} AS {agg.ident(name)}")
    con.execute(f"CREATE TABLE agg AS SELECT rowid + 1 AS _result_row, {', '.join(parts)} FROM {results.TABLE}")
    con.execute(f"DROP TABLE {results.TABLE}")
    described = [(n, t) for n, t, *_ in con.execute("DESCRIBE agg").fetchall()
                 if n not in ("_result_row", agg.LINES)]
    layout = sql.layout_of(where, "parquet", qid, described)
    layout = sql.Layout(layout.path, "athena", layout.label, layout.width, layout.exprs, layout.names,
                        layout.tags, layout.row_hash)
    con.execute(sql.create_raw_sql())
    con.execute("ALTER TABLE raw ADD COLUMN _n BIGINT")
    con.execute(f"INSERT INTO raw SELECT 0, _result_row, {sql.projection(layout)}, CAST({agg.LINES} AS BIGINT) FROM agg")
    lines = con.execute("SELECT coalesce(sum(_n), 0) FROM raw").fetchall()[0][0]
    return layout, int(lines)
