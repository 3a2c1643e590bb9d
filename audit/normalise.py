"""Stage 2: source frames -> checked tables at the audit grain (billing, telemetry, profiles)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from decimal import Decimal
from typing import Any, Mapping

import pandas as pd

from audit.case import Case, Service
from audit.collected import Collected
from audit.lines import resource_key, vm_key
from audit.mismatches import gpu_pods_without_requests, label_mismatches, pods_of
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
    SCHEDULED_COLUMNS,
    SERIES_LABEL_COLUMNS,
    SERVING_STATS_COLUMNS,
    SWEEP_COLUMNS,
    TRAFFIC_COLUMNS,
    UNMEASURED_COLUMNS,
    GapSensitivity,
    NodeMap,
    ProfileSummary,
    Telemetry,
    empty_table,
)
from audit.overlap import counter_overlap_errors, overlap_errors, telemetry_overlap_errors
from audit.services import service_of
from connectors.base import SourceFrame
from connectors.billing.focus_checks import WINDOW_EXTENT
from connectors.errors import InputError, InputErrors
from connectors.profiles.rankset import RankSet
from connectors.telemetry.families import REQUEST_COUNTER, REQUEST_SERIES
from schemas.billing import line_total


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
                         + "".join(f"; {text}" for frame in collected.of("billing") for text in _extent(frame)),
                         column="ChargePeriodStart" if all(f.spec.format == "focus" for f in collected.of("billing"))
                         else None, expected="lines whose charge period overlaps the window")
    outside = _outside_sources(case, collected)
    if outside:
        raise InputErrors(outside)
    return lines


def _extent(frame: SourceFrame) -> list[str]:
    """Where a billing source's charge periods lie, as its reader noted for a source with no line in
    the window (:func:`connectors.billing.focus_checks.extent_notes`)."""
    if not frame.rows:
        return [f"{frame.spec.name}: it holds no line at all"]
    notes = frame.tables.get("notes")
    if notes is None or not len(notes):
        return []
    return [f"{frame.spec.name}: {note}" for note in notes["note"] if str(note).startswith(WINDOW_EXTENT)]


def _outside_sources(case: Case, collected: Collected) -> list[InputError]:
    """One error per billing source whose lines all lie outside the window while another source's
    fall in it (rule 5): an export of another month or year named beside this one's would otherwise be
    read, dropped line by line and never mentioned. A source that holds no line at all drops nothing."""
    return [InputError(frame.spec.where, f"no line of billing source {frame.spec.name!r} falls in the window "
                       f"{case.start:%Y-%m-%d} – {case.end:%Y-%m-%d}; {text}",
                       column="ChargePeriodStart" if frame.spec.format == "focus" else None,
                       expected="lines whose charge period overlaps the window, else the source left out of the case")
            for frame in collected.of("billing") if frame.rows and frame.tables["lines"].empty
            for text in _extent(frame)]


def _outside_window(collected: Collected) -> tuple[tuple[str, int, Any, Any], ...]:
    """The telemetry sources with samples but none in the window, and where theirs lie (if known)."""
    return tuple((f.spec.name, int(f.rows), *f.extent) for f in collected.of("telemetry")
                 if f.rows and f.covered == (None, None) and f.spec.format in TIMED_FORMATS
                 and (f.spec.format in COVERED_SAYS
                      or not any(len(table) for name, table in f.tables.items() if name not in UNTIMED_TABLES)))


#: telemetry formats that read samples outside the window and keep their extent (a Prometheus server
#: answers for the window only, and refuses a window without series itself: connectors/telemetry/prom_span.py)
TIMED_FORMATS = ("openmetrics", "prom_dump", "access_log", "nvidia_smi", "dcgmi", "opencost")
#: tables that hold no interval of the window (a node's labels are read from any sample; the names of
#: series no family reads)
UNTIMED_TABLES = ("node_info", "unread_series", "series_labels")
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
        errors.append(InputError(path, f"currency {currency!r} differs from the case's on {line_total(group):,} line(s) "
                                 f"in the window{' (every one)' if every else ''}, the first {first.line_id}{advice} "
                                 f"(amounts are never converted between currencies)",
                                 row=int(first.row), column="BillingCurrency", expected=case.currency))
    raise InputErrors(errors)


def telemetry(case: Case, collected: Collected) -> Telemetry:
    """Telemetry tables, empty with the right columns where no source has them."""
    sources = collected.of("telemetry")
    overlaps = telemetry_overlap_errors([(f.spec.name, f.spec.where, f.tables["gpu_activity"])
                                         for f in sources if "gpu_activity" in f.tables])
    overlaps = overlaps or counter_overlap_errors([(f.spec.name, f.spec.where, f.tables["traffic"])
                                                   for f in sources if "traffic" in f.tables])
    if overlaps:
        raise InputErrors(overlaps)
    activity = _table(collected, "gpu_activity", ACTIVITY_COLUMNS)
    step = case.step_seconds or (int(activity["step_seconds"].iloc[0]) if len(activity) else 3600)
    nodes = node_table(collected)
    tele = Telemetry(activity, nodes, _sourced(collected, "gpu_requests", REQUEST_COLUMNS, REQUEST_SERIES), _traffic(collected),
                     _table(collected, "queue", QUEUE_COLUMNS), step,
                     serving=_sourced(collected, "serving_stats", SERVING_STATS_COLUMNS),
                     gpu_evidence=_sourced(collected, "gpu_evidence", EVIDENCE_COLUMNS),
                     replicas=_sourced(collected, "replicas", REPLICA_COLUMNS),
                     excluded_samples=_sourced(collected, "excluded_samples", EXCLUDED_COLUMNS),
                     counter_resets=_sourced(collected, "counter_resets", RESET_COLUMNS),
                     unmeasured_intervals=_sourced(collected, "unmeasured_intervals",
                                                   UNMEASURED_COLUMNS),
                     request_counts=_sourced(collected, "requests_detail", REQUEST_COUNT_COLUMNS),
                     histograms=_sourced(collected, "token_histograms", HISTOGRAM_COLUMNS),
                     unread_series=_sourced(collected, "unread_series", ["metric"]),
                     series_labels=_sourced(collected, "series_labels", SERIES_LABEL_COLUMNS),
                     scheduled=_sourced(collected, "scheduled_nodes", SCHEDULED_COLUMNS),
                     outside_window=_outside_window(collected))
    tele = replace(tele, replica_services=replica_services(tele, case.services))
    return replace(tele, label_mismatches=tuple(label_mismatches(tele) + gpu_pods_without_requests(tele, case.services)))


def _table(collected: Collected, name: str, columns: list[str]) -> pd.DataFrame:
    """One telemetry table over every source, empty with ``columns`` where no source has it."""
    found = collected.table("telemetry", name)
    return found if found is not None else pd.DataFrame({c: [] for c in columns})


def node_table(collected: Collected) -> pd.DataFrame:
    """The telemetry's node table: one row per node (the last a source gives)."""
    return _table(collected, "node_info", NODE_COLUMNS).drop_duplicates("node", keep="last")


def node_map(case: Case, tele: Telemetry, lines: pd.DataFrame | None = None) -> NodeMap:
    """Billing resource key -> telemetry nodes: the node table's provider ids and the case's [nodes]
    (:func:`nodes_billed`)."""
    return nodes_billed(tele.nodes, tele.activity["node"], case.nodes, lines)


def collected_node_map(collected: Collected, declared: Mapping[str, str],
                       lines: pd.DataFrame | None = None) -> NodeMap:
    """:func:`node_map` from the source frames, as :func:`telemetry` reads their node and activity
    tables: what ``costaudit init --from`` classifies its billing by (audit/discover/billing.py), so
    that its GPU spend is the audit's ``gpu_compute``."""
    return nodes_billed(node_table(collected), _table(collected, "gpu_activity", ACTIVITY_COLUMNS)["node"],
                        declared, lines)


def nodes_billed(nodes: pd.DataFrame, active: pd.Series, declared: Mapping[str, str],
                 lines: pd.DataFrame | None = None) -> NodeMap:
    """Billing resource key -> telemetry nodes: the provider ids of the node table (``nodes``) and the
    ``[nodes]`` entries (``declared``); ``active``: the nodes of the GPU activity (``with_gpus``).

    A GCP line names its machine by the numeric instance id (ResourceId) and the instance name
    (ResourceName), while the scheduler's ``gce://`` provider id carries the name: the numeric key
    of such a line is joined to the node of its name (METHOD §2).
    """
    nodes_of = defaultdict(set)
    for r in nodes.itertuples(index=False):
        if r.resource_id:
            nodes_of[resource_key(r.resource_id)].add(r.node)
        if vm := vm_key(r.provider_id):  # a scale set's VM, which a per-VM cost details row bills
            nodes_of[vm].add(r.node)
    for node, resource in declared.items():
        nodes_of[resource_key(resource)].add(node)
    for numeric, name in _named_instances(lines):
        if name in nodes_of and numeric not in nodes_of:
            nodes_of[numeric] = set(nodes_of[name])
    seen = set(active.drop_duplicates().tolist())
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


def _sourced(collected: Collected, name: str, columns: list[str],
             series: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One telemetry table over every source, each row naming its source "<name> (<format>)";
    with ``series`` (format -> what that format's table is read from), "<series> (<name> (<format>))"."""
    parts = [frame.tables[name].assign(source=_source_text(frame.spec.name, frame.spec.format, series))
             for frame in collected.of("telemetry")
             if name in frame.tables and len(frame.tables[name])]
    if not parts:
        return empty_table(columns + ["source"])
    return _one_table(parts)


def _source_text(name: str, format_name: str, series: Mapping[str, str] | None) -> str:
    """"<name> (<format>)", after the series the format reads where ``series`` names it."""
    source = f"{name} ({format_name})"
    read = (series or {}).get(format_name)
    return f"{read} ({source})" if read else source


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
        known |= pods_of(table)
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
            trace=None if isinstance(frame.parsed, RankSet) else frame.parsed,
            sweep=_with_columns(frame.tables.get("sweep"), SWEEP_COLUMNS), gap_sensitivity=sensitivity,
            rank_set=frame.parsed if isinstance(frame.parsed, RankSet) else None, ranks=frame.tables.get("ranks"))
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
