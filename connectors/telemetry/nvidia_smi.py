"""``nvidia-smi --query-gpu=... --format=csv -l N`` logs -> gpu_activity.

The log is what ``nvidia-smi --query-gpu=timestamp,name,pci.bus_id,uuid,index,utilization.gpu,
memory.used,power.draw --format=csv -l 5`` writes: a header line (``timestamp, name, pci.bus_id,
uuid, index, utilization.gpu [%], ...``, repeated harmlessly if the log was restarted) and one
line per GPU and poll. Only ``timestamp``, ``uuid``, ``index``, ``name`` and ``utilization.gpu``
are used; other columns may be present or absent.

Case options:

- ``node``: the host the log was taken on (the log does not say); default "".
- ``utc_offset``: the host's offset from UTC, as ``+02:00`` / ``-0500`` / ``Z``. nvidia-smi writes
  local time (``2026/09/01 10:00:05.123``) without a zone; default UTC.

busy_fraction = utilization.gpu / 100, averaged per interval of the window grid (the case's step,
else the median poll spacing, else 60 s, said in table ``notes`` as not measured); ``source`` is
``nvidia-smi utilization.gpu``; pod, namespace and container are "" (nvidia-smi knows no pods).
Polls reading ``[N/A]`` make no sample; a reading outside 0–100 % or not finite is excluded and
counted (table ``excluded_samples``), and a GPU-interval whose every reading was excluded is unmeasured.
"""
from __future__ import annotations

import csv
import re
from datetime import datetime, timedelta
from typing import ClassVar

import numpy as np
import pandas as pd

from connectors.base import Connector, ReadContext
from connectors.bounds import bounded, shown, text_lines
from connectors.errors import InputError
from connectors.telemetry.families import GPU_UTIL
from connectors.telemetry.grid import DEFAULT_STEP, Grid, median_step, utc_ns
from connectors.telemetry.tables import gpu_activity, quality_tables
from connectors.telemetry.validity import renamed
from schemas.usage import GpuInterval

SOURCE = "nvidia-smi utilization.gpu"
NEEDED = ("timestamp", "uuid", "index", "utilization.gpu")
TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")
MISSING = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", ""}
DCGM_COLUMNS = ("metric", "node", "gpu", "uuid", "model_name", "pod", "namespace", "container")


def utc_offset(text, where) -> timedelta:
    """The ``utc_offset`` option as a timedelta (``+02:00``, ``-0500``, ``Z``; default UTC)."""
    if text in (None, "", "Z", "UTC"):
        return timedelta(0)
    found = re.fullmatch(r"([+-])(\d{1,2}):?(\d{2})?", str(text).strip())
    if not found:
        raise InputError(where, f"utc_offset {shown(text)} is not an offset", column="utc_offset",
                         expected="+HH:MM or -HH:MM")
    sign = -1 if found.group(1) == "-" else 1
    return sign * timedelta(hours=int(found.group(2)), minutes=int(found.group(3) or 0))


def telemetry_grid(where, ctx: ReadContext, samples: pd.DataFrame, spacing: int | None = None) -> tuple[Grid, bool]:
    """The window grid: the case's step, else the median sample spacing, else ``spacing`` (the
    polling delay a source states, as dcgmi's ``interval_ms``), else 60 s; and whether that step was
    measured (False for the default: a log of one timestamp has no spacing)."""
    start_ns, end_ns = utc_ns(ctx.start), utc_ns(ctx.end)
    if end_ns <= start_ns:
        raise InputError(where, "the case window is empty", expected="start < end")
    step = ctx.step_seconds or median_step([samples]) or spacing
    measured = bool(step)
    step = step or DEFAULT_STEP
    if int(step) <= 0:
        raise InputError(where, f"step {step} is not positive", expected="step_seconds > 0")
    return Grid(start_ns, end_ns, int(step)), measured


def unmeasured_step_notes(samples: pd.DataFrame) -> pd.DataFrame:
    """Table ``notes``: the step the log was averaged over was not measured, said by name at the
    first poll (no case step, and the polls are not a second apart: one poll of every GPU)."""
    stamps = samples["t"].nunique()
    return pd.DataFrame([(1, "timestamp", f"step unknown (not measured): the case sets no step and the log's "
                          f"polls are not a second apart ({stamps} timestamp{'s' if stamps != 1 else ''}); "
                          f"utilization was averaged over {DEFAULT_STEP} s intervals, the reader's default")],
                        columns=["row", "column", "note"]).astype({"row": "int64", "column": "str", "note": "str"})


def covered(samples: pd.DataFrame, grid: Grid) -> tuple:
    """First and last sample time within the window, to the microsecond."""
    t = samples["t"].to_numpy(dtype=float)
    t = t[(t >= grid.start) & (t <= grid.end)]
    if not len(t):
        return (None, None)
    return tuple(pd.Timestamp(round(x * 1e6), unit="us", tz="UTC").to_pydatetime()
                 for x in (t.min(), t.max()))


def sample_extent(samples: pd.DataFrame) -> tuple:
    """First and last sample time of the whole log, in or out of the window (for the warning that
    names where a log's samples lie when none is in the window: audit/fit_window.py)."""
    t = samples["t"].to_numpy(dtype=float)
    return tuple(pd.Timestamp(round(x * 1e6), unit="us", tz="UTC").to_pydatetime() for x in (t.min(), t.max()))


def series_ids(frame: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """A series number per row, one per distinct ``keys``."""
    return frame.groupby(keys, sort=False).ngroup().to_numpy(dtype=np.int64)


def column_name(header: str) -> str:
    """``utilization.gpu [%]`` -> ``utilization.gpu``."""
    return header.split("[", 1)[0].strip()


def read_header(fields: list[str], path, row: int) -> dict[str, int]:
    """Column positions by name; the needed columns must all be there."""
    columns: dict[str, int] = {}
    for i, field in enumerate(fields):
        name = column_name(field)
        if name in columns:  # the later copy would be read in the first one's place, with no word
            raise InputError(path, f"duplicate column {name!r}", row=row, column=name, expected="each column once")
        columns[name] = i
    for name in NEEDED:
        if name not in columns:
            raise InputError(path, f"no {name} column in the header", row=row, column=name,
                             expected="nvidia-smi --query-gpu=timestamp,name,pci.bus_id,uuid,"
                             "index,utilization.gpu,... --format=csv")
    return columns


def parse_time(text: str, offset: timedelta, path, row: int) -> float:
    """Seconds since the epoch of a local ``YYYY/MM/DD HH:MM:SS.fff`` timestamp."""
    for form in TIME_FORMATS:
        try:
            local = datetime.strptime(text, form)
        except ValueError:
            continue
        return (pd.Timestamp(local - offset, tz="UTC").value) / 1e9
    raise InputError(path, f"timestamp {shown(text)} is not a time", row=row, column="timestamp",
                     expected="YYYY/MM/DD HH:MM:SS.fff")


def parse_percent(text: str, path, row: int) -> float | None:
    """A ``55 %`` reading as 55.0; None for ``[N/A]``. A number outside 0–100 (or NaN, inf) is kept:
    the busy rules exclude and count it (connectors.telemetry.validity)."""
    value = text.removesuffix("%").strip()
    if value in MISSING:
        return None
    try:
        return float(value)
    except ValueError:
        raise InputError(path, f"utilization {shown(text)} is not a percentage", row=row,
                         column="utilization.gpu", expected="0 to 100 %") from None


def read_log(path, node: str, offset: timedelta) -> pd.DataFrame:
    """One row per GPU poll, in the DCGM family's columns (metric GPU_UTIL, value in %);
    ``missing`` marks a poll reading ``[N/A]`` (it places the poll in time, and is no sample)."""
    records, columns = [], None
    with open(path, encoding="utf-8", newline="") as handle:
        reader = enumerate(csv.reader(bounded(handle, path), skipinitialspace=True), 1)
        for row, fields in text_lines(reader, path, "nvidia-smi --format=csv output (UTF-8 text)"):
            fields = [f.strip() for f in fields]
            if not fields or fields == [""]:
                continue
            if fields[0] == "timestamp":
                columns = read_header(fields, path, row)
                continue
            if columns is None:
                raise InputError(path, "data before the header line", row=row,
                                 expected="a header line starting with 'timestamp'")
            if len(fields) < len(columns):
                raise InputError(path, f"{len(fields)} fields, the header has {len(columns)}",
                                 row=row, expected="one value per header column")
            get = lambda name, fields=fields, columns=columns: fields[columns[name]] if name in columns else ""  # noqa: E731
            percent = parse_percent(get("utilization.gpu"), path, row)
            records.append((GPU_UTIL, node, get("index"), get("uuid"), get("name"), "", "", "",
                            parse_time(get("timestamp"), offset, path, row),
                            np.nan if percent is None else percent, percent is None))
    if columns is None:
        raise InputError(path, "no header line", expected="nvidia-smi ... --format=csv output")
    frame = pd.DataFrame.from_records(records, columns=list(DCGM_COLUMNS) + ["t", "v", "missing"])
    frame = frame.astype({c: "str" for c in DCGM_COLUMNS})
    return frame.assign(sid=series_ids(frame, ["node", "gpu", "uuid"]) if len(frame) else 0)


class NvidiaSmiConnector(Connector):
    """Reads an ``nvidia-smi --query-gpu ... --format=csv -l N`` log."""

    format_name: ClassVar[str] = "nvidia_smi"
    kind: ClassVar[str] = "telemetry"
    schemas: ClassVar[dict] = {"gpu_activity": GpuInterval}

    #: the interval length used by the last fetch, in seconds
    step_seconds: int | None = None
    #: whether that step is the case's or the polls' spacing, not the default (one timestamp has no
    #: spacing: its step is not measured, and the ``notes`` table says so)
    step_measured: bool = False

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Parse the log, then average utilization per GPU and interval."""
        options = self.spec.options
        offset = utc_offset(options.get("utc_offset"), self.path)
        samples = read_log(self.path, str(options.get("node", "")), offset)
        if samples.empty:
            raise InputError(self.path, "no GPU polls in the log",
                             expected="one line per GPU and poll after the header")
        grid, self.step_measured = telemetry_grid(self.path, self.ctx, samples)
        self.step_seconds = grid.step
        busy = gpu_activity(samples.loc[~samples["missing"].astype(bool)], grid)
        activity = busy.activity.assign(source=SOURCE)
        quality = {name: renamed(table, {GPU_UTIL: SOURCE})
                   for name, table in quality_tables(busy).items()}
        self.extent = sample_extent(samples)
        notes = {} if self.step_measured else {"notes": unmeasured_step_notes(samples)}
        return {"gpu_activity": activity, **quality, **notes}, len(samples), covered(samples, grid)
