"""The review's bridge chart: a horizontal waterfall from the earlier total, through each step of
the bridge (volume / price / efficiency / overhead per service, new services, unattributed,
unallocated), to the later total. Plain SVG (:mod:`audit.reporters.svg`) as a ``data:`` URI, the
same bytes for the same document.

A rise and a fall differ by more than colour: a fall is hatched and its label carries a minus
sign, a rise a plus sign. The labels are the exact cents of review.json; bar lengths only go
through float. Steps of zero are left out (the table under the chart lists every step). The money
axis starts at a round figure below the lowest level reached, said under the chart, so that steps
of a few per cent of the total stay visible.
"""

from __future__ import annotations

from decimal import Decimal

from audit.reporters.charts import money_ticks
from audit.reporters.formatting import money, nice_step, to_decimal
from audit.reporters.svg import Canvas, Frame, barh, bottom_axis, grid, left_axis, text_width

RISE, FALL, TOTAL = "#c05621", "#2f855a", "#1f4e79"
LABEL_CHARS = 34
#: the most step bars page 1's chart draws (the smallest of any more are one bar)
MAX_STEPS = 16


def bridge_bars(bridge: dict, most: int = MAX_STEPS) -> list[tuple[str, Decimal, Decimal, str]]:
    """(label, start level, end level, kind) of each bar: the earlier total, every non-zero step,
    the later total; kind is "total", "rise" or "fall". Beyond ``most`` steps (page 1 has room for
    so many), the smallest are one bar, "N smaller steps", drawn last: the bars still add up."""
    start = to_decimal(bridge.get("from_total")) or Decimal(0)
    end = to_decimal(bridge.get("to_total")) or Decimal(0)
    steps = [(str(s.get("label") or s.get("kind") or ""), to_decimal(s.get("amount")) or Decimal(0))
             for s in bridge.get("steps") or []]
    steps = [(text, amount) for text, amount in steps if amount != 0]
    if len(steps) > most:
        kept = set(sorted(range(len(steps)), key=lambda i: -abs(steps[i][1]))[: most - 1])
        rest = [amount for i, (_, amount) in enumerate(steps) if i not in kept]
        steps = [s for i, s in enumerate(steps) if i in kept] + [(f"{len(rest)} smaller steps", sum(rest, Decimal(0)))]
    bars = [("Earlier total", Decimal(0), start, "total")]
    level = start
    for text, amount in steps:
        bars.append((text, level, level + amount, "rise" if amount >= 0 else "fall"))
        level += amount
    bars.append(("Later total", Decimal(0), end, "total"))
    return bars


def axis_floor(bars: list[tuple[str, Decimal, Decimal, str]]) -> Decimal:
    """Where the money axis starts: a round figure below every level a step reaches (0 when the
    steps span a large part of the totals)."""
    levels = [v for _, a, b, kind in bars if kind != "total" for v in (a, b)]
    totals = [b for _, _, b, kind in bars if kind == "total"]
    if not levels or min(levels + totals) <= 0:
        return Decimal(0)
    low, high = min(levels + totals), max(levels + totals)
    span = high - low
    if span * 3 >= low:
        return Decimal(0)
    step = nice_step(span, 4)
    floor = ((low - span * Decimal("0.6")) / step).to_integral_value(rounding="ROUND_FLOOR") * step
    return max(Decimal(0), floor)


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def bridge_chart(bridge: dict, currency: str, earlier: str, later: str) -> str:
    """The waterfall as an SVG ``data:`` URI; ``earlier`` / ``later`` name the two audits."""
    bars = bridge_bars(bridge)
    bars[0] = (f"{earlier} total", *bars[0][1:])
    bars[-1] = (f"{later} total", *bars[-1][1:])
    floor = axis_floor(bars)
    high = max(max(a, b) for _, a, b, _ in bars)
    width = float(high - floor) or 1.0
    names = [_short(t) for t, *_ in bars]
    left = max(text_width(t, 7.2) for t in names) + 10
    c = Canvas(374, 30 + 17 * len(bars))
    f = Frame(left, 6, 374 - left - 14, 17 * len(bars), float(floor), float(floor) + width * 1.3, -0.5, len(bars) - 0.5)
    ticks = money_ticks(floor, floor + Decimal(repr(width * 1.3)), currency, 5)
    grid(c, f, xs=[t for t, _ in ticks])
    for y, (_, a, b, kind) in zip(range(len(bars) - 1, -1, -1), bars):
        colour = {"total": TOTAL, "rise": RISE, "fall": FALL}[kind]
        lo, hi = float(max(min(a, b), floor)), float(max(a, b))
        barh(c, f, y, lo, hi - lo, 0.62, "#ffffff" if kind == "fall" else colour,
             colour if kind == "fall" else None, colour)
        shown = money(b, currency) if kind == "total" else _signed(b - a, currency)
        c.text(f.px(hi + width * 0.012), f.py(y) + 2.5, shown, 7)
    totals = frozenset(n for n, (_, _, _, kind) in zip(names, bars) if kind == "total")
    left_axis(c, f, [(len(bars) - 1 - i, n) for i, n in enumerate(names)], 7.2, marks=False, bold=totals)
    bottom_axis(c, f, ticks)
    return c.data_uri()


def _signed(value: Decimal, currency: str) -> str:
    text = money(abs(value), currency)
    return ("+" if value > 0 else "−") + text
