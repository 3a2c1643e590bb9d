"""CUR split cost allocation rows (EKS pods, ECS tasks on EC2): read, summed once, set apart by name.

AWS's split cost allocation data adds usage records per pod or task and hour (``line_item_operation``
``EKSPod-EC2`` / ``ECSTask-EC2``, ``split_line_item_parent_resource_id`` = the EC2 instance) whose
``split_line_item_split_cost`` / ``split_line_item_unused_cost`` share out the parent instance's
amortised cost by the CPU and memory its containers used. They are no charge of their own: the
instance's own line bills that money (AWS writes 0 in the split rows' ``line_item_unblended_cost``),
and the audit splits that line by GPU telemetry instead. So they are kept out of the lines
(:func:`connectors.billing.cur_sql.is_split`), and not without a word:

* a source note says how many split rows in the window were read and set apart, with their split
  and unused cost;
* a split row that carries money in an amount the FOCUS mapping reads (unblended cost, the
  reservation or Savings Plan effective cost, public on-demand cost) contradicts that: counting it
  would bill its instance twice, so it stays out of the lines and out of the invoice total, and the
  table ``split_summary`` names the rows and amounts for the fit warning ``split_rows_money``
  (:mod:`audit.fit_sources`) and a second note.

One aggregate over the split rows in DuckDB (and, only where some carry money, a top-3 query for
the rows to name): no Python per row.
"""
from __future__ import annotations

from decimal import Decimal

import pandas as pd

from connectors.billing import cur_sql as sql
from connectors.duck import object_series, utc_text

#: the amounts of a split row the FOCUS mapping would read as money (BilledCost, EffectiveCost, ListCost)
MONEY = ("line_item_unblended_cost", "reservation_effective_cost", "savings_plan_savings_plan_effective_cost",
         "pricing_public_on_demand_cost")
SHARES = ("split_line_item_split_cost", "split_line_item_unused_cost")
NAMED = 3  # rows named for split rows that carry money


def in_window() -> str:
    """SQL over ``raw``: a split row whose usage period overlaps the window (parameters: end, start, start)."""
    start, end = (f"CAST({c} AS TIMESTAMPTZ)" for c in sql.PERIOD)
    return (f"{sql.is_split()} AND {start} < CAST(? AS TIMESTAMPTZ) AND ({start} >= CAST(? AS TIMESTAMPTZ) "
            f"OR {end} > CAST(? AS TIMESTAMPTZ))")


def has_money() -> str:
    """SQL: the row carries money in an amount the FOCUS mapping reads."""
    return " OR ".join(f"{sql.dec(c)} <> 0" for c in MONEY)


def summary_sql() -> str:
    """One row: the split rows in the window, the first, their currency, the sums of their shares and
    money amounts (as text), and how many carry money."""
    sums = ", ".join(f"CAST(sum({sql.dec(c)}) AS VARCHAR) AS {c}" for c in (*SHARES, *MONEY))
    return (f"SELECT count(*) AS n, min([_file, _row]) AS first, min(line_item_currency_code) AS currency, {sums}, "
            f"count(*) FILTER (WHERE {has_money()}) AS money_rows FROM raw WHERE {in_window()}")


def split_summary(con, layouts: list[sql.Layout], window) -> pd.DataFrame:
    """Table ``split_summary``: one row for the split rows in ``window`` (none where there are none):
    ``rows``, ``row`` / ``column`` (the first, for the note), ``currency``, the sums of
    :data:`SHARES` and :data:`MONEY` (Decimal), ``money_rows`` and ``money_at`` (the first rows that
    carry money, ``file:row``)."""
    lo, hi = (utc_text(moment) for moment in window)
    found = con.sql(summary_sql(), params=[hi, lo, lo]).fetchall()[0]
    count, first, currency, *amounts, money_rows = found
    if not count:
        return pd.DataFrame()
    at = []
    if money_rows:
        named = con.execute(f"SELECT _file, _row FROM raw WHERE {in_window()} AND ({has_money()}) "
                            f"ORDER BY _file, _row LIMIT {NAMED}", [hi, lo, lo]).fetchall()
        at = [f"{layouts[f].label}:{r}" for f, r in named]
    row = {"rows": int(count), "row": int(first[1]), "column": layouts[first[0]].spelling("line_item_operation"),
           "currency": currency or "", "money_rows": int(money_rows), "money_at": ", ".join(at)}
    frame = pd.DataFrame([row])
    for name, amount in zip((*SHARES, *MONEY), amounts):
        frame[name] = object_series([Decimal(amount or "0")])
    return frame


def split_notes(summary: pd.DataFrame) -> list[tuple[int, str, str]]:
    """(row, column, note): the split rows read and set apart; where some carry money, what and why."""
    if not len(summary):
        return []
    s = summary.iloc[0].to_dict()
    cur = f" {s['currency']}" if s["currency"] else ""
    notes = [(int(s["row"]), s["column"],
              f"{s['rows']} split cost allocation {'row' if s['rows'] == 1 else 'rows'} (EKS pod / ECS task shares "
              f"of an EC2 instance) read and kept apart from the lines: they share out their parent instance "
              f"lines' cost, which the audit splits by telemetry instead (split cost "
              f"{s['split_line_item_split_cost']:,.2f}{cur}, unused cost {s['split_line_item_unused_cost']:,.2f}{cur})")]
    if s["money_rows"]:
        notes.append((int(s["row"]), s["column"], money_words(summary)))
    return notes


def money_words(summary: pd.DataFrame) -> str:
    """The sentence naming the split rows that carry money, the amounts and why they are left out."""
    s = summary.iloc[0].to_dict()
    cur = f" {s['currency']}" if s["currency"] else ""
    amounts = ", ".join(f"{c} {s[c]:,.2f}{cur}" for c in MONEY if s[c])
    n = int(s["money_rows"])
    more = f" and {n - NAMED} more" if n > NAMED else ""
    return (f"{n} split cost allocation {'row carries' if n == 1 else 'rows carry'} money "
            f"of {'its' if n == 1 else 'their'} own ({s['money_at']}{more}): {amounts}, left out of the "
            "lines and the invoice total: a split row shares out its parent instance line's cost, which that "
            "line bills already (AWS writes 0 there), so counting it would bill the instance twice")
