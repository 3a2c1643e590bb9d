"""Stage 1: read every source of the case through its connector; gather every input error."""
from __future__ import annotations

from typing import Callable

from audit.case import Case
from audit.collected import Collected, MissingSource
from connectors.base import ReadContext, SourceFrame, SourceSpec
from connectors.errors import FatalSourceError, InputError, InputErrors, SourceError
from connectors.registry import resolve


def context_of(case: Case) -> ReadContext:
    """What connectors need to know of the case."""
    return ReadContext(case.start, case.end, case.currency, case.step_seconds)


def specs_of(case: Case) -> list[SourceSpec]:
    """One SourceSpec per source table of the case."""
    return [SourceSpec(s.name, s.kind, s.format, s.path, s.options) for s in case.sources]


def collect_sources(case: Case, progress: Callable[[SourceSpec], None] | None = None) -> Collected:
    """Read every source; raise all input errors together, record sources that failed transiently."""
    ctx = context_of(case)
    frames: list[SourceFrame] = []
    missing: list[MissingSource] = []
    errors: list[InputError] = []
    for spec in specs_of(case):
        if progress:
            progress(spec)
        try:
            connector = resolve(spec.format, where=str(case.path))(spec, ctx)
            if connector.kind and connector.kind != spec.kind:
                raise InputError(case.path, f"source {spec.name!r}: format {spec.format!r} reads "
                                 f"{connector.kind} data, not {spec.kind}", column="format")
            frames.append(connector.read())
        except InputErrors as exc:
            errors.extend(exc.errors)
        except InputError as exc:
            errors.append(exc)
        except FatalSourceError as exc:  # access denied, missing object: retrying cannot help
            errors.append(InputError(spec.where, str(exc)))
        except SourceError as exc:  # still failing after retries: reported as missing
            missing.append(MissingSource(spec, str(exc)))
    if errors:
        raise InputErrors(errors)
    return Collected(tuple(frames), tuple(missing))


def check(case: Case, case_checks: Callable[[Case, Collected], object] | None = None) -> list[InputError]:
    """Every problem of every source, none raised (for `costaudit validate`).

    ``case_checks(case, collected)`` runs the checks that need every source together (currency,
    lines in the window) once each source reads cleanly.
    """
    ctx, problems, frames = context_of(case), [], []
    for spec in specs_of(case):
        try:
            connector = resolve(spec.format, where=str(case.path))(spec, ctx)
            frames.append(connector.read())
        except InputErrors as exc:
            problems.extend(exc.errors)
        except InputError as exc:
            problems.append(exc)
        except SourceError as exc:
            problems.append(InputError(spec.where, f"could not be read: {exc}"))
    if not problems and case_checks is not None:
        try:
            case_checks(case, Collected(tuple(frames)))
        except InputErrors as exc:
            problems.extend(exc.errors)
        except InputError as exc:
            problems.append(exc)
    return problems
