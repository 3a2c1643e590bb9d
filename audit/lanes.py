"""Sources read side by side: billing in one lane, every other source in another.

A fleet's month is a CUR export that DuckDB reads on every core (100 s for 50 M lines) and a
Prometheus pull that spends most of its 40 s waiting for the server's answers. Read one after the
other, their times added up. Here each lane is a thread that reads its sources in the case's order:

* **Billing sources share one lane**, so at most one DuckDB billing reader holds its memory limit
  at a time (connectors/duck.py: 4 GiB, or half the machine's memory) and a case's peak memory
  does not grow with its number of exports.
* **Every other source** (telemetry, profiles, traffic) reads in the second lane. A case with
  sources of one lane only is read in the calling thread, as before.
* **Outcomes come back in the case's order**, whichever lane finishes first, so the tables, the
  errors and their order are those of a serial read.
* **The Decimal context** of the calling thread (audit.money: 50 digits) is copied into each lane:
  a thread starts with Python's default context of 28 digits.
* **Lanes are daemon threads**, and the calling thread waits for them in short slices: SIGINT and
  SIGTERM unwind the run at once (audit/cli/interrupts.py) rather than after the slowest source.
"""
from __future__ import annotations

import decimal
import threading
from typing import Callable, Sequence, TypeVar

from connectors.base import SourceSpec

T = TypeVar("T")

#: how long the calling thread sleeps between looks at the lanes (seconds)
POLL = 0.05


def lane_of(spec: SourceSpec) -> str:
    """The lane a source is read in."""
    return "billing" if spec.kind == "billing" else "other"


def read_in_lanes(specs: Sequence[SourceSpec], read: Callable[[SourceSpec], T]) -> list[T]:
    """``read(spec)`` of every spec, in the specs' order; the lanes (:func:`lane_of`) side by side.
    An exception ``read`` raises is raised here (the first spec's, in the case's order)."""
    lanes: dict[str, list[int]] = {}
    for index, spec in enumerate(specs):
        lanes.setdefault(lane_of(spec), []).append(index)
    if len(lanes) < 2:
        return [read(spec) for spec in specs]
    outcomes: dict[int, tuple[bool, object]] = {}
    context = decimal.getcontext()

    def run(indices: list[int]) -> None:
        decimal.setcontext(context.copy())
        for index in indices:
            try:
                outcomes[index] = (True, read(specs[index]))
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread as it is
                outcomes[index] = (False, exc)
                return

    threads = [threading.Thread(target=run, args=(indices,), daemon=True, name=f"costaudit-read-{name}")
               for name, indices in lanes.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(POLL)
    return [_outcome(outcomes, index) for index in range(len(specs))]


def _outcome(outcomes: dict[int, tuple[bool, object]], index: int):
    """The value read for spec ``index``, or the exception its read raised."""
    if index not in outcomes:  # its lane stopped at an earlier spec's exception, raised before this
        raise RuntimeError(f"source {index} was not read")
    done, value = outcomes[index]
    if not done:
        raise value  # type: ignore[misc]
    return value
