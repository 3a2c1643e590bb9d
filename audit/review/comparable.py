"""Whether two audits may be bridged (METHOD §10): the same method version, cost basis, scope and
currency. Each difference is a reason in words; a difference in coverage is shown beside the
bridge, never a reason to refuse it.
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from audit.money import fmt
from audit.review.load import Audit, decimal_of

#: the members of the scope that define what an audit covers (declared services may differ: a new
#: service is a step of the bridge, not another scope)
SCOPE_KEYS = ("accounts", "tags", "services")
#: a change of coverage share above this many points is worth a sentence beside the bridge
COVERAGE_NOTE_POINTS = Decimal("0.01")


def method_of(audit: Audit) -> str | None:
    meta = audit.document.get("meta") or {}
    return meta.get("method")


def scope_of(audit: Audit) -> dict | None:
    """The scope members that must agree, None where the audit.json has no scope."""
    scope = audit.document.get("scope")
    if not isinstance(scope, dict):
        return None
    return {key: scope.get(key) for key in SCOPE_KEYS}


def reasons(earlier: Audit, later: Audit) -> list[str]:
    """Why the pair cannot be bridged, one sentence per difference ([] when it can)."""
    out = []
    m0, m1 = method_of(earlier), method_of(later)
    if m0 is None or m1 is None:
        missing = " and ".join(a.path for a, m in ((earlier, m0), (later, m1)) if m is None)
        out.append(f"no method version in {missing}: written before METHOD §10, so the effects cannot be "
                   "split (run the audit again with this costaudit)")
    elif m0 != m1:
        out.append(f"method versions differ: {m0} in {earlier.path}, {m1} in {later.path}")
    b0, b1 = earlier.get("cost_basis"), later.get("cost_basis")
    if b0 != b1:
        out.append(f"cost bases differ: {b0} in {earlier.path}, {b1} in {later.path} "
                   "(the same spend reads differently on each basis)")
    c0, c1 = earlier.get("currency"), later.get("currency")
    if c0 != c1:
        out.append(f"currencies differ: {c0} in {earlier.path}, {c1} in {later.path} (amounts are never added "
                   "across currencies)")
    out += order_reasons(earlier, later)
    s0, s1 = scope_of(earlier), scope_of(later)
    if s0 is None or s1 is None:
        if not any("no method version" in r for r in out):
            missing = " and ".join(a.path for a, s in ((earlier, s0), (later, s1)) if s is None)
            out.append(f"no scope in {missing}, so the scopes cannot be compared")
    else:
        for key in SCOPE_KEYS:
            if s0[key] != s1[key]:
                out.append(f"scope {key} differ: {_shown(s0[key])} in {earlier.path}, {_shown(s1[key])} in "
                           f"{later.path}")
    return out


def order_reasons(earlier: Audit, later: Audit) -> list[str]:
    """A sentence when the later audit's window starts before the earlier's: the audits were given
    newest first, and a bridge would call what appeared vanished ([] when in order, or unknown)."""
    w0, w1 = window_of(earlier), window_of(later)
    if w0 is None or w1 is None or w1[0] >= w0[0]:
        return []
    return [f"the audits are not oldest first: {later.path} covers {w1[0]:%Y-%m-%d} – {w1[1]:%Y-%m-%d}, before "
            f"{earlier.path} ({w0[0]:%Y-%m-%d} – {w0[1]:%Y-%m-%d}); give them in the order of their windows"]


def window_of(audit: Audit) -> tuple[datetime, datetime] | None:
    """The audit's window as datetimes, None where audit.json has none that reads."""
    window = audit.document.get("window")
    if not isinstance(window, dict):
        return None
    try:
        return datetime.fromisoformat(str(window.get("start"))), datetime.fromisoformat(str(window.get("end")))
    except ValueError:
        return None


def _shown(value) -> str:
    if value is None:
        return "not set (everything)"
    if isinstance(value, dict):
        return ", ".join(f"{k} = {v}" for k, v in sorted(value.items())) or "none"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def coverage_share(audit: Audit) -> Decimal | None:
    """Observed ÷ paid GPU-hours of the audit (None where no GPU-hour was paid)."""
    paid = decimal_of(audit, audit.get("coverage", "paid_gpu_hours"), "coverage.paid_gpu_hours")
    seen = decimal_of(audit, audit.get("coverage", "observed_gpu_hours"), "coverage.observed_gpu_hours")
    return seen / paid if paid else None


def coverage(earlier: Audit, later: Audit) -> dict:
    """The telemetry coverage of both audits, shown beside the bridge."""
    c0, c1 = coverage_share(earlier), coverage_share(later)
    change = c1 - c0 if c0 is not None and c1 is not None else None
    if change is None:
        note = "coverage not measured in " + " and ".join(
            a.path for a, c in ((earlier, c0), (later, c1)) if c is None) + " (no GPU-hour paid)"
    elif abs(change) >= COVERAGE_NOTE_POINTS:
        direction = "more" if change > 0 else "less"
        note = (f"telemetry covers {_pct(c0)} of the paid GPU-hours in the earlier audit and {_pct(c1)} in the "
                f"later: the later GPU split rests on {direction} measured time, and unattributed spend moves with it")
    else:
        note = f"telemetry coverage about the same ({_pct(c0)} → {_pct(c1)})"
    return {"from": fmt(c0, 6), "to": fmt(c1, 6), "change": fmt(change, 6), "note": note}


def _pct(value: Decimal | None) -> str:
    return "n/a" if value is None else f"{fmt(value * 100, 1)} %"
