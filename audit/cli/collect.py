"""`costaudit collect`: drive representative traffic at a target and write a profile bundle.

Nothing heavy is imported at start-up: the collector (and torch, for in-process targets) is imported
inside the command.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from audit.cli.common import ms_or_na as _ms
from audit.cli.common import reports_errors
from schemas.errors import UsageError


@reports_errors
def collect_command(
        out: Path = typer.Option(..., "--out", help="bundle folder to write (profile.json, trace.json.gz)"),
        url: Optional[str] = typer.Option(None, "--url", help="HTTP target, e.g. http://127.0.0.1:8000"),
        mode: str = typer.Option("completions", "--mode", help="completions | chat | json (HTTP)"),
        model: Optional[str] = typer.Option(None, "--model", help="model name sent to the server"),
        callable_: Optional[str] = typer.Option(None, "--callable", help="in-process target module:function"),
        pre: Optional[str] = typer.Option(None, "--pre", help="host pre-processing hook module:function"),
        post: Optional[str] = typer.Option(None, "--post", help="host post-processing hook module:function"),
        device: Optional[str] = typer.Option(None, "--device", help="copy the callable's inputs to this device (cuda:0)"),
        arrival: str = typer.Option("poisson", "--arrival", help="poisson | gamma | closed"),
        rate: float = typer.Option(10.0, "--rate", help="open loop: requests per second"),
        shape: float = typer.Option(1.0, "--shape", help="gamma shape (1 = Poisson, <1 burstier)"),
        seed: int = typer.Option(0, "--seed", help="seed of the arrival schedule"),
        requests: int = typer.Option(100, "--requests", help="requests per sweep point"),
        concurrency: str = typer.Option("1", "--concurrency",
                                        help="sweep, e.g. 1,4,16 (closed loop: in flight; open: worker cap)"),
        batch_size: str = typer.Option("1", "--batch-size", help="sweep of batch sizes (callable), e.g. 1,8,32"),
        payload: Optional[str] = typer.Option(None, "--payload", help="JSON payload of every request"),
        traffic: Optional[Path] = typer.Option(None, "--traffic", help="JSONL to replay: {\"t\": s, \"payload\": …} a line"),
        cold_command: Optional[str] = typer.Option(None, "--cold-command", help="command to start for the cold-start time"),
        window: str = typer.Option("1,2,5", "--window", help="profiler wait,warmup,active steps ('off' for none)"),
        max_error_rate: float = typer.Option(0.01, "--max-error-rate", help="goodput's error-rate bound"),
        slo_ms: Optional[float] = typer.Option(None, "--slo-ms", help="a slower request counts as bad in goodput"),
        no_progress: bool = typer.Option(False, "--no-progress", help="no progress bar")) -> None:
    """Drive traffic at a model, measure it, and write a profile bundle."""
    from collector.http_target import refuse_credentials
    from collector.profile import CollectConfig, collect_bundle
    from collector.traffic import Arrival, parse_list

    if url:
        refuse_credentials(url, "--url")   # before the bundle folder is made
    config = CollectConfig(
        out=out, url=url, mode=mode, model=model, function=callable_, pre=pre, post=post,
        device=device, arrival=Arrival(arrival, rate, shape, seed, requests),
        concurrency=parse_list(concurrency, [1]), batch_sizes=parse_list(batch_size, [1]),
        payloads=[_payload(payload)] if payload else [], traffic=traffic,
        cold_command=cold_command, window=_window(window), max_error_rate=max_error_rate,
        slo_ms=slo_ms, progress=not no_progress)
    document = collect_bundle(config)
    typer.echo(render_collect(document, out))


def _payload(text: str):
    """--payload: one JSON value."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--payload {text!r}: not JSON ({exc})") from None


def _window(text: str):
    """--window: wait,warmup,active profiler steps, or off."""
    from collector.inprocess import Window
    if text.strip().lower() in ("off", "none", "0"):
        return None
    try:
        parts = [int(p) for p in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) != 3 or min(parts) < 0 or parts[2] < 1:
        raise UsageError(f"--window {text!r}: expected wait,warmup,active with active ≥ 1")
    return Window(*parts)


def render_collect(doc: dict, out: Path) -> str:
    """A short text summary of a bundle: one line per sweep point."""
    lines = [f"wrote {out / 'profile.json'}"]
    for p in doc["sweep"]:
        lat = p.get("latency_ms") or {}
        lines.append(f"  c={p['concurrency']:<3} b={p['batch_size']:<3} p50 {_ms(lat.get('p50'))} "
                     f"p95 {_ms(lat.get('p95'))} p99 {_ms(lat.get('p99'))}  "
                     f"{p.get('inferences_per_s', 0):.1f} inf/s  goodput {p['goodput']['requests_per_s']:.1f} req/s  "
                     f"errors {p.get('error_rate', 0):.2%}")
    nvml = doc["sampling"]["nvml"]
    lines.append("  NVML: " + ("measured" if nvml["measured"] else nvml["reason"]))
    window = doc["window"]
    lines.append("  profiler window: " + (f"{window['requests']} requests → {out / window['trace']}"
                                          if window["measured"] else window["reason"]))
    return "\n".join(lines)
