"""HtmlReporter: the report as one HTML page (also the input of the PDF).

jinja2 with autoescape on for every template and a loader limited to ``templates/``: service
names, reasons and kernel names are untrusted strings and are always escaped; every value the
templates print first passes the environment's ``finalize``, :func:`audit.reporters.formatting.shown`,
which writes control and bidi characters as escapes (a kernel named ``@SUM(1)\u202eevil`` cannot
print reversed). The stylesheet
``templates/report.css`` is inlined and the charts are ``data:`` URIs, so the page is one file.

The charts are drawn here (:mod:`audit.reporters.charts`, plain SVG), not by the view model, which
holds data only. They are drawn once per model: the PDF reporter renders the same page from the
same model in the same run, and finds them in :func:`charts_of`'s cache.
"""

from __future__ import annotations

import functools
import weakref
from importlib import resources
from pathlib import Path

from audit.reporters.formatting import shown
from audit.reporters.view import ReportModel


def _templates() -> Path:
    """templates/ at the top of the repository, installed as the package ``audit.templates``."""
    try:
        return Path(str(resources.files("audit.templates")))
    except ModuleNotFoundError:  # a source tree run without installing
        return Path(__file__).resolve().parents[2] / "templates"


TEMPLATES = _templates()
TEMPLATE = "report.html.j2"


#: the environment's settings; they change the compiled code, so they key the compiled templates too
OPTIONS = {"autoescape": True, "trim_blocks": True, "lstrip_blocks": True}


@functools.cache
def environment():
    """The one jinja2 environment of a process: a template is compiled once a process, so the PDF,
    rendered after the HTML page in a run, reuses it; and once a machine, where
    :func:`audit.reporters.compiled.template_cache` has a folder for the compiled code (the report's
    four templates take 0.2-0.3 s to compile, a tenth of the PDF step)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    from audit.reporters.compiled import template_cache

    return Environment(loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined, finalize=shown,
                       bytecode_cache=template_cache({**OPTIONS, "finalize": shown.__qualname__}), **OPTIONS)


#: id(model) → its charts, dropped when the model is (a ReportModel is not hashable: it holds a dict)
_DRAWN: dict[int, dict[str, str | None]] = {}


def charts_of(model: ReportModel) -> dict[str, str | None]:
    """Chart name → SVG data URI for ``model``'s audit, drawn on the first call for this model."""
    key = id(model)
    if key not in _DRAWN:
        from audit.reporters.charts import build_charts
        from audit.reporters.months_view import months_chart

        _DRAWN[key] = {**build_charts(model.audit), "months": months_chart(model.audit)}
        weakref.finalize(model, _DRAWN.pop, key, None)
    return _DRAWN[key]


def render_html(model: ReportModel, charts: dict[str, str | None] | None = None,
                limit: int | None = None) -> str:
    """The report's HTML; ``charts`` (name → data URI) is drawn from the model when not given.
    ``limit`` (the PDF's choice) shows the first ``limit`` rows of each long table and a line
    saying how many there are and where all of them are; None (the HTML page) shows every row."""
    from audit.reporters.xlsx import SHEETS

    if charts is None:
        charts = charts_of(model)
    return environment().get_template(TEMPLATE).render(m=model, charts=charts, limit=limit, sheets=SHEETS)


class HtmlReporter:
    report_type = "html"
    output = "report.html"
    takes = "model"
    is_dir = False

    def report(self, model: ReportModel, path: Path) -> None:
        Path(path).write_text(render_html(model), encoding="utf-8")
