"""Realised savings of the options that shipped between two audits (METHOD §10).

For a shipped option acting on part P ("bucket.name") of service s, from the later audit's
``services[s].daily``: x_before, x_after = P's GPU-seconds (its cost where the part has no
seconds) per request over the days before / from the ship date; p_after = P's cost ÷ its
GPU-seconds from the ship date; Q_after = the requests from the ship date × 30.4375 ÷ those days.
Realised monthly saving = (x_before − x_after) · p_after · Q_after: price changes and volume are
not credited to the option. Where the earlier audit priced the option on s₀ alone (committed
capacity with no known end, METHOD §7), the committed share of that saving is shown apart, not
saved until the commitment ends, and the rest is set against the projection (:func:`on_committed`).
A day the ship moment falls inside (a ship time that is not midnight
UTC) is left out of both sides. A part the service's daily figures never hold was not measured
(nothing it could save was there), never a saving of 0.00. The projection is the earlier audit's
option with that id: ``by_service[s]`` where it has one, else (an option projected for no service
in particular) ``monthly_saving``; an option projected per service but not for s has no projection
for s. Ahead (above its high), on track
(low to high) or behind (below its low). No verdict is drawn where the projection was made on other
terms than the realised saving: audits that cannot be bridged (another cost basis, scope, currency
or method), or an option shipped before the earlier audit's window ended (its projection already
saw the change); the realised saving is still measured.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

from audit.money import cents, fmt, largest_remainder
from audit.review.comparable import window_of
from audit.review.effects import to_decimal
from audit.review.load import Audit, fraction_of
from audit.review.words import count, percent

MONTH_DAYS = Fraction("30.4375")
DAY = timedelta(days=1)


@dataclass
class Side:
    """The part's daily figures summed over one side of the ship date."""

    days: int = 0
    requests: Fraction = Fraction(0)
    quantity: Fraction = Fraction(0)
    cost: Fraction = Fraction(0)

    def per_request(self) -> Fraction | None:
        return self.quantity / self.requests if self.requests else None


def ship_moment(text: str) -> datetime | None:
    """The ship date (ISO date or datetime, UTC) as an aware datetime, None if it is not one."""
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), datetime.min.time(), timezone.utc)
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def realised(earlier: Audit, later: Audit, why: list[str]) -> list[dict]:
    """One entry per ``shipped`` option of the later audit; ``why``: the reasons the pair cannot be
    bridged (:func:`audit.review.comparable.reasons`), which leave every verdict unmeasured."""
    shipped = later.get("shipped", default=None) or []
    return [_one(earlier, later, entry if isinstance(entry, dict) else {}, why)
            for entry in shipped]


def _options(audit: Audit) -> dict[str, dict]:
    return {str(o.get("id")): o for o in audit.get("options", default=None) or [] if isinstance(o, dict)}


def projection(earlier: Audit, option: dict | None, service: str) -> tuple[dict | None, str | None]:
    """The projection (low / expected / high) and where it came from."""
    if option is None:
        return None, None
    by_service = option.get("by_service") or {}
    if isinstance(by_service, dict) and by_service.get(service):
        return dict(by_service[service]), f"{earlier.path}: options[{option.get('id')}].by_service.{service}"
    if isinstance(by_service, dict) and by_service:  # projected per service, and not for this one
        return None, None
    if option.get("monthly_saving"):
        return dict(option["monthly_saving"]), f"{earlier.path}: options[{option.get('id')}].monthly_saving"
    return None, None


def _one(earlier: Audit, later: Audit, entry: dict, why: list[str]) -> dict:
    option_id, service = str(entry.get("option")), str(entry.get("service"))
    proposal = _options(earlier).get(option_id)
    part = (proposal or _options(later).get(option_id) or {}).get("acts_on")
    projected, projected_from = projection(earlier, proposal, service)
    evidence: dict[str, Any] = {}
    title = (proposal or _options(later).get(option_id) or {}).get("title")
    out: dict[str, Any] = {"option": option_id, "title": title, "service": service, "shipped": entry.get("date"),
           "part": part,
           "projection": projected, "realised": None, "released_on_committed": None, "verdict": "not measured",
           "evidence": evidence, "note": None}
    if entry.get("note"):
        evidence["shipped_note"] = entry["note"]
    problem = _unmeasurable(earlier, later, entry, proposal, part, service)
    if problem:
        out["note"] = problem
        return out
    measured = measure(later, service, str(part), ship_moment(str(entry.get("date"))))  # type: ignore[arg-type]
    if isinstance(measured, str):
        out["note"] = measured
        return out
    amount, figures, note = measured
    text, committed = str(cents(to_decimal(amount))), on_committed(earlier, proposal, amount)
    if committed is not None:
        text, out["released_on_committed"] = committed.rest, committed.held
        note = "; ".join(n for n in (committed.note, note) if n)
        evidence.update(committed.evidence)
    out["realised"] = text
    evidence.update(figures)
    if projected_from:
        evidence["projection_source"] = projected_from
    out["verdict"], verdict_note = verdict(earlier, text, projected, option_id, service)
    off_terms = no_verdict(earlier, str(entry.get("date")), why) if projected else None
    if off_terms:
        out["verdict"], verdict_note = "not measured", off_terms
    moved = price_moved(earlier, service, str(part), figures) if out["verdict"] in ("ahead", "behind") else None
    out["note"] = "; ".join(n for n in (note, verdict_note, moved) if n) or None
    return out


@dataclass
class Committed:
    """A realised saving split by the earlier audit's committed share (:func:`on_committed`)."""

    rest: str          # set against the s₀ projection
    held: str          # released on committed capacity: not saved until the commitment ends
    note: str
    evidence: dict


def on_committed(earlier: Audit, proposal: dict | None, amount: Fraction) -> Committed | None:
    """Where the earlier audit priced the option on s₀ alone (part of its saving lay on committed
    capacity with no known end, METHOD §7: ``deferred.committed_share`` set, ``months_after_window``
    null), the realised saving split like its projection: the rest, set against the s₀ projection,
    and the GPU time released on committed capacity, not saved until the commitment ends; the two
    add up to the whole realised saving to the cent. None where the projection holds the whole
    saving (no committed share, or s₁ priced from a known end). The exact saving is split once and
    rounded by largest remainder (rounding the rest first and taking the held part as the whole less
    it put the cent on the wrong side: 15392.15 and 25014.71 for 15392.1445 and 25014.7148)."""
    deferred = (proposal or {}).get("deferred") or {}
    if not deferred.get("committed_share") or deferred.get("months_after_window") is not None:
        return None
    where = f"options[{proposal.get('id')}].deferred.committed_share"  # type: ignore[union-attr]
    share = fraction_of(earlier, deferred["committed_share"], where)
    whole = cents(to_decimal(amount))
    split = largest_remainder({"rest": to_decimal(amount * (1 - share)), "held": to_decimal(amount * share)}, whole)
    rest, held = split["rest"], split["held"]
    note = (f"released on committed capacity: not saved until the commitment ends ({held:,} a month, "
            f"{to_decimal(share) * 100:.1f} % of the realised {whole:,}, the earlier audit's committed share); "
            f"the rest, {rest:,}, is set against the projection, which is on the saving available now (s₀)")
    return Committed(str(rest), str(held), note, {
        "realised_whole": str(whole), "committed_share": f"{deferred['committed_share']} ({earlier.path}: {where})"})


def _unmeasurable(earlier: Audit, later: Audit, entry: dict, proposal, part, service: str) -> str | None:
    if ship_moment(str(entry.get("date"))) is None:
        return f"shipped date {entry.get('date')!r} is not an ISO date or datetime"
    if part is None:
        ids = ", ".join(sorted(_options(earlier))) or "none"
        return (f"option {entry.get('option')} is in neither audit, so the part it acts on is not known "
                f"(the earlier audit's options: {ids})")
    entry_s = later.get("services", service, default=None)
    if not isinstance(entry_s, dict):
        return f"service {service} is not in the later audit ({later.path})"
    if not entry_s.get("daily"):
        return f"the later audit has no daily figures for {service} (services.{service}.daily)"
    return None


def measure(later: Audit, service: str, part: str, moment: datetime):
    """(realised exact, evidence, note) from the later audit's daily figures, or the reason in words."""
    days = later.get("services", service, "daily")
    held = sorted({name for day in days for name in (day.get("parts") or {})})
    if part not in held:
        return (f"{service} had no {part} in the later audit (services.{service}.daily[].parts holds "
                f"{', '.join(held) or 'no part'}): nothing it could save was measured")
    before, after, straddled = Side(), Side(), 0
    has_seconds = _has_seconds(days, part)
    for i, day in enumerate(days):
        where = f"services.{service}.daily[{i}]"
        start = datetime.combine(date.fromisoformat(str(day.get("day"))), datetime.min.time(), timezone.utc)
        side = before if start + DAY <= moment else after if start >= moment else None
        if side is None:
            straddled += 1
            continue
        figures = (day.get("parts") or {}).get(part) or {}
        side.days += 1
        if day.get("requests") is not None:
            side.requests += fraction_of(later, day.get("requests"), where + ".requests")
        cost = fraction_of(later, figures.get("cost", "0"), f"{where}.parts.{part}.cost")
        side.cost += cost
        side.quantity += (fraction_of(later, figures.get("gpu_seconds") or "0", f"{where}.parts.{part}.gpu_seconds")
                          if has_seconds else cost)
    if not before.days or not after.days:
        which = "before" if not before.days else "from"
        return f"no day of the later audit's window lies {which} the ship date: nothing to compare"
    x0, x1 = before.per_request(), after.per_request()
    if x0 is None or x1 is None:
        return "no requests counted " + ("before" if x0 is None else "after") + " the ship date: no quantity per request"
    price, price_note = _price(before, after, has_seconds)
    if price is None:
        return f"part {part} has no GPU-seconds before or after the ship date: no unit price"
    q_month = after.requests * MONTH_DAYS / after.days
    amount = (x0 - x1) * price * q_month
    evidence = _evidence(later, service, part, before, after, x0, x1, price, q_month, has_seconds, straddled)
    notes = [n for n in (price_note, _volume_note(before, after, x0, x1)) if n]
    return amount, evidence, "; ".join(notes) or None


def _has_seconds(days: list, part: str) -> bool:
    return any(((d.get("parts") or {}).get(part) or {}).get("gpu_seconds") is not None for d in days)


def _price(before: Side, after: Side, has_seconds: bool) -> tuple[Fraction | None, str | None]:
    if not has_seconds:
        return Fraction(1), None
    if after.quantity:
        return after.cost / after.quantity, None
    if before.quantity:
        return before.cost / before.quantity, "the part has no GPU-seconds after the ship date: priced at its unit price before"
    return None, None


def _volume_note(before: Side, after: Side, x0: Fraction, x1: Fraction) -> str | None:
    daily0, daily1 = before.quantity / before.days, after.quantity / after.days
    if daily0 and daily1 > daily0 and x1 < x0:
        return (f"the part grew with demand ({percent((daily1 - daily0) / daily0)} a day), "
                "the saving is measured per request")
    return None


def _evidence(later: Audit, service: str, part: str, before: Side, after: Side, x0, x1, price, q_month,
              has_seconds: bool, straddled: int) -> dict:
    measure_word = "gpu_seconds" if has_seconds else "cost"
    evidence = {
        "measure": measure_word, "days_before": before.days, "days_after": after.days,
        "requests_before": _whole(before.requests), "requests_after": _whole(after.requests),
        "quantity_before": fmt(to_decimal(before.quantity), 6), "quantity_after": fmt(to_decimal(after.quantity), 6),
        "cost_after": fmt(to_decimal(after.cost), 6),
        "per_request_before": fmt(to_decimal(x0), 12), "per_request_after": fmt(to_decimal(x1), 12),
        "unit_price_after": fmt(to_decimal(price), 12), "monthly_requests_after": fmt(to_decimal(q_month), 2),
        "requests_per_day": f"{count(int(before.requests / before.days))} → {count(int(after.requests / after.days))}",
        "source": f"{later.path}: services.{service}.daily[].parts[{part}] ({measure_word}) and daily requests",
    }
    if straddled:
        evidence["days_left_out"] = straddled
    return evidence


def price_moved(earlier: Audit, service: str, part: str, figures: dict) -> str | None:
    """Where the part's unit price moved since the earlier audit (its projection was priced there),
    the move in words; None where the earlier audit has no daily figures for the part, or it held."""
    if figures.get("measure") != "gpu_seconds":
        return None
    days = earlier.get("services", service, "daily", default=None) or []
    cost = seconds = Fraction(0)
    for i, day in enumerate(days):
        got = (day.get("parts") or {}).get(part) or {}
        where = f"services.{service}.daily[{i}].parts.{part}"
        cost += fraction_of(earlier, got.get("cost") or "0", where + ".cost")
        seconds += fraction_of(earlier, got.get("gpu_seconds") or "0", where + ".gpu_seconds")
    if not seconds or not cost:
        return None
    before = cost / seconds
    after = Fraction(figures["unit_price_after"])
    change = (after - before) / before
    if abs(change) < Fraction(1, 1000):
        return None
    return (f"the part's unit price moved {percent(change)} since the earlier audit, whose projection is at its "
            "own price: the realised saving is at the later one")


def _whole(value: Fraction) -> str | None:
    return str(value.numerator) if value.denominator == 1 else fmt(to_decimal(value), 6)


def no_verdict(earlier: Audit, shipped: str, why: list[str]) -> str | None:
    """Why the realised saving cannot be set against the earlier projection, or None."""
    if why:
        return f"no verdict: the audits cannot be compared ({why[0]}), so the projection is on other terms"
    window, moment = window_of(earlier), ship_moment(shipped)
    if window is None or moment is None:
        return None
    end = window[1] if window[1].tzinfo else window[1].replace(tzinfo=timezone.utc)
    if moment < end:
        return (f"no verdict: shipped {shipped}, before the earlier audit's window ended "
                f"({window[0]:%Y-%m-%d} – {window[1]:%Y-%m-%d}): its projection already saw the change")
    return None


def verdict(earlier: Audit, realised_text: str, projected: dict | None, option_id: str,
            service: str = "") -> tuple[str, str | None]:
    """ahead / on track / behind against the projection, or not measured with the reason."""
    if not projected:
        return "not measured", (f"no projection: the earlier audit ({earlier.path}) has no priced option {option_id}"
                                + (f" for service {service}" if service else ""))
    low = fraction_of(earlier, projected.get("low"), f"options[{option_id}].low")
    high = fraction_of(earlier, projected.get("high"), f"options[{option_id}].high")
    value = Fraction(realised_text)
    if value > high:
        return "ahead", None
    if value >= low:
        return "on track", None
    return "behind", None
