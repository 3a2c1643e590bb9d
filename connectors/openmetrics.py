"""OpenMetrics / Prometheus text exposition -> GPU activity, scheduler and serving tables.

The file (optionally gzipped) is streamed line by line. Only the metric families the audit uses
are kept, each in compact per-family columns (series id, timestamp, value); a label set is parsed
once per series, never once per sample. Timestamps are in seconds, as `promtool tsdb
create-blocks-from openmetrics` reads them. Samples are binned into intervals of `step` seconds
aligned to the window start; gauges are averaged per interval, counters differenced with resets
handled. Samples without a timestamp (a single scrape) are counted but cannot be placed in time.
"""
from __future__ import annotations

import gzip
import math
import re
import zlib
from array import array
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, ClassVar, Iterator

import numpy as np
import pandas as pd

from connectors.base import Connector
from connectors.errors import InputError
from schemas.serving import QueueDepth, ServiceTraffic
from schemas.usage import GpuInterval, GpuRequest, NodeInfo

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GPU_RESOURCES = frozenset({"nvidia_com_gpu", "nvidia.com/gpu"})
MS_THRESHOLD = 1e11  # 1e11 s is the year 5138; 1e11 ms is 1973
DEFAULT_STEP = 60
NS = 10**9

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_PAIR = r'[ \t]*[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*"(?:[^"\\\n]|\\.)*"[ \t]*'
_LABELS = rf"\{{(?:{_PAIR}(?:,{_PAIR})*,?[ \t]*)?\}}"
_LINE = re.compile(
    rf"({_NAME})({_LABELS})?[ \t]+(\S+)(?:[ \t]+([^\s#]\S*))?(?:[ \t]+#.*)?[ \t]*\r?$")
_PAIRS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPE = {"n": "\n", '"': '"', "\\": "\\"}
SAMPLE_FORM = 'name{label="value",...} value [timestamp in seconds]'

TABLE_COLUMNS: dict[str, dict[str, str]] = {
    "gpu_activity": {
        "node": "str", "gpu": "str", "uuid": "str", "model_name": "str", "pod": "str",
        "namespace": "str", "container": "str", "ts": "datetime64[ns, UTC]",
        "step_seconds": "int64", "busy_fraction": "float64", "source": "str"},
    "node_info": {"node": "str", "provider_id": "str", "resource_id": "str",
                  "instance_type": "str"},
    "gpu_requests": {"ts": "datetime64[ns, UTC]", "namespace": "str", "pod": "str",
                     "node": "str", "gpus": "float64"},
    "traffic": {"ts": "datetime64[ns, UTC]", "model_name": "str", "namespace": "str",
                "pod": "str", "requests": "float64", "prompt_tokens": "float64",
                "generated_tokens": "float64"},
    "queue": {"ts": "datetime64[ns, UTC]", "model_name": "str", "namespace": "str",
              "pod": "str", "running": "float64", "waiting": "float64"},
}


# --------------------------------------------------------------------------------------------
# Labels and per-family accumulation
# --------------------------------------------------------------------------------------------

def parse_labels(raw: str | None, path, lineno: int) -> dict[str, str]:
    """The label set of ``{a="x",b="y"}`` as a dict, escapes resolved; duplicates are an error."""
    labels: dict[str, str] = {}
    if not raw:
        return labels
    for key, value in _PAIRS.findall(raw):
        if key in labels:
            raise InputError(path, f"label {key!r} appears twice", row=lineno,
                             expected="each label name once per sample")
        if "\\" in value:
            value = _ESCAPE.sub(lambda m: _UNESCAPE.get(m.group(1), m.group(0)), value)
        labels[key] = value
    return labels


def label(labels: dict[str, str], name: str) -> str:
    """A label's value, preferring Prometheus' ``exported_<name>`` (the exporter's own value).

    When a scrape target label clashes with an exporter label, Prometheus keeps the exporter's
    value as ``exported_<name>`` and puts the target's (e.g. the exporter pod) in ``<name>``.
    """
    return labels.get("exported_" + name) or labels.get(name, "")


Describe = Callable[[str, dict[str, str]], "tuple | None"]


class Family:
    """Samples of a few metric names: series metadata once per label set, samples in arrays."""

    def __init__(self, columns: tuple[str, ...], describe: Describe):
        self.columns = columns
        self.describe = describe
        self.index: dict[tuple[str, str | None], int] = {}
        self.meta: list[tuple] = []
        self.sid = array("q")
        self.t = array("d")
        self.v = array("d")

    def add(self, name: str, raw: str | None, value: float, t: float, path, lineno: int) -> None:
        """Record one sample; a new label set is parsed and described first."""
        sid = self.index.get((name, raw))
        if sid is None:
            sid = self._new_series(name, raw, path, lineno)
        if sid >= 0:
            self.sid.append(sid)
            self.t.append(t)
            self.v.append(value)

    def _new_series(self, name: str, raw: str | None, path, lineno: int) -> int:
        """Describe a new series; -1 marks one the family does not want (e.g. CPU requests)."""
        meta = self.describe(name, parse_labels(raw, path, lineno))
        sid = -1
        if meta is not None:
            sid = len(self.meta)
            self.meta.append(meta)
        self.index[(name, raw)] = sid
        return sid

    def frame(self) -> pd.DataFrame:
        """One row per sample: sid, t (seconds, NaN when absent), v, and the series metadata."""
        sid = np.array(self.sid, dtype=np.int64)
        out = pd.DataFrame({"sid": sid, "t": np.array(self.t, dtype=float),
                            "v": np.array(self.v, dtype=float)})
        meta = pd.DataFrame.from_records(self.meta, columns=list(self.columns))
        for column in self.columns:
            values = meta[column].to_numpy(dtype=object)[sid]
            out[column] = pd.Series(values, index=out.index, dtype="str")
        return out


def _dcgm(name: str, labels: dict[str, str]) -> tuple:
    """Series metadata of a DCGM activity gauge."""
    return (name, labels.get("Hostname", ""), labels.get("gpu", ""), labels.get("UUID", ""),
            labels.get("modelName", ""), label(labels, "pod"), label(labels, "namespace"),
            label(labels, "container"))


def _node_info(name: str, labels: dict[str, str]) -> tuple:
    """Series metadata of kube_node_info (or kube_node_labels)."""
    instance_type = (labels.get("label_node_kubernetes_io_instance_type")
                     or labels.get("label_beta_kubernetes_io_instance_type", ""))
    return (label(labels, "node"), labels.get("provider_id", ""), instance_type)


def _pod_info(name: str, labels: dict[str, str]) -> tuple:
    """Series metadata of kube_pod_info: where a pod ran."""
    return (label(labels, "namespace"), label(labels, "pod"), label(labels, "node"))


def _gpu_request(name: str, labels: dict[str, str]) -> tuple | None:
    """Series metadata of a GPU resource request; None for other resources."""
    if labels.get("resource") not in GPU_RESOURCES:
        return None
    return (label(labels, "namespace"), label(labels, "pod"), label(labels, "container"),
            label(labels, "node"))


COUNTERS = {"vllm:request_success": "requests", "vllm:prompt_tokens": "prompt_tokens",
            "vllm:generation_tokens": "generated_tokens"}
QUEUE_GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting"}


def _serving(aliases: dict[str, str]) -> Describe:
    """Series metadata of a vLLM metric, named by its output column."""
    def describe(name: str, labels: dict[str, str]) -> tuple:
        """(column, model_name, namespace, pod, engine) of one series."""
        metric = aliases[name.removesuffix("_total")]
        return (metric, labels.get("model_name", ""), label(labels, "namespace"),
                label(labels, "pod"), labels.get("engine", ""))
    return describe


SERVING_COLUMNS = ("metric", "model_name", "namespace", "pod", "engine")


def new_families() -> tuple[dict[str, Family], dict[str, Family]]:
    """Fresh accumulators, by role and by the sample names that feed them."""
    roles = {
        "dcgm": Family(("metric", "node", "gpu", "uuid", "model_name", "pod", "namespace",
                        "container"), _dcgm),
        "node_info": Family(("node", "provider_id", "instance_type"), _node_info),
        "node_labels": Family(("node", "provider_id", "instance_type"), _node_info),
        "pod_info": Family(("namespace", "pod", "node"), _pod_info),
        "requests": Family(("namespace", "pod", "container", "node"), _gpu_request),
        "counters": Family(SERVING_COLUMNS, _serving(COUNTERS)),
        "queue": Family(SERVING_COLUMNS, _serving(QUEUE_GAUGES)),
    }
    by_name = {GR_ENGINE_ACTIVE: roles["dcgm"], GPU_UTIL: roles["dcgm"],
               "kube_node_info": roles["node_info"], "kube_node_labels": roles["node_labels"],
               "kube_pod_info": roles["pod_info"],
               "kube_pod_container_resource_requests": roles["requests"]}
    for name in COUNTERS:  # the OpenMetrics sample is <family>_total; accept the bare name too
        by_name[name] = by_name[name + "_total"] = roles["counters"]
    for name in QUEUE_GAUGES:
        by_name[name] = roles["queue"]
    return roles, by_name


# --------------------------------------------------------------------------------------------
# Streaming parser
# --------------------------------------------------------------------------------------------

@contextmanager
def open_text(path) -> Iterator:
    """The file as text lines, gunzipped when it starts with the gzip magic bytes."""
    with open(path, "rb") as probe:
        gz = probe.read(2) == b"\x1f\x8b"
    handle = gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8")
    try:
        yield handle
    finally:
        handle.close()


def _number(text: str, path, lineno: int) -> float:
    """A sample value: a float, +Inf, -Inf or NaN."""
    try:
        if "_" in text:
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise InputError(path, f"sample value {text!r} is not a number", row=lineno,
                         expected="a float, +Inf, -Inf or NaN") from None


def _timestamp(text: str, path, lineno: int) -> float:
    """A sample timestamp in seconds; milliseconds are refused."""
    try:
        t = float(text) if "_" not in text else math.nan
    except ValueError:
        t = math.nan
    if not math.isfinite(t):
        raise InputError(path, f"timestamp {text!r} is not a number", row=lineno,
                         expected="a Unix timestamp in seconds")
    if abs(t) > MS_THRESHOLD:
        raise InputError(path, "timestamp in milliseconds; expected seconds (the form promtool "
                         f"reads), got {text}", row=lineno)
    return t


def _bad_line(line: str, path, lineno: int) -> InputError:
    """Say what is wrong with a line the sample pattern rejected."""
    text = line.rstrip("\r\n")
    shown = text if len(text) <= 80 else text[:77] + "..."
    head = re.match(_NAME, text)
    labels = re.match(_LABELS, text[head.end():]) if head else None
    if head is None:
        problem = "no metric name at the start of the line"
    elif text[head.end():head.end() + 1] == "{" and labels is None:
        problem = 'bad label set, expected name="value" pairs'
    else:
        fields = text[head.end() + (labels.end() if labels else 0):].split()
        problem = (f"{len(fields)} fields after the name, expected a value and an optional "
                   "timestamp" if fields else "no value after the metric name")
    return InputError(path, f"cannot parse sample line ({problem}): {shown!r}", row=lineno,
                      expected=SAMPLE_FORM)


class Scan:
    """Counts of one pass over the file."""

    def __init__(self):
        self.rows = 0
        self.untimestamped = 0
        self.eof_line = 0


def scan_lines(lines, path, by_name: dict[str, Family], scan: Scan, first: int = 1) -> None:
    """Parse every sample line; hand the wanted ones to their family."""
    match = _LINE.match
    nan = math.nan
    for lineno, line in enumerate(lines, first):
        scan.eof_line = lineno
        if line[:1] == "#":
            if line.startswith("# EOF"):
                _after_eof(lines, path, lineno)
            continue
        m = match(line)
        if m is None:
            if not line.strip():
                continue
            raise _bad_line(line, path, lineno)
        name, raw, value, stamp = m.groups()
        v = _number(value, path, lineno)
        t = _timestamp(stamp, path, lineno) if stamp is not None else nan
        scan.rows += 1
        scan.untimestamped += stamp is None
        family = by_name.get(name)
        if family is not None:
            family.add(name, raw, v, t, path, lineno)


def _after_eof(lines, path, lineno: int) -> None:
    """Nothing but blank lines may follow ``# EOF``."""
    for extra, line in enumerate(lines, lineno + 1):
        if line.strip():
            raise InputError(path, "content after '# EOF'", row=extra,
                             expected="'# EOF' as the last line")


def read_families(path) -> tuple[dict[str, Family], Scan]:
    """Stream the file once into fresh families; decoding faults become InputErrors."""
    roles, by_name = new_families()
    scan = Scan()
    try:
        with open_text(path) as handle:
            scan_lines(handle, path, by_name, scan)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(path, f"gzip stream is truncated or corrupt ({exc})",
                         row=scan.eof_line + 1, expected="a complete gzip file") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text ({exc.reason})", row=scan.eof_line + 1,
                         expected="UTF-8 OpenMetrics text") from None
    return roles, scan


# --------------------------------------------------------------------------------------------
# Time grid
# --------------------------------------------------------------------------------------------

def _utc_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch of a datetime (naive means UTC)."""
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value)


@dataclass(frozen=True)
class Grid:
    """Intervals of ``step`` seconds aligned to the window start."""

    start_ns: int
    end_ns: int
    step: int

    @property
    def start(self) -> float:
        """Window start in seconds since the epoch."""
        return self.start_ns / NS

    @property
    def end(self) -> float:
        """Window end in seconds since the epoch."""
        return self.end_ns / NS

    def index(self, t) -> np.ndarray:
        """Interval number of each time in seconds."""
        return np.floor((np.asarray(t, dtype=float) - self.start) / self.step).astype(np.int64)

    def stamps(self, k) -> pd.DatetimeIndex:
        """Interval start times (UTC, ns) of interval numbers."""
        k = np.asarray(k, dtype=np.int64)
        return pd.to_datetime(self.start_ns + k * (self.step * NS), utc=True)

    def gauges(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Finite samples in [start, end), with their interval number ``k``."""
        keep = (frame["t"] >= self.start) & (frame["t"] < self.end) & np.isfinite(frame["v"])
        frame = frame.loc[keep]
        return frame.assign(k=self.index(frame["t"]))


def median_step(frames: list[pd.DataFrame]) -> int | None:
    """Median spacing (whole seconds) between consecutive samples, from the first frame with any."""
    for frame in frames:
        frame = frame.loc[frame["t"].notna(), ["sid", "t"]].drop_duplicates()
        if len(frame) < 2:
            continue
        order = np.lexsort((frame["t"].to_numpy(), frame["sid"].to_numpy()))
        sid, t = frame["sid"].to_numpy()[order], frame["t"].to_numpy()[order]
        gaps = np.diff(t)[sid[1:] == sid[:-1]]
        if len(gaps):
            return max(1, int(round(float(np.median(gaps)))))
    return None


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

def empty_table(name: str) -> pd.DataFrame:
    """A table with no rows and the contract's columns and dtypes."""
    return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in TABLE_COLUMNS[name].items()})


def finish(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Select and type the contract's columns, in order, with a fresh index."""
    if frame.empty:
        return empty_table(name)
    columns = TABLE_COLUMNS[name]
    out = frame[list(columns)].reset_index(drop=True)
    return out.astype({c: d for c, d in columns.items() if c != "ts"})


def most_frequent(frame: pd.DataFrame, keys: list[str], column: str,
                  carried: tuple[str, ...] = ()) -> pd.DataFrame:
    """Per ``keys``, the most frequent non-empty ``column`` (ties: latest seen, then smallest).

    ``carried`` columns come from the latest sample holding the chosen value.
    """
    named = frame.loc[frame[column] != ""].sort_values("t", kind="stable", na_position="first")
    aggs = {"n": ("v", "size"), "last": ("t", "max")}
    aggs.update({c: (c, "last") for c in carried})
    counts = named.groupby(keys + [column], sort=False).agg(**aggs).reset_index()
    counts = counts.sort_values(["n", "last", column], ascending=[False, False, True],
                                kind="stable", na_position="last")
    return counts.drop_duplicates(keys)[keys + [column, *carried]]


GPU_KEY = ["node", "gpu", "uuid"]


def prefer_engine_active(frame: pd.DataFrame) -> pd.DataFrame:
    """Per GPU: GR_ENGINE_ACTIVE samples when it has any, else GPU_UTIL / 100."""
    is_gr = frame["metric"] == GR_ENGINE_ACTIVE
    has_gr = is_gr.groupby([frame[c] for c in GPU_KEY]).transform("any")
    frame = frame.loc[is_gr == has_gr]
    scale = np.where(frame["metric"] == GR_ENGINE_ACTIVE, 1.0, 0.01)
    return frame.assign(v=frame["v"] * scale)


def gpu_activity(dcgm: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """Mean kernel-active fraction per GPU and interval, with the pod that held the GPU."""
    frame = grid.gauges(dcgm)
    frame = frame.loc[(frame["gpu"] != "") | (frame["uuid"] != "")]
    if frame.empty:
        return empty_table("gpu_activity")
    frame = prefer_engine_active(frame)
    keys = GPU_KEY + ["k"]
    busy = frame.groupby(keys, sort=True).agg(busy_fraction=("v", "mean"),
                                              source=("metric", "first")).reset_index()
    pods = most_frequent(frame, keys, "pod", ("namespace", "container"))
    models = most_frequent(frame, GPU_KEY, "model_name")
    out = busy.merge(pods, on=keys, how="left").merge(models, on=GPU_KEY, how="left")
    out[["pod", "namespace", "container", "model_name"]] = (
        out[["pod", "namespace", "container", "model_name"]].fillna(""))
    out["busy_fraction"] = out["busy_fraction"].clip(0.0, 1.0)
    out["ts"] = grid.stamps(out["k"])
    out["step_seconds"] = grid.step
    return finish("gpu_activity", out)


def resource_id(provider_id: str) -> str:
    """The billing resource id inside a Kubernetes provider id."""
    scheme, sep, rest = provider_id.partition("://")
    if not sep:
        return provider_id
    if scheme in ("aws", "gce"):
        return rest.rstrip("/").rsplit("/", 1)[-1] or provider_id
    if scheme == "azure":
        path = rest.lower()
        found = re.match(r"(/subscriptions/.+?/virtualmachinescalesets/[^/]+)/virtualmachines/",
                         path)
        return found.group(1) if found else path.rstrip("/")
    return provider_id


def node_info(info: pd.DataFrame, node_labels: pd.DataFrame) -> pd.DataFrame:
    """One row per node: provider id, resource id, instance type (kube_node_labels fallback)."""
    nodes = _latest_per_node(info)
    if nodes.empty:
        return empty_table("node_info")
    extra = _latest_per_node(node_labels)[["node", "instance_type"]]
    nodes = nodes.merge(extra, on="node", how="left", suffixes=("", "_labels"))
    missing = nodes["instance_type"] == ""
    nodes.loc[missing, "instance_type"] = nodes.loc[missing, "instance_type_labels"].fillna("")
    nodes["resource_id"] = nodes["provider_id"].map(resource_id)
    return finish("node_info", nodes.sort_values("node"))


def _latest_per_node(frame: pd.DataFrame) -> pd.DataFrame:
    """Per node, the latest non-empty provider id and instance type (no timestamp = oldest)."""
    frame = frame.loc[frame["node"] != ""].sort_values("t", kind="stable", na_position="first")
    columns = ["provider_id", "instance_type"]
    values = frame[columns].where(frame[columns] != "")
    latest = values.groupby(frame["node"]).last().fillna("")
    return latest.reset_index().astype("str")


def pod_nodes(pod_info: pd.DataFrame, grid: Grid) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The node of each pod per interval, and over the whole file (for intervals without one)."""
    per_interval = most_frequent(grid.gauges(pod_info), ["namespace", "pod", "k"], "node")
    overall = most_frequent(pod_info, ["namespace", "pod"], "node")
    return per_interval, overall


def gpu_requests(requests: pd.DataFrame, pod_info: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """GPUs requested per pod and interval: container interval means summed, node filled in."""
    frame = grid.gauges(requests)
    if frame.empty:
        return empty_table("gpu_requests")
    per_interval, overall = pod_nodes(pod_info, grid)
    frame = frame.merge(per_interval.rename(columns={"node": "node_k"}),
                        on=["namespace", "pod", "k"], how="left")
    frame = frame.merge(overall.rename(columns={"node": "node_all"}),
                        on=["namespace", "pod"], how="left")
    fill = frame["node_k"].fillna(frame["node_all"]).fillna("")
    frame["node"] = frame["node"].where(frame["node"] != "", fill)
    means = frame.groupby(["k", "namespace", "pod", "container", "node"]).v.mean()
    out = means.groupby(level=["k", "namespace", "pod", "node"]).sum().rename("gpus")
    out = out.reset_index()
    out["ts"] = grid.stamps(out["k"])
    return finish("gpu_requests", out)


SERVING_KEY = ["k", "model_name", "namespace", "pod"]


def counter_increases(counters: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """Increase between consecutive samples of each series, at the interval of the earlier one."""
    t = counters["t"]
    frame = counters.loc[(t >= grid.start) & (t <= grid.end) & np.isfinite(counters["v"])]
    frame = frame.iloc[np.lexsort((frame["t"].to_numpy(), frame["sid"].to_numpy()))]
    frame = frame.drop_duplicates(["sid", "t"], keep="last")
    sid, t, v = (frame[c].to_numpy() for c in ("sid", "t", "v"))
    same = np.zeros(len(sid), dtype=bool)
    same[1:] = sid[1:] == sid[:-1]
    later, earlier = v[1:][same[1:]], v[:-1][same[1:]]
    increase = np.where(later >= earlier, later - earlier, later)  # a drop: restarted from 0
    k = grid.index(t[:-1][same[1:]])
    return frame.loc[same].assign(increase=increase, k=k)


def traffic(counters: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """Requests and tokens per interval and pod: counter increases summed over series."""
    return traffic_from_increases(counter_increases(counters, grid), grid)


def traffic_from_increases(increases: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """The traffic table from per-series increases (metric, serving labels, k, increase)."""
    if increases.empty:
        return empty_table("traffic")
    sums = increases.groupby(SERVING_KEY + ["metric"]).increase.sum()
    return per_interval_table("traffic", sums, COUNTERS.values(), grid)


def per_interval_table(name: str, sums: pd.Series, columns, grid: Grid) -> pd.DataFrame:
    """One column per metric (absent ones 0), interval starts as ``ts``, finished as table ``name``."""
    out = sums.unstack("metric", fill_value=0.0).reset_index()
    for column in columns:
        if column not in out:
            out[column] = 0.0
    out["ts"] = grid.stamps(out["k"])
    return finish(name, out)


def queue(gauges: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """Mean running and waiting requests per interval and pod (summed over vLLM engines)."""
    frame = grid.gauges(gauges)
    if frame.empty:
        return empty_table("queue")
    means = frame.groupby(SERVING_KEY + ["engine", "metric"]).v.mean()
    sums = means.groupby(level=SERVING_KEY + ["metric"]).sum()
    return per_interval_table("queue", sums, QUEUE_GAUGES.values(), grid)


def covered(frames: list[pd.DataFrame], grid: Grid) -> tuple[datetime | None, datetime | None]:
    """First and last sample time within [start, end] of the families used."""
    times = [f["t"].to_numpy() for f in frames if len(f)]
    t = np.concatenate(times) if times else np.empty(0)
    t = t[(t >= grid.start) & (t <= grid.end)]
    if not len(t):
        return (None, None)
    # whole microseconds: a datetime holds no nanoseconds (fractional-second timestamps)
    first, last = (pd.Timestamp(int(round(x * 1_000_000)) * 1000, tz="UTC") for x in (t.min(), t.max()))
    return (first.to_pydatetime(), last.to_pydatetime())


# --------------------------------------------------------------------------------------------
# Connector
# --------------------------------------------------------------------------------------------

class OpenMetricsConnector(Connector):
    """Reads OpenMetrics / Prometheus text (optionally .gz) with timestamps in seconds."""

    format_name: ClassVar[str] = "openmetrics"
    kind: ClassVar[str] = "telemetry"
    schemas: ClassVar[dict] = {"gpu_activity": GpuInterval, "node_info": NodeInfo,
                               "gpu_requests": GpuRequest, "traffic": ServiceTraffic,
                               "queue": QueueDepth}

    #: samples without a timestamp in the last fetch (a snapshot scrape); they make no rows
    untimestamped: int = 0
    #: the interval length used by the last fetch, in seconds
    step_seconds: int | None = None

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Stream the file, then build every table on one grid."""
        roles, scan = read_families(self.path)
        if scan.rows == 0:
            raise InputError(self.path, "no samples in the file", expected=SAMPLE_FORM)
        tables, covered_span = self._tables(roles)
        self.untimestamped = scan.untimestamped
        return tables, scan.rows, covered_span

    def _tables(self, roles) -> tuple[dict[str, pd.DataFrame], tuple]:
        """Every normalised table from the parsed families, on one grid, and the time covered."""
        frames = {role: family.frame() for role, family in roles.items()}
        grid = self._grid(frames)
        tables = {
            "gpu_activity": gpu_activity(frames["dcgm"], grid),
            "node_info": node_info(frames["node_info"], frames["node_labels"]),
            "gpu_requests": gpu_requests(frames["requests"], frames["pod_info"], grid),
            "traffic": traffic(frames["counters"], grid),
            "queue": queue(frames["queue"], grid),
        }
        self.step_seconds = grid.step
        return tables, covered(list(frames.values()), grid)

    def _grid(self, frames: dict[str, pd.DataFrame]) -> Grid:
        """The case's step, else the median DCGM spacing, else that of any family, else 60 s."""
        start_ns, end_ns = _utc_ns(self.ctx.start), _utc_ns(self.ctx.end)
        if end_ns <= start_ns:
            raise InputError(self.path, "the case window is empty", expected="start < end")
        step = self.ctx.step_seconds
        if step is None:
            ordered = [frames["dcgm"]] + [f for role, f in frames.items() if role != "dcgm"]
            step = median_step(ordered) or DEFAULT_STEP
        if int(step) <= 0:
            raise InputError(self.path, f"step {step} is not positive", expected="step_seconds > 0")
        return Grid(start_ns, end_ns, int(step))
