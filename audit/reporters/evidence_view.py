"""The Evidence appendix's rows, formatted for display: serving-path evidence per service, label
mismatches between telemetry sources, kernel-level findings (split out of :mod:`audit.reporters.view`).

Values come from audit.json's decimal strings; names, sources, kernel names and call paths are
untrusted text (the template autoescapes them).
"""

from __future__ import annotations

from typing import Any

from audit.reporters.formatting import NOT_MEASURED, number, percent
from audit.reporters.wording import option_target

#: serving evidence figures shown, in order: key -> (label, formatter)
EVIDENCE_ROWS = (
    ("queue_seconds_per_request", "Queue time per request (s)", lambda v: number(v, 4)),
    ("batch_size", "Mean batch size", lambda v: number(v, 2)),
    ("tokens_per_step", "Tokens per engine step", lambda v: number(v, 1)),
    ("mean_running", "Mean requests running (per pod)", lambda v: number(v, 2)),
    ("mean_waiting", "Mean requests waiting (per pod)", lambda v: number(v, 2)),
    ("prefix_cache_hit_rate", "Prefix-cache hit rate", percent),
    ("kv_cache_usage", "KV-cache usage", percent),
    ("failed_requests", "Failed requests", lambda v: number(v, 0)),
    ("compute_infer_seconds_per_request", "Infer compute per request (s)", lambda v: number(v, 4)),
    ("sm_active", "SM active", percent),
    ("tensor_active", "Tensor pipe active", percent),
    ("dram_active", "DRAM active", percent),
    ("fb_used_mib", "Frame buffer used (MiB)", lambda v: number(v, 0)),
    ("power_watts", "Power (W)", lambda v: number(v, 1)),
    ("replicas_spec", "Replicas (spec)", lambda v: number(v, 2)),
    ("replicas_available", "Replicas (available)", lambda v: number(v, 2)),
    ("hpa_desired", "HPA desired replicas", lambda v: number(v, 2)),
)


def serving_evidence_rows(evidence: dict) -> list[dict[str, Any]]:
    """Rows of the evidence table: figure label, one value per service, sources or reasons.

    Values come from audit.json's decimal strings; an unmeasured figure reads "not measured"
    and its reason is listed (sources, names and reasons are untrusted text: autoescaped).
    """
    rows = []
    for key, title, fmt in EVIDENCE_ROWS:
        cells, notes = [], []
        for figures in evidence.values():
            figure = (figures or {}).get(key) or {}
            value = figure.get("value")
            cells.append(fmt(value) if value is not None else NOT_MEASURED)
            note = figure.get("source") if value is not None else figure.get("reason")
            if note and note not in notes:
                notes.append(str(note))
        rows.append({"label": title, "cells": cells, "notes": "; ".join(notes)[:600]})
    return rows


def mismatch_row(x: dict) -> dict[str, str]:
    """A label-mismatch finding for display."""
    values = [str(v) for v in x.get("values") or []]
    shown = ", ".join(values[:8]) + (" …" if int(x.get("count") or 0) > 8 else "")
    return {"check": str(x.get("check") or "").replace("_", " "), "source": str(x.get("source") or ""),
            "against": str(x.get("against") or ""), "label": str(x.get("label") or ""),
            "names": shown, "count": number(x.get("count")), "intervals": number(x.get("intervals"))}


def finding_row(f: dict, m) -> dict[str, str]:
    """A kernel-level finding for display (kernel names and call paths are untrusted text). Its part
    reads as the report names parts elsewhere ('Model compute · Kernel-active time'): words that
    break between words in the PDF's narrow Part column, where 'model_compute.kernel_active' could
    only break inside a name."""
    share, of_part = f.get("share"), f.get("share_of_part")
    return {"title": str(f.get("title") or f.get("id") or ""), "service": str(f.get("service") or ""),
            "kernel": str(f.get("kernel") or ""), "call_path": str(f.get("call_path") or "")[-300:],
            "share": f"{float(share) * 100:.2f} %" if share not in (None, "") else "—",
            "share_of_part": f"{float(of_part) * 100:.2f} %" if of_part not in (None, "") else "—",
            "part": option_target(f"{f.get('bucket', '')}.{f.get('part', '')}"),
            "cost": m(f["cost"]) if f.get("cost") is not None else "not measured",
            "fix": str(f.get("fix") or "")}
