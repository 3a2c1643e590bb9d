"""``dcgmi dmon -e 1001,1002,203 -d <ms>`` output -> gpu_activity.

dmon prints a header (``#Entity  GRACT  SMACT  GPUTL``, often followed by an ``ID`` units line,
both repeated now and then) and, every ``-d`` milliseconds, one line per GPU: ``GPU 0  0.512
0.400  55``. Lines carry no time, so the case must give it:

- ``start``: when the first poll was taken (ISO 8601; no zone means UTC);
- ``interval_ms``: the ``-d`` delay in milliseconds;
- ``node``: the host (default "").

The n-th line of a GPU (from 0) is placed at ``start + n * interval_ms``. busy_fraction prefers
GRACT (field 1001, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``) per GPU, else GPUTL (203) / 100, averaged per
interval of the window grid; ``source`` names the column used (``dcgmi GRACT`` / ``dcgmi GPUTL``).
``N/A`` readings make no sample; entities other than whole GPUs (``GPU-I``, ``GPU-CI``) are skipped.
A reading out of range (GRACT outside 0–1, GPUTL outside 0–100) or not finite is excluded and counted
(table ``excluded_samples``); a GPU-interval whose every reading was excluded is unmeasured.
"""
from __future__ import annotations

import math
from typing import ClassVar

import pandas as pd

from connectors.base import Connector
from connectors.bounds import bounded, shown, text_lines
from connectors.errors import InputError
from connectors.telemetry.families import GPU_UTIL, GR_ENGINE_ACTIVE
from connectors.telemetry.nvidia_smi import DCGM_COLUMNS, covered, sample_extent, series_ids, telemetry_grid
from connectors.telemetry.tables import gpu_activity, quality_tables
from connectors.telemetry.validity import renamed
from schemas.usage import GpuInterval

COLUMNS = {"GRACT": GR_ENGINE_ACTIVE, "GPUTL": GPU_UTIL}
SOURCES = {GR_ENGINE_ACTIVE: "dcgmi GRACT", GPU_UTIL: "dcgmi GPUTL"}
MISSING = {"N/A", "-", ""}


def options(spec, where) -> tuple[float, float]:
    """(start in seconds since the epoch, interval in seconds) from the case options."""
    raw_start, raw_interval = spec.options.get("start"), spec.options.get("interval_ms")
    if raw_start in (None, "") or raw_interval in (None, ""):
        raise InputError(where, "dcgmi dmon output has no timestamps", column="start/interval_ms",
                         expected="options start (ISO time of the first poll) and interval_ms")
    try:
        start = pd.Timestamp(raw_start)
    except ValueError:
        raise InputError(where, f"start {shown(raw_start)} is not a time", column="start",
                         expected="an ISO 8601 time") from None
    start = start.tz_localize("UTC") if start.tzinfo is None else start.tz_convert("UTC")
    try:
        interval = float(raw_interval)
    except (TypeError, ValueError):
        interval = 0.0
    if not interval > 0:
        raise InputError(where, f"interval_ms {shown(raw_interval)} is not positive",
                         column="interval_ms", expected="the dmon -d delay in milliseconds")
    return start.value / 1e9, interval / 1000.0


def reading(text: str, name: str, path, row: int) -> float | None:
    """One column's value; None for N/A. A number out of range is kept: the busy rules exclude
    and count it (connectors.telemetry.validity), as for every other DCGM reader."""
    if text in MISSING:
        return None
    try:
        return float(text)
    except ValueError:
        raise InputError(path, f"{name} value {shown(text)} is not a number", row=row, column=name,
                         expected="a number or N/A") from None


def read_dmon(path, node: str, start: float, interval: float) -> pd.DataFrame:
    """One sample per GPU, poll and used column, in the DCGM family's columns."""
    records, header = [], None
    polls: dict[str, int] = {}
    with open(path, encoding="utf-8") as handle:
        lines = enumerate(bounded(handle, path), 1)
        for row, line in text_lines(lines, path, "dcgmi dmon output (UTF-8 text)"):
            fields = line.split()
            if not fields or fields[0] == "ID":
                continue
            if fields[0].startswith("#"):
                header = fields[1:] if fields[0] == "#" else [fields[0][1:]] + fields[1:]
                twice = next((name for i, name in enumerate(header) if name in header[:i]), None)
                if twice is not None:  # the later copy would be read as the same field, with no word
                    raise InputError(path, f"duplicate column {twice!r}", row=row, column=twice,
                                     expected="each column once")
                continue
            if header is None:
                raise InputError(path, "data before the '#Entity' header", row=row,
                                 expected="dcgmi dmon output")
            if fields[0] != "GPU":
                continue
            if len(fields) != len(header) + 1:
                raise InputError(path, f"{len(fields) - 1} fields, the header has {len(header)}",
                                 row=row, expected="'GPU <id>' then one value per column")
            gpu = fields[1]
            n = polls.get(gpu, 0)
            polls[gpu] = n + 1
            for name, text in zip(header[1:], fields[2:]):
                value = reading(text, name, path, row) if name in COLUMNS else None
                if value is not None:
                    records.append((COLUMNS[name], node, gpu, "", "", "", "", "",
                                    start + n * interval, value))
    if header is None:
        raise InputError(path, "no '#Entity' header", expected="dcgmi dmon output")
    frame = pd.DataFrame.from_records(records, columns=list(DCGM_COLUMNS) + ["t", "v"])
    frame = frame.astype({c: "str" for c in DCGM_COLUMNS})
    return frame.assign(sid=series_ids(frame, ["metric", "gpu"]) if len(frame) else 0)


class DcgmiConnector(Connector):
    """Reads ``dcgmi dmon`` output; needs options ``start`` and ``interval_ms``."""

    format_name: ClassVar[str] = "dcgmi"
    kind: ClassVar[str] = "telemetry"
    schemas: ClassVar[dict] = {"gpu_activity": GpuInterval}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Place polls in time, then average GRACT (else GPUTL / 100) per GPU and interval."""
        start, interval = options(self.spec, self.path)
        samples = read_dmon(self.path, str(self.spec.options.get("node", "")), start, interval)
        if samples.empty:
            raise InputError(self.path, "no GRACT or GPUTL readings",
                             expected="dcgmi dmon -e 1001 and/or 203 output")
        # one poll has no spacing: the step is then the dmon -d delay the source states (whole seconds)
        spacing = max(1, math.ceil(interval)) if interval < 2 ** 31 else None
        grid, _ = telemetry_grid(self.path, self.ctx, samples, spacing=spacing)
        busy = gpu_activity(samples, grid)
        activity = busy.activity.assign(source=busy.activity["source"].map(SOURCES))
        quality = {name: renamed(table, SOURCES) for name, table in quality_tables(busy).items()}
        self.extent = sample_extent(samples)
        return {"gpu_activity": activity, **quality}, len(samples), covered(samples, grid)
