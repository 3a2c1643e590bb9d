"""`costaudit compare A B`: the net-gain verdict of bundle B over bundle A under identical traffic."""
from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from pathlib import Path

import typer

from audit.cli.common import reports_errors
from schemas.errors import UsageError

NO_GAIN = 3


@reports_errors
def compare_command(
        a: Path = typer.Argument(..., help="baseline bundle folder (or its profile.json)"),
        b: Path = typer.Argument(..., help="treatment bundle folder (or its profile.json)"),
        price_a: str = typer.Option(..., "--price-a", help="instance price per hour of A"),
        price_b: str = typer.Option(..., "--price-b", help="instance price per hour of B"),
        percentile: str = typer.Option("p95", "--percentile", help="p50 | p95 | p99"),
        as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Net-gain verdict of B over A under identical traffic, with cost per 1,000 inferences."""
    from collector.stats import compare

    if percentile not in ("p50", "p95", "p99"):
        raise UsageError(f"--percentile {percentile!r}: expected p50, p95 or p99")
    result = compare(_bundle(a), _bundle(b), _price(price_a), _price(price_b), percentile)
    typer.echo(json.dumps(result, indent=2) if as_json else render_compare(result))
    raise typer.Exit(0 if result["verdict"] == "net_gain" else NO_GAIN)


def _bundle(path: Path) -> dict:
    """A bundle's profile.json document, checked as the verdict reads it
    (:func:`connectors.profiles.bundle_doc.read_document`: InputError naming the file and field)."""
    from connectors.profiles.bundle_doc import read_document

    return read_document(path)[1]


def _price(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise UsageError(f"price {text!r}: expected a number (per hour)") from None
    if not value.is_finite() or value < 0 or value.adjusted() > 15:
        raise UsageError(f"price {text!r}: expected a finite number ≥ 0 (per hour)")
    return value + 0  # -0 is 0


def render_compare(result: dict) -> str:
    """The verdict, one line per sweep point, and where it holds and inverts."""
    lines = [f"verdict: {result['verdict']} (at {result['percentile']}, cost per 1,000 inferences)"]
    if result["reason"]:
        lines.append(f"  {result['reason']}")
    for p in result["points"]:
        lat, cost = p["latency_ms"], p["cost_per_1000"]
        shown_a, shown_b = _latencies(lat["a"], lat["b"])
        lines.append(f"  b={p['batch_size']:<3} c={p['concurrency']:<3} {result['percentile']} "
                     f"{shown_a} → {shown_b}  cost/1k {cost['a'] or 'n/a'} → {cost['b'] or 'n/a'}  "
                     f"{p['verdict'].replace('_', ' ')}")
    if result["verdict"] != "not_comparable":
        lines.append(f"  holds at batch sizes: {_sizes(result['holds_at_batch_sizes'])}; "
                     f"inverts at: {_sizes(result['inverts_at_batch_sizes'])}"
                     + (f"; not measured at: {_sizes(result['not_measured_at_batch_sizes'])}"
                        if result["not_measured_at_batch_sizes"] else ""))
    return "\n".join(lines)


def _latencies(a, b, most: int = 4) -> tuple[str, str]:
    """Two latencies in ms to one decimal place, or as many more (up to ``most``) as it takes for two
    that differ not to read alike (0.1506 and 0.1574 ms both read "0.2 ms")."""
    def text(v, places: int) -> str:
        return "   n/a" if v is None else f"{v:{6 + places}.{places}f} ms"

    places = 1
    while places < most and a is not None and b is not None and a != b and text(a, places) == text(b, places):
        places += 1
    return text(a, places), text(b, places)


def _sizes(sizes: list[int]) -> str:
    return ", ".join(str(s) for s in sizes) or "none"
