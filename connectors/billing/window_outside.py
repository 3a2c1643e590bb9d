"""What a billing reader leaves out because it lies wholly outside the window, said by name (rule 5).

The FOCUS reader keeps the lines whose charge period overlaps the window; every other line is left
out of the audit. :func:`outside_notes` says how many (invoice lines, ``_n``), their billed and
effective cost, the first and last moment of their charge periods and the first rows (``file:row``),
in one aggregate over view ``n`` (the 50 M-line bills of benchmarks/fleet: one scan, no Python a line).

A line whose charge period lies wholly outside its own billing period (BillingPeriodStart /
BillingPeriodEnd, where the file has them; by more than a day, :data:`SLACK`) is an out-of-range date
rather than a line of another month:
:func:`period_notes` names those lines in a note that the audit turns into the fit warning
``charge_period_outside_billing_period`` (audit/fit_sources.py).
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Callable

from connectors.duck import quote_text, utc_text

#: rows a note names as examples
EXAMPLES = 3
#: how the note on lines outside the window begins (tests, audit/fit_sources.py)
OUTSIDE = "wholly outside the window"
#: how the note on charge periods outside their billing period begins (audit/fit_sources.py reads it)
OUT_OF_PERIOD = "charge period outside its billing period"
#: what the rows of that note follow
ROWS_FOLLOW = "outside the billing period of the line: "
SUM_TYPE = "DECIMAL(38,20)"
MOMENT = "%Y-%m-%d %H:%M"
#: how far a charge period may run past its billing period before it is out of range: a provider's
#: billing month in its own time zone (the FOCUS 1.0 sample bills 2024-09-30 22:00 UTC in October's)
SLACK = "1 DAY"


def outside_sql(window: tuple[datetime, datetime], start: str = "_ps", end: str = "_pe") -> str:
    """SQL: a row of view ``n`` lies wholly outside ``window`` (the negation of the reader's kept test);
    ``start`` / ``end``: its period's columns (TIMESTAMPTZ)."""
    lo, hi = (f"CAST({quote_text(utc_text(moment))} AS TIMESTAMPTZ)" for moment in window)
    return f"NOT ({start} < {hi} AND ({start} >= {lo} OR {end} > {lo}))"


def summary_sql(where: str) -> str:
    """SQL: count (invoice lines), billed and effective sums, first start, last end and the first rows
    of the rows of ``n`` where ``where`` holds."""
    money = [f"CAST(sum(TRY_CAST(trim({c}) AS {SUM_TYPE})) AS VARCHAR)" for c in ("BilledCost", "EffectiveCost")]
    return (f"SELECT sum(_n)::BIGINT, {', '.join(money)}, strftime(min(_ps), '{MOMENT}'), "
            f"strftime(max(_pe), '{MOMENT}'), min(rn, {EXAMPLES}), min(BillingCurrency) FROM n WHERE {where}")


def money(text: str | None, currency: str) -> str:
    """An exact sum's text as ``1,234.56 USD`` (cents), ``?`` where no amount read."""
    return "?" if text is None else f"{Decimal(text):,.2f} {currency}"


def outside_notes(con, window: tuple[datetime, datetime], currency: str,
                  name: Callable[[int], str]) -> list[tuple[int, str, str]]:
    """(first row, ChargePeriodStart, note) on the lines wholly outside ``window``; none where every
    line overlaps it. ``name``: a row of ``n`` as ``file:row``."""
    count, billed, effective, first, last, rows, found = con.execute(summary_sql(outside_sql(window))).fetchone()
    if not count:
        return []
    said = currency if found is None else found
    return [(int(min(rows)), "ChargePeriodStart", outside_text(
        window, (count, billed, effective, first, last), [name(int(rn)) for rn in sorted(rows)], said))]


def outside_text(window: tuple[datetime, datetime], summary: tuple, examples: list[str], currency: str) -> str:
    """The note on lines wholly outside ``window``: ``summary`` is (count, billed and effective sums' text,
    first start and last end as :data:`MOMENT` text), ``examples`` the first rows' names (the GCP
    export reader, connectors/billing/gcp_outside.py, says it in these words too)."""
    count, billed, effective, first, last = summary
    lo, hi = (f"{moment:{MOMENT}}" for moment in window)
    more = ", …" if count > len(examples) else ""
    return (f"{count:,} line{'' if count == 1 else 's'} {OUTSIDE} ({lo} to {hi} UTC), left out: {money(billed, currency)} "
            f"billed, {money(effective, currency)} effective; charge periods from {first} to {last} UTC; "
            f"rows {', '.join(examples)}{more}")


def period_notes(con, currency: str, name: Callable[[int], str]) -> list[tuple[int, str, str]]:
    """(first row, ChargePeriodStart, note) on the lines whose charge period ends more than SLACK
    before their billing period starts or starts more than SLACK after it ends: wholly outside it, as
    a 1970 or 2099 date in a September bill (a period that only runs past an edge, as the FOCUS spec's
    purchase examples do, is not judged; nor a line without a readable billing period; nor a correction,
    ChargeClass "Correction", which FOCUS bills in the current billing period with the charge period of
    the line it corrects)."""
    where = (f"_bs IS NOT NULL AND _be IS NOT NULL AND (_pe < _bs - INTERVAL {SLACK} OR _ps > _be + INTERVAL {SLACK})"
             + not_a_correction(con))
    count, billed, _, first, last, rows, found = con.execute(summary_sql(where)).fetchone()
    if not count:
        return []
    shown = [(int(rn), start, period) for rn, start, period in con.execute(
        f"SELECT rn, strftime(_ps, '{MOMENT}'), strftime(_bs, '%Y-%m-%d') || ' to ' || strftime(_be, '%Y-%m-%d') "
        f"FROM n WHERE rn IN ({', '.join(str(int(rn)) for rn in rows)}) ORDER BY rn").fetchall()]
    examples = ", ".join(f"{name(rn)} ({start} in {period})" for rn, start, period in shown)
    more = ", …" if count > len(rows) else ""
    return [(shown[0][0], "ChargePeriodStart",
             f"{OUT_OF_PERIOD}: {count:,} line{'' if count == 1 else 's'} ({money(billed, found or currency)} "
             f"billed) charged from {first} to {last} UTC, {ROWS_FOLLOW}"
             f"{examples}{more}")]


def not_a_correction(con) -> str:
    """SQL ``AND …``: the row of ``n`` is no correction (ChargeClass, in any letter case); empty where the
    bill has no ChargeClass column."""
    named = [row[0] for row in con.execute("DESCRIBE n").fetchall() if str(row[0]).lower() == "chargeclass"]
    if not named:
        return ""
    column = '"' + named[0].replace('"', '""') + '"'
    return f" AND coalesce(lower(trim(CAST({column} AS VARCHAR))), '') <> 'correction'"
