"""Discovery: a case.toml that fits the sources a user names (``costaudit init DIR --from …``).

``sniff`` tells each path's format, ``read`` reads every source through its connector, ``billing``,
``workloads`` and ``nodes`` find what the proposals rest on, ``propose`` decides every key and
``write`` renders the commented text. :func:`discover` runs them in that order. Nothing here is
imported at CLI start-up.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from schemas.errors import UsageError


@dataclass(frozen=True)
class Discovered:
    """What ``init --from`` writes, and what it tells the user."""

    text: str
    warnings: tuple[str, ...]
    services: tuple[str, ...]
    sources: tuple[str, ...]


def discover(sources: list[str], folder: Path, name: str,
             window: tuple[datetime, datetime] | None = None) -> Discovered:
    """Sniff and read ``sources`` (paths, Prometheus urls, or one existing case), propose a case."""
    from audit.discover.propose import propose
    from audit.discover.read import read_all, source_names
    from audit.discover.sniff import sniff_all
    from audit.discover.window import empty_window_warnings, window_note
    from audit.discover.write import render

    case = _case_of(sources)
    if case is not None:
        found = [_from_case(s) for s in case.sources]
        names = source_names(found, [s.name for s in case.sources])
        name = case.name
    else:
        found = sniff_all(sources)
        names = source_names(found)
    if not found:
        raise UsageError("--from names no source")
    reads, span = read_all(found, names, window, case.step_seconds if case is not None else None)
    if span is None:
        raise UsageError("no source covers any time (no billing line, no timestamped telemetry sample): "
                         "give --window START END")
    note = window_note(window is not None, span, reads, case.cost_basis if case is not None else "effective")
    empty = empty_window_warnings(span, reads) if window is not None else []
    note = "\n".join([note] + [f"warning: {text}" for text in empty])
    proposal = propose(name, reads, span, note, case)
    return Discovered(render(proposal, folder), tuple(proposal.warnings) + tuple(empty),
                      tuple(s.name for s in proposal.services),
                      tuple(f"{s.kind} {s.name} ({s.format})" + (" [commented out]" if s.disabled else "")
                            for s in proposal.sources))


def _case_of(sources: list[str]):
    """The case named by a lone ``--from`` that is a case folder or a case.toml, else None."""
    from audit.case import load_case

    hits = [s for s in sources if Path(s).name == "case.toml" or (Path(s).is_dir() and (Path(s) / "case.toml").is_file())]
    if not hits:
        return None
    if len(sources) > 1:
        raise UsageError(f"--from {hits[0]} is a case: give it alone (its sources are read), "
                         "or name the source files instead")
    return load_case(hits[0])


def _from_case(source):
    from audit.discover.sniff import KIND_OF, Sniffed

    options = dict(source.options)
    kind = KIND_OF.get(source.format, source.kind)
    return Sniffed(kind, source.format, source.path, "from the case", options)
