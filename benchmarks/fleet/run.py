"""Benchmark: the whole ``costaudit run`` at fleet scale, against the raw DuckDB floor, in one run.

    .venv/bin/python benchmarks/fleet/run.py [--lines 1000000 10000000 50000000] [--cap-gib 8]

For each size (CUR 2.0 lines) it builds or reuses the cached data (``data.py``: the export, and the
Prometheus TSDB of the same 1,000 GPUs), then runs, each in a fresh process:

- ``duckdb``: the floor, ``benchmarks/billing/run.py``'s one GROUP BY over the 21 columns
  costaudit's billing stage reads (its own function and child, same DuckDB settings);
- ``keyed``: the keyed floor, the same engine and settings grouped on the keys the audit path must
  keep lines apart by (``run_duckdb_keyed``: every CUR field it reads but the summed amounts and
  the period, the tag MAP, the UTC day): what the engine alone takes for the grouping the audit
  cannot do without;
- ``billing``: ``costaudit run CASE --out DIR`` with the CUR source only;
- ``prometheus``: the same with the TSDB behind a Prometheus server on 127.0.0.1 (the Debian
  package, as the tests start it) and the chat profile.

Wall time is the child's, from start to exit. Peak RSS is the child's own high-water mark (VmHWM
of /proc/<pid>/status, written by the child as it exits), the largest of its process tree's RSS
as polled every 50 ms where that is higher; a child whose tree passes ``--cap-gib`` is stopped and
reported "stopped at cap". The Prometheus server's peak RSS is reported beside, apart. Each line
``costaudit run`` prints on stderr as a step starts is timestamped as it arrives: the stage split
is the time from one to the next (``start`` is interpreter start and imports, up to the first).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.billing import run as billing  # noqa: E402
from benchmarks.fleet.data import Fleet, cur_export, tsdb, write_case  # noqa: E402

POLL = 0.05
# progress lines that are not a step: a spill (audit/cli/spill.py), a source read side by side ending
# with its time (audit/collect.py)
NOTES = ("DuckDB is spilling", "read ")
TOGETHER = 1.0  # sources whose reads start within this many seconds are one step, read side by side
# The child: ``costaudit`` run in-process, its VmHWM written to $FLEET_HWM_FILE as it exits.
LAUNCH = """
import atexit, os, sys
def _hwm():
    with open('/proc/self/status') as status, open(os.environ['FLEET_HWM_FILE'], 'w') as out:
        out.write(next(l for l in status if l.startswith('VmHWM:')).split()[1])
atexit.register(_hwm)
sys.argv = ['costaudit'] + sys.argv[1:]
# This checkout's templates: the editable install maps audit.templates to the checkout it was
# installed from, which a worktree is not.
import importlib.util
_spec = importlib.util.spec_from_file_location('audit.templates', os.path.join(os.getcwd(), 'templates', '__init__.py'),
                                               submodule_search_locations=[os.path.join(os.getcwd(), 'templates')])
sys.modules['audit.templates'] = _module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
from audit.cli import main
main()
"""


def status_kib(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` figure in KiB (0 when the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    todo += [int(c) for c in children.read().split()]
        except OSError:
            pass
    return found


#: kcmp(2)'s system call number (x86-64, arm64) and KCMP_VM: do two processes share one address space?
KCMP = {"x86_64": 312, "aarch64": 272}.get(os.uname().machine)
KCMP_VM = 1


def shares_memory(a: int, b: int) -> bool:
    """Whether ``a`` and ``b`` run in one address space: a child made by vfork (as Python's
    subprocess and ctypes' find_library start ldconfig and gcc) shows its parent's whole RSS until it
    execs, so summing the tree would count that memory twice."""
    if KCMP is None:
        return False
    import ctypes
    return ctypes.CDLL(None, use_errno=True).syscall(KCMP, a, b, KCMP_VM, 0, 0) == 0


def tree_rss(pid: int) -> int:
    """The RSS of ``pid`` and its descendants in bytes, each address space counted once."""
    counted: list[int] = []
    total = 0
    for member in tree(pid):
        if any(shares_memory(member, other) for other in counted):
            continue
        counted.append(member)
        total += status_kib(member, "VmRSS") * 1024
    return total


def run_costaudit(case: Path, out: Path, cap_bytes: int, formats: str | None = None, code: Path = ROOT,
                  flags: tuple[str, ...] = ()) -> dict:
    """``costaudit run case --out out [flags]`` in a fresh process, with the code of source tree ``code``
    (this checkout, or a baseline's tree): wall, peak RSS, stage split, exit code."""
    hwm_file = out.parent / f".{out.name}.hwm"
    env = {**os.environ, "FLEET_HWM_FILE": str(hwm_file)}
    began = time.perf_counter()
    command = ["run", str(case), "--out", str(out)] + (["--format", formats] if formats else []) + list(flags)
    child = subprocess.Popen([sys.executable, "-c", LAUNCH, *command],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=code, env=env)
    steps: list[tuple[float, str]] = []
    notes: list[list] = []
    errors: list[str] = []

    def read_stderr() -> None:
        """Timestamp each progress line as it arrives (a spill notice is a note inside the step)."""
        assert child.stderr is not None
        for line in child.stderr:
            line = line.rstrip("\n")
            words = line.removeprefix("costaudit: ")
            if not line.startswith("costaudit: ") or words.startswith(("warning", "error")):
                errors.append(line)
            elif words.startswith(NOTES):
                notes.append([round(time.perf_counter() - began, 3), steps[-1][1] if steps else "start", words])
            elif steps and words.startswith("reading ") and steps[-1][1].startswith("reading ") \
                    and time.perf_counter() - began - steps[-1][0] < TOGETHER:
                steps[-1] = (steps[-1][0], f"{steps[-1][1]} + {words.removeprefix('reading ')}")
            else:
                steps.append((time.perf_counter() - began, words))

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    stdout = threading.Thread(target=lambda: child.stdout.read(), daemon=True)  # type: ignore[union-attr]
    stdout.start()
    polled, stopped = 0, False
    peaks: dict[int, int] = {}  # the tree's largest polled RSS during each step, by the step's index
    while child.poll() is None:
        rss = tree_rss(child.pid)
        polled, step = max(polled, rss), len(steps)
        peaks[step] = max(peaks.get(step, 0), rss)
        if polled > cap_bytes and not stopped:
            for pid in reversed(tree(child.pid)):
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            stopped = True
        time.sleep(POLL)
    wall = time.perf_counter() - began
    reader.join(5)
    stdout.join(5)
    own = int(hwm_file.read_text()) * 1024 if hwm_file.exists() else 0
    hwm_file.unlink(missing_ok=True)
    report = {"wall_s": wall, "peak_rss": max(own, polled), "own_hwm": own, "polled_rss": polled,
              "exit": child.returncode, "stages": split(steps, wall, peaks), "notes": notes}
    if stopped:
        report["failed"] = f"stopped at cap ({cap_bytes / 2**30:.3g} GiB) after {wall:.0f} s"
    elif child.returncode not in (0, 2):  # 2: ran, does not reconcile
        report["failed"] = (errors or [f"exit {child.returncode}"])[-1][:200]
    return report


def split(steps: list[tuple[float, str]], wall: float, peaks: dict[int, int] | None = None) -> list[list]:
    """[step, seconds, peak RSS] from each progress line to the next (the last to the exit); the peak
    is the largest RSS of the process tree polled during the step (0 when no poll fell in it)."""
    marks = [(0.0, "start")] + steps
    ends = [t for t, _ in marks[1:]] + [wall]
    peaks = peaks or {}
    return [[name, round(end - t, 3), peaks.get(i, 0)] for i, ((t, name), end) in enumerate(zip(marks, ends))]


def floor(export: Path, cap_bytes: int, repeat: int, case: str = "duckdb") -> dict:
    """The billing benchmark's DuckDB GROUP BY ``case`` (``duckdb`` or ``duckdb_keyed``) over the same
    export (best of ``repeat``)."""
    runs = [billing.measure(case, export, cap_bytes) for _ in range(repeat)]
    done = [r for r in runs if "failed" not in r]
    if not done:
        return {"failed": runs[-1]["failed"], "peak_rss": runs[-1]["peak_rss"]}
    best = min(done, key=lambda r: r["seconds"])
    return {"wall_s": best["process_s"], "seconds": best["seconds"],
            "peak_rss": max(r["peak_rss"] for r in done)}


class Server:
    """The Prometheus server over the fleet's TSDB, its RSS polled in a thread."""

    def __init__(self, db: Path, work: Path):
        from tests.servers.prometheus import PromServer
        work.mkdir(parents=True, exist_ok=True)
        self.server = PromServer(db, work, compacting=True)
        self.peak = 0
        self.running = False

    def __enter__(self) -> Server:
        self.server.start(wait=300)
        self.running = True
        threading.Thread(target=self._poll, daemon=True).start()
        return self

    def _poll(self) -> None:
        while self.running and self.server.process is not None:
            self.peak = max(self.peak, status_kib(self.server.process.pid, "VmHWM") * 1024)
            time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        if self.server.process is not None:
            self.peak = max(self.peak, status_kib(self.server.process.pid, "VmHWM") * 1024)
        self.running = False
        self.server.stop()


def bench(fleet: Fleet, lines: int, args, work: Path) -> dict:
    """The floor, the billing-only run and the run with Prometheus on one size."""
    cap = int(args.cap_gib * 2**30)
    export = cur_export(fleet, lines)
    subprocess.run([sys.executable, "-c", "import sys; [open(f, 'rb').read() for f in sys.argv[1:]]",
                    *billing.data_files(export)], check=True)  # the files in the page cache for everyone
    report: dict = {"lines": lines, "floor": floor(export, cap, args.repeat),
                    "keyed_floor": floor(export, cap, args.repeat, "duckdb_keyed")}
    case = write_case(work / f"case-{lines}-billing", fleet, export, None)
    report.update(in_turn("billing", case, work / f"out-{lines}-billing", cap, args))
    if not args.no_prometheus:
        db = tsdb(fleet)
        with Server(db, work / f"prometheus-{lines}") as server:
            case = write_case(work / f"case-{lines}-prometheus", fleet, export, server.server.url)
            report.update(in_turn("prometheus", case, work / f"out-{lines}-prometheus", cap, args))
        for name in ("prometheus", "prometheus@base"):
            if name in report:
                report[name]["server_rss"] = server.peak
        report["tsdb"] = json.loads((db.parent / "READY.json").read_text())
    return report


def in_turn(name: str, case: Path, out: Path, cap: int, args) -> dict:
    """Run ``name`` with this checkout's code and, given ``--baseline-ref``, with the baseline's,
    in turn (the baseline first in odd rounds, second in even ones), ``--rounds`` times each; each
    keeps its fastest run."""
    codes = {name: ROOT} | ({f"{name}@base": args.baseline} if args.baseline else {})
    runs: dict[str, list[dict]] = {key: [] for key in codes}
    for round_ in range(args.rounds if args.baseline else 1):
        order = list(codes.items()) if round_ % 2 else list(reversed(codes.items()))
        for key, code in order:
            shutil.rmtree(out, ignore_errors=True)
            runs[key].append(run_costaudit(case, out, cap, args.format, code))
    return {key: min(found, key=lambda r: ("failed" in r, r["wall_s"])) for key, found in runs.items()}


def baseline_tree(ref: str, into: Path) -> Path:
    """The source tree of git revision ``ref`` (``git archive``; the working tree is not touched)."""
    folder = into / f"baseline-{ref.replace('/', '_')}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


RUNS = ("billing", "billing@base", "prometheus", "prometheus@base")


def table(reports: list[dict]) -> str:
    """Per size: the floor and each run, with the ratios."""
    out = [f"{'lines':>11} {'run':<12} {'wall s':>8} {'peak RSS MiB':>13} {'vs floor':>9} {'vs keyed':>9} "
           f"{'s per M lines':>14}  note"]
    for r in reports:
        base, keyed = r["floor"], r.get("keyed_floor", {})
        rows = [("duckdb floor", base)] + ([("keyed floor", keyed)] if keyed else []) + \
            [(name, r[name]) for name in RUNS if name in r]
        for name, run in rows:
            mib = f"{run['peak_rss'] / 2**20:>13,.0f}"
            if "failed" in run:
                out.append(f"{r['lines']:>11,} {name:<12} {'-':>8} {mib} {'-':>9} {'-':>9} {'-':>14}  {run['failed']}")
                continue
            ratio = f"{run['wall_s'] / base['wall_s']:>8.1f}x" if "wall_s" in base else f"{'-':>9}"
            ratio += f" {run['wall_s'] / keyed['wall_s']:>8.1f}x" if "wall_s" in keyed else f" {'-':>9}"
            note = ""
            if name in ("duckdb floor", "keyed floor"):
                note = f"query alone {run['seconds']:.2f} s"
            elif "server_rss" in run:
                note = f"Prometheus server apart: {run['server_rss'] / 2**20:,.0f} MiB peak RSS"
            if run.get("exit") == 2:
                note = (note + "; " if note else "") + "exit 2 (does not reconcile)"
            base_run = r.get(f"{name}@base")
            if base_run and "failed" not in base_run:
                note = (f"baseline / this: {base_run['wall_s'] / run['wall_s']:.2f}x wall, "
                        f"{base_run['peak_rss'] / run['peak_rss']:.2f}x RSS" + ("; " + note if note else ""))
            out.append(f"{r['lines']:>11,} {name:<12} {run['wall_s']:>8.1f} {mib} {ratio} "
                       f"{run['wall_s'] / (r['lines'] / 1e6):>14.2f}  {note}")
    return "\n".join(out)


def curve(reports: list[dict]) -> str:
    """The scaling curve of each run: wall and RSS per size, the constant per million lines."""
    out = ["scaling curve (wall s / peak RSS MiB; marginal = extra seconds per extra million lines)"]
    for name in ("floor", "keyed_floor") + RUNS:
        points = [(r["lines"], r[name]) for r in reports if name in r and "failed" not in r[name]]
        if not points:
            continue
        cells = "  ".join(f"{n / 1e6:g} M: {p['wall_s']:.1f} s / {p['peak_rss'] / 2**20:,.0f} MiB" for n, p in points)
        marginal = [f"{(b['wall_s'] - a['wall_s']) / ((m - n) / 1e6):.2f}"
                    for (n, a), (m, b) in zip(points, points[1:])]
        stopped = [f"{r['lines'] / 1e6:g} M stopped" for r in reports if name in r and "failed" in r[name]]
        tail = f"; marginal s per M lines: {', '.join(marginal)}" if marginal else ""
        out.append(f"  {name:<11} {cells}{tail}{'; ' + ', '.join(stopped) if stopped else ''}")
    return "\n".join(out)


def stages(reports: list[dict]) -> str:
    """The stage split of every run: seconds per progress step and their share of the wall time."""
    out = []
    for r in reports:
        for name in RUNS:
            run = r.get(name)
            if not run or not run["stages"]:
                continue
            out.append(f"stage split, {r['lines']:,} lines, {name} ({run['wall_s']:.1f} s"
                       f"{', ' + run['failed'] if 'failed' in run else ''}):")
            for step, seconds, *peak in run["stages"]:
                rss = f"{peak[0] / 2**20:>7,.0f} MiB" if peak and peak[0] else f"{'-':>11}"
                out.append(f"  {seconds:>8.2f} s {100 * seconds / run['wall_s']:>5.1f} %  {rss}  {step}")
            for at, step, words in run.get("notes", []):
                out.append(f"  note at {at:.1f} s, in '{step}': {words}")
    return "\n".join(out)


def main() -> None:
    """Parse the arguments, run every size, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 10_000_000, 50_000_000])
    parser.add_argument("--nodes", type=int, default=Fleet.nodes, help="p5.48xlarge nodes (8 GPUs each)")
    parser.add_argument("--hours", type=int, default=Fleet.hours, help="hours of January 2025 covered")
    parser.add_argument("--scrape", type=int, default=Fleet.scrape, help="the TSDB's scrape interval, s")
    parser.add_argument("--cap-gib", type=float, default=8.0, help="stop a run whose RSS passes this")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the floor (best kept)")
    parser.add_argument("--no-prometheus", action="store_true", help="billing-only runs")
    parser.add_argument("--format", help="costaudit run --format (default: every report)")
    parser.add_argument("--keep", type=Path, help="keep the cases and outputs in this folder")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--baseline-ref", help="git revision whose code runs each case too, in turn (run@base)")
    parser.add_argument("--rounds", type=int, default=1, help="with --baseline-ref: runs of each code, alternating")
    args = parser.parse_args()
    fleet = Fleet(args.nodes, args.hours, args.scrape)
    work = args.keep or Path(tempfile.mkdtemp(prefix="costaudit-fleet-"))
    work.mkdir(parents=True, exist_ok=True)
    args.baseline = baseline_tree(args.baseline_ref, work) if args.baseline_ref else None
    try:
        reports = []
        for lines in args.lines:
            reports.append(bench(fleet, lines, args, work))
            print(f"done: {lines:,} lines", file=sys.stderr, flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"fleet benchmark: {fleet.gpus:,} GPUs ({fleet.nodes} p5.48xlarge) x {fleet.hours} h, CUR 2.0 Parquet, "
          f"Prometheus TSDB at a {fleet.scrape} s scrape; {os.cpu_count()} CPUs, cap {args.cap_gib:g} GiB"
          + (f"; baseline {args.baseline_ref} (run@base), {args.rounds} round(s) in turn" if args.baseline else ""))
    print(table(reports))
    print()
    print(curve(reports))
    print()
    print(stages(reports))
    if args.json:
        print(json.dumps(reports, indent=2))


if __name__ == "__main__":
    main()
