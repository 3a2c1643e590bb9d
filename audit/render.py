"""Stage 6: audit.json dict → the requested reports, written atomically.

Every output is first written under a temporary name inside ``out_dir``; only when every
requested reporter has succeeded are they moved into place with ``os.replace``. If any reporter
raises, the temporaries are removed and no new file is left behind (STYLE habit 9).

Errors: an unknown format, and a report that could not be written (an OSError: a full disk, a
folder not writable), are :class:`~audit.errors.ReportError`; so is a missing optional library
(the PDF reporter raises it itself). Anything else a reporter raises is a bug and passes unchanged.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from audit.errors import ReportError
from audit.reporters import REPORTERS, resolve
from audit.reporters.view import ReportModel, build_model

FORMATS = tuple(REPORTERS)
_FILE_MODE = 0o644


def render(audit: dict, out_dir: Path, formats: Sequence[str]) -> list[Path]:
    """Write the reports named by ``formats`` into ``out_dir``; return the paths written."""
    if isinstance(formats, str):
        formats = [formats]
    wanted = list(dict.fromkeys(formats))
    unknown = [f for f in wanted if f not in REPORTERS]
    if unknown:
        raise ReportError(f"unknown report format(s) {', '.join(map(repr, unknown))}; "
                          f"valid formats: {', '.join(FORMATS)}")
    reporters = [resolve(f)() for f in wanted]
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{out_dir}: the reports were not written: {exc}") from exc
    staged: list[tuple[Path, Path, bool]] = []  # (temporary, final, is_dir)
    try:
        model: ReportModel | None = None
        for reporter in reporters:
            tmp = _temporary(out_dir, reporter.output, reporter.is_dir)
            staged.append((tmp, out_dir / reporter.output, reporter.is_dir))
            if reporter.takes == "model":
                model = model or build_model(audit)
                reporter.report(model, tmp)
            else:
                reporter.report(audit, tmp)
        return _commit(staged)
    except BaseException as exc:
        _discard(staged)
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()
        if isinstance(exc, OSError):
            raise ReportError(f"{out_dir}: the reports were not written: {exc}") from exc
        raise


def _temporary(out_dir: Path, name: str, is_dir: bool) -> Path:
    prefix = f".{Path(name).name}."
    if is_dir:
        return Path(tempfile.mkdtemp(dir=out_dir, prefix=prefix, suffix=".tmp"))
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=prefix, suffix=".tmp")
    os.close(fd)
    return Path(tmp)


def _commit(staged: list[tuple[Path, Path, bool]]) -> list[Path]:
    written: list[Path] = []
    for tmp, final, is_dir in staged:
        if not is_dir:
            os.chmod(tmp, _FILE_MODE)
            os.replace(tmp, final)
            written.append(final)
            continue
        final.mkdir(exist_ok=True)
        for item in sorted(tmp.iterdir()):
            os.chmod(item, _FILE_MODE)
            os.replace(item, final / item.name)
            written.append(final / item.name)
        tmp.rmdir()
    return written


def _discard(staged: list[tuple[Path, Path, bool]]) -> None:
    for tmp, _final, is_dir in staged:
        if is_dir:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
