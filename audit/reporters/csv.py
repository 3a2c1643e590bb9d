"""CsvReporter: the report's tables as CSV files in ``tables/``, numbers as exact decimal strings.

Data strings are untrusted: a cell that a spreadsheet would run as a formula gets a leading
apostrophe (:func:`neutralised`); a control or bidi character is written as its escape
(:func:`audit.reporters.formatting.shown`: U+202E as `\\u202e`).

:func:`build_tables` is shared with the spreadsheet reporter: one declaration per table.
"""

from __future__ import annotations

import csv
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from audit.buckets import BUCKETS
from audit.reporters.formatting import shown
from audit.reporters.months_view import months_table

Table = tuple[list[str], list[list[Any]]]
CSV_TABLES = ("buckets", "services", "options", "plan", "sensitivity", "reconciliation", "coverage",
              "gpu_split", "sources")
BANDS = ("low", "expected", "high")


def _band(values: dict | None) -> list[Any]:
    return [(values or {}).get(k) for k in BANDS]


def buckets_table(a: dict) -> Table:
    head = ["bucket", "bucket_amount", "bucket_share", "part", "service", "amount", "gpu_hours",
            "source", "reason"]
    rows = []
    for key in BUCKETS:
        b = (a.get("buckets") or {}).get(key) or {}
        for p in b.get("parts") or []:
            rows.append([key, b.get("amount"), b.get("share"), p.get("name"), p.get("service"),
                         p.get("amount"), p.get("gpu_hours"), p.get("source"), p.get("reason")])
    return head, rows


SERVICE_COSTS = ("requests", "prompt_tokens", "generated_tokens", "gpu_hours", "cost", "owned_lines",
                 "shared_cost", "allocation_key", "total_cost", "unattributed", "cost_per_request",
                 "cost_per_1k_requests", "cost_per_1k_all_requests", "cost_per_1m_tokens")
#: the request log's classes behind the denominator (audit.json services[].request_counts; they sum to lines)
REQUEST_CLASSES = ("lines", "successful", "failed", "health_checks", "unparseable", "other_paths")
PHASE_COLUMNS = ("prefill_share", "decode_share", "prefill_cost", "decode_cost", "prefill_service_cost",
                 "decode_service_cost", "cost_per_1m_prompt_tokens", "cost_per_1m_generated_tokens",
                 "phases_source", "phases_also", "phases_reason")


def services_table(a: dict) -> Table:
    """Per service: what it owns, its shared cost and key, the total behind every unit cost, the unit
    costs over successful and over all requests (and what counted all requests), the request log's classes, the
    prefill / decode split."""
    head = ["service", *SERVICE_COSTS, "requests_per_currency_unit_successful", "requests_per_currency_unit_all",
            "all_requests", "all_requests_source",
            *(f"request_log_{k}" for k in REQUEST_CLASSES), "request_log_source", "request_log_denominator",
            *BUCKETS[:3],
            "traffic_source", *PHASE_COLUMNS, "reason"]
    rows = []
    for name, s in (a.get("services") or {}).items():
        per_unit, counts = s.get("requests_per_currency_unit") or {}, s.get("request_counts") or {}
        rows.append([name, *(s.get(c) for c in SERVICE_COSTS), per_unit.get("successful"), per_unit.get("all"),
                     s.get("all_requests"), s.get("all_requests_source"),
                     *(counts.get(k) for k in REQUEST_CLASSES), counts.get("source"), counts.get("denominator"),
                     *((s.get("by_bucket") or {}).get(k) for k in BUCKETS[:3]), s.get("traffic_source"),
                     *_phases(s.get("phases")), s.get("reason")])
    return head, rows


def _phases(phases: dict | None) -> list[Any]:
    """The prefill / decode cells (METHOD §4): shares, costs, per-token costs, the source, or why not measured."""
    if not phases:
        return [None] * len(PHASE_COLUMNS)
    prefill, decode = phases.get("prefill") or {}, phases.get("decode") or {}
    reason = phases.get("reason")
    if prefill.get("share") is None and reason:
        reason = f"not measured: {reason}"
    also = "; ".join(f"{x.get('source')}: prefill share {x.get('prefill_share')}" for x in phases.get("also") or [])
    return [prefill.get("share"), decode.get("share"), prefill.get("cost"), decode.get("cost"),
            prefill.get("service_cost"), decode.get("service_cost"), phases.get("cost_per_1m_prompt_tokens"),
            phases.get("cost_per_1m_generated_tokens"), prefill.get("source"), also or None, reason]


def options_table(a: dict) -> Table:
    """One row per option; its basis (modelled or assumed, METHOD §7) and the basis's note (why it is
    assumed, or how a model's low / high were made) beside the saving, as audit.json and the report give it."""
    groups = ("monthly_saving", "one_off_cost", "payback_months", "effort_hours", "marginal_saving")
    head = ["rank", "id", "title", "bucket", "acts_on", "status", "basis", "basis_note",
            *(f"{g}_{k}" for g in groups for k in BANDS), "break_even_monthly_saving", "owners", "next_step",
            "depends_on", "overridden", "reason", "assumptions"]
    rows = [[o.get("rank"), o.get("id"), o.get("title"), o.get("bucket"), o.get("acts_on"),
             o.get("status"), o.get("basis"), o.get("basis_note"), *(v for g in groups for v in _band(o.get(g))),
             o.get("break_even_monthly_saving"),
             " | ".join(o.get("owners") or []), o.get("next_step"), " | ".join(o.get("depends_on") or []),
             str(bool(o.get("overridden"))).lower(), o.get("reason"),
             " | ".join(o.get("assumptions") or [])] for o in a.get("options") or []]
    return head, rows


def reconciliation_table(a: dict) -> Table:
    r = a.get("reconciliation") or {}
    head = ["row", "name", "subject", "top_down", "bottom_up", "gap", "tolerance", "verdict",
            "covered_hours", "detail"]
    rows = [["verdict", "", "", r.get("top_down"), r.get("bottom_up"), r.get("gap"),
             r.get("tolerance"), r.get("verdict"), r.get("covered_hours"), r.get("reason")]]
    rows += [["driver", d.get("name"), d.get("subject"), None, None, d.get("gap"), None, None, None,
              d.get("detail")] for d in r.get("drivers") or []]
    return head, rows


def coverage_table(a: dict) -> Table:
    cols = ["node", "resource_id", "instance_type", "paid_gpu_hours", "observed_gpu_hours", "seen_unpaid_gpu_hours"]
    return cols, [[n.get(c) for c in cols] for n in (a.get("coverage") or {}).get("by_node") or []]


def gpu_split_table(a: dict) -> Table:
    cols = ["service", "gpus", "paid_gpu_hours", "kernel_active_gpu_hours", "in_flight_idle_gpu_hours",
            "overhead_gpu_hours", "mean_busy_fraction", "gap_ratio", "busy_source"]
    return cols, [[g.get(c) for c in cols] for g in a.get("gpu_split") or []]


def sources_table(a: dict) -> Table:
    head = ["name", "kind", "format", "path", "rows", "covered_start", "covered_end", "sha256",
            "status", "reason"]
    rows = [[s.get("name"), s.get("kind"), s.get("format"), s.get("path"), s.get("rows"),
             (s.get("covered") or {}).get("start"), (s.get("covered") or {}).get("end"),
             s.get("sha256"), s.get("status"), s.get("reason")] for s in a.get("sources") or []]
    return head, rows


def classes_table(a: dict) -> Table:
    cols = ["class", "gross", "tax", "credits", "net", "lines"]
    return cols, [[c.get(k) for k in cols] for c in a.get("classes") or []]


def plan_table(a: dict) -> Table:
    """The ranked options combined per part, then the whole plan (audit.json plan, METHOD §7)."""
    head = ["part", "part_monthly", "options", *(f"gross_saving_{k}" for k in BANDS), "run_cost_monthly",
            *(f"combined_saving_{k}" for k in BANDS)]
    plan = a.get("plan") or {}
    parts = list(plan.get("by_part") or []) + ([plan["total"]] if plan.get("total") else [])
    rows = [[p.get("part"), p.get("part_monthly"), " | ".join(p.get("options") or []), *_band(p.get("gross_saving")),
             p.get("run_cost_monthly"), *_band(p.get("combined_saving"))] for p in parts]
    return head, rows


def sensitivity_table(a: dict) -> Table:
    """Per ranked option and input: the input's low and high and the expected payback at each
    (empty: no saving at that value); the option's expected payback beside them."""
    head = ["rank", "id", "title", "input", "low", "high", "payback_at_low", "payback_at_high",
            "payback_months_expected"]
    rows = [[o.get("rank"), o.get("id"), o.get("title"), s.get("input"), s.get("low"), s.get("high"),
             s.get("payback_at_low"), s.get("payback_at_high"), (o.get("payback_months") or {}).get("expected")]
            for o in a.get("options") or [] if o.get("rank") is not None for s in o.get("sensitivity") or []]
    return head, rows


TABLES = {
    "buckets": buckets_table, "services": services_table, "options": options_table,
    "reconciliation": reconciliation_table, "coverage": coverage_table,
    "gpu_split": gpu_split_table, "sources": sources_table, "classes": classes_table,
    "plan": plan_table, "sensitivity": sensitivity_table,
}


def build_tables(audit: dict) -> dict[str, Table]:
    """Every table of the report as (header, rows) of raw audit.json values (None = unmeasured)."""
    return {name: build(audit) for name, build in TABLES.items()}


# Spreadsheet applications run a cell that starts with one of these as a formula (OWASP, CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def is_number(value: Any) -> bool:
    """An int, or a string that is a finite decimal number (how amounts travel in audit.json)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if not isinstance(value, str):
        return False
    try:
        return Decimal(value).is_finite()
    except InvalidOperation:
        return False


def neutralised(text: str) -> str:
    """A data string that no spreadsheet reads as a formula: a leading ' where it would be one.

    Numbers (``-12.50``) are left as they are: they are data, and a spreadsheet reads them as numbers.
    """
    if text.startswith(FORMULA_START) and not is_number(text):
        return "'" + text
    return text


def cell(value: Any) -> str:
    """A CSV cell: empty for not measured; a data string with its control and bidi characters
    escaped (:func:`audit.reporters.formatting.shown`) and never a formula."""
    return "" if value is None else neutralised(shown(str(value)))


class CsvReporter:
    """Writes ``tables/<name>.csv`` for each table in CSV_TABLES; empty cell = not measured."""

    report_type = "csv"
    output = "tables"
    takes = "audit"
    is_dir = True

    def report(self, audit: dict, path: Path) -> None:
        tables = build_tables(audit)
        for name in CSV_TABLES:
            head, rows = tables[name]
            with open(Path(path) / f"{name}.csv", "w", newline="", encoding="utf-8") as fh:
                writer = csv.writer(fh, lineterminator="\n")
                writer.writerow(head)
                writer.writerows([[cell(v) for v in row] for row in rows])
        months = months_table(audit)
        if months is not None:  # the quarter as months (audit.json months): only when the window has them
            with open(Path(path) / "months.csv", "w", newline="", encoding="utf-8") as fh:
                writer = csv.writer(fh, lineterminator="\n")
                writer.writerow(months[0])
                writer.writerows([[cell(v) for v in row] for row in months[1]])
