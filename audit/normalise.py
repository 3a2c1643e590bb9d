"""Stage 2: source frames -> checked tables at the audit grain (billing, telemetry, profiles)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from decimal import Decimal
from typing import Any, Mapping

import pandas as pd

from audit.case import Case, Service
from audit.collected import Collected
from audit.lines import lines_read, resource_key, vm_key
from audit.normalised import (
    ACTIVITY_COLUMNS,
    EVIDENCE_COLUMNS,
    EXCLUDED_COLUMNS,
    HISTOGRAM_COLUMNS,
    NODE_COLUMNS,
    QUEUE_COLUMNS,
    REPLICA_COLUMNS,
    REQUEST_COLUMNS,
    REQUEST_COUNT_COLUMNS,
    RESET_COLUMNS,
    SERVING_STATS_COLUMNS,
    SWEEP_COLUMNS,
    TRAFFIC_COLUMNS,
    UNMEASURED_COLUMNS,
    GapSensitivity,
    NodeMap,
    ProfileSummary,
    Telemetry,
    empty_table,
    labelled_pods,
)
from audit.overlap import counter_overlap_errors, overlap_errors, telemetry_overlap_errors
from audit.services import service_of
from connectors.billing.focus_checks import WINDOW_EXTENT
from connectors.errors import InputError, InputErrors
from connectors.telemetry.distinct import by_values
from connectors.telemetry.families import REQUEST_COUNTER

MISMATCH_VALUES = 20  # values listed per finding (the count says how many there are)


def billing_lines(case: Case, collected: Collected) -> pd.DataFrame:
    """Every billing line read, with its source name; currency and window checked."""
    frames = [frame.tables["lines"].assign(source=frame.spec.name, source_path=frame.spec.where)
              for frame in collected.of("billing")]  # copy-on-write: the columns read are not copied
    lines = _one_table(frames)
    _check_currency(case, lines)
    overlaps = overlap_errors([(f.spec.name, f.spec.where, f.tables["lines"]) for f in collected.of("billing")],
                              case.currency)
    if overlaps:
        raise InputErrors(overlaps)
    if lines.empty:
        paths = ", ".join(f.spec.where for f in collected.of("billing")) or str(case.path)
        raise InputError(paths, f"no billing line falls in the window {case.start:%Y-%m-%d} – {case.end:%Y-%m-%d}"
                         + "".join(f"; {text}" for text in _extents(collected)),
                         column="ChargePeriodStart" if all(f.spec.format == "focus" for f in collected.of("billing"))
                         else None, expected="lines whose charge period overlaps the window")
    return lines


def _extents(collected: Collected) -> list[str]:
    """Where each billing source's charge periods lie, as its reader noted for a source with no line
    in the window (:func:`connectors.billing.focus_checks.extent_notes`)."""
    found = []
    for frame in collected.of("billing"):
        if not frame.rows:
            found.append(f"{frame.spec.name}: it holds no line at all")
            continue
        notes = frame.tables.get("notes")
        if notes is not None and len(notes):
            found += [f"{frame.spec.name}: {note}" for note in notes["note"] if str(note).startswith(WINDOW_EXTENT)]
    return found


def _outside_window(collected: Collected) -> tuple[tuple[str, int, Any, Any], ...]:
    """The telemetry sources with samples but none in the window, and where theirs lie (if known)."""
    return tuple((f.spec.name, int(f.rows), *f.extent) for f in collected.of("telemetry")
                 if f.rows and f.covered == (None, None) and f.spec.format in TIMED_FORMATS
                 and (f.spec.format in COVERED_SAYS
                      or not any(len(table) for name, table in f.tables.items() if name not in UNTIMED_TABLES)))


#: telemetry formats that read samples outside the window and keep their extent (a Prometheus server
#: answers for the window only, and refuses a window without series itself: connectors/telemetry/prom_span.py)
TIMED_FORMATS = ("openmetrics", "prom_dump", "access_log", "nvidia_smi", "dcgmi", "opencost")
#: tables that hold no interval of the window (a node's labels are read from any sample)
UNTIMED_TABLES = ("node_info",)
#: formats whose coverage alone says whether a sample is in the window (a request log's is its dated,
#: parseable lines': its tables also count unparseable lines at the time their text recovers; the
#: offline GPU logs' and OpenCost's tables hold what their readers excluded, wherever it lay)
COVERED_SAYS = ("access_log", "nvidia_smi", "dcgmi", "opencost")


def _one_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The frames end to end, indexed 0..n-1; one frame is not concatenated (that would copy every
    column of a bill that can hold tens of millions of lines)."""
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _check_currency(case: Case, lines: pd.DataFrame) -> None:
    if lines.empty:
        return
    bad = lines[lines["currency"] != case.currency]
    if bad.empty:
        return
    errors = []
    for (path, currency), group in bad.groupby(["source_path", "currency"], sort=True):
        first = group.iloc[0]
        every = len(group) == int((lines["source_path"] == path).sum())
        advice = f'; set currency = "{currency}" in [case]' if every else ""
        errors.append(InputError(path, f"currency {currency!r} differs from the case's on {lines_read(group):,} line(s) "
                                 f"in the window{' (every one)' if every else ''}, the first {first.line_id}{advice} "
                                 f"(amounts are never converted between currencies)",
                                 row=int(first.row), column="BillingCurrency", expected=case.currency))
    raise InputErrors(errors)


def telemetry(case: Case, collected: Collected) -> Telemetry:
    """Telemetry tables, empty with the right columns where no source has them."""
    def table(name, columns):
        found = collected.table("telemetry", name)
        return found if found is not None else pd.DataFrame({c: [] for c in columns})
    sources = collected.of("telemetry")
    overlaps = telemetry_overlap_errors([(f.spec.name, f.spec.where, f.tables["gpu_activity"])
                                         for f in sources if "gpu_activity" in f.tables])
    overlaps = overlaps or counter_overlap_errors([(f.spec.name, f.spec.where, f.tables["traffic"])
                                                   for f in sources if "traffic" in f.tables])
    if overlaps:
        raise InputErrors(overlaps)
    activity = table("gpu_activity", ACTIVITY_COLUMNS)
    step = case.step_seconds or (int(activity["step_seconds"].iloc[0]) if len(activity) else 3600)
    nodes = table("node_info", NODE_COLUMNS).drop_duplicates("node", keep="last")
    tele = Telemetry(activity, nodes, table("gpu_requests", REQUEST_COLUMNS), _traffic(collected),
                     table("queue", QUEUE_COLUMNS), step,
                     serving=_sourced(collected, "serving_stats", SERVING_STATS_COLUMNS),
                     gpu_evidence=_sourced(collected, "gpu_evidence", EVIDENCE_COLUMNS),
                     replicas=_sourced(collected, "replicas", REPLICA_COLUMNS),
                     excluded_samples=_sourced(collected, "excluded_samples", EXCLUDED_COLUMNS),
                     counter_resets=_sourced(collected, "counter_resets", RESET_COLUMNS),
                     unmeasured_intervals=_sourced(collected, "unmeasured_intervals",
                                                   UNMEASURED_COLUMNS),
                     request_counts=_sourced(collected, "requests_detail", REQUEST_COUNT_COLUMNS),
                     histograms=_sourced(collected, "token_histograms", HISTOGRAM_COLUMNS),
                     outside_window=_outside_window(collected))
    tele = replace(tele, replica_services=replica_services(tele, case.services))
    return replace(tele, label_mismatches=tuple(label_mismatches(tele)))


def node_map(case: Case, tele: Telemetry, lines: pd.DataFrame | None = None) -> NodeMap:
    """Billing resource key -> telemetry nodes: the node table's provider ids and the case's [nodes].

    A GCP line names its machine by the numeric instance id (ResourceId) and the instance name
    (ResourceName), while the scheduler's ``gce://`` provider id carries the name: the numeric key
    of such a line is joined to the node of its name (METHOD §2).
    """
    nodes_of = defaultdict(set)
    for r in tele.nodes.itertuples(index=False):
        if r.resource_id:
            nodes_of[resource_key(r.resource_id)].add(r.node)
        if vm := vm_key(r.provider_id):  # a scale set's VM, which a per-VM cost details row bills
            nodes_of[vm].add(r.node)
    for node, resource in case.nodes.items():
        nodes_of[resource_key(resource)].add(node)
    for numeric, name in _named_instances(lines):
        if name in nodes_of and numeric not in nodes_of:
            nodes_of[numeric] = set(nodes_of[name])
    seen = set(tele.activity["node"].drop_duplicates().tolist())
    return NodeMap({k: tuple(sorted(v)) for k, v in nodes_of.items()}, frozenset(nodes_of),
                   frozenset(r for r, nodes in nodes_of.items() if seen & set(nodes)))


def _named_instances(lines: pd.DataFrame | None) -> list[tuple[str, str]]:
    """(numeric instance key, instance name) of the billing lines whose ResourceId is a GCP compute
    instance named by its numeric id and whose ResourceName holds the name."""
    if lines is None or lines.empty or "resource_name" not in lines:
        return []
    pairs = lines[["resource_id", "resource_name"]].drop_duplicates()
    out = []
    for rid, name in pairs.itertuples(index=False):
        key, name = resource_key(str(rid or "")), str(name or "").strip()
        if key.isdigit() and name and "/instances/" in str(rid):
            out.append((key, name))
    return out


def _sourced(collected: Collected, name: str, columns: list[str]) -> pd.DataFrame:
    """One telemetry table over every source, each row naming its source "<name> (<format>)"."""
    parts = [frame.tables[name].assign(source=f"{frame.spec.name} ({frame.spec.format})")
             for frame in collected.of("telemetry")
             if name in frame.tables and len(frame.tables[name])]
    if not parts:
        return empty_table(columns + ["source"])
    return _one_table(parts)


def _traffic(collected: Collected) -> pd.DataFrame:
    """Request counts of every telemetry source, each row naming the source that counted it and
    what kind of count it is (``witness``).

    Serving-server rows name the counter too: "<name> (<format>): <counter>", e.g.
    ``prom (openmetrics): nv_inference_request_success`` for Triton; their witness is the counter.
    A request log's witness is its format: two logs of one service (two load balancers, or two
    halves of the month) count different requests, and are added (audit/unit_costs.py).
    """
    parts = []
    for frame in collected.of("telemetry"):
        table = frame.tables.get("traffic")
        if table is not None and len(table):
            base = f"{frame.spec.name} ({frame.spec.format})"
            family = table["family"] if "family" in table else pd.Series("", index=table.index)
            counter = family.map(REQUEST_COUNTER).fillna("")
            parts.append(table.assign(source=(base + ": " + counter).where(counter != "", base),
                                      witness=counter.where(counter != "", frame.spec.format)))
    if not parts:
        return pd.DataFrame({c: [] for c in TRAFFIC_COLUMNS + ["source", "witness"]})
    return pd.concat(parts, ignore_index=True)


# ---- label mismatches between telemetry sources (evidence; never fails the run) -------------

def _pods(frame: pd.DataFrame) -> set:
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


def replica_services(tele: Telemetry, services: Mapping[str, Service]) -> dict[tuple[str, str, str], str | None]:
    """(kind, namespace, name) of each deployment / HPA -> the declared service it scales.

    A deployment's pods are named ``<deployment>-<hash>-<id>``: it scales the service of the
    telemetry pods so named in its namespace; without such a pod, the service whose matchers
    hold for ``<deployment>-`` (or the bare name). An HPA scales the deployment of its name.
    """
    if tele.replicas.empty:
        return {}
    known = set()
    for table in (tele.activity, tele.requests, tele.traffic, tele.serving, tele.queue):
        known |= _pods(table)
    out = {}
    for kind, namespace, name in tele.replicas[["kind", "namespace", "name"]].drop_duplicates(
            ).itertuples(index=False, name=None):
        found = None
        for ns, pod in sorted(known):
            if ns == namespace and pod.startswith(name + "-"):
                found = service_of({"namespace": ns, "pod": pod, "model_name": "", "container": ""},
                                   services, {})
                if found:
                    break
        for pod in (name + "-", name):
            if found is None:
                found = service_of({"namespace": namespace, "pod": pod, "model_name": "",
                                    "container": ""}, services, {})
        out[(kind, namespace, name)] = found
    return out


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


    dcgm_pods = _pods(tele.activity)
    serving = _serving_rows(tele)
    if len(serving):
        serving = serving.loc[serving["pod"].astype(str) != ""]
        if dcgm_pods:
            missing = _pods(serving) - dcgm_pods
            add("serving_pod_not_in_dcgm", _serving_source(serving, sources_of(serving)),
                "DCGM pod labels", "namespace/pod", _keys_in(serving, ["namespace", "pod"], missing),
                "pods that serve requests but that no DCGM series names: their GPU time is "
                "allocated through scheduler requests, or not at all")
        elif len(tele.requests):
            missing = _pods(serving) - _pods(tele.requests)
            add("serving_pod_without_gpu", _serving_source(serving, sources_of(serving)),
                "GPU requests", "namespace/pod", _keys_in(serving, ["namespace", "pod"], missing),
                "pods that serve requests but neither DCGM nor the scheduler names as holding a GPU")
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
            missing = _pods(tele.requests) - dcgm_pods
            add("gpu_request_pod_not_in_dcgm", "kube_pod_container_resource_requests",
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
        add("gpu_request_node_not_in_dcgm", "kube_pod_container_resource_requests",
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


def profiles(collected: Collected) -> dict[str, ProfileSummary]:
    """One profile per service (the first declared wins; others are kept as evidence only)."""
    out: dict[str, ProfileSummary] = {}
    for frame in collected.of("profiles"):
        row = frame.tables["profile"].iloc[0].to_dict()
        opts = frame.spec.options
        gap = row.get("gap_ratio")
        sensitivity = gap_sensitivity(row)
        served = row.get("gap_kernel_active_us")
        summary = ProfileSummary(
            name=frame.spec.name, service=str(opts.get("service")), path=frame.spec.where,
            gap_ratio=_decimal(gap), gap_basis=str(row.get("gap_basis", "gpu_window")),
            kernel_active_us=Decimal(repr(float(row["kernel_active_us"] if sensitivity is None else served))),
            gpu_window_us=Decimal(repr(float(row["gpu_window_us"]))),
            requests=opts.get("requests"), prompt_tokens=opts.get("prompt_tokens"),
            generated_tokens=opts.get("generated_tokens"), summary=row,
            kernels=_with_columns(frame.tables.get("kernels"), ["name", "category", "count", "total_us"]),
            categories=_with_columns(frame.tables.get("categories"), ["category", "total_us"]),
            trace=frame.parsed, sweep=_with_columns(frame.tables.get("sweep"), SWEEP_COLUMNS),
            gap_sensitivity=sensitivity)
        out.setdefault(summary.service, summary)
    return out


GAP_WINDOW_COLUMNS = ("gap_window_us", "gap_kernel_active_us", "gap_ratio_full", "excluded_kernels",
                      "excluded_kernel_us", "excluded_us")


def gap_sensitivity(row: dict) -> GapSensitivity | None:
    """g's sensitivity from a profile row (schemas.profile.KernelSummary's window columns); None
    for a row without them (a profile table written before them, or by hand)."""
    if any(row.get(c) is None or pd.isna(row.get(c)) for c in GAP_WINDOW_COLUMNS if c != "gap_ratio_full"):
        return None
    note = row.get("gap_note")
    return GapSensitivity(served_window=_decimal(row.get("gap_ratio")), full_window=_decimal(row.get("gap_ratio_full")),
                          window_us=_decimal(row["gap_window_us"]) or ZERO_US,
                          excluded_kernels=int(row["excluded_kernels"]),
                          excluded_kernel_us=_decimal(row["excluded_kernel_us"]) or ZERO_US,
                          excluded_us=_decimal(row["excluded_us"]) or ZERO_US,
                          note=note if isinstance(note, str) else "")


ZERO_US = Decimal(0)


def _decimal(value) -> Decimal | None:
    """A float of a profile row as the Decimal of its shortest repr; None for null or NaN."""
    return None if value is None or pd.isna(value) else Decimal(repr(float(value)))


def _with_columns(table: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """The table, or an empty one with the expected columns."""
    if table is None or not set(columns) <= set(table.columns):
        return pd.DataFrame({c: [] for c in columns})
    return table
