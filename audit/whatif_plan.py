"""What-if's comparison: the plan and totals of two audit.json documents, and what changed between them.

Every figure is the audit.json decimal string, unchanged; a change is the exact difference of two of
them (``Decimal(after) - Decimal(before)``), never a float. The plan is one row per option (rank,
status, monthly saving, one-off cost, payback, each low / expected / high; the marginal saving too
where audit.json gives one); the totals are the total in scope, each bucket, the reconciliation
verdict, each service's total cost and cost per 1,000 requests, and every figure of audit.json's
``plan`` section where there is one (the combined saving of METHOD §7). Nothing changed is an empty
diff: ``{"options": [], "totals": {}}``.
"""
from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any, Iterator

#: the fields of an option row compared, in the order shown
OPTION_FIELDS = ("rank", "status", "monthly_saving", "one_off_cost", "payback_months")
#: fields compared where audit.json has them (the combined-saving rules add a marginal saving)
OPTIONAL_FIELDS = ("marginal_saving",)
BUCKET_NAMES = ("model_compute", "serving_path", "platform_overhead", "unattributed")
SERVICE_FIGURES = ("total_cost", "cost_per_1k_requests")


def plan_view(document: dict) -> dict:
    """The plan and totals of one audit.json document."""
    return {"currency": document["currency"],
            "options": [option_row(o) for o in document["options"]],
            "totals": totals(document)}


def option_row(option: dict) -> dict:
    row = {"id": option["id"], "title": option["title"]}
    row.update({f: option.get(f) for f in OPTION_FIELDS})
    row.update({f: option[f] for f in OPTIONAL_FIELDS if f in option})
    return row


def totals(document: dict) -> dict[str, Any]:
    """The plan's totals, flat, by dotted name (``buckets.platform_overhead``, ``plan.combined…``)."""
    out: dict[str, Any] = {"total": document["total"]}
    out.update({f"buckets.{b}": document["buckets"][b]["amount"] for b in BUCKET_NAMES})
    out["reconciliation.verdict"] = document["reconciliation"]["verdict"]
    for name, entry in sorted((document.get("services") or {}).items()):
        out.update({f"services.{name}.{f}": entry.get(f) for f in SERVICE_FIGURES})
    if isinstance(document.get("plan"), dict):
        out.update(dict(_leaves(document["plan"], "plan")))
    return out


def _leaves(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """Every scalar of a nested section by dotted path (list items by their ``id`` or position)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{prefix}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            name = item.get("id") or item.get("part") if isinstance(item, dict) else None
            yield from _leaves(item, f"{prefix}.{name or i}")
    else:
        yield prefix, value


def diff(before: dict, after: dict) -> dict:
    """What changed from one plan view to the other: options (by id) and totals."""
    old = {r["id"]: r for r in before["options"]}
    new = {r["id"]: r for r in after["options"]}
    options = []
    for option_id in list(new) + [i for i in old if i not in new]:
        changed = option_change(old.get(option_id), new.get(option_id))
        if changed:
            options.append(changed)
    keys = list(after["totals"]) + [k for k in before["totals"] if k not in after["totals"]]
    moved = {k: change(before["totals"].get(k), after["totals"].get(k)) for k in keys
             if before["totals"].get(k) != after["totals"].get(k)}
    return {"options": options, "totals": moved}


def option_change(before: dict | None, after: dict | None) -> dict | None:
    """The fields of one option that changed (None when none did); an option on one side only is
    all change."""
    either = after or before
    assert either is not None
    fields = OPTION_FIELDS + tuple(f for f in OPTIONAL_FIELDS if f in either)
    moved = {f: change((before or {}).get(f), (after or {}).get(f)) for f in fields
             if (before or {}).get(f) != (after or {}).get(f)}
    if not moved and before is not None and after is not None:
        return None
    return {"id": either["id"], "title": either["title"], **moved}


def change(before: Any, after: Any) -> dict:
    """``{before, after, change}``: change = after − before for two decimal strings, per band for two
    band tables, else None."""
    if isinstance(before, dict) and isinstance(after, dict):
        bands = {k: difference(before.get(k), after.get(k)) for k in after}
        return {"before": before, "after": after, "change": bands}
    return {"before": before, "after": after, "change": difference(before, after)}


def difference(before: Any, after: Any) -> str | None:
    """after − before, exact, for two decimal strings (None otherwise)."""
    old, new = decimal(before), decimal(after)
    return None if old is None or new is None else str(new - old)


def decimal(value: Any) -> Decimal | None:
    """A decimal string as a Decimal; anything else (a rank, a status, None) as None."""
    if not isinstance(value, str):
        return None
    try:
        number = Decimal(value)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def whatif_document(changes, before: dict, after: dict) -> dict:
    """The ``--json`` document: {changes, before, after, diff}, before and after as plan views."""
    old, new = plan_view(before), plan_view(after)
    return {"changes": [{"key": c.key, "path": ".".join(c.path), "before": literal(c.before),
                         "after": literal(c.after)} for c in changes],
            "before": old, "after": new, "diff": diff(old, new)}


def literal(value: Any) -> str | None:
    """A setting's value as its TOML literal (``0.7``, ``"30m"``, ``[\"a\"]``); None when not set."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(str(literal(v)) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {literal(v)}" for k, v in value.items()) + " }"
    return str(value)
