"""`costaudit init DIR [--from SOURCE…] [--window START END]`: a case template, or a case fitted to data.

Without ``--from``, DIR gets the commented template (audit/data/case_template.toml). With it, the
sources named (billing exports, telemetry files, traces, Prometheus urls) are sniffed and read,
and DIR/case.toml proposes the case that fits them (:mod:`audit.discover`): the window, currency,
``[scope]``, ``[services]``, ``[nodes]`` and the sources, each proposal commented with its
evidence. ``--from`` may instead name one existing case (its folder or case.toml): its sources are
read and the fitted case is written to DIR/case.toml, or beside the case as
``case.fitted.toml`` when DIR is the case's own folder. An existing file is never overwritten.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import typer

from audit.cli.common import reports_errors
from connectors.bounds import resolved
from connectors.errors import InputError
from schemas.errors import UsageError

FITTED = "case.fitted.toml"


@reports_errors
def init(folder: Path = typer.Argument(..., help="folder to create the case in"),
         more: Optional[List[str]] = typer.Argument(None, help="further --from sources", show_default=False),
         sources: Optional[List[str]] = typer.Option(
             None, "--from", help="a source to fit the case to (repeatable): billing, telemetry, trace, "
                                  "Prometheus url, or one existing case"),
         window: Optional[Tuple[str, str]] = typer.Option(
             None, "--window", help="START END (UTC, end exclusive); default: the days the billing covers")) -> None:
    """Write a commented case.toml into FOLDER: the template, or one fitted to --from sources.

    `costaudit init mycase --from bill.csv metrics.om trace.json`: every path after --from is a source.
    """
    if more and not sources:
        raise UsageError(f"unexpected argument {more[0]!r}: sources follow --from "
                         f"(costaudit init {folder} --from SOURCE…)")
    sources = list(sources or []) + list(more or [])
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} exists and is not a folder: give the folder to write case.toml into")
    if not sources:
        if window and window[0]:
            raise UsageError("--window needs --from (the template's window is yours to write)")
        _template(folder)
        return
    _fitted(folder, sources, _window(window))


def _template(folder: Path) -> None:
    from importlib import resources

    target = folder / "case.toml"
    if target.exists():
        raise UsageError(f"{target} already exists; not overwriting it")
    folder.mkdir(parents=True, exist_ok=True)
    target.write_text(resources.files("audit").joinpath("data/case_template.toml").read_text())
    typer.echo(f"wrote {target}: fill in the window, sources and services, then `costaudit validate {folder}`")


def _fitted(folder: Path, sources: list[str], window) -> None:
    from audit.discover import discover

    target = _target(folder, sources)
    name = resolved(folder).name or "case"
    found = discover(sources, folder, name, window)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with open(target, "x", encoding="utf-8") as handle:  # never over a file written meanwhile
            handle.write(found.text)
    except FileExistsError:
        raise UsageError(f"{target} already exists; not overwriting it") from None
    typer.echo(f"wrote {target}")
    for line in found.sources:
        typer.echo(f"  source   {line}")
    for service in found.services:
        typer.echo(f"  service  {service}")
    for warning in found.warnings:
        typer.echo(f"costaudit: warning: {warning}", err=True)
    check = target if target.name != "case.toml" else folder
    typer.echo(f"check the proposals in {target}, then `costaudit validate {check}` and `costaudit run {check}`")


def _target(folder: Path, sources: list[str]) -> Path:
    """DIR/case.toml, or DIR/case.fitted.toml when --from is the case already in DIR; never a file
    that exists."""
    target = folder / "case.toml"
    if target.exists():
        own = len(sources) == 1 and _same_case(Path(sources[0]), target)
        if not own:
            raise UsageError(f"{target} already exists; not overwriting it")
        target = folder / FITTED
        if target.exists():
            raise UsageError(f"{target} already exists; not overwriting it")
    return target


def _same_case(given: Path, target: Path) -> bool:
    case_file = given / "case.toml" if given.is_dir() else given
    try:
        return resolved(case_file) == resolved(target)
    except (OSError, InputError):       # the sniffer names a loop among the sources
        return False


def _window(window):
    if not window or not window[0]:
        return None
    from audit.cli.billing import parse_day

    try:
        start, end = parse_day(window[0]), parse_day(window[1])
    except ValueError:
        raise UsageError(f"--window {window[0]} {window[1]}: expected two ISO dates, START END") from None
    if end <= start:
        raise UsageError(f"--window {window[0]} {window[1]}: the end must come after the start")
    return start, end
