"""GPU-intervals: the cost of each paid GPU per telemetry interval, with its holder and activity.

A GPU-interval's cost is the cost of the line that bills it, spread evenly over the GPU-seconds the
line bills (METHOD §3); a line that bills part of its period is placed in the intervals telemetry
saw its node, where it saw it in some but not all (:mod:`audit.gpu_presence`). Each GPU-interval
goes to its holders: a declared service, no workload (unallocated), an undeclared pod, or nobody
known; one without a kernel-activity sample is unmeasured, and so is one whose every sample was
excluded (out of range or not finite), under a reason of its own.
A scheduler request holds the GPUs it asks for, a fraction of a GPU-interval where its pod ran part of
the interval; requests that share a node's unlabelled GPUs take them at their mean activity (which GPU
each pod held is not in the data), and the node is named (``gpu_placement_assumed``); requests that
ask for more of them than the node has are scaled to them (``gpu_requests_exceed_gpus``).
:func:`split_gpus` walks the gpu_compute charges and returns the sums per holder and interval.

The walk is per line, in the lines' order, and every sum is added to in the order it always was (Decimal sums at 50
digits round, so the order is part of the result). What does not depend on the line is worked out once: a billing
period's intervals, a resource's key, and what telemetry says of a node's GPUs in an interval
(:meth:`GpuSplitter.held_at`), which every line billing that node and interval replays with its own money.
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Container, Mapping

import pandas as pd

from audit.case import Case, Service
from audit.gpu_index import index_activity, index_labelled, index_requests, index_unmeasured, node_presence
from audit.gpu_lines import LINE_COLUMNS, GpuLines, LinePlan, interval_grid, taken_in_turn, walk_named
from audit.gpu_over import Beyond, held_back, over_fit
from audit.gpu_timeless import no_gpu_time
from audit.gpu_turns import line_turns
from audit.gpu_unpaid import add_unpaid
from audit.gpumig import MigLedger, asked_profile, mig_groups, whole_gpu_units
from audit.gpuunits import (
    UnitIds,
    device_key,
    devices,
    gpu_key,
    oversubscribed_misfit,
    placement_misfit,
    pod_name,
    pooled_shares,
    request_count,
    whole_weight,
)
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
from audit.money import ZERO
from audit.normalised import NodeMap, Telemetry, node_types, scheduled_spans
from audit.services import PodModels, pod_models, service_of
from audit.table_rows import column_values


def split_gpus(case: Case, charges: pd.DataFrame, tele: Telemetry, nodes: NodeMap, engine=None) -> GpuSplit:
    """Spread every gpu_compute charge over its GPUs and intervals; sum per holder and interval.
    ``engine`` (else ``$COSTAUDIT_SPLIT``, else "python"): "python" walks the lines here; an engine of
    :data:`audit.split_sql.ENGINES` ("duckdb") or the bill's (a callable: :mod:`audit.split_remote`) sums
    them with the query BigQuery and Trino run too. Every walk gives the same coverage and groups (time
    and GPUs exactly, money to its last digits: the engine divides a key's summed money once)."""
    walk = "remote" if callable(engine) else walk_named(engine)
    wanted = [c for c in LINE_COLUMNS if c in charges.columns]  # the columns read, not a copy of every one
    lines = GpuLines(charges.loc[(charges["resource_class"] == "gpu_compute").to_numpy(dtype=bool), wanted])
    splitter = GpuSplitter(case, case.services, tele.activity, nodes.nodes_of, tele.requests,
                           pod_models(tele.traffic), tele.step, tele.unmeasured_intervals, node_types(tele.nodes),
                           scheduled_spans(tele.scheduled, tele.step, case.end))
    if walk == "python":
        splitter.add_lines(lines)
    else:
        from audit import split_sql

        splitter.add_lines_in_engine(lines, engine if callable(engine) else split_sql.ENGINES[walk])
    add_unpaid(splitter.presence, splitter.coverage, splitter.held_at)
    return GpuSplit(splitter.groups, splitter.coverage, frozenset(splitter.extra_gpus),
                    splitter.misfits + tuple(splitter.placement_misfits()) + tuple(splitter.oversubscription_misfits())
                    + tuple(splitter.mig.misfits()) + tuple(splitter.presence.misfits()))


class GpuSplitter:
    """Walks the gpu_compute lines and fills Groups and NodeCoverage."""

    def __init__(self, case: Case, services: Mapping[str, Service], activity: pd.DataFrame,
                 nodes_of_resource: Mapping[str, tuple[str, ...]], requests: pd.DataFrame, pod_models: PodModels,
                 step: int, unmeasured: pd.DataFrame | None = None, node_types: Mapping[str, str] | None = None,
                 scheduled: Container = frozenset()):
        self.case, self.services, self.step = case, services, step
        self.node_types = node_types or {}
        self.nodes_of_resource = nodes_of_resource
        self.pod_models = pod_models
        self.samples = index_activity(activity)
        self.excluded = index_unmeasured(unmeasured)
        self.nodes_seen = set(column_values(activity["node"])) if len(activity) else set()
        self.nodes_seen |= {node for node, _ in self.excluded}
        self.presence = node_presence(activity, self.samples, self.excluded)
        # dcgm-exporter maps GPUs to pods cluster-wide: once any GPU carries a pod label, an empty
        # label means no pod held that GPU, unless the scheduler places a pod there that no label names.
        self.known_pods = index_labelled(activity)
        self.pod_mapping = bool(self.known_pods)
        self.requests = index_requests(requests)
        #: ``(node, interval) in`` it: a scheduler source lists every job of the node-interval (audit.normalised.Scheduled)
        self.scheduled = scheduled
        self.groups: dict[tuple[str, datetime], Group] = {}
        self.coverage: dict[str, NodeCoverage] = {}
        self.extra_gpus: set[str] = set()
        #: the lines whose paid GPU time was capped at their period (audit/line_facts.py), named
        self.misfits: tuple = ()
        self._held: dict[tuple, tuple] = {}
        #: node -> the pods whose GPUs :meth:`_pooled` took at the mean of the node's unlabelled GPUs
        self.assumed: dict[str, set[str]] = {}
        #: node -> interval -> (GPUs requested, GPUs available, pods) where :meth:`_time_sliced` scaled them
        self.oversubscribed: dict[str, dict] = {}
        self._service: dict[tuple, str] = {}
        #: MIG requests no instance took, MIG instances of unknown profile (audit/gpumig.py)
        self.mig = MigLedger(step)
        #: the intervals billed beyond their GPUs and what lies beyond them (audit/gpu_over.py)
        self.beyond = Beyond()

    def add_lines(self, lines: GpuLines) -> None:
        """Spread every line over its GPUs and intervals, in order.

        A line may bill several instances (an Azure scale set): its cost is spread evenly over the
        nodes it covers. The vCPU / RAM parts of a machine billed in parts add money to the
        GPU-intervals but no GPU time (the GPU meter line counts that).
        """
        if not lines.size:
            return
        plan = LinePlan(lines, self._grid, self.nodes_of_resource)
        self.misfits += plan.capped
        placed = self._placed(plan, lines)
        held = held_back(plan, lines, placed)
        self._full(plan, [(*found[:5], row[0]) for found, row in held.items()])
        for key, period, fact, count, nodes, net, gross, priced, committed in zip(
                plan.keys, lines.period, plan.fact, plan.line_gpus, placed, lines["net"], lines["pretax"],
                lines["priced"], lines["committed"]):
            grid, parts = plan.grids[period]
            if not parts or count <= 0:
                continue
            cover = self.coverage[key]
            cover.gpus = max(cover.gpus, plan.gpus[key])
            _, instances, time_code = plan.facts.facts[fact]
            if key in plan.stacked:  # summed per node and facts, added at their first line, as the engine adds them
                for node in nodes:
                    row = held.pop((key, node, period, count, time_code, instances), None)
                    if row is not None:
                        self._add_row(plan, key, node, period, count, time_code, instances, *row)
                continue
            share, occupancy = count * instances, plan.facts.occupancy(time_code)
            spreads = [self._spread(plan, node, period, time_code) for node in nodes] if ZERO < occupancy < 1 else ()
            if any(note for _, note in spreads):  # placed by node presence: node by node
                for node, (spread, note) in zip(nodes, spreads):
                    for ts, overlap, part, occupied in spread:
                        money = _shares((net, gross, priced, committed), part, share)
                        self._add_interval(node, ts, overlap, occupied, count, money, cover, placed=note)
                continue
            for (ts, overlap), part in zip(grid, parts):
                money = _shares((net, gross, priced, committed), part, share)
                for node in nodes:
                    self._add_interval(node, ts, overlap, occupancy, count, money, cover)
        self.misfits += tuple(over_fit(self.beyond, plan, self.coverage, self.case.currency))
        self.misfits += no_gpu_time(self.groups, plan, lines, self.coverage, self.case.currency)

    def _placed(self, plan: LinePlan, lines: GpuLines) -> list[list[str]]:
        """Each line's nodes (its resource's, taken in turn: :func:`taken_in_turn`, the turn of
        :func:`line_turns`), each resource key's coverage made at its first line."""
        node_lists: dict = {}
        out = []
        for resource, key, fact, turn, kind in zip(plan.resources, plan.keys, plan.fact, self._turns(plan, lines),
                                                  lines["machine"]):
            instances = plan.facts.facts[fact][1]
            known = self.nodes_of_resource.get(resource, ())
            turn = turn if 0 < instances < len(known) else 0
            nodes = node_lists.get((resource, instances, turn))
            if nodes is None:
                nodes = node_lists[(resource, instances, turn)] = taken_in_turn(known, instances, turn)
            if key not in self.coverage:
                self.coverage[key] = self._cover(resource, known, nodes, kind)
            out.append(nodes)
        return out

    def _turns(self, plan: LinePlan, lines: GpuLines) -> list[int]:
        """Each line's turn among its resource's lines of its period and meter (:func:`line_turns`)."""
        return line_turns(plan, lines["charge_description"], self.nodes_of_resource, self.presence.seen)

    def _full(self, plan: LinePlan, rows: list) -> None:
        """The full intervals of the stacked keys' summed ``rows`` (an interval holds its seconds,
        the last one clipped to the window)."""
        end = self.case.end
        self.beyond.full(rows, lambda node, period, code: self._spread(plan, node, period, code)[0],
                         lambda ts: Decimal(min(self.step, int((end - ts).total_seconds()))), plan.gpus)

    def _cover(self, resource: str, known, nodes: list[str], kind) -> NodeCoverage:
        """A billed resource's coverage, as its first line gives it."""
        return NodeCoverage(resource, ", ".join(n for n in known or nodes if n), kind or self._node_type(nodes))

    def _node_type(self, nodes: list[str]) -> str:
        """The instance type telemetry gives the first of ``nodes`` that has one (for a line that names
        no machine: a GCP part line without the machine_spec system label)."""
        return next((self.node_types[n] for n in nodes if n in self.node_types), "")

    def _grid(self, start, end) -> tuple[list, list]:
        """A billing period's (interval, overlap) on the grid and each interval's part of the period
        (no parts when the period bills no time in the window)."""
        grid = interval_grid(self.case.start, self.case.end, self.step, start.to_pydatetime(), end.to_pydatetime())
        seconds = sum((o for _, o in grid), ZERO)
        return grid, [overlap / seconds for _, overlap in grid] if grid and seconds != 0 else []

    def add_lines_in_engine(self, lines: GpuLines, run) -> None:
        """The same walk as :meth:`add_lines`, its per-line work done by ``run`` (an engine that runs
        :data:`audit.split_sql.COVERAGE` and :data:`~audit.split_sql.SUMS` over the prepared tables)."""
        if not lines.size:
            return
        plan = LinePlan(lines, self._grid, self.nodes_of_resource)
        self.misfits += plan.capped
        meters: dict = {}
        rows = {"ord": range(lines.size), "rkey": plan.keys, "resource": plan.resources, "period": lines.period,
                "meter": [meters.setdefault(text, len(meters)) for text in lines["charge_description"]],
                "turn": self._turns(plan, lines), "fact": plan.fact, "kind": lines["machine"],
                "parts": [bool(plan.grids[p][1]) for p in lines.period],
                "net": lines["net"], "gross": lines["pretax"], "priced": lines["priced"],
                "committed": lines["committed"]}
        facts = pd.DataFrame(plan.facts.facts, columns=["gpus", "instances", "time_code"]).rename_axis("fact")
        from audit import split_sql

        prepared = split_sql.tables(rows, facts.reset_index(), self.nodes_of_resource)
        cover_rows, sums = run(prepared)
        self.add_sums(plan, cover_rows, split_sql.key_sums(sums, prepared))
        self.misfits += no_gpu_time(self.groups, plan, lines, self.coverage, self.case.currency)

    def add_sums(self, plan: LinePlan, cover_rows, sum_rows) -> None:
        """The engine's walk (:mod:`audit.split_sql`): each resource key's coverage as its first line
        gives it, then each key's money, summed over its placements, divided once and added as
        ``placements`` lines would add it."""
        for rkey, resource, kind, instances, turn, gpus, has_parts in cover_rows:
            known = self.nodes_of_resource.get(resource, ())
            nodes = taken_in_turn(known, instances, turn if 0 < instances < len(known) else 0)
            cover = self.coverage[rkey] = self._cover(resource, known, nodes, kind)
            if has_parts and gpus > 0:
                cover.gpus = gpus
        self._full(plan, [row[:5] + (row[6],) for row in sum_rows if row[0] in plan.stacked])
        for row in sum_rows:
            self._add_row(plan, *row)
        self.misfits += tuple(over_fit(self.beyond, plan, self.coverage, self.case.currency))

    def _add_row(self, plan: LinePlan, key, node, period, gpus, time_code, instances, placements,
                 net, gross, priced, committed) -> None:
        """The summed money of ``placements`` (line, node) placements of a key, divided once and
        added to each interval of their period by its part (placed by node presence: :meth:`_spread`)."""
        cover, share = self.coverage[key], gpus * instances
        spread, note = self._spread(plan, node, period, time_code)
        for ts, overlap, part, occupancy in spread:
            money = _shares((net, gross, priced, committed), part, share)
            self._add_interval(node, ts, overlap, occupancy, gpus, money, cover, placements, key, note)

    def _spread(self, plan: LinePlan, node, period, time_code) -> tuple[list[tuple], str]:
        """(interval, overlap, part, occupancy) of each interval of ``period`` a line of ``time_code``
        on ``node`` pays in, and the note of its placement (:mod:`audit.gpu_presence`)."""
        grid, parts = plan.grids[period]
        return self.presence.spread(node, plan.periods[period], grid, parts, plan.facts.occupancy(time_code))

    def _add_interval(self, node, ts, overlap, occupancy, gpus, money, cover, lines: int = 1, key=None,
                      placed: str = "") -> None:
        """One line's share of one node's GPUs in one interval (or the summed money of ``lines`` such
        placements), added to each holder's group. Its GPU time is the overlap × the line's occupancy
        (:mod:`audit.line_facts`: the share of its period it bills); a line that bills no GPU time (the
        core / RAM part of a machine billed in parts, occupancy 0) adds money only: neither seconds nor
        GPUs, which the GPU meter's line counts (once); lines that bill one named node in the interval
        count its GPUs once (:meth:`Group.count_gpus`). In a full interval of ``key`` (one billed beyond
        its GPUs, :mod:`audit.gpu_over`) the holders keep the fit of it (:meth:`Beyond.split`)."""
        counts_time = occupancy != 0
        time = (overlap if occupancy == 1 else overlap * occupancy) * lines
        cover.paid_seconds += time * gpus
        kept = self.beyond.split(self.groups, key, node, ts, time, gpus, money) if key is not None and counts_time \
            else None
        if kept is not None:
            time, money, lines = kept
        observed, holdings = self.held_at(node, ts, gpus)
        cover.observed_seconds += time * observed
        net, gross, priced, committed = money
        counted: dict = {}
        for holder, n, busy, source, pod, owner in holdings:
            group = self.groups.get((holder, ts))
            if group is None:
                group = self.groups[(holder, ts)] = Group(holder, ts)
            if counts_time and lines:
                counted[holder] = counted.get(holder, 0) + n
            if owner:  # unmeasured GPUs of a service's pods (:meth:`_unmeasured`)
                group.owned_paid[owner] = group.owned_paid.get(owner, ZERO) + net * n
                group.owned_seconds[owner] = group.owned_seconds.get(owner, ZERO) + time * n
            if holder == UNALLOCATED:
                kind = cover.instance_type
                group.type_paid[kind] = group.type_paid.get(kind, ZERO) + net * n
                group.type_seconds[kind] = group.type_seconds.get(kind, ZERO) + time * n
            group.paid += net * n
            group.gross += gross * n
            group.priced += priced * n
            group.busy += net * busy * n
            if committed:
                group.committed += committed * n
                group.committed_busy += committed * busy * n
            group.paid_seconds += time * n
            group.busy_seconds += time * busy * n
            if source:
                group.sources.add(source)
            if node:
                group.nodes.add(node)
            if pod:
                group.pods.add(pod)
            if placed:
                group.placed.add(placed)
        for holder, n in counted.items():
            self.groups[(holder, ts)].count_gpus(node, cover.instance_type, n, lines)

    def held_at(self, node, ts, gpus) -> tuple[int, tuple]:
        """What telemetry says of ``gpus`` billed GPUs of a node in an interval: how many it observed,
        and (holder, weight, busy fraction, source, pod, owner) of each part, in the order their sums
        take them; worked out once per node, interval and GPU count (kept in ``_held``)."""
        if (node, ts, gpus) in self._held:
            return self._held[(node, ts, gpus)]
        rows = self.samples.get((node, ts), []) if node else []
        found = devices(rows)
        if len(found) > gpus:
            self.extra_gpus.add(node)
            found = found[:gpus]
        out: list[tuple] = []
        missing = gpus - len(found)
        excluded = self._excluded_gpus(node, ts, [r for d in found for r in d])[:missing]
        missing -= len(excluded)
        units = self._units(found)
        held, left = self._holders(node, ts, [u for u in units if u.row is not None], gpus - len(found))
        for metric in excluded:
            out.extend((NO_VALID_SAMPLE, n, ZERO, metric, pod, owner)
                       for _, n, _, _, pod, owner in self._unmeasured(NO_VALID_SAMPLE, 1, left))
        if missing:
            out.extend(self._unmeasured(NO_SAMPLE if node in self.nodes_seen else NOT_IN_TELEMETRY, missing, left))
        out.extend((holder, weight, busy, source, pod, "") for holder, weight, busy, source, pod in held)
        out.extend((UNALLOCATED, unit.weight, ZERO, "", "", "") for unit in units if unit.row is None)  # free MIG slices
        held_parts = self._held[(node, ts, gpus)] = (len(found), tuple(out))
        return held_parts

    def _units(self, found: list[list]) -> list:
        """The units of each physical GPU (how a shared one was split is noted from the activity
        table itself: :func:`audit.gpuunits.shared_gpu_notes`)."""
        return [unit for device in found for unit in self.mig.units(device)]

    def _excluded_gpus(self, node, ts, rows) -> list[str]:
        """The metric of each GPU of the node whose samples in the interval were all excluded
        (the MIG instances of one GPU count as that GPU)."""
        excluded = self.excluded.get((node, ts)) if node else None
        if not excluded:
            return []
        seen = {device_key(r) for r in rows}
        found: dict = {}
        for (gpu, uuid), metric in excluded.items():
            key = device_key(UnitIds(gpu, uuid))
            if key not in seen:
                found.setdefault(key, metric)
        return [found[key] for key in sorted(found, key=lambda g: (gpu_key(g[0]), g[1]))]

    def _unmeasured(self, holder: str, missing, left: list) -> list[tuple]:
        """``missing`` GPUs no (valid) sample measures, under ``holder``: those the scheduler's requests
        still place (``left``, consumed; a fractional request takes its fraction of a GPU) name the
        service whose pods they are (METHOD §4)."""
        out = []
        while left and missing > 0:
            req = left[0]
            n = min(req.gpus, missing)
            owner = self._service_or_undeclared(req.namespace, req.pod, "")
            out.append((holder, whole_weight(n), ZERO, "", req.pod, owner if owner in self.services else ""))
            missing -= n
            left[0] = req._replace(gpus=req.gpus - n)
            if left[0].gpus <= 0:
                left.pop(0)
        return out + ([(holder, whole_weight(missing), ZERO, "", "", "")] if missing > 0 else [])

    def _holders(self, node, ts, units: list, unseen=0) -> tuple[list[tuple], list]:
        """(holder, weight, busy, source, pod) of each part of the observed GPU units: a pod label
        names its unit's holder; the units without one are shared by the scheduler's GPU requests of
        the node's pods that no DCGM label names in the window (all of them where telemetry labels no
        GPU with a pod; :meth:`_pooled`; MIG instances by profile, :func:`~audit.gpumig.whole_gpu_units`);
        and the requests no observed GPU took (unmeasured, :meth:`_unmeasured`). A pod a label names
        keeps its request for its own GPU: where that GPU has no sample in the interval, an unlabelled
        GPU beside it held no pod, and is unallocated, not the pod's. Without a request to place, an
        unlabelled unit is unallocated (the exporter maps pods, or the scheduler reports the node-interval:
        a request or all its jobs), else allocation unknown. Requests that ask for more than the
        unlabelled units and the ``unseen`` GPUs (billed, without a sample) hold are scaled to them
        first (:meth:`_time_sliced`)."""
        labelled = {(u.row.namespace, u.row.pod) for u in units if u.row.pod}
        pending = [req._replace(gpus=request_count(req.gpus)) for req in self.requests.get((node, ts), [])
                   if (req.namespace, req.pod) not in labelled]
        placeable = [i for i, req in enumerate(pending) if (req.namespace, req.pod) not in self.known_pods.get(node, ())]
        mig, free = self._mig_held(node, ts, units, pending, placeable)
        placeable = [i for i in placeable if not asked_profile(pending[i])]
        whole, left = whole_gpu_units(free, units, self.requests.get((node, ts), []) if placeable else None)
        nobody = UNALLOCATED if (node, ts) in self.requests or (node, ts) in self.scheduled or self.pod_mapping else UNKNOWN
        out = [(self._service_or_undeclared(u.row.namespace, u.row.pod, u.row.container) if u.row.pod else nobody,
                u.weight, u.busy, u.row.source, u.row.pod) for u in units if u.row.pod or id(u) in left]
        if whole:
            self._time_sliced(node, ts, sum((u.weight for u in whole), ZERO) + unseen, pending, placeable)
            out += self._pooled(node, whole, pending, placeable)
        self.mig.whole_unplaced_at(node, ts, [pending[i] for i in placeable], [u for u in free if id(u) in left])
        return out + mig, [req for req in pending if req.gpus > 0 and not asked_profile(req)]

    def _mig_held(self, node, ts, units: list, pending: list, placeable: list[int]) -> tuple[list[tuple], list]:
        """The parts of the node's unlabelled MIG instances (of its observed ``units``) that the requests
        for their profile (at ``placeable``, consumed) hold, shared as :meth:`_pooled` shares GPUs, and
        the unlabelled units left. A profile no unlabelled instance on the node has is named
        (``mig_request_unplaced``; :meth:`audit.gpumig.MigLedger.unplaced_at`)."""
        out: list[tuple] = []
        free = [u for u in units if not u.row.pod]
        for profile, wanted, slots in mig_groups(free, pending, placeable):
            if not slots:
                self.mig.unplaced_at(node, ts, profile, [pod_name(pending[i]) for i in wanted], free, units)
                continue
            self._time_sliced(node, ts, sum((u.weight for u in slots), ZERO), pending, wanted)
            out += self._pooled(node, slots, pending, wanted)
            free = [u for u in free if all(u is not s for s in slots)]
        return out, free

    def _time_sliced(self, node, ts, available, pending: list, placeable: list[int]) -> None:
        """Scale the requests at ``placeable`` (in ``pending``) by available ÷ requested where they ask for more GPUs
        than the node's unlabelled ones (``available``) hold in the interval: the GPUs were time-sliced between the
        pods, or the requests over-report, and nothing measures each pod's part, so each pod gets the same share of what
        it asked for (METHOD §3: split evenly, said so: :meth:`oversubscription_misfits`). The last request takes what
        the others left, so the scaled requests hold exactly ``available``."""
        asked = sum((pending[i].gpus for i in placeable), ZERO)
        if asked <= available:
            return
        left = available
        for i in placeable[:-1]:
            scaled = pending[i].gpus * available / asked
            pending[i] = pending[i]._replace(gpus=whole_weight(scaled))
            left -= scaled
        pending[placeable[-1]] = pending[placeable[-1]]._replace(gpus=whole_weight(left))
        pods = tuple(pod_name(pending[i]) for i in placeable)
        self.oversubscribed.setdefault(node, {})[ts] = (asked, available, pods)

    def _pooled(self, node, free: list, pending: list, placeable: list[int]) -> list[tuple]:
        """The node's unlabelled GPU units shared by the requests that place pods on them (``pending`` at ``placeable``,
        consumed). Nothing in the data says which GPU each pod held, so each request takes the GPUs it asks for (a
        fraction where its pod ran part of the interval) at the mean activity of those units, not at the activity of
        whichever GPU came first; what no request takes is unallocated at the same mean, so the units' GPU time and
        activity are conserved. The node and its pods are named (:meth:`placement_misfits`) unless one pod took every
        unit."""
        pool: dict[str, list] = {}  # activity source -> [weight, Σ weight × busy] of its units
        for unit in free:
            sums = pool.setdefault(unit.row.source, [ZERO, ZERO])
            sums[0] += unit.weight
            sums[1] += unit.weight * unit.busy
        capacity = sum((w for w, _ in pool.values()), ZERO)
        room, out, pods = capacity, [], []
        for i in placeable:
            req = pending[i]
            take = min(req.gpus, room)
            if take <= 0:
                break
            out += pooled_shares(self._service_or_undeclared(req.namespace, req.pod, ""), take, capacity, pool, req.pod)
            pending[i] = req._replace(gpus=req.gpus - take)
            room -= take
            pods.append(pod_name(req))
        if room > 0:
            out += pooled_shares(UNALLOCATED, room, capacity, pool, "")
        if len(pods) > 1 or (pods and room > 0):
            self.assumed.setdefault(node, set()).update(pods)
        return out

    def placement_misfits(self) -> list:
        """A ``gpu_placement_assumed`` warning per node whose unlabelled GPUs several pods (or one
        pod, on part of them) shared (:meth:`_pooled`), in node order."""
        return [placement_misfit(node, pods) for node, pods in sorted(self.assumed.items())]

    def oversubscription_misfits(self) -> list:
        """A ``gpu_requests_exceed_gpus`` warning per node whose unlabelled GPUs were asked for more
        than they hold in some interval (:meth:`_time_sliced`), in node order."""
        return [oversubscribed_misfit(node, spans) for node, spans in sorted(self.oversubscribed.items())]

    def _service_or_undeclared(self, namespace, pod, container) -> str:
        key = (namespace, pod, container)
        found = self._service.get(key)
        if found is None:
            labels = {"namespace": namespace, "pod": pod, "container": container}
            found = self._service[key] = service_of(labels, self.services, self.pod_models) or f"{UNDECLARED}"
        return found


def _shares(money: tuple, part: Decimal, share: int) -> tuple:
    """A line's (net, gross, priced, committed) money of one interval (``part`` of its period) per GPU
    of its ``share`` (GPUs × instances)."""
    net, gross, priced, committed = money
    return (net * part / share, gross * part / share, priced * part / share,
            committed * part / share if committed else ZERO)
