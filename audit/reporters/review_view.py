"""ReviewModel: a review.json document (METHOD §10), pre-formatted for the review report.

The template (``templates/review.html.j2``) only lays this out; every figure is formatted here
from the exact decimal strings of review.json, never through float (the bridge chart draws from
the same strings, :mod:`audit.reporters.review_chart`). Page 1 is the headline pair (the last
pair of audits): the two audits, the change, the bridge with the coverage beside it and the
realised savings; or, when the pair is not comparable, the reasons and no bridge. Every pair then
has its detail sections. An unmeasured figure (``None``) reads "not measured".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from audit.reporters.formatting import NOT_MEASURED, basis_words, day, label, money, number, percent, to_decimal

EFFECTS = ("volume", "price", "efficiency", "overhead")
EFFECT_WORDS = {
    "volume": "more or fewer requests at the earlier unit cost",
    "price": "the unit prices of the components (per GPU-second, per line) at the later demand",
    "efficiency": "busy GPU-seconds per request, at the later GPU price",
    "overhead": "idle GPU-seconds and other components per request, at the later prices",
}
KIND_WORDS = {"volume": "Volume", "price": "Price", "efficiency": "Efficiency", "overhead": "Overhead",
              "service": "New or vanished service", "unattributed": "Unattributed",
              "unallocated": "Unallocated shared cost", "rounding": "Rounding"}
STATUS_WORDS = {"both": "", "new": "new", "vanished": "vanished", "no_requests": "no requests"}
VERDICT_CLASSES = {"ahead": "ahead", "on track": "on-track", "behind": "behind", "not measured": "unmeasured"}


@dataclass(frozen=True)
class AuditView:
    case: str
    window: str
    basis: str
    basis_words: str
    method: str
    currency: str
    total: str
    coverage: str
    path: str


@dataclass(frozen=True)
class StepView:
    kind: str
    kind_words: str
    label: str
    service: str
    amount: str
    negative: bool
    positive: bool = False


@dataclass(frozen=True)
class RealisedView:
    option: str
    service: str
    shipped: str
    part: str
    low: str
    expected: str
    high: str
    realised: str
    verdict: str
    verdict_class: str
    sentence: str
    note: str
    evidence: list[tuple[str, str]]  # (review.json key, its value for display)


@dataclass(frozen=True)
class PairView:
    title: str
    earlier: AuditView
    later: AuditView
    comparable: bool
    reasons: list[str]
    change: str
    change_pct: str
    steps: list[StepView]
    bridge: dict | None = field(repr=False)
    services: list[dict[str, Any]]
    buckets: list[dict[str, str]]
    coverage: dict[str, str]
    threshold: str
    appeared: list[dict[str, str]]
    vanished: list[dict[str, str]]
    realised: list[RealisedView]
    #: the steps that moved most money, largest first (page 1 names them in words)
    largest: list[StepView] = field(default_factory=list)


@dataclass(frozen=True)
class ReviewModel:
    document: dict = field(repr=False)
    title: str
    currency: str
    audits: list[AuditView]
    comparable: bool
    reasons: list[str]
    headline: PairView | None
    pairs: list[PairView]
    notes: list[str]
    tool: str

    @property
    def window(self) -> str:
        """The span the audits cover: the first one's start to the last one's end."""
        if not self.audits:
            return ""
        return f"{self.audits[0].window.split(' – ')[0]} – {self.audits[-1].window.split(' – ')[-1]}"


def build_review_model(document: dict) -> ReviewModel:
    """Format every figure of a review.json dict for display."""
    audits_raw = list(document.get("audits") or [])
    currency = next((str(a.get("currency")) for a in reversed(audits_raw) if a.get("currency")), "")
    audits = [_audit(a, currency) for a in audits_raw]
    pairs = [_pair(p, audits_raw, currency) for p in document.get("pairs") or []]
    headline = pairs[-1] if pairs else None
    reasons = [str(r) for r in document.get("reasons") or []]
    if headline is not None:
        reasons = list(dict.fromkeys(reasons + headline.reasons))
    comparable = bool(document.get("comparable")) and (headline is None or headline.comparable)
    title = " → ".join(a.case for a in audits) or "no audits"
    meta = document.get("meta") or {}
    tool = " ".join(str(meta.get(k)) for k in ("tool", "version") if meta.get(k))
    return ReviewModel(document, title, currency, audits, comparable, reasons, headline, pairs,
                       [str(n) for n in document.get("notes") or []], tool)


def _audit(a: dict, cur: str) -> AuditView:
    window = a.get("window") or {}
    basis = str(a.get("cost_basis") or "")
    return AuditView(case=str(a.get("case") or ""), window=f"{day(window.get('start'))} – {day(window.get('end'))}",
                     basis=basis, basis_words=basis_words(basis, a.get("billing_formats") or ("focus",)),
                     method=str(a.get("method") or "—"),
                     currency=str(a.get("currency") or cur), total=money(a.get("total"), str(a.get("currency") or cur)),
                     coverage=percent(a.get("coverage_share")), path=str(a.get("path") or ""))


def _pair(p: dict, audits: list[dict], cur: str) -> PairView:
    earlier_raw, later_raw = _at(audits, p.get("from")), _at(audits, p.get("to"))
    earlier, later = _audit(earlier_raw, cur), _audit(later_raw, cur)
    bridge = p.get("bridge") if p.get("comparable") else None
    start = to_decimal((bridge or {}).get("from_total", earlier_raw.get("total")))
    end = to_decimal((bridge or {}).get("to_total", later_raw.get("total")))
    change = end - start if start is not None and end is not None else None
    pct = percent(change / start) if change is not None and start else NOT_MEASURED
    if change is not None and change > 0:
        pct = "+" + pct
    lines = p.get("lines") or {}
    raw = [s for s in (bridge or {}).get("steps") or [] if to_decimal(s.get("amount"))]
    raw.sort(key=lambda s: -abs(to_decimal(s.get("amount")) or Decimal(0)))
    return PairView(
        title=f"{earlier.case} → {later.case}", earlier=earlier, later=later,
        comparable=bool(p.get("comparable")), reasons=[str(r) for r in p.get("reasons") or []],
        change=signed(change, cur), change_pct=pct, steps=[_step(s, cur) for s in (bridge or {}).get("steps") or []],
        bridge=bridge, services=[_service(s, cur) for s in p.get("services") or []],
        buckets=[_bucket(b, cur) for b in p.get("buckets") or []], coverage=_coverage(p.get("coverage") or {}),
        threshold=money(lines.get("threshold"), cur) if lines.get("threshold") is not None else "",
        appeared=[_line(x, cur) for x in lines.get("appeared") or []],
        vanished=[_line(x, cur) for x in lines.get("vanished") or []],
        realised=[_realised(r, cur) for r in p.get("realised") or []], largest=[_step(s, cur) for s in raw[:3]])


def _at(items: list[dict], index: Any) -> dict:
    return items[index] if isinstance(index, int) and 0 <= index < len(items) else {}


def signed(value: Any, cur: str) -> str:
    """Money with its sign always shown: +$1,234.00, −$56.00 (a true minus sign), $0.00."""
    d = to_decimal(value)
    if d is None:
        return money(value, cur)
    text = money(abs(d), cur) if d.is_finite() else str(value)
    return ("+" + text) if d > 0 else ("−" + text) if d < 0 else text


def _step(s: dict, cur: str) -> StepView:
    kind = str(s.get("kind") or "")
    service = str(s.get("service") or "")
    text = str(s.get("label") or (f"{service}: {KIND_WORDS.get(kind, kind)}" if service else KIND_WORDS.get(kind, kind)))
    amount = to_decimal(s.get("amount"))
    return StepView(kind, KIND_WORDS.get(kind, label(kind)), text, service, signed(s.get("amount"), cur),
                    amount is not None and amount < 0, amount is not None and amount > 0)


def _service(s: dict, cur: str) -> dict[str, Any]:
    effects = s.get("effects") or {}
    return {
        "service": str(s.get("service") or ""), "status": STATUS_WORDS.get(str(s.get("status")), str(s.get("status") or "")),
        "cost_from": money(s.get("cost_from"), cur), "cost_to": money(s.get("cost_to"), cur),
        "change": signed(s.get("change"), cur),
        "effects": [signed(effects.get(k), cur) if effects else "—" for k in EFFECTS],
        "requests_from": _count(s.get("requests_from")), "requests_to": _count(s.get("requests_to")),
        "unit_from": money(s.get("unit_cost_from"), cur) if s.get("unit_cost_from") is not None else "—",
        "unit_to": money(s.get("unit_cost_to"), cur) if s.get("unit_cost_to") is not None else "—",
        "driver": str(s.get("driver") or ""),
    }


def _count(value: Any) -> str:
    d = to_decimal(value)
    return "—" if d is None else f"{d:,.0f}"


def _bucket(b: dict, cur: str) -> dict[str, str]:
    share_from, share_to = to_decimal(b.get("share_from")), to_decimal(b.get("share_to"))
    points = ""
    if share_from is not None and share_to is not None:
        delta = ((share_to - share_from) * 100).quantize(Decimal("0.1"))
        points = ("+" if delta > 0 else "−" if delta < 0 else "") + f"{abs(delta)} pts"
    return {"bucket": label(str(b.get("bucket") or "")), "key": str(b.get("bucket") or ""),
            "amount_from": money(b.get("amount_from"), cur), "amount_to": money(b.get("amount_to"), cur),
            "share_from": percent(b.get("share_from")), "share_to": percent(b.get("share_to")), "points": points,
            "change": signed(b.get("change"), cur), "driver": str(b.get("driver") or "")}


def _coverage(c: dict) -> dict[str, str]:
    change = to_decimal(c.get("change"))
    points = ""
    if change is not None:
        delta = (change * 100).quantize(Decimal("0.1"))
        points = ("+" if delta > 0 else "−" if delta < 0 else "") + f"{abs(delta)} pts"
    return {"from": percent(c.get("from")), "to": percent(c.get("to")), "change": points or NOT_MEASURED,
            "note": str(c.get("note") or "")}


LINE_KINDS = {"service": "Service", "sku": "SKU", "account": "Account"}


def _line(x: dict, cur: str) -> dict[str, str]:
    return {"kind": LINE_KINDS.get(str(x.get("kind")), str(x.get("kind") or "")), "id": str(x.get("id") or ""),
            "amount": money(x.get("amount"), cur)}


def _realised(r: dict, cur: str) -> RealisedView:
    projection = r.get("projection") or {}
    verdict = str(r.get("verdict") or "not measured")
    realised = money(r.get("realised"), cur)
    option, service = str(r.get("title") or r.get("option") or ""), str(r.get("service") or "")
    held = r.get("released_on_committed")
    apart = (f" ({money(held, cur)} more released on committed capacity, not saved until the commitment ends)"
             if held is not None else "")
    if projection and r.get("realised") is not None:
        sentence = (f"{option} on {service}: {realised} a month realised{apart} against "
                    f"{money(projection.get('expected'), cur)} expected ({money(projection.get('low'), cur)} – "
                    f"{money(projection.get('high'), cur)}): {verdict}.")
    else:
        sentence = f"{option} on {service}: {verdict}."
    return RealisedView(option=option, service=service, shipped=day(str(r.get("shipped") or "") or None),
                        part=str(r.get("part") or ""),
                        low=money(projection.get("low"), cur) if projection else NOT_MEASURED,
                        expected=money(projection.get("expected"), cur) if projection else NOT_MEASURED,
                        high=money(projection.get("high"), cur) if projection else NOT_MEASURED,
                        realised=realised, verdict=verdict, verdict_class=VERDICT_CLASSES.get(verdict, "unmeasured"),
                        sentence=sentence, note=str(r.get("note") or ""),
                        evidence=[(k, evidence_value(v)) for k, v in in_reading_order(evidence_rows(r.get("evidence")))])


#: evidence keys in the order the realised saving is read (METHOD §10): what shipped, the periods, the
#: demand, the part's quantity and per request before / after, its later price, the monthly demand,
#: then the sources; keys not named here follow in the document's order
READING_ORDER = ("shipped_note", "measure", "days_before", "days_after", "requests_before", "requests_after",
                 "requests_per_day", "quantity_before", "quantity_after", "per_request_before", "per_request_after",
                 "cost_after", "unit_price_after", "monthly_requests_after", "realised_whole", "committed_share",
                 "source", "projection_source")


def in_reading_order(rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    rank = {key: i for i, key in enumerate(READING_ORDER)}
    return sorted(rows, key=lambda kv: rank.get(kv[0], len(rank)))


PLAIN_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def evidence_value(text: str) -> str:
    """An evidence value for display: a bare number with thousands separators, its decimals kept
    (``43293028.490743`` → ``43,293,028.490743``); anything else as it is."""
    head, space, rest = text.partition(" ")
    if PLAIN_NUMBER.fullmatch(head):
        return number(head) + space + rest
    return text


def evidence_words(key: str) -> str:
    """``per_request_before`` → ``Per request before``; dotted names keep their last part's words."""
    words = key.rsplit(".", 1)[-1].replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def evidence_rows(evidence: Any, prefix: str = "") -> list[tuple[str, str]]:
    """review.json ``evidence`` as (what, value and source) rows: nested tables flattened with
    dotted names; a {value, source} pair reads "value (source)"."""
    if not isinstance(evidence, dict):
        return [] if evidence is None else [(prefix or "evidence", str(evidence))]
    rows: list[tuple[str, str]] = []
    for key, value in evidence.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and "value" in value:
            source = value.get("source")
            rows.append((name, str(value.get("value")) + (f" ({source})" if source else "")))
        elif isinstance(value, dict):
            rows += evidence_rows(value, name)
        elif isinstance(value, list):
            rows.append((name, "; ".join(str(v) for v in value)))
        else:
            rows.append((name, "—" if value is None else str(value)))
    return rows
