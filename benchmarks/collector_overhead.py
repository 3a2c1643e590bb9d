"""Throughput cost of the collector's sampling, outside the profiler window (target ≤ 2 %).

Interleaved repeats (order rotated) of one workload (the demo MLP, closed loop, one in flight):
- bare: a plain loop of pre → model → post;
- driven: the same requests driven by the collector (scheduled/sent/done stamps, per-request
  pre/post timing), sampling off;
- sampled: driven, with the NVML + host sampler thread on (the progress bar off).
The sampling cost of a repeat is 1 − sampled/driven throughput (the ≤ 2 % target); the harness
cost 1 − driven/bare is reported beside it. Means with 95 % confidence intervals (Student t over
the repeats). Run from the repository root:

    python -m benchmarks.collector_overhead [--repeats 21] [--requests 2000] [--batch 8]
                                            [--interval 0.1] [--device cuda:0]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time

from collector import demo
from collector.drive import drive
from collector.inprocess import CallableTarget, sender
from collector.nvml import Sampler
from collector.profile import batches
from collector.traffic import Arrival, plan

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
       10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
       18: 2.101, 19: 2.093, 20: 2.086, 24: 2.064, 29: 2.045, 39: 2.023}


def t95(df: int) -> float:
    """Two-sided 95 % Student t quantile (table; 1.96 beyond it)."""
    keys = [k for k in sorted(T95) if k <= df]
    return T95[keys[-1]] if df <= 39 and keys else 1.96


def bare(items, device) -> float:
    """Inferences per second of the plain loop."""
    torch = _torch() if device else None
    start = time.perf_counter()
    for batch in items:
        x = demo.pre(batch)
        if torch is not None:
            x = x.to(device)
        y = demo.mlp(x)
        if torch is not None:
            y = y.to("cpu")
        demo.post(y)
    return sum(len(b) for b in items) / (time.perf_counter() - start)


def collected(items, device, interval: float | None) -> float:
    """Inferences per second of the same requests driven by the collector (sampler on unless None)."""
    send = sender(CallableTarget(demo.mlp, demo.pre, demo.post, device))
    requests = plan(Arrival("closed", requests=len(items)), items, len(items[0]))
    sampler = Sampler(interval).start() if interval else None
    start = time.perf_counter()
    drive(requests, send, 1)
    wall = time.perf_counter() - start
    if sampler:
        sampler.stop()
    assert all(r.ok for r in requests), [r.error for r in requests if not r.ok][:3]
    return sum(r.batch_size for r in requests) / wall


def interval_of(values: list[float]) -> dict:
    """Mean, median and 95 % confidence interval (percent) of per-repeat costs."""
    mean = statistics.fmean(values)
    half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return {"mean_pct": 100 * mean, "median_pct": 100 * statistics.median(values),
            "ci95_pct": [100 * (mean - half), 100 * (mean + half)]}


def _torch():
    import torch
    return torch


def main(argv=None) -> dict:
    """Run the interleaved pairs and print the cost with its 95 % interval."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (steadier timing)")
    args = ap.parse_args(argv)
    _torch().set_num_threads(args.threads)
    items = batches(["warm"] + [f"x{i}" for i in range(31)], args.requests, args.batch)
    bare(items[:20], args.device), collected(items[:20], args.device, args.interval)   # warm up
    arms = {"bare": lambda: bare(items, args.device),
            "driven": lambda: collected(items, args.device, None),
            "sampled": lambda: collected(items, args.device, args.interval)}
    names, runs = list(arms), []
    for i in range(args.repeats):
        order = names[i % 3:] + names[:i % 3]
        runs.append({name: arms[name]() for name in order})
    sampling = interval_of([1 - r["sampled"] / r["driven"] for r in runs])
    harness = interval_of([1 - r["driven"] / r["bare"] for r in runs])
    nvml = Sampler(args.interval).summary()["nvml"]
    report = {"repeats": args.repeats, "requests": args.requests, "batch": args.batch,
              "interval_s": args.interval, "device": args.device or "cpu",
              "nvml": "measured" if nvml["measured"] else nvml["reason"],
              "median_inf_per_s": {n: statistics.median(r[n] for r in runs) for n in names},
              "sampling_cost": sampling, "harness_cost": harness, "target_pct": 2.0,
              "sampling_within_target": sampling["ci95_pct"][1] <= 2.0}
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
