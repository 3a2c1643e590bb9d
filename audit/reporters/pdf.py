"""PdfReporter: the HTML report printed by weasyprint, which may load nothing but templates/.

weasyprint's default fetcher reads any local file and the network. :func:`make_fetcher` returns
one that serves only regular files inside ``templates/`` (after resolving symlinks and ``..``)
and ``data:image/svg+xml`` URIs (the charts); every other URL (http, https, ftp, file outside
templates/, other data: types) raises :class:`RefusedURL`, and weasyprint skips the resource.
weasyprint is imported inside the functions that need it (STYLE habit 12), through
:mod:`audit.reporters.weasy` (which spares the 54 processes its library lookup starts).

The PDF's printing time is bounded whatever the case size: it prints the model as
:func:`audit.reporters.print_view.for_print` cuts it (each table that grows with the data to its
top ``PDF_ROWS`` rows, with the line "8 of 5,000 rows shown; all rows in tables.xlsx (sheet
Classes) and report.html"; long data strings and list-valued inputs shortened, saying so). The HTML
page keeps every row; it is the same template, rendered without the limit
(:func:`audit.reporters.html.render_html`).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import mimetypes
import os
import re
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlsplit
from urllib.request import url2pathname

from audit.errors import ReportError
from audit.reporters.html import TEMPLATES, charts_of, render_html
from audit.reporters.print_view import PDF_ROWS, for_print
from audit.reporters.view import ReportModel
from audit.reporters.weasy import weasyprint

DATA_TYPES = ("image/svg+xml",)


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
    weasyprint()  # the package through audit.reporters.weasy, before any of its modules
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


def _document(html: str, fetcher=None):
    """weasyprint's document of ``html`` (:func:`breakable`); relative URLs resolve inside templates/."""
    try:
        module = weasyprint()
    except ImportError as error:
        raise ReportError(f"the pdf report needs weasyprint: pip install 'costaudit[pdf]' ({error})") \
            from error

    fetcher = fetcher if fetcher is not None else make_fetcher()
    return module.HTML(string=breakable(html), base_url=TEMPLATES.as_uri() + "/", url_fetcher=fetcher)


def write_pdf(html: str, path: Path, fetcher=None) -> None:
    """Print ``html`` to ``path``; relative URLs resolve inside templates/."""
    document = _document(html, fetcher)
    with fixed_font_dates():
        document.write_pdf(str(path))


def page_one_pages(html: str) -> int:
    """The pages the executive summary (the report's first section) prints on, laid out alone: one
    page of layout, a small part of the whole PDF's."""
    end = html.index("</section>") + len("</section>")
    return len(_document(html[:end] + "\n</body>\n</html>").render().pages)


def fitted_html(model: ReportModel, limit: int = PDF_ROWS) -> str:
    """The HTML the PDF prints, with page 1 on one page: where the executive summary would run onto
    page 2 (a long bridge with a note per step, a long account id in the invoice box), it prints
    tight (``summary tight`` in templates/report.css: smaller type, each note cut to its first
    lines with "…", the full text in report.html)."""
    html = pdf_html(model, limit)
    return html if page_one_pages(html) <= 1 else pdf_html(model, limit, tight=True)


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
        write_pdf(fitted_html(model), path)


def pdf_html(model: ReportModel, limit: int = PDF_ROWS, tight: bool = False) -> str:
    """The HTML the PDF prints: the model cut as :func:`audit.reporters.print_view.for_print` says
    (each long table to its top ``limit`` rows, with the line naming how many there are and where
    all of them are: templates/_partials.html.j2 cut_note); ``tight``: page 1 set tight
    (:func:`fitted_html`)."""
    printed = for_print(model, limit)
    if tight:
        printed = dataclasses.replace(printed, print_limits={**printed.print_limits, "tight": 1})
    return render_html(printed, charts=charts_of(model), limit=limit)


#: a run of text longer than this many characters, with no space, gets a zero-width space after
#: every this many (:func:`breakable`)
RUN = 24
_TEXT = re.compile(r"(<style\b.*?</style>|<script\b.*?</script>|<[^>]*>)|([^<]+)", re.S | re.I)
_LONG = re.compile(r"[^\s\u200b]{%d,}" % (RUN + 1))
_UNIT = re.compile(r"&#?\w+;|.", re.S)


def breakable(html: str) -> str:
    """``html`` with a zero-width space (a break opportunity that prints nothing) after every
    :data:`RUN` characters of each longer run of text without a space, outside tags, styles and
    scripts (an entity counts as one character and is never cut): a pod name, a commitment id or a
    path of any length can then wrap inside its column with ``overflow-wrap: break-word``
    (templates/report.css, print), which weasyprint lays out in about half the time ``anywhere``
    takes."""
    def text(found: re.Match) -> str:
        return found.group(1) if found.group(1) is not None else _LONG.sub(_broken, found.group(2))
    return _TEXT.sub(text, html)


def _broken(run: re.Match) -> str:
    """A long run of text (:func:`breakable`) with a zero-width space after every :data:`RUN` units."""
    units = _UNIT.findall(run.group(0))
    return "\u200b".join("".join(units[i:i + RUN]) for i in range(0, len(units), RUN))
