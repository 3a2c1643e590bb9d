"""Regenerate tests/data/hta_reference.json: Holistic Trace Analysis's own figures for every shared
Chrome trace (run in a scratch environment; the project does not depend on HTA).

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0
    HTA_DISABLE_NS_ROUNDING=1 /tmp/hta-venv/bin/python benchmarks/trace/hta_reference.py

Each file is loaded as a one-rank set (trace_files={rank: path}, the rank from its distributedInfo,
0 without one); the two hta/multirank_sampled files are also loaded together as a two-rank set.
Recorded per set: get_temporal_breakdown() per rank and get_gpu_kernel_breakdown(
include_memory_kernels=True) kernel-type sums (over the set's ranks), both as HTA returns them.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("COSTAUDIT_SHARED", ROOT.parent / "shared")) / "data" / "traces"
OUT = ROOT / "tests" / "data" / "hta_reference.json"
MULTIRANK = ("hta/multirank_sampled/sampled_rank-0.json.gz", "hta/multirank_sampled/sampled_rank-1.json.gz")


def rank_of(path: Path) -> int:
    """distributedInfo.rank of a trace, 0 when it has none (HTA's own default)."""
    import gzip
    head = gzip.open(path, "rt").read(1 << 16) if path.suffix == ".gz" else path.read_text()[: 1 << 16]
    match = re.search(r'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)', head)
    return int(match.group(1)) if match else 0


def analyse(files: dict[int, str]) -> dict:
    """HTA's temporal and kernel-type breakdowns of one rank set."""
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_files=files, trace_dir="/")
    temporal = analysis.get_temporal_breakdown(visualize=False)
    kernel_types, _ = analysis.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
    ranks = {}
    for row in temporal.to_dict("records"):
        ranks[str(int(row["rank"]))] = {
            "idle_us": float(row["idle_time(us)"]), "compute_us": float(row["compute_time(us)"]),
            "non_compute_us": float(row["non_compute_time(us)"]), "window_us": float(row["kernel_time(us)"]),
            "idle_pctg": float(row["idle_time_pctg"]),
        }
    types = {str(r["kernel_type"]): float(r["sum"]) for r in kernel_types.to_dict("records")}
    return {"ranks": ranks, "kernel_types_us": types}


def main() -> int:
    """Run HTA on every shared Chrome trace and write the reference file."""
    import hta
    if os.environ.get("HTA_DISABLE_NS_ROUNDING") != "1":
        print("set HTA_DISABLE_NS_ROUNDING=1 (fractional-microsecond traces)", file=sys.stderr)
        return 2
    sets = {}
    for path in sorted(TRACES.rglob("*.json.gz")):
        relative = str(path.relative_to(TRACES))
        sets[relative] = {"files": [relative], **analyse({rank_of(path): str(path)})}
        print(relative, sets[relative]["ranks"], flush=True)
    files = {rank_of(TRACES / r): str(TRACES / r) for r in MULTIRANK}
    sets["+".join(MULTIRANK)] = {"files": list(MULTIRANK), **analyse(files)}
    document = {
        "produced_by": "benchmarks/trace/hta_reference.py with HolisticTraceAnalysis "
                       f"{getattr(hta, '__version__', '0.5.0')} in a scratch venv, HTA_DISABLE_NS_ROUNDING=1",
        "command": "HTA_DISABLE_NS_ROUNDING=1 /tmp/hta-venv/bin/python benchmarks/trace/hta_reference.py",
        "sets": sets,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
