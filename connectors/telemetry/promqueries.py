"""The PromQL the Prometheus connector asks (:mod:`connectors.telemetry.prometheus`): the sample
names it reads, the labels each family is summed by, the range-query templates (``$R``: the
interval's range, ``$M``: extra label matchers) and the order in which the families are asked.

Prometheus evaluates each range function of a query on its own, so a template decodes its samples
once per function: a counter's five, a DCGM gauge's four, a GPU request's three, a gauge's two.
"""
from __future__ import annotations

from connectors.telemetry import promsettle as ps
from connectors.telemetry.families import (
    COUNTERS,
    DCGM_EVIDENCE,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    KSM_REQUESTS,
    KSM_V1_GPU_REQUESTS,
    QUEUE_GAUGES,
    REPLICA_GAUGES,
    SERVING_COUNTERS,
    SERVING_GAUGES,
)

NODE_INFO, NODE_LABELS, POD_INFO = "kube_node_info", "kube_node_labels", "kube_pod_info"
REQUESTS = KSM_REQUESTS
#: whole GPUs and MIG instances (the mixed strategy's nvidia.com/mig-<profile>: families.MIG_RESOURCE)
GPU_REQUEST = (f'{REQUESTS}{{resource=~"nvidia_com_gpu|nvidia\\\\.com/gpu|nvidia_com_mig_.+|nvidia\\\\.com/mig-.+",'
               '$M}')
#: the GPU-request series of each name (kube-state-metrics v1 names the resource in the series name);
#: a container that both name is one request (its samples pooled: promtables.gpu_requests)
REQUEST_SELECTORS = {REQUESTS: GPU_REQUEST, KSM_V1_GPU_REQUESTS: f"{KSM_V1_GPU_REQUESTS}{{$M}}"}
COUNTER_NAMES = [n for c in COUNTERS for n in (c + "_total", c)]
SERVER_COUNTER_NAMES = [n for c in SERVING_COUNTERS for n in (
    (c,) if c.endswith(("_sum", "_count", "_bucket")) else (c + "_total", c))]
WANTED = [GR_ENGINE_ACTIVE, GPU_UTIL, NODE_INFO, NODE_LABELS, POD_INFO, *REQUEST_SELECTORS,
          *COUNTER_NAMES, *QUEUE_GAUGES, *SERVER_COUNTER_NAMES, *SERVING_GAUGES, *DCGM_EVIDENCE,
          *REPLICA_GAUGES]
#: GPU_I_ID / GPU_I_PROFILE keep the MIG instances of one GPU apart (families.unit_uuid)
DCGM_BY = ["Hostname", "gpu", "UUID", "GPU_I_ID", "GPU_I_PROFILE", "modelName", "pod", "namespace",
           "container", "exported_pod", "exported_namespace", "exported_container"]
NODE_BY = ["node", "exported_node", "provider_id", "label_node_kubernetes_io_instance_type",
           "label_beta_kubernetes_io_instance_type"]
REQUEST_BY = ["namespace", "pod", "container", "node", "resource", "exported_namespace", "exported_pod",
              "exported_container", "exported_node"]
POD_BY = ["namespace", "pod", "node", "exported_namespace", "exported_pod", "exported_node"]
SERVING_BY = ["model_name", "namespace", "pod", "exported_namespace", "exported_pod", "engine"]
SERVER_BY = ["model_name", "model", "version", "engine", "namespace", "pod", "exported_namespace",
             "exported_pod"]
EVIDENCE_BY = ["Hostname", "gpu", "UUID", "GPU_I_ID", "GPU_I_PROFILE"]
REPLICA_BY = ["namespace", "exported_namespace", "deployment", "exported_deployment",
              "horizontalpodautoscaler", "exported_horizontalpodautoscaler", "hpa", "exported_hpa"]


def sum_count(selector: str, by: list[str]) -> str:
    """A union query: per interval, the sum and the count of the samples, summed by ``by``."""
    clause = ", ".join(by)
    return " or ".join(
        f'label_replace(sum by ({clause}) ({fn}_over_time({selector}[$R])), '
        f'"costaudit_agg", "{fn}", "", "")' for fn in ("sum", "count"))


def request_query(selector: str) -> str:
    """A GPU-request series' sums and counts by ``REQUEST_BY``, and ``most``: the most samples one
    series of each label set has in the interval (its scrapes; the most over every label set is
    kube-state-metrics' scrapes of the interval: ``tables.requests_table``)."""
    most = (f'label_replace(max by ({", ".join(REQUEST_BY)}) (count_over_time({selector}[$R])), '
            f'"costaudit_agg", "most", "", "")')
    return f"{sum_count(selector, REQUEST_BY)} or {most}"


def presence_query(metric: str) -> str:
    """Node metadata label sets present per interval."""
    return f"group by ({', '.join(NODE_BY)}) (last_over_time({metric}{{$M}}[$R]))"


def dcgm_query(metric: str, restrict: str) -> str:
    """A DCGM gauge's sums, counts and out-of-range members (promsettle.busy_query)."""
    return ps.busy_query(f"{metric}{{{restrict}$M}}", DCGM_BY, metric)


def counter_points(name: str) -> str:
    """A union query: per series and interval, last and min values, resets, lone samples, and
    ``bad`` where a sample is not finite; with a negative ``min``, the caller settles those from
    the raw samples. Five passes over the samples (the server decodes them once per function)."""
    sel = f"{name}{{$M}}[$R]"
    parts = {"last": f"last_over_time({sel})", "min": f"min_over_time({sel})",
             "resets": f"resets({sel}) > 0", "single": f"count_over_time({sel}) == 1"}
    return " or ".join([f'label_replace({q}, "costaudit_agg", "{a}", "", "")'
                        for a, q in parts.items()] + [ps.counter_bad(sel)])


def planned(names: list[str]) -> list[str]:
    """The templates the connector asks over the grid whatever the answers, in the order its
    ``_tables`` asks them, for the sample ``names`` the server holds (the puller starts each one
    while the one before it is read); those asked only for what an answer showed (GPU_UTIL hosts,
    pod placement, raw samples) are not planned."""
    has = set(names)
    out = [presence_query(m) for m in (NODE_INFO, NODE_LABELS) if m in has]
    out += [counter_points(n) for n in COUNTER_NAMES + SERVER_COUNTER_NAMES if n in has]
    out += [sum_count(f"{n}{{$M}}", SERVING_BY) for n in QUEUE_GAUGES if n in has]
    out += [dcgm_query(GR_ENGINE_ACTIVE, "")] if GR_ENGINE_ACTIVE in has else []
    out += [request_query(selector) for name, selector in REQUEST_SELECTORS.items() if name in has]
    for group, by in ((SERVING_GAUGES, SERVER_BY), (DCGM_EVIDENCE, EVIDENCE_BY), (REPLICA_GAUGES, REPLICA_BY)):
        out += [sum_count(f"{n}{{$M}}", by) for n in group if n in has]
    return out
