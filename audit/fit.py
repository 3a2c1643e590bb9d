"""Whether the case fits the data: every piece of the case that matches nothing, by name (METHOD §2–§4).

A case that does not fit its data is quietly wrong: a ``[services]`` matcher that finds no pod sends
that service's GPU time to *undeclared workload*, a ``[scope]`` tag key no line carries leaves a total
of 0.00, a request-log source naming an undeclared service counts its requests for nobody. :func:`fit`
finds each such piece and says what the data holds instead, nearest values first (``difflib``):

* ``service_matcher``: a matcher of a service that finds no pod (with the pods it could have meant and, for a
  value written with regular-expression characters but without ``re:``, the ``re:`` form);
* ``service_shadowed``: a service whose matchers find pods, every one of them owned by a service
  declared before it (the first service whose matchers hold owns a pod), so it gets none;
* ``undeclared_pods``: the pods no service matches (their GPU time is undeclared workload), each
  with the service it nearly belongs to and the matcher that misses it (audit/fit_undeclared.py);
* ``service_unmatched`` (**error**): a service that matches nothing at all — no pod in telemetry and
  no request-log source naming it — while telemetry names pods; ``validate`` and ``run`` exit 1;
* ``scope_tag``, ``scope_account``, ``scope_service``: a ``[scope]`` value no billing line carries;
* ``request_log_service``: a telemetry source's ``service`` with no ``[services]`` entry;
* ``service_claim``, ``claim_out_of_scope``, ``claim_taken``, ``claim_partial``: a service's claim that matches
  no billing line; only lines the scope leaves out; lines another service or the GPU split has; part of a
  resource's lines of one class in scope, leaving the rest to no service; ``claim_key_case``: lines left whose
  tag key differs from the claimed one in case alone (audit/fit_claims.py);
* ``lines_unmatched``: charges in scope that no class rule matches (unattributed), named largest
  first, with what claims them and how to class them (audit/fit_unmatched.py);
* ``commitment_purchases_missing``: the billed basis with commitment-covered usage billed 0 and no
  purchase of its commitment in scope (an amortised export, or a billed one without the purchase) (audit/fit_commitments.py);
* ``node_not_in_telemetry``, ``node_not_billed``: a ``[nodes]`` entry whose node telemetry never names, or
  whose resource no billing line bills;
* ``gpu_resource_not_in_telemetry``, ``telemetry_node_not_billed``: a billed GPU resource and a telemetry
  GPU node that do not meet, each with the identifiers the other side carries;
* ``billed_gpu_model``: a joined node whose telemetry reports another GPU model than its billing lines
  bill (audit/fit_models.py); ``billed_part_missing``: the hours a machine billed in parts (GCP: Core,
  RAM, GPU lines) lacks a part its other hours bill, by resource, part and hours (audit/fit_parts.py);
* ``gpu_lines_without_resource``: GPU lines in scope that name no resource at all, which nothing can
  join to telemetry (with the instance types they bill and the telemetry GPU nodes);
* ``step_finer_than_samples``: the case's step finer than the GPU activity samples are apart, with
  the spacing they have and a step that fits (audit/fit_step.py);
* ``window_not_billed``: days of the window on which no billing source has a usage line, with the span the usage
  covers; ``telemetry_gap``: days GPU time is billed with no GPU activity sample at all (audit/fit_window.py);
* ``profile_gpu_model``: a profile recorded on another GPU model than its service runs on (audit/fit_profiles.py);
* ``gpus_per_replica``: a service whose pods hold another number of GPUs than its gpus_per_replica
  (1 unless the case says otherwise); ``replica_settings_unused``: replica settings of a service
  with no matcher, which holds no GPU (audit/fit_replicas.py).

The result is a frozen :class:`Fit`, computed once by the pipeline (carried in the AuditResult,
written as audit.json ``fit``, shown on page 1) and by ``costaudit validate``. Values from the data
are untrusted: each is cut to a readable length with control characters escaped (``shown``).
"""
from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Iterable, Mapping

import pandas as pd

from audit.capacity_blocks import moved_fees
from audit.case import Case, Service
from audit.fit_claims import claims_fit, claims_partial_fit, claims_taken_fit
from audit.fit_commitments import purchases_fit
from audit.fit_models import billed_models, gpu_models_fit, node_gpu_models, same_model_nodes
from audit.fit_parts import parts_fit
from audit.fit_profiles import profile_gpu_fit, profiles_fit
from audit.fit_quantities import list_fit, quantities_fit
from audit.fit_replicas import replicas_fit
from audit.fit_scope import scope_adjustments_fit
from audit.fit_step import step_fit
from audit.fit_undeclared import orphan_pods, pod_name, pods_elsewhere, undeclared_fit, unread_pods
from audit.fit_unmatched import unmatched_fit
from audit.fit_window import telemetry_days_fit, telemetry_window_fit, window_fit
from audit.lines import account_key, distinct_tags, resource_key
from audit.misfit import (  # noqa: F401  (Fit and Misfit are read from here too)
    LISTED,
    MATCH_KEYS,
    PLURAL,
    Fit,
    Misfit,
    _matches,
    _written,
    listing,
    nearest,
    suggestion,
    text,
)
from audit.normalised import NodeMap, Telemetry
from audit.services import pod_models, service_of, telemetry_owners
from schemas.billing import line_total


def activity_fit(case: Case, devices: Mapping[str, tuple[str, str]], gpu_lines: pd.DataFrame, tele: Telemetry,
                 nodes: NodeMap) -> list[Misfit]:
    """The checks that read whose GPU each activity row is: each row's service worked out once."""
    owners = telemetry_owners(tele.activity, tele.traffic, case.services)
    return profile_gpu_fit(case, devices, gpu_lines, tele, nodes, owners) + replicas_fit(case, tele, owners)


def fit(case: Case, lines: pd.DataFrame, scoped: int, classified: pd.DataFrame, tele: Telemetry, nodes: NodeMap,
        devices: Mapping[str, tuple[str, str]] | None = None, beyond: pd.DataFrame | None = None) -> Fit:
    """Every misfit of the case against its data.

    ``lines`` are every billing line read (before the scope), ``scoped`` how many charges among them
    the scope keeps (tax and credits apart), ``classified`` the lines in scope with their class and
    owner (audit/classify.py), ``nodes`` the billed resource → telemetry node map, ``devices``
    each profile's service and the GPU its trace names (audit/fit_profiles.py ``devices_of``), ``beyond``
    the sources' commitment purchases outside the window (audit/fit_commitments.py ``window_purchases``).
    """
    gpu_lines = classified[(classified["resource_class"] == "gpu_compute") & ~classified.index.isin(moved_fees(classified))]
    pods = pod_labels(tele)
    orphans, owned = orphan_pods(case, pods)
    found = (telemetry_window_fit(case, tele) + services_fit(case, tele, pods) + undeclared_fit(case, orphans, owned)
             + scope_fit(case, lines, scoped)
             + scope_adjustments_fit(case.scope, lines, classified)
             + request_logs_fit(case, tele)
             + nodes_fit(case, lines, gpu_lines, tele, nodes) + gpu_models_fit(gpu_lines, tele, nodes)
             + claims_fit(case, lines, request_log_services(case), lines.index.isin(classified.index))
             + claims_taken_fit(case, classified) + claims_partial_fit(case, classified)
             + unmatched_fit(case, classified) + purchases_fit(case, classified, lines, beyond)
             + step_fit(case, tele) + window_fit(case, lines) + quantities_fit(classified) + parts_fit(gpu_lines, nodes)
             + list_fit(classified, case.cost_basis)
             + telemetry_days_fit(case, gpu_lines, tele)
             + activity_fit(case, devices or {}, gpu_lines, tele, nodes) + profiles_fit(case))
    return Fit(tuple(found), tuple(sorted({pod_name(p) for p in orphans})))


# ---- services -------------------------------------------------------------------------------------

def pod_labels(tele: Telemetry) -> list[dict[str, str]]:
    """Every distinct label set of a pod that telemetry names (GPU activity, GPU requests, serving
    counters), the model it serves filled in from the counters; request-log rows (no labels) left out."""
    models = pod_models(tele.traffic) if len(tele.traffic) else {}
    rows: dict[tuple, dict[str, str]] = {}
    for table in (tele.activity, tele.requests, tele.traffic):
        if table.empty or "pod" not in table:
            continue
        present = [k for k in MATCH_KEYS if k in table]
        for values in table[present].drop_duplicates().itertuples(index=False):
            labels = {k: "" if pd.isna(v) else str(v) for k, v in zip(present, values)}
            if not labels.get("pod") or (not labels.get("namespace") and not labels.get("model_name")
                                         and table is tele.traffic):
                continue
            for k in MATCH_KEYS:
                labels.setdefault(k, "")
            if not labels["model_name"]:
                labels["model_name"] = models.get((labels["namespace"], labels["pod"]), "")
            rows[tuple(labels[k] for k in MATCH_KEYS)] = labels
    return list(rows.values())


def request_log_services(case: Case) -> dict[str, list[str]]:
    """service named by a telemetry source's ``service`` option -> the sources naming it."""
    named: dict[str, list[str]] = {}
    for source in case.sources:
        service = source.options.get("service") if source.kind == "telemetry" else None
        if isinstance(service, str) and service:
            named.setdefault(service, []).append(source.name)
    return named


def services_fit(case: Case, tele: Telemetry, pods: list[dict[str, str]] | None = None) -> list[Misfit]:
    """A misfit per service matcher that finds no pod, and an error per service that matches nothing
    (``pods``: :func:`pod_labels` of ``tele``, where the caller has them)."""
    pods = pod_labels(tele) if pods is None else pods
    logs = request_log_services(case)
    out = []
    for name, service in case.services.items():
        if not service.match:
            continue  # a service of billing lines only (audit/fit_claims.py checks its claims)
        own = [labels for labels in pods if service_of(labels, {name: service}, {}) == name]
        if own:
            out.extend(_shadowed(name, own, case.services))
            continue
        out.extend(_service_misfits(name, service, pods, logs.get(name, []), tele.series_labels))
    return out


def _shadowed(name: str, own: list[dict[str, str]], services: Mapping[str, Service]) -> list[Misfit]:
    """A ``service_shadowed`` warning when every pod a service's matchers find belongs to services
    declared before it (a pod belongs to the first service whose matchers all hold): the service gets
    none of the GPU time its matchers point at, and an earlier one gets it all."""
    owners = [service_of(labels, services, {}) for labels in own]
    if any(owner == name for owner in owners):
        return []
    earlier = list(dict.fromkeys(o for o in owners if o))
    subject = f"service {text(name)}"
    pods = sorted({labels["pod"] for labels in own})
    by = ", ".join(f"service {text(o)}" for o in earlier)
    message = (f"{subject} matches {len(pods)} pod(s) ({listing(pods)}), and every one belongs to {by}, "
               f"declared before it (a pod belongs to the first service whose matchers all hold): "
               f"{text(name)} gets none of their GPU time and {by} counts it all; declare {text(name)} first, "
               f"or narrow the matchers of {by}")
    return [Misfit("service_shadowed", subject, message, tuple(text(o) for o in earlier))]


def _service_misfits(name: str, service: Service, pods: list[dict[str, str]], logs: list[str],
                     series: pd.DataFrame) -> list[Misfit]:
    subject = f"service {text(name)}"
    if not pods:
        matchers = ', '.join(_written(k, v) for k, v in service.match.items())
        named, near = pods_elsewhere(series)
        if not named:
            message = f"{subject}: telemetry names no pod, so none of its matchers ({matchers}) can find its GPU time"
            return [Misfit("service_matcher", subject, message, ())]
        message = (f"{subject}: telemetry names no pod on the series the split reads for GPU activity or GPU "
                   f"requests, so none of its matchers ({matchers}) can find its GPU time; it names {named}, "
                   f"which the split does not read for activity")
        return [Misfit("service_matcher", subject, message, tuple(near))]
    unread = unread_pods(series, pods, name, service)
    reasons, near = _why_no_pod(service, pods, unread)
    named, found = pods_elsewhere(unread)
    if named:
        reasons += f"; it names {named}, which the split does not read for activity"
    if logs:
        message = (f"{subject}: {reasons}; its requests come from {', '.join(text(s) for s in logs)}, but its "
                   f"GPU time is counted as undeclared workload")
        return [Misfit("service_matcher", subject, message, tuple(dict.fromkeys(found + near)))]
    message = (f"{subject} matches {'no pod the split reads' if named else 'nothing in the data'}: {reasons}; "
               "no request-log source names it. "
               f"Its GPU time would be counted as undeclared workload")
    return [Misfit("service_unmatched", subject, message, tuple(dict.fromkeys(found + near)), "error")]


def _why_no_pod(service: Service, pods: list[dict[str, str]], unread: pd.DataFrame) -> tuple[str, list[str]]:
    """Which matchers find no pod, the pods they could have meant, and the ``re:`` form to write; a
    value only series the split does not read carry (``unread``: :func:`unread_pods`) is the nearest."""
    parts: list[str] = []
    near_all: list[str] = []
    for key, pattern in service.match.items():
        others = {k: v for k, v in service.match.items() if k != key}
        context = [p for p in pods if all(_matches(v, p.get(k, "")) for k, v in others.items())]
        if context and any(_matches(pattern, p.get(key, "")) for p in context):
            continue
        if not context and any(_matches(pattern, p.get(key, "")) for p in pods):
            continue  # this matcher finds pods; another one finds none
        where = _where(others) if context else " in telemetry"
        pool = context or pods
        elsewhere = sorted({str(v) for v in unread[key]}) if key in unread else []
        values = elsewhere + [v for v in nearest(pattern, (p.get(key, "") for p in pool)) if v not in elsewhere]
        read = " on the series the split reads" if elsewhere else ""
        sentence = f"{_written(key, pattern)} matches no {key}{read}; {PLURAL[key]}{where}: {listing(values)}"
        hint = None if elsewhere else suggestion(pattern, values)
        if hint:
            sentence += f" — did you mean `{text(hint)}`?"
        parts.append(sentence)
        near_all.extend(text(v) for v in values[:LISTED])
    if not parts:
        parts.append("no pod has " + " and ".join(_written(k, v) for k, v in service.match.items())
                     + " together")
    return "; ".join(parts), near_all


def _where(others: Mapping[str, str]) -> str:
    if not others:
        return " in telemetry"
    if list(others) == ["namespace"] and not others["namespace"].startswith("re:"):
        return f" in namespace {text(others['namespace'])}"
    return " with " + " and ".join(_written(k, v) for k, v in others.items())


# ---- scope ----------------------------------------------------------------------------------------

def scope_fit(case: Case, lines: pd.DataFrame, scoped: int | None = None) -> list[Misfit]:
    """A misfit per ``[scope]`` account, service or tag that no billing line carries. Where the scope
    keeps no charge (``scoped`` = 0: at most the tax and credits it keeps by their account), they are
    errors: the audit would report 0.00, or tax and credits alone, for a scope that is not in the data."""
    out = _scope_misfits(case, lines)
    if scoped != 0 or lines.empty or not any(case.scope.get(k) for k in ("accounts", "services", "tags")):
        return out
    if not out:  # each piece is in the data, but no line has them together
        out = [Misfit("scope_empty", "[scope]", f"[scope] {_scope_text(case.scope)} keeps no charge of the "
                      f"{line_total(lines):,} billing lines read: each is in the data, but no line has them together", ())]
    return [replace(m, severity="error", message=f"{m.message}; the scope keeps no charge of the {line_total(lines):,} billing "
                    "lines read (a report would show 0.00, or tax and credits alone)") if m.kind != "scope_empty"
            else replace(m, severity="error") for m in out]


def _scope_text(scope: Mapping) -> str:
    """The scope's pieces, as the case writes them."""
    parts = [f"accounts = {list(scope['accounts'])}" if scope.get("accounts") else "",
             f"services = {list(scope['services'])}" if scope.get("services") else "",
             f"tags = {dict(scope['tags'])}" if scope.get("tags") else ""]
    return ", ".join(p for p in parts if p)


def _scope_misfits(case: Case, lines: pd.DataFrame) -> list[Misfit]:
    """A misfit per ``[scope]`` account, service or tag that no billing line carries."""
    scope = case.scope
    out: list[Misfit] = []
    if lines.empty:
        return out
    accounts = _distinct(lines, "sub_account_id") | _distinct(lines, "billing_account_id")
    keys = {account_key(a) for a in accounts}
    for account in scope.get("accounts") or []:
        if account_key(account) not in keys:
            out.append(_absent("scope_account", f"[scope] account {text(account)}", "matches no line",
                               "accounts present", account, accounts))
    names = _distinct(lines, "service_name")
    for service in scope.get("services") or []:
        if service not in names:
            out.append(_absent("scope_service", f"[scope] service {text(service)}", "matches no line",
                               "services present", service, names))
    wanted = dict(scope.get("tags") or {})
    if wanted:
        tags = distinct_tags(lines)
        keys = {str(k) for t in tags for k in t}
        for key, value in wanted.items():
            if key not in keys:
                out.append(_absent("scope_tag", f"[scope] tag {text(key)}", "matches no line",
                                   "tag keys present", key, keys))
                continue
            values = {str(t[key]) for t in tags if key in t}
            if value not in values:
                out.append(_absent("scope_tag", f"[scope] tag {text(key)} = \"{text(value)}\"", "matches no line",
                                   f"values of {text(key)} present", value, values))
    return out


def _absent(kind: str, subject: str, what: str, present: str, wanted: str, values: Iterable[str]) -> Misfit:
    near = nearest(wanted, values)
    message = f"{subject} {what}; {present}: {listing(near)}"
    return Misfit(kind, subject, message, tuple(text(v) for v in near[:LISTED]))


# ---- request logs ---------------------------------------------------------------------------------

def request_logs_fit(case: Case, tele: Telemetry) -> list[Misfit]:
    """A misfit per telemetry source whose ``service`` option names no declared service."""
    out = []
    traffic = tele.traffic
    for service, sources in request_log_services(case).items():
        if service in case.services:
            continue
        mine = traffic[(traffic["pod"] == service) & (traffic["namespace"] == "") & (traffic["model_name"] == "")] \
            if len(traffic) else traffic
        requests = int(sum(float(r) for r in mine["requests"])) if len(mine) else 0
        near = nearest(service, case.services)
        names = ", ".join(text(s) for s in sources)
        message = (f"request-log source {names} names service {text(service)}, which has no [services] "
                   f"entry: its {requests:,} requests count for no service; services declared: {listing(near)}")
        hint = difflib.get_close_matches(service, list(case.services), n=1)
        if hint:
            message += f" — did you mean {text(hint[0])}?"
        out.append(Misfit("request_log_service", f"source {names}", message, tuple(text(v) for v in near[:LISTED])))
    return out


# ---- nodes and billed GPU resources ---------------------------------------------------------------

def _telemetry_nodes(tele: Telemetry) -> dict[str, str]:
    """node -> the provider / resource id telemetry carries for it ("" when none)."""
    carried: dict[str, str] = {}
    for table in (tele.activity, tele.requests):
        if "node" in table:
            carried.update({str(n): "" for n in table["node"].unique() if str(n)})
    for r in tele.nodes.itertuples(index=False):
        carried[str(r.node)] = str(r.resource_id or r.provider_id or "")
    return carried


def _billed_keys(lines: pd.DataFrame) -> set[str]:
    keys = {resource_key(r) for r in _distinct(lines, "resource_id")} if len(lines) else set()
    if "allocated_resource_id" in lines:
        keys |= {resource_key(r) for r in _distinct(lines, "allocated_resource_id")}
    if "resource_name" in lines:
        keys |= {n.strip() for n in _distinct(lines, "resource_name")}
    return {k for k in keys if k}


def _distinct(lines: pd.DataFrame, column: str) -> set[str]:
    """The distinct values of a column, as text (one pass in pandas, not a Python loop per line)."""
    return {str(v) for v in lines[column].unique()}


def nodes_fit(case: Case, lines: pd.DataFrame, gpu_lines: pd.DataFrame, tele: Telemetry,
              nodes: NodeMap) -> list[Misfit]:
    """[nodes] entries, billed GPU resources and telemetry GPU nodes that do not meet each other."""
    carried = _telemetry_nodes(tele)
    billed = _billed_keys(lines)
    gpu = _gpu_resources(gpu_lines)
    out = []
    for node, resource in case.nodes.items():
        subject = f"[nodes] {text(node)}"
        if carried and node not in carried:
            near = nearest(node, carried)
            out.append(Misfit("node_not_in_telemetry", subject,
                              f"{subject} = \"{text(resource)}\": telemetry names no node {text(node)}; "
                              f"telemetry nodes: {_carrying(near, carried)}", tuple(text(v) for v in near[:LISTED])))
        if len(lines) and resource_key(resource) not in billed:
            near = nearest(resource_key(resource), gpu or billed)
            what = "GPU resources billed" if gpu else "resources billed"
            out.append(Misfit("node_not_billed", subject,
                              f"{subject} = \"{text(resource)}\": no billing line names this resource; "
                              f"{what}: {listing(near)}", tuple(text(v) for v in near[:LISTED])))
    seen = _distinct(tele.activity, "node") if len(tele.activity) else set()
    if seen:
        out.extend(_unmet_gpu_resources(gpu, nodes, seen, carried, gpu_lines, node_gpu_models(tele)))
        out.extend(_anonymous_gpu_lines(gpu_lines, carried, seen))
    out.extend(_unbilled_gpu_nodes(seen, nodes, gpu, carried, named=bool(len(gpu_lines)) and not gpu))
    return out


def _anonymous_gpu_lines(gpu_lines: pd.DataFrame, carried: Mapping[str, str], seen: set[str]) -> list[Misfit]:
    """GPU lines in scope that name no resource (a CUR written without resource ids, a FOCUS file
    without ResourceId): nothing joins them to a telemetry node, so their cost is unattributed (GPU
    not in telemetry). Said once, with how many lines and the instance types they bill."""
    if not len(gpu_lines) or "resource_id" not in gpu_lines.columns:
        return []
    ids = gpu_lines["resource_id"].fillna("").astype(str)
    nameless = [v for v in ids.unique() if not resource_key(v)]  # each distinct id once, not per line
    anonymous = gpu_lines[ids.isin(nameless).to_numpy()]
    if not len(anonymous):
        return []
    kinds = sorted({str(v) for v in anonymous.get("instance_type", pd.Series(dtype=object)).dropna() if str(v)})
    billing = f" billing {listing(kinds)}" if kinds else ""
    count = line_total(anonymous)
    near = sorted(seen)
    return [Misfit("gpu_lines_without_resource", "GPU lines without a resource",
                   f"{count:,} GPU line(s) in scope{billing} name no resource (ResourceId, or a CUR's "
                   f"line_item_resource_id, is empty): nothing joins them to a telemetry node, and their cost is "
                   f"unattributed (GPU not in telemetry); telemetry GPU nodes: {_carrying(near, carried)}. "
                   f"A billing export with resource ids ({_resource_export(anonymous)}) fits",
                   tuple(text(v) for v in near[:LISTED]))]


#: the export with resource ids, by words of the lines' provider (the first that a provider name holds)
RESOURCE_EXPORTS = (("google", "the detailed usage cost export, gcp_billing_export_resource_v1_…"),
                    ("microsoft", "cost details with ResourceId, or a FOCUS export"),
                    ("azure", "cost details with ResourceId, or a FOCUS export"))
AWS_RESOURCE_EXPORT = "a CUR with 'Include resource IDs'"


def _resource_export(lines: pd.DataFrame) -> str:
    """The export with resource ids that the lines' provider offers (the CUR's by default)."""
    providers = " ".join(str(v).lower() for v in lines.get("provider", pd.Series(dtype=object)).unique())
    return next((export for word, export in RESOURCE_EXPORTS if word in providers), AWS_RESOURCE_EXPORT)


def _gpu_resources(gpu_lines: pd.DataFrame) -> dict[str, str]:
    """resource key -> what the line says of it (instance type, resource name) for billed GPU time."""
    out: dict[str, str] = {}
    said_columns = [c for c in ("instance_type", "resource_name") if c in gpu_lines.columns]
    distinct = gpu_lines[["resource_id", *said_columns]].drop_duplicates()  # hourly lines repeat these
    for r in distinct.itertuples(index=False):
        key = resource_key(str(r.resource_id))
        if key:
            said = [str(getattr(r, c, "") or "") for c in ("instance_type", "resource_name")]
            out.setdefault(key, ", ".join(dict.fromkeys(s for s in said if s and s != key)))
    return out


def _carrying(names: list[str], carried: Mapping[str, str]) -> str:
    if not names:
        return "none"
    parts = [f"{text(n)} ({text(carried[n])})" if carried.get(n) else text(n) for n in names[:LISTED]]
    more = len(names) - LISTED
    return ", ".join(parts) + (f" … ({more} more)" if more > 0 else "")


def _unmet_gpu_resources(gpu: Mapping[str, str], nodes: NodeMap, seen: set[str], carried: Mapping[str, str],
                         gpu_lines: pd.DataFrame, node_models: Mapping[str, set[str]]) -> list[Misfit]:
    """A billed GPU resource no telemetry node joins, with the GPU nodes telemetry names nearest first:
    those reporting the GPU model the resource is billed as, then by name."""
    billed = billed_models(gpu_lines) if {"gpu_model", "line_id", "charge_description"} <= set(gpu_lines) else {}
    out = []
    for key, said in sorted(gpu.items()):
        if set(nodes.nodes_of.get(key, ())) & seen:
            continue
        model = billed[key].model if key in billed else ""
        same = same_model_nodes(model, node_models)
        near = nearest(key, same) + nearest(key, [n for n in {*carried, *node_models} if n in seen and n not in same])
        subject = f"billed GPU resource {text(key)}"
        detail = f" ({text(said)})" if said else ""
        agree = f" (the billed GPU model, {text(model)}, on {listing(same)})" if same else ""
        out.append(Misfit("gpu_resource_not_in_telemetry", subject,
                          f"{subject}{detail} meets no telemetry node (its cost is unattributed: GPU not in "
                          f"telemetry); telemetry GPU nodes carry: {_carrying(near, carried)}{agree}; "
                          f"[nodes] can join them", tuple(text(v) for v in near[:LISTED])))
    return out


def _unbilled_gpu_nodes(seen: set[str], nodes: NodeMap, gpu: Mapping[str, str],
                        carried: Mapping[str, str], named: bool = False) -> list[Misfit]:
    """Telemetry GPU nodes no GPU line in scope bills; ``named``: there are GPU lines in scope, but
    none names a resource (:func:`_anonymous_gpu_lines` says so)."""
    met = {n for key in gpu for n in nodes.nodes_of.get(key, ())}
    if seen and not gpu:
        names = sorted(seen)
        subject = "telemetry GPU nodes"
        how = "no GPU line in scope names a resource" if named else "no GPU line in scope bills any"
        return [Misfit("telemetry_node_not_billed", subject,
                       f"telemetry shows GPU activity on {len(names)} node(s) ({_carrying(names, carried)}) "
                       f"but {how}", tuple(text(v) for v in names[:LISTED]))]
    out = []
    for node in sorted(seen - met):
        subject = f"telemetry node {text(node)}"
        detail = f" ({text(carried[node])})" if carried.get(node) else " (no provider id)"
        near = nearest(resource_key(carried.get(node, "")) or node, gpu)
        listed = ", ".join(f"{text(k)} ({text(gpu[k])})" if gpu[k] else text(k) for k in near[:LISTED]) or "none"
        out.append(Misfit("telemetry_node_not_billed", subject,
                          f"{subject}{detail} shows GPU activity but no GPU line in scope bills it; "
                          f"GPU resources billed: {listed}", tuple(text(v) for v in near[:LISTED])))
    return out
