"""What every command shares: exit codes, the one-line error, the exit code of each kind of error.

Every error costaudit raises on purpose derives from :class:`schemas.errors.CostauditError` and
names its kind in ``slug``. A command decorated with :func:`reports_errors` turns one into
``costaudit: error: <message>`` on stderr and the exit code of its kind (:data:`EXIT_CODES`);
anything else is a bug and keeps its traceback. Every message printed is redacted
(``schemas.secrets.redact``: no url credential, token, key or password), and every log handler
that prints gets the redacting filter before the command runs.
"""
from __future__ import annotations

import functools
from typing import Callable, NoReturn, TypeVar

import typer

from schemas.errors import CostauditError
from schemas.secrets import guard_logging, redact

OK, INPUT_ERROR, NOT_RECONCILED = 0, 1, 2

#: error kind (``slug``) → exit code. Every kind is 1 ("input or configuration error, nothing
#: written"); 2 is kept for an audit that ran and does not reconcile, which is not an error.
EXIT_CODES: dict[str, int] = {
    "usage": INPUT_ERROR,             # a bad command-line value
    "input": INPUT_ERROR,             # a file, row or column is wrong
    "config": INPUT_ERROR,            # the case file is wrong
    "source": INPUT_ERROR,            # a source could not be read
    "source-retriable": INPUT_ERROR,  # ... still failing after the retries
    "source-fatal": INPUT_ERROR,      # ... and retrying cannot help (access denied, missing)
    "audit": INPUT_ERROR,             # an invariant of the audit broke (nothing written)
    "report": INPUT_ERROR,            # a report could not be written (nothing written)
}

F = TypeVar("F", bound=Callable)


def fail(message: str, code: int = INPUT_ERROR) -> NoReturn:
    """Print ``costaudit: error: MESSAGE`` (redacted) on stderr and exit with ``code`` (1 by default)."""
    typer.echo(f"costaudit: error: {redact(message)}", err=True)
    raise typer.Exit(code)


def exit_code_of(error: CostauditError) -> int:
    """The exit code of an error's kind."""
    return EXIT_CODES.get(error.slug, INPUT_ERROR)


def reports_errors(command: F) -> F:
    """A command whose CostauditErrors become one line on stderr and the exit code of their kind."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        guard_logging()
        try:
            return command(*args, **kwargs)
        except CostauditError as exc:
            fail(str(exc), exit_code_of(exc))
    return run  # type: ignore[return-value]


def ms_or_na(value) -> str:
    """Milliseconds, right-aligned, or n/a."""
    return "   n/a" if value is None else f"{value:7.1f} ms"
