"""The costaudit command line: one module per command, each a thin layer over an API function.

``run`` / ``validate`` (audit/cli/run.py), ``whatif`` (whatif.py), ``init`` (init.py), ``billing``
(billing.py), ``trace`` (trace.py), ``collect`` (collect.py), ``compare`` (compare.py), ``review``
(review.py), ``connectors`` (formats.py). Errors
become one line on stderr and an exit code (audit/cli/common.py). Nothing heavy is imported at
start-up: pandas, DuckDB, torch and weasyprint load inside the commands that need them.

Exit codes: 0 the audit reconciles (or nothing could be measured, and the verdict says so);
1 an input or configuration error (nothing written); 2 it ran but does not reconcile (report written).
"""
from __future__ import annotations

import gc
import sys
from typing import List, Optional

import typer

from audit.cli import billing, collect, compare, formats, init, review, run, trace, whatif
from audit.cli.common import INPUT_ERROR, NOT_RECONCILED, OK  # noqa: F401  (the exit codes, for callers)

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Audit GPU inference spend: model compute, serving path, platform overhead.")

app.command()(run.run)
app.command()(run.validate)
app.command()(whatif.whatif)
app.command()(init.init)
app.command()(billing.billing)
app.command()(trace.trace)
app.command()(formats.connectors)
app.command("collect")(collect.collect_command)
app.command("compare")(compare.compare_command)
app.command("review")(review.review)


#: the cyclic garbage collector's thresholds while a command runs (CPython's are 700, 10, 10). An
#: audit holds millions of long-lived objects (its tables' values) while it parses and drops millions
#: more (query answers, rows): at 700 the collector walks the young ones every 700 allocations and
#: the whole heap again and again. Measured on the fleet benchmark's 10 M-line month with
#: Prometheus: 92 s at the defaults, 83 s at these, as with the collector off; the same peak RSS.
GC_THRESHOLDS = (100_000, 50, 100)


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point of the `costaudit` script."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        app(args=argv if argv is not None else sys.argv[1:], prog_name="costaudit")
    finally:
        gc.set_threshold(*before)
