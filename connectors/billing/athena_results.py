"""An Athena query's result rows → DuckDB table ``athena_rows`` (``v0`` … as text, in result order),
with the digest of the result as Athena's CSV.

Athena keeps every result as a CSV file, at the execution's ``ResultConfiguration.OutputLocation``
(``<output location>/<query execution id>.csv``), and pages the same rows through GetQueryResults,
1,000 a request. A month's aggregate of a fleet's bill is hundreds of thousands of rows: paged, that
is a request per thousand rows, one after the other, and every value a Python string. The source's
``results`` option chooses:

* ``"auto"`` (default): the first page is asked for (its column names; a result of one page is
  read from it alone). A result of more pages is read from its CSV file: streamed into a temporary
  file under the cache, loaded by DuckDB's CSV reader (every value as text; a quoted empty value
  is ``''``, an empty field NULL, as Athena writes them) and deleted. Where the file cannot be read
  (access denied on the output location, or no such file) the pages are read instead, and the
  source's note says so.
* ``"s3"``: the file, always; a file that cannot be read is an error naming it.
* ``"pages"``: GetQueryResults, always (credentials that may not read the output location).

Pages land in DuckDB a page at a time: the memory a read holds is a page's, never the result's.

**Digest** (the source's fingerprint): sha256 of the table's name, the query and the result as
Athena's CSV text (a header line, then a line per row; each value between double quotes with a
quote doubled, NULL an empty field, each line ending in a newline): the file's own bytes, or the
pages written out that way.
"""
from __future__ import annotations

import csv
import hashlib
import logging
import shutil
import tempfile
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from connectors.errors import FatalSourceError, InputError
from connectors.objectstore import make_client, parse_uri
from connectors.objectstore_cache import CHUNK_BYTES, cache_root
from connectors.objectstore_faults import translated

log = logging.getLogger("connectors.billing.athena")

PAGE_SIZE = 1000           # rows per GetQueryResults page (Athena's maximum)
MODES = ("auto", "s3", "pages")
TABLE = "athena_rows"
# S3 answers after which "auto" reads the pages instead of the file
UNREADABLE = ("403", "AccessDenied", "404", "NoSuchKey", "NotFound", "NoSuchBucket")


@dataclass(frozen=True)
class Landed:
    """What :func:`land` put into table ``athena_rows``."""

    names: list[str]
    rows: int
    digest: str
    how: str       # for the source's note: where the rows were read from


def land(con, athena, execution: dict, mode: str, source: str, query: str, s3_options: dict) -> Landed:
    """The finished query's rows into table ``athena_rows`` of ``con``; ``source`` names the table
    (database.table) in messages and the digest, ``s3_options`` make the S3 client (region,
    profile, endpoint_url)."""
    qid = execution["QueryExecutionId"]
    digest = hashlib.sha256(f"{source}\0{query}\0".encode())
    first = athena.get_query_results(QueryExecutionId=qid, MaxResults=PAGE_SIZE)
    names, data = page_rows(first, None)
    uri = ((execution.get("ResultConfiguration") or {}).get("OutputLocation")) or ""
    if mode == "s3" or (mode == "auto" and first.get("NextToken")):
        try:
            rows = land_file(con, uri, names, digest, s3_options, qid)
            return Landed(names, rows, digest.hexdigest(), f"read from its result file {uri}")
        except ResultFileUnreadable as exc:
            if mode == "s3":
                raise InputError(source, f"the result file of Athena query {qid} could not be read: {exc}",
                                 column="results", expected="s3:GetObject on the output location, or "
                                 'results = "pages"') from None
            log.info("athena: query %s: its result file could not be read (%s); paging GetQueryResults", qid, exc)
            digest = hashlib.sha256(f"{source}\0{query}\0".encode())
            how = f"paged through GetQueryResults (its result file could not be read: {exc})"
    else:
        how = "paged through GetQueryResults"
    rows = land_pages(con, athena, qid, first, names, data, digest)
    return Landed(names, rows, digest.hexdigest(), how)


def page_rows(page: dict, names: list[str] | None) -> tuple[list[str], list[list[str | None]]]:
    """Column names (from the first page) and the data rows of one GetQueryResults page."""
    result = page.get("ResultSet") or {}
    data = [[cell.get("VarCharValue") for cell in row.get("Data") or []] for row in result.get("Rows") or []]
    if names is None:
        info = (result.get("ResultSetMetadata") or {}).get("ColumnInfo") or []
        names = [c.get("Name") or c.get("Label") for c in info]
        if data and (not names or data[0] == names):  # the header row of a SELECT
            names = names or [str(v) for v in data[0]]
            data = data[1:]
    return names, data


def read_results(client, qid: str) -> tuple[list[str], list[list[str | None]]]:
    """Column names and rows of a finished query, paged through GetQueryResults (NextToken), as
    Python lists: for the small answers (a table's extent, the split's per-part sums)."""
    names: list[str] | None = None
    rows: list[list[str | None]] = []
    token = None
    while True:
        kwargs = {"QueryExecutionId": qid, "MaxResults": PAGE_SIZE}
        if token:
            kwargs["NextToken"] = token
        page = client.get_query_results(**kwargs)
        names, data = page_rows(page, names)
        rows.extend(data)
        token = page.get("NextToken")
        if not token:
            return names or [], rows


# --- pages -------------------------------------------------------------------------------------

def create_table(con, width: int) -> None:
    """Table ``athena_rows``: ``width`` text columns ``v0`` …"""
    columns = ", ".join(f"v{i} VARCHAR" for i in range(width)) or "v0 VARCHAR"
    con.execute(f"CREATE OR REPLACE TABLE {TABLE} ({columns})")


def land_pages(con, client, qid: str, first: dict, names: list[str], data: list, digest) -> int:
    """The first page's rows, then each next page's, appended to ``athena_rows`` a page at a time."""
    width = len(names)
    create_table(con, width)
    digest.update(csv_line(names))
    page, landed = first, 0
    while True:
        append(con, data, width, landed, qid, digest)
        landed += len(data)
        token = page.get("NextToken")
        if not token:
            return landed
        page = client.get_query_results(QueryExecutionId=qid, MaxResults=PAGE_SIZE, NextToken=token)
        _, data = page_rows(page, names)


def append(con, data: list[list[str | None]], width: int, before: int, qid: str, digest) -> None:
    """One page's rows into ``athena_rows`` (each checked for its width) and the digest."""
    bad = next((i for i, row in enumerate(data) if len(row) != width), None)
    if bad is not None:
        raise FatalSourceError(f"result row {before + bad + 1} of Athena query {qid} has "
                               f"{len(data[bad])} values, not {width}")
    for row in data:
        digest.update(csv_line(row))
    if not data or not width:
        return
    page = pa.table({f"v{i}": pa.array([row[i] for row in data], pa.string()) for i in range(width)})
    con.register("_athena_page", page)
    try:
        con.execute(f"INSERT INTO {TABLE} SELECT * FROM _athena_page")
    finally:
        con.unregister("_athena_page")


def csv_line(values: Sequence[str | None]) -> bytes:
    """A row as Athena's CSV writes it: each value quoted (a quote doubled), NULL an empty field."""
    cells = ("" if v is None else '"' + v.replace('"', '""') + '"' for v in values)
    return (",".join(cells) + "\n").encode("utf-8")


# --- the result file ---------------------------------------------------------------------------

class ResultFileUnreadable(Exception):
    """The result file could not be read (access denied, no such file): the pages still can be."""


def land_file(con, uri: str, names: list[str], digest, s3_options: dict, qid: str) -> int:
    """The result file at ``uri`` into ``athena_rows``: downloaded in chunks into a temporary
    folder under the cache (hashed as it arrives), its header checked against ``names``, read by
    DuckDB's CSV reader, deleted."""
    if not uri.startswith("s3://"):
        raise ResultFileUnreadable(f"the execution names no s3:// result file ({uri or 'none'})")
    location = parse_uri(uri)
    client = make_client(uri, s3_options)
    root = cache_root().parent / "athena-results"
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=root, prefix=f"{qid[:40]}-"))
    try:
        path = folder / "result.csv"
        download(client, location, path, digest)
        check_header(path, names, uri)
        return read_csv(con, path, len(names), uri)
    finally:
        client.close()
        shutil.rmtree(folder, ignore_errors=True)


def download(client, location, path: Path, digest) -> None:
    """GET the object in chunks into ``path``, each chunk into the digest too. Access denied or no
    such file: :class:`ResultFileUnreadable`; other faults as the object store's."""
    from botocore.exceptions import ClientError

    try:
        with translated(location, "read", location.key, passthrough=UNREADABLE):
            reply = client.get_object(Bucket=location.bucket, Key=location.key)
            with open(path, "wb") as out, closing(reply["Body"]) as body:
                for chunk in body.iter_chunks(CHUNK_BYTES):
                    out.write(chunk)
                    digest.update(chunk)
    except ClientError as exc:
        code = str((exc.response.get("Error") or {}).get("Code") or "")
        raise ResultFileUnreadable(f"S3 answered {code} to GetObject on {location.uri}") from None


def check_header(path: Path, names: list[str], uri: str) -> None:
    """The file's first line names the query's columns, in order."""
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        header = next(csv.reader(handle), [])
    if [h.lower() for h in header] != [n.lower() for n in names]:
        raise FatalSourceError(f"{uri}: the result file's header {header[:5]}… does not name the "
                               f"query's columns {names[:5]}…")


def read_csv(con, path: Path, width: int, uri: str) -> int:
    """The file's rows (after its header) as ``athena_rows``, in file order; their number."""
    import duckdb

    columns = "{" + ", ".join(f"'v{i}': 'VARCHAR'" for i in range(width)) + "}"
    try:
        con.execute(f"CREATE OR REPLACE TABLE {TABLE} AS SELECT * FROM read_csv(?, header = true, "
                    f"columns = {columns}, delim = ',', quote = '\"', escape = '\"', "
                    "allow_quoted_nulls = false, strict_mode = true)", [str(path)])
    except duckdb.Error as exc:
        raise FatalSourceError(f"{uri}: not Athena's CSV of the query's {width} columns: "
                               f"{str(exc).splitlines()[0]}") from None
    return int(con.execute(f"SELECT count(*) FROM {TABLE}").fetchall()[0][0])
