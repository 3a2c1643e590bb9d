"""The PDF's cut of the report model: what the printed report shows of a case of any size.

The PDF prints in bounded time only if what it lays out is bounded, whatever the case holds. So,
in the PDF (the HTML page and tables.xlsx keep everything):

- each table that grows with the data shows its top :data:`PDF_ROWS` rows, the largest amount
  first where the table has one, and the line "8 of 5,000 rows shown; all rows in tables.xlsx
  (sheet Classes) and report.html" (templates/_partials.html.j2 ``cut_note``); a cut table with a
  total (a bucket's parts, GPU-hour coverage by node) adds one line for the rows it leaves out,
  counted and summed from audit.json's decimals, so that the printed rows add up to the total;
- the options table shows :data:`PDF_OPTIONS` options (the catalogue does not grow with the case;
  the ranked options come first), with the same line;
- page 1's table of unattributed parts shows the :data:`PAGE_ONE_ROWS` largest and names where the
  rest are; the Evidence appendix shows the first :data:`PDF_PROFILES` kernel profiles and the
  serving evidence of the first :data:`PDF_COLUMNS` services (audit.json's order), each with a
  line saying how many there are; the months table the rows of the services the charts draw
  (the 8 costliest), with a line;
- each kernel profile's tables (top kernels, top call paths, top idle call paths) show their first
  :data:`PDF_KERNELS` rows, each with the line "5 of 10 rows shown; all rows in report.html and
  audit.json (profiles)"; kernel names print their first :data:`PDF_KERNEL_CHARS` characters and
  call paths their last (the innermost frames say the most), "…" marking the cut, and a line says
  report.html and audit.json have them whole;
- the serving-path evidence prints the figures some service has; those no service has are named in
  one line (their reasons, with the metric names each needs, are in report.html);
- an option it does not rank shows its reason and the basis of its figures, not the basis's
  detail, its inputs, assumptions and next step (report.html has them, tables.xlsx the assumptions
  and next step), and a line says so;
- a list-valued input of an option (the commitments it would resize: one id per commitment)
  shows its first :data:`PDF_ITEMS` items and "and 195 more (report.html, audit.json)";
- every other data string of a printed row (a reason, a detail, a list of sources) ends after
  :data:`PDF_CHARS` characters, at a separator where there is one, with "… (1,234 more characters
  in report.html)".

A case under every limit, with every option ranked, prints the same page as the HTML. Only the rows
the template prints (the first ``limit`` of each list, PDF_OPTIONS at least) are clipped: the rest
are never laid out.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal, InvalidOperation
from typing import Any

from audit.reporters.charts import chart_services, services_words
from audit.reporters.formatting import NOT_MEASURED, money, number
from audit.reporters.months_view import MonthsView
from audit.reporters.plan_view import input_line
from audit.reporters.view import ReportModel

#: rows of each long table the PDF prints; the rest are in tables.xlsx and report.html
PDF_ROWS = 8
#: options the PDF prints: the catalogue's dozen and a few of the case's own (ranked ones first)
PDF_OPTIONS = 15
#: unattributed parts on page 1 (the appendix table of the bucket shows PDF_ROWS)
PAGE_ONE_ROWS = 6
#: kernel profiles the Evidence appendix prints
PDF_PROFILES = 3
#: services (columns) of the serving-evidence table the PDF prints
PDF_COLUMNS = 6
#: items of a list-valued option input (one per commitment) the PDF prints
PDF_ITEMS = 5
#: rows of each table of a kernel profile the PDF prints (top kernels, call paths, idle call paths)
PDF_KERNELS = 5
#: characters of a finding's kernel name (its start) and call path (its end) the PDF prints
PDF_KERNEL_CHARS = 160
#: characters of one data string the PDF prints
PDF_CHARS = 600
#: where a long string is cut, latest first within its last fifth: between list items, then words
SEPARATORS = ("; ", ", ", " ")


def for_print(model: ReportModel, limit: int = PDF_ROWS) -> ReportModel:
    """``model`` as the PDF prints it (the module docstring lists every cut)."""
    ordered = top_rows(model, limit)
    options = [dataclasses.replace(view, inputs=[input_line(i, PDF_ITEMS) for i in raw.get("inputs") or []],
                                   brief=raw.get("rank") is None)
               for view, raw in zip(ordered.options, model.audit.get("options") or [])] \
        if len(ordered.options) == len(model.audit.get("options") or []) else ordered.options
    services = list(model.evidence_services)
    evidence = ordered.serving_evidence
    if len(services) > PDF_COLUMNS:
        evidence = [{**row, "cells": list(row.get("cells") or [])[:PDF_COLUMNS]} for row in evidence]
    months, month_services = _months(model)
    evidence, unmeasured = _measured(ordered.serving_evidence, evidence)
    profiles = [_short_profile(p) for p in ordered.profiles[:PDF_PROFILES]]
    cut = dataclasses.replace(
        ordered, options=options, profiles=profiles,
        evidence_services=services[:PDF_COLUMNS], serving_evidence=evidence, evidence_unmeasured=unmeasured,
        months=months, findings=[_short_finding(f) for f in ordered.findings[:limit]] + ordered.findings[limit:],
        print_limits={"page_one": PAGE_ONE_ROWS, "options": PDF_OPTIONS, "profiles": len(model.profiles),
                      "columns": len(services), "month_services": month_services, "kernels": PDF_KERNELS,
                      "short_kernels": int(profiles != ordered.profiles[:PDF_PROFILES])})
    return clipped(cut, max(limit, PDF_OPTIONS))


def _measured(rows: list[dict], shown: list[dict]) -> tuple[list[dict], list[str]]:
    """Of ``shown`` (``rows`` with the columns the PDF prints), the rows some service (printed or
    not) has a value for; and the labels of the rest (none where there is no service: the table of
    figures then prints as in the HTML)."""
    none = [bool(row.get("cells")) and all(c == NOT_MEASURED for c in row["cells"]) for row in rows]
    return [r for r, n in zip(shown, none) if not n], [str(r.get("label", "")) for r, n in zip(rows, none) if n]


def start(text: str, chars: int = PDF_KERNEL_CHARS) -> str:
    """A kernel name's first ``chars`` characters ("…" last where it is longer)."""
    return text if len(text) <= chars else text[:chars - 1] + "…"


def end(text: str, chars: int = PDF_KERNEL_CHARS) -> str:
    """A call path's last ``chars`` characters ("…" first where it is longer): its innermost frames."""
    return text if len(text) <= chars else "…" + text[-(chars - 1):]


def _short_finding(row: dict) -> dict:
    """A finding with its kernel name's start and its call path's end, and ``shortened`` set where
    either was longer."""
    kernel, path = str(row.get("kernel", "")), str(row.get("call_path", ""))
    short = {**row, "kernel": start(kernel), "call_path": end(path)}
    return short if short == row else {**short, "shortened": True}


def _short_profile(profile):
    """A kernel profile's first :data:`PDF_KERNELS` rows of each table, with kernel names' starts
    (a call path's top kernel in its narrow column, half as many characters) and call paths' ends."""
    return dataclasses.replace(
        profile, top_kernels=[{**k, "name": start(k["name"])} for k in profile.top_kernels[:PDF_KERNELS]]
        + profile.top_kernels[PDF_KERNELS:],
        top_call_paths=[{**c, "call_path": end(c["call_path"]), "top_kernel": start(c["top_kernel"], PDF_KERNEL_CHARS // 2)}
                        for c in profile.top_call_paths[:PDF_KERNELS]] + profile.top_call_paths[PDF_KERNELS:],
        idle_paths=[{**r, "callpath": end(r["callpath"])} for r in profile.idle_paths[:PDF_KERNELS]]
        + profile.idle_paths[PDF_KERNELS:])


def _months(model: ReportModel) -> tuple[MonthsView | None, int]:
    """The months table with the rows of the services the charts draw (the costliest,
    :data:`audit.reporters.charts.CHART_SERVICES`) where there are more; and how many services
    there are (0: none cut)."""
    view, audit = model.months, model.audit
    if view is None or not services_words(audit):
        return view, 0
    names = {str(n) for m in (audit.get("months") or {}).get("months") or [] for n in m.get("services") or {}}
    cut = names - set(chart_services(audit))
    rows = [r for r in view.rows if not any(str(r.get("label", "")).startswith(f"{n}: ") for n in cut)]
    return dataclasses.replace(view, rows=rows), len(names | set(audit.get("services") or {}))


def clipped(model: ReportModel, limit: int) -> ReportModel:
    """Every data string of the rows the PDF prints (the first ``limit`` of each list) cut to
    :data:`PDF_CHARS`; ``model.audit`` (the document itself, which the template reads only for
    counts and the tool's name) is left as it is."""
    changes = {f.name: _clip_value(getattr(model, f.name), limit)
               for f in dataclasses.fields(model) if f.name not in ("audit", "print_limits")}
    return dataclasses.replace(model, **changes)


def _clip_value(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, list):
        return [_clip_value(v, limit) for v in value[:limit]] + value[limit:]
    if isinstance(value, tuple):
        return tuple(_clip_value(v, limit) for v in value)
    if isinstance(value, dict):
        return {k: _clip_value(v, limit) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _clip_value(getattr(value, f.name), limit)
                                             for f in dataclasses.fields(value) if f.init})
    return value


def clip(text: str, chars: int = PDF_CHARS) -> str:
    """``text`` if it has at most ``chars`` characters; else its start, cut at the last list
    separator (or space) in the final fifth, with "… (N more characters in report.html)"."""
    if len(text) <= chars:
        return text
    end = chars
    for separator in SEPARATORS:
        at = text.rfind(separator, chars * 4 // 5, chars)
        if at > 0:
            end = at
            break
    return f"{text[:end]} … ({len(text) - end:,} more characters in report.html)"


def top_rows(model: ReportModel, limit: int) -> ReportModel:
    """``model`` with each table that has an amount and more than ``limit`` rows put in order of
    that amount, largest first (ties in the table's order), so that the PDF prints the largest;
    a table at or under the limit keeps its order (the PDF of a small case is unchanged). The
    unattributed parts are put in order over :data:`PAGE_ONE_ROWS`: page 1 prints that many."""
    audit = model.audit
    coverage = audit.get("coverage") or {}
    buckets = [dataclasses.replace(b, parts=_largest(
        b.parts, ((audit.get("buckets") or {}).get(b.key) or {}).get("parts") or [], "amount",
        min(limit, PAGE_ONE_ROWS) if b.key == "unattributed" else limit)) for b in model.buckets]
    buckets = [dataclasses.replace(b, rest=_rest(((audit.get("buckets") or {}).get(b.key) or {}).get("parts") or [],
                                                  b.parts, "amount", limit, audit.get("currency") or ""))
               for b in buckets]
    nodes = coverage.get("by_node") or []
    return dataclasses.replace(
        model, buckets=buckets,
        classes=_largest(model.classes, audit.get("classes") or [], "net", limit),
        gpu_split=_largest(model.gpu_split, audit.get("gpu_split") or [], "paid_gpu_hours", limit),
        coverage={**model.coverage, "by_node": _largest(model.coverage.get("by_node") or [], nodes,
                                                        "paid_gpu_hours", limit),
                  "rest": _node_rest(nodes, len(model.coverage.get("by_node") or []), limit)},
        findings=_largest(model.findings, audit.get("findings") or [], "cost", limit))


def _left_out(raw: list[dict], shown: int, key: str, limit: int) -> list[dict]:
    """The rows of ``raw`` the PDF leaves out (its view has ``shown`` rows; the first ``limit`` of
    them print, largest |key| first as :func:`_largest` puts them); none where nothing is cut."""
    if shown <= limit or shown != len(raw):
        return []
    return [raw[i] for i in sorted(range(len(raw)), key=lambda i: -_magnitude(raw[i].get(key)))[limit:]]


def _total(rows: list[dict], key: str) -> Decimal | None:
    values = [_number(r.get(key)) for r in rows if r.get(key) is not None]
    return sum(values, Decimal(0)) if values else None


def _rest(raw: list[dict], shown: list, key: str, limit: int, currency: str) -> dict[str, str]:
    """The parts a bucket's table leaves out, counted and summed (amount and GPU-hours), so that the
    printed rows and this line add up to the bucket's total; empty where none is left out."""
    rest = _left_out(raw, len(shown), key, limit)
    if not rest:
        return {}
    hours = _total(rest, "gpu_hours")
    return {"count": f"{len(rest):,}", "amount": money(_total(rest, key), currency),
            "gpu_hours": number(hours, 2) if hours is not None else "—"}


def _node_rest(raw: list[dict], shown: int, limit: int) -> dict[str, str]:
    """The nodes the coverage table leaves out, counted, with their paid and observed GPU-hours."""
    rest = _left_out(raw, shown, "paid_gpu_hours", limit)
    if not rest:
        return {}
    paid, seen = _total(rest, "paid_gpu_hours"), _total(rest, "observed_gpu_hours")
    beyond = _total(rest, "seen_unpaid_gpu_hours")
    return {"count": f"{len(rest):,}", "paid": number(paid, 2) if paid is not None else NOT_MEASURED,
            "observed": number(seen, 2) if seen is not None else NOT_MEASURED,
            "seen_unpaid": number(beyond, 2) if beyond is not None else "0.00"}


def _number(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return Decimal(0)


def _largest(rows: list, raw: list[dict], key: str, limit: int) -> list:
    """``rows`` (the view of ``raw``, row for row) by |raw[key]|, largest first, when over ``limit``."""
    if len(rows) <= limit or len(rows) != len(raw):
        return rows
    order = sorted(range(len(rows)), key=lambda i: -_magnitude(raw[i].get(key)))
    return [rows[i] for i in order]


def _magnitude(value: Any) -> Decimal:
    try:
        return abs(Decimal(str(value))) if value is not None else Decimal(0)
    except InvalidOperation:
        return Decimal(0)
