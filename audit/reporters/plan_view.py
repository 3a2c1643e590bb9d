"""The plan in the report (METHOD §7, audit/plan.py): each option's status in words, who acts, its
marginal saving and break-even; the combined saving per part and for the whole plan; the
sensitivity table the tornado chart draws. Formats audit.json's figures only.
"""
from __future__ import annotations

from typing import Any, Callable

from audit.reporters.formatting import NOT_MEASURED, day, number, percent, plain
from audit.reporters.wording import glossary, option_target, page_one_texts

NO_SAVING = "no saving in this case"
#: the kind of a sensitivity input's low / high (audit/plan.py names them); any other input: a quantity
INPUT_KINDS = {"saving (recoverable share or model inputs)": "money", "loaded rate (per hour)": "money",
               "effort (hours)": "qty"}
DASH = "—"
#: a payback where that band saves nothing (audit.json null), and its entry in page 1's Terms
NEVER = "none"
NEVER_TERM = (NEVER, "the low case saves nothing, so it never pays back")
STATUS_WORDS = {"priced": "priced", "no_saving": NO_SAVING, "not_measured": NOT_MEASURED}


def status_words(status: str | None) -> str:
    """'priced', 'no saving in this case' or 'not measured'."""
    return STATUS_WORDS.get(status or "", NOT_MEASURED)


def unpriced(o: dict, figure: str, m: Callable[[Any], str]) -> tuple[str, str, str, bool]:
    """An unpriced option's saving, cost or payback cell as (shown, low, high, has a band): "not
    measured" where its part was not; where there is no saving in this case (measured, and nothing
    now), "none" for the saving and a dash for its cost and payback. Where audit.json still has the
    saving's bands (a high band above zero, which the reason explains) and the one-off cost, they
    are shown: "none" over the saving's low – high, and the cost as priced, as the exports give them."""
    if o.get("status") != "no_saving":
        return NOT_MEASURED, "", "", False
    values = o.get({"saving": "monthly_saving", "cost": "one_off_cost"}.get(figure, "")) or {}
    if not values:
        return ("none" if figure == "saving" else DASH), "", "", False
    low, high = m(values.get("low")), m(values.get("high"))
    return ("none" if figure == "saving" else m(values.get("expected"))), low, high, True


def months(value: Any) -> str:
    """A payback in months; "none" where there is none (no positive saving at that band: it never
    pays back), which page 1's Terms and the options table's note explain."""
    return NEVER if value is None else number(value, 1)


def never_pays_back(options: list[dict]) -> bool:
    """Whether any of ``options`` (audit.json's) has a band with no payback (its low saves nothing)."""
    return any(v is None for o in options for v in (o.get("payback_months") or {}).values())


def committed_note(o: dict) -> str:
    """Where an option leaves out the share of its part on committed capacity with no known end
    date (audit.json ``deferred.committed_share`` with no ``months_after_window``): "excludes 59 %
    on commitments without an end date"; else ''."""
    d = o.get("deferred") or {}
    if d.get("committed_share") is None or d.get("months_after_window") is not None:
        return ""
    return f"excludes {percent(d['committed_share'], 0)} on commitments without an end date"


def window_line(audit: dict) -> str:
    """Page 1's line under the plan: the monthly savings are scaled from the audit window."""
    window = audit.get("window") or {}
    return (f"Savings are per month, scaled from the {plain(window.get('days'))}-day window "
            f"({day(window.get('start'))} – {day(window.get('end'))}, end exclusive).")


def who(o: dict) -> dict[str, str]:
    """The options table's 'who acts' cell: owners, next step, what it depends on."""
    return {"owners": ", ".join(o.get("owners") or []) or "no owner named in the case",
            "next_step": o.get("next_step") or "",
            "depends_on": ", ".join(o.get("depends_on") or [])}


def input_line(i: dict, items: int | None = None) -> str:
    """An option's input: "name value (source)". A list-valued one (the commitments: ids joined by
    ", ") longer than ``items`` shows its first ``items`` and "and 195 more" (the PDF's cut)."""
    value = str(i.get("value"))
    listed = value.split(", ")
    if items is not None and len(listed) > items:
        value = f"{', '.join(listed[:items])} and {len(listed) - items:,} more (report.html, audit.json)"
    return f"{i.get('name')} {value} ({i.get('source')})"


def marginal(o: dict, m: Callable[[Any], str]) -> str:
    """The marginal saving (expected), or '—' for an option the plan does not count."""
    values = o.get("marginal_saving")
    return DASH if not values else m(values.get("expected"))


def marginal_note(o: dict) -> str:
    """audit.json's note where the marginal bands read high < expected (or expected < low), else ''."""
    return str(o.get("marginal_note") or "")


def break_even(o: dict, m: Callable[[Any], str]) -> str:
    value = o.get("break_even_monthly_saving")
    if value is None:
        return DASH
    return f"{m(value)} a month within {o.get('horizon_months') or '12'} months"


def deferred(o: dict, m: Callable[[Any], str]) -> str:
    """'… available now, … more from month t_c' where part of the saving waits for a commitment's end."""
    d = o.get("deferred") or {}
    later, now = d.get("saving_later"), d.get("saving_now")
    if not later or not now:
        return ""
    return (f"{m(now.get('expected'))} a month available now, {m(later.get('expected'))} more from "
            f"{number(d.get('months_after_window'), 1)} months after the window")


def top_options(audit: dict) -> list[dict]:
    """The options page 1 shows: the first three priced (audit.reporters.view.ReportModel.top_options)."""
    return [o for o in audit.get("options") or []
            if o.get("status") == "priced" and o.get("monthly_saving") is not None][:3]


def page_one_glossary(audit: dict) -> list[tuple[str, str]]:
    """Page 1's Terms: those its texts use (audit.reporters.wording.glossary), its options' notes on
    committed shares among them, and "none" where a payback it shows has none."""
    shown = top_options(audit)
    terms = glossary(page_one_texts(audit) + [committed_note(o) for o in shown])
    return terms + ([NEVER_TERM] if never_pays_back(shown) else [])


def plan_rows(audit: dict, m: Callable[[Any], str]) -> list[dict[str, str]]:
    """The combined saving of the ranked options per part, then the whole plan."""
    plan = audit.get("plan") or {}
    rows = []
    for p in list(plan.get("by_part") or []) + ([plan["total"]] if plan.get("total") else []):
        saving = p.get("combined_saving") or {}
        rows.append({"part": "Whole plan" if p.get("part") == "total" else option_target(p.get("part") or ""),
                     "total": str(p.get("part") == "total").lower(),
                     "part_monthly": m(p.get("part_monthly")), "options": ", ".join(p.get("options") or []),
                     "expected": m(saving.get("expected")),
                     "range": f"{m(saving.get('low'))} – {m(saving.get('high'))}",
                     "run_cost": m(p.get("run_cost_monthly"))})
    return rows


def sensitivity_rows(audit: dict, m: Callable[[Any], str]) -> list[dict[str, str]]:
    """One row per ranked option and input: the input's low and high (money as money, ``m``; effort
    in hours) and the expected payback at each."""
    rows = []
    for o in audit.get("options") or []:
        if o.get("rank") is None:
            continue
        expected = (o.get("payback_months") or {}).get("expected")
        for s in o.get("sensitivity") or []:
            shown = _input_value(INPUT_KINDS.get(s.get("input") or ""), m)
            rows.append({"rank": str(o["rank"]), "title": o.get("title") or "", "input": s.get("input") or "",
                         "low": shown(s.get("low")), "high": shown(s.get("high")),
                         "at_low": months(s.get("payback_at_low")), "at_high": months(s.get("payback_at_high")),
                         "expected": months(expected)})
    return rows


def _input_value(kind: str | None, m: Callable[[Any], str]) -> Callable[[Any], str]:
    """How a sensitivity input's low / high is shown: money, hours, or as audit.json gives it."""
    if kind == "money":
        return lambda v: m(v) if v is not None else ""
    if kind == "qty":
        return lambda v: f"{v} h" if v is not None else ""
    return lambda v: "" if v is None else str(v)
