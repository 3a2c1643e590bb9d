"""The review's reports (METHOD §10): a review.json document → review.json, review.html,
review.pdf and review.xlsx, written as one set that replaces ``out_dir`` at once with the audit
reports' own machinery (:mod:`audit.reporters.atomic`: staging folder, one-step swap, a folder
holding anything else refused).

The HTML is ``templates/review.html.j2`` over :class:`~audit.reporters.review_view.ReviewModel`,
autoescaped (service names, SKUs and reasons are untrusted); the PDF prints the same HTML with
weasyprint through the report's fetcher, which loads nothing outside ``templates/``
(:func:`audit.reporters.pdf.write_pdf`); the workbook is :mod:`audit.reporters.review_xlsx`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from audit.errors import ReportError
from audit.reporters import atomic
from audit.reporters.json import dumps
from audit.reporters.review_view import ReviewModel, build_review_model, evidence_words

#: format → the file it writes, in the order written
OUTPUTS = {"json": "review.json", "html": "review.html", "pdf": "review.pdf", "xlsx": "review.xlsx"}
FORMATS = tuple(OUTPUTS)
TEMPLATE = "review.html.j2"


def render_review(document: dict, out_dir: Path, formats: Sequence[str] = FORMATS,
                  progress: Callable[[str], None] | None = None) -> list[Path]:
    """Write the review reports named by ``formats`` as the whole content of ``out_dir``; the paths."""
    if isinstance(formats, str):
        formats = [f.strip() for f in formats.split(",") if f.strip()]
    wanted = list(dict.fromkeys(formats)) or list(FORMATS)
    unknown = [f for f in wanted if f not in OUTPUTS]
    if unknown:
        raise ReportError(f"unknown review format(s) {', '.join(map(repr, unknown))}; "
                          f"valid formats: {', '.join(FORMATS)}")

    def write(staging: Path) -> list[str]:
        cache: dict[str, object] = {}
        for name in wanted:
            if progress is not None:
                progress(f"writing {OUTPUTS[name]}")
            WRITERS[name](document, staging / OUTPUTS[name], cache)
        return [OUTPUTS[name] for name in wanted]

    return atomic.write_set(Path(out_dir), {name: False for name in OUTPUTS.values()}, write)


def check_review_target(out_dir: Path) -> Path:
    """The folder the review will replace; ReportError when it is a file or holds other files."""
    return atomic.check_target(Path(out_dir), {name: False for name in OUTPUTS.values()})


def review_html(document: dict, cache: dict | None = None) -> str:
    """The review's HTML page (one file: the stylesheets inlined, the chart a ``data:`` URI)."""
    cache = {} if cache is None else cache
    if "html" not in cache:
        from audit.reporters.html import environment
        from audit.reporters.review_chart import bridge_chart

        model: ReviewModel = build_review_model(document)
        head = model.headline
        chart = None
        if head is not None and head.comparable and head.bridge:
            chart = bridge_chart(head.bridge, model.currency, head.earlier.case, head.later.case)
        cache["html"] = environment().get_template(TEMPLATE).render(m=model, chart=chart,
                                                                    evidence_words=evidence_words)
    return str(cache["html"])


def _json(document: dict, path: Path, cache: dict) -> None:
    path.write_bytes(dumps(document).encode("utf-8"))


def _html(document: dict, path: Path, cache: dict) -> None:
    path.write_text(review_html(document, cache), encoding="utf-8")


def _pdf(document: dict, path: Path, cache: dict) -> None:
    from audit.reporters.pdf import write_pdf

    write_pdf(review_html(document, cache), path)


def _xlsx(document: dict, path: Path, cache: dict) -> None:
    from audit.reporters.review_xlsx import write_review_xlsx

    write_review_xlsx(document, path)


WRITERS: dict[str, Callable[[dict, Path, dict], None]] = {"json": _json, "html": _html, "pdf": _pdf, "xlsx": _xlsx}
