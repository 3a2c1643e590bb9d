"""Rank-set benchmark of `costaudit run`: the demo case with a generated 16-rank set as its chat
profile, run in this process, with ``--workers 2`` and on a 2-worker Dask LocalCluster, side by side.

    .venv/bin/python benchmarks/trace/run_fanout.py [--ranks 16] [--kernels 10000] [--skip-dask]

The set is fanout.py's (rankset.py, in $COSTAUDIT_BENCH_DIR, default /tmp/costaudit-bench); the case
is the demo's with its profile's path that folder, written beside it. Each mode is one
``costaudit run CASE --format json`` in a fresh process (benchmarks/fleet/run.py's harness): its
wall time, the run process's own peak RSS (VmHWM), the largest RSS of its process tree as polled
every 50 ms (the spawned workers included; a LocalCluster's workers are the benchmark's children,
so their own VmHWM is asked of them after the run), and the SHA-256 of audit.json (every mode must
write the single process's bytes). Ratios are against the single-process run of the same run.
Results also go to benchmarks/trace/last_run_fanout.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.fleet.run import run_costaudit  # noqa: E402
from benchmarks.trace.fanout import BENCH, rank_set  # noqa: E402

DEMO_TRACE = "profiles/h100_qwen1.5-0.5b-chat.prefill_decode.derived.json.gz"
CAP = 16 * 2 ** 30


def demo_case(ranks: int, kernels: int) -> Path:
    """The demo case whose chat profile is the generated set (written when missing)."""
    paths = rank_set(ranks, kernels)
    case = BENCH / f"run-case-{ranks}-{kernels}"
    if not (case / "case.toml").exists():
        shutil.rmtree(case, ignore_errors=True)
        shutil.copytree(ROOT / "fixtures" / "demo", case)
        (case / DEMO_TRACE).unlink()
        text = (case / "case.toml").read_text().replace(f'path = "{DEMO_TRACE}"', f'path = "{paths[0].parent}"')
        (case / "case.toml").write_text(text)
    return case


def one(mode: str, case: Path) -> dict:
    """Run one mode; its figures."""
    out = BENCH / f"run-out-{mode}"
    shutil.rmtree(out, ignore_errors=True)
    cluster, flags = None, ()
    if mode == "workers-2":
        flags = ("--workers", "2")
    elif mode == "dask-2":
        from distributed import LocalCluster
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None)
        flags = ("--scheduler", cluster.scheduler_address)
    report = run_costaudit(case, out, CAP, "json", flags=flags)
    workers_kib = []
    if cluster is not None:
        from distributed import Client

        from connectors.profiles.workers import peak_rss_kib
        with Client(cluster.scheduler_address) as client:
            workers_kib = list(client.run(peak_rss_kib).values())
        cluster.close()
    digest = hashlib.sha256((out / "audit.json").read_bytes()).hexdigest() if (out / "audit.json").exists() else None
    return {"mode": mode, "wall_s": report["wall_s"], "own_hwm_mib": report["own_hwm"] / 2 ** 20,
            "tree_peak_mib": report["polled_rss"] / 2 ** 20, "dask_worker_peak_mib": max(workers_kib, default=0) / 1024,
            "exit": report["exit"], "failed": report.get("failed"), "sha256": digest}


def main(argv: list[str]) -> int:
    """Every mode in turn, then the table with its ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--kernels", type=int, default=10000)
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--save", type=Path, default=HERE / "last_run_fanout.json", help="where the results go")
    args = parser.parse_args(argv)
    case = demo_case(args.ranks, args.kernels)
    rows = [one(mode, case) for mode in ("single", "workers-2") + (() if args.skip_dask else ("dask-2",))]
    base = rows[0]
    size = sum(p.stat().st_size for p in rank_set(args.ranks, args.kernels)) / 2 ** 20
    print(f"costaudit run, demo case, {args.ranks} ranks ({size:.1f} MiB of trace JSON), {os.cpu_count()} CPUs")
    print(f"{'mode':<10} {'wall s':>7} {'run VmHWM MiB':>14} {'tree peak MiB':>14} {'Dask worker MiB':>16} "
          f"{'vs single: wall, run VmHWM':>28}  same audit.json")
    for r in rows:
        r["wall_ratio"] = r["wall_s"] / base["wall_s"]
        r["own_hwm_ratio"] = r["own_hwm_mib"] / base["own_hwm_mib"] if base["own_hwm_mib"] else None
        r["same_bytes"] = r["sha256"] == base["sha256"] and r["sha256"] is not None
        print(f"{r['mode']:<10} {r['wall_s']:7.2f} {r['own_hwm_mib']:14.0f} {r['tree_peak_mib']:14.0f} "
              f"{r['dask_worker_peak_mib']:16.0f} {r['wall_ratio']:13.2f}x, {r['own_hwm_ratio'] or 0:.2f}x"
              f"  {r['same_bytes']}{' ' + r['failed'] if r['failed'] else ''}")
    args.save.write_text(json.dumps({"ranks": args.ranks, "kernels": args.kernels,
                                                           "cpus": os.cpu_count(), "rows": rows}, indent=1) + "\n")
    return 0 if all(r["same_bytes"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
