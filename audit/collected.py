"""What collection hands on: every source frame of a case, and the sources that could not be read.

Shared by the stages (normalise reads the frames, attribution names the sources, the audit.json
writer lists them); the collect stage builds it.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from connectors.base import SourceFrame, SourceSpec


@dataclass(frozen=True)
class MissingSource:
    """A source that could not be read after retries: reported, never silently dropped."""

    spec: SourceSpec
    reason: str


@dataclass(frozen=True)
class Collected:
    """Every source frame of a case, in case order, and the sources that went missing."""

    frames: tuple[SourceFrame, ...] = ()
    missing: tuple[MissingSource, ...] = ()

    def of(self, kind: str) -> list[SourceFrame]:
        """The frames of one kind of source ("billing", "telemetry", "profiles")."""
        return [f for f in self.frames if f.spec.kind == kind]

    def names(self, kind: str) -> str:
        """The names of the sources of one kind, comma separated ("" when there is none)."""
        return ", ".join(f.spec.name for f in self.of(kind))

    def table(self, kind: str, name: str) -> pd.DataFrame | None:
        """One table concatenated over the sources of a kind (None when no source has it)."""
        parts = [f.tables[name] for f in self.of(kind) if name in f.tables]
        parts = [p for p in parts if len(p)]
        if not parts:
            return None
        return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)
