"""`costaudit billing SOURCE… [--format F] [--window START END] [--json]`: the quick look at invoices.

A thin layer over :func:`audit.billing_summary.summarise`: parses the window, prints the totals as
text or JSON.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import List, Optional, Tuple

import typer

from audit.cli.common import reports_errors
from schemas.errors import UsageError

#: the formats `costaudit billing` reads from files (a table in Athena or BigQuery is read by a case)
LOCAL_FORMATS = ("focus", "cur", "azure", "gcp_billing")


@reports_errors
def billing(sources: List[str] = typer.Argument(..., help="billing files, folders or s3:// uris"),
            format: Optional[str] = typer.Option(None, "--format", help="focus, cur, azure, gcp_billing (default: sniffed)"),
            window: Optional[Tuple[str, str]] = typer.Option(None, "--window", help="START END (UTC), end exclusive"),
            currency: str = typer.Option("USD", "--currency", help="currency of files without one"),
            as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Totals by charge category, service and currency, and GPU-hours by instance type."""
    import json as jsonlib

    from audit.billing_summary import summarise

    if format is not None and format not in LOCAL_FORMATS:
        import difflib

        near = difflib.get_close_matches(format.lower(), LOCAL_FORMATS, n=1, cutoff=0.6)
        raise UsageError(f"--format {format!r}: unknown billing format{f'; did you mean {near[0]!r}?' if near else ''} "
                         f"(expected one of {', '.join(LOCAL_FORMATS)})")
    span = None
    if window and window[0]:
        try:
            span = (parse_day(window[0]), parse_day(window[1]))
        except ValueError:
            raise UsageError(f"--window {window[0]} {window[1]}: expected two ISO dates, START END") from None
    summary = summarise(sources, format, span, currency.upper())
    typer.echo(jsonlib.dumps(summary, indent=2) if as_json else render_text(summary))


def render_text(summary: dict) -> str:
    """A plain-text rendering of the summary: each money table per currency, never summed across.
    The name column is as wide as the longest name (at least :data:`NAME_WIDTH`): no name is cut."""
    lines = []
    for s in summary["sources"]:
        lines.append(f"{s['source']}: {s['format']}, {_count(s['rows'])} rows, {_count(s['lines'])} lines in the window")
    only = [row["name"] for row in summary["by_currency"]]
    width = name_width(summary)
    for title, key in (("By charge category", "by_charge_category"), ("By service", "by_service")):
        for money in sorted(only) or [""]:
            rows = [row for row in summary[key] if row.get("currency", money) == money]
            lines += money_table(f"{title}, {money}" if money else title, rows, width)
    lines += money_table("By currency", summary["by_currency"], width)
    lines.append("\nGPU-hours by instance type:")
    if not summary["gpu_hours_by_instance_type"]:
        lines.append("  (no GPU instance lines)")
    for row in summary["gpu_hours_by_instance_type"]:
        lines.append(f"  {row['instance_type']:<{width}}{row['gpu_hours']:>16}")
    if summary.get("notes"):
        lines.append("\nNotes:")
        lines += [f"  {note}" for note in summary["notes"]]
    return "\n".join(lines)


def _count(value) -> str:
    """A count with thousands separators, as `costaudit init` writes it; anything else as it is."""
    return f"{value:,}" if isinstance(value, int) else str(value)


#: the narrowest name column of the text tables
NAME_WIDTH = 46


def name_width(summary: dict) -> int:
    """The name column's width: the longest service, category, currency or instance type name."""
    names = [row["name"] for key in ("by_charge_category", "by_service", "by_currency") for row in summary[key]]
    names += [row["instance_type"] for row in summary["gpu_hours_by_instance_type"]]
    return max([NAME_WIDTH, *(len(name) for name in names)])


def money_table(title: str, rows: list[dict], width: int = NAME_WIDTH) -> list[str]:
    """One table of billed / effective amounts, all in one currency (or one row per currency)."""
    lines = [f"\n{title + ':':<{width + 2}}{'billed':>16}{'effective':>16}"]
    for row in rows:
        lines.append(f"  {row['name']:<{width}}{row['billed']:>16}{row['effective']:>16}")
    return lines


def parse_day(text: str) -> datetime:
    """A UTC date or datetime from the command line."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
