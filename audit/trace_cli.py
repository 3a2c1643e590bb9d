"""`costaudit trace TRACE… [--json] [--price-per-gpu-hour X]`: what the GPU did, and what it wasted.

Several files are read as the ranks of one job (Kineto Chrome traces, .json / .json.gz, or Nsight
Systems SQLite exports). Printed per rank: each device's window, busy and idle time, kernel-active
time, serving gap ratio, coarse and fine categories, its busiest streams; the same figures under
HTA's rules; the top call paths by GPU time; then the findings, priced when a price is given.
``--json`` prints the same as one JSON document (format 1).
"""
from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np

TOP_PATHS = 10
TOP_STREAMS = 5


def trace_command(paths: list[Path], as_json: bool, price: Decimal | None, folded: Path | None = None) -> int:
    """Analyse the traces at ``paths`` and print a summary (or JSON); 0 on success, 1 on bad input.

    ``folded``, when given, receives the folded stacks (``frame;frame;kernel <µs>`` per line) of
    every rank, for flamegraph.pl or speedscope.
    """
    from connectors.errors import SourceError

    try:
        document, stacks = analyse(paths, price)
    except SourceError as exc:
        print(f"costaudit: error: {exc}", file=sys.stderr)
        return 1
    if folded is not None:
        Path(folded).write_text("".join(line + "\n" for line in stacks))
    print(json.dumps(document, indent=1, sort_keys=True) if as_json else render(document))
    return 0


def analyse(paths: list[Path], price: Decimal | None) -> tuple[dict, list[str]]:
    """The JSON document of a rank set, and its folded stacks."""
    from audit.findings import load_profile, views_findings
    from audit.profile_view import ProfileView
    from connectors.breakdown import breakdown, hta_breakdown, ranks
    from connectors.callpath import folded_stacks, path_table
    from connectors.trace_events import GPU_WORK

    traces = [load_profile(Path(p)) for p in paths]
    document = {"format": 1, "traces": [str(p) for p in paths], "price_per_gpu_hour": None if price is None else str(price),
                "ranks": _rounded(breakdown(traces)), "hta_compatible": _rounded(hta_breakdown(traces)),
                "call_paths": [], "findings": []}
    stacks: list[str] = []
    for rank, trace in zip(ranks(traces), traces):
        if not np.isin(trace.role, GPU_WORK).any():
            continue
        view = ProfileView(trace, rank)
        table = path_table(trace, view.paths).head(TOP_PATHS)
        document["call_paths"].append({"rank": rank, "file": trace.path.name, "top": [
            {"call_path": r.call_path, "top_kernel": r.top_kernel, "events": int(r.events),
             "gpu_us": round(float(r.gpu_us), 3), "share_of_gpu_work": f"{r.share:.6f}"}
            for r in table.itertuples()]})
        document["findings"] += views_findings(view, price)
        stacks += folded_stacks(trace, view.paths)
    document["findings"].sort(key=lambda f: (-float(f["gpu_ms"]), f["id"], f["trace"], f["call_path"]))
    for device in (d for r in document["ranks"] for d in r["devices"]):
        active = device["kernel_active_us"]
        device["gap_ratio"] = round((device["window_us"] - active) / active, 6) if active > 0 else None
    return document, stacks


def _rounded(value):
    """Floats rounded to 3 decimals (nanoseconds when in microseconds), recursively."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _ms(us: float) -> str:
    """Microseconds as milliseconds text."""
    return f"{us / 1000:,.3f} ms"


def render(document: dict) -> str:
    """The readable summary of a trace document."""
    lines = []
    hta = {r["rank"]: r for r in document["hta_compatible"]}
    for rank in document["ranks"]:
        lines.append(f"rank {rank['rank']}  {rank['file']}  ({rank['source']})")
        for device in rank["devices"]:
            lines += _device_lines(device)
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
    lines += _finding_lines(document["findings"], document["price_per_gpu_hour"])
    return "\n".join(lines)


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
