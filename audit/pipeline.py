"""The only module that knows the order of the stages: collect → normalise → attribute → reconcile → rank → render."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Sequence

import pandas as pd

from audit import adjust, attribute, classify, normalise, rank, reconcile, units
from audit.case import Case
from audit.collect import Collected, collect
from audit.gpusplit import GpuSplitter, gpus_of_resources
from audit.money import ZERO, use_context


@dataclass
class AuditResult:
    """Everything the report needs; built once, read by result.to_dict()."""

    case: Case
    collected: Collected
    lines: pd.DataFrame
    scope_mask: pd.Series
    scope_reasons: list[str]
    charges: pd.DataFrame
    ledger: attribute.Ledger
    intervals: list
    groups: dict
    coverage: dict
    telemetry: normalise.Telemetry
    profiles: dict
    traffic: dict
    unit_costs: dict
    reconciliation: reconcile.Reconciliation
    options: list
    extra_gpu_nodes: set


def run_case(case: Case, out_dir: Path, formats: Sequence[str], progress=None) -> tuple[dict, list[Path]]:
    """The whole job of ``costaudit run``: every stage, the audit.json document, then the reports.

    Returns the document and the paths written; nothing is written when a stage or a reporter fails.
    """
    from audit.render import render
    from audit.result import to_dict

    document = to_dict(run_audit(case, progress))
    if progress is not None:
        progress(None)
    return document, render(document, out_dir, formats)


def run_audit(case: Case, progress=None) -> AuditResult:
    """Run every stage on a case."""
    use_context()
    return audit_collected(case, collect(case, progress))


def audit_collected(case: Case, collected: Collected) -> AuditResult:
    """Every stage after collection (tests feed in-memory source frames here)."""
    use_context()
    lines = normalise.billing_lines(case, collected)
    tele = normalise.telemetry(case, collected)
    profiles = normalise.profiles(collected)
    mask, reasons = adjust.in_scope(lines, case.scope)
    nodes_of_resource, cluster = _node_maps(case, tele)
    seen = set(tele.activity["node"])
    gpu_resources = {r for r, nodes in nodes_of_resource.items() if seen & set(nodes)}
    classified = classify.classify(lines[mask], case.rules, cluster, gpu_resources)
    charges, leftovers = adjust.spread(classified, case.cost_basis)
    _add_prices(charges)
    splitter = _split_gpus(case, charges, tele, nodes_of_resource)
    ledger = attribute.Ledger()
    billing_names = ", ".join(f.spec.name for f in collected.of("billing"))
    attribute.attribute_lines(ledger, charges, billing_names)
    attribute.attribute_leftovers(ledger, leftovers, billing_names)
    gaps = {s: (p.gap_ratio, f"{p.name} ({p.path.rsplit('/', 1)[-1]})")
            for s, p in profiles.items() if p.gap_ratio is not None}
    intervals = attribute.split_groups(ledger, splitter.groups, gaps, case.target_utilisation,
                                       _describer(collected, billing_names))
    traffic = units.traffic_by_service(tele.traffic, case.services)
    costs = units.unit_costs(ledger, intervals, case.services, traffic)
    recon = reconcile.reconcile(charges, splitter.groups, intervals, splitter.coverage, profiles, traffic,
                                case.tolerance)
    measured = {f"{p.bucket}.{p.name}" for p in ledger.parts.values()}
    measured |= _measurable_parts(profiles, charges)
    options = rank.rank_options(ledger, intervals, case.services, case, tele.step, measured,
                                _committed_share(charges))
    return AuditResult(case, collected, lines, mask, reasons, charges, ledger, intervals, splitter.groups,
                       splitter.coverage, tele, profiles, traffic, costs, recon, options, splitter.extra_gpus)


def _node_maps(case: Case, tele) -> tuple[dict[str, list[str]], set[str]]:
    """Billing resource id -> telemetry nodes (several for a scale set), and the cluster's resource ids."""
    nodes_of = defaultdict(set)
    for r in tele.nodes.itertuples(index=False):
        if r.resource_id:
            nodes_of[classify.resource_key(r.resource_id)].add(r.node)
    for node, resource in case.nodes.items():
        nodes_of[classify.resource_key(resource)].add(node)
    return {k: sorted(v) for k, v in nodes_of.items()}, set(nodes_of)


def _add_prices(charges: pd.DataFrame) -> None:
    """quantity × unit price per line (contracted, else list as a flagged fallback, else its cost)."""
    priced, has_price, fallback = [], [], []
    columns = ("pricing_quantity", "contracted_unit_price", "list_unit_price", "charge_category", "gross",
               "commitment")
    for quantity, unit, listed, category, gross, commitment in zip(*(charges[c] for c in columns)):
        used_list = False
        if unit is None and listed is not None:
            unit, used_list = listed, True
        ok = quantity is not None and unit is not None and category != "Purchase"
        priced.append(quantity * unit if ok else gross + commitment)
        has_price.append(ok)
        fallback.append(ok and used_list)
    charges["priced"] = priced
    charges["has_price"] = has_price
    charges["list_price_fallback"] = fallback
    charges["pretax"] = [g + c for g, c in zip(charges["gross"], charges["commitment"])]


def _split_gpus(case, charges, tele, nodes_of_resource) -> GpuSplitter:
    gpu_lines = charges[charges["resource_class"] == "gpu_compute"]
    gpus = gpus_of_resources(gpu_lines)
    splitter = GpuSplitter(case, case.services, tele.activity, nodes_of_resource, tele.requests,
                           units.pod_models(tele.traffic), tele.step)
    for line in gpu_lines.to_dict("records"):
        quantity = line["pricing_quantity"] or line["consumed_quantity"]
        counts_time = bool(quantity) and (bool(line["gpus_per_instance"]) or bool(classify.gpu_sku_model(line)))
        key = classify.resource_key(line["resource_id"]) or line["line_id"]
        splitter.add_line(line, gpus.get(key, 0), counts_time)
    return splitter


def _describer(collected: Collected, billing_names: str):
    telemetry_names = ", ".join(f.spec.name for f in collected.of("telemetry")) or "none"

    def describe(group, service) -> str:
        metrics = "/".join(sorted(group.sources)) or "no kernel-activity sample"
        return f"{metrics} ({telemetry_names}) × GPU-interval cost of FOCUS lines ({billing_names})"
    return describe


def _committed_share(charges: pd.DataFrame) -> Decimal:
    """Share of GPU compute (pre tax) billed under a commitment discount."""
    gpu = charges[charges["resource_class"] == "gpu_compute"]
    total = sum(gpu["pretax"], ZERO)
    committed = sum(gpu.loc[gpu["commitment_discount_id"] != "", "pretax"], ZERO)
    return committed / total if total else ZERO


def _measurable_parts(profiles, charges) -> set[str]:
    """Parts that were measured even where they came out zero."""
    parts = {"platform_overhead.unallocated", "platform_overhead.capacity_above_demand",
             "platform_overhead.headroom"}
    if profiles:
        parts |= {"serving_path.in_flight_idle", "model_compute.kernel_active"}
    return parts
