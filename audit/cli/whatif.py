"""`costaudit whatif CASE --set KEY=VALUE …`: the plan re-priced under changed settings, against the audited case.

A thin layer over :func:`audit.whatif.run_whatif` (the sources read once, both cases audited on them)
and audit/whatif_plan.py (the comparison). Prints the plan before → after per option and the totals,
or with ``--json`` the document {changes, before, after, diff}; ``--out DIR`` also writes the changed
case's reports, as ``costaudit run`` does (one set replacing DIR at once, audit/render.py).

Exit codes: 0 compared (and written); 1 a bad --set, a source changed, or another input error
(nothing written); 130 / 143 interrupted (DIR as it was).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from audit.cli.common import fail, reports_errors
from audit.cli.run import FORMATS, step_words

ARROW = " → "


@reports_errors
def whatif(case: Path = typer.Argument(..., help="case folder (with case.toml) or the case file"),
           settings: List[str] = typer.Option(..., "--set", help="KEY=VALUE: a case key (dotted, e.g. "
                                              "services.chat.min_replicas) and a TOML value (2, 0.7, \"30m\"); "
                                              "repeat for more"),
           as_json: bool = typer.Option(False, "--json", help="print the {changes, before, after, diff} document"),
           out: Optional[Path] = typer.Option(None, "--out", help="also write the changed case's reports here"),
           format: str = typer.Option(FORMATS, "--format", help="with --out, comma-separated: " + FORMATS),
           quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr")) -> None:
    """Re-price the plan under changed settings and show the difference against the audited case;
    the sources are read once, for both."""
    from audit.case import load_case
    from audit.cli.interrupts import Interrupted, interruptible
    from audit.cli.run import _check_out
    from audit.whatif import run_whatif
    from audit.whatif_plan import whatif_document

    loaded = load_case(case)
    if out is not None:
        _check_out(out, loaded.folder, False)
    progress = None if quiet else _line
    try:
        with interruptible():
            result = run_whatif(loaded, settings, progress)
            written = _write(result.after, out, format, progress) if out is not None else []
    except Interrupted as stop:
        fail(f"interrupted by {stop.name}; nothing written", stop.exit_code)
    document = whatif_document(result.changes, result.before, result.after)
    typer.echo(json.dumps(document, indent=2, ensure_ascii=False) if as_json else render_text(document))
    for path in written:
        typer.echo(f"wrote {path}", err=as_json)


def _line(step) -> None:
    words = step_words(step)
    if words:
        typer.echo(f"costaudit: {words}", err=True)


def _write(document: dict, out: Path, format: str, progress) -> list[Path]:
    from audit.render import render

    formats = [f.strip() for f in format.split(",") if f.strip()]
    return render(document, out, formats, progress=progress)


def render_text(document: dict) -> str:
    """The plan before → after per option, then the totals, as a table."""
    before, after, changed = document["before"], document["after"], document["diff"]
    head = "; ".join(f"{c['key']} {c['before'] or '(default)'}{ARROW}{c['after']}" for c in document["changes"])
    lines = [f"what-if: {head}", f"amounts in {after['currency']} a month unless said; "
             "saving, one-off cost and payback are the expected values", ""]
    lines += options_table(before["options"], after["options"])
    lines += ["", "totals"] + totals_lines(before["totals"], after["totals"])
    moved = len(changed["options"])
    lines += ["", f"{moved} option(s) changed" if moved or changed["totals"]
              else "no change: the plan and totals are as audited"]
    return "\n".join(lines)


def options_table(before: list[dict], after: list[dict]) -> list[str]:
    old = {r["id"]: r for r in before}
    rows = [("rank", "option", "saving", "change", "one-off cost", "payback (months)")]
    for row in after + [r for r in before if r["id"] not in {a["id"] for a in after}]:
        was = old.get(row["id"], {})
        rows.append((_pair(_rank(was), _rank(row)), row["id"], _pair(_saving(was), _saving(row)),
                     _change(was, row), _pair(_band(was, "one_off_cost"), _band(row, "one_off_cost")),
                     _pair(_band(was, "payback_months"), _band(row, "payback_months"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def totals_lines(before: dict, after: dict) -> list[str]:
    """The totals shown: every total, and of the plan section the expected combined saving of the
    whole plan, and of each part where it changed (the rest is in --json)."""
    from audit.whatif_plan import difference

    def shown(key: str) -> bool:
        if not key.startswith("plan."):
            return True
        combined = "combined_saving" in key and key.endswith(".expected")
        return combined and (key.startswith("plan.total.") or before.get(key) != after.get(key))
    keys = [k for k in after if shown(k)]
    width = max((len(k) for k in keys), default=0)
    out = []
    for key in keys:
        old, new = before.get(key), after.get(key)
        delta = difference(old, new)
        text = _pair(_text(old), _text(new)) + (f"  ({_signed(delta)})" if delta and old != new else "")
        out.append(f"  {key.ljust(width)}  {text}")
    return out


def _pair(old: str, new: str) -> str:
    return new if old == new else f"{old}{ARROW}{new}"


def _rank(row: dict) -> str:
    return "–" if not row or row.get("rank") is None else str(row["rank"])


def _saving(row: dict) -> str:
    if not row:
        return "–"
    if row.get("status") != "priced":
        return str(row.get("status") or "–").replace("_", " ")
    return _band(row, "monthly_saving")


def _band(row: dict, field: str) -> str:
    value = row.get(field) if row else None
    return "–" if not value or value.get("expected") is None else str(value["expected"])


def _change(was: dict, row: dict) -> str:
    from audit.whatif_plan import difference

    old, new = (r.get("monthly_saving") or {} for r in (was, row))
    delta = difference(old.get("expected"), new.get("expected"))
    return "" if delta is None or old == new else _signed(delta)


def _signed(delta: str) -> str:
    return delta if delta.startswith("-") else f"+{delta}"


def _text(value) -> str:
    return "–" if value is None else str(value)
