"""The case ``costaudit init --from`` proposes: every key it writes, with the evidence it rests on.

From the sources as read (:mod:`audit.discover.read`): the window (the whole UTC days the billing
covers, else the telemetry's span, or ``--window``), the currency (the billing's; several are
listed and none is chosen), the telemetry step, ``[scope]`` (the accounts with GPU spend, when
some have none), ``[services]`` (the workloads of :mod:`audit.discover.workloads`), ``[nodes]``
(:mod:`audit.discover.nodes`) and, for each profile, the service it most plausibly represents
(only when one service fits). A case given to ``--from`` lends its sources, its figures
(``loaded_rate``, tolerance, …), its ``[nodes]`` and ``[[rules]]``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from audit.case import Case
from audit.discover.billing import ZERO, Account, Billing, billing_facts, gpu_accounts, scoped_instances
from audit.discover.nodes import NodeFit, fit_nodes, telemetry_nodes
from audit.discover.read import Read
from audit.discover.workloads import Workload, fit_matchers, gather
from schemas.secrets import mask_url

SHOWN_ACCOUNTS = 10
#: a tag that changes whenever its nodes are made again, a poor claim: its key names an operation's or
#: request's id, or its value is a uuid or a hex hash (AKS's aks-managed-createOperationID = 59115b41)
VOLATILE_KEY = re.compile(r"(?i)operation|request.?id|uuid|guid|creat\w*.?id")
VOLATILE_VALUE = re.compile(r"(?i)[0-9a-f]{8}(?:-?[0-9a-f]{4}){3}-?[0-9a-f]{12}|(?=[a-f]*\d)[0-9a-f]{8,}")
#: a node pool's or node group's name, the claim of a CPU tier's nodes to prefer
POOL_KEY = re.compile(r"(?i)pool|node.?group")
DEFAULTS = {"cost_basis": "effective", "tolerance": "0.02", "target_utilisation": "0.8", "loaded_rate": "150"}


@dataclass
class SourceEntry:
    """One ``[[billing]]``, ``[[telemetry]]`` or ``[[profiles]]`` table to write."""

    kind: str
    name: str
    format: str
    location: tuple[str, str]            # ("path", "...") or ("url", "...")
    options: dict[str, Any] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)
    disabled: bool = False               # written commented out (it cannot be used as it is)


@dataclass
class ServiceEntry:
    name: str
    match: dict[str, str]
    gpus_per_replica: int | None = 1     # None for a CPU tier (a request log's service): not written
    min_replicas: int | None = 1
    comments: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)   # a tags claim (a request log's CPU service)
    disabled: bool = False               # written commented out (no matcher or claim the data holds)


@dataclass
class Proposal:
    """Everything the writer renders, and the warnings the command prints."""

    name: str
    window: tuple[datetime, datetime]
    window_note: str
    currency: str | None
    currency_note: str
    settings: dict[str, Any]
    step: str | None
    step_note: str
    sources: list[SourceEntry]
    services: list[ServiceEntry]
    scope_accounts: list[str]
    scope_notes: list[str]
    nodes: NodeFit
    declared_nodes: dict[str, str]
    rules: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    origin: str = ""


def propose(name: str, reads: list[Read], window: tuple[datetime, datetime], window_note: str,
            case: Case | None = None) -> Proposal:
    """The proposal for the sources as read over ``window``."""
    rules = tuple(case.rules) if case is not None else ()
    basis = case.cost_basis if case is not None else "effective"
    declared = dict(case.nodes) if case is not None else {}
    billing = billing_facts(reads, rules, basis, declared)
    workloads = gather(reads, window)
    fit_matchers(workloads)
    currency, currency_note = _currency(billing, case)
    accounts, scope_notes = _scope(billing, currency or "")
    services = _services(workloads, billing, accounts)
    nodes = fit_nodes(billing.resources, telemetry_nodes(reads), declared)
    step, step_note = _step(reads, case)
    proposal = Proposal(
        name=name, window=window, window_note=window_note, currency=currency, currency_note=currency_note,
        settings=_settings(case), step=step, step_note=step_note,
        sources=[], services=services, scope_accounts=accounts, scope_notes=scope_notes, nodes=nodes,
        declared_nodes=declared, rules=[_rule(r) for r in rules],
        origin=str(case.path) if case is not None else "")
    proposal.sources = [_source(r, workloads, services, case) for r in reads]
    proposal.warnings = _warnings(proposal, reads, billing)
    return proposal


def _settings(case: Case | None) -> dict[str, Any]:
    if case is None:
        return dict(DEFAULTS)
    return {"cost_basis": case.cost_basis, "tolerance": str(case.tolerance),
            "target_utilisation": str(case.target_utilisation), "loaded_rate": str(case.loaded_rate),
            "from_case": True}


def _currency(billing: Billing, case: Case | None) -> tuple[str | None, str]:
    """The billing's one currency, with what it rests on; a file that names none (no BillingCurrency
    column) counts for none, and where no file names one the currency written is an assumption."""
    found = sorted(billing.currencies, key=lambda c: -billing.currencies[c])
    if len(found) == 1:
        unnamed = "".join(f"; {name} names none ({said}) and is read in it, assumed"
                          for name, said in billing.unnamed.items())
        return found[0], f"the billing's currency ({billing.currencies[found[0]]:,} lines){unnamed}"
    if len(found) > 1:
        listed = ", ".join(f"{c} ({billing.currencies[c]:,} lines)" for c in found)
        return None, (f"the billing holds several currencies: {listed}; an audit is in one currency, so "
                      "none is chosen: write currency = \"XXX\" and give only the billing in it")
    if billing.unnamed:
        what = "; ".join(f"{name}: {said}" for name, said in billing.unnamed.items())
        currency = case.currency if case is not None else "USD"
        return currency, (f"the billing names no currency ({what}): {currency} is the case's assumption, "
                          "not the file's; write the currency it bills in")
    if case is not None:
        return case.currency, "the case's currency (the billing names none)"
    return "USD", "no billing line names a currency: USD assumed"


def _step(reads: list[Read], case: Case | None) -> tuple[str | None, str]:
    steps = {r.name: r.step for r in reads if r.source.kind == "telemetry" and r.step}
    if case is not None and case.step_seconds:
        return duration(case.step_seconds), "the case's step"
    if not steps:
        return None, "no telemetry step was measured: each source keeps its own"
    seconds = max(3600, max(steps.values()))
    own = ", ".join(f"{name} {step}s" for name, step in steps.items())
    return duration(seconds), f"one grid for every telemetry source (their own steps: {own})"


def duration(seconds: int) -> str:
    """A duration as the case writes it: "1h", "15m", "30s", "1d"."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _charges(account: Account, currency: str) -> str:
    """An account's charges, before credits and tax as its GPU lines' spend is, with what it comes to
    after them where they differ."""
    if account.charges == account.total:
        return f"{account.charges:,.2f} {currency}"
    return f"{account.charges:,.2f} {currency} before credits and tax ({account.total:,.2f} after them)"


def _scope(billing: Billing, currency: str) -> tuple[list[str], list[str]]:
    """The accounts with GPU spend, when some accounts have none; notes with every account's totals."""
    if not billing.lines:
        return [], []
    gpu, other = gpu_accounts(billing)
    notes = [f"{a.id or '(no account id)'}{' ' + repr(a.name) if a.name else ''}: GPU {a.gpu:,.2f} of "
             f"{_charges(a, currency)}, {a.gpu_hours:,.1f} GPU-hours" for a in gpu]
    scoped = bool(gpu and other and all(a.id for a in gpu))
    after = "outside the scope" if scoped else "no GPU spend"
    notes += [f"{a.id or '(no account id)'}: {'no GPU spend, ' if scoped else ''}{_charges(a, currency)}"
              f"{', ' + after if scoped else ' (' + after + ')'}" for a in other[:SHOWN_ACCOUNTS]]
    if len(other) > SHOWN_ACCOUNTS:
        rest = Account("", total=sum((a.total for a in other[SHOWN_ACCOUNTS:]), ZERO),
                       charges=sum((a.charges for a in other[SHOWN_ACCOUNTS:]), ZERO))
        notes.append(f"… and {len(other) - SHOWN_ACCOUNTS} more accounts without GPU spend "
                     f"({_charges(rest, currency)} together)")
    if not gpu:
        notes.append("no account has GPU spend: no scope is proposed")
    elif not other:
        notes.append("every account has GPU spend: no scope is needed")
    elif not scoped:
        notes.append("GPU spend on lines without an account id: no scope is proposed")
    return ([a.id for a in gpu] if scoped else []), notes


def _services(workloads: list[Workload], billing: Billing, accounts: list[str]) -> list[ServiceEntry]:
    out: list[ServiceEntry] = []
    names: set[str] = set()
    for work in workloads:
        name = _unique(_service_name(work), names)
        work.service = name
        per_pod = max(work.gpus_per_pod.items(), key=lambda kv: (kv[1], kv[0]))[0] if work.gpus_per_pod else 1
        entry = ServiceEntry(name, dict(work.matcher), gpus_per_replica=per_pod, min_replicas=1,
                             comments=evidence(work))
        if work.shape == "request_log":
            _log_claim(entry, billing, accounts)
        out.append(entry)
    return out


def _log_claim(entry: ServiceEntry, billing: Billing, accounts: list[str]) -> None:
    """A request log's service has no pod (docs/case.md: a service with claims and no matcher, a CPU
    tier, so no ``gpus_per_replica`` or ``min_replicas``): it claims the lines of the tag the most spend
    on instances without GPUs in the proposed scope carries, a tag no GPU line and no line of no instance
    carries first (a node group's, not the cluster's that the GPU nodes and control plane carry too),
    a stable one before a :func:`volatile` one, of the same spend a node pool's name first; where no
    such instance carries a tag, it is written commented out (no matcher or claim the data holds)."""
    entry.gpus_per_replica = entry.min_replicas = None
    tags, total = scoped_instances(billing, accounts)
    shared = billing.shared_tags
    ranked = sorted(tags.items(), key=lambda kv: (kv[0] in shared, volatile(*kv[0]), -kv[1],
                                                  not POOL_KEY.search(kv[0][0]), shared.get(kv[0], ZERO), kv[0]))
    if not ranked:
        entry.disabled = True
        entry.comments.append("no pod serves it and no instance line carries a tag: write its claim (tags = { … } "
                              "or resource_ids = [ … ], the billing lines it owns) and uncomment")
        return
    (key, value), spend = ranked[0]
    entry.tags = {key: value}
    others = ", ".join(f"{k} = {v} {a:,.2f}{_shared(shared, (k, v))}{' (volatile)' if volatile(k, v) else ''}"
                       for (k, v), a in ranked[1:4])
    entry.comments.append(f"no pod serves it (a CPU tier): it claims the lines tagged {key} = {value}, the tag the most "
                          f"spend on instances without GPUs carries ({spend:,.2f} of {total:,.2f}"
                          f"{' in scope' if accounts else ''}){_shared(shared, (key, value))}; "
                          + (f"others: {others}" if others else "no other tag"))


def volatile(key: str, value: str) -> bool:
    """Whether a tag names one operation (an id of it, a uuid, a hash) rather than what its nodes are:
    it changes when they are made again (before: AKS's aks-managed-createOperationID = 59115b41 was
    claimed over aks-managed-poolName = system, of the same spend)."""
    return bool(VOLATILE_KEY.search(key) or VOLATILE_VALUE.fullmatch(value))


def _shared(shared: dict[tuple[str, str], Decimal], tag: tuple[str, str]) -> str:
    """What else a tag claims: the GPU lines and lines of no instance that carry it too."""
    return f" (also on {shared[tag]:,.2f} of GPU lines and lines of no instance)" if tag in shared else ""


def _service_name(work: Workload) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", work.name).strip("-")[:60] or "service"


def _unique(name: str, taken: set[str]) -> str:
    base, n = name, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def evidence(work: Workload) -> list[str]:
    """The comment lines that say what a service proposal rests on."""
    pods = sorted(work.pods)
    where = f" in namespace {work.namespace}" if work.namespace else ""
    lines = []
    if work.shape == "request_log":
        lines.append(f"requests counted in {work.source} (access_log): {work.requests:,.0f} in the window")
    else:
        shown = ", ".join(pods[:3]) + (", …" if len(pods) > 3 else "")
        lines.append(f"{len(pods)} pod(s){where}: {shown}")
    if work.holds_gpus:
        per_pod = ", ".join(f"{k} GPU(s) × {v} pod(s)" for k, v in sorted(work.gpus_per_pod.items()))
        lines.append(f"{work.gpu_hours:,.1f} GPU-hours in the window ({', '.join(sorted(work.basis))}); {per_pod}")
        if work.nodes:
            lines.append(f"on {len(work.nodes)} node(s): {', '.join(sorted(work.nodes)[:4])}"
                         + (f"; GPU {', '.join(sorted(work.gpu_models))}" if work.gpu_models else ""))
        low, high = work.concurrent
        lines.append(f"pods holding GPUs at once: {low} to {high} (min_replicas is yours to choose)")
    elif work.shape != "request_log":
        lines.append("no GPU seen for these pods: requests only")
    if work.requests and work.shape != "request_log":
        models = f" ({', '.join(sorted(work.served_models))})" if work.served_models else ""
        lines.append(f"{work.requests:,.0f} requests served in the window{models}")
    return lines + work.notes


def _rule(rule) -> dict[str, Any]:
    return {"when": dict(rule.when), "class": rule.resource_class, "reason": rule.reason}


# ---- sources --------------------------------------------------------------------------------

def _source(read: Read, workloads: list[Workload], services: list[ServiceEntry], case: Case | None) -> SourceEntry:
    s = read.source
    key = "path" if s.path is not None else next(k for k in ("url", "uri", "table") if s.options.get(k))
    location = (key, str(s.path) if s.path is not None else mask_url(s.options[key]))   # no url credential
    options = {k: v for k, v in s.options.items() if k not in ("url", "uri", "table", "path")}
    entry = SourceEntry(s.kind, read.name, s.format, location, options, [s.why])
    if read.frame is not None:
        entry.comments.append(_read_note(read))
    if read.error:
        entry.disabled = True
        entry.comments.append(f"could not be read: {read.error}")
    if s.format == "access_log" and not read.error:
        work = next((w for w in workloads if w.source == read.name), None)
        if work is not None:
            entry.options["service"] = work.service
    if s.kind == "profiles" and not read.error:
        _attach(entry, read, workloads, services)
    return entry


def _read_note(read: Read) -> str:
    start, end = read.frame.covered if read.frame is not None else (None, None)
    span = f", {start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC" if start and end else ", no time span"
    if read.source.kind == "profiles":
        table = read.tables.get("profile")
        device = f", device {table['device'].iloc[0]}" if table is not None and len(table) else ""
        return f"read: {read.frame.rows:,} trace events{device}" if read.frame is not None else ""
    step = "" if read.source.kind != "telemetry" else (
        f", step {duration(read.step)}" if read.step else ", step unknown (not measured: no spacing between samples)")
    return f"read: {read.frame.rows:,} rows{span}{step}" if read.frame is not None else ""


def _attach(entry: SourceEntry, read: Read, workloads: list[Workload], services: list[ServiceEntry]) -> None:
    """Name the service a profile represents, when exactly one fits; else say which could."""
    given = entry.options.get("service")
    names = {s.name for s in services}
    if given in names:
        entry.comments.append(f"service {given!r}: as the case gave it")
        return
    gpu = [w for w in workloads if w.holds_gpus]
    chosen, why = _plausible(read, gpu)
    if chosen is not None:
        entry.options["service"] = chosen.service
        entry.comments.append(f"service {chosen.service!r}: {why}")
        if "requests" not in entry.options and read.source.format != "profile_bundle":
            entry.comments.append("requests = N (served in the traced window) gives kernel-seconds per request")
        return
    entry.disabled = True
    if given:
        entry.comments.append(f"its service {given!r} is not among the services proposed")
    entry.comments.append(why + "; set service = \"<name>\" (a [services] entry) and uncomment")


def _plausible(read: Read, gpu: list[Workload]) -> tuple[Workload | None, str]:
    if not gpu:
        return None, "no GPU service is proposed for this profile to represent"
    if len(gpu) == 1:
        return gpu[0], "the only GPU service"
    filename = read.source.path.name.lower() if read.source.path else ""
    words = set(re.split(r"[^a-z0-9.]+", filename))
    by_name = [w for w in gpu if w.name.lower() in words or _model_in(w, filename)]
    if len(by_name) == 1:
        return by_name[0], f"its file name names {by_name[0].name!r} (or the model it serves)"
    device = _device(read)
    by_gpu = [w for w in (by_name or gpu) if device and any(_same_gpu(device, m) for m in w.gpu_models)]
    if len(by_gpu) == 1:
        return by_gpu[0], f"the only service on the traced GPU ({device})"
    candidates = ", ".join(w.service or w.name for w in (by_gpu or by_name or gpu))
    return None, f"more than one service could have been traced ({candidates})"


def _model_in(work: Workload, filename: str) -> bool:
    return any(m.rsplit("/", 1)[-1].lower() in filename for m in work.served_models if m)


def _device(read: Read) -> str:
    table = read.tables.get("profile")
    return str(table["device"].iloc[0]) if table is not None and len(table) else ""


def _same_gpu(device: str, model: str) -> bool:
    def family(text: str) -> str:
        found = re.search(r"\b([ABHLTV]\d{2,3}[A-Z]?|L40S?|GB?\d{3})\b", text.upper())
        return found.group(1) if found else text.upper()
    return family(device) == family(model)


def _warnings(proposal: Proposal, reads: list[Read], billing: Billing) -> list[str]:
    out = []
    if not any(r.source.kind == "billing" for r in reads):
        out.append("no billing source: add a [[billing]] table before `costaudit validate` (an audit needs an invoice)")
    if proposal.currency is None:
        out.append(proposal.currency_note)
    for entry in proposal.sources:
        if entry.disabled:
            out.append(f"{entry.kind} source {entry.name} written commented out: {entry.comments[-1]}")
    if billing.gpu_total and not any(r.source.kind == "telemetry" for r in reads):
        out.append("no telemetry: the GPU spend will be unattributed (GPU not in telemetry)")
    for r in reads:
        if r.source.kind == "telemetry" and r.frame is not None and r.frame.covered == (None, None):
            why = ("its samples carry no timestamp (a single scrape names no time)"
                   if r.untimestamped and r.untimestamped >= r.frame.rows else "no sample inside the window")
            out.append(f"telemetry source {r.name}: {why}: no GPU-hours and no service can be read from it")
    return out
