"""OpenMetrics / Prometheus text exposition -> GPU activity, scheduler and serving tables.

The file (optionally gzipped) is streamed line by line. Only the metric families the audit uses
are kept, each in compact per-family columns (series id, timestamp, value); a label set is parsed
once per series, never once per sample. Timestamps are in seconds, as `promtool tsdb
create-blocks-from openmetrics` reads them. Samples are binned into intervals of `step` seconds
aligned to the window start; gauges are averaged per interval, counters differenced with resets
handled. Samples without a timestamp (a single scrape) are counted but cannot be placed in time.

Families: DCGM busy (GR_ENGINE_ACTIVE / GPU_UTIL) and evidence gauges, kube-state-metrics nodes,
pods, GPU requests, deployments and HPAs, and the serving servers (vLLM V0/V1, Triton, TGI); the
metric-to-column table is in docs/telemetry.md.
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
from schemas.serving import QueueDepth, ServiceTraffic, ServingStats
from schemas.usage import GpuEvidence, GpuInterval, GpuRequest, NodeInfo, Replicas

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
                "generated_tokens": "float64", "family": "str"},
    "queue": {"ts": "datetime64[ns, UTC]", "model_name": "str", "namespace": "str",
              "pod": "str", "running": "float64", "waiting": "float64"},
    "serving_stats": {
        "ts": "datetime64[ns, UTC]", "family": "str", "model_name": "str", "namespace": "str",
        "pod": "str", "requests": "float64", "failures": "float64",
        "queue_seconds": "float64", "queue_requests": "float64",
        "queue_seconds_per_request": "float64", "batch_items": "float64",
        "batch_steps": "float64", "batch_size": "float64", "tokens_per_step": "float64",
        "running": "float64", "waiting": "float64", "compute_input_seconds": "float64",
        "compute_infer_seconds": "float64", "compute_output_seconds": "float64",
        "prefix_queries": "float64", "prefix_hits": "float64", "prefix_hit_rate": "float64",
        "kv_cache_usage": "float64"},
    "gpu_evidence": {
        "node": "str", "gpu": "str", "uuid": "str", "ts": "datetime64[ns, UTC]",
        "sm_active": "float64", "tensor_active": "float64", "dram_active": "float64",
        "fb_used_mib": "float64", "power_watts": "float64"},
    "replicas": {
        "ts": "datetime64[ns, UTC]", "namespace": "str", "kind": "str", "name": "str",
        "spec_replicas": "float64", "available_replicas": "float64",
        "current_replicas": "float64", "desired_replicas": "float64",
        "min_replicas": "float64", "max_replicas": "float64"},
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

#: serving-server counters beyond vLLM's request/token counters: sample name (``_total`` optional
#: where the family is a counter) -> (family, column of the per-interval increase). Histogram
#: ``_sum`` / ``_count`` samples are counters too. Units are converted by SERVING_SCALE.
SERVING_COUNTERS = {
    # Triton (labels model, version); *_duration_us are cumulative microseconds
    "nv_inference_request_success": ("triton", "requests"),
    "nv_inference_request_failure": ("triton", "failures"),
    "nv_inference_count": ("triton", "batch_items"),
    "nv_inference_exec_count": ("triton", "batch_steps"),
    "nv_inference_request_duration_us": ("triton", "request_seconds"),
    "nv_inference_queue_duration_us": ("triton", "queue_seconds"),
    "nv_inference_compute_input_duration_us": ("triton", "compute_input_seconds"),
    "nv_inference_compute_infer_duration_us": ("triton", "compute_infer_seconds"),
    "nv_inference_compute_output_duration_us": ("triton", "compute_output_seconds"),
    # Text Generation Inference (no model label: the scrape target names the pod)
    "tgi_request_count": ("tgi", "received"),
    "tgi_request_success": ("tgi", "requests"),
    "tgi_request_failure": ("tgi", "failures"),
    "tgi_batch_inference_count": ("tgi", "batch_steps"),
    "tgi_request_input_length_sum": ("tgi", "prompt_tokens"),
    "tgi_request_generated_tokens_sum": ("tgi", "generated_tokens"),
    "tgi_request_queue_duration_sum": ("tgi", "queue_seconds"),
    "tgi_request_queue_duration_count": ("tgi", "queue_requests"),
    # vLLM extras: V1 and V0 names
    "vllm:request_queue_time_seconds_sum": ("vllm", "queue_seconds"),
    "vllm:request_queue_time_seconds_count": ("vllm", "queue_requests"),
    "vllm:time_in_queue_requests_sum": ("vllm", "queue_seconds_v0"),
    "vllm:time_in_queue_requests_count": ("vllm", "queue_requests_v0"),
    "vllm:iteration_tokens_total_sum": ("vllm", "batch_items"),
    "vllm:iteration_tokens_total_count": ("vllm", "batch_steps"),
    "vllm:prefix_cache_queries": ("vllm", "prefix_queries"),
    "vllm:prefix_cache_hits": ("vllm", "prefix_hits"),
}
#: serving-server gauges: sample name -> (family, column); means per interval
SERVING_GAUGES = {
    "nv_inference_pending_request_count": ("triton", "waiting"),
    "tgi_queue_size": ("tgi", "waiting"),
    "tgi_batch_current_size": ("tgi", "running"),
    "vllm:kv_cache_usage_perc": ("vllm", "kv_cache_usage"),
    "vllm:gpu_cache_usage_perc": ("vllm", "kv_cache_usage_v0"),
    "vllm:gpu_prefix_cache_hit_rate": ("vllm", "prefix_hit_rate_v0"),
}
#: gauges that are fractions: averaged over a pod's engines (counts are summed)
FRACTION_GAUGES = frozenset({"kv_cache_usage", "kv_cache_usage_v0", "prefix_hit_rate_v0"})
SERVING_SCALE = {("triton", c): 1e-6 for c in ("request_seconds", "queue_seconds",
                                              "compute_input_seconds", "compute_infer_seconds",
                                              "compute_output_seconds")}
#: the counter each family's request counts come from (provenance in the audit)
REQUEST_COUNTER = {"vllm": "vllm:request_success_total", "triton": "nv_inference_request_success",
                   "tgi": "tgi_request_success"}
#: DCGM evidence gauges (they never change busy_fraction): sample name -> column
DCGM_EVIDENCE = {"DCGM_FI_PROF_SM_ACTIVE": "sm_active",
                 "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active",
                 "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active",
                 "DCGM_FI_DEV_FB_USED": "fb_used_mib", "DCGM_FI_DEV_POWER_USAGE": "power_watts"}
#: kube-state-metrics replica gauges: name -> (kind, column); ``kube_hpa_*`` are the pre-2.0 names
REPLICA_GAUGES = {
    "kube_deployment_spec_replicas": ("deployment", "spec_replicas"),
    "kube_deployment_status_replicas_available": ("deployment", "available_replicas"),
    "kube_deployment_status_replicas": ("deployment", "status_replicas"),
    "kube_horizontalpodautoscaler_status_current_replicas": ("hpa", "current_replicas"),
    "kube_horizontalpodautoscaler_status_desired_replicas": ("hpa", "desired_replicas"),
    "kube_horizontalpodautoscaler_spec_min_replicas": ("hpa", "min_replicas"),
    "kube_horizontalpodautoscaler_spec_max_replicas": ("hpa", "max_replicas"),
    "kube_hpa_status_current_replicas": ("hpa", "current_replicas"),
    "kube_hpa_status_desired_replicas": ("hpa", "desired_replicas"),
    "kube_hpa_spec_min_replicas": ("hpa", "min_replicas"),
    "kube_hpa_spec_max_replicas": ("hpa", "max_replicas"),
}


def _serving(aliases: dict[str, str]) -> Describe:
    """Series metadata of a vLLM metric, named by its output column."""
    def describe(name: str, labels: dict[str, str]) -> tuple:
        """(column, family, model_name, namespace, pod, engine) of one series."""
        metric = aliases[name.removesuffix("_total")]
        return (metric, "vllm", labels.get("model_name", ""), label(labels, "namespace"),
                label(labels, "pod"), labels.get("engine", ""))
    return describe


def _server_family(table: dict[str, tuple[str, str]]) -> Describe:
    """Series metadata of a Triton, TGI or vLLM serving metric, named by its output column."""
    def describe(name: str, labels: dict[str, str]) -> tuple:
        """(column, family, model_name, namespace, pod, engine) of one series.

        Triton names the model in ``model`` (its ``version`` plays the engine's part); vLLM in
        ``model_name``; TGI not at all (the pod does).
        """
        family, column = table.get(name) or table[name.removesuffix("_total")]
        model = labels.get("model_name") or labels.get("model", "")
        engine = labels.get("engine") or labels.get("version", "")
        return (column, family, model, label(labels, "namespace"), label(labels, "pod"), engine)
    return describe


def _dcgm_evidence(name: str, labels: dict[str, str]) -> tuple:
    """Series metadata of a DCGM evidence gauge: its column and the GPU."""
    return (DCGM_EVIDENCE[name], labels.get("Hostname", ""), labels.get("gpu", ""),
            labels.get("UUID", ""))


def _replicas(name: str, labels: dict[str, str]) -> tuple:
    """Series metadata of a replica gauge: column, kind, namespace, deployment or HPA name."""
    kind, column = REPLICA_GAUGES[name]
    owner = (label(labels, "deployment") if kind == "deployment"
             else label(labels, "horizontalpodautoscaler") or label(labels, "hpa"))
    return (column, kind, label(labels, "namespace"), owner)


SERVING_COLUMNS = ("metric", "family", "model_name", "namespace", "pod", "engine")
EVIDENCE_COLUMNS = ("metric", "node", "gpu", "uuid")
REPLICA_COLUMNS = ("metric", "kind", "namespace", "name")


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
        "server_counters": Family(SERVING_COLUMNS, _server_family(SERVING_COUNTERS)),
        "server_gauges": Family(SERVING_COLUMNS, _server_family(SERVING_GAUGES)),
        "dcgm_evidence": Family(EVIDENCE_COLUMNS, _dcgm_evidence),
        "replicas": Family(REPLICA_COLUMNS, _replicas),
    }
    by_name = {GR_ENGINE_ACTIVE: roles["dcgm"], GPU_UTIL: roles["dcgm"],
               "kube_node_info": roles["node_info"], "kube_node_labels": roles["node_labels"],
               "kube_pod_info": roles["pod_info"],
               "kube_pod_container_resource_requests": roles["requests"]}
    for name in COUNTERS:  # the OpenMetrics sample is <family>_total; accept the bare name too
        by_name[name] = by_name[name + "_total"] = roles["counters"]
    for name in QUEUE_GAUGES:
        by_name[name] = roles["queue"]
    for name in SERVING_COUNTERS:
        by_name[name] = roles["server_counters"]
        if not name.endswith(("_sum", "_count")):
            by_name[name + "_total"] = roles["server_counters"]
    for name in SERVING_GAUGES:
        by_name[name] = roles["server_gauges"]
    for name in DCGM_EVIDENCE:
        by_name[name] = roles["dcgm_evidence"]
    for name in REPLICA_GAUGES:
        by_name[name] = roles["replicas"]
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
    """The traffic table from per-series increases (metric, family, serving labels, k, increase).

    Rows of every serving family (vLLM, Triton, TGI) that counts requests or tokens; ``family``
    says which. Other serving counters (queue time, batches) are left to ``serving_stats``.
    """
    if increases.empty:
        return empty_table("traffic")
    increases = increases.loc[increases["metric"].isin(list(COUNTERS.values()))]
    if increases.empty:
        return empty_table("traffic")
    sums = increases.groupby(SERVING_KEY + ["family", "metric"]).increase.sum()
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


# ---- serving statistics, GPU evidence, replicas: built from per-key means and increases, so
# ---- that the file connectors (sample means) and Prometheus (pooled sums / counts) share them

SERVING_STAT_KEY = ["k", "family", "model_name", "namespace", "pod"]


def gauge_means(frame: pd.DataFrame, grid: Grid, keys: list[str]) -> pd.Series:
    """Per key and interval, the mean of the finite samples inside the window."""
    frame = grid.gauges(frame)
    if frame.empty:
        return pd.Series([], dtype=float)
    return frame.groupby(keys + ["k"]).v.mean()


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    """num / den where den > 0, else NaN (not measured, never 0)."""
    return (num / den.where(den > 0)).astype(float)


def serving_stats(increases: pd.DataFrame, gauges: pd.Series, queue_table: pd.DataFrame,
                  grid: Grid) -> pd.DataFrame:
    """Queue time, batch size, occupancy and prefix-cache figures per interval, pod and family.

    ``increases``: per-series counter increases (metric, family, model_name, namespace, pod, k,
    increase) of vLLM, Triton and TGI. ``gauges``: interval means indexed by (metric, family,
    model_name, namespace, pod, engine, k). ``queue_table``: the ``queue`` table (vLLM running /
    waiting). A figure no series gives is NaN (not measured), never 0.
    """
    parts = []
    if len(increases):
        inc = increases[SERVING_STAT_KEY + ["metric", "increase"]].copy()
        scale = [SERVING_SCALE.get(pair, 1.0) for pair in zip(inc["family"], inc["metric"])]
        inc["increase"] = inc["increase"].to_numpy(dtype=float) * np.asarray(scale, dtype=float)
        parts.append(inc.groupby(SERVING_STAT_KEY + ["metric"]).increase.sum())
    if len(gauges):
        g = gauges.rename("v").reset_index()
        fraction = g["metric"].isin(FRACTION_GAUGES)
        parts.append(g.loc[~fraction].groupby(SERVING_STAT_KEY + ["metric"]).v.sum())
        parts.append(g.loc[fraction].groupby(SERVING_STAT_KEY + ["metric"]).v.mean())
    if len(queue_table):
        q = queue_table.assign(family="vllm", k=(queue_table["ts"].astype("int64") - grid.start_ns)
                               // (grid.step * NS))
        q = q.melt(id_vars=SERVING_STAT_KEY, value_vars=["running", "waiting"], var_name="metric")
        parts.append(q.set_index(SERVING_STAT_KEY + ["metric"])["value"])
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_table("serving_stats")
    wide = pd.concat(parts).groupby(level=SERVING_STAT_KEY + ["metric"]).sum(min_count=1)
    out = wide.unstack("metric").reset_index()
    out.columns.name = None
    for column in list(TABLE_COLUMNS["serving_stats"]) + ["queue_seconds_v0", "queue_requests_v0",
                                                         "kv_cache_usage_v0", "prefix_hit_rate_v0"]:
        if column not in out:
            out[column] = np.nan
    v0 = out["queue_seconds"].isna() & out["queue_requests"].isna()
    out.loc[v0, "queue_seconds"] = out.loc[v0, "queue_seconds_v0"]
    out.loc[v0, "queue_requests"] = out.loc[v0, "queue_requests_v0"]
    out["kv_cache_usage"] = out["kv_cache_usage"].fillna(out["kv_cache_usage_v0"])
    triton = (out["family"] == "triton") & out["queue_seconds"].notna()
    answered = out[["requests", "failures"]].sum(axis=1, min_count=1)
    out.loc[triton, "queue_requests"] = answered[triton]
    out["queue_seconds_per_request"] = _ratio(out["queue_seconds"], out["queue_requests"])
    per_step = _ratio(out["batch_items"], out["batch_steps"])
    out["batch_size"] = np.where(out["family"] == "triton", per_step,
                                 np.where(out["family"] == "tgi", out["running"], np.nan))
    out["tokens_per_step"] = np.where(out["family"] == "vllm", per_step, np.nan)
    out["prefix_hit_rate"] = _ratio(out["prefix_hits"], out["prefix_queries"]).fillna(
        out["prefix_hit_rate_v0"])
    out["ts"] = grid.stamps(out["k"])
    return finish("serving_stats", out.sort_values(SERVING_STAT_KEY, kind="stable"))


def gpu_evidence(means: pd.Series, grid: Grid) -> pd.DataFrame:
    """DCGM evidence columns per GPU and interval (means indexed by metric, node, gpu, uuid, k).

    Evidence only: busy_fraction (gpu_activity) alone moves money.
    """
    if not len(means):
        return empty_table("gpu_evidence")
    frame = means.rename("v").reset_index()
    frame = frame.loc[(frame["gpu"] != "") | (frame["uuid"] != "")]
    if frame.empty:
        return empty_table("gpu_evidence")
    out = frame.pivot_table(index=GPU_KEY + ["k"], columns="metric", values="v",
                            aggfunc="sum").reset_index()
    out.columns.name = None
    for column in DCGM_EVIDENCE.values():
        if column not in out:
            out[column] = np.nan
    out["ts"] = grid.stamps(out["k"])
    return finish("gpu_evidence", out.sort_values(GPU_KEY + ["k"], kind="stable"))


def replicas(means: pd.Series, grid: Grid) -> pd.DataFrame:
    """Replica counts per deployment / HPA and interval (means indexed by metric, kind,
    namespace, name, k); available falls back to status.replicas where a ksm lacks it."""
    if not len(means):
        return empty_table("replicas")
    frame = means.rename("v").reset_index()
    frame = frame.loc[frame["name"] != ""]
    if frame.empty:
        return empty_table("replicas")
    key = ["kind", "namespace", "name", "k"]
    out = frame.pivot_table(index=key, columns="metric", values="v", aggfunc="sum").reset_index()
    out.columns.name = None
    for column in [c for _, c in REPLICA_GAUGES.values()]:
        if column not in out:
            out[column] = np.nan
    out["available_replicas"] = out["available_replicas"].fillna(out["status_replicas"])
    out["ts"] = grid.stamps(out["k"])
    return finish("replicas", out.sort_values(key, kind="stable"))


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
                               "queue": QueueDepth, "serving_stats": ServingStats,
                               "gpu_evidence": GpuEvidence, "replicas": Replicas}

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
        increases = pd.concat([counter_increases(frames["counters"], grid),
                               counter_increases(frames["server_counters"], grid)],
                              ignore_index=True)
        queue_table = queue(frames["queue"], grid)
        tables = {
            "gpu_activity": gpu_activity(frames["dcgm"], grid),
            "node_info": node_info(frames["node_info"], frames["node_labels"]),
            "gpu_requests": gpu_requests(frames["requests"], frames["pod_info"], grid),
            "traffic": traffic_from_increases(increases, grid),
            "queue": queue_table,
            "serving_stats": serving_stats(
                increases, gauge_means(frames["server_gauges"], grid, list(SERVING_COLUMNS)),
                queue_table, grid),
            "gpu_evidence": gpu_evidence(
                gauge_means(frames["dcgm_evidence"], grid, list(EVIDENCE_COLUMNS)), grid),
            "replicas": replicas(gauge_means(frames["replicas"], grid, list(REPLICA_COLUMNS)),
                                 grid),
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
