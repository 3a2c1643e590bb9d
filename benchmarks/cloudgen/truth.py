"""truth.json: the bucket totals of METHOD sections 2-3, from the hidden states and the lines written.

Per GPU and hour: the GPU-interval's cost is the cost of the lines that bill its machine that hour,
spread evenly over the nodes a line covers, its hours and the machine's GPUs (a machine billed in
parts sums its vCPU, RAM and GPU lines). Its holder and kernel-active fraction b (the mean of the
hour's four DCGM samples) decide where it goes: per service and hour, B = sum b x cost and P = sum
cost over its GPUs; with a profile S = min(g B, P - B) is serving path, O = P - B - S overhead
(headroom up to (B + S)/u - B - S, the rest capacity above demand); without one B is unattributed
(no kernel profile) and P - B overhead (idle, serving-path share not separated). A GPU no pod holds
is overhead (unallocated), one an undeclared pod holds is unattributed (undeclared workload), an
hour its exporter sent nothing for is unattributed (no activity sample). Non-GPU lines go to their
class's part. Credits and tax (the adjustments variant) are netted into the charges they apply
to first (``net_amounts``), and every figure above uses the charges' net amounts; a
commitment-covered line (the commitments variant) costs its effective (amortised) amount, and an
unused commitment is platform overhead (commitment_unused). Each service's unit cost (METHOD §4)
is in ``unit_costs``.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Callable

from benchmarks.cloudgen.focus import Line
from benchmarks.cloudgen.profile import Profile
from benchmarks.cloudgen.world import HOURS, World

CENT = Decimal("0.01")
SIX = Decimal("0.000001")
TARGET_UTILISATION = Decimal("0.8")
MONTH_DAYS = Decimal("30.4375")  # METHOD §7: a month; the window is one day
SIMPLE = {
    "serving_compute": ("serving_path", "serving_compute"),
    "serving_network": ("serving_path", "serving_network"),
    "egress": ("platform_overhead", "egress"),
    "observability": ("platform_overhead", "observability"),
    "orchestration": ("platform_overhead", "orchestration"),
    "commitment_unused": ("platform_overhead", "commitment_unused"),
}
BUCKETS = ("model_compute", "serving_path", "platform_overhead", "unattributed")


def round_lr(amounts: dict[str, Decimal], target: Decimal) -> dict[str, Decimal]:
    """Cents that sum to target, by largest remainder."""
    floors = {k: v.quantize(CENT, rounding=ROUND_FLOOR) for k, v in amounts.items()}
    left = int((target - sum(floors.values(), Decimal(0))) / CENT)
    assert 0 <= left <= len(amounts), (left, amounts, target)
    for key in sorted(amounts, key=lambda k: (-(amounts[k] - floors[k]), k))[:left]:
        floors[key] += CENT
    return floors


def net_amounts(lines: list[Line]) -> dict[int, Decimal]:
    """Each charge's amount after its credits and its share of tax (METHOD §2), by ``id``: a credit
    is netted into the charge it rides on; a tax line is spread over the charges of its account and
    service pro rata to their amount before credits."""
    net = {id(ln): ln.cost for ln in lines if ln.kind not in ("credit", "tax")}
    for ln in lines:
        if ln.kind == "credit":
            assert ln.applies_to is not None, "every cloudgen credit rides on a charge"
            net[id(ln.applies_to)] += ln.cost
    for ln in lines:
        if ln.kind == "tax":
            account = ln.columns["SubAccountId"]
            taxed = [c for c in lines if c.kind == "charge" and c.columns.get("SubAccountId") == account
                     and c.columns.get("ServiceName") == ln.taxes]
            gross = sum((c.cost for c in taxed), Decimal(0))
            for c in taxed:
                net[id(c)] += ln.cost * c.cost / gross
    return net


def node_hour_costs(lines: list[Line], net: dict[int, Decimal] | None = None) -> dict[tuple[int, int], Decimal]:
    """Cost per GPU machine and hour, from the gpu_compute lines that bill it (after credits and tax)."""
    out: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    for line in lines:
        if line.cls != "gpu_compute":
            continue
        cost = net[id(line)] if net is not None else line.cost
        share = cost / (len(line.nodes) * (line.end_h - line.start_h))
        for n in line.nodes:
            for h in range(line.start_h, line.end_h):
                out[(n, h)] += share
    return out


def gpu_slots(world: World, cost: dict[tuple[int, int], Decimal], h: int):
    """Every GPU in hour ``h``: (node index, node, holder, its cost, whether DCGM sampled the node)."""
    for n in world.gpu_nodes():
        node = world.nodes[n]
        measured = h not in world.missing_hours.get(n, frozenset())
        for g in range(node.gpus):
            yield n, g, node, world.holders[(n, g)], cost[(n, h)] / node.gpus, measured


def consolidation_saving(world: World, cost: dict[tuple[int, int], Decimal]) -> Decimal:
    """METHOD §7's consolidation model, expected band, per month: each hour and instance type, the
    GPUs held (every GPU but the free ones; an hour without a DCGM sample counts as held) packed onto
    whole nodes; the nodes beyond those, at the free GPUs' cost per GPU of that type and hour."""
    saving = Decimal(0)
    for h in range(HOURS):
        nodes: dict[str, set] = defaultdict(set)
        per_node: dict[str, int] = {}
        free: dict[str, int] = defaultdict(int)
        paid: dict[str, Decimal] = defaultdict(Decimal)
        for n, _, node, holder, per, measured in gpu_slots(world, cost, h):
            nodes[node.instance_type].add(n)
            per_node[node.instance_type] = node.gpus
            if measured and holder.kind == "free":
                free[node.instance_type] += 1
                paid[node.instance_type] += per
        for kind, count in nodes.items():
            size = per_node[kind]
            released = max(0, len(count) - math.ceil((len(count) * size - free[kind]) / size))
            if free[kind]:
                saving += min(paid[kind], Decimal(released * size) * paid[kind] / free[kind])
    return saving * MONTH_DAYS


def right_size_saving(world: World, cost: dict[tuple[int, int], Decimal], g: Decimal | None) -> Decimal:
    """METHOD §7's right-size model, expected band, per month, for the profiled services (every
    case service has 1 GPU per replica, at least 1 replica, a 1 h scale reaction: 1 hour either
    side). Each hour, a service's measured GPUs (an hour without a DCGM sample is not the
    service's) did B GPU-seconds of kernel work and S = min(g·B, P − B) in flight; it needed
    ⌈(B + S) ÷ (0.8 · 3600)⌉ replicas, the most of the hour and its neighbours (never below 1);
    the replicas held beyond that, at the hour's paid cost per GPU, capped by the hour's capacity
    above demand."""
    if g is None:
        return Decimal(0)
    hours: dict[str, list] = {name: [] for name, svc in world.services.items() if svc.profiled}
    for h in range(HOURS):
        held: dict[str, list] = {name: [0, Decimal(0), Decimal(0), Decimal(0)] for name in hours}  # GPUs, P, B, B s
        for n, gpu, _, holder, per, measured in gpu_slots(world, cost, h):
            if measured and holder.kind == "service" and holder.service in held:
                b = Decimal(world.hour_busy_micro(n, gpu, h)) / Decimal(4_000_000)
                entry = held[holder.service]
                entry[0] += 1
                entry[1] += per
                entry[2] += b * per
                entry[3] += b * 3600
        for name, entry in held.items():
            if entry[0]:
                hours[name].append(tuple(entry))
    saving = Decimal(0)
    for rows in hours.values():
        need = []
        for gpus, _, _, busy in rows:
            serving = min(g * busy, gpus * Decimal(3600) - busy)
            need.append(math.ceil((busy + serving) / (TARGET_UTILISATION * 3600)))
        for i, (gpus, P, B, _) in enumerate(rows):
            kept = max(max(need[max(0, i - 1): i + 2]), 1)
            S = min(g * B, P - B)
            over = P - B - S
            above = over - min(over, max(Decimal(0), (B + S) / TARGET_UTILISATION - B - S))
            money = Decimal(max(0, gpus - kept)) * P / gpus
            saving += max(Decimal(0), min(money, above))
    return saving * MONTH_DAYS


class Ledger:
    def __init__(self, world: World, g: Decimal | None) -> None:
        self.world, self.g = world, g
        self.parts: dict[str, dict[str, Decimal]] = {b: defaultdict(Decimal) for b in BUCKETS}
        self.svc: dict[str, dict[str, Decimal]] = {s: defaultdict(Decimal) for s in world.services}
        self.paid_gpu_hours = self.observed_gpu_hours = 0

    def hour(self, h: int, cost: dict[tuple[int, int], Decimal]) -> None:
        paid: dict[str, Decimal] = defaultdict(Decimal)
        busy: dict[str, Decimal] = defaultdict(Decimal)
        for n in self.world.gpu_nodes():
            node = self.world.nodes[n]
            per = cost[(n, h)] / node.gpus
            self.paid_gpu_hours += node.gpus
            if h in self.world.missing_hours.get(n, frozenset()):
                self.parts["unattributed"]["no_activity_sample"] += per * node.gpus
                for g in range(node.gpus):
                    holder = self.world.holders[(n, g)]
                    if holder.kind == "service":
                        self.svc[holder.service]["unmeasured"] += per
                continue
            self.observed_gpu_hours += node.gpus
            for g in range(node.gpus):
                holder = self.world.holders[(n, g)]
                if holder.kind == "free":
                    self.parts["platform_overhead"]["unallocated"] += per
                elif holder.kind == "undeclared":
                    self.parts["unattributed"]["undeclared_workload"] += per
                else:
                    b = Decimal(self.world.hour_busy_micro(n, g, h)) / Decimal(4_000_000)
                    paid[holder.service] += per
                    busy[holder.service] += b * per
        for name in paid:
            self.split(name, paid[name], busy[name])

    def split(self, name: str, P: Decimal, B: Decimal) -> None:
        s = self.svc[name]
        s["paid"] += P
        s["kernel_active"] += B
        if self.g is not None and self.world.services[name].profiled:
            S = min(self.g * B, P - B)
            over = P - B - S
            headroom = min(over, max(Decimal(0), (B + S) / TARGET_UTILISATION - B - S))
            self.parts["model_compute"]["kernel_active"] += B
            self.parts["serving_path"]["in_flight_idle"] += S
            self.parts["platform_overhead"]["headroom"] += headroom
            self.parts["platform_overhead"]["capacity_above_demand"] += over - headroom
            s["in_flight_idle"] += S
            s["overhead"] += over
        else:
            self.parts["unattributed"]["no_kernel_profile"] += B
            self.parts["platform_overhead"]["idle_not_separated"] += P - B
            s["unattributed"] += B
            s["overhead"] += P - B


@dataclass(frozen=True)
class CpuService:
    """The case's CPU-only service (gateway.py): which lines it claims and its successful requests."""

    name: str
    claims: Callable[[Line], bool]
    requests: int


def unit_costs(world: World, ledger: Ledger, lines: list[Line], net: dict[int, Decimal],
               cpu: CpuService | None) -> dict[str, dict[str, str]]:
    """METHOD §4: a service owns its GPU parts (all but the unattributed) and the lines it claims;
    the shared pool (the other non-GPU lines in scope and the unallocated GPUs) is split by GPU cost
    (each service's paid GPU-intervals); cost per 1,000 successful requests, 6 places half-even."""
    owned = {name: s["paid"] - s.get("unattributed", Decimal(0)) for name, s in ledger.svc.items()}
    weights = {name: s.get("paid", Decimal(0)) for name, s in ledger.svc.items()}
    requests = {name: sum(int(world.requests[h.pod].sum()) for h in world.holders.values() if h.service == name)
                for name in world.services}
    pool = ledger.parts["platform_overhead"]["unallocated"]
    if cpu is not None:
        owned[cpu.name], weights[cpu.name], requests[cpu.name] = Decimal(0), Decimal(0), cpu.requests
    for ln in lines:
        if ln.kind not in ("charge", "cud_covered") or ln.cls not in SIMPLE:  # cud_covered: a CPU node's
            continue
        if cpu is not None and cpu.claims(ln):
            owned[cpu.name] += net[id(ln)]
        else:
            pool += net[id(ln)]
    whole = sum(weights.values(), Decimal(0))
    out = {}
    for name in owned:
        total = owned[name] + pool * weights[name] / whole
        per_1k = (total * 1000 / requests[name]).quantize(SIX, rounding=ROUND_HALF_EVEN) if requests[name] else None
        out[name] = {"total_cost": str(total.quantize(SIX)), "requests": requests[name],
                     "cost_per_1k_requests": None if per_1k is None else str(per_1k)}
    return out


def compute_truth(world: World, lines: list[Line], profile: Profile | None, meta: dict,
                  cpu: CpuService | None = None) -> dict:
    scope = [ln for ln in lines if ln.cls != "outside"]
    outside = [ln for ln in lines if ln.cls == "outside"]
    total = sum((ln.cost for ln in scope), Decimal(0))
    outside_total = sum((ln.cost for ln in outside), Decimal(0))
    net = net_amounts(lines)
    g = Decimal(repr(profile.gap_ratio)) if profile else None
    ledger = Ledger(world, g)
    for ln in scope:
        if ln.cls in SIMPLE:
            bucket, part = SIMPLE[ln.cls]
            ledger.parts[bucket][part] += net[id(ln)]
    cost = node_hour_costs(scope, net)
    for h in range(HOURS):
        ledger.hour(h, cost)
    exact = {b: sum(p.values(), Decimal(0)) for b, p in ledger.parts.items()}
    assert abs(sum(exact.values(), Decimal(0)) - total) < Decimal("1e-20"), (exact, total)
    invoice = (total + outside_total).quantize(CENT)
    rounded = round_lr({**exact, "outside_scope": outside_total}, invoice)
    buckets = {}
    for b in BUCKETS:
        parts = {k: v for k, v in ledger.parts[b].items()}
        buckets[b] = {
            "amount": str(rounded[b]),
            "exact": str(exact[b].quantize(SIX)),
            "parts": {k: str(v) for k, v in sorted(round_lr(parts, rounded[b]).items())} if parts else {},
            "parts_exact": {k: str(v.quantize(SIX)) for k, v in sorted(parts.items())},
        }
    classes: dict[str, dict] = {}
    for ln in lines:
        entry = classes.setdefault(ln.cls, {"lines": 0, "amount": Decimal(0)})
        entry["lines"] += 1
        entry["amount"] += ln.cost
    services: dict[str, dict[str, object]] = {name: {k: str(v.quantize(SIX)) for k, v in sorted(s.items())}
                for name, s in ledger.svc.items()}
    for name, svc in world.services.items():
        pods = sorted(h.pod for h in world.holders.values() if h.service == name)
        services[name].update({
            "pods": len(pods), "requests": int(sum(int(world.requests[p].sum()) for p in pods)),
            "profiled": bool(profile) and svc.profiled})
    return {
        "about": "Ground truth of a cloudgen case (benchmarks/cloudgen), computed from the generator's hidden "
                 "states and the lines it wrote (METHOD sections 2-3, effective basis = billed basis: no "
                 "commitments; credits and tax, where the case has them, netted into their charges). Amounts "
                 "in the case currency; buckets and outside_scope are rounded together, by largest remainder, "
                 "so that they add up to invoice_total.",
        **meta,
        "seed": world.seed,
        "total": str(sum((rounded[b] for b in BUCKETS), Decimal(0))),
        "total_exact": str(total),
        "invoice_total": str(invoice),
        "outside_scope": {"amount": str(rounded["outside_scope"]), "exact": str(outside_total),
                          "lines": len(outside)},
        "lines": {"total": len(lines), "in_scope": len(scope)},
        "buckets": buckets,
        "classes": {k: {"lines": v["lines"], "amount": str(v["amount"])} for k, v in sorted(classes.items())},
        "services": services,
        "profile": None if not profile else {
            "service": "chat", "kernels": profile.kernels, "kernel_active_us": f"{profile.kernel_active_us:.3f}",
            "window_us": f"{profile.window_us:.3f}", "gpu_window_us": f"{profile.gpu_window_us:.3f}",
            "gap_ratio": f"{profile.gap_ratio:.9f}", "gap_basis": profile.basis},
        "coverage": {"paid_gpu_hours": ledger.paid_gpu_hours, "observed_gpu_hours": ledger.observed_gpu_hours},
        "unit_costs": unit_costs(world, ledger, scope, net, cpu),
        "options": {
            "consolidate_models": {
                "monthly_saving_expected": str(consolidation_saving(world, cost).quantize(CENT)),
                "about": "GPUs held packed onto whole nodes per hour and instance type (METHOD 7), x 30.4375"},
            "right_size_replicas": {
                "monthly_saving_expected": str(right_size_saving(world, cost, g).quantize(CENT)),
                "about": "replicas needed at u = 0.8, smoothed over 1 h either side, against those held, "
                         "capped by each hour's capacity above demand (METHOD 7), x 30.4375"}},
    }
