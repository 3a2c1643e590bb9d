"""Benchmark: the OpenMetrics file reader, samples per second and peak RSS, against a baseline.

    .venv/bin/python benchmarks/telemetry/openmetrics_file.py [--gpus 32] [--days 0.5 1.5]
        [--baseline-ref REF] [--same-as REF] [--repeat N] [--gzip] [--no-step] [--json]

Generates OpenMetrics text with ``build.py``'s cluster (dcgm-exporter, kube-state-metrics and vLLM
series with a Prometheus scrape's labels, counters that reset) for ``--gpus`` GPUs at a 30 s
scrape, one file per ``--days`` value, then reads each file with ``OpenMetricsConnector.read()``
(the whole connector: parse and every table, at the audit step of 1 h, or with ``--no-step`` at
the step the samples' spacing gives, a case without one; and, apart, the parse
alone: the text into the families) in a fresh child process,
which reports its own wall time and its own high-water mark (``VmHWM`` of /proc/self/status, not
a parent's ``ru_maxrss``). The baseline is the same reader at ``--baseline-ref`` (a git revision,
extracted with ``git archive`` into a temporary folder; the working tree is not touched), run on
the same files in the same run; the ratio is printed. Before its clock starts, each child sets up
the connector's pandera schemas (a one-off cost of a second or more, the first schema importing
pandera's dask typing, whatever the file size; printed apart). The current reader's tables must
equal, exactly (values, dtypes, row order), those of the reader at ``--same-as`` (the revision
before the tables were built from coded label columns), run on the same files; the baseline's
must have the same sizes.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.telemetry.build import GPUS_PER_NODE, SCRAPE, START, gpu_series, node_series, pod_series  # noqa: E402,I001

#: the reader before streaming (one regex per line, per-sample label columns)
BASELINE_REF = "9c53031"
#: the reader before the tables were built from coded label columns: every table must be equal
SAME_AS_REF = "cf826d1"

CHILD = r"""
import json, sys, time
from datetime import datetime, timedelta, timezone
sys.path.insert(0, sys.argv[1])
from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.openmetrics import OpenMetricsConnector
from pathlib import Path
start = datetime.fromtimestamp(int(sys.argv[3]), timezone.utc)
step = None if sys.argv[6] == "none" else int(sys.argv[6])  # none: the case sets no step
ctx = ReadContext(start, start + timedelta(days=float(sys.argv[4])), "USD", step)
reader = OpenMetricsConnector(SourceSpec("bench", "telemetry", "openmetrics", Path(sys.argv[2])), ctx)
began = time.perf_counter()
for schema in getattr(OpenMetricsConnector, "schemas", {}).values():
    schema.to_schema()  # pandera's one-off set-up (it imports its dask typing), not per sample
setup = time.perf_counter() - began
began = time.perf_counter()
if sys.argv[5] == "parse":  # the text into the families only
    try:
        from connectors.telemetry.om_stream import read_families
    except ImportError:
        from connectors.telemetry.omtext import read_families
    samples, rows = read_families(Path(sys.argv[2]))[1].rows, {}
else:
    frame = reader.read()
    samples, rows = frame.rows, {k: int(len(v)) for k, v in frame.tables.items()}
seconds = time.perf_counter() - began
if len(sys.argv) > 7:  # the tables, for the exact comparison
    import pickle
    with open(sys.argv[7], "wb") as out:
        pickle.dump(dict(frame.tables), out)
status = open("/proc/self/status").read().split("\n")
hwm = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "setup_s": setup, "hwm_kib": hwm, "samples": samples,
                  "rows": rows}))
"""


class Writer:
    """One OpenMetrics file (``build.py``'s series, fewer GPUs and days)."""

    def __init__(self, path: Path, days: float):
        self.times = START + SCRAPE * np.arange(int(days * 86400) // SCRAPE)
        self.handle = open(path, "w", encoding="utf-8")
        self.handle.write("# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.\n"
                          "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n")
        self.samples = 0

    def series(self, name: str, labels: dict[str, str], values: np.ndarray, fmt: str) -> None:
        """All samples of one series."""
        head = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "} "
        self.handle.writelines(f"{head}{v:{fmt}} {t}\n"
                               for v, t in zip(values.tolist(), self.times.tolist()))
        self.samples += len(self.times)

    def close(self) -> None:
        """End the file with # EOF."""
        self.handle.write("# EOF\n")
        self.handle.close()


def write_file(path: Path, gpus: int, days: float) -> int:
    """The cluster's series for ``gpus`` GPUs over ``days``; the number of samples."""
    rng = np.random.default_rng(20260601)
    out = Writer(path, days)
    for index in range((gpus + GPUS_PER_NODE - 1) // GPUS_PER_NODE):
        node = f"ip-10-0-{index}-10.ec2.internal"
        node_series(out, node, index)
        for gpu in range(GPUS_PER_NODE):
            number = index * GPUS_PER_NODE + gpu
            namespace, service = ("llm", "chat") if number % 4 else ("embed", "embed")
            pod = f"{service}-7c9d5f8b6d-{number:05d}"
            busy = gpu_series(out, rng, node, gpu, pod, namespace)
            pod_series(out, rng, node, pod, namespace, busy)
    out.close()
    return out.samples


def measure(code_root: Path, path: Path, days: float, what: str, tables: Path | None = None,
            repeat: int = 1, step: int | None = 3600) -> dict:
    """One read (``what``: "read", the whole connector, or "parse", the text into the families)
    in a fresh child process: its wall time and its own peak RSS (``tables``: where it pickles
    its tables); with ``repeat``, the fastest of that many children (the machine is shared)."""
    runs = [_measure_once(code_root, path, days, what, tables, step) for _ in range(max(1, repeat))]
    return min(runs, key=lambda r: r["seconds"])


def measure_in_turn(trees: dict[str, Path], path: Path, days: float, what: str,
                    tables: Path | None, repeat: int, step: int | None = 3600) -> dict[str, dict]:
    """``measure`` for several readers (name -> code root), one child each per round, in turn, so
    that the machine's load falls alike on all; the fastest of each (``tables``: the current's)."""
    runs: dict[str, list] = {who: [] for who in trees}
    for _ in range(max(1, repeat)):
        for who, root in trees.items():
            runs[who].append(_measure_once(root, path, days, what,
                                           tables if who == "current" else None, step))
    return {who: min(found, key=lambda r: r["seconds"]) for who, found in runs.items()}


def _measure_once(code_root: Path, path: Path, days: float, what: str, tables: Path | None,
                  step: int | None = 3600) -> dict:
    """One child process (``step``: the case's audit step; None: the case sets none)."""
    extra = [str(tables)] if tables is not None else []
    done = subprocess.run([sys.executable, "-c", CHILD, str(code_root), str(path), str(START),
                           str(days), what, "none" if step is None else str(step), *extra],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"reader at {code_root} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def baseline_tree(ref: str, into: Path) -> Path:
    """The repository at ``ref`` (connectors and schemas), extracted without touching the checkout."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "connectors", "schemas"],
                             capture_output=True, check=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def assert_same_tables(got: Path, expected: Path, ref: str) -> None:
    """Every table of the current reader equals the reference reader's: values, dtypes, order."""
    import pandas as pd
    with open(got, "rb") as a, open(expected, "rb") as b:
        mine, theirs = pickle.load(a), pickle.load(b)
    if mine.keys() != theirs.keys():
        raise SystemExit(f"tables differ from {ref}: {sorted(mine)} vs {sorted(theirs)}")
    for name, table in theirs.items():
        try:
            pd.testing.assert_frame_equal(mine[name], table, check_exact=True)
        except AssertionError as exc:
            raise SystemExit(f"table {name} differs from {ref}'s:\n{exc}") from None


def main() -> None:
    """Generate the files, read each with the baseline and the current reader, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=32)
    parser.add_argument("--days", type=float, nargs="+", default=[0.5, 1.5])
    parser.add_argument("--baseline-ref", nargs="*", default=[BASELINE_REF],
                        help="git revisions of the readers to compare with (none: no baseline)")
    parser.add_argument("--same-as", default=SAME_AS_REF,
                        help="git revision whose tables the current reader's must equal ('' for none)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="children per reader and stage; the fastest is reported")
    parser.add_argument("--gzip", action="store_true", help="read gzipped files")
    parser.add_argument("--no-step", action="store_true",
                        help="the case sets no step (the reader takes the samples' median spacing)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="costaudit-ombench-"))
    try:
        trees = {"current": ROOT, **{ref: baseline_tree(ref, scratch / f"base-{ref}")
                                     for ref in args.baseline_ref if ref}}
        same = baseline_tree(args.same_as, scratch / "same") if args.same_as else None
        results = []
        step = None if args.no_step else 3600
        for days in args.days:
            path = scratch / f"bench-{days:g}d.om"
            samples = write_file(path, args.gpus, days)
            if args.gzip:
                gz = path.with_suffix(".om.gz")
                with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
                    shutil.copyfileobj(src, dst)
                path.unlink()
                path = gz
            for what in ("parse", "read"):
                mine = scratch / "current.pkl" if what == "read" and same is not None else None
                row = {"days": days, "what": what, "samples": samples,
                       "bytes": os.path.getsize(path),
                       **measure_in_turn(trees, path, days, what, mine, args.repeat, step)}
                if mine is not None:
                    theirs = scratch / "same.pkl"
                    measure(same, path, days, what, theirs, step=step)
                    assert_same_tables(mine, theirs, args.same_as)
                    row["same_as"] = args.same_as
                for ref in trees:
                    if row[ref]["rows"] != row["current"]["rows"]:
                        raise SystemExit(f"table sizes differ: {ref} {row[ref]['rows']} vs "
                                         f"{row['current']['rows']}")
                results.append(row)
            path.unlink()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(report(results, args))
    if args.json:
        print(json.dumps(results, indent=2))


def report(results: list[dict], args) -> str:
    """The printed table: per file, samples/s and peak RSS of each reader, and the ratios."""
    step = "no audit step in the case" if args.no_step else "audit step 3600 s"
    lines = [f"OpenMetrics file reader: {args.gpus} GPUs at a {SCRAPE} s scrape, {step}"
             f"{', gzipped' if args.gzip else ''}; baselines "
             f"{', '.join(r for r in args.baseline_ref if r) or 'none'} (ratio: baseline / current)",
             f"{'file':>8}{'stage':>7}{'samples':>12}{'MB':>6}{'reader':>10}{'wall s':>8}{'samples/s':>12}"
             f"{'µs/sample':>11}{'peak MiB':>10}"]
    for row in results:
        refs = [ref for ref in args.baseline_ref if ref]
        for who in refs + ["current"]:
            r = row[who]
            lines.append(f"{row['days']:>6g} d{row['what']:>7}{row['samples']:>12,}"
                         f"{row['bytes'] / 1e6:>6.0f}"
                         f"{who:>10}{r['seconds']:>8.2f}{row['samples'] / r['seconds']:>12,.0f}"
                         f"{r['seconds'] / row['samples'] * 1e6:>11.3f}{r['hwm_kib'] / 1024:>10.0f}")
        for ref in refs:
            b, c = row[ref], row["current"]
            lines.append(f"{'':>8}{'':>7}{'':>12}{'':>6}{ref[:9]:>10}"
                         f"{b['seconds'] / c['seconds']:>8.1f}{'':>12}{'':>11}"
                         f"{b['hwm_kib'] / c['hwm_kib']:>10.1f}")
    setups = [r[who]["setup_s"] for r in results for who in ["current", *args.baseline_ref]
              if who in r]
    if setups:
        lines.append(f"schema set-up before the clock (one-off, each child): "
                     f"{min(setups):.2f}-{max(setups):.2f} s")
    same = sorted({r["same_as"] for r in results if "same_as" in r})
    if same:
        lines.append(f"every table of the current reader equals {same[0]}'s exactly")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
