"""The costaudit command line: one short function per subcommand; errors become one message and an exit code.

Exit codes: 0 the audit reconciles (or nothing could be measured, and the verdict says so);
1 an input or configuration error (nothing written); 2 it ran but does not reconcile (report written).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional, Tuple

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Audit GPU inference spend: model compute, serving path, platform overhead.")

OK, INPUT_ERROR, NOT_RECONCILED = 0, 1, 2
FORMATS = "pdf,html,json,xlsx,csv"


def _fail(message: str) -> None:
    typer.echo(f"costaudit: error: {message}", err=True)
    raise typer.Exit(INPUT_ERROR)


def _known_errors():
    from audit.errors import AuditError
    from connectors.errors import SourceError
    return (AuditError, SourceError)


@app.command()
def run(case: Path = typer.Argument(..., help="case folder (with case.toml) or the case file"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default out/<case name>)"),
        format: str = typer.Option(FORMATS, "--format", help="comma-separated: " + FORMATS)) -> None:
    """Run the audit on a case and write the report."""
    from audit.case import load_case
    from audit.pipeline import run_audit
    from audit.render import render
    from audit.result import to_dict

    formats = [f.strip() for f in format.split(",") if f.strip()]
    try:
        loaded = load_case(case)
        result = _with_progress(loaded, run_audit)
        document = to_dict(result)
        target = out or Path("out") / loaded.name
        written = render(document, target, formats)
    except _known_errors() as exc:
        _fail(str(exc))
    except (ValueError, ImportError) as exc:
        _fail(str(exc))
    _summary(document, written)
    verdict = document["reconciliation"]["verdict"]
    raise typer.Exit(NOT_RECONCILED if verdict == "does_not_reconcile" else OK)


def _with_progress(case, run_audit):
    from rich.progress import Progress, SpinnerColumn, TextColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), transient=True,
                  console=_console()) as bar:
        task = bar.add_task("reading sources", total=None)

        def step(spec):
            bar.update(task, description=f"reading {spec.kind} source {spec.name} ({spec.format})")
        return run_audit(case, progress=step)


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


@app.command()
def validate(case: Path = typer.Argument(..., help="case folder or case file")) -> None:
    """Check the case file and every source; print every problem at once."""
    from audit.case import load_case
    from audit.collect import check
    from audit.normalise import billing_lines

    try:
        loaded = load_case(case)
    except _known_errors() as exc:
        _fail(str(exc))
    problems = check(loaded, case_checks=billing_lines)
    for problem in problems:
        typer.echo(f"costaudit: error: {problem}", err=True)
    if problems:
        raise typer.Exit(INPUT_ERROR)
    typer.echo(f"{loaded.path}: case and {len(loaded.sources)} source(s) are valid")


@app.command()
def init(folder: Path = typer.Argument(..., help="folder to create the case in")) -> None:
    """Write a commented case.toml template into FOLDER."""
    from importlib import resources

    target = folder / "case.toml"
    if target.exists():
        _fail(f"{target} already exists; not overwriting it")
    folder.mkdir(parents=True, exist_ok=True)
    target.write_text(resources.files("audit").joinpath("data/case_template.toml").read_text())
    typer.echo(f"wrote {target}: fill in the window, sources and services, then `costaudit validate {folder}`")


@app.command()
def billing(sources: List[str] = typer.Argument(..., help="billing files, folders or s3:// uris"),
            format: Optional[str] = typer.Option(None, "--format", help="focus, cur, azure, gcp_billing (default: sniffed)"),
            window: Optional[Tuple[str, str]] = typer.Option(None, "--window", help="START END (UTC), end exclusive"),
            currency: str = typer.Option("USD", "--currency", help="currency of files without one"),
            as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Totals by charge category, service and currency, and GPU-hours by instance type."""
    import json as jsonlib

    from audit.billing_cli import parse_day, render_text, summarise

    span = None
    if window and window[0]:
        try:
            span = (parse_day(window[0]), parse_day(window[1]))
        except ValueError:
            _fail(f"--window {window[0]} {window[1]}: expected two ISO dates, START END")
    try:
        summary = summarise(sources, format, span, currency.upper())
    except _known_errors() as exc:
        _fail(str(exc))
    except ValueError as exc:
        _fail(str(exc))
    typer.echo(jsonlib.dumps(summary, indent=2) if as_json else render_text(summary))


@app.command()
def trace(traces: List[Path] = typer.Argument(..., help="Kineto .json/.json.gz or Nsight .sqlite; several = ranks"),
          as_json: bool = typer.Option(False, "--json", help="print JSON"),
          price: Optional[str] = typer.Option(None, "--price-per-gpu-hour", help="price one GPU-hour to cost findings"),
          folded: Optional[Path] = typer.Option(None, "--folded", help="write folded stacks (flamegraph.pl / speedscope)")) -> None:
    """Where the GPU time went, which call paths spent it, and what was wasted."""
    from decimal import Decimal, InvalidOperation

    from audit.trace_cli import trace_command
    try:
        value = Decimal(price) if price is not None else None
    except InvalidOperation:
        _fail(f"--price-per-gpu-hour {price!r} is not a number")
    raise typer.Exit(trace_command(traces, as_json, value, folded=folded))


@app.command()
def connectors() -> None:
    """List the registered source formats."""
    from connectors.registry import CONNECTORS
    for name, target in sorted(CONNECTORS.items()):
        typer.echo(f"{name:<14} {target}")


def _register_collector() -> None:
    """`collect` and `compare` live in audit/collect_cli.py (torch loads only when they run)."""
    from audit.collect_cli import collect_command, compare_command
    app.command("collect")(collect_command)
    app.command("compare")(compare_command)


_register_collector()


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point of the `costaudit` script."""
    app(args=argv if argv is not None else sys.argv[1:], prog_name="costaudit")
