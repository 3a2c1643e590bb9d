"""Reading the sources ``costaudit init --from`` was given, each through its registered connector.

Billing is read first, over a window wide enough for any export (1970–2200): the lines it keeps
give the window the case will audit (the whole UTC days of its usage lines, else of every line:
audit/discover/window.py) unless ``--window`` names one.
Telemetry and profiles are then read over that window (telemetry at the source's own step), or,
with no billing and no ``--window``, over the wide window too, and their span becomes the window.
A Prometheus url is queried in place, so it needs a window first. A billing source that cannot
be read stops ``init`` (no case can stand without its invoice); a telemetry or profile source that
cannot be read is kept with its error, and written commented out with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from audit.discover.sniff import Sniffed
from audit.discover.window import covered_days, usage_window
from connectors.base import ReadContext, SourceFrame, SourceSpec
from connectors.errors import InputError, InputErrors, SourceError
from connectors.registry import resolve
from schemas.errors import UsageError

WIDE = (datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(2200, 1, 1, tzinfo=timezone.utc))
#: the currency a connector is told for files that name none (the lines' own currency is kept)
ASSUMED_CURRENCY = "USD"


@dataclass(frozen=True)
class Read:
    """One source as read: the sniffed source, its name in the case, the frame (None when it could
    not be read, with the error), and the step its telemetry tables were built on."""

    source: Sniffed
    name: str
    frame: SourceFrame | None
    error: str | None = None
    step: int | None = None
    untimestamped: int = 0

    @property
    def tables(self) -> Mapping[str, Any]:
        return self.frame.tables if self.frame is not None else {}


def read_all(found: list[Sniffed], names: list[str], window: tuple[datetime, datetime] | None,
             step: int | None = None) -> tuple[list[Read], tuple[datetime, datetime] | None]:
    """Every source read; returns them in the given order and the window the case will audit."""
    reads: dict[int, Read] = {}
    for i, source in enumerate(found):
        if source.kind == "billing":
            reads[i] = _read(source, names[i], WIDE, step, strict=True)
    if window is None:
        window = usage_window(list(reads.values())) or covered_days(
            [r.frame.covered for r in reads.values() if r.frame is not None])
    urls = [s for s in found if s.kind != "billing" and s.options.get("url")]
    if urls and window is None:
        raise UsageError(f"{urls[0].options['url']}: a Prometheus url is queried over a window; give a "
                         "billing source or --window START END")
    for i, source in enumerate(found):
        if i not in reads and not source.options.get("url"):
            reads[i] = _read(source, names[i], window or WIDE, step)
    if window is None:
        window = covered_days([r.frame.covered for r in reads.values() if r.frame is not None
                               and r.source.kind == "telemetry"])
    for i, source in enumerate(found):
        if i not in reads:
            reads[i] = _read(source, names[i], window, step)  # type: ignore[arg-type]
    return [reads[i] for i in range(len(found))], window


def _read(source: Sniffed, name: str, window: tuple[datetime, datetime], step: int | None,
          strict: bool = False) -> Read:
    """Read one source; an InputError of a billing source is raised, any other is kept."""
    spec = SourceSpec(name, source.kind, source.format, source.path, dict(source.options))
    connector = resolve(source.format)(spec, ReadContext(window[0], window[1], ASSUMED_CURRENCY, step))
    try:
        frame = connector.read()
    except (InputError, InputErrors, SourceError) as exc:
        if strict:
            raise
        return Read(source, name, None, str(exc))
    return Read(source, name, frame, None, _step_of(connector, frame),
                int(getattr(connector, "untimestamped", 0) or 0))


def _step_of(connector, frame: SourceFrame) -> int | None:
    """The interval the telemetry tables were built on: the connector's, else the closest spacing
    of the interval starts its tables hold, else None; None too where the connector says its
    step was not measured (no case step, and no spacing between its samples: the default)."""
    if getattr(connector, "step_measured", True) is False:
        return None
    step = getattr(connector, "step_seconds", None)
    if isinstance(step, int) and step > 0:
        return step
    for name in ("gpu_activity", "gpu_requests", "traffic"):
        table = frame.tables.get(name)
        if table is not None and len(table) and "step_seconds" in table:
            return int(table["step_seconds"].iloc[0])
        if table is not None and len(table) and "ts" in table:
            spacing = table["ts"].drop_duplicates().sort_values().diff().dropna()
            positive = spacing[spacing.dt.total_seconds() > 0]
            if len(positive):
                return int(positive.min().total_seconds())
    return None


def source_names(found: list[Sniffed], taken: list[str | None] | None = None) -> list[str]:
    """A unique, readable name per source: the given one, else the file's name without its
    extensions (``focus_2026-09.csv.gz`` → ``focus_2026-09``), else the format."""
    import re

    names: list[str] = []
    for i, source in enumerate(found):
        given = taken[i] if taken else None
        base = given or (_stem(source.path) if source.path is not None else source.format)
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", base).strip("-.") or source.format
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".csv", ".parquet", ".om", ".prom", ".txt", ".log", ".sqlite", ".pt.trace"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name
