"""Charts for the HTML/PDF report: plain SVG (:mod:`audit.reporters.svg`) as ``data:`` URIs.

Each chart is a small function that lays out its bars, axes and labels on a
:class:`~audit.reporters.svg.Canvas`; no drawing library is imported, so the report costs no
matplotlib import (0.85 s) and no figure drawing (0.35-0.54 s on a large case). The same audit gives
the same bytes. Bar lengths and positions go through float; every label is formatted from the exact
decimals of audit.json (bar labels short: $1.73M, $298k, whole units under 10,000). Names from the
data are escaped by the canvas. Where there are more services than a chart has room for it draws the
costliest :data:`CHART_SERVICES` and says so.
"""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from math import radians, sin

from audit.buckets import BUCKETS
from audit.reporters.formatting import BUCKET_LABELS, axis_money, money, nice_ticks, number, percent, step_places
from audit.reporters.svg import (
    Canvas,
    Frame,
    bar,
    barh,
    bottom_axis,
    column_width,
    fitting_columns,
    grid,
    left_axis,
    legend,
    text_width,
    title,
)

COLOURS = {
    "model_compute": "#1f4e79",
    "serving_path": "#4a90c2",
    "platform_overhead": "#d08c2c",
    "unattributed": "#8c8c8c",
}
NEUTRAL, ADJUST, LINE_COLOURS = "#3b3b3b", "#b0b7bf", ("#1f4e79", "#d08c2c", "#4a9b6e", "#a23b72",
                                                       "#6b6b6b", "#4a90c2")
WATERFALL_LABELS = {"model_compute": "Model\ncompute", "serving_path": "Serving\npath",
                    "platform_overhead": "Platform\nover-\nhead", "unattributed": "Unattri-\nbuted"}
#: the report's charts are this wide (points at 100 %: the page's text width is about 480)
WIDTH = 504.0
TICK_SIZE = 8.5


def _f(value) -> float:
    """Plot position only: display strings are formatted from the exact decimals."""
    return float(Decimal(str(value))) if value is not None else 0.0


def money_ticks(low: Decimal, high: Decimal, cur: str, most: int = 6) -> list[tuple[float, str]]:
    """(position, label) of ticks from ``low`` to ``high`` at a nice step (1, 2, 2.5 or 5 × 10^k),
    labelled with the decimals the step needs ($2.5 steps read $0.0 / $2.5 / $5.0, never $2 / $5 / $8)."""
    ticks, step = nice_ticks(low, high, max_ticks=most)
    return [(float(t), axis_money(t, step, cur)) for t in ticks]


def _limit(value: float) -> Decimal:
    return Decimal(repr(value))


def label_room(labels: list[str], size: float = TICK_SIZE) -> float:
    """The room left of a frame for its y tick labels."""
    return max((text_width(t, size) for t in labels), default=0.0) + 10


def bucket_chart(audit: dict) -> str:
    """The four buckets as lying bars, top down, each labelled with its amount and share."""
    cur = audit.get("currency") or ""
    buckets = audit.get("buckets") or {}
    values = [_f((buckets.get(k) or {}).get("amount")) for k in BUCKETS]
    top = max(values + [1.0])
    ticks = money_ticks(Decimal(0), _limit(top * 1.38), cur)
    left = 6 + label_room([BUCKET_LABELS[k] for k in BUCKETS])
    c = Canvas(WIDTH, 166)
    f = Frame(left, 26, WIDTH - left - 24, 116, 0, top * 1.38, -0.5, len(BUCKETS) - 0.5)
    rows = [(len(BUCKETS) - 1 - i, k, v) for i, (k, v) in enumerate(zip(BUCKETS, values))]
    for y, k, v in rows:
        barh(c, f, y, 0, v, 0.62, COLOURS[k])
        b = buckets.get(k) or {}
        c.text(f.px(v + top * 0.01), f.py(y) + 3, f"{money(b.get('amount'), cur)}\u2002({percent(b.get('share'))})")
    left_axis(c, f, [(y, BUCKET_LABELS[k]) for y, k, _ in rows], marks=False)
    bottom_axis(c, f, ticks)
    title(c, f, f"Spend in scope by bucket ({cur}, total {money(audit.get('total'), cur)})")
    return c.data_uri()


#: most services a chart draws (bars, lines): the costliest, own plus shared cost; the tables list all
CHART_SERVICES = 8


def chart_services(audit: dict) -> list[str]:
    """The services a chart draws, in audit.json's order: every one, or the :data:`CHART_SERVICES`
    with the largest own + shared cost (ties in order) where there are more."""
    services = audit.get("services") or {}
    names = [str(n) for n in services]
    if len(names) <= CHART_SERVICES:
        return names
    cost = {n: _f((services[n] or {}).get("cost")) + _f((services[n] or {}).get("shared_cost")) for n in names}
    kept = set(sorted(names, key=lambda n: -cost[n])[:CHART_SERVICES])
    return [n for n in names if n in kept]


def services_words(audit: dict) -> str:
    """The caption's words for a cut: " (the 8 costliest of 500 services)", or "" when all are drawn."""
    total = len(audit.get("services") or {})
    return f" (the {CHART_SERVICES} costliest of {total:,} services)" if total > CHART_SERVICES else ""


#: (threshold, divisor, suffix) of a short bar label: $950, $12.3k, $1.73M, $4.1B
SCALES = ((Decimal(10) ** 9, Decimal(10) ** 9, "B"), (Decimal(10) ** 6, Decimal(10) ** 6, "M"),
          (Decimal(10) ** 4, Decimal(10) ** 3, "k"))


def _whole(value: float, cur: str) -> str:
    """A bar label short enough to sit over its bar (the exact figures are in the tables): whole
    currency units below 10,000, else three significant digits and k / M / B ($12.3k, $1.73M)."""
    amount = Decimal(round(value))
    for threshold, divisor, suffix in SCALES:
        if abs(amount) >= threshold:
            scaled = amount / divisor
            places = max(0, 2 - abs(scaled).adjusted())
            text = money(round(scaled, places), cur)
            return (text.rstrip("0").rstrip(".") if "." in text else text) + suffix
    return money(amount, cur).rsplit(".", 1)[0]


def _waterfall_steps(audit: dict) -> list[tuple[str, float, float, str, str]]:
    """(label, bottom, height, colour, sign) from invoice total down to the four buckets."""
    invoice, total = _f(audit.get("invoice_total")), _f(audit.get("total"))
    outside = _f((audit.get("outside_scope") or {}).get("amount"))
    steps = [("Invoice\ntotal\n(billed)", 0.0, invoice, NEUTRAL, "")]
    level = invoice
    if outside:
        steps.append(("Outside\nscope", min(level, level - outside), abs(outside), ADJUST,
                      "−" if outside > 0 else "+"))
        level -= outside
    adjust = total - level
    if abs(adjust) >= 0.005:
        name = "Billed\n→ effec-\ntive" if audit.get("cost_basis") == "effective" else "Basis\nadjustment"
        steps.append((name, min(level, total), abs(adjust), ADJUST, "+" if adjust > 0 else "−"))
    steps.append(("In\nscope", 0.0, total, NEUTRAL, ""))
    level = total
    for k in BUCKETS:
        amount = _f(((audit.get("buckets") or {}).get(k) or {}).get("amount"))
        steps.append((WATERFALL_LABELS[k], level - amount, amount, COLOURS[k], ""))
        level -= amount
    return steps


def waterfall_chart(audit: dict) -> str:
    """From the invoice total to the total in scope and down through the four buckets; beside it,
    each service's cost per 1,000 requests."""
    c = Canvas(WIDTH, 214)
    right = _invoice_panel(c, audit)
    _unit_cost_panel(c, audit, right + 40)
    return c.data_uri()


def _invoice_panel(c: Canvas, audit: dict) -> float:
    """The waterfall on the left of ``c``; returns where it ends."""
    cur = audit.get("currency") or ""
    steps = _waterfall_steps(audit)
    top = max([s[1] + s[2] for s in steps] + [1.0])
    ticks = money_ticks(Decimal(0), _limit(top * 1.1), cur)
    left = label_room([t for _, t in ticks])
    f = Frame(left, 24, WIDTH * 0.7 - left, 150, -0.5, len(steps) - 0.5, 0, top * 1.1)
    for x, (_, bottom, height, colour, sign) in enumerate(steps):
        bar(c, f, x, bottom, height, 0.66, colour)
        c.text(f.px(x), f.py(bottom + height + top * 0.012) - 1.5, sign + _whole(height, cur), 6, "middle")
    left_axis(c, f, ticks)
    bottom_axis(c, f, [(x, s[0]) for x, s in enumerate(steps)], 7, marks=False)
    title(c, f, "From invoice to buckets")
    return f.left + f.width


def _unit_cost_panel(c: Canvas, audit: dict, left: float) -> None:
    """Each drawn service's cost per 1,000 requests as an upright bar; more than two services'
    names would run into each other side by side: they are slanted, and the figures turned upright."""
    cur = audit.get("currency") or ""
    services = audit.get("services") or {}
    names = chart_services(audit)
    values = [services[n].get("cost_per_1k_requests") for n in names]
    crowded = len(names) > 2
    top = max([_f(v) for v in values] + [0.0]) or 1.0
    f = Frame(left, 24, WIDTH - left - 6, 150, -0.5, max(len(names), 2) - 0.5, 0, top * (1.9 if crowded else 1.25))
    for i, v in enumerate(values):
        bar(c, f, i, 0, _f(v), 0.6, COLOURS["model_compute"])
        shown = money(v, cur) if v is not None else "not measured"
        if crowded:
            c.text(f.px(i) + 2.3, f.py(_f(v) + top * 0.02), shown, 6.5, rotate=-90)
        else:
            c.text(f.px(i), f.py(_f(v) + top * 0.02) - 1.5, shown, 7, "middle")
    slant = 0 if not crowded else 30 if len(names) <= 4 else 60  # steeper where the names stand closer
    bottom_axis(c, f, [(i, _short(n)) for i, n in enumerate(names)], 7.5, marks=False, slant=slant)
    if crowded:  # room under the slanted names
        c.height = max(c.height, f.bottom + 16 + max(text_width(_short(n), 7.5) for n in names) * sin(radians(slant)))
    words = services_words(audit).strip(" ()")
    title(c, f, "Cost per 1,000 requests" + ("\n" + words if words else ""), 8.5)


def _short(name: str, limit: int = 14) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _cut_at_word(text: str, limit: int) -> str:
    """``text`` to at most ``limit`` characters, cut after its last whole word, marked where cut."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"


def _busy_series(audit: dict) -> dict[str, list[tuple[date, float]]]:
    """Service → (day, kernel-busy %) of the services drawn, in day order."""
    series: dict[str, list[tuple[date, float]]] = {}
    drawn = set(chart_services(audit)) if len(audit.get("services") or {}) > CHART_SERVICES else None
    for row in audit.get("utilisation") or []:
        if row.get("busy_fraction") is None or (drawn is not None and str(row.get("service") or "") not in drawn):
            continue
        series.setdefault(str(row.get("service") or ""), []).append(
            (date.fromisoformat(row["date"][:10]), _f(row["busy_fraction"]) * 100))
    return {name: sorted(points) for name, points in sorted(series.items())}


def day_ticks(first: date, last: date) -> list[tuple[float, str]]:
    """Mondays ("Mon 07 Sep") over more than two weeks; else about seven days ("07 Sep")."""
    span = (last - first).days
    if span > 14:
        days = [first + timedelta(days=(7 - first.weekday()) % 7 + 7 * k) for k in range(span // 7 + 1)]
        return [(d.toordinal(), d.strftime("%a %d %b")) for d in days if d <= last]
    step = max(1, span // 7)
    return [(d.toordinal(), d.strftime("%d %b")) for d in (first + timedelta(days=k) for k in range(0, span + 1, step))]


def utilisation_chart(audit: dict) -> str | None:
    """Each drawn service's daily kernel-busy fraction, one line and colour per service."""
    series = _busy_series(audit)
    if not series:
        return None
    days = sorted({p[0] for points in series.values() for p in points})
    c = Canvas(WIDTH, 186)
    left = label_room(["100%"])
    f = Frame(left, 26, WIDTH - left - 24, 132, days[0].toordinal() - 0.5, days[-1].toordinal() + 0.5, 0, 100)
    grid(c, f, ys=[20, 40, 60, 80, 100])
    entries = []
    for i, (name, points) in enumerate(series.items()):
        colour = LINE_COLOURS[i % len(LINE_COLOURS)]
        c.polyline([(f.px(d.toordinal()), f.py(v)) for d, v in points], colour)
        for d, v in points:
            c.marker(f.px(d.toordinal()), f.py(v), "o", colour, 2.5)
        entries.append((_short(name, 30), colour, "line", "o"))
    left_axis(c, f, [(v, f"{v}%") for v in range(0, 101, 20)])
    bottom_axis(c, f, day_ticks(days[0], days[-1]))
    columns = fitting_columns(entries, 4, f.width - 8, 8.5)
    legend(c, f.left + f.width - columns * column_width(entries, 8.5) - 4, f.top + 2, entries, columns, 8.5)
    title(c, f, "Daily kernel-busy fraction per service" + services_words(audit))
    return c.data_uri()


#: most options the tornado chart draws (the first in rank order)
TORNADO_OPTIONS = 4
#: most characters of an option's title in a tornado row's label (the input's name follows it)
TORNADO_TITLE = 32


def _tornado_rows(audit: dict) -> list[tuple[str, float, float | None, float | None]]:
    """(label, expected payback, payback at the input's low, at its high) per ranked option and input,
    the widest swing first within each option; the label is the option's rank and title, as the
    options table shows them, and the input."""
    rows = []
    ranked = [o for o in audit.get("options") or [] if o.get("rank") is not None][:TORNADO_OPTIONS]
    for o in ranked:
        expected = _f((o.get("payback_months") or {}).get("expected"))
        mine = []
        for s in o.get("sensitivity") or []:
            lo, hi = (None if s.get(k) is None else _f(s[k]) for k in ("payback_at_low", "payback_at_high"))
            swing = max(abs((v if v is not None else expected * 4) - expected) for v in (lo, hi))
            what = str(s.get("input") or "").split(" (")[0]
            name = _cut_at_word(o.get("title") or o.get("id") or "", TORNADO_TITLE)
            mine.append((swing, f"#{o['rank']} {name}: {what}",
                         expected, lo, hi))
        rows += [(name, e, lo, hi) for _, name, e, lo, hi in sorted(mine, key=lambda r: -r[0])]
    return rows


def tornado_chart(audit: dict) -> str | None:
    """Each ranked option's expected payback under the low and the high of each input (METHOD §7):
    a bar from one to the other around the expected payback; an open end where there is no saving."""
    rows = _tornado_rows(audit)
    if not rows:
        return None
    top = max([v for _, e, lo, hi in rows for v in (e, lo, hi) if v is not None] + [1.0]) * 1.15
    left = min(label_room([r[0] for r in rows], 7), WIDTH * 0.55)
    c = Canvas(WIDTH, 66 + 16 * len(rows))
    f = Frame(left, 24, WIDTH - left - 16, 16 * len(rows), 0, top, -0.5, len(rows) - 0.5)
    ticks, step = nice_ticks(0, _limit(top), 6)
    grid(c, f, xs=[float(t) for t in ticks])
    for y, (_, expected, lo, hi) in enumerate(reversed(rows)):
        for value, colour in ((lo, COLOURS["serving_path"]), (hi, COLOURS["platform_overhead"])):
            end = top if value is None else value
            barh(c, f, y, expected, end - expected, 0.6, colour, NEUTRAL if value is None else None)
        c.line(f.px(expected), f.py(y - 0.35), f.px(expected), f.py(y + 0.35), NEUTRAL, 1)
    left_axis(c, f, [(y, r[0]) for y, r in enumerate(reversed(rows))], 7, marks=False)
    bottom_axis(c, f, [(float(t), number(t, step_places(step))) for t in ticks])
    words = "payback, months (input at its low: blue; at its high: orange; hatched: no saving)"
    half = text_width(words, 7.5) / 2
    c.text(max(half, min(f.left + f.width / 2, WIDTH - half)), f.bottom + 28, words, 7.5, "middle")
    title(c, f, "Payback sensitivity: each input at its low and its high")
    return c.data_uri()


def build_charts(audit: dict) -> dict[str, str | None]:
    """name → ``data:image/svg+xml`` URI (None where there is nothing to draw)."""
    return {"buckets": bucket_chart(audit), "waterfall": waterfall_chart(audit),
            "utilisation": utilisation_chart(audit), "tornado": tornado_chart(audit)}
