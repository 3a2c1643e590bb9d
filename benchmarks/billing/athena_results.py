"""Where an Athena query's rows are read from: paged through GetQueryResults, or the result file.

moto on 127.0.0.1 stands in for Athena (tests/servers): the workshop month's aggregate rows
(tests/servers/athena.py ``local_rows``, 9,642 rows), repeated ``--copies`` times with the usage
account made distinct per copy, are seeded as the query's result; a proxy cuts moto's answer into
pages of 1,000 rows with NextToken, as Athena sends them. Each read is the whole
``AthenaConnector.read()`` in a fresh process, ``results = "pages"`` (the baseline: how every
result was read before) against ``results = "auto"`` (more than a page: the result file), the
order swapped every round, the fastest of each kept. Peak RSS is the process's own (VmHWM).

On a real Athena each page is a request over the network (typically 0.1 to 0.5 s): the pages'
figure here has none of that latency, so the ratio is the least the file saves.

    .venv/bin/python benchmarks/billing/athena_results.py [--copies 10] [--rounds 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def child(url: str, mode: str) -> None:
    """One read through the proxy at ``url``; prints wall seconds, rows and VmHWM as JSON."""
    from connectors.base import ReadContext, SourceSpec
    from connectors.registry import resolve
    from tests.servers.athena import MONTH, options

    spec = SourceSpec("athena-cur", "billing", "athena", None, options(url, results=mode))
    source = resolve("athena")(spec, ReadContext(MONTH[0], MONTH[1], "USD"))
    start = time.perf_counter()
    frame = source.read()
    wall = time.perf_counter() - start
    print(json.dumps({"wall": wall, "lines": len(frame.tables["lines"]), "rows": frame.rows,
                      "money": str(sum(frame.tables["lines"].billed_cost)), "hwm_mib": vm_hwm_mib()}))


def vm_hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def copies_of(names: list[str], rows: list[tuple], copies: int) -> list[list]:
    """The rows ``copies`` times, each copy's usage account made its own (no two rows alike)."""
    account = next(i for i, n in enumerate(names) if n.endswith("usage_account_id"))
    out = []
    for k in range(copies):
        for row in rows:
            row = list(row)
            row[account] = f"{row[account]}{k:03d}" if k else row[account]
            out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs=2, metavar=("URL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)

    from tests.servers import moto as moto_server
    from tests.servers.athena import MONTH, OUTPUT, JsonProxyHandler, create_bucket, create_table, local_rows, seed

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_") and "proxy" not in k.lower()},
           "AWS_ACCESS_KEY_ID": moto_server.FAKE_KEY_ID, "AWS_SECRET_ACCESS_KEY": moto_server.FAKE_SECRET,
           "AWS_DEFAULT_REGION": "us-east-1", "COSTAUDIT_CACHE": tempfile.mkdtemp(prefix="costaudit-athena-bench-")}
    os.environ.update(env)
    names, rows = local_rows(MONTH)
    rows = copies_of(names, [[None if v is None else str(v) for v in r] for r in rows], args.copies)
    best: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as folder, moto_server.start(Path(folder)) as moto:
        create_table(moto)
        create_bucket(moto, OUTPUT)
        proxies = moto_server.serve_proxy(moto.port, JsonProxyHandler, results={})
        proxy = next(proxies)
        for round_ in range(args.rounds):
            for mode in (("pages", "auto") if round_ % 2 == 0 else ("auto", "pages")):
                seed(moto, names, rows)
                done = subprocess.run([sys.executable, __file__, "--child", proxy.url, mode], env=env,
                                      capture_output=True, text=True, check=True, cwd=ROOT)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                if mode not in best or result["wall"] < best[mode]["wall"]:
                    best[mode] = result
        next(proxies, None)
    pages, auto = best["pages"], best["auto"]
    assert (pages["lines"], pages["rows"], pages["money"]) == (auto["lines"], auto["rows"], auto["money"])
    print(f"Athena result of {len(rows):,} rows ({pages['rows']:,} CUR lines summed, {pages['lines']:,} lines), "
          f"best of {args.rounds}:")
    print(f"  pages (baseline, {-(-(len(rows) + 1) // 1000)} GetQueryResults requests): "
          f"{pages['wall']:.2f} s, peak RSS {pages['hwm_mib']:,.0f} MiB")
    print(f"  result file (1 request, 1 GET):                {auto['wall']:.2f} s, peak RSS {auto['hwm_mib']:,.0f} MiB")
    print(f"  ratio pages / file: {pages['wall'] / auto['wall']:.2f}x time, "
          f"{pages['hwm_mib'] / auto['hwm_mib']:.2f}x peak RSS (same lines and money: checked)")


if __name__ == "__main__":
    main()
