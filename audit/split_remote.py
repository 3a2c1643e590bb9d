"""The GPU split's sums run on the engine that holds the bill (issue 18): BigQuery for a ``gcp_billing``
source over a BigQuery table, Athena for an ``athena`` source, when the source says
``split_in_place = true``.

The split's inputs (:func:`audit.split_sql.tables`: the GPU lines the billing query returned, their
facts, the nodes telemetry saw) go beside the bill as scratch tables (the connector's scratch:
:mod:`connectors.billing.scratch_bigquery`, :mod:`connectors.billing.scratch_athena`); the engine runs
:data:`audit.split_sql.COVERAGE` and :data:`~audit.split_sql.SUMS` rendered in its dialect and returns the
per-key sums of money limbs only; the division happens once, exactly, on our side. So the cents are the
same whichever engine walks the lines. Transient faults are retried with backoff; what still fails is the
connector's error, naming the table and what the credentials need.
"""
from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from connectors.base import ReadContext, SourceSpec, with_retries
from connectors.errors import FatalSourceError
from connectors.registry import resolve

if TYPE_CHECKING:
    from audit.split_sql import Tables

log = logging.getLogger(__name__)

#: format → the module of its scratch (``DIALECT``, ``open_for``, ``error_of``, ``PERMISSIONS``)
SCRATCH = {"athena": "connectors.billing.scratch_athena", "gcp_billing": "connectors.billing.scratch_bigquery"}
ENGINE_NAMES = {"athena": "Athena", "gcp_billing": "BigQuery"}
#: how many leading columns of each query's rows are text (the rest integers)
TEXTS = {"coverage": 3, "sums": 2}
RETRIES, BACKOFF_S = 3, 0.5


@dataclass
class InPlace:
    """The split run in a billing source's engine: what ran there, for the record."""

    source: str
    engine: str
    table: str
    jobs: list[tuple[str, int]] = field(default_factory=list)

    def describe(self) -> str:
        scanned = sum(b for _, b in self.jobs)
        ids = ", ".join(j for j, _ in self.jobs)
        return (f"the GPU split's per-key sums ran in {self.engine} beside {self.table} ({len(self.jobs)} queries: "
                f"{ids}; {scanned:,} bytes scanned), divided here")


def in_place_source(case):
    """The billing source whose engine runs the split (``split_in_place = true``), or None."""
    chosen = [s for s in case.sources if s.kind == "billing" and s.options.get("split_in_place") is True]
    return chosen[0] if chosen else None


def engine_for(case) -> tuple[Callable, InPlace] | None:
    """(an engine for :meth:`audit.gpusplit.GpuSplitter.add_lines_in_engine`, its record), or None where no
    source asks for the split in place."""
    source = in_place_source(case)
    if source is None:
        return None
    spec = SourceSpec(source.name, source.kind, source.format, source.path, source.options)
    connector = resolve(source.format)(spec, ReadContext(case.start, case.end, case.currency, case.step_seconds))
    scratch = importlib.import_module(SCRATCH[source.format])
    record = InPlace(source.name, ENGINE_NAMES[source.format], spec.where)

    def run(prepared: Tables) -> tuple[list[tuple], list[tuple]]:
        return with_retries(lambda: run_once(connector, scratch, prepared, record), RETRIES, BACKOFF_S,
                            lambda delay: log.info("split: a transient fault in %s; retrying in %.1f s",
                                                   record.engine, delay))

    return run, record


def run_once(connector, scratch, prepared: Tables, record: InPlace) -> tuple[list[tuple], list[tuple]]:
    """Upload, query, remove: one try."""
    from audit import split_sql

    try:
        with scratch.open_for(connector) as place:
            names = place.upload(prepared.frames)
            answers = [place.query(split_sql.render(query, scratch.DIALECT, names, limbs=prepared.limbs))
                       for query in (split_sql.COVERAGE, split_sql.SUMS)]
            record.jobs = list(place.jobs)
    except Exception as exc:  # every client fault becomes the connector's error
        raise with_permissions(scratch.error_of(connector, exc), scratch.PERMISSIONS) from None
    log.info("split: %s", record.describe())
    return typed(answers[0], TEXTS["coverage"]), typed(answers[1], TEXTS["sums"])


def with_permissions(error: Exception, permissions: str) -> Exception:
    """An access refusal also names what the scratch tables need."""
    text = str(error).lower()
    if isinstance(error, FatalSourceError) and ("denied" in text or "permission" in text):
        return FatalSourceError(f"{error}; running the GPU split in place (split_in_place = true) also needs "
                                f"{permissions}")
    return error


def typed(rows: Sequence[Sequence], texts: int) -> list[tuple]:
    """Rows as the engine query's values: the first ``texts`` columns text, the rest integers (Athena
    answers every cell as text; BigQuery's are typed already)."""
    return [tuple(list(row[:texts]) + [_integer(cell) for cell in row[texts:]]) for row in rows]


def _integer(cell):
    if cell is None or isinstance(cell, int):
        return cell
    if cell in ("true", "false"):
        return int(cell == "true")
    return int(cell)
