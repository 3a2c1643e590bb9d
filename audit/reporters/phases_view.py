"""The report's prefill / decode rows (audit.json ``services[name].phases``, METHOD §4): per service,
each phase's share of model compute, its cost, the cost per 1 M prompt and per 1 M generated tokens,
and the source, or why the split is not measured."""
from __future__ import annotations

from typing import Any, Callable


def phase_rows(audit: dict[str, Any], money: Callable[[Any], str]) -> list[dict[str, str]]:
    """One row per service with a ``phases`` entry (none: the section is left out)."""
    rows = []
    for name, service in (audit.get("services") or {}).items():
        phases = service.get("phases")
        if not phases:
            continue
        prefill, decode = phases.get("prefill") or {}, phases.get("decode") or {}
        measured = prefill.get("share") is not None
        others = "; ".join(f"{a['source']}: prefill share {a['prefill_share']}" for a in phases.get("also") or [])
        rows.append({
            "service": str(name),
            "prefill_share": _percent(prefill.get("share")), "decode_share": _percent(decode.get("share")),
            "prefill_cost": money(prefill.get("cost")) if measured else "—",
            "decode_cost": money(decode.get("cost")) if measured else "—",
            "per_1m_prompt": money(phases.get("cost_per_1m_prompt_tokens")) if phases.get("cost_per_1m_prompt_tokens") else "—",
            "per_1m_generated": (money(phases.get("cost_per_1m_generated_tokens"))
                                 if phases.get("cost_per_1m_generated_tokens") else "—"),
            "source": str(prefill.get("source") or ""), "also": others,
            "reason": str(phases.get("reason") or "") if measured else f"not measured: {phases.get('reason')}",
        })
    return rows


def _percent(text: Any) -> str:
    return "—" if text is None else f"{float(text) * 100:.1f} %"
