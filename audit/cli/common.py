"""What every command shares: exit codes, the one-line error, the exit code of each kind of error.

Every error costaudit raises on purpose derives from :class:`schemas.errors.CostauditError` and
names its kind in ``slug``. A command decorated with :func:`reports_errors` turns one into
``costaudit: error: <message>`` on stderr and the exit code of its kind (:data:`EXIT_CODES`);
SIGINT and SIGTERM into ``interrupted by SIGINT`` and 130 / 143 (audit/cli/interrupts.py: a
Ctrl-C inside a DuckDB query is DuckDB's RuntimeError, which gave a traceback);
running out of memory (DuckDB's limit or the process's) is one line too, naming the limit and
how to raise it; anything else is a bug and keeps its traceback. Every message printed is redacted
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
        from audit.cli.interrupts import Interrupted, interruptible

        guard_logging()
        try:
            with interruptible():
                return command(*args, **kwargs)
        except Interrupted as stop:  # commands that write (run, review, whatif) say more themselves
            fail(f"interrupted by {stop.name}", stop.exit_code)
        except CostauditError as exc:
            if _out_of_memory_inside(exc):  # a reader that took DuckDB's OOM for a bad file
                fail(out_of_memory(_out_of_memory_inside(exc)))
            fail(str(exc), exit_code_of(exc))
        except MemoryError as exc:
            fail(out_of_memory(exc))
        except Exception as exc:
            if not _duckdb_out_of_memory(exc):
                raise
            fail(out_of_memory(exc))
    return run  # type: ignore[return-value]


def out_of_memory(exc: BaseException) -> str:
    """The one line for a run that ran out of memory: which limit, and how to give it more."""
    from connectors.duck import default_memory_limit, spill_folder

    if _duckdb_out_of_memory(exc):
        return (f"DuckDB ran out of memory within its limit of {default_memory_limit()} even after spilling to "
                f"{spill_folder()}; nothing written. Set COSTAUDIT_DUCKDB_MEMORY higher (e.g. 8GB), or "
                "COSTAUDIT_CACHE to a disk with more room")
    return ("the audit ran out of memory; nothing written. Narrow the case's window or scope, or run it on a "
            "machine with more memory")


def _out_of_memory_inside(exc: BaseException) -> BaseException | None:
    """The DuckDB out-of-memory error an error was raised while handling, if any (``raise … from None``
    keeps it as the context; an :class:`InputErrors` holds several)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        found = pending.pop()
        if id(found) in seen:
            continue
        seen.add(id(found))
        if _duckdb_out_of_memory(found):
            return found
        pending += [e for e in (found.__cause__, found.__context__) if e is not None]
        pending += [e for e in getattr(found, "errors", ()) if isinstance(e, BaseException)]
    return None


def _duckdb_out_of_memory(exc: BaseException) -> bool:
    """A DuckDB OutOfMemoryException, told by its class (importing duckdb here would slow every command)."""
    kind = type(exc)
    return kind.__name__ == "OutOfMemoryException" and kind.__module__.lstrip("_").split(".")[0] == "duckdb"


def ms_or_na(value) -> str:
    """Milliseconds, right-aligned, or n/a."""
    return "   n/a" if value is None else f"{value:7.1f} ms"
