"""The audit.json writer: AuditResult -> the audit.json dict (docs/audit-json.md).

It only formats what the stages computed: amounts are rounded once, in audit/audit_json_cents.py
(largest remainder per bucket and part; every other cent figure a sum of the rounded parts), and
sums shown beside them are taken over the result's tables.
"""
from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from audit import __version__, audit_json_profiles
from audit import audit_json_cents as audit_cents
from audit import audit_json_review as review
from audit import audit_json_units as units
from audit.audit_json_classes import classes_of
from audit.audit_json_months import months_section, whole_window_differences
from audit.bridge import bridge, unamortised_reason, unpurchased_reason
from audit.buckets import BUCKETS
from audit.cost_columns import cost_columns
from audit.gpumig import mig_request_notes
from audit.gpuunits import shared_gpu_notes
from audit.lines import SCOPE_RULE, adjusted, basis_amount, unclassed_note
from audit.money import ZERO, cents, dsum, fmt, largest_remainder, plain, share
from audit.plan import PartPlan, combined, marginal_note
from audit.result import AuditResult, KernelFinding, Option
from audit.services import service_of
from schemas.billing import line_total
from schemas.secrets import mask_url, redact

FORMAT_VERSION = 1  # 1: first published layout
METHOD_VERSION = review.METHOD_VERSION


def _iso(moment) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _hours(seconds: Decimal | None) -> str | None:
    return None if seconds is None else fmt(seconds / 3600, 2)


def to_dict(result: AuditResult) -> dict:
    """The whole audit.json document."""
    case = result.case
    all_amounts = basis_amount(result.lines, case.cost_basis)
    months = months_section(result)
    headline, outside = _scope_cents(result, all_amounts, None if months is None else Decimal(months["quarter"]["total"]))
    rounded = audit_cents.rounded(result, headline, None if months is None else months["quarter"]["buckets"])
    if months is not None:
        months["services_note"] = whole_window_differences(rounded, months["quarter"]["services"])
    return {
        "meta": {"format": FORMAT_VERSION, "tool": "costaudit", "version": __version__, "method": METHOD_VERSION},
        "case": case.name,
        "window": {"start": _iso(case.start), "end": _iso(case.end), "days": fmt(case.days, 2)},
        "currency": case.currency,
        "cost_basis": case.cost_basis,
        "total": str(headline),
        "invoice_total": str(cents(dsum(result.lines["billed_cost"]))),
        "outside_scope": _outside(result, all_amounts, outside),
        "bridge": _bridge(result, headline),
        "buckets": _buckets(result, rounded, headline),
        "classes": classes_of(result, headline),
        "services": _services(result, rounded),
        "allocation": units.allocation(result, rounded),
        "reconciliation": _reconciliation(result),
        "coverage": _coverage(result),
        "gpu_split": _gpu_split(result),
        "utilisation": _utilisation(result),
        "queue": _queue(result),
        "serving_evidence": _serving_evidence(result),
        "telemetry": _telemetry(result),
        "profiles": _profiles(result, rounded),
        "options": [_option(o, result) for o in result.options],
        "plan": _plan(result),
        "findings": [_finding(f, i) for f, i in zip(result.evidence.findings,
                                                    review.finding_ids(result.evidence.findings))],
        "sources": _sources(result),
        "commitments": _commitments(result),
        "notes": _notes(result),
        "fit": _fit(result),
        **review.review_fields(result, rounded, headline),
        "months": months,
    }


def _services(result, rounded: audit_cents.Cents) -> dict:
    """audit.json ``services`` (audit/audit_json_units.py) with each service's components and days."""
    extra = review.service_fields(result)
    return {name: {**entry, **extra.get(name, {})} for name, entry in units.services(result, rounded).items()}


def _fit(result) -> list[dict]:
    """What of the case matches nothing in the data (audit/fit.py), in the case's order."""
    return [{"kind": m.kind, "subject": m.subject, "severity": m.severity, "message": m.message,
             "nearest": list(m.nearest)} for m in result.fit.misfits]


def _commitments(result) -> list[dict]:
    """The contract commitments of the case's FOCUS 1.3 Contract Commitment datasets (METHOD §7)."""
    def number(value):
        return None if value is None else str(value)

    return [{"id": c.id, "type": c.type, "category": c.category, "start": _iso(c.start), "end": _iso(c.end),
             "term_months": fmt(c.term_months, 2), "months_after_window": fmt(c.months_after_window, 2),
             "unit": c.unit or None, "quantity": number(c.quantity), "cost": number(c.cost),
             "currency": c.currency, "contract_id": c.contract_id or None, "contract_end": _iso(c.contract_end),
             "description": c.description or None, "source": c.source}
            for c in result.commitments]


def _buckets(result, rounded: audit_cents.Cents, total: Decimal) -> dict:
    """Each bucket's amount, its share of ``total`` and its parts, as audit/audit_json_cents.py
    rounded them (parts by largest remainder to their bucket)."""
    parts = result.ledger.parts
    return {bucket: {
        "amount": str(rounded.buckets[bucket]),
        "share": share(rounded.buckets[bucket], total),
        "parts": [{"id": review.part_id(*key), "name": key[1], "service": key[2], "amount": str(rounded.parts[key]),
                   "gpu_hours": _hours(parts[key].gpu_seconds), "source": "; ".join(sorted(parts[key].sources)) or None,
                   "reason": parts[key].reason} for key in rounded.order[bucket]],
    } for bucket in BUCKETS}


def _scope_cents(result, amounts, months_total: Decimal | None) -> tuple[Decimal, Decimal]:
    """The total in scope and the total outside it at the cent, rounded once (METHOD §1, §5): the
    exact pair by largest remainder to their rounded sum, so that in scope + outside = the invoice
    rounded where the basis is billed (the part with the larger remainder takes the cent; each
    rounded alone, 2945.835743 and 4.8384 gave 2945.84 + 4.84 against an invoice of 2950.67). Over
    several months the total in scope is the months' rounded totals summed (``months_total``; the
    sum may then differ from the invoice by the months' own rounding)."""
    inside = result.reconciliation.conservation.in_scope_total  # exact: the lines, not the parts at 50 digits
    outside = dsum(amounts[~result.scope_mask])
    split = largest_remainder({"in_scope": inside, "outside": outside}, cents(inside + outside))
    return split["in_scope"] if months_total is None else months_total, split["outside"]


def _outside(result, amounts, total: Decimal) -> dict:
    """The lines outside the scope: ``total`` (as :func:`_scope_cents` rounded it), their count, why,
    and per account, its amounts by largest remainder to ``total``."""
    read = [c for c in ("sub_account_id", "billing_account_id", "line_count") if c in result.lines.columns]
    outside = result.lines.loc[~result.scope_mask, read]
    by_account: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    for sub, account, amount in zip(outside["sub_account_id"].to_numpy(dtype=object),
                                    outside["billing_account_id"].to_numpy(dtype=object), amounts[outside.index]):
        by_account[sub or account] += amount
    accounts = largest_remainder(by_account, total)
    return {"amount": str(total), "lines": line_total(outside), "reason": "; ".join(result.scope_reasons) or None,
            "by_account": [{"account": a, "amount": str(v)} for a, v in sorted(accounts.items())]}


def _bridge(result, total: Decimal) -> dict:
    """The bridge across the four cost bases, in scope (audit/bridge.py), at the cent: every row's
    amount (None: not measured), a total of the exact amount in scope at the audit's ``total``;
    ``not_measured`` says which rows and why; ``<step>_lines`` names the lines that carry a step
    outside the commitment groups; ``<step>_lacks`` what a measured step leaves out (a purchase whose
    amortisation no line carries, beside commitments whose lines carry theirs)."""
    folder = result.case.folder
    found = bridge(result.lines[result.scope_mask],
                   {f.spec.name: (_relative(f.spec, folder), f.data_format) for f in result.collected.of("billing")})
    rows = found.rounded({result.reconciliation.conservation.in_scope_total: total})
    out: dict = {key: None if value is None else plain(value) for key, value in rows.items()}
    reasons: dict[str, list[str]] = {}
    for step in found.steps:
        if step.reason:
            reasons.setdefault(step.reason, []).append(step.key)
        if step.lacks:
            out[f"{step.key}_lacks"] = step.lacks
        elif step.examples and step.amount != 0:
            more = ", …" if step.lines > len(step.examples) else ""
            named = ", ".join(redact(mask_url(line_id)) for line_id in step.examples)  # ids may carry a url
            out[f"{step.key}_lines"] = f"{step.lines} line(s): {named}{more}"
    if reasons:
        out["not_measured"] = "; ".join(f"{', '.join(keys)}: {why}" for why, keys in reasons.items())
    return out


def _reconciliation(result) -> dict:
    r = result.reconciliation
    return {"top_down": str(cents(r.top_down)), "bottom_up": None if r.bottom_up is None else str(cents(r.bottom_up)),
            "gap": fmt(r.gap, 6), "tolerance": str(r.tolerance), "verdict": r.verdict, "reason": r.reason,
            "covered_hours": _hours(r.covered_seconds),
            "drivers": [{"name": d.name, "subject": d.subject, "gap": fmt(d.gap, 6), "detail": d.detail}
                        for d in r.drivers]}


def _coverage(result) -> dict:
    rows = sorted(result.coverage.values(), key=lambda c: (c.node, c.resource_id))
    paid = dsum(c.paid_seconds for c in rows)
    seen = dsum(c.observed_seconds for c in rows)
    return {"paid_gpu_hours": _hours(paid), "observed_gpu_hours": _hours(seen),
            "unmeasured_gpu_hours": _hours(paid - seen),
            "seen_unpaid_gpu_hours": _hours(dsum(c.seen_unpaid_seconds for c in rows)),
            "by_node": [{"node": c.node or None, "resource_id": c.resource_id, "instance_type": c.instance_type,
                         "paid_gpu_hours": _hours(c.paid_seconds), "observed_gpu_hours": _hours(c.observed_seconds),
                         "seen_unpaid_gpu_hours": _hours(c.seen_unpaid_seconds)}
                        for c in rows]}


def _gpu_split(result) -> list[dict]:
    agg: defaultdict[str, defaultdict[str, Decimal]] = defaultdict(lambda: defaultdict(lambda: ZERO))
    gpus: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    for iv in result.intervals:
        a = agg[iv.service]
        a["paid"] += iv.paid_seconds
        a["busy"] += iv.busy_seconds
        a["serving"] += iv.serving_seconds or ZERO
        gpus[iv.service] = max(gpus[iv.service], iv.gpus)
    out = []
    for service, a in sorted(agg.items()):
        profile = result.profiles.get(service)
        sources = sorted({s for (h, _), g in result.groups.items() if h == service for s in g.sources})
        out.append({"service": service, "gpus": units.gpu_count(gpus[service]), "paid_gpu_hours": _hours(a["paid"]),
                    "kernel_active_gpu_hours": _hours(a["busy"]),
                    "in_flight_idle_gpu_hours": _hours(a["serving"]) if profile else None,
                    "overhead_gpu_hours": _hours(a["paid"] - a["busy"] - a["serving"]),
                    "mean_busy_fraction": share(a["busy"], a["paid"], 4),
                    "gap_ratio": fmt(profile.gap_ratio, 4) if profile and profile.gap_ratio is not None else None,
                    "busy_source": "/".join(sources) or None})
    return out


def _utilisation(result) -> list[dict]:
    daily: defaultdict[tuple[str, str], list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])
    for iv in result.intervals:
        day = daily[(iv.ts.strftime("%Y-%m-%d"), iv.service)]
        day[0] += iv.busy_seconds
        day[1] += iv.paid_seconds
    return [{"date": d, "service": s, "busy_fraction": share(b, p, 4)} for (d, s), (b, p) in sorted(daily.items())]


def _queue(result) -> list[dict]:
    queue = result.telemetry.queue
    sums: defaultdict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for row in queue.itertuples(index=False):
        labels = {"namespace": row.namespace, "pod": row.pod, "model_name": row.model_name, "container": ""}
        name = service_of(labels, result.case.services, {})
        if name:
            s = sums[name]
            s[0] += float(row.waiting)
            s[1] += float(row.running)
            s[2] += 1
    return [{"service": n, "mean_waiting": f"{w / c:.3f}", "mean_running": f"{r / c:.3f}"}
            for n, (w, r, c) in sorted(sums.items()) if c]


def _telemetry(result) -> dict:
    """Telemetry checks (never fatal): label values one source names and another does not;
    samples excluded as out of range, not finite or negative counter values, per source, metric
    and reason; counter resets (restarts) per source and metric."""
    tele = result.telemetry
    return {"label_mismatches": list(tele.label_mismatches),
            "excluded_samples": _excluded_samples(tele.excluded_samples),
            "counter_resets": [{"source": str(r.source), "metric": str(r.metric), "resets": int(r.resets)}
                               for r in tele.counter_resets.sort_values(["source", "metric"]).itertuples()]}


def _excluded_samples(table) -> list[dict]:
    """One entry per source, metric and reason: how many samples, what was expected, an example."""
    rows = table.sort_values(["source", "metric", "reason"]) if len(table) else table
    return [{"source": str(r.source), "metric": str(r.metric), "reason": str(r.reason), "count": int(r.count),
             "expected": str(r.expected), "example": str(r.example), "first_at": _iso(r.first_ts)}
            for r in rows.itertuples()]


def _serving_evidence(result) -> dict:
    """Per service, each serving figure (value, source, reason) as the evidence stage found it."""
    return {service: {name: dict(figure) for name, figure in figures.items()}
            for service, figures in result.evidence.serving.items()}


def _profiles(result, rounded: audit_cents.Cents) -> list[dict]:
    out = []
    for service, p in sorted(result.profiles.items()):
        total_us = float(p.categories["total_us"].sum()) if len(p.categories) else 0.0
        kernels = p.kernels.sort_values("total_us", ascending=False).head(10) if len(p.kernels) else p.kernels
        kernel_total = float(p.kernels["total_us"].sum()) if len(p.kernels) else 0.0
        kps = p.kernel_seconds_per_request
        out.append({"name": p.name, "service": service, "trace": mask_url(p.path.split("/")[-1]),
                    "kernel_active_ms": fmt(p.kernel_active_us / 1000, 3),
                    "gpu_window_ms": fmt(p.gpu_window_us / 1000, 3),
                    "gap_ratio": fmt(p.gap_ratio, 6), "gap_basis": p.gap_basis,
                    "gap_sensitivity": audit_json_profiles.gap_sensitivity(p),
                    "kernel_seconds_per_request": fmt(kps, 9),
                    "categories": [{"category": r.category, "ms": f"{r.total_us / 1000:.3f}",
                                    "share": f"{r.total_us / total_us:.4f}" if total_us else None}
                                   for r in p.categories.sort_values("total_us", ascending=False).itertuples()],
                    "top_kernels": [{"name": r.name, "category": r.category, "count": int(r.count),
                                     "ms": f"{r.total_us / 1000:.3f}",
                                     "share": f"{r.total_us / kernel_total:.4f}" if kernel_total else None}
                                    for r in kernels.itertuples()],
                    "top_call_paths": list(result.evidence.call_paths.get(service, ())),
                    "idle_paths": audit_json_profiles.idle_paths(result.evidence.idle_paths.get(service, ()),
                                              rounded.parts.get(("serving_path", "in_flight_idle", service))),
                    **audit_json_profiles.ranks(p)})
    return out


def _finding(found: KernelFinding, stable_id: str) -> dict:
    """A kernel-level finding with its cost: its share of the part it lies in (``share_of_part``: of
    the profile's idle for in_flight_idle, of its busy time for kernel_active; ``share`` stays its
    share of the profile's GPU time) × the cost of that part. Findings explain the buckets and never
    add to them (METHOD §6). ``id`` is its stable
    id (audit/audit_json_review.py), ``kind`` the analyser's rule."""
    finding, service = found.finding, found.service
    cost = None if found.cost is None else cents(found.cost)
    return {**finding, "id": stable_id, "kind": finding.get("id"), "service": service, "profile": found.profile,
            "cost": None if cost is None else str(cost), "price_per_gpu_hour": None,
            "profile_cost": None,
            "reason": None if cost is not None else
            f"part {finding['bucket']}.{finding['part']} of {service} not measured in this case",
            "cost_basis": (f"share_of_part (of the profile's {_PART_TIME.get(finding['part'], 'GPU time')}) × "
                           f"{finding['bucket']}.{finding['part']} of {service}")}


_PART_TIME = {"in_flight_idle": "idle", "kernel_active": "busy time"}


def _option(o: Option, result) -> dict:
    """An option with its bands, and the measured serving figures that bear on it."""
    def bands(values, places=2):
        return None if values is None else {k: fmt(v, places) for k, v in values.items()}
    return {"rank": o.rank, "id": o.id, "title": o.title, "bucket": o.bucket, "acts_on": o.acts_on,
            "status": o.status, "part_monthly": fmt(o.part_monthly, 2),
            "monthly_saving": bands(o.saving), "one_off_cost": bands(o.cost),
            "payback_months": bands(o.payback, 2), "effort_hours": bands(o.effort, 1),
            "assumptions": list(o.assumptions), "overridden": o.overridden, "reason": o.reason,
            "evidence": [dict(e) for e in result.evidence.for_options.get(o.id, ())],
            "by_service": review.by_service(o), **_planned(o),
            **_basis(o)}


def _basis(o: Option) -> dict:
    """How an option's saving was formed (audit/pricing/): modelled or assumed, its inputs and their sources."""
    return {"basis": o.basis, "basis_note": o.basis_note,
            "inputs": [{"name": n, "value": v, "source": src} for n, v, src in o.inputs],
            "commitment_end": _iso(o.commitment_end)}


def _planned(o: Option) -> dict:
    """An option's plan fields (audit/plan.py): marginal saving, deferred bands, sensitivity, who acts."""
    def bands(values):
        return None if values is None else {k: fmt(v, 2) for k, v in values.items()}
    return {"counts_towards": o.plan_part, "run_cost_monthly": fmt(o.run_cost, 2),
            "marginal_saving": bands(o.marginal_saving), "marginal_note": marginal_note(o.marginal_saving, o.plan_part),
            "deferred": {"saving_now": bands(o.saving_now), "saving_later": bands(o.saving_deferred),
                         "months_after_window": fmt(o.deferred_months, 2),
                         "committed_share": fmt(o.committed_share, 6)},
            "break_even_monthly_saving": fmt(o.break_even, 2), "horizon_months": fmt(o.horizon_months, 0),
            "sensitivity": [{"input": s.input, "low": s.low, "high": s.high,
                             "payback_at_low": fmt(s.payback_at_low, 2), "payback_at_high": fmt(s.payback_at_high, 2)}
                            for s in o.sensitivity],
            "owners": list(o.owners), "next_step": o.next_step, "depends_on": list(o.depends_on)}


def _plan(result) -> dict:
    """The combined saving of the ranked options per part and for the whole plan (METHOD §7)."""
    def row(p: PartPlan) -> dict:
        return {"part": p.part, "part_monthly": fmt(p.part_monthly, 2), "options": list(p.options),
                "gross_saving": {k: fmt(v, 2) for k, v in p.gross.items()}, "run_cost_monthly": fmt(p.run_cost, 2),
                "combined_saving": {k: fmt(v, 2) for k, v in p.saving.items()}}
    parts, total = combined(result.options)
    return {"by_part": [row(p) for p in parts], "total": row(total)}


def _sources(result) -> list[dict]:
    folder = result.case.folder
    out = []
    for f in result.collected.frames:
        out.append({"name": f.spec.name, "kind": f.spec.kind, "format": f.spec.format,
                    "path": _relative(f.spec, folder), "rows": f.rows,
                    "covered": {"start": _iso(f.covered[0]), "end": _iso(f.covered[1])},
                    "sha256": f.sha256, "status": "read", "reason": None, **_read_notes(f),
                    **({} if f.read_as else cost_columns(f.spec)), **_split_here(result, f.spec.name)})
    for m in result.collected.missing:
        out.append({"name": m.spec.name, "kind": m.spec.kind, "format": m.spec.format,
                    "path": _relative(m.spec, folder), "rows": None, "covered": None, "sha256": None,
                    "status": "missing", "reason": redact(m.reason)})
    return out


def _split_here(result, name: str) -> dict:
    """For the billing source whose engine ran the GPU split's sums (``split_in_place``): that engine,
    its queries and the bytes they scanned."""
    record = result.split_in_place
    if record is None or record.source != name:
        return {}
    return {"split_in_place": {"engine": record.engine, "queries": [j for j, _ in record.jobs],
                               "bytes_scanned": sum(b for _, b in record.jobs), "note": record.describe()}}


def _read_notes(frame) -> dict:
    """For a billing source: the invoice lines read (``lines``) and how many rows of the audit's
    line table they were summed into; for any source: what was read in a way the file did not spell
    out (``notes``: row, column, note; at most 20, with the count)."""
    out: dict = {}
    lines = frame.tables.get("lines")
    if lines is not None:
        out["lines"] = line_total(lines)
        out["summed_into"] = int(len(lines))
    notes = frame.tables.get("notes")
    if notes is not None and len(notes):
        out["notes"] = [{"row": int(n.row), "column": n.column or None, "note": n.note}
                        for n in notes.head(20).itertuples()]
        out["notes_total"] = int(len(notes))
    return out


def _relative(spec, folder) -> str:
    """A source's path relative to the case folder (its uri / table / url when remote), masked."""
    if spec.path is None:
        return spec.where
    try:
        return mask_url(spec.path.relative_to(folder))
    except ValueError:
        return mask_url(spec.path.name)


#: how each window g is taken over reads in a note (connectors/profiles/window.py)
GAP_BASIS_WORDS = {
    "gpu_window": "the trace's GPU window (no request markers or profiler steps; nothing lay outside the traffic)",
    "main_activity": "the trace's main GPU activity (no request markers or profiler steps; work well apart from "
                     "it was left out, see the profile's gap sensitivity)",
    "profiler_steps": "the trace's profiler steps (no request markers)",
    "request_spans": "the trace's request spans",
}


#: how a billing format's timestamps without an offset were read (METHOD §1: the report says so)
#: the columns of the lines in scope the notes read
NOTE_COLUMNS = ("charge_category", "commitment_discount_id", "commitment_discount_status", "billed_cost",
                "effective_cost", "contracted_cost", "line_id", "line_count", "extra")
#: billing formats that read another format's data where it lives
READ_AS = {"athena": "cur"}
TIMESTAMP_WORDS = {
    "focus": "FOCUS billing timestamps without an offset were read as UTC, as FOCUS defines.",
    "cur": "CUR billing timestamps without an offset were read as UTC, as the AWS Cost and Usage Report defines.",
    "azure": "Azure cost details dates (a day, no time or offset) were read as UTC days, the days Azure Cost "
             "Management bills by.",
    "gcp_billing": "GCP billing export usage times were read in UTC (the export's timestamps are UTC).",
}


def _notes(result) -> list[str]:
    billing = sorted({f.data_format for f in result.collected.frames if f.spec.kind == "billing"})
    # a CUR read in Athena is the same CUR (where it was read is in ``sources``): the same words, once
    notes = list(dict.fromkeys(TIMESTAMP_WORDS[READ_AS.get(f, f)] for f in billing if READ_AS.get(f, f) in TIMESTAMP_WORDS))
    read = [c for c in NOTE_COLUMNS if c in result.lines.columns]
    scoped = result.lines.loc[result.scope_mask.to_numpy(dtype=bool), read]  # once, and narrow
    unamortised = unamortised_reason(scoped)
    if unamortised:
        notes.append(f"Commitment amortisation not measured: {unamortised}.")
    basis = result.case.cost_basis
    unpurchased = unpurchased_reason(scoped, basis) if basis in ("billed", "effective") else None
    if unpurchased:
        notes.append(f"Commitment purchases missing from the {basis} basis: {unpurchased}.")
    if adjusted(scoped):
        notes.append(f"Tax and credits: {SCOPE_RULE}.")
    unclassed = unclassed_note(scoped, result.charges)
    if unclassed:
        notes.append(f"Lines in no class: {unclassed}.")
    notes += [f"Telemetry interval: {result.telemetry.step} s; GPU-interval cost = the billing line's cost "
              "spread evenly over the GPU-seconds it bills.",
              "Model compute includes padding not separated (no batch-shape measurement)."]
    for p in result.profiles.values():
        if p.gap_basis in GAP_BASIS_WORDS:
            notes.append(f"Profile {p.name}: gap ratio taken over {GAP_BASIS_WORDS[p.gap_basis]}.")
    if result.extra_gpu_nodes:
        notes.append("Telemetry names more GPUs than billed on: " + ", ".join(sorted(result.extra_gpu_nodes)))
    notes.extend(shared_gpu_notes(result.telemetry.activity) + mig_request_notes(result.telemetry.requests))
    for m in result.collected.missing:
        notes.append(f"Source {m.spec.name} could not be read: {redact(m.reason)}")
    return notes
