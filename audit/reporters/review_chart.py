"""The review's bridge chart: a horizontal waterfall from the earlier total, through each step of
the bridge (volume / price / efficiency / overhead per service, new services, unattributed,
unallocated), to the later total. SVG as a ``data:`` URI, the same bytes for the same document
(the settings of :mod:`audit.reporters.charts`).

A rise and a fall differ by more than colour: a fall is hatched and its label carries a minus
sign, a rise a plus sign. The labels are the exact cents of review.json; bar lengths only go
through float. Steps of zero are left out (the table under the chart lists every step). The money
axis starts at a round figure below the lowest level reached, said under the chart, so that steps
of a few per cent of the total stay visible.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, cast

from audit.reporters.charts import NEUTRAL, RC, _svg
from audit.reporters.formatting import axis_money, money, nice_step, nice_ticks, to_decimal

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
    import matplotlib
    from matplotlib.figure import Figure

    bars = bridge_bars(bridge)
    bars[0] = (f"{earlier} total", *bars[0][1:])
    bars[-1] = (f"{later} total", *bars[-1][1:])
    floor = axis_floor(bars)
    with matplotlib.rc_context(cast(Any, RC)):
        fig = Figure(figsize=(5.2, 0.9 + 0.24 * len(bars)))
        ax = fig.add_subplot()
        ys = list(range(len(bars)))[::-1]
        high = max(max(a, b) for _, a, b, _ in bars)
        width = float(high - floor) or 1.0
        for y, (_, a, b, kind) in zip(ys, bars):
            left = float(max(min(a, b), floor))
            length = float(max(a, b)) - left
            colour = {"total": TOTAL, "rise": RISE, "fall": FALL}[kind]
            ax.barh(y, length, left=left, height=0.62, color=colour, edgecolor=colour,
                    hatch="////" if kind == "fall" else None, linewidth=0.4)
            shown = money(b, currency) if kind == "total" else _signed(b - a, currency)
            ax.text(float(max(a, b)) + width * 0.012, y, shown, va="center", fontsize=7, color=NEUTRAL)
            if kind == "fall":
                ax.patches[-1].set_facecolor("white")
        ax.set_yticks(ys, [_short(t) for t, *_ in bars], fontsize=7.2)
        for tick, (_, _, _, kind) in zip(ax.get_yticklabels(), bars):
            if kind == "total":
                tick.set_fontweight("bold")
        ax.set_xlim(float(floor), float(floor) + width * 1.3)
        money_ticks(ax.xaxis, floor, floor + Decimal(repr(width * 1.3)), currency)
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="x", color="#e2e2e2", linewidth=0.6)
        ax.set_axisbelow(True)
        return _svg(fig)


def _signed(value: Decimal, currency: str) -> str:
    text = money(abs(value), currency)
    return ("+" if value > 0 else "−") + text


def money_ticks(axis, low: Decimal, high: Decimal, currency: str) -> None:
    """Ticks from ``low`` to ``high`` at a nice step, labelled with the decimals the step needs."""
    from matplotlib.ticker import FixedFormatter, FixedLocator

    ticks, step = nice_ticks(low, high, max_ticks=5)
    axis.set_major_locator(FixedLocator([float(t) for t in ticks]))
    axis.set_major_formatter(FixedFormatter([axis_money(t, step, currency) for t in ticks]))
