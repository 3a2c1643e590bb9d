"""The review workbook (review.xlsx): one sheet per table of the review, money as numeric cells
with the currency's number format, every data string a text cell (never a formula: a service
named ``=HYPERLINK(…)`` stays text). The cells are typed and written by the audit workbook's own
helpers (:func:`audit.reporters.xlsx.fill`, :mod:`audit.reporters.xlsx_cells`), and the file is
the same bytes for the same document (:func:`audit.reporters.xlsx.reproducible`).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from audit.reporters.review_view import EFFECTS, evidence_rows
from audit.reporters.xlsx import fill, reproducible
from audit.reporters.xlsx_cells import safe_currency

#: a sheet: (column keys, rows of raw review.json values, the kind of each column)
Sheet = tuple[list[str], list[list[Any]], list[str | None]]


def review_sheets(document: dict) -> dict[str, Sheet]:
    """Every sheet of the review workbook, in order (a pair's sheets carry its audits' cases)."""
    audits = document.get("audits") or []
    sheets: dict[str, Sheet] = {"Audits": (
        ["case", "window_start", "window_end", "currency", "cost_basis", "method", "total", "coverage_share", "path"],
        [[a.get("case"), (a.get("window") or {}).get("start"), (a.get("window") or {}).get("end"), a.get("currency"),
          a.get("cost_basis"), a.get("method"), a.get("total"), a.get("coverage_share"), a.get("path")] for a in audits],
        [None, None, None, None, None, None, "money", "pct", None])}
    pairs = document.get("pairs") or []
    for n, pair in enumerate(pairs, 1):
        tag = "" if len(pairs) == 1 else f" {n}"
        sheets[f"Bridge{tag}"] = _bridge(pair)
        sheets[f"Services{tag}"] = _services(pair)
        sheets[f"Buckets{tag}"] = _buckets(pair)
        sheets[f"Lines{tag}"] = _lines(pair)
        sheets[f"Realised savings{tag}"] = _realised(pair)
    sheets["Notes"] = (["note"], [[n] for n in document.get("notes") or []]
                       + [[r] for r in document.get("reasons") or []], [None])
    return sheets


def _bridge(pair: dict) -> Sheet:
    bridge = pair.get("bridge") or {}
    rows: list[list[Any]] = []
    if bridge:
        rows.append(["Earlier total", "total", None, bridge.get("from_total")])
        rows += [[s.get("label"), s.get("kind"), s.get("service"), s.get("amount")] for s in bridge.get("steps") or []]
        rows.append(["Later total", "total", None, bridge.get("to_total")])
    else:
        rows += [[f"No bridge: {r}", None, None, None] for r in pair.get("reasons") or []]
    return ["step", "kind", "service", "amount"], rows, [None, None, None, "money"]


def _services(pair: dict) -> Sheet:
    head = ["service", "status", "cost_from", "cost_to", "change", *EFFECTS, "requests_from", "requests_to",
            "unit_cost_from", "unit_cost_to", "driver"]
    rows = [[s.get("service"), s.get("status"), s.get("cost_from"), s.get("cost_to"), s.get("change"),
             *((s.get("effects") or {}).get(k) for k in EFFECTS), s.get("requests_from"), s.get("requests_to"),
             s.get("unit_cost_from"), s.get("unit_cost_to"), s.get("driver")] for s in pair.get("services") or []]
    kinds: list[str | None] = [None, None, *["money"] * (3 + len(EFFECTS)), "int", "int", "unit", "unit", None]
    head[11:13] = ["unit_cost_from_per_1k_requests", "unit_cost_to_per_1k_requests"]
    return head, rows, kinds


def _buckets(pair: dict) -> Sheet:
    head = ["bucket", "amount_from", "amount_to", "share_from", "share_to", "change", "driver"]
    rows = [[b.get(k) for k in head] for b in pair.get("buckets") or []]
    return head, rows, [None, "money", "money", "pct", "pct", "money", None]


def _lines(pair: dict) -> Sheet:
    lines = pair.get("lines") or {}
    rows = [[way, x.get("kind"), x.get("id"), x.get("amount")]
            for way in ("appeared", "vanished") for x in lines.get(way) or []]
    return ["change", "kind", "id", "amount"], rows, [None, None, None, "money"]


def _realised(pair: dict) -> Sheet:
    head = ["option", "service", "shipped", "part", "projection_low", "projection_expected", "projection_high",
            "realised_monthly", "released_on_committed_monthly", "verdict", "note", "evidence"]
    rows = []
    for r in pair.get("realised") or []:
        p = r.get("projection") or {}
        evidence = "; ".join(f"{k}={v}" for k, v in evidence_rows(r.get("evidence")))
        rows.append([r.get("option"), r.get("service"), r.get("shipped"), r.get("part"), p.get("low"),
                     p.get("expected"), p.get("high"), r.get("realised"), r.get("released_on_committed"),
                     r.get("verdict"), r.get("note"), evidence])
    return head, rows, [None, None, None, None, "money", "money", "money", "money", "money", None, None, None]


def write_review_xlsx(document: dict, path: Path) -> None:
    from openpyxl import Workbook

    audits = document.get("audits") or [{}]
    currency = safe_currency(audits[-1].get("currency"))
    book = Workbook()
    book.remove(book.active)
    for name, (head, rows, kinds) in review_sheets(document).items():
        fill(book.create_sheet(name[:31]), head, rows, [kinds] * len(rows), currency)
    buffer = io.BytesIO()
    book.save(buffer)
    end = str(((audits[-1].get("window") or {}).get("end")) or "2000-01-01T00:00:00Z")
    Path(path).write_bytes(reproducible(buffer.getvalue(), end))
