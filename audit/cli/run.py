"""`costaudit run`, `validate` and `init`: the audit of a case, its checks, and a case template.

Exit codes: 0 the audit reconciles (or nothing could be measured, and the verdict says so);
1 an input or configuration error (nothing written); 2 it ran but does not reconcile (report written).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from audit.cli.common import INPUT_ERROR, NOT_RECONCILED, OK, reports_errors
from schemas.errors import UsageError

FORMATS = "pdf,html,json,xlsx,csv"


@reports_errors
def run(case: Path = typer.Argument(..., help="case folder (with case.toml) or the case file"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default out/<case name>)"),
        format: str = typer.Option(FORMATS, "--format", help="comma-separated: " + FORMATS)) -> None:
    """Run the audit on a case and write the report."""
    from audit.case import load_case

    formats = [f.strip() for f in format.split(",") if f.strip()]
    loaded = load_case(case)
    target = out or Path("out") / loaded.name
    document, written = _with_progress(loaded, target, formats)
    _summary(document, written)
    verdict = document["reconciliation"]["verdict"]
    raise typer.Exit(NOT_RECONCILED if verdict == "does_not_reconcile" else OK)


def _with_progress(case, target: Path, formats: list[str]):
    """Run the case (audit and reports) under a spinner that names the step in progress."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from audit.pipeline import run_case

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), transient=True,
                  console=_console()) as bar:
        task = bar.add_task("reading sources", total=None)

        def step(spec):
            text = ("writing the reports" if spec is None
                    else f"reading {spec.kind} source {spec.name} ({spec.format})")
            bar.update(task, description=text)
        return run_case(case, target, formats, progress=step)


def _console():
    from rich.console import Console
    return Console(stderr=True)


def _summary(document: dict, written) -> None:
    b, r = document["buckets"], document["reconciliation"]
    cur = document["currency"]
    typer.echo(f"total in scope ({document['cost_basis']}): {document['total']} {cur}")
    for name in ("model_compute", "serving_path", "platform_overhead", "unattributed"):
        typer.echo(f"  {name:<18} {b[name]['amount']:>14} {cur}  ({b[name]['share']})")
    gap = r["gap"] if r["gap"] is not None else "n/a"
    typer.echo(f"reconciliation: {r['verdict']} (gap {gap}, tolerance {r['tolerance']})")
    for path in written:
        typer.echo(f"wrote {path}")


@reports_errors
def validate(case: Path = typer.Argument(..., help="case folder or case file")) -> None:
    """Check the case file and every source; print every problem at once."""
    from audit.case import load_case
    from audit.collect import check
    from audit.normalise import billing_lines

    loaded = load_case(case)
    problems = check(loaded, case_checks=billing_lines)
    for problem in problems:
        typer.echo(f"costaudit: error: {problem}", err=True)
    if problems:
        raise typer.Exit(INPUT_ERROR)
    typer.echo(f"{loaded.path}: case and {len(loaded.sources)} source(s) are valid")


@reports_errors
def init(folder: Path = typer.Argument(..., help="folder to create the case in")) -> None:
    """Write a commented case.toml template into FOLDER."""
    from importlib import resources

    target = folder / "case.toml"
    if target.exists():
        raise UsageError(f"{target} already exists; not overwriting it")
    folder.mkdir(parents=True, exist_ok=True)
    target.write_text(resources.files("audit").joinpath("data/case_template.toml").read_text())
    typer.echo(f"wrote {target}: fill in the window, sources and services, then `costaudit validate {folder}`")
