"""Base class of every connector: the base owns the read loop, subclasses fill in hooks."""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Mapping, final

import pandas as pd

from connectors.errors import InputError, RetriableSourceError


@dataclass(frozen=True)
class ReadContext:
    """What every connector needs to know of the case."""

    start: datetime
    end: datetime
    currency: str
    step_seconds: int | None = None


@dataclass(frozen=True)
class SourceSpec:
    """One source named in a case."""

    name: str
    kind: str
    format: str
    path: Path
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceFrame:
    """What a connector returns: named tables plus provenance."""

    spec: SourceSpec
    tables: Mapping[str, pd.DataFrame]
    rows: int
    covered: tuple[datetime | None, datetime | None]
    sha256: str


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Connector:
    """Subclasses implement fetch() and check(); read() is final."""

    format_name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    schemas: ClassVar[Mapping[str, Any]] = {}
    retries: ClassVar[int] = 3
    backoff_seconds: ClassVar[float] = 0.5

    def __init__(self, spec: SourceSpec, ctx: ReadContext):
        self.spec = spec
        self.ctx = ctx

    @property
    def path(self) -> Path:
        return self.spec.path

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Return (tables, rows read, (covered start, covered end))."""
        raise NotImplementedError

    def check(self) -> list[InputError]:
        """Return every problem with the source, raising none."""
        try:
            self.read()
        except InputError as exc:
            return [exc]
        except Exception as exc:  # an InputErrors bundle or a source fault
            errors = getattr(exc, "errors", None)
            if errors:
                return list(errors)
            return [InputError(self.path, str(exc))]
        return []

    @final
    def read(self) -> SourceFrame:
        """Fetch with retries on transient faults, validate each table, record provenance."""
        if not self.path.exists():
            raise InputError(self.path, "file not found", expected=f"a {self.format_name} file")
        if self.path.is_file() and self.path.stat().st_size == 0:
            raise InputError(self.path, "file is empty", expected=f"a {self.format_name} file")
        tables, rows, covered = self._fetch_with_retries()
        for name, schema in self.schemas.items():
            if name in tables:
                tables[name] = validate(schema, tables[name], self.path, name)
        sha = file_sha256(self.path) if self.path.is_file() else ""
        return SourceFrame(self.spec, tables, rows, covered, sha)

    def _fetch_with_retries(self):
        delay = self.backoff_seconds
        for attempt in range(self.retries + 1):
            try:
                return self.fetch()
            except RetriableSourceError:
                if attempt == self.retries:
                    raise
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")


def validate(schema, frame: pd.DataFrame, path: Path, table: str) -> pd.DataFrame:
    """Validate ``frame`` lazily; every failing cell becomes one InputError."""
    import pandera.errors as pa_errors

    from connectors.errors import InputErrors

    try:
        return schema.validate(frame, lazy=True)
    except pa_errors.SchemaErrors as exc:
        cases = exc.failure_cases.head(20)
        errors = [
            InputError(path, f"table {table}: check {row['check']} failed for value {row['failure_case']!r}",
                       row=_row_number(row.get("index")), column=str(row.get("column")))
            for _, row in cases.iterrows()
        ]
        raise InputErrors(errors) from None


def _row_number(index) -> int | None:
    try:
        return int(index) + 1
    except (TypeError, ValueError):
        return None
