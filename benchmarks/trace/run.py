"""Trace analyzer benchmark: costaudit against Holistic Trace Analysis, side by side in one run.

    .venv/bin/python benchmarks/trace/run.py [--hta-python /tmp/hta-venv/bin/python]
        [--time-cap 900] [--memory-cap-gib 12] [--skip-hta] [--skip-1gb]

Cases: the largest shared Chrome traces, a synthetic 256 MiB trace (both tools) and a synthetic
1 GiB trace (costaudit alone; target: peak RSS under 1 GiB). Synthetic traces are written by
synth.py into $COSTAUDIT_BENCH_DIR (default /tmp/costaudit-bench) when missing. Each run is a
fresh process (measure.py) under a wall-time cap and a resident-memory cap; a run that hits a cap
or fails is reported as such, which is a result too. HTA is an installed package whose modules pip
byte-compiled at install; ours are byte-compiled once ahead of the runs the same way (compileall
writes the git-ignored __pycache__ folders even under PYTHONDONTWRITEBYTECODE), so that neither
side pays for compiling its sources on every run. Ratios: HTA time / ours (wall and CPU) and
our peak RSS / HTA's. Results also go to benchmarks/trace/last_run.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TRACES = Path(os.environ.get("COSTAUDIT_SHARED", ROOT.parent / "shared")) / "data" / "traces"
BENCH = Path(os.environ.get("COSTAUDIT_BENCH_DIR", "/tmp/costaudit-bench"))
SHARED = ["hta/df_index_resolver_v100_rank1_of2.json.gz", "kineto/resnet50_v100_num_workers_0.pt.trace.json.gz",
          "hta/trace_diff_control_a100_rank3.json.gz", "tracelens/h100_owlv2-large-patch14-ensemble.json.gz"]
SYNTHETIC = {"synthetic_256MiB.json": 256 << 20, "synthetic_1GiB.json": 1 << 30}


def synthetic(name: str) -> Path:
    """The synthetic trace ``name``, written by synth.py when missing."""
    path = BENCH / name
    if not path.exists():
        sys.path.insert(0, str(HERE))
        from synth import synthesise
        print(f"writing {path} …", flush=True)
        synthesise(SYNTHETIC[name], path)
    return path


def _rss_mib(pid: int) -> float:
    """Current resident memory of a process (MiB), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def byte_compile() -> None:
    """Byte-compile the project's modules (git-ignored __pycache__), as an install would."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "connectors", "schemas"], cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL)


def measure(python: str, tool: str, path: Path, time_cap: float, memory_cap_mib: float) -> dict:
    """One capped run of measure.py; its JSON line, or the reason it gave none."""
    env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="1")
    proc = subprocess.Popen([python, str(HERE / "measure.py"), tool, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    state = {"peak": 0.0, "killed": None}

    def watch() -> None:
        start = time.monotonic()
        while proc.poll() is None:
            rss = _rss_mib(proc.pid)
            state["peak"] = max(state["peak"], rss)
            if rss > memory_cap_mib:
                state["killed"] = f"memory cap {memory_cap_mib / 1024:.0f} GiB reached"
                proc.kill()
            elif time.monotonic() - start > time_cap:
                state["killed"] = f"time cap {time_cap:.0f} s reached"
                proc.kill()
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, _ = proc.communicate()
    watcher.join()
    lines = [line for line in out.splitlines() if line.startswith('{"tool"')]
    if state["killed"] or proc.returncode != 0 or not lines:
        return {"tool": tool, "failed": state["killed"] or f"exit status {proc.returncode}",
                "rss_mib": state["peak"]}
    return json.loads(lines[-1])


def json_size(path: Path) -> int:
    """Bytes of JSON in a trace (uncompressed size of a .gz)."""
    if path.suffix != ".gz":
        return path.stat().st_size
    import gzip
    total = 0
    with gzip.open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            total += len(block)
    return total


def row(case: str, size: int, ours: dict, theirs: dict | None) -> dict:
    """One result row with its ratios (``size``: bytes of JSON)."""
    out = {"case": case, "mib": round(size / 2 ** 20, 1), "costaudit": ours, "hta": theirs}
    if theirs and "failed" not in theirs and "failed" not in ours:
        out["speed_wall"] = theirs["wall_s"] / ours["wall_s"]
        out["speed_cpu"] = theirs["cpu_s"] / ours["cpu_s"]
        out["rss_share"] = ours["rss_mib"] / theirs["rss_mib"]
        out["idle_agrees_pp"] = abs(ours["idle_us"] / ours["window_us"] - theirs["idle_us"] / theirs["window_us"]) * 100
    elif theirs and "failed" in theirs and "failed" not in ours:
        out["note"] = f"HTA failed ({theirs['failed']}); ratios are at least cap / ours"
    return out


def _fmt(run: dict | None) -> str:
    """wall / CPU / RSS of one run, or its failure."""
    if run is None:
        return "-"
    if "failed" in run:
        return f"FAILED: {run['failed']} (RSS ≥ {run['rss_mib']:.0f} MiB)"
    return f"{run['wall_s']:7.2f} s wall {run['cpu_s']:7.2f} s CPU {run['rss_mib']:7.0f} MiB"


def report(rows: list[dict]) -> None:
    """Print the side-by-side table and the ratios."""
    print(f"\n{'case':<58} {'JSON MiB':>8}  {'costaudit':<40} {'HTA 0.5.0':<40} ratios")
    for r in rows:
        ratios = ""
        if "speed_wall" in r:
            ratios = (f"{r['speed_wall']:.1f}x faster (wall), {r['speed_cpu']:.1f}x (CPU), "
                      f"RSS {100 * r['rss_share']:.0f} % of HTA's, idle Δ {r['idle_agrees_pp']:.3f} pp")
        elif r.get("note"):
            ratios = r["note"]
        print(f"{r['case']:<58} {r['mib']:>8}  {_fmt(r['costaudit']):<40} {_fmt(r['hta']):<40} {ratios}")


def main(argv: list[str]) -> int:
    """Run every case and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    parser.add_argument("--time-cap", type=float, default=900.0)
    parser.add_argument("--memory-cap-gib", type=float, default=12.0)
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--skip-1gb", action="store_true")
    args = parser.parse_args(argv)
    cap = args.memory_cap_gib * 1024
    cases = [(name, TRACES / name, True) for name in SHARED]
    cases.append(("synthetic_256MiB.json", synthetic("synthetic_256MiB.json"), True))
    if not args.skip_1gb:
        cases.append(("synthetic_1GiB.json", synthetic("synthetic_1GiB.json"), False))
    hta_ok = not args.skip_hta and Path(args.hta_python).exists()
    rows = []
    byte_compile()
    for name, path, compare in cases:
        ours = measure(sys.executable, "costaudit", path, args.time_cap, cap)
        theirs = measure(args.hta_python, "hta", path, args.time_cap, cap) if compare and hta_ok else None
        rows.append(row(name, json_size(path), ours, theirs))
        print(json.dumps(rows[-1]), flush=True)
    report(rows)
    (HERE / "last_run.json").write_text(json.dumps({"time_cap_s": args.time_cap, "memory_cap_gib": args.memory_cap_gib,
                                                    "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
