"""Benchmark: costaudit's billing stage against a raw DuckDB GROUP BY and pandas, in one run.

    .venv/bin/python benchmarks/billing/run.py [--rows 1000000 10000000] [--repeat 3] [--json]

Generates (once, cached) CUR 2.0-shaped exports of each size (``generate.py``), then times, each
in a fresh Python process whose peak RSS is taken (its own VmHWM; the parent also polls it with
psutil and stops a process that passes ``--cap-gib``):

- ``duckdb``: the floor. One GROUP BY over the same 21 columns costaudit reads (the text columns
  as keys, the amounts summed as DOUBLE, the period's min and max, a count), same DuckDB settings
  (threads, memory limit) as costaudit.
- ``duckdb_keyed``: the keyed floor, the same engine and settings grouped on what ``costaudit run``'s
  audit path must keep lines apart by (every CUR field it reads but the five summed amounts and
  the period, the tag MAP, the UTC day of the start: ``connectors.billing.cur_compact.group_keys``),
  for ``benchmarks/fleet``, which compares the whole run with both floors.
- ``pandas``: what a user would write: ``pd.read_parquet`` of those columns per file, the product
  name taken out of the ``product`` MAP, ``groupby`` on the keys with sums.
- ``costaudit``: ``audit.billing_summary.summarise([folder])``, the stage behind ``costaudit billing``
  (format sniffed, manifests read, views built, one query, exact DECIMAL money, GPU-hours).

Times are of the work itself (imports and interpreter start excluded; the process time is shown
too); the best of ``--repeat`` runs for DuckDB and costaudit, one run for pandas. Targets: at
most 1.3x DuckDB's time, at least 10x faster than pandas, peak RSS at most 1 GiB at 10 M rows.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

EXPORT = "costaudit-bench"
CACHE = Path(os.environ.get("COSTAUDIT_BENCH_CACHE", Path.home() / ".cache" / "costaudit")) / "bench-billing" / "v1"
MEMORY_LIMIT = "512MB"
# The stored columns costaudit's billing stage reads from this export (CUR fields of the FOCUS
# columns the totals need, the split-row test, the unused-commitment amounts, the period).
KEYS = ("line_item_line_item_type", "line_item_product_code", "line_item_line_item_description",
        "pricing_unit", "line_item_currency_code", "line_item_usage_type", "line_item_operation",
        "product_instance_type", "product_sku", "reservation_reservation_a_r_n")
MAP_KEY = ("product", "product_name")
AMOUNTS = ("line_item_unblended_cost", "line_item_usage_amount", "reservation_effective_cost",
           "savings_plan_savings_plan_effective_cost", "savings_plan_total_commitment_to_date",
           "savings_plan_used_commitment", "reservation_unused_amortized_upfront_fee_for_billing_period",
           "reservation_unused_recurring_fee")
PERIOD = ("line_item_usage_start_date", "line_item_usage_end_date")
CASES = ("duckdb", "duckdb_keyed", "pandas", "costaudit")


# --- data ------------------------------------------------------------------------------------

def export_for(rows: int) -> Path:
    """The cached export of ``rows`` rows, generated on first use."""
    folder = CACHE / f"rows-{rows}"
    done = folder / ".complete"
    if not done.exists():  # in its own process, so that this one stays small
        print(f"generating {rows:,} rows under {folder} ...", file=sys.stderr, flush=True)
        began = time.perf_counter()
        subprocess.run([sys.executable, str(Path(__file__).with_name("generate.py")), str(folder), str(rows)],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        done.write_text(f"{time.perf_counter() - began:.1f} s\n")
    return folder / EXPORT


def data_files(export: Path) -> list[str]:
    """The export's Parquet files."""
    return sorted(str(p) for p in (export / "data").rglob("*.parquet"))


# --- the three cases (each runs in its own process) ------------------------------------------

def run_duckdb(export: Path) -> int:
    """The floor: one GROUP BY over the same columns, DOUBLE sums."""
    import duckdb
    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET preserve_insertion_order = false")
    keys = ", ".join(KEYS + (f"map_extract_value({MAP_KEY[0]}, '{MAP_KEY[1]}')",))
    sums = ", ".join(f"sum({c})" for c in AMOUNTS)
    query = (f"SELECT {keys}, {sums}, min({PERIOD[0]}), max({PERIOD[1]}), count(*) "
             f"FROM read_parquet(?, hive_partitioning = false) GROUP BY ALL")
    return len(con.execute(query, [data_files(export)]).fetchall())


def run_duckdb_keyed(export: Path) -> int:
    """The keyed floor: the same engine, settings, DOUBLE sums and period, grouped as costaudit's
    audit path must keep lines apart before it maps them (``connectors.billing.cur_compact``): on
    every CUR field it reads but the five summed amounts and the period (the ``product`` MAP by
    the values it looks up, the tag MAP whole) and the UTC day of the start. No check, text,
    exact sum or window: what the engine alone takes for that grouping."""
    import duckdb

    from connectors.billing import cur_sql
    from connectors.billing.cur import describe
    from connectors.billing.cur_compact import SUMMED_FIELDS, group_keys
    files = data_files(export)
    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET TimeZone = 'UTC'")
    layouts = [cur_sql.shaped(describe(con, Path(f), Path(f).name)) for f in files]
    keyed = {tuple(group_keys(layout)) for layout in layouts}
    if len(keyed) != 1:
        raise SystemExit(f"the export's files have {len(keyed)} layouts; the keyed floor needs one")
    own = layouts[0]
    start, end = (f"CAST({own.sources[name]} AS TIMESTAMPTZ)" for name in cur_sql.PERIOD)
    sums = ", ".join(f"sum(CAST({own.sources[name]} AS DOUBLE))" for name in SUMMED_FIELDS if name in own.sources)
    keys = ", ".join(keyed.pop() + (f"date_trunc('day', {start})",))
    query = (f"SELECT {sums}, min({start}), max({end}), count(*) "
             f"FROM read_parquet(?, hive_partitioning = false) GROUP BY {keys}")
    return len(con.execute(query, [files]).fetchall())


def run_pandas(export: Path) -> int:
    """What a user would write: read_parquet, the product name out of the MAP, groupby."""
    import pandas as pd
    columns = list(KEYS + (MAP_KEY[0],) + AMOUNTS + PERIOD)
    frame = pd.concat([pd.read_parquet(f, columns=columns) for f in data_files(export)], ignore_index=True)
    frame["product_name"] = [None if m is None else dict(m).get(MAP_KEY[1]) for m in frame.pop(MAP_KEY[0])]
    aggregations = {c: "sum" for c in AMOUNTS} | {PERIOD[0]: "min", PERIOD[1]: "max"}
    grouped = frame.groupby(list(KEYS) + ["product_name"], dropna=False).agg(aggregations)
    return len(grouped)


def run_costaudit(export: Path) -> int:
    """costaudit's billing stage on the export folder (``costaudit billing FOLDER``)."""
    from audit.billing_summary import summarise
    summary = summarise([str(export)], None, None)
    return summary["sources"][0]["rows"]


def child(case: str, export: Path) -> None:
    """Run one case and print {seconds, peak_rss, result} as JSON."""
    runner = {"duckdb": run_duckdb, "duckdb_keyed": run_duckdb_keyed, "pandas": run_pandas,
              "costaudit": run_costaudit}[case]
    if case == "costaudit":  # import outside the timing, as for the others' libraries
        import audit.billing_summary  # noqa: F401
        import connectors.billing.totals  # noqa: F401
    elif case == "pandas":
        import pandas  # noqa: F401
    elif case == "duckdb_keyed":
        import connectors.billing.cur  # noqa: F401
    else:
        import duckdb  # noqa: F401
    began = time.perf_counter()
    result = runner(export)
    seconds = time.perf_counter() - began
    print(json.dumps({"seconds": seconds, "peak_rss": peak_rss(), "result": result}))


def peak_rss() -> int:
    """This process's peak RSS in bytes: VmHWM (Linux; ``ru_maxrss`` would also count the
    parent's pages this process was started from), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --- the parent ------------------------------------------------------------------------------

def measure(case: str, export: Path, cap_bytes: int) -> dict:
    """Run ``case`` in a fresh process; poll its RSS and stop it past ``cap_bytes``."""
    try:
        import psutil
    except ImportError:  # the child's own ru_maxrss still gives the peak
        psutil = None
    began = time.perf_counter()
    process = subprocess.Popen([sys.executable, __file__, "--case", case, "--export", str(export)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    polled, killed = 0, False
    watcher = psutil.Process(process.pid) if psutil else None
    while process.poll() is None:
        if watcher is not None:
            try:
                polled = max(polled, watcher.memory_info().rss)
            except psutil.Error:
                pass
            if polled > cap_bytes:
                process.kill()
                killed = True
        time.sleep(0.05)
    out, err = process.communicate()
    wall = time.perf_counter() - began
    if killed:
        return {"case": case, "failed": f"stopped at {polled / 2**30:.1f} GiB RSS (cap {cap_bytes / 2**30:.0f} GiB)",
                "peak_rss": polled, "process_s": wall}
    if process.returncode != 0:
        return {"case": case, "failed": (err.strip().splitlines() or ["exit %d" % process.returncode])[-1],
                "peak_rss": polled, "process_s": wall}
    report = json.loads(out.strip().splitlines()[-1])
    report.update(case=case, process_s=wall)
    return report


def best(runs: list[dict]) -> dict:
    """The fastest successful run (peak RSS: the highest seen), or the failure."""
    done = [r for r in runs if "failed" not in r]
    if not done:
        return runs[-1]
    chosen = dict(min(done, key=lambda r: r["seconds"]))
    chosen["peak_rss"] = max(r["peak_rss"] for r in done)
    chosen["runs"] = [round(r["seconds"], 3) for r in done]
    return chosen


def bench(rows: int, repeat: int, cap_bytes: int, skip_pandas_above: int | None) -> dict:
    """Every case on the export of ``rows`` rows; DuckDB and costaudit interleaved."""
    export = export_for(rows)
    subprocess.run([sys.executable, "-c", "import sys; [open(f, 'rb').read() for f in sys.argv[1:]]",
                    *data_files(export)], check=True)  # the files in the page cache for everyone
    runs: dict[str, list[dict]] = {"duckdb": [], "duckdb_keyed": [], "costaudit": []}
    for _ in range(repeat):
        for case in runs:
            runs[case].append(measure(case, export, cap_bytes))
    if skip_pandas_above is not None and rows > skip_pandas_above:
        runs["pandas"] = [{"case": "pandas", "failed": "not run (--skip-pandas-above)", "peak_rss": 0}]
    else:
        runs["pandas"] = [measure("pandas", export, cap_bytes)]
    return {"rows": rows, "results": {case: best(runs[case]) for case in CASES}}


def table(reports: list[dict]) -> str:
    """The figures as a text table, with the ratios."""
    lines = [f"{'rows':>11} {'case':<12} {'time s':>9} {'process s':>10} {'peak RSS MiB':>13}   "
             "vs DuckDB   pandas / this"]
    for report in reports:
        results = report["results"]
        floor = results["duckdb"].get("seconds")
        pandas = results["pandas"].get("seconds")
        for case in CASES:
            r = results[case]
            if "failed" in r:
                lines.append(f"{report['rows']:>11,} {case:<12} {'-':>9} {'-':>10} "
                             f"{r['peak_rss'] / 2**20:>13,.0f}   {r['failed']}")
                continue
            versus = f"{r['seconds'] / floor:>8.2f}x" if floor else f"{'-':>9}"
            faster = f"{pandas / r['seconds']:>12.1f}x" if pandas else f"{'-':>13}"
            lines.append(f"{report['rows']:>11,} {case:<12} {r['seconds']:>9.2f} {r['process_s']:>10.2f} "
                         f"{r['peak_rss'] / 2**20:>13,.0f}   {versus}  {faster}")
    return "\n".join(lines)


def main() -> None:
    """Parse arguments; run one case (child) or the whole benchmark (parent)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs of DuckDB and costaudit (best kept)")
    parser.add_argument("--cap-gib", type=float, default=8.0, help="stop a process past this RSS")
    parser.add_argument("--skip-pandas-above", type=int, default=None, help="rows above which pandas is not run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--export", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        child(args.case, args.export)
        return
    reports = [bench(rows, args.repeat, int(args.cap_gib * 2**30), args.skip_pandas_above) for rows in args.rows]
    print(f"billing benchmark: CUR 2.0 Parquet, {os.cpu_count()} CPUs, DuckDB memory_limit {MEMORY_LIMIT}")
    print(table(reports))
    if args.json:
        print(json.dumps(reports, indent=2))


if __name__ == "__main__":
    main()
