"""Trace-set benchmark: a generated 16-rank set analysed in one process, in 1 and 2 worker
processes, and on a 2-worker Dask LocalCluster, side by side in one run.

    .venv/bin/python benchmarks/trace/fanout.py [--ranks 16] [--kernels 10000] [--skip-dask]

The set is written by rankset.py into $COSTAUDIT_BENCH_DIR/ranks-R-K (default /tmp/costaudit-bench)
when missing. Each mode runs in a fresh process (``--one MODE``). Per mode: wall time (the
analysis only: a LocalCluster's start is left out), peak memory (the single process's ru_maxrss;
a worker's VmHWM, the largest of the workers'), ranks/s and MB/s of trace JSON per worker, and
the SHA-256 of the JSON document and folded stacks (every mode must print the single process's).
Ratios are against the single-process run of the same run. Results also go to
benchmarks/trace/last_fanout.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BENCH = Path(os.environ.get("COSTAUDIT_BENCH_DIR", "/tmp/costaudit-bench"))
MODES = ("single", "workers-1", "workers-2", "dask-2")


def rank_set(ranks: int, kernels: int) -> list[Path]:
    """The generated set, written when missing."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.trace.rankset import write_rank_set

    folder = BENCH / f"ranks-{ranks}-{kernels}"
    paths = [folder / f"rank_{r:02d}.json" for r in range(ranks)]
    if not all(p.exists() for p in paths):
        print(f"writing {folder} …", flush=True)
        paths = write_rank_set(folder, ranks, kernels)
    return paths


def one(mode: str, paths: list[Path]) -> dict:
    """Run one mode in this process; its figures."""
    sys.path.insert(0, str(ROOT))
    from audit.trace.analyse import analyse_with_idle
    from audit.trace.fanout import analyse_fanout

    cluster = None
    workers = 1 if mode == "single" else int(mode.split("-")[1])
    if mode.startswith("dask"):
        from distributed import LocalCluster
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None)
    began = time.perf_counter()
    if mode == "single":
        document, stacks, idle = analyse_with_idle(paths, None)
        peaks = [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]
    else:
        document, stacks, idle, seen = analyse_fanout(paths, None, workers,
                                                      cluster.scheduler_address if cluster else None)
        peaks = [s["vmhwm_kib"] for s in seen]
    wall = time.perf_counter() - began
    if cluster is not None:
        cluster.close()
    digest = hashlib.sha256(json.dumps(document, indent=1, sort_keys=True).encode())
    digest.update("\n".join(stacks + ["--"] + idle).encode())
    size = sum(p.stat().st_size for p in paths)
    return {"mode": mode, "workers": workers, "ranks": len(paths), "mib": size / 2 ** 20, "wall_s": wall,
            "peak_mib": max(peaks) / 1024, "ranks_per_s_per_worker": len(paths) / wall / workers,
            "mib_per_s_per_worker": size / 2 ** 20 / wall / workers, "sha256": digest.hexdigest()}


def main(argv: list[str]) -> int:
    """Run every mode in its own process and print the table with its ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--kernels", type=int, default=10000)
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--one", choices=MODES)
    args = parser.parse_args(argv)
    paths = rank_set(args.ranks, args.kernels)
    if args.one:
        print(json.dumps(one(args.one, paths)), flush=True)
        return 0
    rows = []
    for mode in MODES[:-1] if args.skip_dask else MODES:
        out = subprocess.run([sys.executable, __file__, "--one", mode, "--ranks", str(args.ranks),
                              "--kernels", str(args.kernels)], capture_output=True, text=True, cwd=ROOT)
        lines = [line for line in out.stdout.splitlines() if line.startswith('{"mode"')]
        if out.returncode != 0 or not lines:
            print(f"{mode}: failed (exit {out.returncode}): {out.stderr.strip().splitlines()[-1:]}", flush=True)
            continue
        rows.append(json.loads(lines[-1]))
        print(lines[-1], flush=True)
    base = next((r for r in rows if r["mode"] == "single"), None)
    print(f"\n{args.ranks} ranks, {rows[0]['mib']:.1f} MiB of JSON, {os.cpu_count()} CPUs")
    print(f"{'mode':<10} {'wall s':>7} {'peak MiB':>9} {'ranks/s/worker':>15} {'MiB/s/worker':>13}  "
          f"{'vs single: throughput/worker, total, peak memory':<50} same bytes")
    for r in rows:
        if base:
            r["throughput_per_worker_ratio"] = r["ranks_per_s_per_worker"] / base["ranks_per_s_per_worker"]
            r["throughput_ratio"] = base["wall_s"] / r["wall_s"]
            r["peak_ratio"] = r["peak_mib"] / base["peak_mib"]
            r["same_bytes"] = r["sha256"] == base["sha256"]
        ratios = (f"{r['throughput_per_worker_ratio']:.2f}x, {r['throughput_ratio']:.2f}x, {r['peak_ratio']:.2f}x"
                  if base else "-")
        print(f"{r['mode']:<10} {r['wall_s']:7.2f} {r['peak_mib']:9.0f} {r['ranks_per_s_per_worker']:15.2f} "
              f"{r['mib_per_s_per_worker']:13.1f}  {ratios:<50} {r.get('same_bytes', '-')}")
    (HERE / "last_fanout.json").write_text(json.dumps({"ranks": args.ranks, "kernels": args.kernels,
                                                       "cpus": os.cpu_count(), "rows": rows}, indent=1) + "\n")
    return 0 if all(r.get("same_bytes", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
