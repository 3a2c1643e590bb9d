"""Clip the billing lines whose charge period straddles the audit window to their part inside it.

METHOD §1: billing is clipped to the window W = [start, end). A line billed for 00:00–24:00 in a
window from 06:00 counts 18/24 of its money and quantities, over 06:00–24:00; an hourly GPU line
from 06:00 in a window from 06:30 counts half its cost and half its hours, so its price per GPU-hour
is the line's own. Pro rata by time, exactly: each amount times the seconds inside W over the
seconds of its period, one Decimal division (cents are rounded once, at the end, as for any sum).

The FOCUS reader keeps every straddling line a line of its own (:func:`connectors.billing.focus_lines.grouped_sql`,
and the CUR stages before it), so only those lines are touched here; every other kept line lies in W.
What is clipped off is not dropped without a word: one note per edge of the window says how many
lines straddle it and how much of their billed cost is for time outside W (:func:`clip_notes`).
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pandas as pd

#: the amounts that scale with the time billed (unit prices do not)
CLIPPED = ("billed_cost", "effective_cost", "list_cost", "contracted_cost", "pricing_quantity",
           "consumed_quantity")


def clip_to_window(lines: pd.DataFrame, window: tuple[datetime, datetime]) -> tuple[pd.DataFrame, list]:
    """``lines`` with every straddling line clipped to W, and the notes (row, column, note) saying
    what was left out."""
    lo, hi = (utc(moment) for moment in window)
    starts, ends = lines["start"].clip(lower=lo), lines["end"].clip(upper=hi)
    straddles = (starts != lines["start"]) | (ends != lines["end"])
    if not straddles.any():
        return lines, []
    outside = lines.loc[straddles]
    inside = ((ends - starts)[straddles].to_numpy() // pd.Timedelta(microseconds=1)).tolist()
    whole = ((outside["end"] - outside["start"]).to_numpy() // pd.Timedelta(microseconds=1)).tolist()
    lines = lines.copy()
    for column in CLIPPED:
        lines.loc[straddles, column] = pd.Series(
            [None if amount is None or pd.isna(amount) else share(amount, part, total)
             for amount, part, total in zip(outside[column], inside, whole)], index=outside.index, dtype=object)
    lines.loc[straddles, "start"], lines.loc[straddles, "end"] = starts[straddles], ends[straddles]
    return lines, clip_notes(outside, lines.loc[straddles], lo, hi)


def utc(moment: datetime) -> pd.Timestamp:
    """A window bound as a UTC Timestamp (a naive one is UTC, as the window's own text reads)."""
    stamp = pd.Timestamp(moment)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def share(amount: Decimal, part: int | Decimal, total: int | Decimal) -> Decimal:
    """``amount`` × ``part`` / ``total`` (microseconds, or hours, inside W over the period's), one division."""
    return amount * part / total


def clip_notes(before: pd.DataFrame, after: pd.DataFrame, lo: pd.Timestamp, hi: pd.Timestamp) -> list:
    """(row, column, note): per edge of W, the lines that straddle it and the billed cost of theirs
    that is for time on that side of W (a line straddling both edges is counted at each, with the
    money of each side)."""
    notes = []
    whole = ((before["end"] - before["start"]).to_numpy() // pd.Timedelta(microseconds=1)).tolist()
    for column, moment in (("ChargePeriodStart", lo), ("ChargePeriodEnd", hi)):
        at_start = column.endswith("Start")
        edge = (before["start"] < lo) if at_start else (before["end"] > hi)
        if not edge.any():
            continue
        beyond = ((lo - before["start"]) if at_start else (before["end"] - hi))
        beyond_us = (beyond.to_numpy() // pd.Timedelta(microseconds=1)).tolist()
        picked = edge.to_numpy(dtype=bool).tolist()
        total = sum((b for b, p in zip(before["billed_cost"], picked) if p), Decimal(0))
        left_out = sum((share(b, part, span) for b, part, span, p in zip(before["billed_cost"], beyond_us, whole, picked)
                        if p and b is not None and not pd.isna(b)), Decimal(0))
        currency = before.loc[edge, "currency"].iloc[0]
        count = int(before.loc[edge, "line_count"].sum())
        notes.append((int(before.loc[edge, "row"].iloc[0]), column,
                      f"{count} {'line straddles' if count == 1 else 'lines straddle'} the window's "
                      f"{'start' if at_start else 'end'} ({moment:%Y-%m-%d %H:%M} UTC): "
                      f"{left_out:,.2f} {currency} of {'its' if count == 1 else 'their'} {total:,.2f} {currency} "
                      f"billed is for time {'before' if at_start else 'after'} the window and left out "
                      "(clipped pro rata by time)"))
    return notes
