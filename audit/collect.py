"""Stage 1: read every source of the case through its connector; gather every input error."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from audit.case import Case
from connectors.base import ReadContext, SourceFrame, SourceSpec
from connectors.errors import FatalSourceError, InputError, InputErrors, SourceError
from connectors.registry import resolve


@dataclass(frozen=True)
class MissingSource:
    """A source that could not be read after retries: reported, never silently dropped."""

    spec: SourceSpec
    reason: str


@dataclass
class Collected:
    """Every source frame of a case, by kind."""

    frames: list[SourceFrame] = field(default_factory=list)
    missing: list[MissingSource] = field(default_factory=list)

    def of(self, kind: str) -> list[SourceFrame]:
        return [f for f in self.frames if f.spec.kind == kind]

    def table(self, kind: str, name: str) -> pd.DataFrame | None:
        """One table concatenated over the sources of a kind (None when no source has it)."""
        parts = [f.tables[name] for f in self.of(kind) if name in f.tables]
        parts = [p for p in parts if len(p)]
        if not parts:
            return None
        return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)


def context_of(case: Case) -> ReadContext:
    """What connectors need to know of the case."""
    return ReadContext(case.start, case.end, case.currency, case.step_seconds)


def specs_of(case: Case) -> list[SourceSpec]:
    """One SourceSpec per source table of the case."""
    return [SourceSpec(s.name, s.kind, s.format, s.path, s.options) for s in case.sources]


def collect(case: Case, progress=None) -> Collected:
    """Read every source; raise all input errors together, record sources that failed transiently."""
    ctx, out, errors = context_of(case), Collected(), []
    for spec in specs_of(case):
        if progress:
            progress(spec)
        try:
            connector = resolve(spec.format, where=str(case.path))(spec, ctx)
            if connector.kind and connector.kind != spec.kind:
                raise InputError(case.path, f"source {spec.name!r}: format {spec.format!r} reads "
                                 f"{connector.kind} data, not {spec.kind}", column="format")
            out.frames.append(connector.read())
        except InputErrors as exc:
            errors.extend(exc.errors)
        except InputError as exc:
            errors.append(exc)
        except FatalSourceError as exc:  # access denied, missing object: retrying cannot help
            errors.append(InputError(spec.where, str(exc)))
        except SourceError as exc:  # still failing after retries: reported as missing
            out.missing.append(MissingSource(spec, str(exc)))
    if errors:
        raise InputErrors(errors)
    return out


def check(case: Case, case_checks=None) -> list[InputError]:
    """Every problem of every source, none raised (for `costaudit validate`).

    ``case_checks(case, collected)`` runs the checks that need every source together (currency,
    lines in the window) once each source reads cleanly.
    """
    ctx, problems, collected = context_of(case), [], Collected()
    for spec in specs_of(case):
        try:
            connector = resolve(spec.format, where=str(case.path))(spec, ctx)
            collected.frames.append(connector.read())
        except InputErrors as exc:
            problems.extend(exc.errors)
        except InputError as exc:
            problems.append(exc)
        except SourceError as exc:
            problems.append(InputError(spec.where, f"could not be read: {exc}"))
    if not problems and case_checks is not None:
        try:
            case_checks(case, collected)
        except InputErrors as exc:
            problems.extend(exc.errors)
        except InputError as exc:
            problems.append(exc)
    return problems
