"""Raise batching limits: GPUs needed at the best batch within the latency bound (METHOD §7).

Per service, the collector bundle's sweep (:class:`schemas.profile.SweepPoint`) gives the throughput
at each batch size: the most inferences/s over the sweep's concurrencies at that batch size (where
every point has batch size 1 and the concurrency varies, an HTTP target whose server batches the
requests in flight, the concurrency is the batch). The batch the servers run is the mean of their
running-requests gauge over the window (vLLM ``num_requests_running``, TGI ``tgi_batch_current_size``).

- throughput now T(r): the sweep's throughput interpolated linearly at the running batch r (r
  outside the swept batch sizes is not measured);
- best T*: the most throughput among the batch sizes whose points lie within the latency bound
  (latency at ``percentile``, p95 unless the option says, no higher than the bound, and the error
  rate within the collector's ``max_error_rate``); the bound is the option's ``latency_bound_ms``
  where it gives one, else the sweep's own ``slo_ms`` (``costaudit collect --slo-ms``);
- GPUs needed at the best batch = GPUs held × T(r) / T*; saving = the service's GPU cost over the
  window × (1 − T(r) / T*), capped by its ``serving_path.in_flight_idle`` (the part the option acts
  on): a bigger batch can only fill GPU time the serving path leaves idle.

Low: T* replaced by the better of the within-bound batch sizes either side of the best (T* where
there is none). High: T(r) taken at the swept batch size at or below r instead of interpolated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Mapping, Sequence

import pandas as pd

from audit.case import Service
from audit.money import ZERO
from audit.pricing import Input, Modelled, ordered
from audit.pricing.assumed import MISSING
from audit.services import service_of

PERCENTILE = "p95"
RUNNING = {"vllm": "vllm:num_requests_running", "tgi": "tgi_batch_current_size"}
NO_SWEEP = MISSING["batching"]


@dataclass(frozen=True)
class ServiceBatch:
    """What one service's batching model stands on."""

    service: str
    sweep: pd.DataFrame            # audit.normalised.SWEEP_COLUMNS
    sweep_source: str              # the profile that carried it
    running: float | None          # mean running requests per server over the window
    running_source: str
    gpu_cost: Decimal              # the service's GPU cost over the window
    gpu_hours: Decimal             # GPU-hours held over the window
    cap: Decimal                   # its serving_path.in_flight_idle over the window
    bound_ms: float | None         # the latency bound: the option's, else the sweep's slo_ms
    bound_source: str


@dataclass(frozen=True)
class Curve:
    """Throughput per batch size (ascending), and which batch sizes lie within the bound."""

    axis: str
    sizes: tuple[float, ...]
    throughput: tuple[Decimal, ...]
    within: tuple[bool, ...]


def _dec(value: float) -> Decimal:
    return Decimal(repr(float(value)))


def curve(sweep: pd.DataFrame, bound_ms: float, percentile: str) -> Curve | str:
    """The sweep's throughput curve, or why it cannot give one."""
    rows = sweep.loc[sweep["inferences_per_s"].notna() & (sweep["inferences_per_s"] > 0)]
    axis = ("batch_size" if rows["batch_size"].nunique() > 1
            else "concurrency" if rows["concurrency"].nunique() > 1 else "")
    if not axis:
        return "the bundle's sweep has fewer than two batch sizes (or concurrencies) with a measured throughput"
    latency = rows[f"latency_{percentile}_ms"]
    errors_ok = rows["max_error_rate"].isna() | (rows["error_rate"].fillna(1) <= rows["max_error_rate"])
    rows = rows.assign(ok=latency.notna() & (latency <= bound_ms) & errors_ok)
    sizes, throughput, within = [], [], []
    for size, points in rows.groupby(axis, sort=True):
        sizes.append(float(size))
        good = points.loc[points["ok"], "inferences_per_s"]
        throughput.append(_dec((good if len(good) else points["inferences_per_s"]).max()))
        within.append(bool(len(good)))
    return Curve(axis, tuple(sizes), tuple(throughput), tuple(within))


def at(c: Curve, batch: float) -> Decimal:
    """Throughput interpolated linearly at ``batch`` (inside the swept sizes)."""
    for i in range(len(c.sizes) - 1):
        lo, hi = c.sizes[i], c.sizes[i + 1]
        if lo <= batch <= hi:
            share = _dec((batch - lo) / (hi - lo))
            return c.throughput[i] + (c.throughput[i + 1] - c.throughput[i]) * share
    return c.throughput[-1]


def floor_at(c: Curve, batch: float) -> Decimal:
    """Throughput at the swept size at or below ``batch``."""
    return [t for s, t in zip(c.sizes, c.throughput) if s <= batch][-1]


def best(c: Curve) -> tuple[int, Decimal, Decimal] | None:
    """(index, T*, the better within-bound neighbour's throughput or T*), or None if none is within."""
    inside = [i for i, ok in enumerate(c.within) if ok]
    if not inside:
        return None
    top = max(inside, key=lambda i: c.throughput[i])
    near = [c.throughput[j] for j in (top - 1, top + 1) if 0 <= j < len(c.sizes) and c.within[j]]
    return top, c.throughput[top], max(near) if near else c.throughput[top]


def service_saving(given: ServiceBatch, percentile: str) -> tuple[dict, list[Input]] | str:
    """One service's saving bands and inputs, or the precise piece missing."""
    bound_ms = given.bound_ms
    if bound_ms is None or not math.isfinite(bound_ms):
        return (f"{given.service}: the bundle's sweep names no latency bound (collect with --slo-ms, or give "
                "the option latency_bound_ms)")
    if given.running is None or not math.isfinite(given.running):
        return (f"{given.service}: the batch the servers run is not measured (no vllm:num_requests_running "
                "or tgi_batch_current_size series for its pods)")
    found = curve(given.sweep, bound_ms, percentile)
    if isinstance(found, str):
        return f"{given.service}: {found}"
    if not found.sizes[0] <= given.running <= found.sizes[-1]:
        return (f"{given.service}: the servers run batch {given.running:.2f}, outside the swept "
                f"{found.axis.replace('_', ' ')}s {found.sizes[0]:g}–{found.sizes[-1]:g}")
    top = best(found)
    if top is None:
        return f"{given.service}: no sweep point lies within the latency bound of {bound_ms:g} ms ({percentile})"
    index, t_best, t_near = top
    now, now_floor = at(found, given.running), floor_at(found, given.running)

    def saving(t_now: Decimal, t_star: Decimal) -> Decimal:
        ratio = min(Decimal(1), t_now / t_star)
        return min(given.cap, given.gpu_cost * (1 - ratio))

    bands = {"low": saving(now, t_near), "expected": saving(now, t_best), "high": saving(now_floor, t_best)}
    ratio = min(Decimal(1), now / t_best)
    name, sweep = given.service, f"collector bundle sweep ({given.sweep_source})"
    inputs: list[Input] = [
        (f"{name}: latency bound", f"{bound_ms:g} ms at {percentile}", given.bound_source),
        (f"{name}: batch the servers run", f"{given.running:.2f}", given.running_source),
        (f"{name}: throughput at that batch", f"{now:.2f} inferences/s", f"{sweep}, interpolated"),
        (f"{name}: best batch within the bound", f"{found.sizes[index]:g} ({found.axis.replace('_', ' ')})", sweep),
        (f"{name}: throughput at the best batch", f"{t_best:.2f} inferences/s", sweep),
        (f"{name}: GPUs needed at the best batch ÷ now", f"{ratio:.4f}", "throughput now ÷ best"),
        (f"{name}: GPU-hours held", f"{given.gpu_hours:.2f}", "billing GPU-hours spread over telemetry intervals"),
        (f"{name}: GPU-hours needed at the best batch", f"{given.gpu_hours * ratio:.2f}", "GPU-hours held × ratio"),
        (f"{name}: GPU cost over the window", f"{given.gpu_cost:.2f}", "ledger (GPU split per interval)"),
        (f"{name}: cap, serving_path.in_flight_idle", f"{given.cap:.2f}", "ledger (attribution of the billing)"),
    ]
    return bands, inputs


def batching(services: Sequence[ServiceBatch], percentile: str = PERCENTILE) -> Modelled | str:
    """The batching model over every service with a sweep, or the reason it stays assumed."""
    if not services:
        return NO_SWEEP
    totals = {"low": ZERO, "expected": ZERO, "high": ZERO}
    inputs: list[Input] = []
    missing = []
    for given in services:
        found = service_saving(given, percentile)
        if isinstance(found, str):
            missing.append(found)
            continue
        bands, used = found
        totals = {b: totals[b] + bands[b] for b in totals}
        inputs.extend(used)
    if not inputs:
        return "; ".join(missing)
    inputs.extend(("not modelled", why, "batching model") for why in missing)
    return Modelled(ordered(totals["low"], totals["expected"], totals["high"]), tuple(inputs),
                    "low: the best batch's throughput replaced by the better of the within-bound batch sizes "
                    "either side of it; high: the throughput now taken at the swept batch size at or below "
                    "the running batch instead of interpolated; each service capped by its in-flight idle")


def running_batch(serving: pd.DataFrame, services: Mapping[str, Service]) -> dict[str, tuple[float, str]]:
    """Per service, the mean running requests per server over the window and its source
    (telemetry serving stats, ``running``: vLLM num_requests_running, TGI tgi_batch_current_size)."""
    rows = serving.loc[serving["running"].notna() & serving["family"].isin(list(RUNNING))] if len(serving) else serving
    out: dict[str, tuple[float, str]] = {}
    if rows.empty:
        return out
    labels = [{"namespace": str(ns), "pod": str(pod), "model_name": str(model), "container": ""}
              for ns, pod, model in zip(rows["namespace"], rows["pod"], rows["model_name"])]
    names = [service_of(lab, services, {}) for lab in labels]
    rows = rows.assign(service=names)
    for name, mine in rows.loc[rows["service"].notna()].groupby("service"):
        source = "; ".join(sorted({f"{RUNNING[f]} ({src}), mean per server and interval"
                                   for f, src in zip(mine["family"], mine["source"])}))
        out[str(name)] = (float(mine["running"].astype(float).mean()), source)
    return out
