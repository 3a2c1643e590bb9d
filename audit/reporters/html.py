"""HtmlReporter: the report as one HTML page (also the input of the PDF).

jinja2 with autoescape on for every template and a loader limited to ``templates/``: service
names, reasons and kernel names are untrusted strings and are always escaped. The stylesheet
``templates/report.css`` is inlined and the charts are ``data:`` URIs, so the page is one file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from audit.reporters.view import ReportModel


def _templates() -> Path:
    """templates/ at the top of the repository, installed as the package ``audit.templates``."""
    try:
        return Path(str(resources.files("audit.templates")))
    except ModuleNotFoundError:  # a source tree run without installing
        return Path(__file__).resolve().parents[2] / "templates"


TEMPLATES = _templates()
TEMPLATE = "report.html.j2"


def environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    return Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True,
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_html(model: ReportModel, charts: dict[str, str | None] | None = None) -> str:
    """The report's HTML; ``charts`` (name → data URI) is drawn from the model when not given."""
    if charts is None:
        charts = model.charts
    return environment().get_template(TEMPLATE).render(m=model, charts=charts)


class HtmlReporter:
    report_type = "html"
    output = "report.html"
    takes = "model"
    is_dir = False

    def report(self, model: ReportModel, path: Path) -> None:
        Path(path).write_text(render_html(model), encoding="utf-8")
