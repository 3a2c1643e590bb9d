"""The root of every costaudit error, and the one kind every package raises: a bad value given.

Each error class names its kind in ``slug`` (as coverage.py's ``CoverageException(slug=)``): the
CLI maps the kind to an exit code (``audit/cli/common.py``), and a caller of the Python API can
catch :class:`CostauditError` for all of them or a class for one kind. The root lives here, on the
lowest floor, because every package raises it: ``schemas`` imports nothing of ours, ``connectors``
and ``collector`` import only ``schemas``. The kinds each floor raises live with it:

* ``usage``: UsageError (here), a bad command-line or argument value;
* ``input``: InputError / InputErrors (connectors/errors.py), a file, row or column is wrong;
* ``source``, ``source-retriable``, ``source-fatal``: SourceError, RetriableSourceError (timeouts,
  throttling), FatalSourceError (access denied, a missing object) (connectors/errors.py);
* ``config``: ConfigError (audit/errors.py), the case file is wrong;
* ``audit``: AuditError (audit/errors.py), an invariant of the audit broke (conservation);
* ``report``: ReportError (audit/errors.py), a report could not be written.
"""
from __future__ import annotations

from typing import ClassVar


class CostauditError(Exception):
    """Root of every error costaudit raises on purpose; ``slug`` names its kind."""

    slug: ClassVar[str] = "error"


class UsageError(CostauditError, ValueError):
    """A value given to a command or an API function is not one it takes (an option, a list, a
    table name, a ``module:function``). Also a ValueError, as these were before they had a kind,
    so callers that catch ValueError keep working."""

    slug = "usage"
