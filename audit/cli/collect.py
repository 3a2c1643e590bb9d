"""`costaudit collect`: drive representative traffic at a target and write a profile bundle.

Nothing heavy is imported at start-up: the collector (and torch, for in-process targets) is imported
inside the command.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from audit.cli.common import fail, reports_errors
from audit.cli.common import ms_or_na as _ms
from schemas.errors import UsageError

ALL_FAILED = 4
"""Exit code when no request succeeded (the bundle is still written, with every error in it)."""


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
        trace: Optional[Path] = typer.Option(None, "--trace", help="Azure LLM trace CSV to replay "
                                             "(TIMESTAMP,ContextTokens,GeneratedTokens)"),
        trace_start: float = typer.Option(0.0, "--trace-start", help="slice start, seconds of trace time"),
        trace_duration: Optional[float] = typer.Option(None, "--trace-duration", help="slice length, seconds of trace time"),
        time_scale: Optional[float] = typer.Option(None, "--time-scale", help="multiply arrival offsets (0.1 = 10x faster)"),
        rate_multiplier: Optional[float] = typer.Option(None, "--rate-multiplier",
                                                        help="arrival rate x M (= --time-scale 1/M)"),
        force_output: str = typer.Option("vllm", "--force-output",
                                         help="vllm (max_tokens+min_tokens+ignore_eos) | max_tokens | none"),
        prompt_form: str = typer.Option("text", "--prompt-form", help="text | ids (token ids, completions)"),
        repeat: int = typer.Option(1, "--repeat", help="runs per sweep point (t-interval over runs when ≥ 2)"),
        goodput: Optional[str] = typer.Option(None, "--goodput",
                                               help="request goodput SLOs in ms, e.g. 'ttft:200 tpot:50 e2el:2000'"),
        late_ms: float = typer.Option(10.0, "--late-tolerance-ms", help="a send later than this after its schedule is late"),
        cold_command: Optional[str] = typer.Option(None, "--cold-command", help="command to start for the cold-start time"),
        window: str = typer.Option("1,2,5", "--window", help="profiler wait,warmup,active steps ('off' for none)"),
        max_error_rate: float = typer.Option(0.01, "--max-error-rate", help="goodput's error-rate bound"),
        slo_ms: Optional[float] = typer.Option(None, "--slo-ms", help="a slower request counts as bad in goodput"),
        no_progress: bool = typer.Option(False, "--no-progress", help="no progress bar")) -> None:
    """Drive traffic at a model, measure it, and write a profile bundle."""
    from collector.http_target import refuse_credentials
    from collector.latency import parse_goodput
    from collector.profile import CollectConfig, collect_bundle
    from collector.replay import TraceReplay, scale_of
    from collector.traffic import Arrival, parse_list

    if url:
        refuse_credentials(url, "--url")   # before the bundle folder is made
    replay = None
    if trace is not None:
        replay = TraceReplay(trace, trace_start, trace_duration, scale_of(time_scale, rate_multiplier),
                             force_output, prompt_form)
    elif time_scale is not None or rate_multiplier is not None or trace_duration is not None:
        raise UsageError("--time-scale, --rate-multiplier and --trace-duration apply to a --trace replay")
    if late_ms < 0:
        raise UsageError(f"--late-tolerance-ms {late_ms}: expected ≥ 0")
    config = CollectConfig(
        out=out, url=url, mode=mode, model=model, function=callable_, pre=pre, post=post,
        device=device, arrival=Arrival(arrival, rate, shape, seed, requests),
        concurrency=parse_list(concurrency, [1]), batch_sizes=parse_list(batch_size, [1]),
        payloads=[_payload(payload)] if payload else [], traffic=traffic,
        cold_command=cold_command, window=_window(window), max_error_rate=max_error_rate,
        slo_ms=slo_ms, progress=not no_progress, trace=replay, repeat=repeat,
        goodput=parse_goodput(goodput), late_tolerance=late_ms / 1000)
    document = collect_bundle(config)
    typer.echo(render_collect(document, out))
    if not any(p.get("succeeded") for p in document["sweep"]):
        first = next((p["first_error"] for p in document["sweep"] if p.get("first_error")), "no request completed")
        total = sum(p.get("requests", 0) for p in document["sweep"])
        fail(f"every request failed ({total} of {total}); first error: {first} "
             f"(all errors in {out / 'profile.json'})", ALL_FAILED)


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
    """A short text summary of a bundle: per sweep point its latency, throughput, errors (the first
    one shown), late sends, the LLM serving figures and, over repeats, the t-intervals."""
    lines = [f"wrote {out / 'profile.json'}"]
    for p in doc["sweep"]:
        lat = p.get("latency_ms") or {}
        goodput = (p.get("goodput") or {}).get("requests_per_s", 0.0)
        lines.append(f"  c={p['concurrency']:<3} b={p['batch_size']:<3} p50 {_ms(lat.get('p50'))} "
                     f"p95 {_ms(lat.get('p95'))} p99 {_ms(lat.get('p99'))}  "
                     f"{p.get('inferences_per_s', 0):.1f} inf/s  goodput {goodput:.1f} req/s  "
                     f"errors {p.get('error_rate', 1.0):.2%}")
        if p.get("first_error"):
            lines.append(f"    first error: {p['first_error']}")
        late = p.get("late")
        if late:
            lines.append(f"    late sends: {late['late_sends']} of {late['sent']} "
                         f"(> {late['tolerance_ms']:g} ms after schedule)")
        lines += _llm_lines(p.get("llm"))
        lines += _repeat_lines(p.get("repeat"))
    nvml = doc["sampling"]["nvml"]
    lines.append("  NVML: " + ("measured" if nvml["measured"] else nvml["reason"]))
    window = doc["window"]
    lines.append("  profiler window: " + (f"{window['requests']} requests → {out / window['trace']}"
                                          if window["measured"] else window["reason"]))
    return "\n".join(lines)


def _dist(d: dict | None) -> str:
    if not d:
        return "not measured"
    return f"mean {d['mean']:.1f}  p50 {d['p50']:.1f}  p99 {d['p99']:.1f} ms"


def _llm_lines(llm: dict | None) -> list[str]:
    """TTFT / TPOT / ITL / E2EL, throughputs and goodput, named as vLLM's benchmark names them."""
    if not llm:
        return []
    out_tp = llm.get("output_throughput")
    good = llm["request_goodput"]
    lines = [f"    TTFT {_dist(llm['ttft_ms'])};  TPOT {_dist(llm['tpot_ms'])}",
             f"    ITL  {_dist(llm['itl_ms'])};  E2EL {_dist(llm['e2el_ms'])}",
             f"    request throughput {llm['request_throughput']:.2f} req/s  output token throughput "
             + ("not measured" if out_tp is None else f"{out_tp:.1f} tok/s") + "  request goodput "
             + ("not measured (no --goodput SLO)" if good["requests_per_s"] is None
                else f"{good['requests_per_s']:.2f} req/s ({good['met']} met {_slo(good['slo_ms'])})")]
    stated = llm.get("stated")
    if stated:
        lines.append(f"    trace: {stated['requests']} requests, output length off in "
                     f"{stated['output_length_mismatches']}, prompt length off in {stated['prompt_length_mismatches']} "
                     "(server's usage vs the trace)")
    return lines


def _slo(slo: dict) -> str:
    return " ".join(f"{k}≤{v:g} ms" for k, v in slo.items())


def _repeat_lines(repeat: dict | None) -> list[str]:
    """The t-interval of the main figures over repeated runs."""
    if not repeat:
        return []
    lines = [f"    over {repeat['runs']} runs, {repeat['method']}:"]
    for name, ci in repeat["figures"].items():
        if ci.get("low") is not None:
            lines.append(f"      {name}: {ci['mean']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]")
    return lines
