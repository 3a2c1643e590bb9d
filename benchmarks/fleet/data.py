"""The fleet benchmark's data: a CUR 2.0 export, a Prometheus TSDB of the same GPUs, the case.

    .venv/bin/python benchmarks/fleet/data.py --lines 1000000   # build what is missing; print where

Both are cached under ``$COSTAUDIT_BENCH_CACHE/bench-fleet/v1`` (default ``~/.cache/costaudit``),
never in CI, each made in its own process:

- the CUR export: ``benchmarks/billing/generate.py ROWS --fleet NODES --hours HOURS``: the billing
  benchmark's lines (its accounts, SKUs, line item types) with NODES p5.48xlarge instances billed
  every hour and no other accelerated instance;
- the TSDB: ``benchmarks/telemetry/build.py``'s series (dcgm-exporter, kube-state-metrics, vLLM)
  for the same NODES nodes (``build_fleet``: their ``provider_id`` names the billed instance ids),
  over the same hours, at ``--scrape`` seconds, imported block by block with
  ``promtool tsdb create-blocks-from openmetrics``, then compacted by a Prometheus server as a
  long-running one compacts its blocks (:func:`compact`).

``case.toml`` ties them: the export as a ``cur`` source, the TSDB as a ``prometheus`` source at the
url of the server the harness starts, the chat and embed services by namespace and pod.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

VERSION = "v1"
START = datetime(2025, 1, 1, tzinfo=timezone.utc)  # the billing generator's month
EXPORT = "costaudit-bench"
# The chat service's kernel profile (the demo's TraceLens Qwen1.5-0.5B-Chat H100 trace, as cloudgen uses it).
PROFILE = ROOT / "fixtures" / "demo" / "profiles" / "h100_qwen1.5-0.5b-chat.json.gz"


def cache_root() -> Path:
    """Where the generated data is kept between runs."""
    base = os.environ.get("COSTAUDIT_BENCH_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "costaudit") / "bench-fleet" / VERSION


@dataclass(frozen=True)
class Fleet:
    """The benchmark's GPUs: ``nodes`` p5.48xlarge (8 H100 each) over the first ``hours`` of January 2025."""

    nodes: int = 125
    hours: int = 744
    scrape: int = 60
    families: str = "audit"

    @property
    def gpus(self) -> int:
        """GPUs in the fleet."""
        return self.nodes * 8

    @property
    def end(self) -> datetime:
        """The window's end (exclusive)."""
        return START + timedelta(hours=self.hours)

    def tag(self) -> str:
        """A folder name for this fleet's TSDB."""
        return f"tsdb-n{self.nodes}-h{self.hours}-s{self.scrape}-{self.families}"


def cur_export(fleet: Fleet, lines: int, quiet: bool = False) -> Path:
    """The cached CUR 2.0 export of ``lines`` lines with ``fleet``'s instances, generated on first use."""
    folder = cache_root() / f"cur-{lines}-n{fleet.nodes}-h{fleet.hours}"
    done = folder / ".complete"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        if not quiet:
            print(f"generating {lines:,} CUR lines under {folder} ...", file=sys.stderr, flush=True)
        began = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "billing" / "generate.py"), str(folder),
                        str(lines), "--fleet", str(fleet.nodes), "--hours", str(fleet.hours)],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        done.write_text(f"{time.perf_counter() - began:.1f} s\n")
    return folder / EXPORT


def tsdb(fleet: Fleet, quiet: bool = False) -> Path:
    """The cached TSDB folder of ``fleet``, built and compacted on first use; its READY.json holds
    the build's figures and the compaction's."""
    folder = cache_root() / fleet.tag()
    ready = folder / "READY.json"
    if not ready.exists():
        shutil.rmtree(folder, ignore_errors=True)
        if not quiet:
            print(f"building the TSDB of {fleet.gpus:,} GPUs x {fleet.hours} h at a {fleet.scrape} s scrape "
                  f"under {folder} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, __file__, "--build-tsdb", json.dumps(fleet.__dict__), str(folder)],
                       check=True, cwd=ROOT)
    stats = json.loads(ready.read_text())
    if "compaction" not in stats:
        if not quiet:
            print(f"compacting the TSDB under {folder} ...", file=sys.stderr, flush=True)
        stats["compaction"] = compact(folder / "tsdb", folder)
        ready.write_text(json.dumps(stats, indent=2))
    return folder / "tsdb"


def blocks(db: Path) -> int:
    """Blocks in the TSDB folder ``db``."""
    return sum(1 for p in db.iterdir() if (p / "meta.json").is_file())


def compact(db: Path, folder: Path, timeout: float = 3600.0) -> dict:
    """Let Prometheus compact the TSDB ``db`` as a long-running server would, and return the figures.

    promtool writes one block per 2 hours: a month is 372 blocks, and every query then looks each
    series up in every block. A server holding that month has long since compacted them (into 6 h,
    18 h, 54 h, 162 h and 486 h blocks, Prometheus's default ranges for its retention), and so have
    Thanos and Mimir. The server runs with its own block durations until its second compaction
    cycle has begun (cycles run one at a time, a minute apart: the first has then compacted
    everything it could) and no block is being written."""
    from tests.servers.prometheus import PromServer

    before, started = blocks(db), time.monotonic()
    server = PromServer(db, folder, compacting=True)
    server.start(wait=600)
    try:
        while time.monotonic() - started < timeout:
            figures = server_metrics(server.url)
            if figures.get("prometheus_tsdb_compactions_triggered_total", 0) >= 2 \
                    and figures.get("prometheus_tsdb_compaction_populating_block", 0) == 0:
                break
            time.sleep(2)
        else:
            raise RuntimeError(f"the TSDB under {db} did not finish compacting in {timeout:.0f} s")
    finally:
        server.stop()
    return {"blocks_before": before, "blocks_after": blocks(db),
            "seconds": round(time.monotonic() - started, 1)}


def server_metrics(url: str) -> dict[str, float]:
    """The unlabelled samples of a Prometheus server's own /metrics."""
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=30) as answer:
        text = answer.read().decode()
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            try:
                found[name] = float(value)
            except ValueError:
                pass
    return found


def build_tsdb(fleet: Fleet, folder: Path) -> None:
    """Build the TSDB into ``folder`` / tsdb (in this process) and write READY.json."""
    from benchmarks.telemetry.build import Fleet as Cluster
    from benchmarks.telemetry.build import build_fleet
    cluster = Cluster(nodes=fleet.nodes, start=int(START.timestamp()), seconds=fleet.hours * 3600,
                      scrape=fleet.scrape, families=fleet.families)
    stats = build_fleet(cluster, folder / "tsdb", folder / "scratch")
    shutil.rmtree(folder / "scratch", ignore_errors=True)
    size = sum(p.stat().st_size for p in (folder / "tsdb").rglob("*") if p.is_file())
    (folder / "READY.json").write_text(json.dumps({**stats, "tsdb_bytes": size}, indent=2))


def case_toml(fleet: Fleet, export: Path, url: str | None) -> str:
    """The case: the export, the Prometheus source when ``url`` is given, the services."""
    out = [
        "# benchmarks/fleet: written by the harness for each run (do not edit).",
        "[case]",
        f'name = "fleet-{fleet.gpus}gpu"',
        f'window = ["{START:%Y-%m-%d}", "{fleet.end:%Y-%m-%dT%H:%M:%SZ}"]',
        'currency = "USD"',
        "tolerance = 0.02",
        'step = "1h"',
        "loaded_rate = 150",
        "",
        "[[billing]]",
        'name = "cur"',
        'format = "cur"',
        f'path = "{export}"',
        "",
    ]
    if url:
        out += ["[[telemetry]]", 'name = "prometheus"', 'format = "prometheus"', f'url = "{url}"', "",
                "[[profiles]]", 'name = "chat-profile"', 'format = "kineto"', f'path = "{PROFILE}"',
                'service = "chat"', "requests = 16", "prompt_tokens = 32768", "generated_tokens = 16", ""]
    out += [
        "[services.chat]", 'namespace = "llm"', 'pod = "re:^chat-"', "min_replicas = 4", "",
        "[services.embed]", 'namespace = "embed"', 'pod = "re:^embed-"', "min_replicas = 2", "",
        "[services.app1]", 'tags = {application = "app-1"}', "",
        "[services.team3]", 'tags = {team = "team-3"}', "",
    ]
    return "\n".join(out)


def write_case(folder: Path, fleet: Fleet, export: Path, url: str | None) -> Path:
    """``folder``/case.toml for one run; the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "case.toml").write_text(case_toml(fleet, export, url), encoding="utf-8")
    return folder


def main() -> None:
    """Build the data for the sizes asked (or, internally, one TSDB)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--nodes", type=int, default=Fleet.nodes)
    parser.add_argument("--hours", type=int, default=Fleet.hours)
    parser.add_argument("--scrape", type=int, default=Fleet.scrape)
    parser.add_argument("--families", choices=("audit", "all"), default=Fleet.families)
    parser.add_argument("--no-tsdb", action="store_true", help="the CUR exports only")
    parser.add_argument("--build-tsdb", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_tsdb:
        build_tsdb(Fleet(**json.loads(args.build_tsdb[0])), Path(args.build_tsdb[1]))
        return
    fleet = Fleet(args.nodes, args.hours, args.scrape, args.families)
    for lines in args.lines:
        print(cur_export(fleet, lines))
    if not args.no_tsdb:
        path = tsdb(fleet)
        print(path)
        print((path.parent / "READY.json").read_text())


if __name__ == "__main__":
    main()
