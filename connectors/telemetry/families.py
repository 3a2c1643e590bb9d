"""The metric families the audit reads, and their per-family sample accumulators.

Which sample names feed which table (DCGM busy and evidence gauges, kube-state-metrics nodes,
pods, GPU requests, deployments and HPAs, the serving servers vLLM V0/V1, Triton and TGI), how
each series' labels become its metadata, and ``Family``: compact per-family columns (series id,
timestamp, value) with a label set parsed once per series, never once per sample. The text
parser (``omtext``), the Prometheus dump reader and the Prometheus connector all fill or consult
these; the metric-to-column table is in docs/telemetry.md.
"""
from __future__ import annotations

import difflib
import functools
import re
from array import array
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from connectors.bounds import shown
from connectors.errors import InputError
from connectors.telemetry.phase_families import PHASE_COUNTERS, phase_column

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GPU_RESOURCES = frozenset({"nvidia_com_gpu", "nvidia.com/gpu"})
#: a MIG instance requested through the scheduler (the device plugin's mixed strategy):
#: ``nvidia.com/mig-3g.40gb``, kube-state-metrics' ``nvidia_com_mig_3g_40gb``
MIG_RESOURCE = re.compile(r"^nvidia(?:\.com/mig-|_com_mig_)(\d+g)[._](.+)$")
KSM_REQUESTS = "kube_pod_container_resource_requests"
#: kube-state-metrics v1's name of a pod's GPU request (no ``resource`` label: the name says it)
KSM_V1_GPU_REQUESTS = "kube_pod_container_resource_requests_nvidia_gpu_devices"
KSM_REQUEST_SERIES = f"{KSM_REQUESTS}[_nvidia_gpu_devices]"
#: what each telemetry format's ``gpu_requests`` table is read from: the audit names the requests'
#: source by it (a check on the requests says which series or field it read)
REQUEST_SERIES = {"openmetrics": KSM_REQUEST_SERIES, "prometheus": KSM_REQUEST_SERIES,
                  "prom_dump": KSM_REQUEST_SERIES,
                  "sacct": "sacct AllocTRES gres/gpu", "opencost": "OpenCost allocation gpuHours"}
#: how near a series name must be to a GPU-request series' (difflib ratio) to be named in its stead
NEAR = 0.6


def near_requests(names: Iterable[str]) -> list[str]:
    """Of ``names`` (series no family reads), those near kube_pod_container_resource_requests,
    nearest first (rule 5: where no GPU request is read, the audit names what the data holds instead)."""
    names = sorted(names)
    return difflib.get_close_matches(KSM_REQUESTS, names, n=len(names), cutoff=NEAR) if names else []

_PAIRS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPE = {"n": "\n", '"': '"', "\\": "\\"}


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
            raise InputError(path, f"label {shown(key)} appears twice", row=lineno,
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
        #: the distinct (series name, namespace, pod, node, GPU model) its series name: which pods
        #: and GPUs each family names, kept once per series, never per sample (``series_labels``)
        self.named: set[tuple[str, str, str, str, str]] = set()
        #: where each sample was read (files, file per sample, row per sample), for finding
        #: repeated samples (``om_repeats``); None where the reader keeps no row per sample
        self.at: list | None = [[], array("q"), array("q")]

    def add(self, name: str, raw: str | None, value: float, t: float, path, lineno: int) -> None:
        """Record one sample; a new label set is parsed and described first."""
        sid = self.index.get((name, raw))
        if sid is None:
            sid = self._new_series(name, raw, path, lineno)
        if sid >= 0:
            self.sid.append(sid)
            self.t.append(t)
            self.v.append(value)
            if self.at is not None:
                self._seen_at(path, lineno)

    def _seen_at(self, path, lineno: int) -> None:
        """Note the file and row of the sample just added."""
        at = self.at
        assert at is not None  # called only where rows are kept
        files = at[0]
        if not files or files[-1] != str(path):
            files.append(str(path))
        at[1].append(len(files) - 1)
        at[2].append(lineno)

    def _new_series(self, name: str, raw: str | None, path, lineno: int) -> int:
        """Describe a new series; -1 marks one the family does not want (e.g. CPU requests)."""
        labels = parse_labels(raw, path, lineno)
        meta = self.describe(name, labels)
        self.named.add((name, label(labels, "namespace"), label(labels, "pod"),
                        labels.get("Hostname") or label(labels, "node"), labels.get("modelName", "")))
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


# --------------------------------------------------------------------------------------------
# The families: series metadata by sample name
# --------------------------------------------------------------------------------------------

#: compute slices of a whole A100 / H100 GPU: a MIG instance's share of the GPU's cost is its
#: profile's leading number over these (3g.40gb = 3/7)
MIG_COMPUTE_SLICES = 7
"""Compute slices of a MIG-capable GPU (A100, H100, H200, B200, GH200) ..."""
A30_COMPUTE_SLICES = 4
"""... except the A30, whose profiles are its own (NVIDIA MIG user guide, supported profiles)."""
A30_PROFILES = frozenset({"1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"})
_MIG_PROFILE = re.compile(r"^(\d+)g\.")


def mig_compute_slices(profiles) -> int:
    """The compute slices of the GPU whose MIG instances have ``profiles`` (``3g.40gb``, ...)."""
    return A30_COMPUTE_SLICES if any(p in A30_PROFILES for p in profiles) else MIG_COMPUTE_SLICES


def unit_uuid(labels: dict[str, str]) -> str:
    """The identifier of a GPU unit: the device UUID, and on a MIG instance (dcgm-exporter's
    ``GPU_I_ID`` / ``GPU_I_PROFILE`` labels) ``UUID/GPU_I_ID/GPU_I_PROFILE``, so that the slices of
    one GPU stay apart in every table."""
    uuid = labels.get("UUID", "")
    instance = labels.get("GPU_I_ID", "")
    if instance == "":
        return uuid
    return f"{uuid}/{instance}/{labels.get('GPU_I_PROFILE', '')}"


@functools.lru_cache(maxsize=1 << 16)  # a unit is met once per interval: read once per id
def mig_slice(uuid: str) -> tuple[str, str, int] | None:
    """(device UUID, instance id, compute slices) of a MIG unit's identifier; None for a whole GPU.

    Compute slices are the profile's leading number (``3g.40gb`` -> 3); 0 when the profile is
    missing or unreadable."""
    parts = uuid.rsplit("/", 2)
    if len(parts) != 3:
        return None
    found = _MIG_PROFILE.match(parts[2])
    return parts[0], parts[1], int(found.group(1)) if found else 0


def _dcgm(name: str, labels: dict[str, str]) -> tuple:
    """Series metadata of a DCGM activity gauge."""
    return (name, labels.get("Hostname", ""), labels.get("gpu", ""), unit_uuid(labels),
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


def mig_request_profile(resource: str) -> str | None:
    """The MIG profile a request of ``resource`` asks for: "" for whole GPUs (``nvidia.com/gpu``,
    which the device plugin's single strategy also gives MIG instances as), the profile for a MIG
    resource of the mixed strategy (``nvidia.com/mig-3g.40gb`` and kube-state-metrics'
    ``nvidia_com_mig_3g_40gb`` -> ``3g.40gb``; ``nvidia_com_mig_1g_10gb_me`` -> ``1g.10gb+me``, the
    sanitised name's ``_`` standing for ``+``); None for any other resource."""
    if resource in GPU_RESOURCES:
        return ""
    found = MIG_RESOURCE.match(resource)
    if found is None:
        return None
    return f"{found.group(1)}.{found.group(2).replace('_', '+')}"


def _gpu_request(name: str, labels: dict[str, str]) -> tuple | None:
    """Series metadata of a GPU resource request, with the MIG profile it asks for ("" for whole
    GPUs); None for other resources (kube-state-metrics v1 names the GPU request in the series
    name, later versions in the ``resource`` label)."""
    profile = "" if name == KSM_V1_GPU_REQUESTS else mig_request_profile(labels.get("resource", ""))
    if profile is None:
        return None
    return (label(labels, "namespace"), label(labels, "pod"), label(labels, "container"),
            label(labels, "node"), profile)


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
    **PHASE_COUNTERS,
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


def counter_beside(request_counter: str, column: str) -> str | None:
    """The series that counts ``column`` (``prompt_tokens``, ``generated_tokens``, ``failures``,
    ``received``) beside a family's request counter (``REQUEST_COUNTER``); None where the family
    counts no such thing (Triton no tokens, vLLM no failures apart) or the counter is no serving
    family's."""
    family = next((f for f, name in REQUEST_COUNTER.items() if name == request_counter), None)
    named = {**{f"{name}_total": ("vllm", c) for name, c in COUNTERS.items()}, **SERVING_COUNTERS}
    return next((name for name, counted in named.items() if counted == (family, column)), None)


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
        column = phase_column(name, column, labels)
        model = labels.get("model_name") or labels.get("model", "")
        engine = labels.get("engine") or labels.get("version", "")
        return (column, family, model, label(labels, "namespace"), label(labels, "pod"), engine)
    return describe


def _dcgm_evidence(name: str, labels: dict[str, str]) -> tuple:
    """Series metadata of a DCGM evidence gauge: its column and the GPU."""
    return (DCGM_EVIDENCE[name], labels.get("Hostname", ""), labels.get("gpu", ""),
            unit_uuid(labels))


def _replicas(name: str, labels: dict[str, str]) -> tuple:
    """Series metadata of a replica gauge: column, kind, namespace, deployment or HPA name."""
    kind, column = REPLICA_GAUGES[name]
    owner = (label(labels, "deployment") if kind == "deployment"
             else label(labels, "horizontalpodautoscaler") or label(labels, "hpa"))
    return (column, kind, label(labels, "namespace"), owner)


SERVING_COLUMNS = ("metric", "family", "model_name", "namespace", "pod", "engine")
EVIDENCE_COLUMNS = ("metric", "node", "gpu", "uuid")
REPLICA_COLUMNS = ("metric", "kind", "namespace", "name")


SERIES_LABEL_COLUMNS = ["metric", "namespace", "pod", "node", "gpu_model"]


def series_labels(roles: dict[str, Family]) -> pd.DataFrame:
    """Table ``series_labels``: each distinct (series name, namespace, pod, node, GPU model) the read
    families name, whatever table their samples feed (rule 5: a pod or GPU named only on a series the
    split does not read for activity, e.g. DCGM_FI_PROF_DRAM_ACTIVE, is named where a matcher or a
    billed GPU misses)."""
    rows = sorted({row for family in roles.values() for row in family.named if row[2] or row[3]})
    return pd.DataFrame.from_records(rows, columns=SERIES_LABEL_COLUMNS).astype("str")


def new_families() -> tuple[dict[str, Family], dict[str, Family]]:
    """Fresh accumulators, by role and by the sample names that feed them."""
    roles = {
        "dcgm": Family(("metric", "node", "gpu", "uuid", "model_name", "pod", "namespace",
                        "container"), _dcgm),
        "node_info": Family(("node", "provider_id", "instance_type"), _node_info),
        "node_labels": Family(("node", "provider_id", "instance_type"), _node_info),
        "pod_info": Family(("namespace", "pod", "node"), _pod_info),
        "requests": Family(("namespace", "pod", "container", "node", "mig_profile"), _gpu_request),
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
               KSM_REQUESTS: roles["requests"], KSM_V1_GPU_REQUESTS: roles["requests"]}
    for name in COUNTERS:  # the OpenMetrics sample is <family>_total; accept the bare name too
        by_name[name] = by_name[name + "_total"] = roles["counters"]
    for name in QUEUE_GAUGES:
        by_name[name] = roles["queue"]
    for name in SERVING_COUNTERS:
        by_name[name] = roles["server_counters"]
        if not name.endswith(("_sum", "_count", "_bucket")):
            by_name[name + "_total"] = roles["server_counters"]
    for name in SERVING_GAUGES:
        by_name[name] = roles["server_gauges"]
    for name in DCGM_EVIDENCE:
        by_name[name] = roles["dcgm_evidence"]
    for name in REPLICA_GAUGES:
        by_name[name] = roles["replicas"]
    return roles, by_name

