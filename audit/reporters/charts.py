"""Charts for the HTML/PDF report: matplotlib → SVG → ``data:`` URI, deterministic bytes.

matplotlib is imported inside :func:`build_charts` (STYLE habit 12). Figures are made with the
object API (``matplotlib.figure.Figure``), never pyplot, so no GUI backend or global figure state
is touched; the SVG canvas is rendered the same way under the Agg backend. ``svg.hashsalt`` fixes
the element ids and ``metadata={'Date': None}`` drops the timestamp, so the same audit gives the
same SVG bytes. Labels are plain text (``text.parse_math`` off: a '$' is never mathtext), written
as SVG ``<text>`` in DejaVu Sans, the report's own font (``svg.fonttype`` "none"), not as one glyph
outline per character: the PDF printer lays out a dozen labels instead of drawing hundreds of
outlines (measured on the 1 M-line case's three charts: weasyprint 3.7x and matplotlib 2.3x less
CPU time, the SVG 5.5x smaller). Where a browser lacks DejaVu Sans it uses its sans-serif.
"""

from __future__ import annotations

import base64
import io
from datetime import date, timedelta
from decimal import Decimal

from audit.buckets import BUCKETS
from audit.reporters.formatting import BUCKET_LABELS, axis_money, money, nice_ticks, percent

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
RC = {
    "svg.hashsalt": "costaudit",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "text.parse_math": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#555555",
    "axes.titlesize": 9.5,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
}


def _f(value) -> float:
    """Plot position only: display strings are formatted from the exact decimals."""
    return float(Decimal(str(value))) if value is not None else 0.0


def _svg(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def bucket_chart(audit: dict) -> str:
    from matplotlib.figure import Figure

    cur = audit.get("currency") or ""
    buckets = audit.get("buckets") or {}
    keys = list(reversed(BUCKETS))
    values = [_f((buckets.get(k) or {}).get("amount")) for k in keys]
    fig = Figure(figsize=(7.0, 2.3))
    ax = fig.add_subplot()
    bars = ax.barh([BUCKET_LABELS[k] for k in keys], values, color=[COLOURS[k] for k in keys],
                   height=0.62)
    top = max(values + [1.0])
    for bar, k in zip(bars, keys):
        b = buckets.get(k) or {}
        ax.text(bar.get_width() + top * 0.01, bar.get_y() + bar.get_height() / 2,
                f"{money(b.get('amount'), cur)}\u2002({percent(b.get('share'))})",
                va="center", fontsize=8.5, color=NEUTRAL)
    ax.set_xlim(0, top * 1.38)
    _money_ticks(ax.xaxis, top * 1.38, cur)
    ax.tick_params(axis="y", length=0)
    ax.set_title(f"Spend in scope by bucket ({cur}, total {money(audit.get('total'), cur)})")
    return _svg(fig)


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


def _money_ticks(axis, limit: float, cur: str) -> list[str]:
    """Ticks from 0 to ``limit`` at a nice step (1, 2, 2.5 or 5 × 10^k), labelled with the decimals
    the step needs ($2.5 steps read $0.0 / $2.5 / $5.0, never $2 / $5 / $8); returns the labels."""
    from matplotlib.ticker import FixedFormatter, FixedLocator

    ticks, step = nice_ticks(0, Decimal(repr(limit)), max_ticks=6)
    labels = [axis_money(t, step, cur) for t in ticks]
    axis.set_major_locator(FixedLocator([float(t) for t in ticks]))
    axis.set_major_formatter(FixedFormatter(labels))
    return labels


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
    from matplotlib.figure import Figure

    cur = audit.get("currency") or ""
    services = audit.get("services") or {}
    fig = Figure(figsize=(7.0, 3.0))
    grid = fig.add_gridspec(1, 2, width_ratios=(3.1, 1.0), wspace=0.35)
    ax = fig.add_subplot(grid[0])
    steps = _waterfall_steps(audit)
    xs = range(len(steps))
    ax.bar(xs, [s[2] for s in steps], bottom=[s[1] for s in steps], color=[s[3] for s in steps],
           width=0.66)
    top = max([s[1] + s[2] for s in steps] + [1.0])
    for x, (_, bottom, height, _, sign) in zip(xs, steps):
        ax.text(x, bottom + height + top * 0.012, sign + _whole(height, cur), ha="center",
                va="bottom", fontsize=6, color=NEUTRAL)
    ax.set_ylim(0, top * 1.1)
    ax.set_xticks(list(xs), [s[0] for s in steps], fontsize=7)
    _money_ticks(ax.yaxis, top * 1.1, cur)
    ax.tick_params(axis="x", length=0)
    ax.set_title("From invoice to buckets")
    side = fig.add_subplot(grid[1])
    names = chart_services(audit)
    values = [services[n].get("cost_per_1k_requests") for n in names]
    side.bar(range(len(names)), [_f(v) for v in values], color=COLOURS["model_compute"], width=0.6)
    crowded = len(names) > 2  # labels side by side would run into each other: turned upright
    side.set_xticks(range(len(names)), [_short(n) for n in names], fontsize=7.5,
                    rotation=30 if crowded else 0, ha="right" if crowded else "center")
    top = max([_f(v) for v in values] + [0.0]) or 1.0
    for i, v in enumerate(values):
        side.text(i, _f(v) + top * 0.02, money(v, cur) if v is not None else "not measured",
                  ha="center", va="bottom", fontsize=6.5 if crowded else 7, rotation=90 if crowded else 0)
    side.set_ylim(0, top * (1.9 if crowded else 1.25))
    side.tick_params(axis="x", length=0)
    side.set_yticks([])
    side.spines["left"].set_visible(False)
    side.set_title("Cost per 1,000 requests" + ("\n" + services_words(audit).strip(" ()") if services_words(audit) else ""),
                   fontsize=8.5)
    return _svg(fig)


def _short(name: str, limit: int = 14) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def utilisation_chart(audit: dict) -> str | None:
    from matplotlib.dates import MO, DateFormatter, DayLocator, WeekdayLocator
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

    series: dict[str, list[tuple[date, float]]] = {}
    drawn = set(chart_services(audit)) if len(audit.get("services") or {}) > CHART_SERVICES else None
    for row in audit.get("utilisation") or []:
        if row.get("busy_fraction") is None or (drawn is not None and str(row.get("service") or "") not in drawn):
            continue
        series.setdefault(str(row.get("service") or ""), []).append(
            (date.fromisoformat(row["date"][:10]), _f(row["busy_fraction"]) * 100))
    if not series:
        return None
    fig = Figure(figsize=(7.0, 2.5))
    ax = fig.add_subplot()
    for i, (name, points) in enumerate(sorted(series.items())):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=2.5,
                linewidth=1.4, color=LINE_COLOURS[i % len(LINE_COLOURS)], label=_short(name, 30))
    ax.set_ylim(0, 100)
    ax.yaxis.set_major_formatter(PercentFormatter(decimals=0))
    days = sorted({p[0] for points in series.values() for p in points})
    span = (days[-1] - days[0]).days
    ax.xaxis.set_major_locator(WeekdayLocator(MO) if span > 14 else DayLocator(interval=max(1, span // 7)))
    ax.xaxis.set_major_formatter(DateFormatter("%a %d %b" if span > 14 else "%d %b"))
    ax.set_xlim(days[0] - timedelta(days=0.5), days[-1] + timedelta(days=0.5))
    ax.grid(axis="y", color="#e2e2e2", linewidth=0.6)
    ax.legend(frameon=False, loc="upper right", ncols=min(4, len(series)))
    ax.set_title("Daily kernel-busy fraction per service" + services_words(audit))
    return _svg(fig)


#: most options the tornado chart draws (the first in rank order)
TORNADO_OPTIONS = 4


def _tornado_rows(audit: dict) -> list[tuple[str, float, float | None, float | None]]:
    """(label, expected payback, payback at the input's low, at its high) per ranked option and input,
    the widest swing first within each option."""
    rows = []
    ranked = [o for o in audit.get("options") or [] if o.get("rank") is not None][:TORNADO_OPTIONS]
    for o in ranked:
        expected = _f((o.get("payback_months") or {}).get("expected"))
        mine = []
        for s in o.get("sensitivity") or []:
            lo, hi = (None if s.get(k) is None else _f(s[k]) for k in ("payback_at_low", "payback_at_high"))
            swing = max(abs((v if v is not None else expected * 4) - expected) for v in (lo, hi))
            what = str(s.get("input") or "").split(" (")[0]
            mine.append((swing, f"#{o['rank']} {_short(o.get('id') or '', 24)}: {what}",
                         expected, lo, hi))
        rows += [(name, e, lo, hi) for _, name, e, lo, hi in sorted(mine, key=lambda r: -r[0])]
    return rows


def tornado_chart(audit: dict) -> str | None:
    """Each ranked option's expected payback under the low and the high of each input (METHOD §7):
    a bar from one to the other around the expected payback; an open end where there is no saving."""
    from matplotlib.figure import Figure

    rows = _tornado_rows(audit)
    if not rows:
        return None
    top = max([v for _, e, lo, hi in rows for v in (e, lo, hi) if v is not None] + [1.0]) * 1.15
    fig = Figure(figsize=(7.0, 0.6 + 0.22 * len(rows)))
    ax = fig.add_subplot()
    for y, (_, expected, lo, hi) in enumerate(reversed(rows)):
        for value, colour in ((lo, COLOURS["serving_path"]), (hi, COLOURS["platform_overhead"])):
            end = top if value is None else value
            ax.barh(y, end - expected, left=expected, height=0.6, color=colour, hatch="//" if value is None else None)
        ax.plot([expected, expected], [y - 0.35, y + 0.35], color=NEUTRAL, linewidth=1)
    ax.set_yticks(range(len(rows)), [r[0] for r in reversed(rows)], fontsize=7)
    ax.set_xlim(0, top)
    ax.set_xlabel("payback, months (input at its low: blue; at its high: orange; hatched: no saving)")
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#e2e2e2", linewidth=0.6)
    ax.set_title("Payback sensitivity: each input at its low and its high")
    return _svg(fig)


def build_charts(audit: dict) -> dict[str, str | None]:
    """name → ``data:image/svg+xml`` URI (None where there is nothing to draw)."""
    import matplotlib

    with matplotlib.rc_context(RC):
        return {"buckets": bucket_chart(audit), "waterfall": waterfall_chart(audit),
                "utilisation": utilisation_chart(audit), "tornado": tornado_chart(audit)}
