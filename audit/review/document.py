"""review.json: the audits, and per consecutive pair the bridge, the services and buckets side by
side, coverage, the lines that appeared or vanished and the realised savings (docs/review.md).

The headline is the last pair. A pair whose audits differ in method version, cost basis, scope or
currency gets no bridge (``bridge`` null, effects null) and says why in ``reasons``; the top-level
``comparable`` and ``reasons`` are the last pair's, with every other pair's reasons after them; the
top-level ``notes`` carry each pair's ``notes`` (what the effects read differently: a component with
a cost but no quantity read as currency, audit/review/effects.py).
"""
from __future__ import annotations

from typing import Sequence

from audit import __version__
from audit.billing_words import billing_formats
from audit.money import cents, fmt
from audit.review.bridge import pair_bridge, side_by_side
from audit.review.buckets import bucket_rows
from audit.review.comparable import coverage, coverage_share, method_of, reasons
from audit.review.effects import Split
from audit.review.lines import changed_lines
from audit.review.load import Audit
from audit.review.realised import realised

FORMAT_VERSION = 1  # 1: first published layout
#: the method version (../shared/METHOD.md §10) whose review rules this document follows
METHOD_VERSION = "2026-12"


def review(audits: Sequence[Audit]) -> dict:
    """The review.json document of two or more audits, oldest first."""
    if len(audits) < 2:
        raise ValueError("a review needs two audits or more")
    pairs = [pair(i, audits[i], i + 1, audits[i + 1]) for i in range(len(audits) - 1)]
    last = pairs[-1]
    others = [f"audits {p['from'] + 1} → {p['to'] + 1}: {r}" for p in pairs[:-1] for r in p["reasons"]]
    return {
        "meta": {"format": FORMAT_VERSION, "tool": "costaudit", "version": __version__, "method": METHOD_VERSION},
        "audits": [audit_entry(a) for a in audits],
        "comparable": all(p["comparable"] for p in pairs),
        "reasons": last["reasons"] + others,
        "pairs": pairs,
        "notes": notes(audits, pairs),
    }


def audit_entry(audit: Audit) -> dict:
    window = audit.get("window")
    share = coverage_share(audit)
    return {"case": audit.get("case"), "window": {"start": window.get("start"), "end": window.get("end")},
            "currency": audit.get("currency"), "cost_basis": audit.get("cost_basis"),
            "billing_formats": billing_formats(audit.get("sources", default=[]) or []), "method": method_of(audit),
            "scope": audit.get("scope", default=None), "total": str(cents(audit.money("total"))),
            "coverage_share": fmt(share, 6), "path": audit.path}


def pair(i: int, earlier: Audit, j: int, later: Audit) -> dict:
    """One consecutive pair: bridge (or the reasons there is none) and what is shown beside it."""
    why = reasons(earlier, later)
    same_currency = earlier.get("currency") == later.get("currency")
    splits: dict[str, Split] = {}
    if why:
        bridge, services = None, side_by_side(earlier, later, why[0])
    else:
        bridge, services, splits = pair_bridge(earlier, later)
    if not same_currency:
        for row in services:
            row["change"] = None
    return {"from": i, "to": j, "comparable": not why, "reasons": why, "bridge": bridge, "services": services,
            "buckets": bucket_rows(earlier, later, compare=same_currency), "coverage": coverage(earlier, later),
            "lines": changed_lines(earlier, later) if same_currency else
            {"threshold": None, "appeared": [], "vanished": [], "note": "not compared: the currencies differ"},
            "realised": realised(earlier, later, why),
            "notes": [f"{name}: {note}" for name, found in splits.items() for note in found.notes]}


def notes(audits: Sequence[Audit], pairs: list[dict]) -> list[str]:
    """The review's notes: how the bridge reads, then each pair's own (a component read as currency),
    prefixed by its audits where there are several pairs."""
    out = ["Each bridge runs from the earlier total to the later one; per service the change splits exactly into "
           "volume, price, efficiency and overhead (METHOD §10), rounded once by largest remainder to the change "
           "of the rounded figures."]
    if len(pairs) > 1:
        out.append(f"{len(audits)} audits: each consecutive pair is compared; the headline is the last pair.")
    return out + [f"audits {p['from'] + 1} → {p['to'] + 1}: {n}" if len(pairs) > 1 else n
                  for p in pairs for n in p["notes"]]
