"""The quarter as months (audit.json ``months``, METHOD §10): one table with a column per calendar
month and one for the quarter, and the trend chart.

One declaration, three uses: :func:`months_table` gives the rows as raw audit.json values with the
kind of each row (money, count, unit cost, quantity, share), which the spreadsheet writes as
numeric cells (sheet "Months") and the CSV reporter as ``tables/months.csv``; :func:`months_view`
formats the same rows for the HTML / PDF report's "Month by month" section; :func:`months_chart`
draws the months' buckets stacked, with each service's cost per 1,000 requests beside them.

The quarter's column is audit.json's ``quarter`` (the sums of the rounded months); the figures it
does not carry are derived from those sums: each share as the bucket over the total, a service's
cost per 1,000 requests as its cost over its requests, per 1 M tokens over the audit's tokens, the
coverage as the months' observed over paid GPU-hours. Without ``months`` (a window inside one
calendar month) there is no table, no section and no chart.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from audit.buckets import BUCKETS
from audit.reporters.charts import COLOURS, LINE_COLOURS, NEUTRAL, WIDTH, chart_services, label_room, money_ticks, services_words
from audit.reporters.formatting import BUCKET_LABELS, money, number, percent, to_decimal
from audit.reporters.svg import Canvas, Frame, bar, bottom_axis, fitting_columns, left_axis, legend, title

SHARE_PLACES, UNIT_PLACES = Decimal("0.000001"), Decimal("0.000001")
#: row kind → the spreadsheet's kind of its number cells (audit.reporters.xlsx_cells)
CELL_KINDS = {"money": "money", "int": "int", "unit": "unit", "qty": "qty", "pct": "pct"}
Table = tuple[list[str], list[list[Any]], list[str]]


def _ratio(top: Any, bottom: Any, scale: int = 1, places: Decimal = SHARE_PLACES) -> str | None:
    t, b = to_decimal(top), to_decimal(bottom)
    if t is None or b is None or b == 0:
        return None
    return str((t * scale / b).quantize(places, ROUND_HALF_EVEN))


def _quarter_services(audit: dict, months: dict) -> dict[str, dict[str, Any]]:
    quarter = (months.get("quarter") or {}).get("services") or {}
    out = {}
    for name, q in quarter.items():
        s = (audit.get("services") or {}).get(name) or {}
        tokens = None
        if s.get("prompt_tokens") is not None and s.get("generated_tokens") is not None:
            tokens = int(s["prompt_tokens"]) + int(s["generated_tokens"])
        out[name] = {"total_cost": q.get("total_cost"), "requests": q.get("requests"),
                     "cost_per_1k_requests": _ratio(q.get("total_cost"), q.get("requests"), 1000, UNIT_PLACES),
                     "cost_per_1m_tokens": _ratio(q.get("total_cost"), tokens, 1_000_000, UNIT_PLACES)}
    return out


def months_table(audit: dict) -> Table | None:
    """(header, rows, kind of each row): a row is [key, label, value per month…, quarter]."""
    months = audit.get("months")
    if not months or not months.get("months"):
        return None
    entries = months["months"]
    quarter = months.get("quarter") or {}
    head = ["figure", "label", *(str(m.get("month")) for m in entries), "quarter"]
    rows: list[list[Any]] = []
    kinds: list[str] = []

    def row(key: str, text: str, kind: str, values: list[Any]) -> None:
        rows.append([key, text, *values])
        kinds.append(kind)

    row("total", "Total in scope", "money", [m.get("total") for m in entries] + [quarter.get("total")])
    for b in BUCKETS:
        row(f"bucket:{b}", BUCKET_LABELS[b], "money",
            [(m.get("buckets") or {}).get(b) for m in entries] + [(quarter.get("buckets") or {}).get(b)])
    for b in BUCKETS:
        row(f"share:{b}", f"{BUCKET_LABELS[b]}, share of the total", "pct",
            [(m.get("shares") or {}).get(b) for m in entries]
            + [_ratio((quarter.get("buckets") or {}).get(b), quarter.get("total"))])
    q_services = _quarter_services(audit, months)
    names = sorted({n for m in entries for n in (m.get("services") or {})} | set(q_services))
    for name in names:
        for field, text, kind in (("total_cost", "cost (own + shared)", "money"), ("requests", "requests", "int"),
                                  ("cost_per_1k_requests", "cost per 1,000 requests", "unit"),
                                  ("cost_per_1m_tokens", "cost per 1 M tokens", "unit")):
            row(f"service:{name}:{field}", f"{name}: {text}", kind,
                [((m.get("services") or {}).get(name) or {}).get(field) for m in entries]
                + [(q_services.get(name) or {}).get(field)])
    paid = [(m.get("coverage") or {}).get("gpu_hours_paid") for m in entries]
    seen = [(m.get("coverage") or {}).get("gpu_hours_observed") for m in entries]
    paid_q, seen_q = _sum(paid), _sum(seen)
    row("coverage:gpu_hours_paid", "GPU-hours paid", "qty", paid + [paid_q])
    row("coverage:gpu_hours_observed", "GPU-hours observed by telemetry", "qty", seen + [seen_q])
    row("coverage:share", "Coverage (observed / paid GPU-hours)", "pct",
        [(m.get("coverage") or {}).get("share") for m in entries] + [_ratio(seen_q, paid_q)])
    unpaid = [(m.get("coverage") or {}).get("seen_unpaid_gpu_hours") for m in entries]
    if any(to_decimal(u) for u in unpaid if u is not None):  # only where a month saw GPUs no line pays
        row("coverage:seen_unpaid_gpu_hours", "GPU-hours seen but not billed", "qty", unpaid + [_sum(unpaid)])
    return head, rows, kinds


def _sum(values: list[Any]) -> str | None:
    total = Decimal(0)
    for value in values:
        d = to_decimal(value)
        if d is None:
            return None
        total += d
    return str(total)


@dataclass(frozen=True)
class MonthsView:
    columns: list[str]  # the months' labels ("Jul 2026"), then "Quarter"
    windows: list[str]
    rows: list[dict[str, Any]]  # {label, cells, kind, cls}
    note: str
    #: where a service's quarter (sum of months) differs from its whole-window cost, in words
    services_note: str = ""


MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: rows of the HTML table (the spreadsheet and CSV have every row)
SHOWN = ("total", "bucket:", "service:", "coverage:share")
HIDDEN_FIELDS = (":requests", ":cost_per_1m_tokens")


def month_label(month: str) -> str:
    """'2026-07' → 'Jul 2026'."""
    year, _, number_ = month.partition("-")
    return f"{MONTH_NAMES[int(number_) - 1]} {year}" if number_.isdigit() and 1 <= int(number_) <= 12 else month


def months_view(audit: dict) -> MonthsView | None:
    """The "Month by month" table, formatted; None without months."""
    table = months_table(audit)
    if table is None:
        return None
    head, rows, kinds = table
    cur = str(audit.get("currency") or "")
    entries = audit["months"]["months"]
    shown = []
    shares = {r[0].split(":", 1)[1]: r for r in rows if r[0].startswith("share:")}
    for values, kind in zip(rows, kinds):
        key = values[0]
        if not key.startswith(SHOWN) or key.endswith(HIDDEN_FIELDS):
            continue
        cells = [_cell(v, kind, cur) for v in values[2:]]
        subs = [""] * len(cells)
        if key.startswith("bucket:"):
            subs = [percent(v) if v is not None else "" for v in shares[key.split(":", 1)[1]][2:]]
        cls = "total" if key == "total" else "sub" if key.endswith("cost_per_1k_requests") else ""
        shown.append({"label": values[1], "cells": list(zip(cells, subs)), "cls": cls,
                      "bucket": key.split(":", 1)[1] if key.startswith("bucket:") else ""})
    return MonthsView(columns=[month_label(str(m.get("month"))) for m in entries] + ["Quarter"],
                      windows=[f"{str((m.get('window') or {}).get('start'))[:10]} – "
                               f"{str((m.get('window') or {}).get('end'))[:10]}" for m in entries],
                      rows=shown, note=str(audit["months"].get("note") or ""),
                      services_note=str(audit["months"].get("services_note") or ""))


def _cell(value: Any, kind: str, cur: str) -> str:
    if value is None:
        return "—"
    if kind in ("money", "unit"):
        return money(value, cur)
    if kind == "pct":
        return percent(value)
    if kind == "int":
        return number(value)
    return number(value, 2)


def months_chart(audit: dict) -> str | None:
    """The months' buckets stacked (the unattributed bucket hatched), each month's total above its
    bar; beside them each service's cost per 1,000 requests per month, one marker shape per
    service. SVG ``data:`` URI; None without months."""
    months = (audit.get("months") or {}).get("months")
    if not months:
        return None
    c = Canvas(WIDTH, 212)
    right = _stacked_months(c, audit, months)
    _unit_cost_months(c, audit, months, right)
    return c.data_uri()


def _stacked_months(c: Canvas, audit: dict, months: list[dict]) -> float:
    """The left panel: each month's buckets stacked, its total above; returns where the panel ends."""

    cur = str(audit.get("currency") or "")
    base = [0.0] * len(months)
    stacks = []
    for b in BUCKETS:
        values = [float(to_decimal((m.get("buckets") or {}).get(b)) or 0) for m in months]
        stacks.append((b, list(base), values))
        base = [x + y for x, y in zip(base, values)]
    top = max(base + [1.0])
    ticks = money_ticks(Decimal(0), Decimal(repr(top * 1.18)), cur, 6)
    left = label_room([t for _, t in ticks])
    f = Frame(left, 24, WIDTH_SHARE * c.width - left, 140, -0.5, len(months) - 0.5, 0, top * 1.18)
    for b, bottoms, values in stacks:
        for x, (bottom, value) in enumerate(zip(bottoms, values)):
            bar(c, f, x, bottom, value, 0.6, COLOURS[b], "#ffffff" if b == "unattributed" else None)
    for x, m in enumerate(months):
        c.text(f.px(x), f.py(base[x] + top * 0.02) - 1.5, money(m.get("total"), cur), 7, "middle", NEUTRAL)
    left_axis(c, f, ticks)
    bottom_axis(c, f, [(x, month_label(str(m.get("month")))) for x, m in enumerate(months)], marks=False)
    entries = [(BUCKET_LABELS[b], COLOURS[b], "#ffffff" if b == "unattributed" else "box", "") for b in BUCKETS]
    bottom = legend(c, f.left, f.bottom + 22, entries, fitting_columns(entries, 2, f.width, 6.5), 6.5)
    c.height = max(c.height, bottom + 4)
    title(c, f, "Spend in scope per month, by bucket")
    return f.left + f.width


#: the share of the chart's width the stacked months take (the rest is the unit costs)
WIDTH_SHARE = 0.6
MARKERS = ("o", "s", "^", "D", "v", "P")


def _unit_cost_months(c: Canvas, audit: dict, months: list[dict], after: float) -> None:
    """The right panel, from ``after``: each drawn service's cost per 1,000 requests per month, a
    line and a marker shape per service."""

    cur = str(audit.get("currency") or "")
    names = sorted({n for m in months for n in (m.get("services") or {})})
    if services_words(audit):  # more services than a chart draws: the costliest (charts.CHART_SERVICES)
        kept = set(chart_services(audit))
        names = [n for n in names if n in kept]
    high = max([float(p) for n in names for p in _unit_points(months, n) if p is not None] + [0.0]) or 1.0
    ticks = money_ticks(Decimal(0), Decimal(repr(high * 1.3)), cur, 6)
    left = after + 14 + label_room([t for _, t in ticks])
    f = Frame(left, 24, c.width - left - 8, 140, -0.4, len(months) - 0.6, 0, high * 1.3)
    entries = []
    for i, name in enumerate(names):
        points = [(f.px(x), f.py(float(p))) for x, p in enumerate(_unit_points(months, name)) if p is not None]
        if not points:
            continue
        colour, shape = LINE_COLOURS[i % len(LINE_COLOURS)], MARKERS[i % len(MARKERS)]
        c.polyline(points, colour, 1.2)
        for x, y in points:
            c.marker(x, y, shape, colour, 4)
        entries.append((name if len(name) <= 18 else name[:17] + "…", colour, "line", shape))
    left_axis(c, f, ticks)
    bottom_axis(c, f, [(x, month_label(str(m.get("month")))) for x, m in enumerate(months)], marks=False)
    if entries:
        bottom = legend(c, after + 14, f.bottom + 22, entries, fitting_columns(entries, 2, c.width - after - 14, 6.5), 6.5)
        c.height = max(c.height, bottom + 4)
    words = services_words(audit).strip(" ()")
    title(c, f, "Cost per 1,000 requests" + ("\n" + words if words else ""), 8.5)


def _unit_points(months: list[dict], name: str) -> list[Decimal | None]:
    return [to_decimal(((m.get("services") or {}).get(name) or {}).get("cost_per_1k_requests")) for m in months]
