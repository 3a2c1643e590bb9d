"""ReportModel: the audit.json dict, pre-formatted for display (STYLE habit 10).

The HTML/PDF template only lays this model out; every figure it shows is formatted here, from
the exact decimal strings of audit.json (never through float), with the helpers of
:mod:`audit.reporters.formatting`. An unmeasured figure (``None`` in audit.json) is shown as
"not measured", with the reason next to it where audit.json gives one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from audit.buckets import BUCKETS
from audit.reporters import evidence_view, phases_view, plan_view, quality, wording
from audit.reporters.bridge_view import bridge_rows
from audit.reporters.coverage_view import coverage_view as _coverage
from audit.reporters.formatting import (
    BUCKET_LABELS,
    NOT_MEASURED,
    VERDICTS,
    day,
    gap_places,
    label,
    money,
    number,
    percent,
    plain,
    plain_number,
    ratio,
    short_hash,
    to_decimal,
)
from audit.reporters.gap_view import gap_sensitivity_line
from audit.reporters.idle_view import idle_rows
from audit.reporters.months_view import MonthsView, months_view

# ---- view dataclasses ------------------------------------------------------------------

@dataclass(frozen=True)
class Band:
    expected: str
    low: str
    high: str
    measured: bool

    @property
    def range(self) -> str:
        return f"{self.low} – {self.high}" if self.measured else ""


def band(values: dict | None, fmt) -> Band:
    """A low / expected / high figure, each formatted by ``fmt``; "not measured" without one."""
    if not values:
        return Band(NOT_MEASURED, "", "", False)
    low, exp, high = (fmt(values.get(k)) for k in ("low", "expected", "high"))
    return Band(exp, low, high, True)


@dataclass(frozen=True)
class PartView:
    name: str
    label: str
    service: str
    amount: str
    gpu_hours: str
    source: str
    reason: str


@dataclass(frozen=True)
class BucketView:
    key: str
    label: str
    amount: str
    share: str
    share_width: str  # CSS width of the stacked bar, e.g. "41.23%"
    sources: list[str]
    parts: list[PartView]
    meaning: str = ""  # what the bucket holds, in words
    measured_by: list[str] = field(default_factory=list)  # its sources in plain words (page 1)
    rest: dict[str, str] = field(default_factory=dict)  # the PDF's: the parts it leaves out, summed


@dataclass(frozen=True)
class OptionView:
    rank: str
    id: str
    title: str
    bucket: str
    acts_on: str
    priced: bool
    status: str
    saving: Band
    one_off: Band
    payback: Band
    effort: Band
    assumptions: list[str]
    overridden: bool
    reason: str
    evidence: list[str]
    target: str = ""  # the part it acts on, in words: "Platform overhead · Unallocated GPUs"
    #: the plan (audit.reporters.plan_view): who acts, marginal saving, break-even, deferred saving
    who: dict[str, str] = field(default_factory=dict)
    marginal: str = "—"
    marginal_note: str = ""  # where the marginal bands read high < expected (audit.json marginal_note)
    break_even: str = "—"
    deferred: str = ""
    #: where the saving comes from (METHOD §7): "modelled" from measurements or "assumed" (the
    #: catalogue fraction), how low / high are formed, and each input with its source
    basis: str = ""
    basis_note: str = ""
    inputs: list[str] = field(default_factory=list)
    brief: bool = False  # the PDF prints its reason and basis only (audit.reporters.print_view)
    committed: str = ""  # page 1: the committed share it leaves out (plan_view.committed_note)


@dataclass(frozen=True)
class ServiceView:
    name: str
    requests: str
    prompt_tokens: str
    generated_tokens: str
    gpu_hours: str
    cost: str
    shared_cost: str
    full_cost: str  # own + shared: the numerator of the unit costs
    unattributed: str
    cost_per_request: str
    cost_per_1k_requests: str
    cost_per_1m_tokens: str
    reason: str
    by_bucket: list[tuple[str, str]]
    traffic_source: str
    #: requests per currency unit (successful, all), and the request log's classes behind them
    per_unit: str = "—"
    per_unit_all: str = "—"
    #: cost per 1,000 of all requests (failures and health checks too), where a request log counts them
    per_1k_all: str = "—"
    counts: list[tuple[str, str]] = field(default_factory=list)
    allocation_key: str = ""


#: a request log's classes, as the report names them (audit.json services[].request_counts)
COUNT_WORDS = (("lines", "All requests (log lines)"), ("successful", "Successful"),
               ("failed", "Failed (status outside 200–399)"), ("health_checks", "Health checks"),
               ("unparseable", "Unparseable lines"), ("other_paths", "Outside the path filter"))
#: how shared cost is split (audit.json allocation.used), in words
ALLOCATION_WORDS = {"gpu_cost": "in proportion to each service's paid GPU cost",
                    "requests": "in proportion to each service's requests",
                    "owned_cost": "in proportion to each service's owned cost",
                    "weights": "by the fixed weights the case sets",
                    "equal": "in equal shares", "none": "not at all: no service is declared"}


def allocation_words(audit: dict) -> str:
    """One sentence: how the shared cost was split, with the fallback the audit had to make."""
    a = audit.get("allocation") or {}
    used = a.get("used") or "gpu_cost"
    sentence = f"Shared cost is split {ALLOCATION_WORDS.get(used, used)}"
    if a.get("note"):
        sentence += f" (the case's key {a.get('key')}: {a['note']})"
    return sentence + "."


@dataclass(frozen=True)
class ReconciliationView:
    top_down: str
    bottom_up: str
    gap: str
    tolerance: str
    verdict: str  # the raw token, e.g. "reconciles"
    verdict_title: str
    verdict_words: str
    reason: str
    covered_hours: str
    drivers: list[dict[str, str]]


@dataclass(frozen=True)
class ProfileView:
    name: str
    service: str
    trace: str
    kernel_active_ms: str
    gpu_window_ms: str
    gap_ratio: str
    gap_basis: str
    kernel_seconds_per_request: str
    categories: list[dict[str, str]]
    top_kernels: list[dict[str, str]]
    top_call_paths: list[dict[str, str]] = field(default_factory=list)
    idle_paths: list[dict[str, str]] = field(default_factory=list)   # audit.reporters.idle_view
    gap_sensitivity: str = ""                                          # audit.reporters.gap_view


@dataclass(frozen=True)
class ReportModel:
    """Every figure of the report, formatted: data only (the HTML reporter draws the charts)."""

    audit: dict = field(repr=False)
    case: str
    window: str
    window_start: str
    window_end: str
    days: str
    currency: str
    cost_basis: str
    cost_basis_words: str
    total: str
    invoice_total: str
    outside_scope: dict[str, Any]
    bridge: list[tuple[str, str, str, bool]]  # label, amount, note, is a total
    buckets: list[BucketView]
    classes: list[dict[str, str]]
    services: list[ServiceView]
    reconciliation: ReconciliationView
    coverage: dict[str, Any]
    gpu_split: list[dict[str, str]]
    queue: list[dict[str, str]]
    profiles: list[ProfileView]
    options: list[OptionView]
    sources: list[dict[str, str]]
    notes: list[str]
    findings_count: int
    findings: list[dict[str, str]] = field(default_factory=list)
    #: serving-path evidence: one row per figure, one cell per service, and its sources / reasons
    evidence_services: list[str] = field(default_factory=list)
    serving_evidence: list[dict[str, Any]] = field(default_factory=list)
    evidence_unmeasured: list[str] = field(default_factory=list)  # the PDF's: figures no service has
    label_mismatches: list[dict[str, str]] = field(default_factory=list)
    #: telemetry data quality (audit.reporters.quality): page-1 notice, excluded samples, resets
    data_quality: dict[str, Any] = field(default_factory=dict)
    #: what of the case matches nothing in the data (audit.json ``fit``): page-1 notice
    misfits: dict[str, Any] = field(default_factory=dict)
    phases: list[dict[str, str]] = field(default_factory=list)  # prefill / decode per service (phases_view)
    excluded_samples: list[dict[str, str]] = field(default_factory=list)
    counter_resets: list[dict[str, str]] = field(default_factory=list)
    #: page 1 in plain words: why top-down differs from the total, the terms it uses; the appendix
    #: table of the metric names behind each figure (audit.reporters.wording)
    top_down_note: str = ""
    glossary: list[tuple[str, str]] = field(default_factory=list)
    measurements: list[dict[str, str]] = field(default_factory=list)
    #: how the shared cost was split over services, in one sentence
    allocation: str = ""
    #: the combined saving per part and for the plan; the sensitivity table (audit.reporters.plan_view)
    plan: list[dict[str, str]] = field(default_factory=list)
    plan_window: str = ""  # page 1: the monthly savings are scaled from the window (plan_view.window_line)
    sensitivity: list[dict[str, str]] = field(default_factory=list)
    #: the quarter as months (audit.reporters.months_view): None when audit.json has no months
    months: MonthsView | None = None
    #: the PDF's cuts (audit.reporters.print_view); empty in the HTML, which cuts nothing
    print_limits: dict[str, int] = field(default_factory=dict)

    @property
    def top_options(self) -> list[OptionView]:
        return [o for o in self.options if o.priced][:3]

    @property
    def unattributed(self) -> BucketView:
        return next(b for b in self.buckets if b.key == "unattributed")


# ---- building -----------------------------------------------------------------------------

def build_model(audit: dict) -> ReportModel:
    """Format every figure of an audit.json dict for display."""
    cur = audit.get("currency") or ""
    m = lambda v: money(v, cur)  # noqa: E731
    window = audit.get("window") or {}
    start, end = window.get("start"), window.get("end")
    outside = audit.get("outside_scope") or {}
    bridge = audit.get("bridge") or {}
    basis = audit.get("cost_basis") or ""
    return ReportModel(
        audit=audit,
        case=str(audit.get("case") or ""),
        window=f"{day(start)} to {day(end)} (end exclusive)",
        window_start=start or "—",
        window_end=end or "—",
        days=plain(window.get("days")),
        currency=cur,
        cost_basis=basis,
        cost_basis_words=wording.cost_basis_words(audit),
        total=m(audit.get("total")),
        invoice_total=m(audit.get("invoice_total")),
        outside_scope={
            "amount": m(outside.get("amount", "0.00")),
            "lines": number(outside.get("lines", 0)),
            "reason": outside.get("reason") or "",
            "by_account": [(a.get("account", ""), m(a.get("amount")))
                           for a in outside.get("by_account") or []],
        },
        bridge=bridge_rows(bridge, m),
        buckets=[_bucket(k, (audit.get("buckets") or {}).get(k) or {}, m, basis) for k in BUCKETS],
        classes=[{"class": c.get("class", ""), "label": wording.class_label(c.get("class")),
                  "gross": m(c.get("gross")), "tax": m(c.get("tax")),
                  "credits": m(c.get("credits")), "net": m(c.get("net")),
                  "lines": number(c.get("lines"))} for c in audit.get("classes") or []],
        services=[_service(n, s, m) for n, s in (audit.get("services") or {}).items()],
        phases=phases_view.phase_rows(audit, m),
        allocation=allocation_words(audit),
        reconciliation=_reconciliation(audit.get("reconciliation") or {}, m),
        coverage=_coverage(audit.get("coverage") or {}),
        gpu_split=[_gpu_split(g) for g in audit.get("gpu_split") or []],
        queue=[{"service": q.get("service") or "", "mean_waiting": number(q.get("mean_waiting")),
                "mean_running": number(q.get("mean_running"))} for q in audit.get("queue") or []],
        profiles=[_profile(p) for p in audit.get("profiles") or []],
        options=[_option(o, m) for o in audit.get("options") or []],
        plan=plan_view.plan_rows(audit, m), sensitivity=plan_view.sensitivity_rows(audit, m),
        plan_window=plan_view.window_line(audit), glossary=plan_view.page_one_glossary(audit),
        sources=[_source(s) for s in audit.get("sources") or []],
        notes=[str(n) for n in audit.get("notes") or []],
        findings_count=len(audit.get("findings") or []),
        findings=[evidence_view.finding_row(f, m) for f in audit.get("findings") or []],
        evidence_services=[str(n) for n in (audit.get("serving_evidence") or {})],
        serving_evidence=evidence_view.serving_evidence_rows(audit.get("serving_evidence") or {}),
        label_mismatches=[evidence_view.mismatch_row(x) for x in
                          ((audit.get("telemetry") or {}).get("label_mismatches") or [])],
        data_quality=quality.page_one(audit),
        misfits=quality.misfits(audit),
        excluded_samples=quality.excluded_rows(audit.get("telemetry") or {}),
        counter_resets=quality.reset_rows(audit.get("telemetry") or {}),
        top_down_note=wording.top_down_line(audit),
        measurements=wording.measurements(audit),
        months=months_view(audit),
    )


def _bucket(key: str, bucket: dict, m, basis: str = "") -> BucketView:
    parts = [PartView(
        name=p.get("name") or "", label=label(p.get("name")), service=p.get("service") or "shared",
        amount=m(p.get("amount")),
        gpu_hours=number(p.get("gpu_hours"), 2) if p.get("gpu_hours") is not None else "—",
        source=p.get("source") or "", reason=p.get("reason") or "")
        for p in bucket.get("parts") or []]
    sources = list(dict.fromkeys(p.source for p in parts if p.source))
    share = to_decimal(bucket.get("share")) or Decimal(0)
    width = max(Decimal(0), min(Decimal(100), share * 100)).quantize(Decimal("0.01"))
    return BucketView(key, BUCKET_LABELS[key], m(bucket.get("amount", "0.00")),
                      percent(bucket.get("share", "0")), f"{width}%", sources, parts,
                      wording.BUCKET_WORDS.get(key, ""), wording.bucket_sources(bucket.get("parts") or [], basis))


def _service(name: str, s: dict, m) -> ServiceView:
    by_bucket = s.get("by_bucket") or {}
    return ServiceView(
        name=str(name), requests=number(s.get("requests")),
        prompt_tokens=number(s.get("prompt_tokens")),
        generated_tokens=number(s.get("generated_tokens")),
        gpu_hours=number(s.get("gpu_hours"), 2) if s.get("gpu_hours") is not None else NOT_MEASURED,
        cost=m(s.get("cost")), shared_cost=m(s.get("shared_cost")),
        full_cost=m(_sum(s.get("cost"), s.get("shared_cost"))),
        unattributed=m(s.get("unattributed")),
        cost_per_request=m(s.get("cost_per_request")),
        cost_per_1k_requests=m(s.get("cost_per_1k_requests")),
        cost_per_1m_tokens=m(s.get("cost_per_1m_tokens")),
        reason=s.get("reason") or "",
        by_bucket=[(BUCKET_LABELS[k], m(by_bucket[k]) if by_bucket.get(k) is not None else "—")
                   for k in BUCKETS[:3]],
        traffic_source=s.get("traffic_source") or "—",
        per_unit=plain_number((s.get("requests_per_currency_unit") or {}).get("successful")),
        per_unit_all=plain_number((s.get("requests_per_currency_unit") or {}).get("all")),
        per_1k_all=m(s["cost_per_1k_all_requests"]) if s.get("cost_per_1k_all_requests") is not None else "—",
        counts=[(words, number(counts.get(key))) for key, words in COUNT_WORDS]
        + [("The denominator", "their successful requests" if counts.get("denominator")
            else s.get("traffic_source") or "—")]
        if (counts := s.get("request_counts")) else [],
        allocation_key=str(s.get("allocation_key") or ""),
    )


def _sum(*values: Any) -> Decimal | None:
    decimals = [to_decimal(v) for v in values]
    return None if any(d is None for d in decimals) else sum(decimals, Decimal(0))


def _reconciliation(r: dict, m) -> ReconciliationView:
    token = r.get("verdict") or "not_measured"
    title, words = VERDICTS.get(token, (label(token), ""))
    places = gap_places(r.get("gap"), r.get("tolerance"))
    return ReconciliationView(
        top_down=m(r.get("top_down")), bottom_up=m(r.get("bottom_up")),
        gap=percent(r.get("gap"), places[0]), tolerance=percent(r.get("tolerance"), places[1]),
        verdict=token, verdict_title=title, verdict_words=words, reason=r.get("reason") or "",
        covered_hours=number(r.get("covered_hours"), 2) if r.get("covered_hours") else "—",
        drivers=[{"name": d.get("name") or "", "subject": d.get("subject") or "",
                  "gap": percent(d.get("gap"), 2), "detail": d.get("detail") or ""}
                 for d in r.get("drivers") or []],
    )


def _hours(v: Any) -> str:
    return number(v, 2) if v is not None else NOT_MEASURED


def _gpu_split(g: dict) -> dict[str, str]:
    return {"service": g.get("service") or "", "gpus": number(g.get("gpus")),
            "paid": _hours(g.get("paid_gpu_hours")),
            "kernel_active": _hours(g.get("kernel_active_gpu_hours")),
            "in_flight_idle": _hours(g.get("in_flight_idle_gpu_hours")),
            "overhead": _hours(g.get("overhead_gpu_hours")),
            "busy": percent(g.get("mean_busy_fraction")),
            "gap_ratio": ratio(g.get("gap_ratio")), "busy_source": g.get("busy_source") or ""}


def _profile(p: dict) -> ProfileView:
    return ProfileView(
        name=p.get("name") or "", service=p.get("service") or "", trace=p.get("trace") or "",
        kernel_active_ms=number(p.get("kernel_active_ms"), 1),
        gpu_window_ms=number(p.get("gpu_window_ms"), 1), gap_ratio=ratio(p.get("gap_ratio")),
        gap_basis=(p.get("gap_basis") or "").replace("_", " "),
        kernel_seconds_per_request=number(p.get("kernel_seconds_per_request")),
        categories=[{"category": c.get("category") or "", "ms": number(c.get("ms"), 1),
                     "share": percent(c.get("share"))} for c in p.get("categories") or []],
        top_kernels=[{"name": _clip(k.get("name") or ""), "category": k.get("category") or "",
                      "count": number(k.get("count")), "ms": number(k.get("ms"), 1),
                      "share": percent(k.get("share"))} for k in p.get("top_kernels") or []],
        top_call_paths=[{"call_path": _tail(c.get("call_path") or ""),
                         "top_kernel": _clip(c.get("top_kernel") or "", 120),
                         "ms": number(float(c.get("gpu_us") or 0) / 1000, 2),
                         "share": percent(c.get("share_of_gpu_work"))} for c in p.get("top_call_paths") or []],
        idle_paths=idle_rows(p), gap_sensitivity=gap_sensitivity_line(p),
    )


def _tail(text: str, limit: int = 260) -> str:
    """A long call path shortened from the front: its innermost frames say the most."""
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def _clip(text: str, limit: int = 220) -> str:
    """Long kernel names shortened for display; audit.json keeps them whole."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _option(o: dict, m) -> OptionView:
    priced = o.get("status") == "priced" and o.get("monthly_saving") is not None
    unpriced = {f: Band(*plan_view.unpriced(o, f, m)) for f in ("saving", "cost", "payback")}
    return OptionView(
        rank=str(o["rank"]) if o.get("rank") is not None else "—",
        id=o.get("id") or "", title=o.get("title") or "", bucket=label(o.get("bucket")),
        acts_on=o.get("acts_on") or "", priced=priced,
        status=plan_view.status_words(o.get("status")),
        saving=band(o.get("monthly_saving"), m) if priced else unpriced["saving"],
        one_off=band(o.get("one_off_cost"), m) if priced else unpriced["cost"],
        payback=band(o.get("payback_months"), plan_view.months) if priced else unpriced["payback"],
        effort=band(o.get("effort_hours"), plain),
        assumptions=[str(a) for a in o.get("assumptions") or []],
        overridden=bool(o.get("overridden")), reason=o.get("reason") or "",
        evidence=[f"{e.get('service')}: {str(e.get('figure', '')).replace('_', ' ')} {_evidence_value(e.get('value'))}"
                  for e in o.get("evidence") or []],
        target=wording.option_target(o.get("acts_on") or ""),
        who=plan_view.who(o), marginal=plan_view.marginal(o, m),
        marginal_note=plan_view.marginal_note(o), break_even=plan_view.break_even(o, m),
        deferred=plan_view.deferred(o, m), committed=plan_view.committed_note(o),
        basis=BASIS_WORDS.get(str(o.get("basis") or ""), str(o.get("basis") or "")),
        basis_note=str(o.get("basis_note") or ""),
        inputs=[plan_view.input_line(i) for i in o.get("inputs") or []],
    )


#: an option's basis (audit.json options[].basis), in words
BASIS_WORDS = {"modelled": "Saving modelled on the measured data",
               "assumed": "Saving assumed: the catalogue's fraction of the part"}


def _evidence_value(value: Any) -> str:
    """An evidence figure (audit.json keeps a 6-place decimal string) to three significant digits."""
    try:
        return f"{float(value):.3g}"
    except (TypeError, ValueError):
        return str(value)


def _source(s: dict) -> dict:
    covered = s.get("covered") or {}
    start, end = covered.get("start"), covered.get("end")
    period = f"{day(start)} to {day(end)}" if start or end else "—"
    return {"name": s.get("name") or "", "kind": s.get("kind") or "", "format": s.get("format") or "",
            "path": s.get("path") or "", "rows": number(s.get("rows")) if s.get("rows") is not None else "—",
            "covered": period, "sha256": short_hash(s.get("sha256")), "status": s.get("status") or "",
            "reason": s.get("reason") or "",
            "lines": (f"{number(s['lines'])} invoice lines, summed into {number(s['summed_into'])}"
                      if s.get("lines") is not None and s.get("summed_into") is not None else ""),
            "notes": [f"row {n.get('row')}" + (f", {n['column']}" if n.get("column") else "") + f": {n.get('note')}"
                      for n in s.get("notes") or []],
            "notes_more": max(0, int(s.get("notes_total") or 0) - len(s.get("notes") or []))}
