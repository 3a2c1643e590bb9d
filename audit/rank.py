"""Stage 5: the options catalogue × measured parts -> saving, cost and payback bands, ranked (METHOD §7)."""
from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

import pandas as pd

from audit.buckets import CLASS_PARTS
from audit.case import Case
from audit.catalogue import catalogue
from audit.errors import ConfigError
from audit.ledger import Group, Ledger, NodeCoverage, ServiceInterval
from audit.money import ZERO
from audit.normalised import ProfileSummary
from audit.plan import NO_SAVING, WHOLLY_COMMITTED, PlanInput, no_saving_reason, plan
from audit.plan_input import plan_input
from audit.pricing import Modelled, assumed
from audit.pricing.autoscale import autoscale
from audit.pricing.batching import ServiceBatch, batching, running_batch
from audit.pricing.commitment import COLUMNS as COMMITMENT_COLUMNS
from audit.pricing.commitment import right_size_commitment
from audit.pricing.generation_cap import generation_cap
from audit.pricing.packing import consolidate
from audit.pricing.prefix_cache import phase_parts, prefix_cache
from audit.pricing.rightsize import right_size, saving_at
from audit.pricing.sync_points import service_idle, sync_points
from audit.result import Commitment, Option

MONTH_DAYS = Decimal("30.4375")  # 365.25 / 12
BANDS = ("low", "expected", "high")
UNMEASURED_PARTS = {
    "model_compute.prefill": "the profiles do not separate prefill from decode",
    "model_compute.decode": "the profiles do not separate prefill from decode",
}
#: parts measured whenever the GPU split ran, even where they came out zero
ALWAYS_MEASURED = {"platform_overhead.unallocated"}
#: parts measured wherever some service's idle was split (a kernel profile gave its serving path):
#: without one every service's idle is idle_not_separated, and these are not measured, not zero
SPLIT_MEASURED = {"platform_overhead.capacity_above_demand", "platform_overhead.headroom"}
NOT_SPLIT = ("no service's idle GPU time was split into serving path, headroom and capacity above demand "
             "(that needs a kernel profile of the service): it is platform_overhead.idle_not_separated")
#: parts a kernel profile measures
PROFILE_MEASURED = {"serving_path.in_flight_idle", "model_compute.kernel_active"}


@dataclass(frozen=True)
class RankInput:
    """What ranking prices the catalogue on: the case, the ledger and the service intervals, the
    telemetry interval, the charges (for the share under commitment) and the kernel profiles."""

    case: Case
    ledger: Ledger
    intervals: Sequence[ServiceInterval]
    step: int                                    # telemetry interval, seconds
    charges: pd.DataFrame                        # classified, adjusted and priced (audit.prices)
    profiles: Mapping[str, ProfileSummary]
    commitments: Sequence[Commitment] = ()       # FOCUS 1.3 Contract Commitment dataset (deferred savings)
    #: the GPU split's sums per (holder, interval) and its billed resources (the consolidation model)
    groups: Mapping[tuple[str, datetime], Group] = field(default_factory=dict)
    coverage: Mapping[str, NodeCoverage] = field(default_factory=dict)
    #: telemetry serving stats (audit.normalised.Telemetry.serving; the batching model's running batch)
    serving: pd.DataFrame | None = None
    histograms: pd.DataFrame | None = None       # per-request token histograms (the generation-cap model)


def _bands(table, key) -> dict[str, Decimal]:
    value = table[key]
    return {b: Decimal(str(value[b])) for b in BANDS}


def merged_catalogue(overrides: Mapping[str, Mapping[str, Any]], case_path: Path) -> list[tuple[dict, bool]]:
    """Shipped options with the case's overrides applied; an unknown id is an error."""
    ids = [o["id"] for o in catalogue()]
    problems = []
    for key in overrides:
        if key not in ids:
            near = difflib.get_close_matches(key, ids, n=1)
            problems.append(f"[[options]] id {key!r} is not in the catalogue"
                            + (f"; did you mean {near[0]!r}?" if near else f" ({', '.join(ids)})"))
    if problems:
        raise ConfigError(case_path, problems)
    out = []
    for option in catalogue():
        override = overrides.get(option["id"])
        merged = dict(option, **{k: v for k, v in (override or {}).items() if k != "id"})
        out.append((merged, override is not None))
    return out


def part_amounts(ledger: Ledger) -> dict[str, Decimal]:
    """Amount per bucket.part over the window (services summed)."""
    totals: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    for p in ledger.parts.values():
        totals[f"{p.bucket}.{p.name}"] += p.amount
    return dict(totals)


def _right_size(spec: Mapping[str, Any], given: RankInput) -> Modelled | None:
    case = given.case
    return right_size(given.intervals, case.services, case.target_utilisation, given.step,
                      case.target_utilisation_range)


def _autoscale(spec: Mapping[str, Any], given: RankInput) -> Modelled | None:
    target = spec.get("target_utilisation")
    reaction = spec.get("scale_reaction")
    return autoscale(given.intervals, given.case.services, given.case.target_utilisation, given.step,
                     None if target is None else Decimal(str(target)), None if reaction is None else int(reaction),
                     given.case.target_utilisation_range)


def _consolidate(spec: Mapping[str, Any], given: RankInput) -> Modelled | None:
    per_instance: dict[str, int] = {}  # GPUs per instance of each type, as the GPU split counted them
    for cover in given.coverage.values():
        if cover.instance_type and cover.gpus:
            per_instance[cover.instance_type] = max(per_instance.get(cover.instance_type, 0), cover.gpus)
    reaction = max((s.scale_reaction_seconds for s in given.case.services.values()), default=0)
    return consolidate(given.groups, per_instance, reaction, given.step)


def _commitment(spec: Mapping[str, Any], given: RankInput) -> Modelled | None:
    ends = {c.id: c.end for c in given.commitments}
    charges = given.charges
    committed = charges.loc[charges["commitment_discount_id"].fillna("").astype(str) != "", COMMITMENT_COLUMNS]
    return right_size_commitment(committed, given.case.start, given.case.end, ends)  # the lines it reads


def _batching(spec: Mapping[str, Any], given: RankInput) -> Modelled | str:
    running = running_batch(given.serving if given.serving is not None else pd.DataFrame(), given.case.services)
    bound = spec.get("latency_bound_ms")
    out = []
    for name, profile in sorted(given.profiles.items()):
        if profile.sweep.empty:
            continue
        slo = profile.sweep["slo_ms"].dropna()
        limit, source = ((float(bound), "option: latency_bound_ms") if bound is not None
                         else (float(slo.iloc[0]), f"collector bundle slo_ms ({profile.name})") if len(slo)
                         else (None, ""))
        mean, where = running.get(name, (None, ""))
        ivs = [iv for iv in given.intervals if iv.service == name]
        cap = given.ledger.parts.get(("serving_path", "in_flight_idle", name))
        out.append(ServiceBatch(name, profile.sweep, profile.name, mean, where, sum((iv.paid for iv in ivs), ZERO),
                                sum((iv.paid_seconds for iv in ivs), ZERO) / 3600, cap.amount if cap else ZERO,
                                limit, source))
    return batching(out, str(spec.get("latency_percentile", "p95")))


#: the catalogue's ``model`` name -> its model on the rank stage's input (audit/pricing/)
MODELS = {"right_size": _right_size, "autoscale": _autoscale, "consolidate": _consolidate,
          "commitment": _commitment, "batching": _batching,
          "prefix_cache": prefix_cache, "generation_cap": generation_cap,  # audit/pricing/prefix_cache.py, generation_cap.py
          "sync_host": lambda spec, given: sync_points(service_idle(given.profiles, given.ledger))}


def model_of(spec: Mapping[str, Any], given: RankInput) -> tuple[Modelled | None, str]:
    """The option's model on the measured data, or None with the reason its saving is assumed (a model
    may return that reason itself, naming the piece of evidence it lacks)."""
    name = spec.get("model")
    run = MODELS.get(name or "")
    found = run(spec, given) if run else None
    if isinstance(found, str):
        return None, found
    return found, assumed.reason(name)


GPU_CAPACITY_PARTS = {"platform_overhead.capacity_above_demand", "platform_overhead.unallocated",
                      "platform_overhead.headroom"}


def rank_options(given: RankInput) -> list[Option]:
    """Price every catalogue option on its part and rank by expected payback.

    Releasing capacity billed under a commitment saves nothing until the commitment ends, which
    the options on GPU capacity say (with the committed share of the part's own money; the committed
    share of all GPU compute only for a part with no money: :func:`audit.plan_input.part_committed_share`).
    """
    case = given.case
    amounts = {**part_amounts(given.ledger), **phase_parts(given)}  # model_compute.prefill / decode where measured
    measured = measured_parts(given.ledger, given.profiles, given.intervals)
    committed = committed_share(given.charges)
    per_month = MONTH_DAYS / case.days
    options = []
    merged = merged_catalogue(case.option_overrides, case.path)
    specs = [spec for spec, _ in merged]
    for spec, overridden in merged:
        part = spec["acts_on"]
        modelled, why = model_of(spec, given)
        option = _price(spec, overridden, part, amounts.get(part), per_month, case, measured, None,
                        modelled, why, "recoverable" in (case.option_overrides.get(spec["id"]) or {}))
        options.append(unbilled(option, given.charges))  # a billing-class part with no line: 0.00, not unmeasured
    return _ranked(options, plan_input(
        case, given.ledger, given.charges, given.commitments, {p: a * per_month for p, a in amounts.items()},
        specs, committed, target_models(specs, given)))


NO_COMMITMENT = (f"{NO_SAVING}: no commitment line is in scope (no invoice line is billed under a commitment "
                 "discount or as unused commitment): there is no commitment to right-size")


#: bucket.part -> the billing class whose lines make it (audit/buckets.py): the billing measures it,
#: so a case whose billing holds no line of the class has the part at 0.00, measured
BILLED_PARTS = {f"{bucket}.{name}": kind for kind, (bucket, name) in CLASS_PARTS.items()}


def unbilled(option: Option, charges: pd.DataFrame) -> Option:
    """An option on a part made of one billing class's lines, where the billing (read) holds no line
    of that class in scope: the part is 0.00 a month, measured by the billing, so no saving, said
    so; never a part that was not measured (unused commitment: :func:`uncommitted`)."""
    kind = BILLED_PARTS.get(option.acts_on)
    if option.status != "not_measured" or kind is None:
        return option
    if option.acts_on in WHOLLY_COMMITTED:
        return uncommitted(option, charges)
    if (charges["resource_class"] == kind).any():
        return option
    source = f"billing: no invoice line in scope is of class {kind}"
    return replace(option, status="no_saving", part_monthly=ZERO, inputs=((f"{option.acts_on} a month", "0.00", source),),
                   reason=f"{NO_SAVING}: the part is 0.00 a month: the billing was read and no invoice line in "
                          f"scope is of class {kind!r}, the lines this part is made of")


def uncommitted(option: Option, charges: pd.DataFrame) -> Option:
    """An option on unused commitment where no line in scope is billed under a commitment: no saving,
    said so (the billing was read and holds none), never a part that was not measured."""
    if option.status != "not_measured" or option.acts_on not in WHOLLY_COMMITTED:
        return option
    if (charges["commitment_discount_id"].fillna("").astype(str) != "").any() or \
            (charges["resource_class"] == "commitment_unused").any():
        return option
    return replace(option, status="no_saving", part_monthly=ZERO, reason=NO_COMMITMENT)


def target_models(specs: Sequence[Mapping[str, Any]], given: RankInput) -> dict[str, Callable[[Decimal], Decimal]]:
    """Per option whose saving depends on the case's target utilisation, that saving as a function
    of it: the whole-replicas base (right-size) and the autoscaling replay (the case's policy it
    improves on is replayed at the target)."""
    out: dict[str, Callable[[Decimal], Decimal]] = {}
    for spec in specs:
        if spec.get("pricing") == "whole_replicas":
            out[spec["id"]] = partial(_replicas_base, given)
        elif spec.get("model") == "autoscale":
            out[spec["id"]] = partial(_autoscale_saving, spec, given)
    return out


def _replicas_base(given: RankInput, target: Decimal) -> Decimal:
    """The whole-replicas base (right-size) at the case's target ``target``."""
    return saving_at(given.intervals, given.case.services, target, given.step)


def _autoscale_saving(spec: Mapping[str, Any], given: RankInput, target: Decimal) -> Decimal:
    """The autoscaling model's expected saving with the case's target at ``target``."""
    found = _autoscale(spec, replace(given, case=replace(given.case, target_utilisation=target)))
    return ZERO if found is None else found.saving["expected"]


def measured_parts(ledger: Ledger, profiles: Mapping[str, ProfileSummary],
                   intervals: Sequence[ServiceInterval] = ()) -> set[str]:
    """Parts the case measured: those in the ledger, and those measured even where they came out
    zero (headroom and capacity above demand only where some service's idle was split)."""
    parts = {f"{p.bucket}.{p.name}" for p in ledger.parts.values()} | ALWAYS_MEASURED
    if any(iv.headroom is not None for iv in intervals):
        parts |= SPLIT_MEASURED
    return parts | PROFILE_MEASURED if profiles else parts


def committed_share(charges: pd.DataFrame) -> Decimal:
    """Share of GPU compute (pre tax) billed under a commitment discount: the fallback of a
    GPU-capacity part with no money of its own (:func:`audit.plan_input.part_committed_share`)."""
    gpu = charges.loc[charges["resource_class"] == "gpu_compute", ["pretax", "commitment_discount_id"]]
    total = sum(gpu["pretax"], ZERO)
    committed = sum(gpu.loc[gpu["commitment_discount_id"] != "", "pretax"], ZERO)
    return committed / total if total else ZERO


def _price(spec: Mapping[str, Any], overridden: bool, part: str, base: Decimal | None, per_month: Decimal,
           case: Case, measured_parts: Collection[str], note: str | None, model: Modelled | None = None,
           why: str | None = None, share_given: bool = False) -> Option:
    """Price one option: from its model where one ran (basis modelled), else the catalogue's
    recoverable share of the part (basis assumed, with ``why``). Where the case gives a modelled
    option's ``recoverable`` (``share_given``), it is the share of the modelled saving that can be
    recovered: saving band × recoverable band (docs/case.md)."""
    effort = _bands(spec, "effort_hours")
    cost = {b: effort[b] * case.loaded_rate for b in BANDS}
    recover = _bands(spec, "recoverable")
    run_cost = Decimal(str(spec.get("run_cost_per_month", 0)))
    assumptions = [f"effort {effort['low']} / {effort['expected']} / {effort['high']} h at "
                   f"{case.loaded_rate} {case.currency}/h", f"why: {spec['reason']}"]
    shares = f"{recover['low']} / {recover['expected']} / {recover['high']}"
    if model is None:
        assumptions.insert(0, f"recoverable share of the part {shares}")
    elif share_given:
        assumptions.insert(0, f"recoverable share of the modelled saving {shares} (case [[options]]): "
                              "the model's saving × this share")
    if run_cost:
        assumptions.append(f"adds {run_cost} {case.currency} a month to run")
    if note:
        assumptions.append(note)
    option = Option(spec["id"], spec["title"], part, "priced", None, None, cost, None, effort,
                    tuple(assumptions), overridden)
    if (part in UNMEASURED_PARTS and base is None) or (base is None and part not in measured_parts):
        why_not = UNMEASURED_PARTS.get(part, NOT_SPLIT if part in SPLIT_MEASURED else
                                       "no measurement in this case produced it")
        if spec.get("traffic"):  # the case's files for the model (generation_cap), unread: say so
            why_not += "; the case's traffic file(s) " + ", ".join(
                f"{k} = {v}" for k, v in spec["traffic"].items()) + " are not read: the part they would price is missing"
        return replace(option, status="not_measured", reason=f"part not measured: {why_not}",
                       basis_note=why or None)
    monthly = (base or ZERO) * per_month
    if monthly < 0:  # credits above the part's charges (a fit warning names them): nothing to save from
        return replace(option, part_monthly=monthly, status="no_saving",
                       reason=f"{NO_SAVING}: the part is {monthly:.2f} a month, negative after credits "
                              "(they exceed its charges: see fit): no saving is priced on a negative amount")
    if model is not None:
        kept = recover if share_given else dict.fromkeys(BANDS, Decimal(1))
        saving = {b: model.saving[b] * per_month * kept[b] - run_cost for b in BANDS}
        inputs = model.inputs + ((("recoverable share of the modelled saving", shares, "case [[options]]"),)
                                 if share_given else ())
        option = replace(option, basis="modelled", inputs=inputs, basis_note=model.bands,
                         commitment_end=model.commitment_end, by_service=None if model.by_service is None else
                         {s: {b: v[b] * per_month * kept[b] for b in BANDS} for s, v in model.by_service.items()})
    else:
        saving = {b: monthly * recover[b] - run_cost for b in BANDS}
        option = replace(option, basis="assumed", inputs=_catalogue_inputs(part, base, recover, share_given),
                         basis_note=why or assumed.NO_MODEL)
    if saving["low"] <= 0:
        return replace(option, part_monthly=monthly, saving=saving, status="no_saving",
                       reason=no_saving_reason(saving, model is not None, run_cost,
                                                model.bands if model is not None else ""))
    payback = {"low": cost["low"] / saving["high"], "expected": cost["expected"] / saving["expected"],
               "high": cost["high"] / saving["low"]}
    return replace(option, part_monthly=monthly, saving=saving, payback=payback)


def _catalogue_inputs(part: str, base: Decimal | None, recover: Mapping[str, Decimal],
                      share_given: bool) -> tuple[tuple[str, str, str], ...]:
    """What an assumed saving stood on: the part's amount over the window and the recoverable share,
    credited to the case only where it gave ``recoverable`` (an override of other keys leaves it the
    catalogue's)."""
    return ((f"{part} over the window", f"{base or ZERO:.2f}", "ledger (attribution of the billing)"),
            ("recoverable share", f"{recover['low']} / {recover['expected']} / {recover['high']}",
             "case [[options]]" if share_given else "catalogue: audit/data/options.toml"))


def _ranked(options: list[Option], given: PlanInput) -> list[Option]:
    """The plan (audit/plan.py): deferred paybacks, empty options unranked, marginal savings, sensitivity."""
    return plan(options, given)
