"""What normalisation hands on: the telemetry tables, the kernel profiles, and which billed
resource is which telemetry node.

Built by :mod:`audit.normalise`; read by the GPU split, reconciliation, ranking, evidence and the
audit.json writer. Every table keeps the columns its pandera model names (schemas/usage.py,
schemas/serving.py), and is empty with those columns where no source has it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Mapping

import pandas as pd

from connectors.telemetry.families import SERIES_LABEL_COLUMNS

if TYPE_CHECKING:
    from connectors.profiles.events import Trace

ACTIVITY_COLUMNS = ["node", "gpu", "uuid", "model_name", "pod", "namespace", "container", "ts",
                    "step_seconds", "busy_fraction", "source"]
REQUEST_COLUMNS = ["ts", "namespace", "pod", "node", "gpus", "mig_profile"]
#: the nodes a scheduler source lists every job of, from start to end (schemas.usage.ScheduledNode)
SCHEDULED_COLUMNS = ["node", "start", "end"]
TRAFFIC_COLUMNS = ["ts", "model_name", "namespace", "pod", "requests", "prompt_tokens", "generated_tokens"]
QUEUE_COLUMNS = ["ts", "model_name", "namespace", "pod", "running", "waiting"]
NODE_COLUMNS = ["node", "provider_id", "resource_id", "instance_type"]
SERVING_STATS_COLUMNS = ["ts", "family", "model_name", "namespace", "pod", "requests", "failures",
                         "received", "queue_seconds", "queue_requests", "queue_seconds_per_request",
                         "batch_items", "batch_steps", "batch_size", "tokens_per_step", "running",
                         "waiting", "compute_input_seconds", "compute_infer_seconds",
                         "compute_output_seconds", "prefix_queries", "prefix_hits",
                         "prefix_hit_rate", "kv_cache_usage"]
EVIDENCE_COLUMNS = ["node", "gpu", "uuid", "ts", "sm_active", "tensor_active", "dram_active",
                    "fb_used_mib", "power_watts"]
REPLICA_COLUMNS = ["ts", "namespace", "kind", "name", "spec_replicas", "available_replicas",
                   "current_replicas", "desired_replicas", "min_replicas", "max_replicas"]
#: samples excluded from a source (connectors.telemetry.validity), counted per metric and reason
EXCLUDED_COLUMNS = ["metric", "reason", "count", "expected", "example", "first_ts"]
RESET_COLUMNS = ["metric", "resets"]
#: GPU-intervals whose every kernel-activity sample was excluded
UNMEASURED_COLUMNS = ["node", "gpu", "uuid", "ts", "metric"]
#: a request log's lines per interval and class (connectors.telemetry.access_log ``requests_detail``)
#: a collector bundle's sweep points (schemas.profile.SweepPoint; connectors.profiles.bundle)
SWEEP_COLUMNS = ["batch_size", "concurrency", "requests", "error_rate", "inferences_per_s", "latency_p50_ms",
                 "latency_p95_ms", "latency_p99_ms", "slo_ms", "max_error_rate"]
HISTOGRAM_COLUMNS = ["ts", "family", "model_name", "namespace", "pod", "histogram", "le", "requests"]
REQUEST_COUNT_COLUMNS = ["ts", "pod", "lines", "successful", "failed", "health_checks", "unparseable",
                         "other_paths"]


def empty_table(columns: list[str]) -> pd.DataFrame:
    """A table with the given columns and no row."""
    return pd.DataFrame({c: [] for c in columns})


@dataclass(frozen=True)
class GapSensitivity:
    """How much g depends on its window (METHOD §3; connectors/profiles/window.py): g over the
    served traffic's window (``served_window``) and over the trace's whole GPU window
    (``full_window``), the kernels wholly outside the served window, their kernel-active time and
    the GPU-window time outside it, and why the trace's profiler steps were not used ('' if not
    applicable)."""

    served_window: Decimal | None
    full_window: Decimal | None
    window_us: Decimal
    excluded_kernels: int
    excluded_kernel_us: Decimal
    excluded_us: Decimal
    note: str = ""


@dataclass(frozen=True)
class ProfileSummary:
    """A service's kernel profile reduced to what the split and reconciliation need.

    ``trace`` is the trace the profiles connector parsed (its columns), kept for the evidence
    stage so that no trace is parsed twice; None for a profile given as tables only. ``sweep`` is a
    collector bundle's batch-size × concurrency sweep (``SWEEP_COLUMNS``), empty for other profiles.
    ``kernel_active_us`` is the served traffic's (inside g's window, ``gap_basis``);
    ``gpu_window_us`` the trace's GPU window (or its request spans); ``gap_sensitivity`` None for a
    profile table without the window columns.
    """

    name: str
    service: str
    path: str
    gap_ratio: Decimal | None
    gap_basis: str
    kernel_active_us: Decimal
    gpu_window_us: Decimal
    requests: int | None
    prompt_tokens: int | None
    generated_tokens: int | None
    summary: Mapping[str, Any]
    kernels: pd.DataFrame
    categories: pd.DataFrame
    trace: Trace | None = field(default=None, repr=False)
    sweep: pd.DataFrame = field(default_factory=lambda: empty_table(SWEEP_COLUMNS), repr=False)
    gap_sensitivity: GapSensitivity | None = None
    #: a rank set's files and ranks (connectors/profiles/rankset.py ``RankSet``), and its ``ranks``
    #: table (each rank's own figures); None for a profile of one trace
    rank_set: Any = field(default=None, repr=False)
    ranks: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def trace_label(self) -> str:
        """The profile's file name; a rank set's folder name with its number of ranks."""
        name = self.path.rstrip("/").rsplit("/", 1)[-1]
        if self.rank_set is None:
            return name
        count = len(self.rank_set.files)
        return f"{name}/, {count} rank{'s' if count != 1 else ''}"

    @property
    def kernel_seconds_per_request(self) -> Decimal | None:
        if not self.requests:
            return None
        return self.kernel_active_us / Decimal(1_000_000) / Decimal(self.requests)


@dataclass(frozen=True)
class Telemetry:
    """Telemetry tables concatenated over sources (empty frames when absent).

    ``activity`` (schemas.usage.GpuInterval), ``nodes``, ``requests`` (GpuRequest), ``traffic``
    (schemas.serving.ServiceTraffic, each row naming its ``source``), ``queue`` (QueueDepth); ``step``
    is the interval in seconds.
    """

    activity: pd.DataFrame
    nodes: pd.DataFrame
    requests: pd.DataFrame
    traffic: pd.DataFrame
    queue: pd.DataFrame
    step: int
    #: evidence only (never moves money): serving statistics, DCGM evidence, replica counts,
    #: each row with the ``source`` ("<name> (<format>)") that read it
    serving: pd.DataFrame = field(default_factory=lambda: empty_table(SERVING_STATS_COLUMNS + ["source"]))
    gpu_evidence: pd.DataFrame = field(default_factory=lambda: empty_table(EVIDENCE_COLUMNS + ["source"]))
    replicas: pd.DataFrame = field(default_factory=lambda: empty_table(REPLICA_COLUMNS + ["source"]))
    #: the names of the series a source holds that no family reads (``metric``, ``source``)
    unread_series: pd.DataFrame = field(default_factory=lambda: empty_table(["metric", "source"]))
    #: each distinct (series name, namespace, pod, node, GPU model) a source's families name, with its
    #: ``source``: the pods and GPUs named on series no table of pods reads (connectors.telemetry.families)
    series_labels: pd.DataFrame = field(default_factory=lambda: empty_table(SERIES_LABEL_COLUMNS + ["source"]))
    #: label values one source names and another does not (see ``mismatches.label_mismatches``)
    label_mismatches: tuple[Mapping[str, Any], ...] = ()
    #: (kind, namespace, name) of each deployment / HPA -> the service it scales, or None
    replica_services: Mapping[tuple[str, str, str], str | None] = field(default_factory=dict)
    #: data quality, each row with its ``source``: samples excluded (out of range, not finite,
    #: negative counter values), counter resets, and GPU-intervals left with no valid sample
    excluded_samples: pd.DataFrame = field(default_factory=lambda: empty_table(EXCLUDED_COLUMNS + ["source"]))
    counter_resets: pd.DataFrame = field(default_factory=lambda: empty_table(RESET_COLUMNS + ["source"]))
    unmeasured_intervals: pd.DataFrame = field(
        default_factory=lambda: empty_table(UNMEASURED_COLUMNS + ["source"]))
    #: request logs' line counts per interval and class, each row with its ``source``
    request_counts: pd.DataFrame = field(default_factory=lambda: empty_table(REQUEST_COUNT_COLUMNS + ["source"]))
    #: per-request token histograms (connectors.telemetry.phase_families), each row with its ``source``
    histograms: pd.DataFrame = field(default_factory=lambda: empty_table(HISTOGRAM_COLUMNS + ["source"]))
    #: the telemetry sources that read samples but none in the window: (name, samples read, first and
    #: last sample time of the source where its reader knows them, else None)
    outside_window: tuple[tuple[str, int, Any, Any], ...] = ()
    #: the nodes a scheduler source (``sacct``) lists every job of, from start to end, each row with
    #: its ``source``: a GPU there that no request holds was held by no workload (unallocated)
    scheduled: pd.DataFrame = field(default_factory=lambda: empty_table(SCHEDULED_COLUMNS + ["source"]))


@dataclass(frozen=True)
class NodeMap:
    """Which billed resource is which telemetry node (several nodes for a scale set).

    ``nodes_of`` maps a billing resource key (:func:`audit.lines.resource_key`) to its nodes, from
    the telemetry's node table and the case's ``[nodes]``; ``cluster`` holds every such resource and
    ``with_gpus`` those whose nodes telemetry saw GPUs on.
    """

    nodes_of: Mapping[str, tuple[str, ...]]
    cluster: frozenset[str]
    with_gpus: frozenset[str]


def node_types(nodes: pd.DataFrame) -> dict[str, str]:
    """Each telemetry node's instance type (kube-state-metrics' node label), where it has one."""
    if not len(nodes) or "instance_type" not in nodes.columns:
        return {}
    return {str(node): str(kind) for node, kind in zip(nodes["node"], nodes["instance_type"])
            if isinstance(kind, str) and kind}


@dataclass(frozen=True)
class Scheduled:
    """The node-spans a scheduler source lists every job of (``Telemetry.scheduled``), asked of an
    interval: ``(node, ts) in scheduled`` where the interval from ``ts`` (``step`` long, cut at the
    window's ``end``) lies wholly in one of the node's spans."""

    spans: Mapping[str, tuple[tuple[datetime, datetime], ...]]
    step: timedelta
    end: datetime

    def __contains__(self, key) -> bool:
        node, ts = key
        stop = min(ts + self.step, self.end)
        return any(start <= ts and stop <= end for start, end in self.spans.get(node, ()))


def scheduled_spans(scheduled: pd.DataFrame, step: int, end: datetime) -> Scheduled:
    """:class:`Scheduled` of the ``scheduled`` table (node, start, end), on the split's grid."""
    spans: dict[str, list] = {}
    for node, start, stop in zip(scheduled["node"], scheduled["start"], scheduled["end"]):
        spans.setdefault(str(node), []).append((pd.Timestamp(start).to_pydatetime(), pd.Timestamp(stop).to_pydatetime()))
    return Scheduled({node: tuple(found) for node, found in spans.items()}, timedelta(seconds=step), end)


def labelled_pods(activity: pd.DataFrame) -> pd.DataFrame:
    """The distinct (node, namespace, pod) that DCGM pod labels name in any interval: the pods whose
    GPU telemetry knows. A GPU request of another pod on the node is placed by the scheduler's
    requests on the node's GPUs without pod labels (METHOD §3)."""
    if not len(activity):
        return pd.DataFrame(columns=["node", "namespace", "pod"])
    named = activity.loc[(activity["pod"] != "").to_numpy(dtype=bool), ["node", "namespace", "pod"]]
    return named.drop_duplicates()
