"""The window ``costaudit init --from`` proposes, and what its comment says.

With billing, the window is the whole UTC days of its usage lines of a day or less (the lines
`costaudit validate` tells the billed days by, audit/fit_window.py), so that the case's own
validate finds every day of it billed (before: every line's span, so a month of Tax lines beside
two weeks of usage, or one Purchase dated three weeks after it, gave a window that validate then
warned about). The lines that reach outside it (a tax, a purchase, a monthly fee) are named in the
comment, with their amounts on the case's cost basis and their dates, and the window that takes
them in. Billing without such usage lines gives the whole days of all its lines; no billing, the
telemetry's span. ``reads``: :class:`audit.discover.read.Read` (this module is imported there).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pandas as pd


def usage_window(reads: list) -> tuple[datetime, datetime] | None:
    """The whole UTC days of the billing's usage lines of a day or less, None without any."""
    from audit.fit_window import usage_span

    lines = _billing_lines(reads)
    span = usage_span(lines) if lines is not None else None
    return covered_days([(span[0].to_pydatetime(), span[1].to_pydatetime())]) if span else None


def window_note(given: bool, window: tuple[datetime, datetime], reads: list, basis: str) -> str:
    """The comment above the proposed ``window``."""
    if given:
        return "the window given with --window"
    lines = _billing_lines(reads)
    outside = _outside(lines, window) if lines is not None else None
    if outside is None or not len(outside):
        return _spans_note(reads)
    from audit.fit_window import usage_span

    first, last = usage_span(lines)  # type: ignore[misc]
    assert lines is not None  # outside is None where lines is
    widened = covered_days([(lines["start"].min().to_pydatetime(), lines["end"].max().to_pydatetime())])
    out = [f"the whole UTC days of the billing's usage lines: {first:%Y-%m-%d %H:%M} – {last:%Y-%m-%d %H:%M} UTC "
           "(end exclusive)"]
    out += [_outside_text(group, window, basis) for _, group in outside.groupby(["charge_category", "currency"],
                                                                                  sort=True, dropna=False)]
    out.append(f"a window widened to {_when(widened[0])} – {_when(widened[1])} takes them in")  # type: ignore[index]
    return "\n".join(out)


def empty_window_warnings(window: tuple[datetime, datetime], reads: list) -> list[str]:
    """One line per billing source none of whose lines falls in a window given with ``--window``,
    with the days its lines cover (the case's validate would stop on it)."""
    lo, hi = pd.Timestamp(window[0]), pd.Timestamp(window[1])
    out = []
    for read in reads:
        lines = read.tables.get("lines") if read.source.kind == "billing" else None
        if lines is None or not len(lines) or ((lines["start"] < hi) & (lines["end"] > lo)).any():
            continue
        first, last = read.frame.covered
        out.append(f"no billing line of {read.source.path} falls in the window {_when(lo)} – {_when(hi)}; "
                   f"the billing covers {_when(first)} – {_when(last)}")
    return out


def covered_days(spans: list[tuple[datetime | None, datetime | None]]) -> tuple[datetime, datetime] | None:
    """The whole UTC days that the spans cover together (start floored, end rounded up to midnight)."""
    starts = [s for s, _ in spans if s is not None]
    ends = [e for _, e in spans if e is not None]
    if not starts or not ends:
        return None
    start, end = min(starts), max(ends)
    first = datetime(start.year, start.month, start.day, tzinfo=timezone.utc)
    last = datetime(end.year, end.month, end.day, tzinfo=timezone.utc)
    if last < end.astimezone(timezone.utc) or last <= first:
        last += timedelta(days=1)
    return first, last


def _billing_lines(reads: list) -> pd.DataFrame | None:
    tables = [r.tables["lines"] for r in reads if r.source.kind == "billing" and "lines" in r.tables
              and len(r.tables["lines"])]
    return pd.concat(tables, ignore_index=True) if tables else None


def _outside(lines: pd.DataFrame, window: tuple[datetime, datetime]) -> pd.DataFrame:
    """The lines whose charge period reaches before or after the window."""
    lo, hi = pd.Timestamp(window[0]), pd.Timestamp(window[1])
    return lines[(lines["start"] < lo) | (lines["end"] > hi)]


def _outside_text(group: pd.DataFrame, window: tuple[datetime, datetime], basis: str) -> str:
    """"outside it: N <category> line(s) of <dates>, <amount> <currency> (<part> of it before/after …)"."""
    from audit.lines import basis_amount
    from connectors.billing.clip import clip_to_window

    whole = _sum(basis_amount(group, basis))
    clipped, _ = clip_to_window(group, window)
    cut = whole - _sum(basis_amount(clipped, basis))
    lo, hi = pd.Timestamp(window[0]), pd.Timestamp(window[1])
    sides = [f"before {_when(lo)}"] if (group["start"] < lo).any() else []
    sides += [f"after {_when(hi)}"] if (group["end"] > hi).any() else []
    currency = group["currency"].iloc[0]
    part = "all" if cut == whole else f"{cut:,.2f} {currency}"
    billed = _sum(group["billed_cost"])
    said = f"{whole:,.2f} {currency}" + (f" {basis}, billed {billed:,.2f}" if billed != whole else "")
    count = int(group["line_count"].sum()) if "line_count" in group.columns else len(group)
    return (f"outside it: {count:,} {group['charge_category'].iloc[0]} line(s) of {_when(group['start'].min())} – "
            f"{_when(group['end'].max())}, {said} ({part} of it {' and '.join(sides)}, left out)")


def _sum(values: pd.Series) -> Decimal:
    return sum((Decimal(v) for v in values if v is not None and not pd.isna(v)), Decimal(0))


def _when(moment) -> str:
    stamp = pd.Timestamp(moment)
    return f"{stamp:%Y-%m-%d}" if stamp == stamp.floor("D") else f"{stamp:%Y-%m-%d %H:%M}"


def _spans_note(reads: list) -> str:
    """The whole days of every billing line (else of the telemetry's samples)."""
    spans = [r.frame.covered for r in reads if r.frame is not None and r.source.kind == "billing"]
    which = "billing lines"
    if not spans:
        spans = [r.frame.covered for r in reads if r.frame is not None and r.source.kind == "telemetry"]
        which = "telemetry samples (no billing given)"
    starts = [s for s, _ in spans if s is not None]
    ends = [e for _, e in spans if e is not None]
    if not starts:
        return "the window"
    return (f"the whole UTC days the {which} cover: {min(starts):%Y-%m-%d %H:%M} – "
            f"{max(ends):%Y-%m-%d %H:%M} UTC (end exclusive)")
