"""`costaudit trace TRACE… [--json] [--price-per-gpu-hour X] [--folded F] [--workers N] [--scheduler ADDRESS]`:
what the GPU did, and what it wasted.

Several files are read as the ranks of one job (Kineto Chrome traces, .json / .json.gz, or Nsight
Systems SQLite exports). Printed per rank: each device's window, busy and idle time, kernel-active
time, serving gap ratio, coarse and fine categories, its busiest streams; the same figures under
HTA's rules; the top call paths by GPU time; then the findings, priced when a price is given.
``--json`` prints the same as one JSON document (format 1), built by :func:`audit.trace.analyse.analyse`.
``--workers N`` (or ``auto``) analyses the ranks in N worker processes, ``--scheduler`` on a Dask
cluster (:mod:`audit.trace.fanout`): the same output, a worker holding one rank at a time.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import List, Optional

import typer

from audit.cli.common import exit_code_of, reports_errors
from schemas.errors import CostauditError, UsageError

TOP_STREAMS = 5
NO_GPU_ON_RANK = ("no GPU kernel, memcpy or memset events: this rank's GPU time is unmeasured "
                  "(its trace was recorded without the CUDA activity)")


@reports_errors
def trace(traces: List[Path] = typer.Argument(..., help="Kineto .json/.json.gz or Nsight .sqlite; several = ranks"),
          as_json: bool = typer.Option(False, "--json", help="print JSON"),
          price: Optional[str] = typer.Option(None, "--price-per-gpu-hour", help="price one GPU-hour to cost findings"),
          folded: Optional[Path] = typer.Option(None, "--folded",
                                                help="write folded stacks (flamegraph.pl / speedscope)"),
          idle_folded: Optional[Path] = typer.Option(None, "--idle-folded",
                                                     help="write the idle flame graph's folded stacks"),
          workers: str = typer.Option("1", "--workers",
                                      help="analyse the ranks in N worker processes (auto: one per rank, at most the CPUs)"),
          scheduler: Optional[str] = typer.Option(None, "--scheduler",
                                                  help="analyse the ranks on the Dask cluster at tcp://host:port")) -> None:
    """Where the GPU time went, which call paths spent it, and what was wasted."""
    try:
        value = Decimal(price) if price is not None else None
    except InvalidOperation:
        raise UsageError(f"--price-per-gpu-hour {price!r} is not a number") from None
    if value is not None and (not value.is_finite() or value < 0 or value.adjusted() >= 9):
        raise UsageError(f"--price-per-gpu-hour {price!r}: expected a finite price ≥ 0 and below 10^9 a GPU-hour")
    value = None if value is None else value + 0   # -0 is 0
    outputs_checked(traces, {"--folded": folded, "--idle-folded": idle_folded})
    if scheduler is not None and workers.strip() != "1":
        raise UsageError("--workers and --scheduler exclude each other (a Dask cluster has its own workers)")
    count = 1
    if scheduler is None:
        from audit.trace.fanout import worker_count
        count = worker_count(workers, len(traces))
    raise typer.Exit(trace_command(traces, as_json, value, folded=folded, idle_folded=idle_folded,
                                   workers=count, scheduler=scheduler))


def trace_command(paths: list[Path], as_json: bool, price: Decimal | None, folded: Path | None = None,
                  idle_folded: Path | None = None, workers: int = 1, scheduler: str | None = None) -> int:
    """Analyse the traces at ``paths`` and print a summary (or JSON); 0 on success, else the exit
    code of the error (1 for bad input), printed as one line on stderr.

    ``folded``, when given, receives the folded stacks (``frame;frame;kernel <µs>`` per line) of
    every rank, for flamegraph.pl or speedscope; ``idle_folded`` those of the idle
    (``frame;…;[idle: class] <µs>``: each GPU idle gap under the host call path that caused it).
    ``workers`` > 1 analyses the ranks in that many worker processes, ``scheduler`` (a Dask
    scheduler's address) on its cluster; 1 and None: in this process.
    """
    from audit.trace.analyse import analyse_with_idle

    try:
        if scheduler is not None or workers > 1:
            from audit.trace.fanout import analyse_fanout
            document, stacks, idle_stacks, _ = analyse_fanout(paths, price, workers, scheduler)
        else:
            document, stacks, idle_stacks = analyse_with_idle(paths, price)
    except CostauditError as exc:
        print(f"costaudit: error: {exc}", file=sys.stderr)
        return exit_code_of(exc)
    if not any(rank["devices"] for rank in document["ranks"]):
        from connectors.profiles.kineto import EXPECTED_CUDA, NO_GPU_EVENTS
        excluded = [line.strip() for rank in document["ranks"] for line in _excluded_lines(rank.get("excluded_events") or {})]
        print(f"costaudit: error: {', '.join(str(p) for p in paths)}: {NO_GPU_EVENTS} in any rank"
              f"{'; ' + '; '.join(excluded) if excluded else ''} (expected {EXPECTED_CUDA}, or nsys --trace=cuda)",
              file=sys.stderr)
        return 1
    for target, lines in ((folded, stacks), (idle_folded, idle_stacks)):
        if target is not None:
            problem = write_whole(Path(target), lines)
            if problem:
                print(f"costaudit: error: {problem}", file=sys.stderr)
                return 1
    for warning in document["warnings"]:
        print(f"costaudit: warning: {warning}", file=sys.stderr)
    print(json.dumps(document, indent=1, sort_keys=True) if as_json else render(document))
    return 0


def outputs_checked(traces: list[Path], outputs: dict[str, Path | None]) -> None:
    """Each trace given once; each output a file of its own that can be written: never one of the
    traces (it would be overwritten), nor a folder, a device or a FIFO, nor under a missing folder."""
    from connectors.bounds import resolved

    seen: dict[Path, Path] = {}
    for path in traces:
        key = resolved(path)
        if key in seen:
            raise UsageError(f"{path} is given twice (as {seen[key]}): each rank's trace once")
        seen[key] = path
    named = {name: Path(path) for name, path in outputs.items() if path is not None}
    if len(named) == 2 and len({resolved(p) for p in named.values()}) == 1:
        raise UsageError("--folded and --idle-folded name the same file")
    for name, path in named.items():
        if resolved(path) in seen:
            raise UsageError(f"{name} {path} is one of the traces: it would be overwritten")
        if path.exists() and not path.is_file():
            raise UsageError(f"{name} {path} is not a regular file (a folder, a device or a FIFO)")
        if not path.parent.is_dir():
            raise UsageError(f"{name} {path}: no folder {path.parent}")


def write_whole(path: Path, lines: list[str]) -> str | None:
    """Write the lines into a temporary file beside ``path`` and rename it into place (a failed
    write leaves no partial file); the problem in words, else None."""
    try:
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.writelines(line + "\n" for line in lines)
            os.replace(temp, path)
        finally:
            Path(temp).unlink(missing_ok=True)
    except OSError as exc:
        return f"{path}: could not be written ({exc.strerror or exc})"
    return None


def _ms(us: float) -> str:
    """Microseconds as milliseconds text."""
    return f"{us / 1000:,.3f} ms"


def render(document: dict) -> str:
    """The readable summary of a trace document."""
    from connectors.profiles.events import overlap_text

    lines = []
    hta = {r["rank"]: r for r in document["hta_compatible"]}
    for rank in document["ranks"]:
        lines.append(f"rank {rank['rank']}  {rank['file']}  ({rank['source']})")
        lines += _excluded_lines(rank.get("excluded_events") or {})
        lines += [f"  {overlap_text(o)}" for o in rank.get("overlapping_events") or ()]
        for device in rank["devices"]:
            lines += _device_lines(device)
        if not rank["devices"]:
            lines.append(f"  {NO_GPU_ON_RANK}")
        h = hta.get(rank["rank"])
        if h and h["window_us"] > 0:
            lines.append(f"  HTA rules: window {_ms(h['window_us'])}, busy {_ms(h['busy_us'])}, "
                         f"idle {_ms(h['idle_us'])} ({100 * h['idle_us'] / h['window_us']:.2f} %)")
        lines.append("")
    for entry in document["call_paths"]:
        lines.append(f"top call paths by GPU time, rank {entry['rank']}")
        for r in entry["top"]:
            lines.append(f"  {_ms(r['gpu_us']):>14}  {100 * float(r['share_of_gpu_work']):5.1f} %  "
                         f"{r['call_path']}  →  {r['top_kernel'][:80]}")
        lines.append("")
    for entry in document.get("idle_paths") or []:
        lines += _idle_lines(entry)
    lines += _finding_lines(document["findings"], document["price_per_gpu_hour"])
    return "\n".join(lines)


def _idle_lines(entry: dict) -> list[str]:
    """One rank's GPU idle by class and its top idle call paths."""
    classes = "  ".join(f"{k.replace('_', ' ')} {_ms(v)}" for k, v in entry["by_category_us"].items() if v > 0)
    out = [f"GPU idle by host call path, rank {entry['rank']}: {classes}"]
    out += [f"  {_ms(r['idle_us']):>14}  {100 * float(r['share'] or 0):5.1f} %  {r['category']:<12}  {r['callpath']}"
            for r in entry["top"]]
    return out + [""]


EXCLUDED_TEXT = {"negative_dur": "with a negative duration", "missing_dur": "with no duration",
                 "negative_ts": "with a timestamp before 0",
                 "bad_device": "on a device or stream that is not an integer", "no_name": "with no name"}


def _excluded_lines(excluded: dict) -> list[str]:
    """The events a trace left out of every time figure, by kind (nothing when none was)."""
    parts = [f"{count} {EXCLUDED_TEXT.get(kind, kind)}" for kind, count in excluded.items() if count]
    return [f"  excluded events (not counted as work): {', '.join(parts)}"] if parts else []


def _device_lines(device: dict) -> list[str]:
    """Window, busy, idle, categories and busiest streams of one device."""
    window = device["window_us"]
    idle_pct = 100 * device["idle_us"] / window if window else 0.0
    gap = device.get("gap_ratio")
    out = [f"  device {device['device']} {device['name']}".rstrip(),
           f"    window {_ms(window)}  busy {_ms(device['busy_us'])}  idle {_ms(device['idle_us'])} "
           f"({idle_pct:.2f} %)  kernel-active {_ms(device['kernel_active_us'])}  "
           f"gap ratio {gap if gap is not None else 'n/a'}",
           "    " + "  ".join(f"{name} {_ms(us)}" for name, us in device["coarse_us"].items()),
           "    " + "  ".join(f"{name} {_ms(us)}" for name, us in list(device["categories_us"].items())[:8])]
    streams = sorted(device["streams"], key=lambda s: -s["busy_us"])[:TOP_STREAMS]
    out += [f"    stream {s['stream']:>4}: busy {_ms(s['busy_us'])} of {_ms(s['window_us'])}, "
            f"{s['events']} events" for s in streams]
    return out


def _finding_lines(findings: list[dict], price: str | None) -> list[str]:
    """One block per finding."""
    if not findings:
        return ["findings: none"]
    out = [f"findings ({len(findings)})" + ("" if price else "; give --price-per-gpu-hour to price them")]
    for f in findings:
        cost = (f"  cost {f['cost']} per GPU-hour ({f['profile_cost']} in this profile)"
                if f["cost"] is not None else "")
        out += [f"  [{f['id']}] {f['title']}: {f['gpu_ms']} ms, {100 * float(f['share'] or 0):.2f} % of GPU time, "
                f"{f['bucket']}.{f['part']}{cost}",
                f"      kernel: {f['kernel'][:100]}",
                f"      call path: {f['call_path']}",
                f"      fix: {f['fix']}"]
    return out
