"""PdfReporter: the HTML report printed by weasyprint, which may load nothing but templates/.

weasyprint's default fetcher reads any local file and the network. :func:`make_fetcher` returns
one that serves only regular files inside ``templates/`` (after resolving symlinks and ``..``)
and ``data:image/svg+xml`` URIs (the charts); every other URL (http, https, ftp, file outside
templates/, other data: types) raises :class:`RefusedURL`, and weasyprint skips the resource.
weasyprint is imported inside the functions that need it (STYLE habit 12).

The PDF's printing time is bounded whatever the case size: each table that grows with the data
shows its top :data:`PDF_ROWS` rows (the largest amounts first where the table has one, else the
table's own order) and the line "25 of 5,000 rows shown; all rows in tables.xlsx (sheet Classes)
and report.html" under it. The HTML page keeps every row; it is the same template, rendered
without the limit (:func:`audit.reporters.html.render_html`).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import mimetypes
import os
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit
from urllib.request import url2pathname

from audit.errors import ReportError
from audit.reporters.html import TEMPLATES, charts_of, render_html
from audit.reporters.view import ReportModel

DATA_TYPES = ("image/svg+xml",)
#: rows of each long table the PDF prints; the rest are in tables.xlsx and report.html
PDF_ROWS = 25


class RefusedURL(ValueError):
    """The PDF renderer asked for a resource outside what the report may load."""


def resolve_url(url: str, root: Path = TEMPLATES) -> tuple[bytes, str]:
    """(body, mime type) of an allowed URL; RefusedURL for anything else."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "data":
        header, comma, payload = url[5:].partition(",")
        params = [p.strip().lower() for p in header.split(";")]
        if not comma or params[0] not in DATA_TYPES:
            raise RefusedURL(f"refused data: URL of type {params[0] or 'unknown'!r}")
        try:
            body = base64.b64decode(payload, validate=True) if "base64" in params[1:] \
                else unquote_to_bytes(payload)
        except ValueError as error:
            raise RefusedURL(f"refused malformed data: URL ({error})") from None
        return body, params[0]
    if scheme != "file" or parts.netloc not in ("", "localhost"):
        raise RefusedURL(f"refused {url[:80]!r}: only files inside {root} may be loaded")
    base = Path(root).resolve()
    path = Path(url2pathname(parts.path)).resolve()
    if not path.is_relative_to(base) or not path.is_file():
        raise RefusedURL(f"refused {url[:80]!r}: not a file inside {base}")
    return path.read_bytes(), mimetypes.guess_type(path.name)[0] or "application/octet-stream"


@functools.cache
def fetcher_class() -> type:
    """A weasyprint URLFetcher subclass whose fetch() goes through :func:`resolve_url`."""
    from weasyprint.urls import URLFetcher, URLFetcherResponse

    class TemplateFetcher(URLFetcher):
        def __init__(self, root: Path = TEMPLATES, **kwargs):
            super().__init__(allowed_protocols=("file", "data"), allow_redirects=False, **kwargs)
            self.root = Path(root)

        def fetch(self, url, headers=None):
            body, mime = resolve_url(url, self.root)
            return URLFetcherResponse(url, body, {"Content-Type": mime})

    return TemplateFetcher


def make_fetcher(root: Path = TEMPLATES):
    return fetcher_class()(root)


def write_pdf(html: str, path: Path, fetcher=None) -> None:
    """Print ``html`` to ``path``; relative URLs resolve inside templates/."""
    try:
        import weasyprint
    except ImportError as error:
        raise ReportError(f"the pdf report needs weasyprint: pip install 'costaudit[pdf]' ({error})") \
            from error

    fetcher = fetcher if fetcher is not None else make_fetcher()
    document = weasyprint.HTML(string=html, base_url=TEMPLATES.as_uri() + "/", url_fetcher=fetcher)
    with fixed_font_dates():
        document.write_pdf(str(path))


@contextmanager
def fixed_font_dates():
    """The same report prints to the same bytes: the font subsets weasyprint embeds carry their
    creation time (fontTools reads SOURCE_DATE_EPOCH, the reproducible-builds convention), so it
    is pinned while printing unless the user set it; the document has no date of its own."""
    if "SOURCE_DATE_EPOCH" in os.environ:
        yield
        return
    os.environ["SOURCE_DATE_EPOCH"] = "0"
    try:
        yield
    finally:
        os.environ.pop("SOURCE_DATE_EPOCH", None)


class PdfReporter:
    report_type = "pdf"
    output = "report.pdf"
    takes = "model"
    is_dir = False

    def report(self, model: ReportModel, path: Path) -> None:
        write_pdf(pdf_html(model), path)


def pdf_html(model: ReportModel, limit: int = PDF_ROWS) -> str:
    """The HTML the PDF prints: each long table cut to its top ``limit`` rows, with the line
    naming how many there are and where all of them are (templates/_partials.html.j2 cut_note)."""
    return render_html(top_rows(model, limit), charts=charts_of(model), limit=limit)


def top_rows(model: ReportModel, limit: int) -> ReportModel:
    """``model`` with each table that has an amount and more than ``limit`` rows put in order of
    that amount, largest first (ties in the table's order), so that the PDF prints the largest;
    a table at or under the limit keeps its order (the PDF of a small case is unchanged)."""
    audit = model.audit
    coverage = audit.get("coverage") or {}
    buckets = [dataclasses.replace(b, parts=_largest(b.parts, ((audit.get("buckets") or {}).get(b.key) or {})
                                                     .get("parts") or [], "amount", limit)) for b in model.buckets]
    return dataclasses.replace(
        model, buckets=buckets,
        classes=_largest(model.classes, audit.get("classes") or [], "net", limit),
        gpu_split=_largest(model.gpu_split, audit.get("gpu_split") or [], "paid_gpu_hours", limit),
        coverage={**model.coverage, "by_node": _largest(model.coverage.get("by_node") or [],
                                                        coverage.get("by_node") or [], "paid_gpu_hours", limit)},
        findings=_largest(model.findings, audit.get("findings") or [], "cost", limit))


def _largest(rows: list, raw: list[dict], key: str, limit: int) -> list:
    """``rows`` (the view of ``raw``, row for row) by |raw[key]|, largest first, when over ``limit``."""
    if len(rows) <= limit or len(rows) != len(raw):
        return rows
    order = sorted(range(len(rows)), key=lambda i: -_magnitude(raw[i].get(key)))
    return [rows[i] for i in order]


def _magnitude(value: Any) -> Decimal:
    try:
        return abs(Decimal(str(value))) if value is not None else Decimal(0)
    except InvalidOperation:
        return Decimal(0)
