"""Reporters: format name → "module:Class", resolved only when a format is asked for.

A reporter is a class with ``report_type`` (its format name), ``output`` (the name it is written
under in the output folder), ``takes`` ("audit" for the audit.json dict, "model" for the
:class:`~audit.reporters.view.ReportModel`), ``is_dir`` (True when ``output`` is a folder of
files) and one entry point ``report(model_or_audit, path)`` that writes to ``path`` and nothing
else. File handling (temporary names, ``os.replace``, clean-up) lives in :mod:`audit.render`.
Heavy libraries (weasyprint, openpyxl) are imported inside ``report()``.
"""

from __future__ import annotations

from importlib import import_module

from audit.errors import ReportError

REPORTERS: dict[str, str] = {
    "json": "audit.reporters.json:JsonReporter",
    "html": "audit.reporters.html:HtmlReporter",
    "pdf": "audit.reporters.pdf:PdfReporter",
    "xlsx": "audit.reporters.xlsx:XlsxReporter",
    "csv": "audit.reporters.csv:CsvReporter",
}


def resolve(name: str) -> type:
    """The reporter class for a format name; ReportError naming the valid ones on a miss."""
    try:
        target = REPORTERS[name]
    except (KeyError, TypeError):
        raise ReportError(
            f"unknown report format {name!r}; valid formats: {', '.join(REPORTERS)}") from None
    module, _, cls = target.partition(":")
    return getattr(import_module(module), cls)
