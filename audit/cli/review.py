"""`costaudit review EARLIER [MORE…] LATER --out DIR`: audits over time (METHOD §10, docs/review.md).

A thin layer over :mod:`audit.review`: each input is an audit.json file or a case folder (audited
in memory first, nothing written for it); consecutive pairs are compared, the last pair is the
headline. The review set (review.json, review.html, review.pdf, review.xlsx) replaces DIR at once
(:func:`audit.reporters.review_render.render_review`, the audit reports' atomic machinery).

Exit codes: 0 the review was written (whether or not the audits could be bridged: the reason is in
it); 1 a bad input (a file that is not an audit.json, a figure that is not a number, a case error:
one line naming the file) or an output folder that cannot be replaced (nothing written); 130 / 143
interrupted (DIR as it was).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from audit.cli.common import fail, reports_errors
from schemas.errors import UsageError

FORMATS = "pdf,html,json,xlsx"
DEFAULT_OUT = Path("out") / "review"


@reports_errors
def review(audits: List[Path] = typer.Argument(..., help="two or more audits, oldest first: audit.json files "
                                                        "or case folders (audited in memory)"),
           out: Optional[Path] = typer.Option(None, "--out", help=f"output folder (default {DEFAULT_OUT})"),
           format: str = typer.Option(FORMATS, "--format", help="comma-separated: " + FORMATS),
           quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr (errors still)")) -> None:
    """Compare audits of the same scope over time: per service the cost change split into volume,
    price, efficiency and overhead (a bridge from the earlier total to the later), buckets and unit
    costs side by side, lines that appeared or vanished, and the realised saving of each option the
    later case shipped against its projection. Each step is named on stderr unless --quiet."""
    from audit.cli.interrupts import Interrupted, interruptible
    from audit.reporters.review_render import check_review_target, render_review
    from audit.review import load
    from audit.review import review as build
    from audit.review.load import check_exists

    if len(audits) < 2:
        raise UsageError(f"costaudit review needs two audits or more (got {len(audits)}): "
                         "EARLIER [MORE…] LATER, each an audit.json or a case folder")
    formats = [f.strip() for f in format.split(",") if f.strip()]
    target = out if out is not None else DEFAULT_OUT
    _check_out(target, audits)
    for path in audits:
        check_exists(path)
    check_review_target(target)
    say = (lambda words: None) if quiet else (lambda words: typer.echo(f"costaudit: {words}", err=True))
    try:
        with interruptible():
            loaded = []
            for path in audits:
                say(("auditing case " if path.is_dir() or path.suffix == ".toml" else "reading ") + str(path))
                loaded.append(load(path))
            say("comparing " + " → ".join(a.name for a in loaded))
            document = build(loaded)
            written = render_review(document, target, formats, progress=say)
    except Interrupted as stop:
        fail(f"interrupted by {stop.name}; {target} is as it was", stop.exit_code)
    summary(document)
    for path in written:
        typer.echo(f"wrote {path}")


def _check_out(target: Path, inputs: List[Path]) -> None:
    """Refuse an output folder that is an input, or holds one (the review replaces it whole)."""
    real = Path(os.path.realpath(target))
    for given in inputs:
        path = Path(os.path.realpath(given))
        if path == real or real in path.parents:
            raise UsageError(f"--out {target} holds the input {given}; the review replaces the whole folder, "
                             "so give --out a folder of its own (e.g. --out out/review)")


def summary(document: dict) -> None:
    """The headline pair in a few lines: totals, the bridge's steps (or why none), realised savings."""
    head = document["pairs"][-1]
    earlier, later = document["audits"][head["from"]], document["audits"][head["to"]]
    currency = later["currency"]
    typer.echo(f"review: {earlier['case']} {_grouped(earlier['total'])} {earlier['currency']} → "
               f"{later['case']} {_grouped(later['total'])} {currency}")
    if head["bridge"] is None:
        typer.echo("no bridge: " + "; ".join(head["reasons"]))
    else:
        for step in head["bridge"]["steps"]:
            if step["amount"] not in ("0.00", "-0.00"):
                typer.echo(f"  {step['label']:<40} {_grouped(step['amount']):>14} {currency}")
    for item in head["realised"]:
        shown = _grouped(item["realised"]) if item["realised"] is not None else "n/a"
        typer.echo(f"shipped {item['option']} ({item['service']}, {item['shipped']}): realised {shown} {currency} "
                   f"a month, {item['verdict']}" + (f" ({item['note']})" if item["note"] else ""))


def _grouped(amount) -> str:
    """A decimal string with thousands separators, its digits kept (the notes write amounts so);
    anything that is not a number as it is."""
    from decimal import Decimal, InvalidOperation

    try:
        return f"{Decimal(str(amount)):,}"
    except (InvalidOperation, ValueError):
        return str(amount)
