"""The figures load-testing tools for LLM serving report, with their definitions (vLLM's
``benchmark_serving`` / ``vllm bench serve`` and NVIDIA AIPerf), and the late-send count.

Per request (streamed responses):

* **TTFT**: first content chunk − the request's *scheduled* send time. vLLM and AIPerf start the
  clock when the request is actually sent; the two differ by the send lag, reported beside it
  (``send_lag_ms``), so that a stalled sender shows in TTFT (no coordinated omission).
* **E2EL** (vLLM) / ``request_latency`` (AIPerf): completion − scheduled send.
* **TPOT** (vLLM) = AIPerf's ``inter_token_latency``: (E2EL − TTFT) / (output tokens − 1), one
  value per request with at least 2 output tokens; the send lag cancels out.
* **ITL** (vLLM) = AIPerf's ``inter_chunk_latency``: every gap between consecutive content chunks,
  pooled over requests.

Per run: request throughput (completed requests / duration), output token throughput and total
token throughput (tokens / duration), and **request goodput** (vLLM ``--goodput``, AIPerf
``--goodput``): completed requests that meet every SLO given (``ttft``, ``tpot``, ``e2el``, in ms)
per second of the run. Without an SLO goodput is null with the reason.

**Late sends**: requests sent more than ``tolerance`` after their scheduled time (every sender was
busy, or the dispatcher fell behind), as k6 counts dropped iterations; the requests still run and
their latency counts from the schedule.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from collector.traffic import Request
from schemas.errors import UsageError

SLO_KEYS = ("ttft", "tpot", "e2el")
LATE_TOLERANCE_S = 0.010
DEFINITIONS = {
    "ttft_ms": "first content chunk - scheduled send (vLLM/AIPerf: - actual send; differs by send_lag_ms)",
    "tpot_ms": "(e2el - ttft) / (output tokens - 1) per request (vLLM TPOT = AIPerf inter_token_latency)",
    "itl_ms": "gaps between content chunks, pooled (vLLM ITL = AIPerf inter_chunk_latency)",
    "e2el_ms": "completion - scheduled send (vLLM E2EL, AIPerf request_latency)",
}


def distribution(values: Iterable[float]) -> dict | None:
    """mean / median / std / p50 / p90 / p95 / p99 / max in milliseconds (None when empty)."""
    arr = np.asarray(list(values), dtype=float) * 1000
    if arr.size == 0:
        return None
    out = {"mean": float(arr.mean()), "median": float(np.median(arr)), "std": float(arr.std())}
    out.update({f"p{p}": float(np.percentile(arr, p)) for p in (50, 90, 95, 99)})
    out["max"] = float(arr.max())
    out["n"] = int(arr.size)
    return out


def tpot(request: Request) -> float | None:
    """(E2EL − TTFT) / (output tokens − 1), seconds; None under 2 tokens or without a first token."""
    tokens = request.generated_tokens
    if request.ttft is None or tokens is None or tokens < 2:
        return None
    return (request.latency - request.ttft) / (tokens - 1)


def parse_goodput(text: str | None) -> dict[str, float]:
    """``"ttft:200 tpot:50 e2el:2000"`` (vLLM's and AIPerf's form; commas also separate) → ms by key."""
    if not text:
        return {}
    out: dict[str, float] = {}
    for part in text.replace(",", " ").split():
        key, _, value = part.partition(":")
        key = {"time_to_first_token": "ttft", "inter_token_latency": "tpot", "request_latency": "e2el"}.get(key, key)
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if key not in SLO_KEYS or not number > 0:
            raise UsageError(f"--goodput {text!r}: expected key:ms pairs with keys {', '.join(SLO_KEYS)} "
                             "and milliseconds > 0, e.g. 'ttft:200 tpot:50'")
        out[key] = number
    return out


def meets(request: Request, slo: dict[str, float]) -> bool:
    """Whether a completed request meets every SLO (a TPOT under 2 tokens counts as 0, as vLLM does)."""
    values = {"ttft": request.ttft, "tpot": tpot(request) or 0.0, "e2el": request.latency}
    return all((value := values[k]) is not None and value * 1000 <= bound for k, bound in slo.items())


def late_sends(requests: list[Request], tolerance: float = LATE_TOLERANCE_S) -> dict:
    """Requests sent more than ``tolerance`` after their schedule, and the send lag distribution."""
    sent = [r for r in requests if r.sent]
    lags = [max(r.sent - r.scheduled, 0.0) for r in sent]
    late = sum(lag > tolerance for lag in lags)
    return {"late_sends": late, "tolerance_ms": tolerance * 1000, "sent": len(sent),
            "send_lag_ms": distribution(lags)}


def llm_figures(requests: list[Request], wall: float, slo: dict[str, float] | None = None) -> dict:
    """TTFT / TPOT / ITL / E2EL distributions, throughputs and request goodput of one run."""
    ok = [r for r in requests if r.done and r.ok]
    streamed = [r for r in ok if r.ttft is not None]
    output = [r.generated_tokens for r in ok]
    prompt = [r.prompt_tokens for r in ok]
    out_total = None if any(v is None for v in output) else int(sum(output))   # type: ignore[arg-type]
    in_total = None if any(v is None for v in prompt) else int(sum(prompt))    # type: ignore[arg-type]
    figures: dict = {
        "completed": len(ok), "failed": sum(1 for r in requests if r.done and not r.ok),
        "duration_s": wall, "request_throughput": len(ok) / wall,
        "output_throughput": None if out_total is None else out_total / wall,
        "total_token_throughput": None if out_total is None or in_total is None else (out_total + in_total) / wall,
        "total_input_tokens": in_total, "total_output_tokens": out_total,
        "ttft_ms": distribution(r.ttft for r in streamed if r.ttft is not None),
        "tpot_ms": distribution(t for t in (tpot(r) for r in streamed) if t is not None),
        "itl_ms": distribution(g for r in streamed for g in r.itl),
        "e2el_ms": distribution(r.latency for r in ok),
        "definitions": DEFINITIONS,
    }
    if not streamed:
        figures["streaming"] = "not measured: no streamed content chunk (TTFT, TPOT and ITL need a streamed response)"
    figures["request_goodput"] = _goodput(ok, wall, slo or {})
    figures["stated"] = _stated(ok)
    return figures


def _goodput(ok: list[Request], wall: float, slo: dict[str, float]) -> dict:
    if not slo:
        return {"requests_per_s": None, "slo_ms": None,
                "reason": "not measured: no SLO given (--goodput 'ttft:MS tpot:MS e2el:MS')"}
    good = sum(meets(r, slo) for r in ok)
    return {"requests_per_s": good / wall, "met": good, "slo_ms": slo}


def _stated(ok: list[Request]) -> dict | None:
    """Trace replay: stated vs served token counts (how far the server honoured them)."""
    rows = [r for r in ok if r.stated_generated_tokens is not None]
    if not rows:
        return None
    out_off = [r for r in rows if r.generated_tokens != max(r.stated_generated_tokens or 0, 1)]
    known = [r for r in rows if r.prompt_tokens is not None]
    return {"requests": len(rows),
            "generated_tokens": sum(r.stated_generated_tokens or 0 for r in rows),
            "output_length_mismatches": len(out_off),
            "prompt_tokens": sum(r.stated_prompt_tokens or 0 for r in rows),
            "served_prompt_tokens": sum(r.prompt_tokens or 0 for r in known) if known else None,
            "prompt_length_mismatches": sum(r.prompt_tokens != r.stated_prompt_tokens for r in known)}
