"""What a billing source's reader set apart with money on it (rule 5: no money dropped without a word).

A CUR's split cost allocation rows share out their parent instance lines' cost and are kept out of
the lines (:mod:`connectors.billing.cur_split`). Where some of them carry money of their own (an
amount the FOCUS mapping reads: unblended, effective or public on-demand cost), that money is in no
line and so in neither the invoice total nor the bridge: ``split_rows_money`` names the rows
(``file:row``), the amounts and why (nearest: the rows).

A request log's ``path_filter`` that matches none of the window's 2xx / 3xx requests leaves the
service with 0 requests: ``path_filter`` names the filter and, where it matches requests that all
failed, how many and their statuses (nearest: the statuses; the filter is right, the requests
failed), else the paths the log does hold, most frequent first, every request counted *outside the
path filter* (nearest: those paths), from the reader's tables ``filter_failed`` and ``other_paths``
(:mod:`connectors.telemetry.access_log`).

A billing line whose charge period lies outside its own billing period (a 1970 or 2099 date in a
September bill) is an out-of-range date, not a line of another month: ``charge_period_outside_billing_period``
names the lines, their money and the first rows (nearest: those rows, ``file:row``), from the reader's
note (:mod:`connectors.billing.window_outside`). Lines of the month before or after the window are
only the source's note.

A billing source that names no currency (a FOCUS file without BillingCurrency, which FOCUS makes
mandatory) is read in the case's currency: ``currency_assumed`` says so, from the reader's note.
"""
from __future__ import annotations

import re

from audit.collected import Collected
from audit.misfit import LISTED, Misfit, text
from connectors.billing.cur_split import money_words
from connectors.billing.focus_lines import currency_assumed
from connectors.billing.window_outside import OUT_OF_PERIOD, ROWS_FOLLOW

#: a row a charge-period note names, ``file:row (moment in period)``
NAMED_ROW = re.compile(r"(?:^|, )(.+?:\d+) \(\d{4}-\d{2}-\d{2} \d{2}:\d{2} in ")


def split_money_fit(collected: Collected) -> list[Misfit]:
    """A ``split_rows_money`` warning per billing source whose split rows carry money."""
    out = []
    for frame in collected.of("billing"):
        summary = frame.tables.get("split_summary")
        if summary is None or not len(summary) or not summary["money_rows"].iloc[0]:
            continue
        subject = f"billing source {text(frame.spec.name)}"
        rows = tuple(text(r) for r in summary["money_at"].iloc[0].split(", "))
        out.append(Misfit("split_rows_money", subject, f"{subject}: {money_words(summary)}", rows))
    return out


def currency_fit(collected: Collected) -> list[Misfit]:
    """A ``currency_assumed`` warning per billing source that names no currency (no BillingCurrency
    column, or the column empty): its amounts were read in the case's currency, an assumption."""
    out = []
    for frame in collected.of("billing"):
        subject = f"billing source {text(frame.spec.name)}"
        out += [Misfit("currency_assumed", subject, f"{subject}: {note}", ())
                for note in currency_assumed(frame.tables.get("notes"))]
    return out


def charge_period_fit(collected: Collected) -> list[Misfit]:
    """A ``charge_period_outside_billing_period`` warning per billing source with lines whose charge
    period lies outside their billing period, nearest: the rows the reader's note names."""
    out = []
    for frame in collected.of("billing"):
        notes = frame.tables.get("notes")
        if notes is None or not len(notes):
            continue
        subject = f"billing source {text(frame.spec.name)}"
        for note in (str(n) for n in notes["note"] if str(n).startswith(OUT_OF_PERIOD)):
            rows = tuple(text(r) for r in NAMED_ROW.findall(note.split(ROWS_FOLLOW, 1)[-1]))
            out.append(Misfit("charge_period_outside_billing_period", subject, f"{subject}: {note}", rows[:LISTED]))
    return out


def path_filter_fit(collected: Collected) -> list[Misfit]:
    """A ``path_filter`` warning per request-log source whose path filter matches no 2xx / 3xx
    request of the window while the log holds some (all of them counted outside the filter), or
    matches only failed ones."""
    out = []
    for frame in collected.of("telemetry"):
        paths = frame.tables.get("other_paths")
        detail = frame.tables.get("requests_detail")
        failed = frame.tables.get("filter_failed")
        if paths is None or detail is None or int(detail["successful"].sum()):
            continue
        subject = f"telemetry source {text(frame.spec.name)}"
        service = frame.spec.options.get("service")
        who = f"service {text(service)} counts 0" if service else "it counts 0"
        said = f"{subject}: path_filter \"{text(frame.spec.options.get('path_filter'))}\" matches"
        if failed is not None and len(failed):
            statuses = tuple(f"{text(s)} ({n:,})" for s, n in zip(failed["status"], failed["lines"]))
            out.append(Misfit("path_filter", subject,
                              f"{said} {int(failed['lines'].sum()):,} request(s) of the window, all failed (5xx / "
                              f"4xx; statuses {', '.join(statuses)}): {who} successful requests from it",
                              statuses[:LISTED]))
        elif len(paths):
            listed = ", ".join(f"{text(p)} ({n:,})" for p, n in zip(paths["path"][:LISTED], paths["lines"][:LISTED]))
            more = " …" if len(paths) > LISTED else ""
            out.append(Misfit("path_filter", subject,
                              f"{said} no request: the {int(detail['other_paths'].sum()):,} 2xx / 3xx request(s) "
                              f"of the window are all outside it, so {who} requests from it; paths the log holds, "
                              f"most frequent first: {listed}{more}", tuple(text(p) for p in paths["path"][:LISTED])))
    return out
