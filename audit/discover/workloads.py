"""The GPU workloads telemetry shows, grouped into the services ``costaudit init`` proposes.

A pod's workload is its name without the suffixes Kubernetes adds: a Deployment's pods are
``<name>-<pod-template-hash>-<5 characters>`` (``chat-7c9d5f8b6d-x2kqz``), a StatefulSet's
``<name>-<ordinal>`` (``vllm-0``), a Job's or DaemonSet's ``<name>-<5 characters>``; a Slurm job
(``sacct``) is ``<JobID>-<JobName>`` and its workload is the job name. Each workload becomes a
matcher that catches its pods and no other pod the data names: ``re:^name-`` where that is
enough, a tighter pattern (the suffix's shape) where another workload's pods start with the same
name. GPU-hours, pods, GPUs per pod and the nodes come from the pods' GPU requests
(kube-state-metrics, sacct, OpenCost) where they exist, else from DCGM's pod labels; requests
from the serving counters.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd

from audit.discover.read import Read
from audit.patterns import search

#: characters of a Kubernetes generated suffix (k8s.io/apimachinery rand.SafeEncodeString)
SAFE = "bcdfghjklmnpqrstvwxz2456789"
DEPLOYMENT = re.compile(r"^(.+)-([a-z0-9]{4,10})-([a-z0-9]{5})$")
STATEFULSET = re.compile(r"^(.+)-(\d+)$")
GENERATED = re.compile(rf"^(.+)-([{SAFE}]{{5}})$")
SLURM = re.compile(r"^[0-9_+]+-(.+)$")
TIGHT = {"deployment": "-[a-z0-9]+-[a-z0-9]+$", "statefulset": "-[0-9]+$", "generated": "-[a-z0-9]{5}$"}
REGEX_SPECIAL = re.compile(r"([.^$*+?{}\[\]\\|()])")


@dataclass
class Workload:
    """One proposed service's evidence: its pods and what they held and served in the window."""

    namespace: str
    name: str
    shape: str                      # deployment, statefulset, generated, slurm, pod, request_log
    pods: set[str] = field(default_factory=set)
    gpu_hours: float = 0.0
    gpus_per_pod: Counter = field(default_factory=Counter)
    basis: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    gpu_models: set[str] = field(default_factory=set)
    served_models: set[str] = field(default_factory=set)
    requests: float = 0.0
    concurrent: tuple[int, int] = (0, 0)
    source: str = ""                # the request-log source a request_log workload comes from
    matcher: dict[str, str] = field(default_factory=dict)
    service: str = ""               # its name in the case, once proposed
    notes: list[str] = field(default_factory=list)

    @property
    def holds_gpus(self) -> bool:
        return self.gpu_hours > 0


def workload_of(pod: str, slurm: bool = False) -> tuple[str, str]:
    """(workload name, shape) of a pod name: the name without the generated suffixes."""
    if slurm:
        found = SLURM.match(pod)
        return (found.group(1), "slurm") if found else (pod, "pod")
    found = DEPLOYMENT.match(pod)
    if found and _generated(found.group(2), deployment_hash=True):
        return found.group(1), "deployment"
    found = STATEFULSET.match(pod)
    if found:
        return found.group(1), "statefulset"
    found = GENERATED.match(pod)
    if found and re.search(r"\d", found.group(2)):
        return found.group(1), "generated"
    return pod, "pod"


def _generated(text: str, deployment_hash: bool = False) -> bool:
    """A generated hash: holds a digit, or (a Deployment's hash of 6+ characters) only SAFE letters."""
    return bool(re.search(r"\d", text)) or (deployment_hash and len(text) >= 6 and set(text) <= set(SAFE))


def regex_literal(text: str) -> str:
    """``text`` as a regular expression matching itself (only the characters regexes treat specially
    are escaped; ``-`` stays as it is)."""
    return REGEX_SPECIAL.sub(r"\\\1", text)


def pod_matcher(workload: Workload, tight: bool = False) -> str:
    """The ``pod`` matcher of a workload: ``re:^name-`` (or the suffix's shape when ``tight``)."""
    name = regex_literal(workload.name)
    if workload.shape == "slurm":
        return f"re:^[0-9_+]+-{name}$"
    if workload.shape == "pod":
        return workload.name
    return f"re:^{name}{TIGHT[workload.shape]}" if tight else f"re:^{name}-"


# ---- gathering pods from the telemetry tables -----------------------------------------------

@dataclass
class PodFacts:
    gpu_hours: dict[str, float] = field(default_factory=dict)   # basis -> GPU-hours
    gpus: int = 0
    nodes: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    served: set[str] = field(default_factory=set)
    requests: float = 0.0
    times: dict[str, set] = field(default_factory=dict)     # basis -> interval starts held
    slurm: bool = False


def gather(reads: list[Read], window: tuple[datetime, datetime]) -> list[Workload]:
    """The workloads of every telemetry source, GPU holders first (by GPU-hours), then the rest."""
    pods: dict[tuple[str, str], PodFacts] = {}
    logs: list[Workload] = []
    for read in reads:
        if read.source.kind != "telemetry" or read.frame is None:
            continue
        tables, step = read.tables, read.step or 3600
        slurm = read.source.format == "sacct"
        _activity(pods, _in(tables.get("gpu_activity"), window), slurm)
        requests = _in(tables.get("gpu_requests"), window)
        _requests(pods, requests, spacing(requests, step), f"GPU requests ({read.source.format})", slurm)
        if read.source.format == "access_log":
            logs.append(_request_log(read, _in(tables.get("traffic"), window)))
        else:
            _traffic(pods, _in(tables.get("traffic"), window), slurm)
    workloads = _group(pods)
    ordered = sorted(workloads, key=lambda w: (not w.holds_gpus, -w.gpu_hours, -w.requests, w.namespace, w.name))
    return ordered + logs


def _in(table: pd.DataFrame | None, window: tuple[datetime, datetime]) -> pd.DataFrame:
    if table is None or not len(table) or "ts" not in table:
        return pd.DataFrame()
    ts = table["ts"]
    return table[(ts >= pd.Timestamp(window[0])) & (ts < pd.Timestamp(window[1]))]


def spacing(table: pd.DataFrame, step: int) -> int:
    """Seconds one row of a per-interval table stands for: the closest spacing of its interval
    starts where that is longer than the grid's step (a gauge scraped hourly, binned on a 15-minute
    grid, holds for the hour), else the step."""
    if table.empty:
        return step
    gaps = pd.Series(table["ts"].drop_duplicates().sort_values()).diff().dropna().dt.total_seconds()
    gaps = gaps[gaps > 0]
    return max(step, int(gaps.min())) if len(gaps) else step


def _facts(pods: dict, namespace, pod, slurm: bool) -> PodFacts:
    facts = pods.setdefault((str(namespace), str(pod)), PodFacts())
    facts.slurm = facts.slurm or slurm
    return facts


def _activity(pods: dict, table: pd.DataFrame, slurm: bool) -> None:
    """DCGM rows with pod labels: one row per GPU and interval the pod held."""
    if table.empty:
        return
    held = table[table["pod"].astype(str) != ""]
    gpu_key = held["node"].astype(str) + "/" + held["uuid"].astype(str) + "/" + held["gpu"].astype(str)
    each = spacing(held, int(held["step_seconds"].min())) if len(held) else 0
    held = held.assign(gpu_key=gpu_key, hours=held["step_seconds"].clip(lower=each).astype(float) / 3600)
    for (namespace, pod), rows in held.groupby(["namespace", "pod"], sort=False):
        facts = _facts(pods, namespace, pod, slurm)
        facts.gpu_hours["DCGM pod labels"] = facts.gpu_hours.get("DCGM pod labels", 0.0) + float(rows["hours"].sum())
        facts.gpus = max(facts.gpus, int(rows.groupby("ts")["gpu_key"].nunique().max()))
        facts.nodes |= {n for n in rows["node"].astype(str) if n}
        facts.models |= {m for m in rows["model_name"].astype(str) if m}
        facts.times.setdefault("DCGM pod labels", set()).update(rows["ts"])


def _requests(pods: dict, table: pd.DataFrame, step: int, basis: str, slurm: bool) -> None:
    """Scheduler GPU requests: GPUs a pod asked for on a node, per interval."""
    if table.empty:
        return
    held = table[(table["gpus"] > 0) & (table["pod"].astype(str) != "")]
    for (namespace, pod), rows in held.groupby(["namespace", "pod"], sort=False):
        facts = _facts(pods, namespace, pod, slurm)
        facts.gpu_hours[basis] = facts.gpu_hours.get(basis, 0.0) + float(rows["gpus"].sum()) * step / 3600
        per_node = rows.groupby(["ts", "node"])["gpus"].sum()
        facts.gpus = max(facts.gpus, int(round(float(per_node.max()))))
        facts.nodes |= {n for n in rows["node"].astype(str) if n}
        facts.times.setdefault(basis, set()).update(rows["ts"])


def _traffic(pods: dict, table: pd.DataFrame, slurm: bool) -> None:
    if table.empty:
        return
    named = table[table["pod"].astype(str) != ""]
    for (namespace, pod), rows in named.groupby(["namespace", "pod"], sort=False):
        facts = _facts(pods, namespace, pod, slurm)
        facts.requests += float(rows["requests"].sum())
        facts.served |= {m for m in rows["model_name"].astype(str) if m}


def _request_log(read: Read, table: pd.DataFrame) -> Workload:
    """A request log's service: named after the source (its data names no pod)."""
    name = service_name_of(read.name)
    requests = float(table["requests"].sum()) if len(table) else 0.0
    return Workload("", name, "request_log", requests=requests, source=read.name,
                    basis={f"requests counted in {read.name} (access_log)"})


def service_name_of(text: str) -> str:
    """A service name from a source's name: letters, digits, '-' and '_', without dates and the
    words 'access' and 'log'; 'web' when nothing is left."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", text.lower())
             if w and w not in ("access", "accesslog", "log", "logs") and not re.fullmatch(r"\d{1,4}", w)]
    return "-".join(words)[:40].strip("-") or "web"


def _group(pods: dict[tuple[str, str], PodFacts]) -> list[Workload]:
    groups: dict[tuple[str, str], Workload] = {}
    times: dict[tuple[str, str], Counter] = {}
    for (namespace, pod), facts in pods.items():
        name, shape = workload_of(pod, facts.slurm)
        work = groups.setdefault((namespace, name), Workload(namespace, name, shape))
        work.pods.add(pod)
        if facts.gpu_hours:
            basis = max(facts.gpu_hours, key=lambda k: (not k.startswith("DCGM"), facts.gpu_hours[k]))
            work.gpu_hours += facts.gpu_hours[basis]
            work.basis.add(basis)
            work.gpus_per_pod[max(1, facts.gpus)] += 1
            times.setdefault((namespace, name), Counter()).update(facts.times.get(basis, ()))
        work.nodes |= facts.nodes
        work.gpu_models |= facts.models
        work.served_models |= facts.served
        work.requests += facts.requests
    for key, work in groups.items():
        counts = times.get(key, Counter())
        work.concurrent = (min(counts.values()), max(counts.values())) if counts else (0, 0)
    return list(groups.values())


def fit_matchers(workloads: list[Workload]) -> None:
    """Give every workload matchers that catch its pods and, where the data allows, no other's."""
    for work in workloads:
        work.matcher = {"namespace": work.namespace} if work.namespace else {}
        if work.shape == "request_log":
            continue  # no pod: its name is the log's, which no pod label carries (it claims lines instead)
        pattern = pod_matcher(work)
        others = _caught(pattern, work, workloads)
        if others and work.shape in TIGHT:
            pattern = pod_matcher(work, tight=True)
            others = _caught(pattern, work, workloads)
        if others:
            work.notes.append(f"this matcher also catches {', '.join(sorted(others)[:3])}: a pod goes to the "
                              "first service (in file order) that matches it")
        work.matcher["pod"] = pattern


def _caught(pattern: str, work: Workload, workloads: list[Workload]) -> set[str]:
    """Pods of other workloads in the same namespace that ``pattern`` matches."""
    def hit(pod: str) -> bool:
        return search(pattern[3:], pod) if pattern.startswith("re:") else pod == pattern
    return {pod for other in workloads if other is not work and other.namespace == work.namespace
            for pod in other.pods if hit(pod)}
