"""Stage 6: audit.json dict → the requested reports, written as one set that replaces ``out_dir`` at once.

The set is written into a temporary folder beside ``out_dir`` and swapped in only when every
requested reporter has succeeded; the machinery (staging, the one-step swap, the clean-up, the
signals held, the refusal of a folder holding files no reporter writes) is
:mod:`audit.reporters.atomic`, shared with the review's reports. The new set replaces the old one
whole: no file of a previous run is left beside new ones. If anything fails before the swap,
``out_dir`` is as it was (STYLE habit 9).

Errors: an unknown format, an ``out_dir`` that is a file or holds other files, and a report that
could not be written (an OSError: a full disk, a folder not writable) are
:class:`~audit.errors.ReportError`; so is a missing optional library (the PDF reporter raises it
itself). Anything else a reporter raises is a bug and passes unchanged (after the clean-up).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from audit.errors import ReportError
from audit.reporters import REPORTERS, atomic, resolve
from audit.reporters.atomic import exchange, signals_held
from audit.reporters.view import ReportModel, build_model

__all__ = ["FORMATS", "check_target", "exchange", "outputs", "render", "signals_held"]

FORMATS = tuple(REPORTERS)


def render(audit: dict, out_dir: Path, formats: Sequence[str],
           progress: Callable[[str], None] | None = None) -> list[Path]:
    """Write the reports named by ``formats`` as the whole content of ``out_dir``; return the paths
    written. ``progress`` is told of each report as it starts ("writing report.pdf")."""
    if isinstance(formats, str):
        formats = [formats]
    wanted = list(dict.fromkeys(formats))
    unknown = [f for f in wanted if f not in REPORTERS]
    if unknown:
        raise ReportError(f"unknown report format(s) {', '.join(map(repr, unknown))}; "
                          f"valid formats: {', '.join(FORMATS)}")
    reporters = [resolve(f)() for f in wanted]
    return atomic.write_set(Path(out_dir), outputs(),
                            lambda staging: _write(reporters, audit, staging, progress))


def outputs() -> dict[str, bool]:
    """Every name a reporter writes in the output folder → True for a folder of files."""
    classes: list[Any] = [resolve(name) for name in REPORTERS]
    return {cls.output: cls.is_dir for cls in classes}


def check_target(out_dir: Path) -> Path:
    """The folder the reports will replace (:func:`audit.reporters.atomic.check_target`)."""
    return atomic.check_target(out_dir, outputs())


def _write(reporters: list, audit: dict, staging: Path,
           progress: Callable[[str], None] | None = None) -> list[str]:
    """Every report into ``staging``; the names written (relative, in the reporters' order)."""
    model: ReportModel | None = None
    names: list[str] = []
    for reporter in reporters:
        if progress is not None:
            progress(f"writing {reporter.output}" + ("/" if reporter.is_dir else ""))
        path = staging / reporter.output
        if reporter.is_dir:
            os.mkdir(path, 0o777)
        if reporter.takes == "model":
            model = model or build_model(audit)
            reporter.report(model, path)
        else:
            reporter.report(audit, path)
        files = sorted(path.iterdir()) if reporter.is_dir else [path]
        names += [file.relative_to(staging).as_posix() for file in files]
    return names
