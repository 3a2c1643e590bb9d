"""One measured run: load a trace and compute its busy / idle breakdown, then print JSON.

    measure.py costaudit PATH     (the project's .venv)
    measure.py hta PATH           (a scratch venv with HolisticTraceAnalysis 0.5.0)

Times cover the import of the analysis code, the load and the breakdown, as a user pays them;
CPU time is user + system of this process (all its threads); peak RSS is this process's ru_maxrss.
Both tools import numpy here; connectors/profiles/events.py, when it is the first to import it, does
so with one OpenBLAS thread (docs/trace.md, "Reading a Chrome trace"), HTA with OpenBLAS's default
pool.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path


def costaudit(path: str) -> dict:
    """read_trace + our default breakdown + the HTA-compatible breakdown."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from audit.trace.breakdown import breakdown, hta_breakdown
    from connectors.profiles.events import read_trace

    trace = read_trace(Path(path))
    ours = breakdown([trace])
    hta = hta_breakdown([trace])[0]
    return {"events": int(trace.role.size), "idle_us": hta["idle_us"], "window_us": hta["window_us"],
            "default_busy_us": sum(d["busy_us"] for d in ours[0]["devices"])}


def hta(path: str) -> dict:
    """HTA's TraceAnalysis load + get_temporal_breakdown, as its documentation shows."""
    os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_files={0: path}, trace_dir="/")
    row = analysis.get_temporal_breakdown(visualize=False).iloc[0]
    return {"idle_us": float(row["idle_time(us)"]), "window_us": float(row["kernel_time(us)"])}


def main(argv: list[str]) -> int:
    """Run one tool on one trace and print its figures with wall, CPU and peak RSS."""
    tool, path = argv
    wall, cpu = time.perf_counter(), time.process_time()
    figures = {"costaudit": costaudit, "hta": hta}[tool](path)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"tool": tool, "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                      "rss_mib": usage.ru_maxrss / 1024, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
