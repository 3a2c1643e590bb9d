"""Label mismatches between telemetry sources: label values one family names and another never
does, reported by name in audit.json ``telemetry.label_mismatches`` (evidence; never fails the run;
METHOD §4, rule 5). Built by :mod:`audit.normalise` once the telemetry tables are read."""
from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any, Mapping

import pandas as pd

from audit.case import Service
from audit.money import fmt
from audit.normalised import Telemetry, empty_table, labelled_pods
from audit.services import service_of
from connectors.telemetry.distinct import by_values
from connectors.telemetry.families import KSM_REQUESTS, KSM_V1_GPU_REQUESTS, near_requests

MISMATCH_VALUES = 20  # values listed per finding (the count says how many there are)

def pods_of(frame: pd.DataFrame) -> set:
    """(namespace, pod) pairs a table names."""
    if frame.empty or "pod" not in frame:
        return set()
    labels = frame[["namespace", "pod"]].astype(str)
    return {(ns, pod) for ns, pod in _pairs(labels, "namespace", "pod") if pod != ""}


def _pairs(frame: pd.DataFrame, a: str, b: str) -> set:
    """The distinct (a, b) value pairs of a table."""
    pairs = frame[[a, b]].drop_duplicates()
    return set(zip(pairs[a].tolist(), pairs[b].tolist()))


def _values(column: pd.Series) -> set:
    """The distinct values of a column as text (each distinct value converted once)."""
    return set(column.drop_duplicates().astype(str).tolist())


def _unlabelled_gpus(activity: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """The activity rows without a pod label on the nodes where GPU requests name pods that no
    DCGM pod label names on that node, where DCGM labels some GPU with a pod (none otherwise: then
    every GPU goes by the scheduler's requests, as it should)."""
    known = labelled_pods(activity).astype(str)
    if known.empty:
        return activity.iloc[:0]
    asked = requests.loc[(requests["gpus"] > 0).to_numpy(dtype=bool), ["node", "namespace", "pod"]]
    asked = asked.drop_duplicates().astype(str).merge(known, how="left", indicator=True)
    nodes = asked.loc[asked["_merge"] == "left_only", "node"].unique()
    if not len(nodes):
        return activity.iloc[:0]
    rows = (activity["pod"] == "").to_numpy(dtype=bool) & activity["node"].astype(str).isin(nodes).to_numpy()
    return activity.loc[rows]


def _keys_in(frame: pd.DataFrame, keys: list[str], wanted: set) -> tuple[list[str], int]:
    """The values of ``keys`` in ``wanted`` that rows of ``frame`` hold, as sorted "a/b" texts, and
    the number of distinct intervals (``ts``) those rows fall in. Each distinct key is tested once,
    then the rows are picked by a vectorised membership test (not a Python loop over the rows)."""
    if not wanted or frame.empty:
        return [], 0
    distinct = frame[keys].drop_duplicates()
    found = [key for key in zip(*(distinct[k].tolist() for k in keys)) if key in wanted]
    if not found:
        return [], 0
    rows = pd.MultiIndex.from_frame(frame[keys]).isin(found)
    names = sorted({"/".join(str(v) for v in key) for key in found})
    return names, int(frame.loc[rows, "ts"].nunique(dropna=False))


def _serving_rows(tele: Telemetry) -> pd.DataFrame:
    """Rows of the serving-server tables (counters, queue gauges, serving statistics)."""
    traffic = tele.traffic
    if "family" in traffic:
        traffic = traffic.loc[traffic["family"].fillna("").astype(str) != ""]
    else:
        traffic = traffic.iloc[0:0]
    columns = ["ts", "namespace", "pod", "family", "source"]
    parts = [t.assign(source=by_values(_source_name, t["source"].astype(str)))[columns]
             for t in (traffic, tele.serving) if len(t)]
    if len(tele.queue):
        parts.append(tele.queue[["ts", "namespace", "pod"]].assign(family="vllm", source=""))
    return pd.concat(parts, ignore_index=True) if parts else empty_table(columns)


def _source_name(source):
    """"prom (prometheus)" of a traffic row's "prom (prometheus): <counter>"."""
    return source.split(": ")[0] if isinstance(source, str) else source


def _serving_source(serving: pd.DataFrame, sources: str) -> str:
    """"vLLM / Triton / TGI counters and gauges (<sources>)"."""
    names = {"vllm": "vLLM", "triton": "Triton", "tgi": "TGI"}
    families = " / ".join(names.get(f, f) for f in sorted(_values(serving["family"])) if f)
    return f"{families} counters and gauges" + (f" ({sources})" if sources else "")

def label_mismatches(tele: Telemetry) -> list[dict[str, Any]]:
    """Label values one telemetry family names and another never does, reported by name.

    Each finding: ``check``, ``source`` (the family naming the values, with its sources),
    ``against`` (the family that lacks them), ``label``, ``values`` (at most 20, sorted),
    ``count`` (how many values), ``intervals`` (intervals in which they appear), ``detail``.
    """
    out = []

    def add(check, source, against, label, found: tuple[list[str], int], detail):
        """found: the values' sorted texts and the number of intervals they appear in."""
        names, intervals = found
        if not names:
            return
        out.append({"check": check, "source": source, "against": against, "label": label,
                    "values": names[:MISMATCH_VALUES], "count": len(names),
                    "intervals": intervals, "detail": detail})

    def sources_of(frame) -> str:
        if "source" not in frame or frame.empty:
            return ""
        return ", ".join(sorted({str(s) for s in frame["source"].drop_duplicates().tolist() if s}))


    dcgm_pods = pods_of(tele.activity)
    serving = _serving_rows(tele)
    if len(serving):
        serving = serving.loc[serving["pod"].astype(str) != ""]
        if dcgm_pods:
            missing = pods_of(serving) - dcgm_pods
            add("serving_pod_not_in_dcgm", _serving_source(serving, sources_of(serving)),
                "DCGM pod labels", "namespace/pod", _keys_in(serving, ["namespace", "pod"], missing),
                "pods that serve requests but that no DCGM series names: their GPU time is "
                "allocated through scheduler requests, or not at all")
        else:
            missing = pods_of(serving) - pods_of(tele.requests)
            add("serving_pod_without_gpu", _serving_source(serving, sources_of(serving)),
                sources_of(tele.requests) or "GPU requests", "namespace/pod",
                _keys_in(serving, ["namespace", "pod"], missing),
                "pods that serve requests but neither DCGM nor the scheduler names as holding a GPU"
                + ("" if len(tele.requests) else no_requests_read(tele.unread_series)))
    activity = tele.activity
    if len(activity) and len(tele.nodes):
        known = _values(tele.nodes["node"])
        hosts = {(h,) for h in _values(activity["node"]) - known if h}
        add("dcgm_node_not_in_node_info", "DCGM Hostname", "kube_node_info", "node",
            _keys_in(activity, ["node"], hosts),
            "DCGM hosts kube_node_info does not know: their GPUs cannot be tied to a billed "
            "instance through the node's provider id")
    if len(tele.requests) and len(activity):
        if dcgm_pods:
            missing = pods_of(tele.requests) - dcgm_pods
            add("gpu_request_pod_not_in_dcgm", sources_of(tele.requests),
                "DCGM pod labels", "namespace/pod",
                _keys_in(tele.requests, ["namespace", "pod"], missing),
                "pods that requested GPUs but that no DCGM series names")
        unlabelled = _unlabelled_gpus(activity, tele.requests)
        add("dcgm_gpu_without_pod_label", "DCGM gpu / Hostname", "DCGM pod labels", "node/gpu",
            _keys_in(unlabelled, ["node", "gpu"], _pairs(unlabelled, "node", "gpu")),
            "GPUs without a DCGM pod label on nodes where the scheduler places GPU pods that no "
            "pod label names, while DCGM labels other GPUs with pods: those pods' GPU requests "
            "are placed on these GPUs (METHOD §3)")
        hosts = _values(activity["node"])
        nodes = {(n,) for n in _values(tele.requests["node"]) - hosts if n}
        add("gpu_request_node_not_in_dcgm", sources_of(tele.requests),
            "DCGM Hostname", "node", _keys_in(tele.requests, ["node"], nodes),
            "nodes with GPU requests but no DCGM series (or a Hostname label that differs from "
            "the Kubernetes node name)")
    if len(tele.replicas):
        unmatched = {key[1:] for key, service in tele.replica_services.items()
                     if service is None and key[0] == "deployment"}
        deployments = tele.replicas.loc[tele.replicas["kind"] == "deployment"]
        add("deployment_without_service", "kube_deployment_* (" + sources_of(deployments) + ")",
            "[services] of the case", "namespace/deployment",
            _keys_in(deployments, ["namespace", "name"], unmatched),
            "deployments that match no declared service (their replicas are not evidence for any)")
        names = _pairs(deployments, "namespace", "name")
        hpas = tele.replicas.loc[tele.replicas["kind"] == "hpa"]
        if names:
            orphans = _pairs(hpas, "namespace", "name") - names
            add("hpa_without_deployment", "kube_horizontalpodautoscaler_* / kube_hpa_*",
                "kube_deployment_*", "namespace/hpa", _keys_in(hpas, ["namespace", "name"], orphans),
                "HPAs named like no deployment (the scale target is read from the HPA's name)")
    return out


def no_requests_read(unread: pd.DataFrame) -> str:
    """"; no GPU request series was read[: the nearest series the sources hold is <name> (<source>)]":
    the nearest unread series name to kube_pod_container_resource_requests (rule 5)."""
    said = f"; no GPU request series was read ({KSM_REQUESTS}{{resource=nvidia.com/gpu}}, {KSM_V1_GPU_REQUESTS})"
    near = near_requests(_values(unread["metric"])) if len(unread) else []
    if not near:
        return said
    held = unread.loc[unread["metric"].astype(str) == near[0]]
    return f"{said}: the nearest series the sources hold is {near[0]} ({', '.join(sorted(_values(held['source'])))})"



def gpu_pods_without_requests(tele: Telemetry, services: Mapping[str, Service]) -> list[dict[str, Any]]:
    """Per service whose serving counters count its pods: the pods that hold GPU time (DCGM pod
    labels; the scheduler's GPU requests where DCGM names no pod) that no counter of it counts
    (METHOD §4, rule 5: a join without a partner). Their GPU cost is the service's, its requests
    those of its other pods: the unit costs say so (audit/audit_json_units.py). A service counted
    by a request log (no pod labels: it counts every pod) is not checked.

    Each finding as :func:`label_mismatches` gives it, with ``service`` and ``gpu_hours`` (the GPU
    time of the pods named, 2 places)."""
    counted, sources = _counted_pods(tele.traffic, services)
    holders = _gpu_holders(tele) if counted else empty_table([])
    if holders.empty:
        return []
    out = []
    service_by_pod = {pod: service_of({"namespace": pod[0], "pod": pod[1], "model_name": "", "container": ""},
                                      services, {}) for pod in _pairs(holders, "namespace", "pod")}
    for name in sorted(counted):
        missing = {pod for pod, found in service_by_pod.items() if found == name} - counted[name]
        names, intervals = _keys_in(holders, ["namespace", "pod"], missing)
        if not names:
            continue
        rows = holders.loc[pd.MultiIndex.from_frame(holders[["namespace", "pod"]]).isin(list(missing))]
        hours = fmt(Decimal(repr(float(rows["gpu_seconds"].sum()))) / 3600, 2)
        out.append({"check": "gpu_pod_without_requests", "source": str(holders["source"].iloc[0]),
                    "against": ", ".join(sorted(sources[name])), "label": "namespace/pod",
                    "values": names[:MISMATCH_VALUES], "count": len(names), "intervals": intervals,
                    "detail": f"pods of service {name} that hold {hours} GPU-h but that its request counter never "
                              "counts: its unit costs divide their GPU cost by the requests of its other pods",
                    "service": name, "gpu_hours": hours})
    return out


def _counted_pods(traffic: pd.DataFrame, services: Mapping[str, Service]) -> tuple[dict, dict]:
    """service -> the (namespace, pod) its serving counters count, and -> those counters' sources;
    a service a request log counts (rows without a namespace, named by the service) left out."""
    counted: dict[str, set] = defaultdict(set)
    sources: dict[str, set] = defaultdict(set)
    logged = set()
    if traffic.empty:
        return counted, sources
    keys = traffic[["namespace", "pod", "model_name", "source"]].drop_duplicates().astype(str)
    for namespace, pod, model, source in keys.itertuples(index=False, name=None):
        if not namespace and not model and pod in services:
            logged.add(pod)
            continue
        name = service_of({"namespace": namespace, "pod": pod, "model_name": model, "container": ""}, services, {})
        if name and pod:
            counted[name].add((namespace, pod))
            sources[name].add(source)
    return {s: p for s, p in counted.items() if s not in logged}, sources


def _gpu_holders(tele: Telemetry) -> pd.DataFrame:
    """(namespace, pod, ts, gpu_seconds, source) of the GPU time pods hold: DCGM's pod labels (a
    GPU-interval two pods name split evenly), else the scheduler's GPU requests (GPUs × step)."""
    labelled = tele.activity.loc[(tele.activity["pod"].astype(str) != "").to_numpy(dtype=bool)]
    if len(labelled):
        gpu = ["node", "gpu", "uuid", "ts"]
        sharing = labelled.groupby(gpu, sort=False)["pod"].transform("size")
        return labelled.assign(gpu_seconds=labelled["step_seconds"] / sharing, source="DCGM pod labels")[
            ["namespace", "pod", "ts", "gpu_seconds", "source"]].astype({"namespace": str, "pod": str})
    asked = tele.requests.loc[(tele.requests["gpus"] > 0).to_numpy(dtype=bool)]
    source = ", ".join(sorted(_values(asked["source"]))) if "source" in asked else "GPU requests"
    return asked.assign(gpu_seconds=asked["gpus"] * tele.step, source=source)[
        ["namespace", "pod", "ts", "gpu_seconds", "source"]].astype({"namespace": str, "pod": str})
