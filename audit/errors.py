"""One exception root for the audit; the CLI prints one message per error and exits."""
from __future__ import annotations

from connectors.errors import InputError, InputErrors, SourceError

__all__ = ["AuditError", "ConfigError", "InputError", "InputErrors", "SourceError", "ReportError"]


class AuditError(Exception):
    """Root of errors raised by the audit stages."""


class ConfigError(AuditError):
    """The case file is wrong; carries every problem found."""

    def __init__(self, path, problems: list[str]):
        self.path = str(path)
        self.problems = list(problems)
        super().__init__("\n".join(f"{self.path}: {p}" for p in self.problems))


class ReportError(AuditError):
    """A report could not be written."""
