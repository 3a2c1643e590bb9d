"""What every command shares: exit codes, the one-line error, the errors a command reports."""
from __future__ import annotations

from typing import NoReturn

import typer

OK, INPUT_ERROR, NOT_RECONCILED = 0, 1, 2


def fail(message: str) -> NoReturn:
    """Print ``costaudit: error: MESSAGE`` on stderr and exit 1."""
    typer.echo(f"costaudit: error: {message}", err=True)
    raise typer.Exit(INPUT_ERROR)


def known_errors() -> tuple[type[Exception], ...]:
    """The error types a command turns into one line and exit 1 (imported when needed)."""
    from audit.errors import AuditError
    from connectors.errors import SourceError
    return (AuditError, SourceError)


def ms_or_na(value) -> str:
    """Milliseconds, right-aligned, or n/a."""
    return "   n/a" if value is None else f"{value:7.1f} ms"
