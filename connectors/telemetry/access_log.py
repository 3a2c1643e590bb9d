"""Web access logs as a request-count source → tables ``traffic`` (``ServiceTraffic``) and ``requests_detail``.

Reads Apache / nginx combined (or common) logs and AWS ELB / ALB access logs as text (``.log``,
``.txt``, ``.gz``, or a folder of them), and the parsed Parquet form of such a log (columns
``timestamp``, ``status``, ``path``, ``user_agent``; ``method`` and the others optional). Every
line is parsed, classified and counted in DuckDB; nothing is looped over in Python.

Each line falls in exactly one class:

* **unparseable** – the line is not a request in either format (a TLS probe sent to the HTTP port,
  a request line that is not ``METHOD PATH [PROTOCOL]``, a time that does not parse); in the
  Parquet form, a row with no ``status`` (the parser kept the raw line in ``path``). Its time is
  read from the raw line (an Apache ``[…]`` stamp or a leading ELB stamp) when it has one;
  otherwise it is counted in a ``requests_detail`` row with no ``ts``.
* **health_checks** – user agent ``ELB-HealthChecker…``, or a path equal to the case's
  ``health_path`` (the query string ignored; ``re:<regex>`` searches the whole path), whatever
  its status.
* **failed** – any other status outside 200–399 (4xx, 5xx, and ELB's 0 or ``-``).
* **other_paths** – with the ``path_filter`` option (an exact path, the query string ignored, or
  ``re:<regex>`` searched in path and query), a 2xx / 3xx request whose path it does not match.
* **successful** – the rest: 2xx and 3xx requests that are not health checks (and that the path
  filter matches).

``traffic`` has one row per interval with at least one line: ``ts`` = interval start (intervals of
``ctx.step_seconds``, default 3600 s, aligned to the window start), ``model_name`` and
``namespace`` "", ``pod`` = the entry's ``service`` option (or ""), ``requests`` = successful,
tokens 0. ``requests_detail`` has the same intervals with ``lines``, ``successful``, ``failed``,
``health_checks``, ``unparseable`` and ``other_paths``. Lines outside the window are dropped (counted in ``rows``);
``covered`` is (first, last) request time kept. With a ``path_filter``, table ``other_paths`` holds the paths of
the window's other_paths lines, most frequent first (the first 10), and table ``filter_failed`` the statuses of
the window's failed lines the filter matches, with their lines (``status`` "-" where the log gave none). A
timestamp without an offset is UTC; ELB / ALB stamps are UTC by definition. ``row`` numbers in errors count
data records from 1 (a text file's blank lines are not counted).
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pandas as pd

from connectors.base import Connector
from connectors.bounds import EITHER, shown
from connectors.duck import (
    DEFAULT_MAX_LINE,
    MAX_ERRORS,
    bound,
    first_line,
    last_line_longer,
    quote_ident,
    quote_text,
    raise_all,
    utc_text,
)
from connectors.errors import InputError
from schemas.serving import ServiceTraffic

DEFAULT_STEP = 3600
HEALTH_AGENT = "^ELB-HealthChecker"
TEXT_SUFFIXES = (".log", ".txt", ".gz")
QUOTED = r'"((?:[^"\\]|\\.)*)"'
# Apache / nginx combined or common format.
COMBINED = (r'^(\S+) \S+ \S+ \[([^\]]+)\] ' + QUOTED + r' (\d{3}|-) (\d+|-)(?: ' + QUOTED + ' ' + QUOTED + ')?')
# ELB (classic) and ALB ("type" first): time, name, client, target, 3 timings, status, …, request, agent.
ELB = (r'^(?:[a-z0-9]+ )?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) \S+ \S+ \S+ \S+ \S+ \S+ (\d{3}|-) '
       r'\S+ \S+ \S+ ' + QUOTED + ' ' + QUOTED)
REQUEST = r'^([A-Z]+) (\S+)(?: (\S+))?$'
APACHE_TIME = "%d/%b/%Y:%H:%M:%S %z"
STAMP_IN_LINE = r'\[(\d\d/[A-Za-z]{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\]'
ISO_AT_START = r'^(?:[a-z0-9]+ )?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) '
PARQUET_REQUIRED = ("timestamp", "status", "path", "user_agent")
DETAIL_COLUMNS = ["ts", "pod", "lines", "successful", "failed", "health_checks", "unparseable", "other_paths"]
CLASSES = ("successful", "failed", "health_checks", "unparseable", "other_paths")


class AccessLogConnector(Connector):
    """Counts requests per interval from an access log, health checks and failures apart."""

    format_name = "access_log"
    accepts = EITHER
    kind = "telemetry"
    schemas = {"traffic": ServiceTraffic}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Load the log into table ``req``, classify every line and count per interval."""
        with duckdb.connect(":memory:") as con:
            con.execute("SET TimeZone = 'UTC'")
            bound(con)
            if self.path.is_file() and self.path.name.lower().endswith(".parquet"):
                load_parquet(con, self.path)
            else:
                load_text(con, log_files(self.path), self.path)
            rows = con.execute("SELECT count(*) FROM req").fetchall()[0][0]
            if not rows:
                raise InputError(self.path, "the request log has no line", expected="a request log with lines")
            classify_lines(con, self.spec.options.get("health_path"), self.path_filter)
            detail, covered = count_intervals(con, self.ctx, self.step)
            # where its dated lines lie, for the warning when none is in the window (audit/fit_window.py)
            first, last = con.execute("SELECT min(ts), max(ts) FROM classed WHERE class <> 'unparseable'").fetchall()[0]
            self.extent = (_utc(first), _utc(last))
            outside = outside_paths(con, self.ctx) if self.path_filter else None
            matched = filter_failures(con, self.ctx, self.path_filter) if self.path_filter else None
        pod = str(self.spec.options.get("service") or "")
        detail.insert(1, "pod", pod)
        tables = {"traffic": traffic_table(detail), "requests_detail": detail[DETAIL_COLUMNS]}
        if outside is not None:
            tables["other_paths"], tables["filter_failed"] = outside, matched
        return tables, int(rows), covered

    @property
    def path_filter(self) -> str | None:
        """The ``path_filter`` option: which successful requests count (exact path or ``re:``)."""
        value = self.spec.options.get("path_filter")
        if value is None:
            return None
        if not isinstance(value, str) or not value or value == "re:":
            raise InputError(self.path, f"path_filter {shown(value)} is not a path",
                             expected='a path such as "/index.html", or "re:<regex>"')
        if value.startswith("re:"):
            try:
                re.compile(value[3:])
            except re.error as exc:
                raise InputError(self.path, f"path_filter: bad regular expression: {exc}",
                                 expected="a regular expression DuckDB and Python both read") from None
        return value

    @property
    def step(self) -> int:
        """Interval length in seconds: the case's step, else one hour."""
        step = int(self.ctx.step_seconds or DEFAULT_STEP)
        if step <= 0:
            raise InputError(self.path, f"step {step} is not positive", expected="step_seconds > 0")
        return step


# --- text logs --------------------------------------------------------------------------------

def log_files(path: Path) -> list[Path]:
    """The file itself, or a folder's log files (.log, .txt, .gz) sorted by name."""
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith(TEXT_SUFFIXES))
    if not files:
        raise InputError(path, "no log files in folder", expected="files ending .log, .txt or .gz")
    return files


def load_text(con, files: list[Path], where: Path) -> None:
    """Table ``req`` (rn, ts, status, path, user_agent, stamp_ts, parsed) from text lines.

    Lines are read as Latin-1, which never fails on stray bytes and leaves ASCII (every field
    matched here) unchanged.
    """
    for file in files:  # read_csv would drop a last line longer than its buffer without a word
        if last_line_longer(file, DEFAULT_MAX_LINE, file.name.lower().endswith(".gz")):
            raise InputError(file, f"last line longer than {DEFAULT_MAX_LINE:,} bytes (the log reader's max_line_size)",
                             expected=f"log lines of at most {DEFAULT_MAX_LINE:,} bytes")
    names = ", ".join(quote_text(str(f)) for f in files)
    reader = (f"read_csv([{names}], columns={{'line': 'VARCHAR'}}, auto_detect=false, header=false, "
              f"delim={quote_text(chr(31))}, quote='', escape='', encoding='latin-1', strict_mode=false, "
              "null_padding=true, compression='auto')")
    try:
        con.execute(f"CREATE TABLE lines AS SELECT line FROM {reader} WHERE trim(coalesce(line, '')) <> ''")
    except duckdb.Error as exc:
        raise InputError(where, f"unreadable log: {first_line(exc)}",
                         expected="a text access log (plain or gzip)") from None
    combined = regex_struct("line", COMBINED, ["ip", "stamp", "request", "status", "bytes", "referer", "agent"])
    elb = regex_struct("line", ELB, ["stamp", "status", "request", "agent"])
    # Each pattern runs once per line (a struct of empty strings means no match); ELB only where
    # the combined format failed.
    con.execute(f"""CREATE TABLE parts AS SELECT rn, line, CASE WHEN c0.stamp <> '' THEN c0 END AS c,
        CASE WHEN c0.stamp = '' THEN {elb} END AS e0
        FROM (SELECT rowid + 1 AS rn, line, {combined} AS c0 FROM lines)""")
    request = regex_struct("coalesce(c.request, e.request)", REQUEST, ["method", "target", "protocol"])
    con.execute(f"""CREATE TABLE req AS SELECT rn, ts, status, {path_of('r.target')} AS path, user_agent,
        CASE WHEN NOT parsed THEN {stamp_of('line')} END AS stamp_ts, parsed
        FROM (SELECT *, coalesce(r.method <> '', FALSE) AND ts IS NOT NULL AS parsed FROM
              (SELECT rn, line, {request} AS r,
                 CASE WHEN c IS NOT NULL THEN try_strptime(c.stamp, '{APACHE_TIME}')
                      WHEN e IS NOT NULL THEN TRY_CAST(e.stamp AS TIMESTAMPTZ) END AS ts,
                 TRY_CAST(coalesce(c.status, e.status) AS INTEGER) AS status,
                 coalesce(c.agent, e.agent) AS user_agent
               FROM (SELECT *, CASE WHEN e0.stamp <> '' THEN e0 END AS e FROM parts)))""")
    first = con.execute("SELECT min(rn), count(*) FILTER (WHERE parsed) FROM req").fetchall()[0]
    if first[0] is not None and first[1] == 0:
        raise InputError(where, "no line is an access-log request", row=int(first[0]),
                         expected="Apache/nginx combined or common format, or ELB/ALB access-log format")


def regex_struct(column: str, pattern: str, names: list[str]) -> str:
    """SQL: the capture groups of ``pattern`` in ``column`` as a struct with ``names``."""
    listed = ", ".join(quote_text(n) for n in names)
    return f"regexp_extract({column}, {quote_text(pattern)}, [{listed}])"


def stamp_of(raw: str) -> str:
    """SQL: the time written in a raw line (Apache ``[…]`` or a leading ELB ISO stamp), else NULL."""
    apache = f"try_strptime(nullif(regexp_extract({raw}, {quote_text(STAMP_IN_LINE)}, 1), ''), '{APACHE_TIME}')"
    iso = f"TRY_CAST(nullif(regexp_extract({raw}, {quote_text(ISO_AT_START)}, 1), '') AS TIMESTAMPTZ)"
    return f"coalesce({apache}, {iso})"


def path_of(target: str) -> str:
    """SQL: the path of a request target (ELB writes absolute URLs: ``http://host:80/p?q``)."""
    return (f"CASE WHEN regexp_matches({target}, '^[A-Za-z][A-Za-z0-9+.-]*://') THEN "
            f"coalesce(nullif(regexp_extract({target}, '^[A-Za-z][A-Za-z0-9+.-]*://[^/]*(/.*)?$', 1), ''), '/') "
            f"ELSE {target} END")


# --- parsed Parquet ---------------------------------------------------------------------------

def load_parquet(con, path: Path) -> None:
    """Table ``req`` from a parsed log; bad cells are InputErrors naming row and column."""
    try:
        described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    except duckdb.Error as exc:
        raise InputError(path, f"not a readable Parquet file: {first_line(exc)}", expected="a Parquet file") from None
    types = {name.lower(): (name, dtype) for name, dtype, *_ in described}
    missing = [c for c in PARQUET_REQUIRED if c not in types]
    if missing:
        raise InputError(path, f"missing column(s): {', '.join(missing)}", row=0, column=", ".join(missing),
                         expected="a parsed access log with " + ", ".join(PARQUET_REQUIRED))
    col = {key: quote_ident(name) for key, (name, _) in types.items()}
    ts = timestamp_expr(types["timestamp"][1], path)
    con.execute(f"""CREATE TABLE raw AS SELECT {col['timestamp']} AS t, CAST({col['status']} AS VARCHAR) AS s,
        CAST({col['path']} AS VARCHAR) AS path, CAST({col['user_agent']} AS VARCHAR) AS user_agent
        FROM read_parquet({quote_text(str(path))})""")  # insertion order = file order: rowid numbers rows
    con.execute(f"""CREATE TABLE req AS SELECT rowid + 1 AS rn, {ts} AS ts, TRY_CAST(trim(s) AS INTEGER) AS status,
        path, user_agent, {stamp_of('path')} AS stamp_ts,
        s IS NOT NULL AS parsed, CAST(t AS VARCHAR) AS t_text, s AS status_text FROM raw""")
    raise_all(parquet_errors(con, path, types["timestamp"][0], types["status"][0]))


def timestamp_expr(dtype: str, path: Path) -> str:
    """SQL: column ``t`` of a given Parquet type as TIMESTAMPTZ (naive = UTC; text as ISO or Apache)."""
    if dtype.startswith("TIMESTAMP") or dtype == "DATE":
        return "CAST(t AS TIMESTAMPTZ)"
    if dtype == "VARCHAR":
        return f"coalesce(TRY_CAST(trim(t) AS TIMESTAMPTZ), try_strptime(trim(t), '{APACHE_TIME}'))"
    raise InputError(path, f"timestamp column has type {dtype}", column="timestamp",
                     expected="a TIMESTAMP column or ISO 8601 text")


def parquet_errors(con, path: Path, ts_name: str, status_name: str) -> list[InputError]:
    """Rows whose timestamp does not parse, requests with no time, statuses that are no number."""
    checks = [
        ("t_text IS NOT NULL AND ts IS NULL", "t_text", ts_name, "unparseable timestamp",
         "an ISO 8601 timestamp"),
        ("t_text IS NULL AND parsed", "t_text", ts_name, "missing timestamp on a parsed request", "a timestamp"),
        ("parsed AND status IS NULL AND trim(status_text) <> '-'", "status_text", status_name,
         "unparseable status", "an HTTP status code"),
    ]
    errors = []
    for where, cell, column, message, expected in checks:
        sql = f"SELECT rn, {cell} FROM req WHERE {where} ORDER BY rn LIMIT {MAX_ERRORS}"
        for rn, value in con.execute(sql).fetchall():
            errors.append(InputError(path, f"{message} {shown(value)}" if value is not None else message,
                                     row=int(rn), column=column, expected=expected))
    return errors[:MAX_ERRORS]


# --- classification and counting --------------------------------------------------------------

def classify_lines(con, health_path, path_filter: str | None = None) -> None:
    """View ``classed``: each line's time (recovered for unparseable lines) and its one class.

    With a ``path_filter``, a 2xx / 3xx request whose path it does not match is ``other_paths``:
    served, but not one of the requests the unit cost counts.
    """
    health = f"regexp_matches(coalesce(user_agent, ''), {quote_text(HEALTH_AGENT)})"
    if health_path:
        health = f"({health} OR {path_sql(str(health_path))})"
    counted = f"WHEN NOT {path_sql(path_filter)} THEN 'other_paths' " if path_filter else ""
    con.execute(f"""CREATE TEMP VIEW classed AS SELECT rn,
        CASE WHEN parsed THEN ts ELSE coalesce(ts, stamp_ts) END AS ts,
        CASE WHEN NOT parsed THEN 'unparseable' WHEN {health} THEN 'health_checks'
             WHEN status NOT BETWEEN 200 AND 399 OR status IS NULL THEN 'failed'
             {counted}ELSE 'successful' END AS class
        FROM req""")


def path_sql(option: str) -> str:
    """SQL: the path matches a path option (exact path, the query string ignored, or ``re:<regex>``
    searched in the whole path and query)."""
    if option.startswith("re:"):
        return f"regexp_matches(coalesce(path, ''), {quote_text(option[3:])})"
    return f"split_part(coalesce(path, ''), '?', 1) = {quote_text(option)}"


def window_sql(ctx) -> tuple[str, str]:
    """The window's start and end as SQL text literals."""
    return quote_text(utc_text(ctx.start)), quote_text(utc_text(ctx.end))


def count_intervals(con, ctx, step: int) -> tuple[pd.DataFrame, tuple[datetime | None, datetime | None]]:
    """Per-interval counts of each class in the window (plus undated unparseable lines), and coverage."""
    start, end = window_sql(ctx)
    step_us = step * 1_000_000
    interval = (f"CAST(make_timestamp(epoch_us(CAST({start} AS TIMESTAMPTZ)) + (epoch_us(ts) - "
                f"epoch_us(CAST({start} AS TIMESTAMPTZ))) // {step_us} * {step_us}) AS TIMESTAMPTZ)")
    kept = (f"SELECT * FROM classed WHERE ts IS NULL OR (ts >= CAST({start} AS TIMESTAMPTZ) "
            f"AND ts < CAST({end} AS TIMESTAMPTZ))")
    counts = ", ".join(f"count(*) FILTER (WHERE class = '{c}') AS {c}" for c in CLASSES)
    sql = (f"SELECT CASE WHEN ts IS NULL THEN NULL ELSE {interval} END AS ts, count(*) AS lines, {counts} "
           f"FROM ({kept}) GROUP BY 1 ORDER BY 1 NULLS LAST")
    detail = con.sql(sql).df()
    detail["ts"] = pd.to_datetime(detail["ts"], utc=True).astype("datetime64[ns, UTC]")
    for column in DETAIL_COLUMNS[2:]:
        detail[column] = detail[column].astype("int64")
    first, last = con.execute(f"SELECT min(ts), max(ts) FROM ({kept}) WHERE class <> 'unparseable'").fetchall()[0]
    return detail, (_utc(first), _utc(last))


#: the paths outside the path filter table ``other_paths`` keeps, most frequent first
OTHER_PATHS = 10


def outside_paths(con, ctx) -> pd.DataFrame:
    """Table ``other_paths``: the paths (query string cut) of the window's 2xx / 3xx requests the
    ``path_filter`` does not match, with their lines, most frequent first (the first ``OTHER_PATHS``):
    what a filter matching nothing is told of (audit/fit_sources.py)."""
    start, end = window_sql(ctx)
    return con.sql(f"""SELECT split_part(coalesce(r.path, ''), '?', 1) AS path, count(*) AS lines
        FROM classed c JOIN req r USING (rn)
        WHERE c.class = 'other_paths' AND c.ts >= CAST({start} AS TIMESTAMPTZ) AND c.ts < CAST({end} AS TIMESTAMPTZ)
        GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT {OTHER_PATHS}""").df().astype({"path": "str", "lines": "int64"})


def filter_failures(con, ctx, path_filter: str) -> pd.DataFrame:
    """Table ``filter_failed``: the statuses of the window's failed requests the ``path_filter``
    matches, with their lines, most frequent first: a filter whose every match failed matches
    requests, none of them successful (audit/fit_sources.py)."""
    start, end = window_sql(ctx)
    return con.sql(f"""SELECT coalesce(CAST(r.status AS VARCHAR), '-') AS status, count(*) AS lines
        FROM classed c JOIN req r USING (rn)
        WHERE c.class = 'failed' AND {path_sql(path_filter)}
          AND c.ts >= CAST({start} AS TIMESTAMPTZ) AND c.ts < CAST({end} AS TIMESTAMPTZ)
        GROUP BY 1 ORDER BY 2 DESC, 1""").df().astype({"status": "str", "lines": "int64"})


def traffic_table(detail: pd.DataFrame) -> pd.DataFrame:
    """``ServiceTraffic`` rows of the dated intervals: successful requests; tokens not measured
    (NaN: a request log counts none)."""
    dated = detail[detail["ts"].notna()]
    return pd.DataFrame({
        "ts": dated["ts"].astype("datetime64[ns, UTC]"),
        "model_name": pd.Series("", index=dated.index, dtype="str"),
        "namespace": pd.Series("", index=dated.index, dtype="str"),
        "pod": dated["pod"].astype("str"),
        "requests": dated["successful"].astype("float64"),
        "prompt_tokens": float("nan"),
        "generated_tokens": float("nan"),
    }).reset_index(drop=True)


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(timezone.utc)
