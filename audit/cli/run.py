"""`costaudit run` and `validate`: the audit of a case and its checks (`init` is audit/cli/init.py).

Exit codes: 0 the audit reconciles (or nothing could be measured, and the verdict says so);
1 an input or configuration error (nothing written); 2 it ran but does not reconcile (report written);
130 / 143 interrupted by SIGINT / SIGTERM (the output folder as it was, no temporary left).

The reports replace the whole output folder at once (audit/render.py). Without ``--out`` it is
``out/<case name as a safe folder name>``; an ``--out`` that is the case folder or holds it, a file,
or a folder holding other files is refused before the audit runs.
"""
from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Optional

import typer

from audit.cli.common import INPUT_ERROR, NOT_RECONCILED, OK, fail, reports_errors
from schemas.errors import UsageError

FORMATS = "pdf,html,json,xlsx,csv"
#: runs of characters a folder name under out/ does not take (anything but letters, digits, _ . -)
_UNSAFE = re.compile(r"[^\w.-]+")
MAX_FOLDER_CHARS, MAX_FOLDER_BYTES = 64, 200


@reports_errors
def run(case: Path = typer.Argument(..., help="case folder (with case.toml) or the case file"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default out/<case name>)"),
        format: str = typer.Option(FORMATS, "--format", help="comma-separated: " + FORMATS),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr (warnings and errors still)"),
        workers: str = typer.Option("1", "--workers", help="read the ranks of a profile's rank set (a folder of "
                                    "traces) in N worker processes (auto: one per rank, at most the CPUs)"),
        scheduler: Optional[str] = typer.Option(None, "--scheduler", help="read the ranks of a profile's rank set "
                                                "on the Dask cluster at tcp://host:port")
        ) -> None:
    """Run the audit on a case and write the report; each step is named on stderr as it starts
    (a spinner on a terminal, one line per step otherwise) unless --quiet."""
    from audit.case import load_case
    from connectors.profiles.workers import fanout_settings

    formats = [f.strip() for f in format.split(",") if f.strip()]
    loaded = load_case(case)
    target = out if out is not None else Path("out") / folder_name(loaded.name)
    _check_out(target, loaded.folder, out is None)
    with fanout_settings(workers, scheduler):
        document, written = _run_interruptibly(loaded, target, formats, quiet)
    for misfit in document.get("fit") or []:
        typer.echo(f"costaudit: warning: {misfit['message']}", err=True)
    _summary(document, target, written)
    verdict = document["reconciliation"]["verdict"]
    raise typer.Exit(NOT_RECONCILED if verdict == "does_not_reconcile" else OK)


def folder_name(name: object) -> str:
    """A case name as one safe folder name under out/: letters, digits, ``_``, ``.`` and ``-``
    (any other run of characters becomes one ``-``), no leading or trailing ``.`` or ``-``, at most
    64 characters and 200 bytes; ``case`` when nothing is left (``..``, ``/``, an empty name)."""
    slug = _UNSAFE.sub("-", unicodedata.normalize("NFC", str(name))).strip(".-")[:MAX_FOLDER_CHARS]
    while len(slug.encode("utf-8")) > MAX_FOLDER_BYTES:
        slug = slug[:-1]
    return slug.rstrip(".-") or "case"


def _check_out(target: Path, case_folder: Path, default: bool) -> None:
    """Refuse, before the audit runs, an output folder the reports cannot replace: the case folder
    or one holding it, a file, a folder holding files no report writes."""
    from audit.render import check_target

    real, folder = Path(os.path.realpath(target)), Path(os.path.realpath(case_folder))
    if real == folder or real in folder.parents:
        what = "is the case folder" if real == folder else f"holds the case folder {case_folder}"
        given = "the output folder" if default else "--out"
        raise UsageError(f"{given} {target} {what}; the reports replace the whole output folder, "
                         "so give --out a folder of its own (e.g. --out out/report)")
    check_target(target)


def _run_interruptibly(case, target: Path, formats: list[str], quiet: bool = False):
    """:func:`_with_progress`, where SIGINT and SIGTERM end the run with one line and exit 130 / 143."""
    from audit.cli.interrupts import Interrupted, interruptible

    before = _identity(target)
    try:
        with interruptible():
            return _with_progress(case, target, formats, quiet)
    except Interrupted as stop:
        state = (f"the reports had been written to {target}" if _identity(target) != before
                 else f"{target} is as it was, nothing written")
        fail(f"interrupted by {stop.name}; {state}", stop.exit_code)


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a folder, None when there is none: a swapped-in output folder is a new one."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _with_progress(case, target: Path, formats: list[str], quiet: bool = False):
    """Run the case (audit and reports), naming each step on stderr as it starts: a spinner with the
    time taken so far on a terminal, one ``costaudit: <step>`` line per step otherwise, nothing
    with ``quiet``; a DuckDB spill to disk is named as it happens (audit/cli/spill.py)."""
    from audit.cli.spill import watch
    from audit.pipeline import run_case

    if quiet:
        return run_case(case, target, formats)
    console = _console()
    if not console.is_terminal:
        def line(step) -> None:
            words = step_words(step)
            if words:
                typer.echo(f"costaudit: {words}", err=True)
        with watch(line):
            return run_case(case, target, formats, progress=line)

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True,
                  console=console) as bar:
        task = bar.add_task("reading sources", total=None)

        def step(spec) -> None:
            words = step_words(spec)
            if words:
                bar.update(task, description=words)
        with watch(lambda words: bar.console.print(f"costaudit: {words}", markup=False, highlight=False)):
            return run_case(case, target, formats, progress=step)


def step_words(step) -> str | None:
    """What a progress call names: a source spec as it is read, a step's words, None (the audit is
    done: the reports follow, each named as it starts) as nothing."""
    if step is None:
        return None
    if isinstance(step, str):
        return step
    return f"reading {step.kind} source {step.name} ({step.format})"


def _console():
    from rich.console import Console
    return Console(stderr=True)


def _summary(document: dict, target: Path, written) -> None:
    b, r = document["buckets"], document["reconciliation"]
    cur = document["currency"]
    typer.echo(f"total in scope ({document['cost_basis']}): {document['total']} {cur}")
    for name in ("model_compute", "serving_path", "platform_overhead", "unattributed"):
        share = b[name]["share"] if b[name]["share"] is not None else "no spend in scope"  # a total of 0
        typer.echo(f"  {name:<18} {b[name]['amount']:>14} {cur}  ({share})")
    gap = r["gap"] if r["gap"] is not None else "n/a"
    why = f": {r['reason']}" if r["verdict"] == "not_measured" and r.get("reason") else ""
    typer.echo(f"reconciliation: {r['verdict']} (gap {gap}, tolerance {r['tolerance']}){why}")
    typer.echo(f"reports in {target}")
    for path in written:
        typer.echo(f"wrote {path}")


@reports_errors
def validate(case: Path = typer.Argument(..., help="case folder or case file")) -> None:
    """Check the case file and every source, and whether the case fits the data; print every problem
    at once. A piece of the case that matches nothing is a warning (exit 0); a service that matches
    nothing at all, or a scope that keeps no charge, an error (exit 1), as ``run`` refuses it."""
    from audit.case import load_case
    from audit.collect import check

    loaded = load_case(case)
    fitted: list = []
    problems = check(loaded, case_checks=lambda c, collected: fitted.append(_fit(c, collected)))
    found = fitted[0] if fitted else None
    for misfit in found.warnings if found else ():
        typer.echo(f"costaudit: warning: {misfit.message}", err=True)
    if found is not None and found.errors:
        from audit.pipeline import misfit_errors
        problems.extend(misfit_errors(loaded, found).errors)
    for problem in problems:
        typer.echo(f"costaudit: error: {problem}", err=True)
    if problems:
        raise typer.Exit(INPUT_ERROR)
    warned = f", with {len(found.warnings)} warning(s)" if found and found.warnings else ""
    typer.echo(f"{loaded.path}: case and {len(loaded.sources)} source(s) are valid{warned}")


def _fit(case, collected):
    """The checks that need every source together: currency and lines in the window
    (``billing_lines`` raises them), then whether the case fits the data (audit/fit.py)."""
    from audit.pipeline import fit_of

    return fit_of(case, collected)
