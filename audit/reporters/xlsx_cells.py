"""What each spreadsheet column holds, its readable header and its number format.

The workbook's tables are the CSV tables (:func:`audit.reporters.csv.build_tables`) plus a summary
and the findings; here each column is given a *kind*:

* ``money``: an amount in the case currency, a numeric cell with a currency format
  (``#,##0.00 "USD"``), as many decimals as the column's amounts carry (at least 2);
* ``unit``: a unit cost (per request, per 1,000 requests, per 1 M tokens, per GPU-hour), a
  currency format with at least 6 decimals (METHOD §4);
* ``qty``: a quantity (GPU-hours, months, hours, requests per currency unit), ``#,##0.00``-style
  with the column's decimals;
* ``int``: a count, ``#,##0``;
* ``pct``: a fraction shown as a percentage, as many decimals as the fraction carries.

A value becomes a number only in a typed column and only when it is a finite decimal: the
Decimal of its audit.json text, never a float computed here, stored in the sheet as its exact
fixed-point text (``<v>90745.49</v>``, never ``0E-8``). A spreadsheet holds a number as a double,
exact to 15 significant digits: a longer amount (beyond 10^13 at the cent) stays an exact text
cell. Everything else (names, reasons, a number-looking name) is a text cell.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from audit.reporters.csv import BANDS, Table, is_number
from audit.reporters.plan_view import INPUT_KINDS

BAND_GROUPS = ("monthly_saving", "one_off_cost", "payback_months", "effort_hours", "marginal_saving",
               "gross_saving", "combined_saving")
MONEY = {"amount", "bucket_amount", "cost", "owned_lines", "shared_cost", "total_cost", "unattributed",
         "model_compute", "serving_path", "platform_overhead", "top_down", "bottom_up", "gross", "tax",
         "credits", "net", "profile_cost", "total", "invoice_total", "outside_scope",
         "prefill_cost", "decode_cost", "prefill_service_cost", "decode_service_cost",
         "part_monthly", "run_cost_monthly",
         *(f"{g}_{k}" for g in ("monthly_saving", "one_off_cost", "marginal_saving", "gross_saving",
                                "combined_saving") for k in BANDS),
         "break_even_monthly_saving"}
QTY = {*(f"{g}_{k}" for g in ("payback_months", "effort_hours") for k in BANDS), "payback_at_low", "payback_at_high"}
INTS = {"requests", "all_requests", "prompt_tokens", "generated_tokens", "gpus", "rows", "lines", "rank", "trace_rank",
        "days",
        *(f"request_log_{k}" for k in ("lines", "successful", "failed", "health_checks", "unparseable",
                                       "other_paths"))}
PCT = {"bucket_share", "share", "mean_busy_fraction", "gap_ratio", "gap", "tolerance", "prefill_share",
       "decode_share"}
QTY_SUFFIXES = ("_hours", "_months", "_gpu_hours", "_ms")
UNIT_PREFIXES = ("cost_per_", "price_per_")
MIN_DECIMALS = {"money": 2, "unit": 6, "qty": 0, "pct": 0, "int": 0}
EXACT_DIGITS = 15

HEADERS = {
    "trace_rank": "Trace Rank (Process)",
    "acts_on": "Part", "id": "ID", "sha256": "SHA-256", "gpus": "GPUs", "cost_per_1k_requests":
    "Cost per 1,000 Requests", "cost_per_1m_tokens": "Cost per 1 M Tokens", "gpu_ms": "GPU ms",
    "covered_hours": "Covered Hours", "one_off_cost": "One-off Cost", "effort_hours": "Engineering Hours",
    "mean_busy_fraction": "Mean Busy Share", "gap_ratio": "Gap Ratio", "bucket_share": "Share of Total",
    "requests": "Requests", "requests_per_currency_unit_successful": "Requests per Currency Unit (Successful)",
    "requests_per_currency_unit_all": "Requests per Currency Unit (All)",
    "cost_per_1k_all_requests": "Cost per 1,000 Requests (All Requests)",
    "owned_lines": "Owned Billing Lines", "total_cost": "Total Cost (Own + Shared)",
    "phases_source": "Prefill / Decode Source", "phases_also": "Prefill / Decode Also Measured By",
    "phases_reason": "Prefill / Decode Reason", "payback_at_low": "Payback at Low (Months)",
    "payback_at_high": "Payback at High (Months)", "low": "Input Low", "high": "Input High",
}
SMALL = {"per", "of", "by", "in", "on", "to", "and", "a", "the"}
ACRONYMS = {"gpu": "GPU", "gpus": "GPUs", "id": "ID", "cpu": "CPU", "1m": "1 M", "1k": "1,000", "url": "URL"}


def kind_of(column: str) -> str | None:
    """The kind of a column from its audit.json key (None: text)."""
    if column in MONEY:
        return "money"
    if column.startswith(UNIT_PREFIXES):
        return "unit"
    if column in PCT:
        return "pct"
    if column in INTS:
        return "int"
    if column in QTY or column.endswith(QTY_SUFFIXES) or column.startswith("requests_per_"):
        return "qty"
    return None


def cell_kinds(name: str, head: list[str], rows: list[list[Any]]) -> list[list[str | None]]:
    """The kind of each cell of a table: its column's, except the sensitivity table's low / high,
    whose kind is the input's (a saving or a rate: money; effort: hours)."""
    kinds = [kind_of(column) for column in head]
    if name != "sensitivity":
        return [kinds] * len(rows)
    at = {head.index("low"), head.index("high")}
    by_row = []
    for row in rows:
        kind = INPUT_KINDS.get(str(row[head.index("input")]), "qty")
        by_row.append([kind if i in at else k for i, k in enumerate(kinds)])
    return by_row


def header(column: str) -> str:
    """A readable header: ``monthly_saving_low`` → ``Monthly Saving (Low)``."""
    for group in BAND_GROUPS:
        for band in BANDS:
            if column == f"{group}_{band}":
                return f"{header(group)} ({band.title()})"
    if column in HEADERS:
        return HEADERS[column]
    words = column.split("_")
    return " ".join(ACRONYMS.get(w, w if i and w in SMALL else w[:1].upper() + w[1:])
                    for i, w in enumerate(words))


def number(value: Any) -> Any:
    """The cell value of a typed column: an int as it is, a decimal text as its exact Decimal
    (None where it is not a finite decimal, or too long to survive as a spreadsheet number)."""
    if isinstance(value, bool) or not is_number(value):
        return None
    if isinstance(value, int):
        return value
    exact = Decimal(value)
    return exact if len(exact.as_tuple().digits) <= EXACT_DIGITS else None


def decimals(value: Any) -> int:
    """Decimal places of an audit.json number (0 for an int)."""
    if isinstance(value, int) or not is_number(value):
        return 0
    exponent = Decimal(value).as_tuple().exponent
    return -exponent if isinstance(exponent, int) and exponent < 0 else 0


def number_format(kind: str, places: int, currency: str) -> str:
    """The Excel number format of a kind with ``places`` decimals (at least the kind's minimum)."""
    if kind == "pct":
        places = max(0, places - 2)
        return "0" + ("." + "0" * places if places else "") + "%"
    places = max(places, MIN_DECIMALS[kind])
    body = "#,##0" + ("." + "0" * places if places else "")
    return f'{body} "{currency}"' if kind in ("money", "unit") else body


def safe_currency(code: Any) -> str:
    """The case currency for a number format: letters only (a format string is parsed by the app)."""
    letters = re.sub(r"[^A-Za-z]", "", str(code or ""))[:8]
    return letters.upper() or "USD"


# --- tables that only the workbook has --------------------------------------------------------

def summary_table(a: dict) -> tuple[Table, list[str | None]]:
    """The audit in one column of field / value, with the kind of each row's value."""
    window, recon = a.get("window") or {}, a.get("reconciliation") or {}
    rows: list[tuple[str, Any, str | None]] = [
        ("Case", a.get("case"), None), ("Window Start", window.get("start"), None),
        ("Window End", window.get("end"), None), ("Days", window.get("days"), "qty"),
        ("Currency", a.get("currency"), None), ("Cost Basis", a.get("cost_basis"), None),
        ("Total in Scope", a.get("total"), "money"), ("Invoice Total", a.get("invoice_total"), "money"),
        ("Outside Scope", (a.get("outside_scope") or {}).get("amount"), "money"),
    ]
    rows += [(f"Bridge: {header(k)}", v, "money") for k, v in (a.get("bridge") or {}).items()]
    rows += [(f"Bucket: {header(k)}", b.get("amount"), "money") for k, b in (a.get("buckets") or {}).items()]
    rows += [(f"Reconciliation: {header(k)}", recon.get(k), kind) for k, kind in (
        ("verdict", None), ("gap", "pct"), ("tolerance", "pct"), ("top_down", "money"), ("bottom_up", "money"))]
    return (["field", "value"], [[label, value] for label, value, _ in rows]), [kind for *_, kind in rows]


#: a finding's ``rank`` is its trace's process rank (docs/trace.md), not an order: it is shown beside
#: the trace, headed so; the rows keep audit.json's order (by GPU time)
FINDING_COLUMNS = ("title", "service", "bucket", "part", "cost", "share", "gpu_ms", "kernel",
                   "profile", "trace", "trace_rank", "device", "fix", "cost_basis", "price_per_gpu_hour", "profile_cost",
                   "evidence", "reason", "id", "call_path")


def findings_table(a: dict) -> Table:
    """The kernel-level findings (METHOD §6), one row each; evidence as ``key=value`` pairs."""
    def value(f: dict, column: str) -> Any:
        if column == "evidence":
            return "; ".join(f"{k}={v}" for k, v in sorted((f.get("evidence") or {}).items()))
        return f.get("rank" if column == "trace_rank" else column)
    return list(FINDING_COLUMNS), [[value(f, c) for c in FINDING_COLUMNS] for f in a.get("findings") or []]
