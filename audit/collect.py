"""Stage 1: read every source of the case through its connector; gather every input error."""
from __future__ import annotations

import contextvars
import os
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from audit.case import Case
from audit.collected import Collected, MissingSource
from connectors.base import Connector, ReadContext, SourceFrame, SourceSpec, file_sha256
from connectors.duck import close_all, interrupt_all
from connectors.errors import FatalSourceError, InputError, InputErrors, SourceError
from connectors.registry import names, resolve, unknown
from schemas.errors import UsageError


def context_of(case: Case) -> ReadContext:
    """What connectors need to know of the case."""
    return ReadContext(case.start, case.end, case.currency, case.step_seconds)


def specs_of(case: Case) -> list[SourceSpec]:
    """One SourceSpec per source table of the case."""
    return [SourceSpec(s.name, s.kind, s.format, s.path, s.options) for s in case.sources]


#: sources read at once where the machine has cores to spare (more than two) and
#: ``$COSTAUDIT_READERS`` does not say otherwise: a CUR export summed in DuckDB and a Prometheus
#: pull overlap. On two cores both reads are bound by the CPU and overlapping them is slower
#: (benchmarks/fleet, 50 M lines and a local Prometheus: 229.9 s against 218.9 s one at a time).
READERS = 2
T = TypeVar("T")
STOP_WAIT = 30.0  # seconds an interrupted run waits for the reads' threads to end
STOP_POLL = 0.2  # seconds between two interruptions of the reads' queries while it waits


def default_readers() -> int:
    """``$COSTAUDIT_READERS`` (a whole number ≥ 1), else :data:`READERS` on a machine with more than two
    cores, else 1."""
    given = os.environ.get("COSTAUDIT_READERS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise UsageError(f"COSTAUDIT_READERS={given!r}: expected a whole number ≥ 1 (the sources read at once)")
        return int(given)
    return READERS if (os.cpu_count() or 1) > 2 else 1


def collect_sources(case: Case, progress: Callable[[SourceSpec | str], None] | None = None) -> Collected:
    """Read every source; raise all input errors together, record sources that failed transiently.

    The sources are read side by side where the machine has cores to spare (:func:`side_by_side`,
    :func:`default_readers`); what they return, fail with or miss is
    gathered in the case's order, so the outcome is the sequential one. ``progress`` hears of each
    source as it starts and, where several are read at once, of each as it ends, with its time."""
    frames: list[SourceFrame] = []
    missing: list[MissingSource] = []
    errors: list[InputError] = []
    for outcome in side_by_side(specs_of(case), lambda spec: _read(case, spec), progress):
        if isinstance(outcome, SourceFrame):
            frames.append(outcome)
        elif isinstance(outcome, MissingSource):
            missing.append(outcome)
        else:
            errors.extend(outcome)
    errors.extend(unread_billing(missing))
    errors.extend(duplicate_billing(frames))
    if errors:
        raise InputErrors(errors)
    return Collected(tuple(frames), tuple(missing))


def _read(case: Case, spec: SourceSpec, unreadable: str = "") -> SourceFrame | MissingSource | list[InputError]:
    """One source through its connector: its frame, the input errors it has, or, where it still
    failed after retries, a missing source; ``unreadable`` goes before a fatal source error's words
    (``costaudit validate`` says "could not be read: ")."""
    try:
        return connector_of(case, spec).read()
    except InputErrors as exc:
        return list(exc.errors)
    except InputError as exc:
        return [exc]
    except FatalSourceError as exc:  # access denied, missing object: retrying cannot help
        return [InputError(spec.where, f"{unreadable}{exc}")]
    except SourceError as exc:  # still failing after retries: reported as missing
        return MissingSource(spec, str(exc))


def connector_of(case: Case, spec: SourceSpec) -> Connector:
    """The connector of a source, refused where its format reads another kind of data."""
    if spec.format not in names():  # the nearest format of the source's kind, checked with every other source
        raise InputError(case.path, f"source {spec.name!r}: {unknown(spec.format, spec.kind)}", column="format")
    connector = resolve(spec.format, where=str(case.path))(spec, context_of(case))
    if connector.kind and connector.kind != spec.kind:
        raise InputError(case.path, f"source {spec.name!r}: format {spec.format!r} reads "
                         f"{connector.kind} data, not {spec.kind}", column="format")
    return connector


def side_by_side(specs: Sequence[SourceSpec], read: Callable[[SourceSpec], T],
                 progress: Callable[[SourceSpec | str], None] | None = None, readers: int | None = None) -> list[T]:
    """``read(spec)`` of every source, at most ``readers`` at once (:func:`default_readers` unless
    given), in the sources' order.

    One at a time, each read runs in the caller's thread, as a plain loop would. Several at once, each
    runs in a thread of its own with a copy of the caller's context (the audit's Decimal context
    included); an exception a read raises (one ``read`` does not turn into a value) is raised here
    once every read has ended, the first source's first. When the caller is interrupted while it
    waits (SIGINT, SIGTERM), the reads' DuckDB queries are interrupted and the threads joined before
    the interruption goes on: DuckDB still running in a thread at exit would abort the process.
    ``progress`` is called from one thread at a time."""
    readers = default_readers() if readers is None else readers
    if readers <= 1 or len(specs) <= 1:
        return [_one_read(spec, read, progress) for spec in specs]
    results: list = [None] * len(specs)
    failures: dict[int, BaseException] = {}
    lock, slots, stopping = threading.Lock(), threading.Semaphore(readers), threading.Event()
    threads: list[threading.Thread] = []

    def say(words: SourceSpec | str) -> None:
        if progress is not None:
            with lock:
                progress(words)

    def one(i: int, spec: SourceSpec) -> None:
        try:
            say(spec)
            began = time.perf_counter()
            results[i] = read(spec)
            if not stopping.is_set():  # an interrupted read may still return (its errors)
                say(f"read {spec.kind} source {spec.name} in {time.perf_counter() - began:.1f} s")
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failures[i] = exc
        finally:
            slots.release()

    try:
        for i, spec in enumerate(specs):
            slots.acquire()
            threads.append(threading.Thread(target=contextvars.copy_context().run, args=(one, i, spec),
                                            daemon=True, name=f"costaudit-read-{spec.name}"))
            threads[-1].start()
        for thread in threads:
            thread.join()
    except BaseException:
        stopping.set()
        _stop(threads)
        raise
    if failures:
        raise failures[min(failures)]
    return results


def _stop(threads: list[threading.Thread]) -> None:
    """Interrupt the reads' DuckDB queries until their threads end, at most :data:`STOP_WAIT` in all.
    Interrupted once, a read that was between two queries starts the next one, which would still run
    at exit (the process then aborts: "terminate called after throwing an instance of ''", exit −6),
    so each query is interrupted in turn; their sessions are then closed, not left to the exit."""
    deadline = time.monotonic() + STOP_WAIT
    for thread in threads:
        while thread.is_alive() and time.monotonic() < deadline:
            interrupt_all()
            thread.join(STOP_POLL)
    if not any(thread.is_alive() for thread in threads):
        close_all()


def _one_read(spec: SourceSpec, read: Callable[[SourceSpec], T],
              progress: Callable[[SourceSpec | str], None] | None) -> T:
    if progress is not None:
        progress(spec)
    return read(spec)


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
    problems: list[InputError] = []
    frames: list[SourceFrame] = []
    specs = specs_of(case)
    for spec, outcome in zip(specs, side_by_side(specs, lambda spec: _read(case, spec, "could not be read: "))):
        if isinstance(outcome, SourceFrame):
            frames.append(outcome)
        elif isinstance(outcome, MissingSource):
            problems.append(InputError(spec.where, f"could not be read: {outcome.reason}"))
        else:
            problems.extend(outcome)
    problems.extend(duplicate_billing(frames))
    if not problems and case_checks is not None:
        try:
            case_checks(case, Collected(tuple(frames)))
        except InputErrors as exc:
            problems.extend(exc.errors)
        except InputError as exc:
            problems.append(exc)
    return problems
