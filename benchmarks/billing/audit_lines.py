"""Benchmark: the audit's billing stages on a CUR 2.0 export, lines summed in DuckDB vs kept one by one.

    .venv/bin/python benchmarks/billing/audit_lines.py [--rows 1000000]

The export is the cached one of ``run.py`` (generated on first use). Each case runs in a fresh
Python process: the CUR connector (checks, CUR → FOCUS mapping, window) and the audit stages that
walk every line (classification, commitments / credits / tax spread, bottom-up prices):

- ``line`` (the baseline): source option ``grain = "line"``, one pandas row per invoice line, as
  the audit read billing data before lines were summed in DuckDB;
- ``auto``: the default, lines the audit does not tell apart summed before pandas
  (docs/architecture.md, "focus → table lines").

Printed: wall time, peak RSS (VmHWM), rows that reach pandas, and the ratios line / auto. The money
(net total over the charges) must agree far below the cent (Decimal's 28 significant digits round
sums of different terms differently at ~1e-21): the benchmark checks it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import export_for, peak_rss  # noqa: E402

WINDOW = (datetime(2025, 1, 1, tzinfo=timezone.utc), datetime(2025, 2, 1, tzinfo=timezone.utc))


def child(grain: str, export: Path) -> None:
    """One case: read, classify, spread, price; print a JSON line."""
    from audit import classify as classify_mod
    from audit.adjust import spread
    from audit.prices import priced
    from connectors.base import ReadContext, SourceSpec
    from connectors.billing.cur import CurConnector

    began = time.perf_counter()
    spec = SourceSpec("bench", "billing", "cur", export, {"grain": grain})
    lines = CurConnector(spec, ReadContext(*WINDOW, "USD")).read().tables["lines"]
    classes = classify_mod.classify(lines, (), set(), set())
    spread_charges, _ = spread(classes, "effective")
    charges = priced(spread_charges)
    seconds = time.perf_counter() - began
    net = sum(charges["net"], start=Decimal(0))
    print(json.dumps({"grain": grain, "seconds": seconds, "rss": peak_rss(), "rows": len(lines),
                      "lines": int(lines["line_count"].sum()), "net": str(net)}))


def measure(grain: str, export: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", grain, str(export)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    export = export_for(args.rows)
    line, auto = measure("line", export), measure("auto", export)
    # Decimal works to 28 significant digits: a 7-digit total keeps 21 decimals, and sums of other
    # terms round differently there. Money must agree far below the cent.
    gap = abs(Decimal(line["net"]) - Decimal(auto["net"]))
    assert gap < Decimal("1e-12"), f"money differs: {line['net']} vs {auto['net']}"
    for r in (line, auto):
        print(f"grain={r['grain']:<5} {r['seconds']:8.1f} s  peak RSS {r['rss'] / 2**20:7.0f} MiB  "
              f"{r['rows']:>9,} rows in pandas for {r['lines']:,} invoice lines")
    print(f"auto vs line: {line['seconds'] / auto['seconds']:.1f}x faster, "
          f"{line['rss'] / auto['rss']:.1f}x less memory, {line['rows'] / auto['rows']:.1f}x fewer rows; "
          f"net totals {Decimal(auto['net']):.2f} in both (differ by {gap:.0e}, Decimal's 28th digit)")


if __name__ == "__main__":
    main()
