"""The GPU split's two walks on a fleet-shaped month, in the same run: the lines walked in Python
(the baseline, ``python``) and placed and summed by the engine query in DuckDB (``duckdb``,
audit/split_sql.py). Prints each walk's time, the ratio duckdb / python, and checks that both give
the same groups (money to 1E-30, time and GPUs exactly) and the same coverage.

    .venv/bin/python benchmarks/split/run.py                      # 125 nodes x 8 GPUs, 744 h
    .venv/bin/python benchmarks/split/run.py --nodes 25 --hours 168 --scale-set 4 --repeat 3

The fleet: ``--nodes`` machines of 8 GPUs billed one line per instance-hour (a p5.48xlarge), each
line's net a 50-digit amount (a credit spread over the month divides), telemetry one sample per GPU
and hour, six GPUs of eight held by a pod of the declared service. ``--scale-set K`` bills the
first K nodes as one scale set, one row per VM-hour that does not name its VM (the rows take the
set's nodes in turn).
"""
from __future__ import annotations

import argparse
import decimal
import json
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from audit.case import Case, Service  # noqa: E402
from audit.gpusplit import GpuLines, GpuSplitter  # noqa: E402
from audit.money import CONTEXT  # noqa: E402
from audit.normalised import REQUEST_COLUMNS, empty_table  # noqa: E402
from audit.split_sql import run_duckdb  # noqa: E402

H0 = pd.Timestamp("2026-09-01T00:00:00Z")
P5 = "$98.32 per On Demand Linux p5.48xlarge Instance Hour"
SET = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachinescalesets/gpu"


def fleet(nodes: int, hours: int, scale_set: int) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(lines, activity, known nodes per resource) of the generated month."""
    credit = Decimal(-1000) / Decimal(7 * nodes * hours)  # a spread credit: 50 digits per line
    starts = pd.date_range(H0, periods=hours, freq="h")
    rows = []
    for n in range(nodes):
        in_set = n < scale_set
        for h, start in enumerate(starts):
            net = Decimal("98.32") + credit * (1 + (n + h) % 3)
            rows.append({"line_id": f"cur:{n}:{h}", "resource_id": SET if in_set else f"i-{n:05d}",
                         "instance_type": "p5.48xlarge", "start": start, "end": start + timedelta(hours=1),
                         "pricing_quantity": Decimal(1), "consumed_quantity": Decimal(1), "gpus_per_instance": 8,
                         "charge_description": P5, "net": net, "pretax": Decimal("98.32"), "priced": Decimal("98.32")})
    lines = pd.DataFrame(rows)
    for column in ("start", "end"):
        lines[column] = lines[column].astype("datetime64[ns, UTC]")
    gpus = np.arange(8)
    node_ids = np.repeat(np.arange(nodes), hours * 8)
    hour_ids = np.tile(np.repeat(np.arange(hours), 8), nodes)
    gpu_ids = np.tile(gpus, nodes * hours)
    held = gpu_ids < 6
    acts = pd.DataFrame({
        "node": [f"node-{n:05d}" for n in node_ids], "gpu": gpu_ids.astype(str), "uuid": "", "model_name": "H100",
        "pod": np.where(held, "chat-0", ""), "namespace": np.where(held, "llm", ""), "container": "",
        "ts": (H0 + pd.to_timedelta(hour_ids, unit="h")).astype("datetime64[ns, UTC]"), "step_seconds": 3600,
        "busy_fraction": (0.1 + (gpu_ids % 5) * 0.15), "source": "DCGM_FI_PROF_GR_ENGINE_ACTIVE"})
    known = {f"i-{n:05d}": (f"node-{n:05d}",) for n in range(scale_set, nodes)}
    if scale_set:
        known[SET] = tuple(f"node-{n:05d}" for n in range(scale_set))
    return lines, acts, known


def case_of(hours: int) -> Case:
    start = H0.to_pydatetime()
    return Case(path=Path("/nonexistent/case.toml"), name="split-bench", start=start,
                end=start + timedelta(hours=hours), currency="USD", cost_basis="effective",
                tolerance=Decimal("0.02"), step_seconds=3600, target_utilisation=Decimal("0.8"),
                loaded_rate=Decimal("100"), sources=(), services={"chat": Service("chat", {"namespace": "llm"}, 1, 1, 3600)},
                scope={"accounts": [], "services": [], "tags": {}}, rules=(), nodes={}, option_overrides={})


def walk(name: str, case: Case, lines: pd.DataFrame, acts: pd.DataFrame, known: dict) -> tuple[float, GpuSplitter]:
    splitter = GpuSplitter(case, case.services, acts, known, empty_table(REQUEST_COLUMNS), {}, 3600)
    began = time.perf_counter()
    gpu_lines = GpuLines(lines)
    if name == "python":
        splitter.add_lines(gpu_lines)
    else:
        splitter.add_lines_in_engine(gpu_lines, run_duckdb)
    return time.perf_counter() - began, splitter


def same(a: GpuSplitter, b: GpuSplitter) -> bool:
    if list(a.groups) != list(b.groups) or list(a.coverage) != list(b.coverage):
        return False
    money = all(abs(getattr(a.groups[k], f) - getattr(g, f)) < Decimal("1E-30") for k, g in b.groups.items()
                for f in ("paid", "gross", "priced", "busy"))  # the walks' last digits may differ
    time_ = all(a.groups[k].paid_seconds == g.paid_seconds and a.groups[k].gpus == g.gpus for k, g in b.groups.items())
    return money and time_ and all(vars(a.coverage[k]) == vars(c) for k, c in b.coverage.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=125)
    parser.add_argument("--hours", type=int, default=744)
    parser.add_argument("--scale-set", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each walk, in turn; the fastest kept")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    decimal.setcontext(CONTEXT)
    lines, acts, known = fleet(args.nodes, args.hours, args.scale_set)
    case = case_of(args.hours)
    best: dict[str, float] = {}
    results: dict[str, GpuSplitter] = {}
    for _ in range(args.repeat):
        for name in ("python", "duckdb"):
            seconds, results[name] = walk(name, case, lines, acts, known)
            best[name] = min(best.get(name, seconds), seconds)
    agree = same(results["duckdb"], results["python"])
    report = {"lines": len(lines), "gpu_samples": len(acts), "python_s": round(best["python"], 3),
              "duckdb_s": round(best["duckdb"], 3), "duckdb_over_python": round(best["duckdb"] / best["python"], 3),
              "same_split": agree}
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{report['lines']:,} gpu_compute lines, {report['gpu_samples']:,} GPU samples")
        print(f"python walk (baseline) {report['python_s']:.2f} s")
        print(f"duckdb walk            {report['duckdb_s']:.2f} s  ({report['duckdb_over_python']:.2f}x the baseline)")
        print(f"same groups (money to 1E-30) and coverage: {'yes' if agree else 'NO'}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
