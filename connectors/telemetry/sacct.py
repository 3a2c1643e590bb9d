"""Slurm ``sacct --parsable2`` output -> gpu_requests per interval and a ``jobs`` table.

Expected command::

    sacct --allusers --parsable2 \
        --format=JobID,JobName,User,Partition,NodeList,AllocTRES,Elapsed,Start,End,State

A header line, then ``|``-separated rows. Steps (``123.batch``, ``123.extern``, ``123.0``) are
ignored in favour of the job line. GPUs come from AllocTRES ``gres/gpu=N`` (typed entries such as
``gres/gpu:a100=N`` are summed when the untyped one is absent; no entry means 0 GPUs) and are
split evenly over the job's nodes (``node=N``, else the length of the expanded NodeList).
NodeList is expanded (``gpu[01-03,07]`` -> gpu01, gpu02, gpu03, gpu07).

Case options: ``utc_offset`` (``+02:00``…), the offset of the cluster's local time in which sacct
writes Start and End; default UTC. A job still running (End ``Unknown``) is counted up to
Start + Elapsed (sacct's Elapsed of a running job is its time so far); its ``end`` stays empty.
Without an Elapsed (an export without the column) the export does not say when it was taken: such
a job is counted up to the window end, and table ``notes`` names it and says so.

Tables:

- ``gpu_requests``: per interval of the window grid (the case's step, else 60 s), namespace =
  partition, pod = ``<JobID>-<JobName>``, node, gpus = GPUs per node × the fraction of the interval
  the job ran (fractional at the job's edges), so gpus × step sums to the GPU-seconds.
- ``jobs``: job, name, user, partition, nodes (comma-joined), gpus (all nodes), start, end, state,
  gpu_hours = gpus × Elapsed.
- ``scheduled_nodes``: node, start, end: each node any job of the export names, over the period the
  export covers (its first job's start to its last job's end, clipped to the window): the export
  lists every job there, so a GPU there that no job held was held by no workload (unallocated,
  METHOD §3), not one of unknown allocation. The export is taken to list every user's jobs
  (``sacct --allusers``).
"""
from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import ClassVar

import numpy as np
import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from connectors.base import Connector
from connectors.billing.focus_checks import notes_table
from connectors.bounds import DECOMPRESS_ERRORS, read_lines, shown
from connectors.errors import InputError
from connectors.telemetry.grid import DEFAULT_STEP, NS, Grid, utc_ns
from connectors.telemetry.nvidia_smi import utc_offset
from connectors.telemetry.tables import empty_table, finish
from schemas.usage import GpuRequest, ScheduledNode

NEEDED = ("JobID", "JobName", "Partition", "NodeList", "AllocTRES", "Start", "End")
FORMAT = ("sacct --allusers --parsable2 --format=JobID,JobName,User,Partition,NodeList,AllocTRES,Elapsed,"
          "Start,End,State")
NO_TIME = {"Unknown", "None", ""}
MAX_HOSTS = 100_000
"""Most hosts one job's NodeList may name (the largest clusters have tens of thousands)."""
MAX_GROUPS = 8
"""Most bracket groups in one NodeList name (``rack[1-4]-gpu[01-08]`` has two)."""
MAX_GPUS = 1_000_000
MAX_ELAPSED = 100 * 365 * 86400
YEARS = (1970, 2200)
"""Start and End years read (a Timestamp plus Elapsed must stay within pandas' range)."""


class SlurmJob(pa.DataFrameModel):
    """One Slurm job and the GPU-hours it held."""

    job: Series[str]
    name: Series[str]
    user: Series[str]
    partition: Series[str]
    nodes: Series[str]
    gpus: Series[float] = pa.Field(ge=0)
    start: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"},
                                                 nullable=True)
    end: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"},
                                               nullable=True)
    state: Series[str]
    gpu_hours: Series[float] = pa.Field(ge=0)


# --------------------------------------------------------------------------------------------
# Field parsers
# --------------------------------------------------------------------------------------------

def split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p]


def expand_range(spec: str, limit: int = MAX_HOSTS) -> list[str]:
    """``01-03,07`` -> ['01', '02', '03', '07'], keeping zero padding.

    More than ``limit`` numbers is a ValueError naming the range (checked before expanding).
    """
    out: list[str] = []
    for item in spec.split(","):
        low, sep, high = item.partition("-")
        if not sep:
            out.append(low)
            continue
        first, last = int(low), int(high)
        if last - first + 1 + len(out) > limit:
            raise ValueError(f"[{item}] names {last - first + 1:,} hosts")
        width = len(low) if low.startswith("0") else 0
        out.extend(str(n).zfill(width) for n in range(first, last + 1))
    if len(out) > limit:
        raise ValueError(f"[{spec}] names {len(out):,} hosts")
    return out


def expand_nodelist(text: str, path=None, row: int | None = None) -> list[str]:
    """Slurm's compressed host list as names (``gpu[01-02],cpu7`` -> gpu01, gpu02, cpu7).

    At most MAX_HOSTS names in all: a larger list (``gpu[0-300000000]``) is an InputError naming
    the row and the range, raised before anything is expanded.
    """
    if text in ("", "None assigned", "(null)"):
        return []
    hosts: list[str] = []
    _expand(text, text, hosts, path, row)
    return hosts


def _expand(text: str, whole: str, hosts: list[str], path, row: int | None) -> None:
    """Append the hosts of ``text`` (a part of NodeList ``whole``) to ``hosts``."""
    for part in split_top(text):
        if part.count("[") > MAX_GROUPS:
            raise InputError(path, f"bad NodeList {shown(whole)}: more than {MAX_GROUPS} bracket groups",
                             row=row, column="NodeList", expected="host names or prefix[01-03,07]")
        found = re.match(r"^([^\[]*)\[([0-9,\-]+)\](.*)$", part)
        if found is None:
            if "[" in part or "]" in part:
                raise InputError(path, f"bad NodeList {shown(whole)}", row=row, column="NodeList",
                                 expected="host names or prefix[01-03,07]")
            hosts.append(part)
            if len(hosts) > MAX_HOSTS:
                raise _too_many(whole, f"{len(hosts):,} hosts", path, row)
            continue
        try:
            numbers = expand_range(found.group(2), MAX_HOSTS - len(hosts))
        except ValueError as exc:
            if "hosts" in str(exc):
                raise _too_many(whole, str(exc), path, row) from None
            raise InputError(path, f"bad NodeList range in {shown(whole)}", row=row,
                             column="NodeList", expected="prefix[01-03,07]") from None
        for number in numbers:
            _expand(found.group(1) + number + found.group(3), whole, hosts, path, row)


def _too_many(whole: str, what: str, path, row: int | None) -> InputError:
    """The error for a NodeList that names more than MAX_HOSTS hosts."""
    return InputError(path, f"NodeList {shown(whole)}: {what}, more than {MAX_HOSTS:,}", row=row,
                      column="NodeList", expected=f"at most {MAX_HOSTS:,} hosts per job")


def tres(text: str, path, row: int) -> dict[str, str]:
    """AllocTRES ``billing=8,cpu=32,gres/gpu=4`` as a dict."""
    out = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(path, f"bad AllocTRES entry {shown(item)}", row=row, column="AllocTRES",
                             expected="name=value pairs, e.g. gres/gpu=4")
        out[key] = value
    return out


def gpu_count(alloc: dict[str, str], path, row: int) -> float:
    """GPUs of the job: ``gres/gpu``, else the sum of typed ``gres/gpu:<type>``, else 0."""
    keys = ["gres/gpu"] if "gres/gpu" in alloc else [k for k in alloc if k.startswith("gres/gpu:")]
    total = 0.0
    for key in keys:
        try:
            count = float(alloc[key])
        except ValueError:
            count = math.nan
        if not 0 <= count <= MAX_GPUS:
            raise InputError(path, f"{key}={shown(alloc[key])} is not a GPU count", row=row,
                             column="AllocTRES", expected=f"{key}=<count from 0 to {MAX_GPUS:,}>")
        total += count
    return total


def elapsed_seconds(text: str, path, row: int) -> float:
    """``[D-]HH:MM:SS`` (or ``MM:SS``, ``MM:SS.mmm``) as seconds."""
    days, _, clock = text.rpartition("-")
    try:
        parts = [float(p) for p in clock.split(":")]
        if not 1 <= len(parts) <= 3:
            raise ValueError(text)
        seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
        seconds += int(days) * 86400 if days else 0
        if not 0 <= seconds <= MAX_ELAPSED:
            raise ValueError(text)
        return seconds
    except ValueError:
        raise InputError(path, f"Elapsed {shown(text)} is not a duration", row=row, column="Elapsed",
                         expected="[D-]HH:MM:SS, at most 100 years") from None


def slurm_time(text: str, offset: timedelta, column: str, path, row: int):
    """A sacct ``YYYY-MM-DDTHH:MM:SS`` local time as a UTC Timestamp; None for Unknown."""
    if text in NO_TIME:
        return None
    try:
        local = pd.Timestamp(text)
    except ValueError:
        local = None
    if local is None or local is pd.NaT or local.tzinfo is not None or not YEARS[0] <= local.year < YEARS[1]:
        raise InputError(path, f"{column} {shown(text)} is not a time", row=row, column=column,
                         expected=f"YYYY-MM-DDTHH:MM:SS (sacct's local time, years {YEARS[0]}-{YEARS[1] - 1})")
    return (local - offset).tz_localize("UTC")


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

def read_jobs(path, offset: timedelta) -> pd.DataFrame:
    """The job lines (steps skipped), parsed; one row per job."""
    try:
        records = list(_job_records(path, offset))
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text ({exc.reason})", expected=FORMAT) from None
    except DECOMPRESS_ERRORS as exc:
        raise InputError(path, f"truncated or corrupt gzip ({exc})", expected=FORMAT) from None
    columns = ["job", "name", "user", "partition", "hosts", "gpus", "start", "end", "state",
               "elapsed", "row"]
    return pd.DataFrame.from_records(records, columns=columns)


def _job_records(path, offset: timedelta):
    """Parsed job lines, streamed (each text line at most MAX_LINE characters)."""
    lines = (piece for line in read_lines(path) for piece in line.splitlines())
    first = next(lines, None)
    header = first.split("|") if first is not None else []
    missing = [c for c in NEEDED if c not in header]
    if missing:
        raise InputError(path, f"header lacks {', '.join(missing)}", row=1, column=missing[0],
                         expected=FORMAT)
    for row, line in enumerate(lines, 2):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != len(header):
            raise InputError(path, f"{len(fields)} fields, the header has {len(header)}",
                             row=row, expected="'|'-separated values, one per header column")
        job = dict(zip(header, fields))
        if "." in job["JobID"]:
            continue
        yield parse_job(job, offset, path, row)


def parse_job(job: dict[str, str], offset: timedelta, path, row: int) -> tuple:
    """One job line: (job, name, user, partition, hosts, gpus, start, end, state, elapsed, row)."""
    alloc = tres(job["AllocTRES"], path, row)
    hosts = expand_nodelist(job["NodeList"], path, row)
    start = slurm_time(job["Start"], offset, "Start", path, row)
    end = slurm_time(job["End"], offset, "End", path, row)
    if start is not None and end is not None and end < start:
        raise InputError(path, f"End {job['End']} is before Start {job['Start']}", row=row,
                         column="End", expected="End >= Start")
    if job.get("Elapsed"):
        elapsed = elapsed_seconds(job["Elapsed"], path, row)
    elif start is not None and end is None:
        elapsed = math.nan  # running, and no Elapsed: :func:`to_window_end`
    else:
        elapsed = (end - start).total_seconds() if start is not None and end is not None else 0.0
    return (job["JobID"], job["JobName"], job.get("User", ""), job["Partition"], hosts,
            gpu_count(alloc, path, row), start, end, job.get("State", ""), elapsed, row)


# --------------------------------------------------------------------------------------------
# Spreading over the grid
# --------------------------------------------------------------------------------------------

def spread(spans: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """Per span (``start_ns``, ``end_ns``, ``gpus`` and key columns) and overlapped interval ``k``:
    ``gpus`` × the fraction of the interval the span covers. Spans are clipped to the window."""
    lo = np.maximum(spans["start_ns"].to_numpy(dtype=np.int64), grid.start_ns)
    hi = np.minimum(spans["end_ns"].to_numpy(dtype=np.int64), grid.end_ns)
    step_ns = grid.step * NS
    first = (lo - grid.start_ns) // step_ns
    last = (hi - 1 - grid.start_ns) // step_ns
    count = np.where(hi > lo, last - first + 1, 0)
    which = np.repeat(np.arange(len(spans)), count)
    k = np.repeat(first, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count,
                                                                     count))
    k_start = grid.start_ns + k * step_ns
    overlap = np.minimum(hi[which], k_start + step_ns) - np.maximum(lo[which], k_start)
    out = spans.iloc[which].reset_index(drop=True)
    out["k"] = k
    out["gpus"] = out["gpus"].to_numpy(dtype=float) * overlap / step_ns
    out["ts"] = grid.stamps(k)
    return out


def requests(jobs: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """gpu_requests rows of the jobs that ran in the window and held GPUs."""
    ran = jobs.loc[jobs["start"].notna() & (jobs["gpus"] > 0) & (jobs["hosts"].map(len) > 0)]
    if ran.empty:
        return empty_table("gpu_requests")
    per_node = ran.assign(gpus=ran["gpus"] / ran["hosts"].map(len)).explode("hosts")
    end = per_node["end"].where(per_node["end"].notna(), run_end(per_node))
    spans = pd.DataFrame({
        "namespace": per_node["partition"].to_numpy(),
        "pod": (per_node["job"] + "-" + per_node["name"]).to_numpy(),
        "node": per_node["hosts"].to_numpy(),
        "gpus": per_node["gpus"].to_numpy(dtype=float),
        "start_ns": per_node["start"].map(lambda s: s.value).to_numpy(dtype=np.int64),
        "end_ns": end.map(lambda s: s.value).to_numpy(dtype=np.int64)})
    out = spread(spans, grid)
    out = out.groupby(["k", "ts", "namespace", "pod", "node"], as_index=False)["gpus"].sum()
    out["mig_profile"] = ""  # Slurm's gres/gpu: whole GPUs, no MIG profile
    return finish("gpu_requests", out.sort_values(["ts", "namespace", "pod", "node"]))


def to_window_end(jobs: pd.DataFrame, grid: Grid) -> tuple[pd.DataFrame, list[tuple[int, str, str]]]:
    """The jobs, each started one with neither End nor Elapsed (running, in an export without the
    Elapsed column) counted up to the window end (the export does not say when it was taken); and
    a note (row, column, note) naming each such job and the GPU-hours so counted."""
    unknown = jobs["elapsed"].isna()
    if not unknown.any():
        return jobs, []
    window_end = pd.Timestamp(grid.end_ns, tz="UTC")
    seconds = (window_end - jobs.loc[unknown, "start"]).dt.total_seconds().clip(lower=0)
    jobs = jobs.assign(elapsed=jobs["elapsed"].where(~unknown, seconds))
    counted = jobs.loc[unknown]
    return jobs, [(row, "End", f"job {job} ({state or 'no State'}) has no End and no Elapsed: counted up to "
                   f"the window end {window_end:%Y-%m-%dT%H:%M:%SZ}, {gpus * elapsed / 3600:.2f} GPU-hours "
                   f"(the export does not say when it was taken)")
                  for row, job, state, gpus, elapsed in zip(counted["row"], counted["job"], counted["state"],
                                                            counted["gpus"], counted["elapsed"])]


def run_end(jobs: pd.DataFrame) -> pd.Series:
    """Start + Elapsed: where a job without an End (still running) is counted up to."""
    return jobs["start"] + pd.to_timedelta(jobs["elapsed"], unit="s")


def scheduled(jobs: pd.DataFrame, covered: tuple) -> pd.DataFrame:
    """Table ``scheduled_nodes``: each node a job of the export names, over ``covered`` (the export's
    first start and last end in the window)."""
    nodes = sorted({host for hosts in jobs["hosts"] for host in hosts})
    if covered[0] is None or covered[1] <= covered[0] or not nodes:
        return empty_table("scheduled_nodes")
    start, end = (pd.Timestamp(moment).tz_convert("UTC") for moment in covered)
    return finish("scheduled_nodes", pd.DataFrame({"node": nodes, "start": start, "end": end}))


def job_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """The ``jobs`` evidence table."""
    out = pd.DataFrame({
        "job": jobs["job"].astype("str"), "name": jobs["name"].astype("str"),
        "user": jobs["user"].astype("str"), "partition": jobs["partition"].astype("str"),
        "nodes": jobs["hosts"].map(",".join).astype("str"),
        "gpus": jobs["gpus"].astype(float),
        "start": pd.to_datetime(jobs["start"], utc=True).astype("datetime64[ns, UTC]"),
        "end": pd.to_datetime(jobs["end"], utc=True).astype("datetime64[ns, UTC]"),
        "state": jobs["state"].astype("str"),
        "gpu_hours": (jobs["gpus"] * jobs["elapsed"] / 3600.0).astype(float)})
    return out.reset_index(drop=True)


class SacctConnector(Connector):
    """Reads ``sacct --parsable2`` output: Slurm jobs -> nodes -> GPU-hours."""

    format_name: ClassVar[str] = "sacct"
    kind: ClassVar[str] = "telemetry"
    schemas: ClassVar[dict] = {"gpu_requests": GpuRequest, "jobs": SlurmJob,
                               "scheduled_nodes": ScheduledNode}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Parse the jobs, then spread their GPUs over the window grid."""
        offset = utc_offset(self.spec.options.get("utc_offset"), self.path)
        jobs = read_jobs(self.path, offset)
        if jobs.empty:
            raise InputError(self.path, "no job lines", expected=FORMAT)
        start_ns, end_ns = utc_ns(self.ctx.start), utc_ns(self.ctx.end)
        if end_ns <= start_ns:
            raise InputError(self.path, "the case window is empty", expected="start < end")
        grid = Grid(start_ns, end_ns, int(self.ctx.step_seconds or DEFAULT_STEP))
        jobs, notes = to_window_end(jobs, grid)
        covered = self._covered(jobs, grid)
        tables = {"gpu_requests": requests(jobs, grid), "jobs": job_table(jobs),
                  "scheduled_nodes": scheduled(jobs, covered)}
        return tables | ({"notes": notes_table(notes)} if notes else {}), len(jobs), covered

    @staticmethod
    def _covered(jobs: pd.DataFrame, grid: Grid) -> tuple:
        """First start and last end of the jobs, clipped to the window."""
        window = (pd.Timestamp(grid.start_ns, tz="UTC"), pd.Timestamp(grid.end_ns, tz="UTC"))
        starts = jobs["start"].dropna()
        if starts.empty:
            return (None, None)
        ran = jobs.loc[jobs["start"].notna()]
        ends = ran["end"].where(ran["end"].notna(), run_end(ran))
        first, last = max(min(starts), window[0]), min(max(ends), window[1])
        return (first.to_pydatetime(), last.to_pydatetime())
