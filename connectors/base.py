"""Base class of every connector: the base owns the read loop, subclasses fill in hooks."""
from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Mapping, final

import pandas as pd

from connectors.bounds import FILE, check_source_path, shown
from connectors.errors import InputError, RetriableSourceError, with_article
from schemas.secrets import mask_url, url_credentials


@dataclass(frozen=True)
class ReadContext:
    """What every connector needs to know of the case."""

    start: datetime
    end: datetime
    currency: str
    step_seconds: int | None = None


@dataclass(frozen=True)
class SourceSpec:
    """One source named in a case."""

    name: str
    kind: str
    format: str
    path: Path | None
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """How messages and outputs name the source: its path, or its uri / table / url, masked
        (no user information, no secret query value: schemas.secrets.mask_url)."""
        if self.path is not None:
            return mask_url(self.path)
        for key in ("uri", "table", "url"):
            if self.options.get(key):
                return mask_url(self.options[key])
        return self.name

    def __repr__(self) -> str:
        """Every field, with urls and paths masked (a case's options may name a url with a secret)."""
        options = {k: mask_url(v) if isinstance(v, str) else v for k, v in self.options.items()}
        path = None if self.path is None else mask_url(self.path)
        return (f"SourceSpec(name={self.name!r}, kind={self.kind!r}, format={self.format!r}, "
                f"path={path!r}, options={options!r})")


#: the options that hold a url or uri: none may carry credentials (see url_credential_problems)
URL_OPTIONS = ("url", "uri", "endpoint_url", "api_endpoint", "output_location")
AWS_CHAIN = ("costaudit takes AWS credentials from the AWS credential chain (AWS_ACCESS_KEY_ID and "
             "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, a profile, SSO or a role)")
INSTEAD = {
    "url": ("put them in environment variables and name those with username_env and password_env "
            "(basic auth) or token_env (a bearer token)"),
    "api_endpoint": ("costaudit takes Google credentials from Application Default Credentials "
                     "(GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`)"),
    "uri": AWS_CHAIN, "endpoint_url": AWS_CHAIN, "output_location": AWS_CHAIN,
}


def url_credential_problems(options: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(option, message) for every url option that carries credentials; the message shows the url
    masked and says where credentials come from instead."""
    problems = []
    for key in URL_OPTIONS:
        value = options.get(key)
        what = url_credentials(value) if isinstance(value, str) else None
        if what:
            problems.append((key, f"credentials may not be written into a url: {mask_url(value)} "
                                  f"carries {what}; {INSTEAD[key]}"))
    return problems


@dataclass(frozen=True)
class SourceFrame:
    """What a connector returns: named tables plus provenance.

    ``parsed`` is what the connector parsed the tables from, when a later stage reads it again
    (a profiles connector's trace columns, which the audit's kernel evidence analyses): kept so
    that no file is parsed twice in a run. None for every other source.
    """

    spec: SourceSpec
    tables: Mapping[str, pd.DataFrame]
    rows: int
    covered: tuple[datetime | None, datetime | None]
    sha256: str
    parsed: Any = field(default=None, repr=False, compare=False)
    #: the first and last moment the source holds, inside the window or not, where its reader knows
    #: them (an OpenMetrics file: its samples' timestamps); (None, None) where it does not
    extent: tuple[datetime | None, datetime | None] = (None, None)
    #: the format of the data read, where the connector reads another format's data where it lives
    #: (a FOCUS table through ``athena`` or ``gcp_billing``): the audit names its lines in its words
    read_as: str | None = None

    @property
    def data_format(self) -> str:
        """The format whose words name this source's lines: ``read_as``, else the source's format."""
        return self.read_as or self.spec.format


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Connector:
    """Subclasses implement fetch() and check(); read() is final."""

    format_name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    schemas: ClassVar[Mapping[str, Any]] = {}
    retries: ClassVar[int] = 3
    backoff_seconds: ClassVar[float] = 0.5
    #: what a local source may be: "file", "folder" or "file or folder" (connectors.bounds)
    accepts: ClassVar[str] = FILE
    #: set by fetch() where a later stage reads what it parsed (see SourceFrame.parsed)
    parsed: Any = None
    #: set by fetch() where the reader knows where the source's data lies (see SourceFrame.extent)
    extent: tuple[datetime | None, datetime | None] = (None, None)

    def __init__(self, spec: SourceSpec, ctx: ReadContext):
        self.spec = spec
        self.ctx = ctx
        self._local: Path | None = None

    @property
    def path(self) -> Path:
        """The local file or folder read: the case's path, or the cached copy of a remote uri."""
        if self._local is not None:
            return self._local
        return self.spec.path if self.spec.path is not None else Path(self.spec.where)

    def locate(self) -> Path | None:
        """Where the data lies locally; a ``uri`` (s3://…) is downloaded into the cache first.

        Returns None for sources that are queried in place (a BigQuery table, a Prometheus url).
        """
        uri = self.spec.options.get("uri")
        if uri:
            from connectors.objectstore import materialise  # boto3 only when a case uses it
            return materialise(str(uri), self.spec.options)
        return self.spec.path

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Return (tables, rows read, (covered start, covered end))."""
        raise NotImplementedError

    def check(self) -> list[InputError]:
        """Return every problem with the source, raising none."""
        try:
            self.read()
        except InputError as exc:
            return [exc]
        except Exception as exc:  # an InputErrors bundle or a source fault
            errors = getattr(exc, "errors", None)
            if errors:
                return list(errors)
            return [InputError(self.path, str(exc))]
        return []

    @final
    def read(self) -> SourceFrame:
        """Fetch with retries on transient faults, validate each table, record provenance."""
        refused = url_credential_problems(self.spec.options)
        if refused:  # before any request: the url is never used
            raise InputError(f"source {self.spec.name!r}", refused[0][1], column=refused[0][0])
        local = self._locate_with_retries()
        if local is not None:
            self._local = local
            check_source_path(local, self.accepts, expected=f"{with_article(self.format_name)} {self.accepts}")
            if local.is_file() and local.stat().st_size == 0:
                raise InputError(local, "file is empty", expected=f"{with_article(self.format_name)} file")
        tables, rows, covered = self._fetch_with_retries()
        for name, schema in self.schemas.items():
            if name in tables:
                tables[name] = validate(schema, tables[name], self._local or self.spec.where, name)
        return SourceFrame(self.spec, tables, rows, covered, self.fingerprint(), self.parsed, self.extent,
                           getattr(self, "read_as", None))

    def fingerprint(self) -> str:
        """sha256 of what was read: the file, or every file of a folder (sorted by name)."""
        path = self.path
        if path.is_file():
            return file_sha256(path)
        if path.is_dir():
            digest = hashlib.sha256()
            for item in sorted(p for p in path.rglob("*") if p.is_file()):
                digest.update(str(item.relative_to(path)).encode() + b"\0" + file_sha256(item).encode())
            return digest.hexdigest()
        return ""

    def _locate_with_retries(self) -> Path | None:
        return self._with_retries(self.locate)

    def _fetch_with_retries(self):
        return self._with_retries(self.fetch)

    def _with_retries(self, step):
        """Call ``step``; a RetriableSourceError is retried with exponential backoff."""
        return with_retries(step, self.retries, self.backoff_seconds)


def with_retries(step, retries: int, backoff_seconds: float, on_retry=None):
    """Call ``step``; a RetriableSourceError is retried up to ``retries`` times with exponential backoff
    from ``backoff_seconds`` (``on_retry`` hears each wait first). Connectors' reads and the split run in
    the bill's engine (audit/split_remote.py) retry alike."""
    delay = backoff_seconds
    for attempt in range(retries + 1):
        try:
            return step()
        except RetriableSourceError:
            if attempt == retries:
                raise
            if on_retry is not None:
                on_retry(delay)
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def validate(schema, frame: pd.DataFrame, path: Path, table: str) -> pd.DataFrame:
    """Validate ``frame`` lazily; each failing check of a column becomes one InputError, naming how
    many rows fail it, the first one's value and where it is: its file row where the table keeps
    one (``row``), else the labels that identify it (node, pod, GPU, time …), since a table a reader
    built (GPU requests summed per pod, say) has no row of the file."""
    import pandera.errors as pa_errors

    from connectors.errors import InputErrors

    try:
        return schema.validate(frame, lazy=True)
    except pa_errors.SchemaErrors as exc:
        cases = exc.failure_cases
        errors = []
        for (column, check), group in cases.groupby(["column", "check"], sort=False, dropna=False):
            first = group.iloc[0]
            index = first.get("index")
            row, where = _located(frame, index)
            count = f" ({len(group):,} rows)" if len(group) > 1 else ""
            errors.append(InputError(path, f"table {table}{where}: value {shown(_plain(first['failure_case']))} fails "
                                           f"{check}{count}", row=row, column=str(column),
                                     expected=_expected(str(check))))
            if len(errors) >= 20:
                break
        raise InputErrors(errors) from None


#: the columns that say which sample a row of a reader's own table is
LABELS = ("node", "namespace", "pod", "container", "gpu", "service", "name", "ts")


def _located(frame: pd.DataFrame, index) -> tuple[int | None, str]:
    """(file row, or None; the identifying labels) of the row at ``index`` of ``frame``."""
    try:
        at = frame.loc[index]
    except (KeyError, TypeError, ValueError):
        return None, ""
    if isinstance(at, pd.DataFrame):
        at = at.iloc[0]
    if "row" in frame.columns:  # the line's own row of its file
        try:
            return int(at["row"]), ""
        except (TypeError, ValueError):
            return None, ""
    labels = [f"{c} {shown(_plain(at[c]))}" for c in LABELS
              if c in frame.columns and str(at[c]) not in ("", "nan", "None", "NaT")]
    return None, f" ({', '.join(labels)})" if labels else ""


def _plain(value):
    """A cell as its reader would write it: a time in UTC, a NumPy number as a Python one."""
    if isinstance(value, pd.Timestamp):
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value


def _expected(check: str) -> str:
    """A pandera check in words: ``greater_than_or_equal_to(0)`` → "a value ≥ 0"."""
    words = {"greater_than_or_equal_to": "≥", "greater_than": ">", "less_than_or_equal_to": "≤", "less_than": "<"}
    found = re.fullmatch(r"(\w+)\((.*)\)", check)
    if found and found.group(1) in words:
        return f"a value {words[found.group(1)]} {found.group(2)}"
    if found and found.group(1) == "in_range":
        low, _, high = found.group(2).partition(",")
        return f"a value from {low.strip()} to {high.strip()}"
    if check == "not_nullable":
        return "a value (not null)"
    return f"a value that passes {check}"


def _row_number(index) -> int | None:
    try:
        return int(index) + 1
    except (TypeError, ValueError):
        return None
