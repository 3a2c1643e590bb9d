"""Display formatting of audit.json figures, shared by the view model and the charts.

Money, percentages, counts and plain quantities are formatted from the exact decimal strings of
audit.json (never through float); an unmeasured figure (``None``) reads "not measured". The labels
of buckets, parts, verdicts and cost bases live here too, so both :mod:`audit.reporters.view` and
:mod:`audit.reporters.charts` name things the same way without importing each other.
"""

from __future__ import annotations

import unicodedata
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Iterable

from audit.billing_words import basis_fields

NOT_MEASURED = "not measured"
SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}
BUCKET_LABELS = {
    "model_compute": "Model compute",
    "serving_path": "Serving path",
    "platform_overhead": "Platform overhead",
    "unattributed": "Unattributed",
}
PART_LABELS = {
    "kernel_active": "Kernel-active time",
    "in_flight_idle": "In-flight idle",
    "serving_compute": "Serving compute (CPU)",
    "serving_network": "Serving network",
    "capacity_above_demand": "Capacity above demand",
    "idle_not_separated": "Idle, serving share not separated",
    "unallocated": "Unallocated GPUs",
    "commitment_unused": "Unused commitment",
    "unmatched_line": "Unmatched invoice lines",
    "no_activity_sample": "No kernel-activity sample",
    "no_valid_activity_sample": "No valid kernel-activity sample",
    "gpu_not_in_telemetry": "GPU not in telemetry",
    "gpu_time_not_billed": "GPU time not billed",
    "allocation_unknown": "Allocation unknown",
    "no_kernel_profile": "No kernel profile",
    "undeclared_workload": "Undeclared workload",
}
VERDICTS = {
    "reconciles": ("Reconciles", "top-down and bottom-up estimates agree within the tolerance"),
    "does_not_reconcile": ("Does not reconcile", "the gap exceeds the tolerance; see its drivers"),
    "not_measured": ("Not measured", "one side of the reconciliation could not be measured"),
}
#: what each cost basis means; :func:`basis_words` adds the columns it was read from
BASIS_MEANING = {
    "effective": "effective: what the usage cost once commitments are spread over the hours they cover",
    "billed": "billed: as invoiced, commitments charged when bought",
    "list": "list: at the provider's public prices, before any discount",
    "contracted": "contracted: at the negotiated prices, before commitments",
}


def basis_words(basis: str, formats: Iterable[str] = ("focus",)) -> str:
    """A cost basis in words with the columns the billing formats read it from: "billed: as invoiced,
    commitments charged when bought (CUR line_item_unblended_cost, …)"; an unknown basis as given."""
    if basis not in BASIS_MEANING:
        return basis
    return f"{BASIS_MEANING[basis]} ({basis_fields(basis, formats)})"


#: the Unicode categories a data string may not show raw: controls (newline, NUL), formats (the bidi
#: overrides U+202A–U+202E and isolates U+2066–U+2069, the marks U+200E/F and U+061C, zero-widths),
#: lone surrogates, and the line and paragraph separators
HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: the mantissas of a "nice" axis step: 1, 2, 2.5 or 5 × 10^k
NICE_STEPS = (Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5))


def shown(value: Any) -> Any:
    """A string as a report may show it: each control or format character written as its escape
    (U+202E as the six characters ``\\u202e``, a newline as ``\\n``), as audit/misfit.py ``text``
    writes the fit messages, so a name from the data cannot reverse or hide the text around it.
    Backslashes and quotes stay as they are (a regex reads as written). A value that is not a
    string (a number, None) and HTML a template has already printed (jinja2's Markup, whose data
    went through here when it was printed; its own newlines are layout) are returned as they are."""
    if not isinstance(value, str) or hasattr(value, "__html__") or value.isprintable():
        return value
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in HIDDEN else c for c in value)


def to_decimal(value: Any) -> Decimal | None:
    """The exact decimal of an audit.json figure; None for None, booleans and non-numbers."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def money(value: Any, currency: str) -> str:
    """'123456.78' → '$123,456.78'; keeps more than two places when the string has them."""
    d = to_decimal(value)
    if d is None:
        return NOT_MEASURED if value is None else str(value)
    if not d.is_finite():
        return str(value)
    places = max(2, -d.as_tuple().exponent)
    body = f"{abs(d):,.{places}f}"
    symbol = SYMBOLS.get(currency)
    body = f"{symbol}{body}" if symbol else f"{currency} {body}"
    return f"-{body}" if d < 0 else body


def plain_number(value: Any) -> str:
    """A decimal string with thousands separators, its places kept ("6491.809" → "6,491.809")."""
    if value is None:
        return "—"
    whole, _, places = str(value).partition(".")
    return f"{int(whole):,}" + (f".{places}" if places else "")


def percent(value: Any, places: int = 1) -> str:
    """A fraction as a percentage: '0.412345' → '41.2 %'."""
    d = to_decimal(value)
    if d is None or not d.is_finite():
        return NOT_MEASURED if value is None else str(value)
    pct = (d * 100).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)
    if pct == 0:
        pct = abs(pct)  # -0.000008 reads 0.00 %, not -0.00 %
    return f"{pct:,.{places}f} %"


def gap_places(gap: Any, tolerance: Any, most: int = 6) -> tuple[int, int]:
    """Decimal places of a reconciliation's gap and tolerance as percentages: 2 and 1, more where fewer
    would show a tolerance of 0 or a gap that reads on the wrong side of it (a tolerance of 0.00001
    beside a gap of -0.000017 read "Gap 0.00 %, tolerance 0.0 %: the gap exceeds the tolerance")."""
    g, t = to_decimal(gap), to_decimal(tolerance)
    if g is None or t is None or not (g.is_finite() and t.is_finite()):
        return 2, 1

    def shown(d: Decimal, places: int) -> Decimal:
        return (abs(d) * 100).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)

    for places in range(2, most + 1):
        if (t == 0 or shown(t, places) != 0) and (abs(g) > t) == (shown(g, places) > shown(t, places)):
            return (2, 1) if places == 2 and shown(t, 1) == shown(t, 2) else (places, places)
    return most, most


def number(value: Any, places: int | None = None) -> str:
    """Counts and quantities with thousands separators; None → 'not measured'."""
    d = to_decimal(value)
    if d is None or not d.is_finite():
        return NOT_MEASURED if value is None else str(value)
    if places is None:
        places = max(0, -d.as_tuple().exponent)
    else:
        d = d.quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)
    return f"{d:,.{places}f}"


def plain(value: Any) -> str:
    """A quantity without trailing zeros: '30.00' → '30', '12.50' → '12.5'."""
    d = to_decimal(value)
    if d is None or not d.is_finite():
        return NOT_MEASURED if value is None else str(value)
    d = d.quantize(Decimal(1)) if d == d.to_integral_value() else d.normalize()
    return number(d)


def ratio(value: Any) -> str:
    """A dimensionless ratio (the serving gap ratio g may exceed 1): '0.380000' → '0.38'."""
    return number(value, 2)


def label(name: str | None) -> str:
    if not name:
        return ""
    return PART_LABELS.get(name) or BUCKET_LABELS.get(name) or name.replace("_", " ").capitalize()


def short_hash(sha: str | None) -> str:
    return f"{sha[:12]}…" if sha else "—"


def day(ts: str | None) -> str:
    """The date part of an ISO timestamp; '—' when there is none."""
    return ts[:10] if ts else "—"


def nice_step(span: Any, max_ticks: int = 6) -> Decimal:
    """The smallest step of 1, 2, 2.5 or 5 × 10^k that covers ``span`` in at most ``max_ticks`` steps."""
    width = to_decimal(span)
    if width is None or not width.is_finite() or width <= 0:
        return Decimal(1)
    raw = width / max(1, max_ticks)
    power = Decimal(1).scaleb(raw.adjusted())
    for scale in (power, power * 10):
        for mantissa in NICE_STEPS:
            if mantissa * scale >= raw:
                return _fixed(mantissa * scale)
    return _fixed(power * 100)  # not reached: 10 × 10^k ≥ raw always holds


def _fixed(d: Decimal) -> Decimal:
    """``d`` without trailing zeros and without an exponent: 2E+4 → 20000, 2.50 → 2.5."""
    d = d.normalize()
    return d.quantize(Decimal(1)) if int(d.as_tuple().exponent) > 0 else d


def nice_ticks(low: Any, high: Any, max_ticks: int = 6) -> tuple[list[Decimal], Decimal]:
    """Axis ticks from ``low`` to ``high`` (both included where they fall on a step) at a nice step."""
    lo, hi = to_decimal(low) or Decimal(0), to_decimal(high) or Decimal(0)
    if hi < lo:
        lo, hi = hi, lo
    step = nice_step(hi - lo, max_ticks)
    unit = Decimal(1).scaleb(-step_places(step))
    tick = ((lo / step).to_integral_value(rounding=ROUND_CEILING) * step).quantize(unit)
    ticks = []
    while tick <= hi:
        ticks.append(tick)
        tick += step
    return ticks, step


def step_places(step: Any) -> int:
    """The decimals a tick label needs to show every tick of ``step`` exactly: 2.5 → 1, 0.25 → 2, 500 → 0."""
    d = to_decimal(step)
    if d is None or not d.is_finite() or d == 0:
        return 0
    return max(0, -int(d.normalize().as_tuple().exponent))


def axis_money(value: Any, step: Any, currency: str) -> str:
    """A money tick label with the decimals its axis step needs: (2.5, 2.5) → '$2.5', (20000, 5000) → '$20,000'."""
    d = to_decimal(value)
    if d is None or not d.is_finite():
        return ""
    places = step_places(step)
    body = f"{abs(d):,.{places}f}"
    symbol = SYMBOLS.get(currency)
    body = f"{symbol}{body}" if symbol else f"{currency} {body}"
    return f"-{body}" if d < 0 else body

