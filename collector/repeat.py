"""Repeat runs (``--repeat N``): each figure's mean over the runs with a Student t-interval.

The interval is the two-sided 95 % t-interval over the N run values (each run is one sample, its
figure computed from that run's requests): mean ± t(0.975, N − 1) × s / √N, with s the sample
standard deviation. The t quantile is found by bisection on the exact Student t CDF for whole
degrees of freedom (Abramowitz & Stegun 26.7.3–4), so no statistics library is needed. One run has
no interval (null with the reason).
"""
from __future__ import annotations

import math
from typing import Callable

LEVEL = 0.95
METHOD = "Student t-interval over runs (two-sided 95 %): mean ± t(0.975, N-1) × s / √N"


def t_central(t: float, df: int) -> float:
    """P(|T| ≤ t) for Student's t with ``df`` whole degrees of freedom (A&S 26.7.3 / 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    c, s = math.cos(theta), math.sin(theta)
    if df % 2:                       # odd
        total, term = 0.0, c
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c * c * (2 * k) / (2 * k + 1)
        return (2 / math.pi) * (theta + (s * total if df > 1 else 0.0))
    total, term = 0.0, 1.0
    for k in range(1, df // 2 + 1):  # even
        total += term
        term *= c * c * (2 * k - 1) / (2 * k)
    return s * total


def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| ≤ t) = ``level`` (two-sided), by bisection."""
    lo, hi = 0.0, 1.0
    while t_central(hi, df) < level:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_central(mid, df) < level:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def interval(values: list[float]) -> dict:
    """Mean, sample standard deviation and the 95 % t-interval of the run values."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "reason": "not measured: no run measured this figure"}
    mean = sum(values) / n
    if n == 1:
        return {"n": 1, "mean": mean, "low": None, "high": None,
                "reason": "not measured: one run has no interval (--repeat N, N ≥ 2)"}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(LEVEL, n - 1) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "half_width": half, "low": mean - half, "high": mean + half}


def _get(*path: str) -> Callable[[dict], float | None]:
    def pick(run: dict):
        value: object = run
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return pick


FIGURES: dict[str, Callable[[dict], float | None]] = {
    "request_throughput": _get("llm", "request_throughput"),
    "output_throughput": _get("llm", "output_throughput"),
    "request_goodput": _get("llm", "request_goodput", "requests_per_s"),
    "ttft_mean_ms": _get("llm", "ttft_ms", "mean"),
    "ttft_p99_ms": _get("llm", "ttft_ms", "p99"),
    "tpot_mean_ms": _get("llm", "tpot_ms", "mean"),
    "itl_mean_ms": _get("llm", "itl_ms", "mean"),
    "e2el_p50_ms": _get("latency_ms", "p50"),
    "e2el_p95_ms": _get("latency_ms", "p95"),
    "e2el_p99_ms": _get("latency_ms", "p99"),
    "inferences_per_s": _get("inferences_per_s"),
    "error_rate": _get("error_rate"),
    "late_sends": _get("late", "late_sends"),
}


def summarise(runs: list[dict]) -> dict:
    """The interval of every figure the runs measured."""
    figures = {}
    for name, pick in FIGURES.items():
        values = [v for v in (pick(r) for r in runs) if v is not None]
        if values:
            figures[name] = interval([float(v) for v in values])
    return {"runs": len(runs), "level": LEVEL, "method": METHOD, "figures": figures}
