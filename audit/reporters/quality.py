"""Telemetry data quality for display: the samples each source had excluded, and counter resets.

Read from audit.json's ``telemetry.excluded_samples`` and ``telemetry.counter_resets``; page 1
carries one sentence per source, metric and reason (at most ``PAGE_ONE``, then how many more), so
that a reviewer sees "12 DCGM_FI_PROF_GR_ENGINE_ACTIVE samples from source prom (openmetrics) were
out of range (expected 0 to 1, e.g. 7.5) and excluded" before any figure that rests on them.
Sources, metric names and examples are untrusted text: the template autoescapes them.

Beside it, :func:`misfits` gives page 1's notice of what of the case matches nothing in the data
(audit.json ``fit``, audit/fit.py): one sentence each, errors first, at most ``PAGE_ONE``; their
values come from the data and the case, cut to readable length by the writer, escaped by the template.
"""
from __future__ import annotations

from typing import Any

from audit.reporters.formatting import number

PAGE_ONE = 6
WHAT = {"out of range": "out of range", "not finite": "not finite",
        "negative counter value": "negative counter values"}


def sentence(entry: dict) -> str:
    """One excluded-samples entry as a sentence."""
    count = int(entry.get("count") or 0)
    reason = str(entry.get("reason") or "")
    what = WHAT.get(reason, reason)
    if reason == "negative counter value" and count == 1:
        what = "a negative counter value"
    detail = []
    if reason == "out of range" and entry.get("expected"):
        detail.append(f"expected {entry['expected']}")
    if entry.get("example"):
        detail.append(f"e.g. {entry['example']}")
    noun, verb = ("sample", "was") if count == 1 else ("samples", "were")
    tail = f" ({', '.join(detail)})" if detail else ""
    return (f"{number(count)} {entry.get('metric', '')} {noun} from source {entry.get('source', '')} "
            f"{verb} {what}{tail} and excluded.")


def excluded_rows(telemetry: dict) -> list[dict[str, str]]:
    """The excluded-samples table rows, formatted."""
    return [{"source": str(e.get("source") or ""), "metric": str(e.get("metric") or ""),
             "reason": str(e.get("reason") or ""), "count": number(e.get("count")),
             "expected": str(e.get("expected") or ""), "example": str(e.get("example") or ""),
             "first_at": str(e.get("first_at") or ""), "sentence": sentence(e)}
            for e in telemetry.get("excluded_samples") or []]


def reset_rows(telemetry: dict) -> list[dict[str, str]]:
    """The counter-resets table rows, formatted."""
    return [{"source": str(r.get("source") or ""), "metric": str(r.get("metric") or ""),
             "resets": number(r.get("resets"))} for r in telemetry.get("counter_resets") or []]


def page_one(audit: dict[str, Any]) -> dict[str, Any]:
    """What page 1 says: the first sentences, how many more, and whether intervals were lost."""
    rows = excluded_rows(audit.get("telemetry") or {})
    parts = ((audit.get("buckets") or {}).get("unattributed") or {}).get("parts") or []
    lost = any(p.get("name") == "no_valid_activity_sample" for p in parts)
    return {"sentences": [r["sentence"] for r in rows[:PAGE_ONE]],
            "more": max(0, len(rows) - PAGE_ONE), "intervals_unmeasured": lost}


def misfits(audit: dict[str, Any]) -> dict[str, Any]:
    """What page 1 says of the case's fit: the first misfit sentences (errors first) and how many more."""
    found = [m for m in audit.get("fit") or [] if isinstance(m, dict)]
    found.sort(key=lambda m: m.get("severity") != "error")
    return {"sentences": [_sentence(str(m.get("message") or "")) for m in found[:PAGE_ONE]],
            "more": max(0, len(found) - PAGE_ONE), "count": len(found)}


def _sentence(message: str) -> str:
    message = message[:1].upper() + message[1:]
    return message if message.endswith((".", "?", "!")) else message + "."
