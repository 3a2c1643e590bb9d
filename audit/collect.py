"""Stage 1: read every source of the case through its connector; gather every input error."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Callable

from audit.case import Case
from audit.collected import Collected, MissingSource
from connectors.base import ReadContext, SourceFrame, SourceSpec, file_sha256
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
    errors.extend(unread_billing(missing))
    errors.extend(duplicate_billing(frames))
    if errors:
        raise InputErrors(errors)
    return Collected(tuple(frames), tuple(missing))


def unread_billing(missing: list[MissingSource]) -> list[InputError]:
    """A billing source still failing after retries: the total in scope cannot be known without it,
    so the case stops here, with the last error, before any check that would misread the gap."""
    return [InputError(m.spec.where, f"billing source {m.spec.name!r} could not be read after retries: "
                       f"{m.reason}", expected="a readable billing source (the invoice total needs every one)")
            for m in missing if m.spec.kind == "billing"]


def duplicate_billing(frames: list[SourceFrame]) -> list[InputError]:
    """The same billing data listed twice (the same sha256) would double the invoice: one error per
    repeat, naming both sources. Whole sources are compared by their fingerprint, and the files
    of local sources one by one (a file listed alone and inside a listed folder)."""
    billing = [f for f in frames if f.spec.kind == "billing"]
    errors: list[InputError] = []
    first: dict[str, SourceSpec] = {}
    for frame in billing:
        if frame.sha256 and frame.sha256 in first:
            errors.append(_duplicate(first[frame.sha256], frame.spec, frame.spec.where))
        first.setdefault(frame.sha256, frame.spec)
    if not errors:
        errors.extend(_duplicate_files([f.spec for f in billing]))
    return errors


def _duplicate_files(specs: list[SourceSpec]) -> list[InputError]:
    """Files of two local sources with the same content; only files of equal size are hashed."""
    by_size: dict[int, list[tuple[SourceSpec, Path]]] = defaultdict(list)
    for spec in specs:
        for item in _files(spec.path):
            by_size[item.stat().st_size].append((spec, item))
    errors: list[InputError] = []
    seen: dict[str, tuple[SourceSpec, Path]] = {}
    for group in by_size.values():
        if len({spec.name for spec, _ in group}) < 2:
            continue
        for spec, item in group:
            digest = file_sha256(item)
            other = seen.get(digest)
            if other is not None and other[0].name != spec.name:
                errors.append(_duplicate(other[0], spec, f"{other[1]} and {item}"))
            seen.setdefault(digest, (spec, item))
    return errors


def _files(path: Path | None) -> list[Path]:
    if path is None:
        return []
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []


def _duplicate(first: SourceSpec, second: SourceSpec, what: str) -> InputError:
    return InputError(second.where, f"billing sources {first.name!r} and {second.name!r} hold the same data "
                      f"(same sha256: {what}); counting it twice would double the invoice",
                      expected="each billing export listed once")


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
    problems.extend(duplicate_billing(frames))
    if not problems and case_checks is not None:
        try:
            case_checks(case, Collected(tuple(frames)))
        except InputErrors as exc:
            problems.extend(exc.errors)
        except InputError as exc:
            problems.append(exc)
    return problems
