"""Figures of a collector run and the net-gain verdict between two runs (METHOD §8).

Latency is measured from each request's scheduled send time. Throughput is in inferences per second
(one inference = one input item, so a request of batch b is b inferences). Cost per 1,000 inferences
= instance price per hour / (sustained throughput × 3600) × 1000; money stays ``Decimal``.
"""
from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Iterable

import numpy as np

from collector.latency import LATE_TOLERANCE_S, late_sends, llm_figures
from collector.traffic import Request

PERCENTILES = (50, 95, 99)
#: the error rate a run is held to where it states none (``collect --max-error-rate``)
DEFAULT_ERROR_BOUND = 0.01


def percentiles(values: Iterable[float]) -> dict | None:
    """p50 / p95 / p99 / max in milliseconds (None when there are no values)."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return None
    out = {f"p{p}": float(np.percentile(arr, p)) * 1000 for p in PERCENTILES}
    out["max"] = float(arr.max()) * 1000
    out["mean"] = float(arr.mean()) * 1000
    return out


HOST_UNMEASURED = ("not measured: the target's host work runs in the server process (HTTP target); "
                   "only an in-process callable's pre/post hooks are timed")


def run_wall(requests: list[Request]) -> float:
    """Seconds from the first scheduled send to the last completion of one run."""
    done = [r for r in requests if r.done]
    if not done:
        return 0.0
    return max(max(r.done for r in done) - min(r.scheduled for r in done), 1e-9)


def run_figures(requests: list[Request], max_error_rate: float = DEFAULT_ERROR_BOUND, slo_ms: float | None = None,
                wall: float | None = None, slo: dict | None = None,
                late_tolerance: float = LATE_TOLERANCE_S) -> dict:
    """Latency percentiles, throughput, goodput, error rate, LLM serving figures and late sends of
    one run (or of repeated runs pooled, with ``wall`` the sum of their durations)."""
    done = [r for r in requests if r.done]
    ok = [r for r in done if r.ok]
    if not done:
        return {"requests": 0, "reason": "unmeasured: no request completed"}
    wall = run_wall(requests) if wall is None else max(wall, 1e-9)
    good = [r for r in ok if slo_ms is None or r.latency * 1000 <= slo_ms]
    error_rate = 1 - len(ok) / len(done)
    inferences = sum(r.batch_size for r in ok)
    figures = {
        "requests": len(done), "succeeded": len(ok), "error_rate": error_rate, "wall_s": wall,
        "latency_ms": percentiles(r.latency for r in ok),
        "requests_per_s": len(ok) / wall, "inferences_per_s": inferences / wall,
        "goodput": _goodput(good, len(done), wall, max_error_rate, slo_ms),
        "prompt_tokens": _token_sum(ok, "prompt_tokens"),
        "generated_tokens": _token_sum(ok, "generated_tokens"),
        "host_pre_ms": _host(ok, "pre_s"),
        "host_post_ms": _host(ok, "post_s"),
        "host_reason": None if any(r.pre_s is not None for r in ok) else HOST_UNMEASURED,
        "copy_ms": _copy(ok),
        "errors": _error_kinds(done),
        "first_error": _first_error(done),
        "late": late_sends(done, late_tolerance),
    }
    streaming = [r for r in ok if r.ttft is not None]
    if streaming:
        figures["ttft_ms"] = percentiles(r.ttft for r in streaming if r.ttft is not None)
        figures["itl_ms"] = percentiles(g for r in streaming for g in r.itl)
    if streaming or any(r.stated_generated_tokens is not None for r in done):
        figures["llm"] = llm_figures(done, wall, slo)
    return figures


def _host(requests: list[Request], name: str) -> dict | None:
    """Host pre/post time percentiles; None (never zeros) when not measured, ``host_reason`` says why."""
    return percentiles(getattr(r, name) for r in requests if getattr(r, name) is not None)


def _first_error(requests: list[Request]) -> str | None:
    """The error of the first failed request (by scheduled send), in full up to 500 characters."""
    failed = sorted((r for r in requests if not r.ok), key=lambda r: (r.scheduled, r.index))
    return (failed[0].error or "unknown error")[:500] if failed else None


def _goodput(good: list[Request], total: int, wall: float, bound: float, slo_ms) -> dict:
    """Successful (within the SLO, if any) requests per second, if the error rate stays in bound."""
    bad_rate = 1 - len(good) / total
    value = len(good) / wall if bad_rate <= bound else 0.0
    out = {"requests_per_s": value, "error_rate_bound": bound, "slo_ms": slo_ms,
           "bad_rate": bad_rate, "within_bound": bad_rate <= bound}
    if bad_rate > bound:
        out["reason"] = f"error rate {bad_rate:.4f} exceeds the bound {bound}"
    return out


def _token_sum(requests: list[Request], name: str) -> int | None:
    """Sum of a token count, or None when any request did not report it."""
    values = [getattr(r, name) for r in requests]
    if not values or any(v is None for v in values):
        return None
    return int(sum(values))


def _copy(requests: list[Request]) -> dict:
    """Host↔device copy time percentiles, or the reason it is unmeasured."""
    values = [r.copy_s for r in requests if r.copy_s is not None]
    if not values:
        return {"measured": False, "reason": "unmeasured: no CUDA device"}
    return {"measured": True, **percentiles(values)}


def _error_kinds(requests: list[Request]) -> dict:
    """Count of requests per error text (first 80 characters)."""
    out: dict[str, int] = {}
    for r in requests:
        if not r.ok:
            key = (r.error or "unknown")[:80]
            out[key] = out.get(key, 0) + 1
    return out


# ------------------------------------------------------------------ cost and the net-gain verdict

def cost_per_1000(price_per_hour: Decimal, inferences_per_s: float | None) -> Decimal | None:
    """Instance price per hour / (sustained throughput × 3600) × 1000 (None at zero throughput),
    unrounded (50 digits): the verdict compares these; :func:`shown_costs` rounds them to show."""
    if inferences_per_s is None or inferences_per_s <= 0:
        return None
    with localcontext() as context:
        context.prec = 50
        return Decimal(price_per_hour) * 1000 / (Decimal(repr(float(inferences_per_s))) * 3600)


#: cost per 1,000 inferences is shown to 6 decimal places, more where two different costs would tie
SHOWN_PLACES = 6
MAX_SHOWN_PLACES = 15


def shown_costs(a: Decimal | None, b: Decimal | None) -> tuple[str | None, str | None]:
    """The two costs per 1,000 as text, to 6 decimal places, or as many more (up to 15) as it takes
    for two costs that differ not to read alike (the verdict is taken on the exact costs)."""
    places = SHOWN_PLACES
    while True:
        quantum = Decimal(1).scaleb(-places)
        text_a, text_b = (None if v is None else str(v.quantize(quantum, rounding=ROUND_HALF_EVEN)) for v in (a, b))
        if a is None or b is None or a == b or text_a != text_b or places >= MAX_SHOWN_PLACES:
            return text_a, text_b
        places += 1


def point_verdict(a: dict, b: dict, price_a: Decimal, price_b: Decimal, pct: str) -> dict:
    """Is B a net gain over A at one sweep point: within its error-rate bound, not slower at ``pct``
    and not dearer per 1,000 (METHOD §8: successful requests per second at a fixed error rate)."""
    cost_a = cost_per_1000(price_a, a.get("inferences_per_s", 0.0))
    cost_b = cost_per_1000(price_b, b.get("inferences_per_s", 0.0))
    lat_a = (a.get("latency_ms") or {}).get(pct)
    lat_b = (b.get("latency_ms") or {}).get(pct)
    shown_a, shown_b = shown_costs(cost_a, cost_b)
    out = {"latency_ms": {"a": lat_a, "b": lat_b}, "cost_per_1000": {"a": shown_a, "b": shown_b},
           "error_rate": {"a": a.get("error_rate"), "b": b.get("error_rate")}}
    if cost_a is None or cost_b is None or lat_a is None or lat_b is None:
        return {**out, "verdict": "not_measured", "reason": _unserved(a, b, cost_a, cost_b)}
    bound = min(error_bound(a), error_bound(b))  # one fixed error rate for both: the stricter one recorded
    over_b, over_a = over_bound(b, bound), over_bound(a, bound)
    if over_b:
        return {**out, "verdict": "no_gain", "reason": f"B's {over_b}: it serves nothing at the fixed error rate"}
    if over_a:
        return {**out, "verdict": "not_measured",
                "reason": f"A's {over_a}: no throughput at the fixed error rate to weigh B against"}
    faster, cheaper = lat_b <= lat_a, cost_b <= cost_a
    strictly = lat_b < lat_a or cost_b < cost_a
    if faster and cheaper and strictly:
        verdict = "net_gain"
    elif lat_b < lat_a and not cheaper:
        verdict = "faster_but_dearer"
    elif cost_b < cost_a and not faster:
        verdict = "slower_but_cheaper"
    elif lat_a == lat_b and cost_a == cost_b:
        verdict = "no_change"
    else:
        verdict = "no_gain"
    return {**out, "verdict": verdict}


def error_bound(point: dict) -> float:
    """The error-rate bound a sweep point's run was held to (its ``goodput``), else the default."""
    bound = (point.get("goodput") or {}).get("error_rate_bound")
    return DEFAULT_ERROR_BOUND if bound is None else float(bound)


def over_bound(point: dict, bound: float) -> str | None:
    """Why a sweep point's error rate is over ``bound``, else None."""
    rate = point.get("error_rate")
    if rate is None or rate <= bound:
        return None
    return f"error rate {rate:.4f} exceeds the bound {bound:g}"


def _unserved(a: dict, b: dict, cost_a, cost_b) -> str:
    """Which run gave no throughput or no latency at a point, in words."""
    which = [name for name, point, cost in (("A", a, cost_a), ("B", b, cost_b))
             if cost is None or not point.get("latency_ms")]
    named = " and ".join(which) or "A or B"
    return f"{named} served no request at this point" + (
        f" ({b.get('reason') or a.get('reason')})" if (b.get("reason") or a.get("reason")) else "")


TRAFFIC_KEYS = ("process", "rate_per_s", "shape", "seed", "requests", "concurrency", "batch_sizes",
                "start_s", "duration_s", "time_scale", "force_output", "prompt_form", "mode")


def readable(value) -> str:
    """A figure as a person reads it: 'not set', '1, 4, 16', a short digest, a plain number."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(readable(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"
    return str(value)


def traffic_mismatch(a: dict, b: dict) -> list[str]:
    """The ways two bundles' traffic differs (empty when identical), in readable words."""
    out = []
    ta, tb = a.get("arrival") or {}, b.get("arrival") or {}
    for key in TRAFFIC_KEYS:
        if ta.get(key) != tb.get(key):
            out.append(f"{key.replace('_', ' ')} {readable(ta.get(key))} vs {readable(tb.get(key))}")
    names = {"payload_bytes": "payload size (bytes)", "traffic_file_sha256": "traffic file (sha256)"}
    for key, name in names.items():
        if a.get(key) != b.get(key):
            out.append(f"{name} {readable(a.get(key))} vs {readable(b.get(key))}")
    return out


def compare(a: dict, b: dict, price_a: Decimal, price_b: Decimal, pct: str = "p95") -> dict:
    """The net-gain verdict of B over A per sweep point and overall (METHOD §8).

    Under traffic that differs no point has a verdict (each is ``not_comparable``; the figures are
    shown). A point that could not be weighed (``not_measured``) is neither where the gain holds nor
    where it inverts; where no point could be, the verdict is ``not_measured`` with their reasons."""
    mismatch = traffic_mismatch(a, b)
    pa = {_key(p): p for p in a.get("sweep", [])}
    points = []
    for p in b.get("sweep", []):
        if _key(p) in pa:
            row = point_verdict(pa[_key(p)], p, price_a, price_b, pct)
            if mismatch:
                row = {**row, "verdict": "not_comparable", "reason": "traffic differs"}
            points.append({"batch_size": p["batch_size"], "concurrency": p["concurrency"], **row})
    weighed = [p for p in points if p["verdict"] not in ("not_measured", "not_comparable")]
    holds = sorted({p["batch_size"] for p in weighed if p["verdict"] == "net_gain"})
    inverts = sorted({p["batch_size"] for p in weighed if p["verdict"] != "net_gain"})
    unweighed = sorted({p["batch_size"] for p in points if p["verdict"] == "not_measured"})
    reason: str | None
    if mismatch:
        overall, reason = "not_comparable", "traffic differs: " + "; ".join(mismatch)
    elif not points:
        overall, reason = "not_measured", "no sweep point (batch size, concurrency) in common"
    elif not weighed:
        overall = "not_measured"
        reason = "no sweep point could be weighed: " + "; ".join(sorted({p["reason"] for p in points}))
    else:
        overall = "net_gain" if len(weighed) == len(points) and not inverts else ("mixed" if holds else "no_gain")
        reason = (f"not weighed at batch sizes {', '.join(str(s) for s in unweighed)}: "
                  + "; ".join(sorted({p["reason"] for p in points if p["verdict"] == "not_measured"}))) \
            if unweighed else None
    return {"percentile": pct, "verdict": overall, "reason": reason, "points": points,
            "holds_at_batch_sizes": holds, "inverts_at_batch_sizes": inverts,
            "not_measured_at_batch_sizes": unweighed,
            "price_per_hour": {"a": str(price_a), "b": str(price_b)},
            "includes": "latency and throughput are end to end: host pre/post and copy time included"}


def _key(point: dict) -> tuple:
    return (point.get("batch_size"), point.get("concurrency"))
