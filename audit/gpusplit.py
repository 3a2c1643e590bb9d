"""GPU-intervals: the cost of each paid GPU per telemetry interval, with its holder and activity.

A GPU-interval's cost is the cost of the line that bills it, spread evenly over the GPU-seconds the
line bills (METHOD §3). Each GPU-interval goes to one holder: a declared service, no workload
(unallocated), an undeclared pod, or nobody known; one without a kernel-activity sample is unmeasured,
and so is one whose every sample was excluded (out of range or not finite), under a reason of its own.
:func:`split_gpus` walks the gpu_compute charges and returns the sums per holder and interval.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Mapping

import pandas as pd

from audit.case import Case, Service
from audit.gpuunits import Sharing, device_key, devices, sharing_note, units_of
from audit.ledger import (
    NO_SAMPLE,
    NO_VALID_SAMPLE,
    NOT_IN_TELEMETRY,
    UNALLOCATED,
    UNDECLARED,
    UNKNOWN,
    GpuSplit,
    Group,
    NodeCoverage,
)
from audit.lines import gpu_hours_of, gpu_sku_model, resource_key
from audit.money import ZERO
from audit.normalised import NodeMap, Telemetry
from audit.services import PodModels, pod_models, service_of


def split_gpus(case: Case, charges: pd.DataFrame, tele: Telemetry, nodes: NodeMap) -> GpuSplit:
    """Spread every gpu_compute charge over its GPUs and intervals; sum per holder and interval."""
    gpu_lines = charges[charges["resource_class"] == "gpu_compute"]
    gpus = gpus_of_resources(gpu_lines)
    splitter = GpuSplitter(case, case.services, tele.activity, nodes.nodes_of, tele.requests,
                           pod_models(tele.traffic), tele.step, tele.unmeasured_intervals)
    for line in gpu_lines[_line_columns(gpu_lines)].to_dict("records"):
        quantity = line["pricing_quantity"] or line["consumed_quantity"]
        counts_time = bool(quantity) and (bool(line["gpus_per_instance"]) or bool(gpu_sku_model(line)))
        key = resource_key(line["resource_id"]) or line["line_id"]
        splitter.add_line(line, gpus.get(key, 0), counts_time)
    return GpuSplit(splitter.groups, splitter.coverage, frozenset(splitter.extra_gpus),
                    splitter.sharing_notes())


#: the columns of a gpu_compute line that the split reads (to_dict of every column cost 15 s a 1 M-line bill)
LINE_COLUMNS = ("line_id", "resource_id", "instance_type", "start", "end", "pricing_quantity", "consumed_quantity",
                "gpus_per_instance", "charge_description", "net", "pretax", "priced")


def _line_columns(gpu_lines: pd.DataFrame) -> list[str]:
    return [c for c in LINE_COLUMNS if c in gpu_lines.columns]


def interval_grid(start: datetime, end: datetime, step: int, lo: datetime, hi: datetime):
    """(interval start, overlap seconds) of [lo, hi) on the grid aligned to the window start."""
    lo, hi = max(lo, start), min(hi, end)
    if hi <= lo:
        return []
    k = int((lo - start).total_seconds() // step)
    out = []
    t = start + timedelta(seconds=k * step)
    while t < hi:
        u = t + timedelta(seconds=step)
        overlap = (min(u, hi) - max(t, lo)).total_seconds()
        if overlap > 0:
            out.append((t, Decimal(int(overlap)) if float(overlap).is_integer() else Decimal(repr(overlap))))
        t = u
    return out


class GpuSplitter:
    """Walks the gpu_compute lines and fills Groups and NodeCoverage."""

    def __init__(self, case: Case, services: Mapping[str, Service], activity: pd.DataFrame,
                 nodes_of_resource: Mapping[str, tuple[str, ...]], requests: pd.DataFrame, pod_models: PodModels,
                 step: int, unmeasured: pd.DataFrame | None = None):
        self.case, self.services, self.step = case, services, step
        self.nodes_of_resource = nodes_of_resource
        self.pod_models = pod_models
        self.samples = self._index_activity(activity)
        self.excluded = self._index_unmeasured(unmeasured)
        self.nodes_seen = set(activity["node"]) if len(activity) else set()
        self.nodes_seen |= {node for node, _ in self.excluded}
        # dcgm-exporter maps GPUs to pods cluster-wide: once any GPU carries a pod label, an empty
        # label means no pod held that GPU.
        self.pod_mapping = bool(len(activity)) and bool((activity["pod"] != "").any())
        self.requests = self._index_requests(requests)
        self.groups: dict[tuple[str, datetime], Group] = {}
        self.coverage: dict[str, NodeCoverage] = {}
        self.extra_gpus: set[str] = set()
        self.shared: dict[tuple[str, str, str], Sharing] = {}

    def sharing_notes(self) -> tuple[str, ...]:
        """How each shared GPU (MIG, time-sliced) was split, one note per GPU and method."""
        return tuple(sharing_note(s) for _, s in sorted(self.shared.items()))

    @staticmethod
    def _index_activity(activity: pd.DataFrame) -> dict:
        index = defaultdict(list)
        for row in activity.itertuples(index=False):
            index[(row.node, row.ts.to_pydatetime())].append(row)
        for rows in index.values():
            rows.sort(key=lambda r: (_gpu_key(r.gpu), r.uuid))
        return index

    @staticmethod
    def _index_unmeasured(unmeasured: pd.DataFrame | None) -> dict:
        """(node, interval) -> {(gpu, uuid): metric} of GPU-intervals whose samples were all excluded."""
        index: defaultdict = defaultdict(dict)
        if unmeasured is None:
            return index
        for row in unmeasured.itertuples(index=False):
            index[(row.node, row.ts.to_pydatetime())].setdefault((row.gpu, row.uuid), row.metric)
        return index

    @staticmethod
    def _index_requests(requests: pd.DataFrame) -> dict:
        index = defaultdict(list)
        for row in requests.itertuples(index=False):
            if row.gpus > 0:
                index[(row.node, row.ts.to_pydatetime())].append(row)
        return index

    def add_line(self, line: dict, gpus: int, counts_time: bool = True) -> None:
        """Spread one gpu_compute line over its GPUs and intervals.

        A line may bill several instances (an Azure scale set): its cost is spread evenly over the
        nodes it covers. ``counts_time`` is False for the vCPU / RAM parts of a machine billed in
        parts: they add money to the GPU-intervals but no GPU time (the GPU meter line counts that).
        """
        resource = resource_key(line["resource_id"])
        instances = instances_billed(line)
        nodes = (list(self.nodes_of_resource.get(resource, ())) + [""] * instances)[:instances]
        cover = self.coverage.setdefault(resource or line["line_id"], NodeCoverage(
            resource, ", ".join(n for n in nodes if n), line["instance_type"]))
        grid = interval_grid(self.case.start, self.case.end, self.step,
                             line["start"].to_pydatetime(), line["end"].to_pydatetime())
        seconds = sum((o for _, o in grid), ZERO)
        if not grid or gpus <= 0 or seconds == 0:
            return
        for ts, overlap in grid:
            part = overlap / seconds
            per_gpu = {k: line[k] * part / (gpus * instances) for k in ("net", "pretax", "priced")}
            for node in nodes:
                self._add_interval(node, ts, overlap if counts_time else ZERO, gpus, per_gpu, cover)

    def _add_interval(self, node, ts, overlap, gpus, per_gpu, cover) -> None:
        cover.paid_seconds += overlap * gpus
        rows = self.samples.get((node, ts), []) if node else []
        found = devices(rows)
        if len(found) > gpus:
            self.extra_gpus.add(node)
            found = found[:gpus]
        cover.observed_seconds += overlap * len(found)
        missing = gpus - len(found)
        excluded = self._excluded_gpus(node, ts, [r for d in found for r in d])[:missing]
        for metric in excluded:
            self._accumulate(NO_VALID_SAMPLE, ts, 1, per_gpu, overlap, ZERO, metric, node, "")
        missing -= len(excluded)
        if missing:
            holder = NO_SAMPLE if node in self.nodes_seen else NOT_IN_TELEMETRY
            self._accumulate(holder, ts, missing, per_gpu, overlap, ZERO, "", node, "")
        units = self._units(found)
        held = [u for u in units if u.row is not None]
        assigned = self._holders(node, ts, [u.row for u in held])
        for unit, (holder, pod) in zip(held, assigned):
            self._accumulate(holder, ts, unit.weight, per_gpu, overlap, unit.busy, unit.row.source, node, pod)
        for unit in units:
            if unit.row is None:  # MIG slices no instance holds
                self._accumulate(UNALLOCATED, ts, unit.weight, per_gpu, overlap, ZERO, "", node, "")

    def _units(self, found: list[list]) -> list:
        """The units of each physical GPU; how a shared one was split is kept for the notes."""
        out = []
        for device in found:
            units, share = units_of(device)
            if share is not None:
                self.shared.setdefault((share.node, share.gpu, share.method), share)
            out.extend(units)
        return out

    def _excluded_gpus(self, node, ts, rows) -> list[str]:
        """The metric of each GPU of the node whose samples in the interval were all excluded
        (the MIG instances of one GPU count as that GPU)."""
        if not node:
            return []
        seen = {device_key(r) for r in rows}
        found: dict = {}
        for (gpu, uuid), metric in self.excluded.get((node, ts), {}).items():
            key = device_key(_Unit(gpu, uuid))
            if key not in seen:
                found.setdefault(key, metric)
        return [found[key] for key in sorted(found, key=lambda g: (_gpu_key(g[0]), g[1]))]

    def _holders(self, node, ts, rows) -> list[tuple[str, str]]:
        """(holder, pod) of each observed GPU: pod labels first, else the scheduler's GPU requests."""
        labelled = {(r.namespace, r.pod) for r in rows if r.pod}
        pending = [req for req in self.requests.get((node, ts), []) if (req.namespace, req.pod) not in labelled]
        has_scheduler = (node, ts) in self.requests
        out = []
        for row in rows:
            if row.pod:
                out.append((self._service_or_undeclared(row.namespace, row.pod, row.container), row.pod))
            elif pending:
                req = pending[0]
                out.append((self._service_or_undeclared(req.namespace, req.pod, ""), req.pod))
                pending[0] = req._replace(gpus=req.gpus - 1)
                if pending[0].gpus <= 0:
                    pending.pop(0)
            elif has_scheduler or self.pod_mapping:
                out.append((UNALLOCATED, ""))
            else:
                out.append((UNKNOWN, ""))
        return out

    def _service_or_undeclared(self, namespace, pod, container) -> str:
        labels = {"namespace": namespace, "pod": pod, "container": container}
        return service_of(labels, self.services, self.pod_models) or f"{UNDECLARED}"

    def _accumulate(self, holder, ts, n, per_gpu, overlap, busy, source, node, pod) -> None:
        group = self.groups.get((holder, ts))
        if group is None:
            group = self.groups[(holder, ts)] = Group(holder, ts)
        group.gpus += n
        group.paid += per_gpu["net"] * n
        group.gross += per_gpu["pretax"] * n
        group.priced += per_gpu["priced"] * n
        group.busy += per_gpu["net"] * busy * n
        group.paid_seconds += overlap * n
        group.busy_seconds += overlap * busy * n
        if source:
            group.sources.add(source)
        if node:
            group.nodes.add(node)
        if pod:
            group.pods.add(pod)


def instances_billed(line: dict) -> int:
    """Instances an instance-hour line bills: usage hours ÷ line hours (1 for per-instance lines)."""
    quantity = line.get("pricing_quantity") or line.get("consumed_quantity")
    hours = Decimal(int((line["end"] - line["start"]).total_seconds())) / 3600
    if not line.get("gpus_per_instance") or not quantity or not hours:
        return 1
    return max(1, int((quantity / hours).to_integral_value()))


class _Unit:
    """The identifiers of a GPU unit (what device_key reads)."""

    def __init__(self, gpu: str, uuid: str):
        self.gpu, self.uuid = gpu, uuid


def _gpu_key(gpu: str):
    return (0, int(gpu)) if str(gpu).isdigit() else (1, str(gpu))


def gpus_of_resources(gpu_lines: pd.DataFrame) -> dict[str, int]:
    """GPUs per billed resource: the instance table, or GPU-meter hours ÷ line hours (GCP)."""
    out: dict[str, int] = {}
    needed = ["resource_id", "line_id", "gpus_per_instance", "start", "end", "pricing_quantity",
              "consumed_quantity", "charge_description"]
    for line in gpu_lines[needed].to_dict("records"):
        key = resource_key(line["resource_id"]) or line["line_id"]
        count = int(line["gpus_per_instance"] or 0)
        if not count:
            hours = Decimal(int((line["end"] - line["start"]).total_seconds())) / 3600
            gpu_hours = gpu_hours_of(line)
            count = int((gpu_hours / hours).to_integral_value()) if hours and gpu_hours else 0
        out[key] = max(out.get(key, 0), count)
    return out
