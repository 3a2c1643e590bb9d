"""The errors the audit raises: the case file is wrong, an invariant broke, a report failed.

Each derives from :class:`schemas.errors.CostauditError` (the root every package shares, see
schemas/errors.py) and names its kind in ``slug``; the CLI prints one line and exits with the code
of the kind (audit/cli/common.py). The connectors' kinds are in connectors/errors.py.
"""
from __future__ import annotations

from schemas.errors import CostauditError

__all__ = ["AuditError", "ConfigError", "ReportError"]


class AuditError(CostauditError):
    """An invariant of the audit broke (the parts no longer sum to the lines in scope)."""

    slug = "audit"


class ConfigError(CostauditError):
    """The case file is wrong; carries every problem found."""

    slug = "config"

    def __init__(self, path, problems: list[str]):
        self.path = str(path)
        self.problems = list(problems)
        super().__init__("\n".join(f"{self.path}: {p}" for p in self.problems))


class ReportError(CostauditError):
    """A report could not be written: an unknown format, a missing library, a write that failed."""

    slug = "report"
