"""Benchmark: costaudit's Prometheus pull against pulling the raw samples, in the same run.

    .venv/bin/python benchmarks/telemetry/run.py [--step 3600] [--json]

Starts Prometheus (Debian 2.42) on the cached TSDB that build.py makes (7 days × 128 GPUs at a
30 s scrape; built on first use, a few minutes), then measures, through the same HTTP client
(gzip accepted, as Prometheus offers):

- costaudit: ``PrometheusConnector.read()`` over the 7 days at the audit step (1 h by default),
  every query included (metric names, the range probe, presence, aggregates);
- raw: ``query_range`` of every series the connector reads, at the 30 s scrape step with no
  aggregation, over the first day, scaled ×7 (bytes and time are linear in the span).

It prints bytes on the wire, bytes of JSON after decompression, requests and wall time of each,
and the ratios raw / costaudit. Targets: at least 50× fewer bytes; the pull within about a minute.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.telemetry.build import DAYS, PARAMETERS, SCRAPE, START, build  # noqa: E402
from connectors.base import ReadContext, SourceSpec  # noqa: E402
from connectors.telemetry.prometheus import PrometheusConnector  # noqa: E402
from connectors.telemetry.promhttp import PromClient  # noqa: E402
from connectors.telemetry.promqueries import GPU_REQUEST, WANTED  # noqa: E402
from connectors.telemetry.promquery import MAX_POINTS, seconds_text  # noqa: E402
from tests.servers.prometheus import PromServer  # noqa: E402

DAY_MS = 86_400_000


def costaudit_pull(url: str, step: int) -> dict:
    """The connector's whole pull over the benchmark week."""
    start = datetime.fromtimestamp(START, timezone.utc)
    end = datetime.fromtimestamp(START + DAYS * 86400, timezone.utc)
    spec = SourceSpec("bench", "telemetry", "prometheus", None, {"url": url})
    reader = PrometheusConnector(spec, ReadContext(start, end, "USD", step))
    began = time.perf_counter()
    frame = reader.read()
    seconds = time.perf_counter() - began
    client = reader.client
    return {"requests": client.requests, "wire_bytes": client.bytes_received,
            "json_bytes": client.bytes_decoded, "seconds": seconds, "values": frame.rows,
            "rows": {name: len(table) for name, table in frame.tables.items()}}


def raw_selectors(client: PromClient) -> list[str]:
    """Every series selector the connector reads, as plain selectors."""
    day_end = START * 1000 + DAY_MS
    names = client.label_values("__name__", '{__name__=~"%s"}' % "|".join(WANTED),
                                seconds_text(START * 1000), seconds_text(day_end))
    selectors = []
    for name in WANTED:
        if name in names:
            requests = GPU_REQUEST.replace(",$M", "")
            selectors.append(requests if name == GPU_REQUEST.split("{")[0] else name)
    return selectors


def raw_pull(url: str) -> dict:
    """Every raw sample of the first day, at the scrape step, through the same client."""
    client = PromClient(url, {})
    selectors = raw_selectors(client)
    counted = client.requests, client.bytes_received, client.bytes_decoded
    began, points = time.perf_counter(), 0
    for selector in selectors:
        result = client.query_range(selector, seconds_text(START * 1000),
                                    seconds_text(START * 1000 + DAY_MS - SCRAPE * 1000), SCRAPE)
        points += sum(len(series["values"]) for series in result)
    seconds = time.perf_counter() - began
    return {"requests": client.requests - counted[0], "wire_bytes": client.bytes_received - counted[1],
            "json_bytes": client.bytes_decoded - counted[2], "seconds": seconds, "values": points}


def scaled(day: dict) -> dict:
    """A one-day measurement scaled to the week (a week at 30 s takes two queries per series set,
    11,000 points being the most one query may return per series)."""
    per_query = math.ceil(DAYS * 86400 // SCRAPE / MAX_POINTS)
    return {k: v * (per_query if k == "requests" else DAYS) for k, v in day.items()}


def report(ours: dict, day: dict, week: dict, step: int, build_info: dict) -> str:
    """The printed table."""
    lines = [f"telemetry benchmark: {build_info['days']} days x {build_info['gpus']} GPUs at a "
             f"{build_info['scrape_seconds']} s scrape, {build_info['samples']:,} samples; "
             f"audit step {step} s",
             f"{'':28}{'requests':>10}{'wire bytes':>16}{'JSON bytes':>16}{'values':>14}{'wall s':>9}"]
    for label, row in ((f"costaudit pull ({DAYS} d)", ours), ("raw samples, 1 day", day),
                       (f"raw samples, x{DAYS} (scaled)", week)):
        lines.append(f"{label:28}{row['requests']:>10,}{row['wire_bytes']:>16,}"
                     f"{row['json_bytes']:>16,}{row['values']:>14,}{row['seconds']:>9.2f}")
    lines.append(f"{'ratio raw / costaudit':28}{week['requests'] / ours['requests']:>10.1f}"
                 f"{week['wire_bytes'] / ours['wire_bytes']:>16.1f}"
                 f"{week['json_bytes'] / ours['json_bytes']:>16.1f}"
                 f"{week['values'] / ours['values']:>14.1f}{week['seconds'] / ours['seconds']:>9.1f}")
    return "\n".join(lines)


def main() -> None:
    """Build or reuse the TSDB, start Prometheus, measure both pulls, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=3600, help="audit step in seconds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    tsdb = build()
    build_info = json.loads((tsdb.parent / "READY.json").read_text())
    with tempfile.TemporaryDirectory(prefix="costaudit-bench-") as scratch:
        server = PromServer(tsdb, Path(scratch))
        server.start()
        try:
            PromClient(server.url, {}).query("count(up)", seconds_text(START * 1000))  # warm-up
            ours = costaudit_pull(server.url, args.step)
            day = raw_pull(server.url)
        finally:
            server.stop()
    week = scaled(day)
    print(report(ours, day, week, args.step, {**PARAMETERS, **build_info}))
    if args.json:
        print(json.dumps({"costaudit": ours, "raw_day": day, "raw_week": week}, indent=2))


if __name__ == "__main__":
    main()
